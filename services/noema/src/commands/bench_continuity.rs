//! `noema bench continuity`: drives a running Noema's continuity service over gRPC with N
//! concurrent clients for a fixed time per phase and prints throughput, latency and CPU per
//! operation as JSON (like `noema bench ledger`). Every write is a real, durable write.
//!
//! Phases: `upsert_distinct` (each upsert a new subject), `upsert_hot` (8 subjects, every
//! writer racing the others; a clean 409 is counted under `conflicts`, not as an operation),
//! `read` (one of 1,000 capsules, with trust signals), `list` (1,000 capsules sorted by
//! salience). The bench works in tenants of its own (`bench-<run>` and `bench-<run>-list`),
//! named with `x-noema-tenant`, so it needs a superuser token (the owner's by default).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::{Args, ValueEnum};
use noema_client::pb::continuity as pb;
use noema_client::{ContinuityClient, Noema};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::bench::{Attempt, measure, peak_rss_mb};
use super::connect::ClientFlags;
use super::{CommandError, say_json};

/// Capsules in the list tenant (the list of 1,000).
const LISTED: u64 = 1000;
/// Subjects every hot-phase writer races on.
const HOT: u64 = 8;

#[derive(Debug, Args)]
pub struct ContinuityBenchArgs {
    /// Concurrent clients per phase.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Phases to run (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "upsert_distinct,upsert_hot,read,list"
    )]
    pub phases: Vec<Phase>,
    /// PID of the server, to report its peak resident memory and CPU time per operation
    /// (Linux).
    #[arg(long)]
    pub server_pid: Option<u32>,
    #[command(flatten)]
    pub client: ClientFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Phase {
    UpsertDistinct,
    UpsertHot,
    Read,
    List,
}

struct Bench {
    writes: ContinuityClient,
    listed: ContinuityClient,
    counter: AtomicU64,
    /// Seconds after the base time: every upsert a newer `updated_at`.
    clock: AtomicU64,
    base: OffsetDateTime,
}

impl Bench {
    fn stamp(&self) -> String {
        let n = self.clock.fetch_add(1, Ordering::Relaxed);
        let at = self.base + time::Duration::seconds(i64::try_from(n).unwrap_or(i64::MAX));
        noema_client::ledger::utc_seconds(at)
    }

    fn upsert(&self, kind: &str, id: &str, n: u64) -> pb::JsonRequest {
        let at = self.stamp();
        let pick = |options: [&'static str; 3]| options[usize::try_from(n % 3).unwrap_or(0)];
        let verification = pick(["self_review", "peer_confirmation", "system_check"]);
        let freshness = pick(["durable", "situational", "ephemeral"]);
        let body = json!({
            "subject_kind": kind, "subject_id": id,
            "capsule": {
                "subject_kind": kind, "subject_id": id, "updated_at": at, "verified_at": at,
                "verification_kind": verification,
                "source": {"producer": "bench", "update_reason": "interaction_boundary"},
                "metadata": {"interaction_boundary_kind": "manual_checkpoint", "n": n},
                "continuity": {
                    "top_priorities": [format!("priority {n}"), "keep the bench honest"],
                    "active_concerns": ["latency"],
                    "active_constraints": ["every write durable"],
                    "open_loops": [format!("loop {}", n % 7)],
                    "stance_summary": "Measure the continuity service under realistic capsules.",
                    "drift_signals": [],
                    "session_trajectory": ["started", "measuring"]
                },
                "confidence": {"continuity": 0.8, "relationship_model": 0.5},
                "freshness": {"freshness_class": freshness}
            }
        });
        pb::JsonRequest {
            body: serde_json::to_vec(&body).unwrap_or_default(),
        }
    }

    async fn one(&self, phase: Phase) -> Result<Attempt, String> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let outcome = match phase {
            Phase::UpsertDistinct => self
                .writes
                .clone()
                .upsert(self.upsert("task", &format!("distinct-{n}"), n))
                .await
                .map(drop),
            Phase::UpsertHot => self
                .writes
                .clone()
                .upsert(self.upsert("thread", &format!("hot-{}", n % HOT), n))
                .await
                .map(drop),
            Phase::Read => {
                let body =
                    json!({"subject_kind": "user", "subject_id": format!("listed-{}", n % LISTED)});
                self.listed
                    .clone()
                    .read(pb::JsonRequest {
                        body: serde_json::to_vec(&body).unwrap_or_default(),
                    })
                    .await
                    .map(drop)
            }
            Phase::List => {
                let body = json!({"sort": "salience", "limit": 200});
                self.listed
                    .clone()
                    .list(pb::JsonRequest {
                        body: serde_json::to_vec(&body).unwrap_or_default(),
                    })
                    .await
                    .map(drop)
            }
        };
        match outcome {
            Ok(()) => Ok(Attempt::Done),
            // A concurrent writer won (stale, same timestamp, lock timeout): clean conflicts.
            Err(status) if status.code() == tonic::Code::AlreadyExists => Ok(Attempt::Conflict),
            Err(status) => Err(format!("{:?}: {}", status.code(), status.message())),
        }
    }
}

fn name(phase: Phase) -> String {
    phase
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

pub async fn bench(args: &ContinuityBenchArgs) -> Result<(), CommandError> {
    let noema: Noema = args.client.connect().await?;
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| CommandError::Usage(e.to_string()))?;
    let run = u64::from_le_bytes(seed);
    let writes = noema
        .in_tenant(&format!("bench-{run:x}"))?
        .continuity()
        .client();
    let listed = noema
        .in_tenant(&format!("bench-{run:x}-list"))?
        .continuity()
        .client();
    let bench = Arc::new(Bench {
        writes,
        listed,
        counter: AtomicU64::new(0),
        clock: AtomicU64::new(0),
        base: OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH),
    });
    // The list tenant's 1,000 capsules (not measured).
    let fill = Arc::clone(&bench);
    let mut fillers = Vec::new();
    for worker in 0..16u64 {
        let fill = Arc::clone(&fill);
        fillers.push(tokio::spawn(async move {
            let mut n = worker;
            while n < LISTED {
                let request = fill.upsert("user", &format!("listed-{n}"), n);
                fill.listed.clone().upsert(request).await?;
                n += 16;
            }
            Ok::<(), tonic::Status>(())
        }));
    }
    for filler in fillers {
        filler
            .await
            .map_err(|e| CommandError::Usage(e.to_string()))??;
    }
    let duration = Duration::from_secs(args.duration);
    let mut results = Vec::new();
    for &phase in &args.phases {
        let bench = Arc::clone(&bench);
        let mut row = measure(args.concurrency, duration, args.server_pid, move || {
            let bench = Arc::clone(&bench);
            async move { bench.one(phase).await }
        })
        .await;
        if let Value::Object(map) = &mut row {
            map.insert("op".into(), Value::from(name(phase)));
            map.insert("transport".into(), Value::from("grpc"));
        }
        results.push(row);
    }
    say_json(&json!({
        "started_at": noema_client::ledger::utc_seconds(OffsetDateTime::now_utc()),
        "concurrency": args.concurrency,
        "seconds_per_phase": args.duration,
        "listed_capsules": LISTED,
        "hot_subjects": HOT,
        "results": results,
        "server_peak_rss_mb": args.server_pid.and_then(peak_rss_mb),
    }));
    Ok(())
}

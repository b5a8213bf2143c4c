//! `noema bench continuity`: drives a running Noema's continuity service over gRPC with N
//! concurrent clients for a fixed time per phase and prints throughput, latency and CPU per
//! operation as JSON (like `noema bench ledger`). Every write is a real, durable write.
//!
//! Phases: `upsert_distinct` (each upsert a new subject), `upsert_hot` (8 subjects, every
//! writer racing the others; a clean 409 is counted under `conflicts`, not as an operation),
//! `read` (one of 1,000 capsules, with trust signals), `list` (1,000 capsules sorted by
//! salience). The bench works in tenants of its own (`bench-<run>` and `bench-<run>-list`),
//! named with `x-noema-tenant`, so it needs a superuser token (the owner's by default).
//!
//! With `--target <base-url>` it drives CogniRelay's REST paths instead (`POST
//! /v1/continuity/upsert|read|list` with `--token`), so one load client measures Noema's
//! gateway and the original CogniRelay alike. There is no tenant to name on REST: every
//! subject carries the run's id instead, and `--listed` sets how many capsules the read
//! and list phases use (the original writes about ten a second).

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

/// Capsules in the list tenant by default (the list of 1,000).
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
    /// REST base URL (e.g. `http://127.0.0.1:8080`, or a CogniRelay): drive CogniRelay's
    /// `/v1/continuity/...` paths there with `--token` instead of gRPC.
    #[arg(long, value_name = "BASE_URL")]
    pub target: Option<String>,
    /// Capsules written before the read and list phases (read picks one of them).
    #[arg(long, default_value_t = LISTED)]
    pub listed: u64,
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

/// How the bench reaches continuity.
enum Transport {
    /// gRPC, in two tenants of the bench's own.
    Grpc {
        writes: Box<ContinuityClient>,
        listed: Box<ContinuityClient>,
    },
    /// CogniRelay's REST paths at `base`, as the token's tenant.
    Rest {
        http: reqwest::Client,
        base: String,
        token: String,
    },
}

#[derive(Debug, Clone, Copy)]
enum Call {
    Upsert,
    Read,
    List,
}

/// A failed call: a clean conflict (HTTP 409 / ALREADY_EXISTS) or anything else.
enum Failed {
    Conflict,
    Error(String),
}

struct Bench {
    transport: Transport,
    /// Prefix of every subject id: the run's, so runs never collide.
    run: String,
    listed: u64,
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

    fn subject(&self, name: &str) -> String {
        format!("{}-{name}", self.run)
    }

    /// Sends `body` to the `call` route or RPC; `listed` picks the list tenant on gRPC.
    async fn send(&self, call: Call, listed: bool, body: &Value) -> Result<(), Failed> {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        match &self.transport {
            Transport::Grpc { writes, listed: l } => {
                let mut client = if listed { l } else { writes }.as_ref().clone();
                let request = pb::JsonRequest { body: bytes };
                let outcome = match call {
                    Call::Upsert => client.upsert(request).await.map(drop),
                    Call::Read => client.read(request).await.map(drop),
                    Call::List => client.list(request).await.map(drop),
                };
                outcome.map_err(|status| {
                    // A concurrent writer won (stale, same timestamp, lock timeout).
                    if status.code() == tonic::Code::AlreadyExists {
                        Failed::Conflict
                    } else {
                        Failed::Error(format!("{:?}: {}", status.code(), status.message()))
                    }
                })
            }
            Transport::Rest { http, base, token } => {
                let path = match call {
                    Call::Upsert => "upsert",
                    Call::Read => "read",
                    Call::List => "list",
                };
                let response = http
                    .post(format!("{base}/v1/continuity/{path}"))
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .body(bytes)
                    .send()
                    .await
                    .map_err(|e| Failed::Error(e.to_string()))?;
                let status = response.status().as_u16();
                // Drain the body so the connection is reused.
                let answer = response.bytes().await.unwrap_or_default();
                match status {
                    200 => Ok(()),
                    409 => Err(Failed::Conflict),
                    other => Err(Failed::Error(format!(
                        "HTTP {other}: {}",
                        String::from_utf8_lossy(&answer)
                    ))),
                }
            }
        }
    }

    fn upsert(&self, kind: &str, id: &str, n: u64) -> Value {
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
        body
    }

    async fn one(&self, phase: Phase) -> Result<Attempt, String> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let outcome = match phase {
            Phase::UpsertDistinct => {
                let body = self.upsert("task", &self.subject(&format!("distinct-{n}")), n);
                self.send(Call::Upsert, false, &body).await
            }
            Phase::UpsertHot => {
                let body = self.upsert("thread", &self.subject(&format!("hot-{}", n % HOT)), n);
                self.send(Call::Upsert, false, &body).await
            }
            Phase::Read => {
                let id = self.subject(&format!("listed-{}", n % self.listed.max(1)));
                let body = json!({"subject_kind": "user", "subject_id": id});
                self.send(Call::Read, true, &body).await
            }
            Phase::List => {
                let body = json!({"sort": "salience", "limit": 200});
                self.send(Call::List, true, &body).await
            }
        };
        match outcome {
            Ok(()) => Ok(Attempt::Done),
            Err(Failed::Conflict) => Ok(Attempt::Conflict),
            Err(Failed::Error(error)) => Err(error),
        }
    }
}

fn name(phase: Phase) -> String {
    phase
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

async fn transport(args: &ContinuityBenchArgs, run: u64) -> Result<Transport, CommandError> {
    if let Some(base) = &args.target {
        let http = noema_tools::tls::client_builder()
            .pool_max_idle_per_host(args.concurrency)
            .build()
            .map_err(|e| CommandError::Usage(e.to_string()))?;
        return Ok(Transport::Rest {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: args.client.token()?,
        });
    }
    let noema: Noema = args.client.connect().await?;
    Ok(Transport::Grpc {
        writes: Box::new(
            noema
                .in_tenant(&format!("bench-{run:x}"))?
                .continuity()
                .client(),
        ),
        listed: Box::new(
            noema
                .in_tenant(&format!("bench-{run:x}-list"))?
                .continuity()
                .client(),
        ),
    })
}

pub async fn bench(args: &ContinuityBenchArgs) -> Result<(), CommandError> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| CommandError::Usage(e.to_string()))?;
    let run = u64::from_le_bytes(seed);
    let bench = Arc::new(Bench {
        transport: transport(args, run).await?,
        run: format!("bench-{run:x}"),
        listed: args.listed,
        counter: AtomicU64::new(0),
        clock: AtomicU64::new(0),
        base: OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH),
    });
    // The capsules the read and list phases use (not measured), when they run.
    let reads = args
        .phases
        .iter()
        .any(|p| matches!(p, Phase::Read | Phase::List));
    let mut fillers = Vec::new();
    for worker in 0..16u64 {
        let fill = Arc::clone(&bench);
        let listed = if reads { args.listed } else { 0 };
        fillers.push(tokio::spawn(async move {
            let mut n = worker;
            while n < listed {
                let body = fill.upsert("user", &fill.subject(&format!("listed-{n}")), n);
                match fill.send(Call::Upsert, true, &body).await {
                    Ok(()) => {}
                    Err(Failed::Conflict) => return Err("a conflict while filling".to_owned()),
                    Err(Failed::Error(error)) => return Err(error),
                }
                n += 16;
            }
            Ok::<(), String>(())
        }));
    }
    for filler in fillers {
        filler
            .await
            .map_err(|e| CommandError::Usage(e.to_string()))?
            .map_err(CommandError::Usage)?;
    }
    let transport = match &bench.transport {
        Transport::Grpc { .. } => "grpc",
        Transport::Rest { .. } => "rest",
    };
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
            map.insert("transport".into(), Value::from(transport));
        }
        results.push(row);
    }
    say_json(&json!({
        "started_at": noema_client::ledger::utc_seconds(OffsetDateTime::now_utc()),
        "concurrency": args.concurrency,
        "client_threads": super::bench::client_threads(),
        "seconds_per_phase": args.duration,
        "target": args.target,
        "listed_capsules": args.listed,
        "hot_subjects": HOT,
        "results": results,
        "server_peak_rss_mb": args.server_pid.and_then(peak_rss_mb),
    }));
    Ok(())
}

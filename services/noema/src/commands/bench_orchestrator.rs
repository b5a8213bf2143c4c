//! `noema bench orchestrator`: complete request lifecycles (plan → risk → execute of a
//! `noema.noop` step → evaluate → reward) from N concurrent clients over gRPC, for a fixed
//! time; then a whole-store replay (every request rebuilt from its events), timed, and
//! with `--get-request` the reads of one request (live and rebuilt from its events), timed.
//! Prints lifecycles per second, p50/p99 per call, and, on Linux, CPU time per lifecycle
//! and per call (the server's with `--server-pid`, and the bench's own). Every write is
//! durable; figures are reported, never asserted.
//!
//! `noema bench orchestrator-fill` writes long histories into a stopped instance's data
//! directory for the replay and read phases (through the API, a million events would take
//! many minutes).

use std::time::{Duration, Instant};

use clap::Args;
use noema_client::Noema;
use noema_client::pb::orchestrator as pb;
use serde_json::{Value, json};
use time::OffsetDateTime;

use noema_orchestrator::{Dependencies, Orchestrator, OrchestratorStore};
use noema_runtime::client::unavailable_channel;
use noema_runtime::config::ConfigLoader;
use noema_store::Database;

use super::bench::{cpu_seconds, peak_rss_mb, percentile};
use super::connect::ClientFlags;
use super::{CommandError, say_json};

#[derive(Debug, Args)]
pub struct OrchestratorBenchArgs {
    /// Concurrent clients, each running lifecycles one after the other.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Seconds of lifecycles.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Skip the whole-store replay (it reads every event the store holds).
    #[arg(long)]
    pub no_replay: bool,
    /// Times the whole-store replay is run (the report has each and their median).
    #[arg(long, default_value_t = 1)]
    pub replays: u32,
    /// A request whose reads to time (`GetRequest`, live and from its events), e.g. the
    /// long request of `noema bench orchestrator-fill`.
    #[arg(long)]
    pub get_request: Option<String>,
    /// Times each read of `--get-request` is made.
    #[arg(long, default_value_t = 5)]
    pub gets: u32,
    /// PID of the server, to report its peak resident memory and CPU time per lifecycle
    /// (Linux).
    #[arg(long)]
    pub server_pid: Option<u32>,
    #[command(flatten)]
    pub client: ClientFlags,
}

/// The calls of a lifecycle, in order.
const CALLS: [&str; 5] = ["plan", "risk", "execute", "evaluate", "reward"];

fn now() -> String {
    noema_core::time::rfc3339_seconds(OffsetDateTime::now_utc())
}

/// One worker's identity: its own actor (reputation rows do not contend across workers)
/// and evaluator.
struct Worker {
    noema: Noema,
    actor: String,
    evaluator: String,
    counter: u64,
}

impl Worker {
    fn plan(&mut self) -> Value {
        self.counter += 1;
        json!({
            "schema_version": "0.1", "id": format!("{}-plan-{}", self.actor, self.counter),
            "ts": now(), "source": self.actor, "goal": "benchmark a lifecycle",
            "steps": [{"step_id": "s1", "action": "nothing", "tool": "noema.noop",
                       "expected_output": "nothing"}],
            "assumptions": [], "rollback_plan": "nothing to undo"
        })
    }

    fn eval(&self) -> Value {
        json!({
            "schema_version": "0.1", "id": format!("{}-eval-{}", self.actor, self.counter),
            "ts": now(), "source": self.evaluator, "suite": "default", "score": 0.9,
            "pass": true, "regression": false, "findings": []
        })
    }

    /// One lifecycle; each call's latency in µs, or the first failure.
    async fn lifecycle(&mut self) -> Result<[u64; 5], String> {
        let mut took = [0u64; 5];
        let mut timed = |i: usize, started: Instant| {
            took[i] = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        };
        let plan = self.plan();
        let started = Instant::now();
        let id = self
            .noema
            .plan(&plan)
            .await
            .map_err(|e| format!("plan: {e}"))?
            .request_id;
        timed(0, started);
        let started = Instant::now();
        self.noema
            .risk(&id)
            .await
            .map_err(|e| format!("risk: {e}"))?;
        timed(1, started);
        let started = Instant::now();
        self.noema
            .execute(&id)
            .await
            .map_err(|e| format!("execute: {e}"))?;
        timed(2, started);
        let eval = self.eval();
        let started = Instant::now();
        self.noema
            .evaluate(&id, &self.evaluator, &eval)
            .await
            .map_err(|e| format!("evaluate: {e}"))?;
        timed(3, started);
        let started = Instant::now();
        self.noema
            .update_reward(&id)
            .await
            .map_err(|e| format!("reward: {e}"))?;
        timed(4, started);
        Ok(took)
    }
}

struct Run {
    latencies: Vec<[u64; 5]>,
    errors: u64,
    first_error: Option<String>,
}

async fn lifecycles(noema: &Noema, args: &OrchestratorBenchArgs, run: u64) -> Value {
    let server_cpu_before = args
        .server_pid
        .and_then(|pid| cpu_seconds(&pid.to_string()));
    let bench_cpu_before = cpu_seconds("self");
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let mut workers = Vec::new();
    for w in 0..args.concurrency {
        let mut worker = Worker {
            noema: noema.clone(),
            actor: format!("bench:agent-{run:x}-{w}"),
            evaluator: format!("bench:evaluator-{run:x}-{w}"),
            counter: 0,
        };
        workers.push(tokio::spawn(async move {
            let mut out = Run {
                latencies: Vec::new(),
                errors: 0,
                first_error: None,
            };
            while Instant::now() < deadline {
                match worker.lifecycle().await {
                    Ok(took) => out.latencies.push(took),
                    Err(e) => {
                        out.errors += 1;
                        out.first_error.get_or_insert(e);
                    }
                }
            }
            out
        }));
    }
    let started = Instant::now();
    let mut all = Run {
        latencies: Vec::new(),
        errors: 0,
        first_error: None,
    };
    for worker in workers {
        if let Ok(run) = worker.await {
            all.latencies.extend(run.latencies);
            all.errors += run.errors;
            if all.first_error.is_none() {
                all.first_error = run.first_error;
            }
        }
    }
    let elapsed = started
        .elapsed()
        .as_secs_f64()
        .max(Duration::from_secs(args.duration).as_secs_f64());
    let done = all.latencies.len();
    #[allow(clippy::cast_precision_loss)]
    let per_lifecycle = |before: Option<f64>, pid: Option<String>| -> Option<f64> {
        let used = cpu_seconds(&pid?)? - before?;
        (done > 0).then(|| (used / done as f64 * 1e6).round())
    };
    let server_cpu = per_lifecycle(server_cpu_before, args.server_pid.map(|p| p.to_string()));
    let per_call = |cpu: Option<f64>| cpu.map(|us| (us / CALLS.len() as f64).round());
    let bench_cpu = per_lifecycle(bench_cpu_before, Some("self".into()));
    let mut calls = serde_json::Map::new();
    for (i, call) in CALLS.iter().enumerate() {
        let mut took: Vec<u64> = all.latencies.iter().map(|l| l[i]).collect();
        took.sort_unstable();
        calls.insert(
            (*call).to_owned(),
            json!({"p50_ms": percentile(&took, 0.50), "p99_ms": percentile(&took, 0.99)}),
        );
    }
    #[allow(clippy::cast_precision_loss)]
    let throughput = done as f64 / elapsed;
    json!({
        "lifecycles": done, "errors": all.errors, "first_error": all.first_error,
        "lifecycles_per_sec": (throughput * 10.0).round() / 10.0,
        "calls": calls,
        "server_cpu_us_per_lifecycle": server_cpu, "bench_cpu_us_per_lifecycle": bench_cpu,
        "server_cpu_us_per_call": per_call(server_cpu), "bench_cpu_us_per_call": per_call(bench_cpu),
    })
}

/// The whole-store replay, timed `times` times.
async fn replay(noema: &Noema, times: u32, server_pid: Option<u32>) -> Result<Value, CommandError> {
    let mut runs = Vec::new();
    let mut seconds = Vec::new();
    for _ in 0..times.max(1) {
        let cpu_before = server_pid.and_then(|pid| cpu_seconds(&pid.to_string()));
        let started = Instant::now();
        let report = noema
            .orchestrator()
            .replay_all(pb::ReplayAllRequest {})
            .await?
            .into_inner();
        let took = started.elapsed().as_secs_f64();
        let cpu = server_pid
            .and_then(|pid| cpu_seconds(&pid.to_string()))
            .zip(cpu_before)
            .map(|(after, before)| ((after - before) * 1000.0).round() / 1000.0);
        #[allow(clippy::cast_precision_loss)]
        let per_sec = report.events as f64 / took;
        seconds.push(took);
        runs.push(json!({
            "ok": report.ok, "requests": report.requests, "events": report.events,
            "mismatched": report.mismatched, "seconds": (took * 1000.0).round() / 1000.0,
            "events_per_sec": per_sec.round(), "server_cpu_seconds": cpu,
        }));
    }
    seconds.sort_by(f64::total_cmp);
    let median = seconds[seconds.len() / 2];
    Ok(json!({"median_seconds": (median * 1000.0).round() / 1000.0, "runs": runs}))
}

/// The reads of one request, each timed `times` times: p50 and max in ms.
async fn get_request(noema: &Noema, id: &str, times: u32) -> Result<Value, CommandError> {
    let mut out = serde_json::Map::new();
    for (name, from_events) in [("live", false), ("from_events", true)] {
        let mut took = Vec::new();
        let mut events = 0;
        for _ in 0..times.max(1) {
            let started = Instant::now();
            let detail = noema
                .orchestrator()
                .get_request(pb::GetRequestRequest {
                    request_id: id.to_owned(),
                    from_events,
                    limit: 0,
                })
                .await?
                .into_inner();
            took.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            events = detail.event_count;
        }
        took.sort_unstable();
        out.insert(
            name.to_owned(),
            json!({"events": events, "p50_ms": percentile(&took, 0.5),
                   "max_ms": percentile(&took, 1.0)}),
        );
    }
    Ok(Value::Object(out))
}

pub async fn bench(args: &OrchestratorBenchArgs) -> Result<(), CommandError> {
    let noema = args.client.connect().await?;
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| CommandError::Usage(e.to_string()))?;
    let run = u64::from_le_bytes(seed);
    let lifecycles = lifecycles(&noema, args, run).await;
    let replay = if args.no_replay {
        Value::Null
    } else {
        replay(&noema, args.replays, args.server_pid).await?
    };
    let get = match &args.get_request {
        Some(id) => get_request(&noema, id, args.gets).await?,
        None => Value::Null,
    };
    say_json(&json!({
        "started_at": now(),
        "concurrency": args.concurrency,
        "client_threads": super::bench::client_threads(),
        "seconds": args.duration,
        "lifecycle": lifecycles,
        "replay_all": replay,
        "get_request": get,
        "server_peak_rss_mb": args.server_pid.and_then(peak_rss_mb),
    }));
    Ok(())
}

#[derive(Debug, Args)]
pub struct OrchestratorFillArgs {
    /// The data directory `noema up --data-dir` will serve (not running).
    #[arg(long)]
    pub data_dir: std::path::PathBuf,
    /// Requests to add, each planned, risked, executed, traced and evaluated.
    #[arg(long, default_value_t = 20_000)]
    pub requests: u64,
    /// Evaluations of each request (each an event; a request has five events before them).
    #[arg(long, default_value_t = 45)]
    pub evaluations: u64,
    /// Events of one more request (0: none), e.g. 100000 to time the read of a request
    /// with a long history.
    #[arg(long, default_value_t = 0)]
    pub long_request_events: u64,
}

/// Requests written at once by a fill.
const FILL_IN_FLIGHT: usize = 256;

/// `noema bench orchestrator-fill`.
pub async fn fill(args: &OrchestratorFillArgs) -> Result<(), CommandError> {
    let registry = crate::registry::builtin().map_err(|e| CommandError::found("registry", e))?;
    let config = ConfigLoader::new(&registry)
        .set("server.data_dir", args.data_dir.display().to_string())
        .load()
        .map_err(|e| CommandError::found("configuration", e))?;
    let spec = registry
        .get("orchestrator")
        .ok_or_else(|| CommandError::found("registry", "no orchestrator service"))?;
    let db = Database::connect(&config.database_url(spec))
        .await
        .map_err(|e| CommandError::found("orchestrator database", e))?;
    db.migrate(spec.migrations)
        .await
        .map_err(|e| CommandError::found("orchestrator migrations", e))?;
    let orchestrator = Orchestrator::new(
        OrchestratorStore::new(db),
        &noema_orchestrator::Options::default(),
        Dependencies {
            identity: unavailable_channel("identity"),
            ledger: unavailable_channel("ledger"),
            data_dir: args.data_dir.clone(),
        },
    )
    .map_err(|e| CommandError::found("orchestrator", e))?;
    let started = Instant::now();
    let filled = orchestrator
        .fill(args.requests, args.evaluations, FILL_IN_FLIGHT)
        .await
        .map_err(|e| CommandError::found("fill", e))?;
    let long = if args.long_request_events > 0 {
        let evaluations = args.long_request_events.saturating_sub(5);
        Some(
            orchestrator
                .fill(1, evaluations, 1)
                .await
                .map_err(|e| CommandError::found("fill", e))?,
        )
    } else {
        None
    };
    let seconds = started.elapsed().as_secs_f64();
    let events = filled.events + long.as_ref().map_or(0, |l| l.events);
    #[allow(clippy::cast_precision_loss)]
    let per_sec = events as f64 / seconds;
    say_json(&json!({
        "requests": filled.requests, "events": events,
        "long_request": long.as_ref().and_then(|l| l.last_request.clone()),
        "long_request_events": long.as_ref().map(|l| l.events),
        "seconds": (seconds * 1000.0).round() / 1000.0, "events_per_sec": per_sec.round(),
    }));
    Ok(())
}

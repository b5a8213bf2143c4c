//! `noema bench ledger`: drives a running Noema over gRPC and REST with N concurrent
//! clients for a fixed time per operation and prints throughput and latency percentiles
//! as JSON. Every write is a real, durable write.
//!
//! On Linux each phase also reports the CPU time spent per operation, by the server (given
//! `--server-pid`) and by the bench itself. On a shared or throttled machine throughput moves
//! with whatever else runs; CPU per operation moves much less, and it shows how much of the
//! machine the load generator takes.
//!
//! REST canonical puts alone (`--ops canonical_put --transports rest`) make no gRPC call, so
//! the same client can measure any server that answers open-cognition's `POST /canonical`.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};
use noema_client::ledger::{canonical_request, signed_reference, utc_seconds};
use noema_client::pb::ledger as pb;
use noema_client::{Noema, SigningKeyPair};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::connect::ClientFlags;
use super::{CommandError, say_json};

/// `noema bench`: the load client's own settings, then what to measure.
#[derive(Debug, Args)]
pub struct Bench {
    /// Worker threads of the load client (default: a quarter of the cores, at least one).
    /// A client with a thread per core competes with a server on the same host for every
    /// core, and its threads' wake-ups cost CPU on both sides. Refused by `world`, which
    /// runs the kernel itself in this process on every core.
    #[arg(long, global = true, value_name = "N")]
    pub client_threads: Option<NonZeroUsize>,
    #[command(subcommand)]
    pub command: BenchCommand,
}

impl Bench {
    /// The runtime's worker threads for this bench: `None` for one that runs a server's
    /// work in this process (the runtime's default, a thread per core).
    pub fn worker_threads(&self) -> Option<usize> {
        self.drives_a_server().then(|| {
            self.client_threads
                .map_or_else(default_client_threads, NonZeroUsize::get)
        })
    }

    /// Whether this bench is a load client of a server (not one that does the work itself).
    fn drives_a_server(&self) -> bool {
        !matches!(
            self.command,
            BenchCommand::World(_) | BenchCommand::Fill(_) | BenchCommand::OrchestratorFill(_)
        )
    }
}

/// The worker threads of the runtime the bench runs on, as its report gives them.
pub fn client_threads() -> usize {
    tokio::runtime::Handle::current().metrics().num_workers()
}

/// A quarter of the cores, at least one: per operation the clients cost about a quarter of
/// what the server does.
fn default_client_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| (cores.get() / 4).max(1))
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Canonical put (1 KiB payloads), signed reference put and canonical get, over gRPC
    /// and REST.
    Ledger(BenchArgs),
    /// Continuity capsules over gRPC: upserts (distinct subjects; 8 hot subjects with
    /// conflicts counted apart), reads with trust signals, lists of 1,000 capsules sorted by
    /// salience.
    Continuity(super::bench_continuity::ContinuityBenchArgs),
    /// CogniRelay's context, search and memory routes over REST: context retrieve (4
    /// selectors, 4,000-token budget), search over 100,000 filled memory entries, appends.
    Context(super::bench_context::ContextBenchArgs),
    /// Messages over CogniRelay's REST paths (send, inbox read) and MCP `tools/call`
    /// overhead over the same REST call.
    Coordination(super::bench_coordination::CoordinationBenchArgs),
    /// The world kernel in this process against the toys: its cost per subject per turn,
    /// and one turn of many subjects run concurrently against a slow LLM.
    World(super::bench_world::WorldBenchArgs),
    /// Complete request lifecycles (plan → risk → execute of `noema.noop` → evaluate →
    /// reward) at N clients, p99 per call, and the whole-store replay.
    Orchestrator(super::bench_orchestrator::OrchestratorBenchArgs),
    /// Fill a stopped instance's data directory with orchestrator requests with long
    /// histories, straight through the orchestrator's store (objects, chained events,
    /// votes, audit entries, as the calls write them), to time replay and reads over a
    /// million events. A development tool.
    #[command(hide = true)]
    OrchestratorFill(super::bench_orchestrator::OrchestratorFillArgs),
    /// Fill a stopped instance's data directory with canonical objects, straight through the
    /// ledger's store layer (pack store and database rows, as a put writes them), to measure
    /// `noema up` over a large data set. A development tool.
    #[command(hide = true)]
    Fill(FillArgs),
}

#[derive(Debug, Args)]
pub struct FillArgs {
    /// The data directory `noema up --data-dir` will serve (not running).
    #[arg(long)]
    pub data_dir: std::path::PathBuf,
    /// Canonical objects to add.
    #[arg(long)]
    pub objects: u64,
    /// Payload size of each object (small JSON documents, padded).
    #[arg(long, default_value_t = 64)]
    pub payload_bytes: usize,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// REST base URL of the gateway.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub rest: String,
    /// Concurrent clients per operation.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Seconds per operation and transport.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Payload size of canonical puts.
    #[arg(long, default_value_t = 1024)]
    pub payload_bytes: usize,
    /// Operations to run (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "canonical_put,reference_put,canonical_get"
    )]
    pub ops: Vec<Operation>,
    /// Transports to use (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "grpc,rest")]
    pub transports: Vec<Transport>,
    /// PID of the server, to report its peak resident memory and CPU time per operation
    /// (Linux).
    #[arg(long)]
    pub server_pid: Option<u32>,
    #[command(flatten)]
    pub client: ClientFlags,
}

/// What a phase does, once per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Operation {
    CanonicalPut,
    ReferencePut,
    CanonicalGet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Transport {
    Grpc,
    Rest,
    /// MCP `tools/call` at `/v1/mcp` with the REST call's body as arguments: against a
    /// `rest` phase of the same operation, the overhead of a tool call.
    Mcp,
}

/// The name a value has on the command line, which is also its name in the JSON report.
fn name(value: &impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// Everything one worker needs.
struct Target {
    /// `None` when the run needs no gRPC (REST canonical puts only), so that any server
    /// answering `POST /canonical` can be measured with the same client.
    noema: Option<Noema>,
    http: reqwest::Client,
    rest: String,
    token: String,
    key: SigningKeyPair,
    agent: String,
    object_id: String,
    payload_bytes: usize,
    counter: AtomicU64,
    /// Random per run, so payloads never collide with an earlier run's.
    run: u64,
}

impl Target {
    fn payload(&self) -> Vec<u8> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut payload = format!("{{\"bench\":{},\"n\":{n},\"pad\":\"", self.run).into_bytes();
        payload.resize(
            self.payload_bytes.saturating_sub(2).max(payload.len()),
            b'x',
        );
        payload.extend_from_slice(b"\"}");
        payload
    }

    async fn one(&self, op: Operation, transport: Transport) -> Result<(), String> {
        let now = OffsetDateTime::now_utc();
        match (op, transport) {
            (Operation::CanonicalPut, Transport::Grpc) => {
                let request = canonical_request(
                    self.payload(),
                    "observation",
                    "application/json",
                    "bench",
                    now,
                );
                self.grpc()?
                    .put_canonical(request)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            (Operation::CanonicalPut, Transport::Rest) => {
                let body = self.canonical_body(now);
                self.rest_call(
                    self.http
                        .post(format!("{}/canonical", self.rest))
                        .json(&body),
                    201,
                )
                .await
            }
            (Operation::CanonicalPut, Transport::Mcp) => {
                let body = self.canonical_body(now);
                self.mcp_call("ledger_put_canonical", body).await
            }
            (Operation::ReferencePut, Transport::Grpc) => {
                let request =
                    signed_reference(&self.key, &self.agent, &self.object_id, "bench", now)
                        .map_err(|e| e.to_string())?;
                self.grpc()?
                    .put_reference(request)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            (Operation::ReferencePut, Transport::Mcp) => {
                let body = self.reference_body(now)?;
                self.mcp_call("ledger_put_reference", body).await
            }
            (Operation::ReferencePut, Transport::Rest) => {
                let body = self.reference_body(now)?;
                self.rest_call(
                    self.http
                        .post(format!("{}/reference", self.rest))
                        .json(&body),
                    201,
                )
                .await
            }
            (Operation::CanonicalGet, Transport::Grpc) => self
                .grpc()?
                .ledger()
                .get_canonical(pb::GetCanonicalRequest {
                    id: self.object_id.clone(),
                })
                .await
                .map(drop)
                .map_err(|e| e.to_string()),
            (Operation::CanonicalGet, Transport::Rest) => {
                self.rest_call(
                    self.http
                        .get(format!("{}/canonicals/{}", self.rest, self.object_id)),
                    200,
                )
                .await
            }
            (Operation::CanonicalGet, Transport::Mcp) => {
                self.mcp_call("ledger_get_canonical", json!({"id": self.object_id}))
                    .await
            }
        }
    }

    fn grpc(&self) -> Result<&Noema, String> {
        self.noema
            .as_ref()
            .ok_or_else(|| "this run made no gRPC connection".to_owned())
    }

    /// A new canonical object as `POST /canonical`'s body.
    fn canonical_body(&self, now: OffsetDateTime) -> Value {
        let r = canonical_request(
            self.payload(),
            "observation",
            "application/json",
            "bench",
            now,
        );
        json!({
            "schema_version": r.schema_version, "id": r.id, "object_type": r.object_type,
            "content_type": r.content_type, "size_bytes": r.size_bytes, "created_at": r.created_at,
            "created_by": r.created_by, "storage_path": r.storage_path,
            "payload": data_encoding::BASE64.encode(&r.payload),
        })
    }

    /// A new signed reference to the anchor object as `POST /reference`'s body.
    fn reference_body(&self, now: OffsetDateTime) -> Result<Value, String> {
        let r = signed_reference(&self.key, &self.agent, &self.object_id, "bench", now)
            .map_err(|e| e.to_string())?;
        Ok(json!({
            "schema_version": r.schema_version, "id": r.id, "canonical_object_id": r.canonical_object_id,
            "agent_id": r.agent_id, "created_at": r.created_at, "context": r.context,
            "signature": r.signature, "public_key": r.public_key,
        }))
    }

    /// One MCP `tools/call`; a JSON-RPC error or an `isError` result is a failure.
    async fn mcp_call(&self, tool: &str, arguments: Value) -> Result<(), String> {
        let response = self
            .http
            .post(format!("{}/v1/mcp", self.rest))
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        if status != 200 {
            return Err(format!("HTTP {status}"));
        }
        if let Some(error) = body.get("error") {
            return Err(format!("JSON-RPC error {error}"));
        }
        if body["result"]["isError"] != Value::Bool(false) {
            return Err(format!("tool error {}", body["result"]["content"]));
        }
        Ok(())
    }

    async fn rest_call(&self, request: reqwest::RequestBuilder, expect: u16) -> Result<(), String> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        // Drain the body so the connection is reused.
        let _ = response.bytes().await;
        if status == expect {
            Ok(())
        } else {
            Err(format!("HTTP {status}"))
        }
    }
}

pub(super) fn percentile(sorted_micros: &[u64], p: f64) -> f64 {
    if sorted_micros.is_empty() {
        return 0.0;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let index = ((sorted_micros.len() as f64 - 1.0) * p).round() as usize;
    sorted_micros[index.min(sorted_micros.len() - 1)] as f64 / 1000.0
}

async fn run_phase(
    target: Arc<Target>,
    op: Operation,
    transport: Transport,
    concurrency: usize,
    duration: Duration,
    server_pid: Option<u32>,
) -> Value {
    let mut row = measure(concurrency, duration, server_pid, move || {
        let target = Arc::clone(&target);
        async move { target.one(op, transport).await.map(|()| Attempt::Done) }
    })
    .await;
    if let Value::Object(map) = &mut row {
        map.insert("op".into(), Value::from(name(&op)));
        map.insert("transport".into(), Value::from(name(&transport)));
        map.remove("conflicts");
    }
    row
}

/// How one operation of a phase ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// It did what it was asked.
    Done,
    /// A clean conflict (a concurrent writer won): counted apart, not as an operation.
    Conflict,
}

/// Runs `one` from `concurrency` workers for `duration` and reports throughput and latency
/// of the operations that were done, conflicts and errors apart, and CPU per operation.
pub(crate) async fn measure<F, Fut>(
    concurrency: usize,
    duration: Duration,
    server_pid: Option<u32>,
    one: F,
) -> Value
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Attempt, String>> + Send,
{
    let server_cpu_before = server_pid.and_then(|pid| cpu_seconds(&pid.to_string()));
    let bench_cpu_before = cpu_seconds("self");
    let deadline = Instant::now() + duration;
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let one = one.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let (mut errors, mut conflicts) = (0u64, 0u64);
            let mut first_error = None;
            while Instant::now() < deadline {
                let started = Instant::now();
                match one().await {
                    Ok(Attempt::Done) => latencies
                        .push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)),
                    Ok(Attempt::Conflict) => conflicts += 1,
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (latencies, errors, conflicts, first_error)
        }));
    }
    let started = Instant::now();
    let (mut all, mut errors, mut conflicts, mut first_error) = (Vec::new(), 0u64, 0u64, None);
    for worker in workers {
        if let Ok((latencies, e, c, first)) = worker.await {
            all.extend(latencies);
            errors += e;
            conflicts += c;
            if first_error.is_none() {
                first_error = first;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64().max(duration.as_secs_f64());
    #[allow(clippy::cast_precision_loss)]
    let per_op = |before: Option<f64>, pid: Option<String>| -> Option<f64> {
        let used = cpu_seconds(&pid?)? - before?;
        (!all.is_empty()).then(|| (used / all.len() as f64 * 1e6).round())
    };
    let server_cpu = per_op(server_cpu_before, server_pid.map(|p| p.to_string()));
    let bench_cpu = per_op(bench_cpu_before, Some("self".into()));
    all.sort_unstable();
    #[allow(clippy::cast_precision_loss)]
    let throughput = all.len() as f64 / elapsed;
    json!({
        "ops": all.len(), "errors": errors, "conflicts": conflicts,
        "first_error": first_error,
        "throughput_per_sec": (throughput * 10.0).round() / 10.0,
        "p50_ms": percentile(&all, 0.50), "p99_ms": percentile(&all, 0.99),
        "server_cpu_us_per_op": server_cpu, "bench_cpu_us_per_op": bench_cpu,
    })
}

/// CPU time (user and system, all threads) that process `pid` (or `self`) has used so far,
/// in seconds, from /proc (Linux).
pub(super) fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces; fields are counted after it, where
    // the third field of the line (the state) comes first: utime and stime are the 14th and
    // 15th fields of the line.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    #[allow(clippy::cast_precision_loss)]
    Some((utime + stime) as f64 / rustix::param::clock_ticks_per_second() as f64)
}

/// Peak resident memory of `pid` in MB, from /proc (Linux).
pub(crate) fn peak_rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

pub async fn bench(bench: &Bench) -> Result<(), CommandError> {
    if bench.client_threads.is_some() && !bench.drives_a_server() {
        return Err(CommandError::Usage(
            "--client-threads sets a load client's threads; this bench does its work in \
             this process, on every core"
                .into(),
        ));
    }
    let args = match &bench.command {
        BenchCommand::Ledger(args) => args,
        BenchCommand::Continuity(args) => return super::bench_continuity::bench(args).await,
        BenchCommand::Context(args) => return super::bench_context::bench(args).await,
        BenchCommand::Coordination(args) => {
            return super::bench_coordination::bench(args).await;
        }
        BenchCommand::World(args) => return super::bench_world::bench_world(args).await,
        BenchCommand::Fill(args) => return super::bench_fill::fill(args).await,
        BenchCommand::Orchestrator(args) => return super::bench_orchestrator::bench(args).await,
        BenchCommand::OrchestratorFill(args) => return super::bench_orchestrator::fill(args).await,
    };
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| CommandError::Usage(e.to_string()))?;
    let run = u64::from_le_bytes(seed);
    let key = SigningKeyPair::generate().map_err(|e| CommandError::Usage(e.to_string()))?;
    // References point at an anchor object, and gets read it; the anchor is put over gRPC.
    // REST canonical puts alone need no gRPC endpoint.
    let needs_grpc = args.transports.contains(&Transport::Grpc)
        || args.ops.iter().any(|&op| op != Operation::CanonicalPut);
    let (noema, object_id) = if needs_grpc {
        let noema = args.client.connect().await?;
        let anchor = canonical_request(
            format!("{{\"bench_anchor\":{run}}}").into_bytes(),
            "observation",
            "application/json",
            "bench",
            OffsetDateTime::now_utc(),
        );
        let object_id = noema.put_canonical(anchor).await?.id;
        (Some(noema), object_id)
    } else {
        (None, String::new())
    };
    let http = noema_tools::tls::client_builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let target = Arc::new(Target {
        token: args.client.token()?,
        noema,
        http,
        rest: args.rest.trim_end_matches('/').to_owned(),
        key,
        agent: format!("bench:{run:x}"),
        object_id,
        payload_bytes: args.payload_bytes,
        counter: AtomicU64::new(0),
        run,
    });
    let duration = Duration::from_secs(args.duration);
    let mut results = Vec::new();
    for &op in &args.ops {
        for &transport in &args.transports {
            results.push(
                run_phase(
                    Arc::clone(&target),
                    op,
                    transport,
                    args.concurrency,
                    duration,
                    args.server_pid,
                )
                .await,
            );
        }
    }
    let mcp_overhead = mcp_overhead(&results);
    say_json(&json!({
        "started_at": utc_seconds(OffsetDateTime::now_utc()),
        "concurrency": args.concurrency,
        "client_threads": client_threads(),
        "seconds_per_phase": args.duration,
        "payload_bytes": args.payload_bytes,
        "results": results,
        "mcp_overhead_p50_ms": mcp_overhead,
        "server_peak_rss_mb": args.server_pid.and_then(peak_rss_mb),
    }));
    Ok(())
}

/// Per operation measured over both REST and MCP: the MCP phase's p50 minus the REST
/// phase's (what a tool call adds to the same route), in ms; null when no such pair ran.
fn mcp_overhead(results: &[Value]) -> Value {
    let p50 = |op: &Value, transport: Transport| {
        results
            .iter()
            .find(|r| &r["op"] == op && r["transport"] == name(&transport).as_str())
            .and_then(|r| r["p50_ms"].as_f64())
    };
    let overhead: serde_json::Map<String, Value> = results
        .iter()
        .filter(|r| r["transport"] == name(&Transport::Mcp).as_str())
        .filter_map(|r| {
            let mcp = p50(&r["op"], Transport::Mcp)?;
            let rest = p50(&r["op"], Transport::Rest)?;
            let op = r["op"].as_str()?.to_owned();
            Some((op, json!(((mcp - rest) * 1000.0).round() / 1000.0)))
        })
        .collect();
    if overhead.is_empty() {
        Value::Null
    } else {
        Value::Object(overhead)
    }
}

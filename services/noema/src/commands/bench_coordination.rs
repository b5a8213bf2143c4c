//! `noema bench coordination`: drives a running Noema's gateway over CogniRelay's REST
//! paths with N concurrent clients for a fixed time per phase and prints throughput, latency
//! and server CPU per operation as JSON (like the other benches). Every send is a real,
//! durable write (answered after its commit).
//!
//! Phases: `send` (`POST /v1/messages/send`, 64 recipients and threads), `inbox` (`GET
//! /v1/messages/inbox`, the last 20 of a filled inbox), the same inbox read once as REST
//! (`rest_call`) and once as MCP (`mcp_call`: `tools/call messages.inbox` on `/v1/mcp`), and
//! both at once (`paired_call`: half the clients read as REST, half as MCP, for the same
//! time). The MCP overhead is `paired_call`'s p50 difference: both kinds of call meet the
//! same load, so the difference is what a tool call adds to its REST call. The difference
//! of the separate phases is reported too; on a saturated server it is the clients' count
//! times the extra CPU per call over the cores, a throughput figure, and it moves with
//! whatever else ran during either phase. Recipients and threads carry the run's id, so
//! runs never collide; the token's tenant holds them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::bench::{Attempt, cpu_seconds, measure, peak_rss_mb};
use super::connect::ClientFlags;
use super::{CommandError, say_json};

/// Recipients (and threads) the send phase spreads over.
const RECIPIENTS: u64 = 64;
/// Messages in the inbox the read phases read.
const FILLED: u64 = 200;

#[derive(Debug, Args)]
pub struct CoordinationBenchArgs {
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
        default_value = "send,inbox,rest_call,mcp_call,paired_call"
    )]
    pub phases: Vec<Phase>,
    /// PID of the server, to report its peak resident memory and CPU time per operation
    /// (Linux).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// The gateway's REST base URL.
    #[arg(long, value_name = "BASE_URL", default_value = "http://127.0.0.1:8080")]
    pub target: String,
    #[command(flatten)]
    pub client: ClientFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Phase {
    /// `POST /v1/messages/send`, every send a durable write.
    Send,
    /// `GET /v1/messages/inbox`, the last 20 of a filled inbox.
    Inbox,
    /// The inbox read as REST, on its own.
    RestCall,
    /// The inbox read as `tools/call messages.inbox`, on its own.
    McpCall,
    /// Both at once, half the clients each (at least one each): the MCP overhead.
    PairedCall,
}

/// One call a client makes.
#[derive(Debug, Clone, Copy)]
enum Call {
    Send,
    RestInbox,
    McpInbox,
}

/// What the bench reads of an MCP answer: whether it is an error, the rest checked as
/// JSON but not kept (as the REST phases read theirs).
#[derive(Deserialize)]
struct McpAnswer {
    result: Option<McpResult>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct McpResult {
    #[serde(rename = "isError", default)]
    is_error: bool,
}

struct Bench {
    http: reqwest::Client,
    base: String,
    token: String,
    run: String,
    counter: AtomicU64,
    mcp: McpCall,
}

/// The MCP phase's request, made once: its URL, and its body around the id, which is all
/// that changes from call to call (a client with a fixed call writes it the same way).
struct McpCall {
    url: String,
    before_id: String,
    after_id: String,
}

impl McpCall {
    fn new(base: &str, run: &str) -> McpCall {
        let params = json!({"name": "messages.inbox",
                            "arguments": {"recipient": format!("{run}-filled"), "limit": "20"}});
        McpCall {
            url: format!("{base}/v1/mcp"),
            before_id: r#"{"jsonrpc":"2.0","id":"#.to_owned(),
            after_id: format!(r#","method":"tools/call","params":{params}}}"#),
        }
    }

    /// The body of the call with id `n`.
    fn body(&self, n: u64) -> String {
        let id = n.to_string();
        let mut body = String::with_capacity(self.before_id.len() + id.len() + self.after_id.len());
        body.push_str(&self.before_id);
        body.push_str(&id);
        body.push_str(&self.after_id);
        body
    }
}

impl Bench {
    async fn send(&self, n: u64) -> Result<(), String> {
        let body = json!({
            "thread_id": format!("{}-t{}", self.run, n % RECIPIENTS),
            "sender": format!("{}-sender", self.run),
            "recipient": format!("{}-r{}", self.run, n % RECIPIENTS),
            "subject": format!("bench {n}"),
            "body_md": "A short benchmark message with a little Markdown: **ok**.",
        });
        self.call(
            self.http
                .post(format!("{}/v1/messages/send", self.base))
                .json(&body),
        )
        .await
    }

    fn inbox_url(&self) -> String {
        format!(
            "{}/v1/messages/inbox?recipient={}-filled&limit=20",
            self.base, self.run
        )
    }

    async fn inbox(&self) -> Result<(), String> {
        self.call(self.http.get(self.inbox_url())).await
    }

    async fn mcp_inbox(&self, n: u64) -> Result<(), String> {
        let response = self
            .http
            .post(&self.mcp.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(self.mcp.body(n))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        let answer: McpAnswer = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        if !status.is_success()
            || answer.error.is_some()
            || answer.result.is_none_or(|result| result.is_error)
        {
            return Err(format!("MCP {status}: {}", String::from_utf8_lossy(&body)));
        }
        Ok(())
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> Result<(), String> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
        }
        // Read as an MCP answer is (`mcp_inbox`), so both phases spend the same on it.
        serde_json::from_slice::<IgnoredAny>(&body).map_err(|e| e.to_string())?;
        Ok(())
    }

    async fn one(&self, call: Call) -> Result<Attempt, String> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        match call {
            Call::Send => self.send(n).await?,
            Call::RestInbox => self.inbox().await?,
            Call::McpInbox => self.mcp_inbox(n).await?,
        }
        Ok(Attempt::Done)
    }
}

fn name(phase: Phase) -> String {
    phase
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

fn p50(row: &Value) -> Option<f64> {
    row.get("p50_ms").and_then(Value::as_f64)
}

pub async fn bench(args: &CoordinationBenchArgs) -> Result<(), CommandError> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| CommandError::Usage(e.to_string()))?;
    let run = u64::from_le_bytes(seed);
    let http = noema_tools::tls::client_builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let base = args.target.trim_end_matches('/').to_owned();
    let run = format!("bench-{run:x}");
    let bench = Arc::new(Bench {
        http,
        mcp: McpCall::new(&base, &run),
        base,
        token: args.client.token()?,
        run,
        counter: AtomicU64::new(0),
    });
    // The inbox the read phases read (not measured).
    for n in 0..FILLED {
        let body = json!({
            "thread_id": format!("{}-filled", bench.run),
            "sender": format!("{}-sender", bench.run),
            "recipient": format!("{}-filled", bench.run),
            "subject": format!("filled {n}"),
            "body_md": "A message in the benchmark's inbox.",
        });
        bench
            .call(
                bench
                    .http
                    .post(format!("{}/v1/messages/send", bench.base))
                    .json(&body),
            )
            .await
            .map_err(CommandError::Usage)?;
    }
    let duration = Duration::from_secs(args.duration);
    let mut results = Vec::new();
    let mut paired_cpu = None;
    for &phase in &args.phases {
        let call = match phase {
            Phase::Send => Call::Send,
            Phase::Inbox | Phase::RestCall => Call::RestInbox,
            Phase::McpCall => Call::McpInbox,
            Phase::PairedCall => {
                let (rows, cpu) = paired(&bench, args.concurrency, duration, args.server_pid).await;
                results.extend(rows);
                paired_cpu = Some(cpu);
                continue;
            }
        };
        let mut row = drive(&bench, call, args.concurrency, duration, args.server_pid).await;
        label(&mut row, &name(phase), call);
        results.push(row);
    }
    let by_op = |op: &str| results.iter().find(|r| r["op"] == op);
    let difference = |mcp: &str, rest: &str| {
        by_op(mcp)
            .and_then(p50)
            .zip(by_op(rest).and_then(p50))
            .map(|(mcp, rest)| ((mcp - rest) * 1000.0).round() / 1000.0)
    };
    let throughput_ratio = by_op("mcp_call")
        .and_then(|r| r["throughput_per_sec"].as_f64())
        .zip(by_op("rest_call").and_then(|r| r["throughput_per_sec"].as_f64()))
        .filter(|(_, rest)| *rest > 0.0)
        .map(|(mcp, rest)| (mcp / rest * 1000.0).round() / 1000.0);
    say_json(&json!({
        "started_at": noema_client::ledger::utc_seconds(OffsetDateTime::now_utc()),
        "concurrency": args.concurrency,
        "client_threads": super::bench::client_threads(),
        "seconds_per_phase": args.duration,
        "target": args.target,
        "inbox_messages": FILLED,
        "results": results,
        "mcp_overhead_p50_ms": difference("paired_mcp_call", "paired_rest_call"),
        "paired_cpu_us_per_call": paired_cpu,
        "mcp_separate_phases_overhead_p50_ms": difference("mcp_call", "rest_call"),
        "mcp_separate_phases_throughput_ratio": throughput_ratio,
        "server_peak_rss_mb": args.server_pid.and_then(peak_rss_mb),
    }));
    Ok(())
}

/// `call` from `concurrency` clients for `duration`.
async fn drive(
    bench: &Arc<Bench>,
    call: Call,
    concurrency: usize,
    duration: Duration,
    server_pid: Option<u32>,
) -> Value {
    let bench = Arc::clone(bench);
    measure(concurrency, duration, server_pid, move || {
        let bench = Arc::clone(&bench);
        async move { bench.one(call).await }
    })
    .await
}

/// Names `row`'s phase, and the transport its calls used.
fn label(row: &mut Value, op: &str, call: Call) {
    let transport = match call {
        Call::Send | Call::RestInbox => "rest",
        Call::McpInbox => "mcp",
    };
    if let Value::Object(map) = row {
        map.insert("op".into(), Value::from(op));
        map.insert("transport".into(), Value::from(transport));
    }
}

/// The `paired_call` phase: the inbox read as REST by half the clients and as MCP by the
/// other half, at the same time. Its rows, and the CPU per call of the server and of the
/// bench over both kinds (one process serves both, so it cannot be split by kind).
async fn paired(
    bench: &Arc<Bench>,
    concurrency: usize,
    duration: Duration,
    server_pid: Option<u32>,
) -> (Vec<Value>, Value) {
    let server = server_pid.map(|pid| pid.to_string());
    let server_before = server.as_deref().and_then(cpu_seconds);
    let bench_before = cpu_seconds("self");
    let rest_clients = (concurrency / 2).max(1);
    let mcp_clients = concurrency.saturating_sub(rest_clients).max(1);
    let (mut rest, mut mcp) = tokio::join!(
        drive(bench, Call::RestInbox, rest_clients, duration, None),
        drive(bench, Call::McpInbox, mcp_clients, duration, None),
    );
    let calls = [&rest, &mcp]
        .iter()
        .filter_map(|row| row["ops"].as_u64())
        .sum::<u64>();
    #[allow(clippy::cast_precision_loss)]
    let per_call = |before: Option<f64>, pid: Option<&str>| {
        let used = cpu_seconds(pid?)? - before?;
        (calls > 0).then(|| (used / calls as f64 * 1e6).round())
    };
    let cpu = json!({
        "server": per_call(server_before, server.as_deref()),
        "bench": per_call(bench_before, Some("self")),
    });
    for (row, op, call, clients) in [
        (&mut rest, "paired_rest_call", Call::RestInbox, rest_clients),
        (&mut mcp, "paired_mcp_call", Call::McpInbox, mcp_clients),
    ] {
        label(row, op, call);
        if let Value::Object(map) = row {
            map.insert("clients".into(), Value::from(clients));
            // Each half's share of the bench's CPU is not known either.
            map.insert("bench_cpu_us_per_op".into(), Value::Null);
        }
    }
    (vec![rest, mcp], cpu)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_body_is_the_tool_call() {
        let call = McpCall::new("http://127.0.0.1:1", "bench-1f");
        assert_eq!(call.url, "http://127.0.0.1:1/v1/mcp");
        let body: Value = serde_json::from_str(&call.body(42)).unwrap();
        assert_eq!(
            body,
            json!({"jsonrpc": "2.0", "id": 42, "method": "tools/call",
                   "params": {"name": "messages.inbox",
                              "arguments": {"recipient": "bench-1f-filled", "limit": "20"}}})
        );
    }
}

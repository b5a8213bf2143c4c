//! `noema bench context`: drives the gateway's CogniRelay routes for context, search and
//! memory files with N concurrent clients for a fixed time per phase and prints throughput,
//! latency and CPU per operation as JSON (like `noema bench continuity`). Every write is a
//! real, durable write.
//!
//! Phases: `retrieve` (`POST /v1/context/retrieve` with 4 capsule selectors and a
//! 4,000-token budget, its task text a different query each time), `search` (`POST
//! /v1/search`, one to three words each, drawn from the filled memory's own vocabulary so
//! some are common and some rare), `append` (`POST /v1/append`: records added in turn to as
//! many episodic `.jsonl` files as there are clients, as agents log their sessions).
//!
//! Before the phases (not measured) the bench fills the memory the phases read: the 4
//! capsules the selectors name and `--entries` memory entries (100,000 by default) written
//! as whole files through `POST /v1/write` by 16 concurrent writers: episodic session logs
//! (`memory/episodic/*.jsonl`, one JSON record per line), journal day files and core and
//! summary notes (markdown, one entry per paragraph or bullet), `--entries-per-file`
//! entries each. The words come from a fixed vocabulary (common English words of an agent's
//! work and generated ones) with a Zipf-like frequency, from a seeded generator, so every run
//! writes the same kind of text.
//!
//! By default it drives Noema at `--rest` as the owner, in a tenant of its own
//! (`bench-<run>`, named with `x-noema-tenant`, so the token must be a superuser's). With
//! `--target <base-url>` and `--token` it drives that server as the token's tenant instead
//! (another Noema, or the original CogniRelay), every path carrying the run's id.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::bench::{Attempt, measure, peak_rss_mb};
use super::connect::ClientFlags;
use super::{CommandError, say_json};

/// Concurrent writers of the fill.
const FILLERS: u64 = 16;

#[derive(Debug, Args)]
pub struct ContextBenchArgs {
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
        default_value = "retrieve,search,append"
    )]
    pub phases: Vec<Phase>,
    /// PID of the server, to report its peak resident memory and CPU time per operation
    /// (Linux).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// REST base URL of Noema's gateway, driven in a tenant of the bench's own.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub rest: String,
    /// REST base URL of another server (a Noema or a CogniRelay) to drive as `--token`'s own
    /// tenant instead of `--rest`.
    #[arg(long, value_name = "BASE_URL")]
    pub target: Option<String>,
    /// Memory entries filled before the phases (records, journal entries, note paragraphs).
    #[arg(long, default_value_t = 100_000)]
    pub entries: u64,
    /// Entries per memory file.
    #[arg(long, default_value_t = 100)]
    pub entries_per_file: u64,
    #[command(flatten)]
    pub client: ClientFlags,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Phase {
    Retrieve,
    Search,
    Append,
}

/// Words of an agent's working notes, most common first.
#[rustfmt::skip]
const COMMON: &[&str] = &[
    "the", "and", "user", "agent", "task", "memory", "session", "file", "error", "test", "build",
    "release", "plan", "review", "deploy", "server", "request", "answer", "question", "issue",
    "note", "change", "commit", "branch", "search", "index", "query", "cache", "latency",
    "budget", "token", "context", "capsule", "thread", "peer", "schedule", "reminder", "goal",
    "decision", "risk", "constraint", "priority", "follow", "check", "tool", "call", "result",
    "failure", "retry", "timeout", "config", "database", "backup", "restore", "migration",
    "schema", "table", "column", "row", "write", "read", "append", "journal", "summary",
    "weekly", "daily", "morning", "evening", "meeting", "design", "draft", "document", "spec",
    "api", "route", "gateway", "client", "library", "crate", "version", "upgrade", "security",
    "audit", "signature", "key", "trust", "verify", "health", "metric", "alert", "log", "trace",
    "span", "worker", "queue", "batch", "stream", "event", "message", "reply", "mention",
    "customer", "invoice", "payment", "report", "dashboard", "chart", "figure", "benchmark",
    "profile", "memory-leak", "regression", "fix", "patch", "hotfix", "rollback", "incident",
    "postmortem", "learned", "prefer", "avoid", "remember", "forget", "important", "blocked",
    "waiting", "done", "open", "closed", "whale", "river", "garden", "coffee", "travel", "music",
];

/// Syllables of the generated words (the long tail of the vocabulary).
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mir", "ten", "sa", "vel", "dor", "pi", "qua", "ren", "tho", "ul", "zen", "bri",
    "cor", "fa", "gil", "hes", "jo", "mun",
];

/// Generated words after [`COMMON`].
const GENERATED: usize = 4000;

/// A small deterministic generator (splitmix64): the bench's text needs variety, not secrecy.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap_or(0)
    }

    /// A rank in `0..n` with frequency falling as 1/rank (log-uniform).
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let rank = ((n as f64 + 1.0).powf(u) - 1.0) as usize;
        rank.min(n.saturating_sub(1))
    }
}

/// The vocabulary, most frequent first.
struct Vocabulary {
    words: Vec<String>,
}

impl Vocabulary {
    fn new() -> Vocabulary {
        let mut words: Vec<String> = COMMON.iter().map(|w| (*w).to_owned()).collect();
        let n = SYLLABLES.len();
        for i in 0..GENERATED {
            let mut word = String::new();
            let mut k = i;
            for _ in 0..(2 + i % 2) {
                word.push_str(SYLLABLES[k % n]);
                k = k / n + 7 * (i % 3) + 1;
            }
            if !words.contains(&word) {
                words.push(word);
            }
        }
        Vocabulary { words }
    }

    fn word(&self, rng: &mut Rng) -> &str {
        &self.words[rng.zipf(self.words.len())]
    }

    /// A sentence of `min..=max` words.
    fn sentence(&self, rng: &mut Rng, min: usize, max: usize) -> String {
        let n = min + rng.below(max - min + 1);
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(self.word(rng));
        }
        out.push('.');
        out
    }

    /// A search query: one to three words.
    fn query(&self, rng: &mut Rng) -> String {
        let n = 1 + rng.below(3);
        (0..n)
            .map(|_| self.word(rng).to_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

const RECORD_KINDS: [&str; 5] = [
    "observation",
    "action",
    "reflection",
    "tool_call",
    "message",
];

/// One episodic record, as an agent logs it.
fn record(vocabulary: &Vocabulary, rng: &mut Rng, n: u64) -> Value {
    let tags: Vec<String> = (0..rng.below(3))
        .map(|_| vocabulary.word(rng).to_owned())
        .collect();
    json!({
        "ts": stamp(n),
        "kind": RECORD_KINDS[rng.below(RECORD_KINDS.len())],
        "topic": vocabulary.word(rng),
        "text": vocabulary.sentence(rng, 8, 30),
        "tags": tags,
    })
}

/// A timestamp `n` seconds into 2026-11-01, as records carry them.
fn stamp(n: u64) -> String {
    let at = OffsetDateTime::from_unix_timestamp(1_793_491_200 + i64::try_from(n).unwrap_or(0))
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    noema_client::ledger::utc_seconds(at)
}

/// Memory file `index` of the fill with its `entries` entries: 8 in 10 files are episodic
/// session logs, 1 a journal day, 1 a note (core or summary).
fn memory_file(vocabulary: &Vocabulary, run: &str, index: u64, entries: u64) -> (String, String) {
    let mut rng = Rng::new(index.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5eed);
    let mut content = String::new();
    match index % 10 {
        0 => {
            let day = index / 10;
            let path = format!(
                "journal/2026/{run}-{:04}-{:02}-{:02}.md",
                2026 + day / 336,
                1 + (day / 28) % 12,
                1 + day % 28
            );
            content.push_str(&format!("# Journal, day {day}\n"));
            for e in 0..entries {
                content.push_str(&format!(
                    "\n## {:02}:{:02}\n{}\n",
                    8 + e % 12,
                    (e * 7) % 60,
                    vocabulary.sentence(&mut rng, 12, 40)
                ));
            }
            (path, content)
        }
        5 => {
            let (path, title) = if index % 20 == 5 {
                (
                    format!("memory/core/{run}-topic-{index}.md"),
                    vocabulary.word(&mut rng).to_owned(),
                )
            } else {
                (
                    format!("memory/summaries/{run}-week-{index}.md"),
                    format!("week {index}"),
                )
            };
            content.push_str(&format!(
                "---\ntype: note\nimportance: 0.{}\n---\n# {title}\n",
                rng.below(10)
            ));
            for _ in 0..entries {
                content.push_str(&format!(
                    "- {} #{}\n",
                    vocabulary.sentence(&mut rng, 6, 20),
                    vocabulary.word(&mut rng)
                ));
            }
            (path, content)
        }
        _ => {
            let path = format!("memory/episodic/{run}-session-{index:06}.jsonl");
            for e in 0..entries {
                let line = record(vocabulary, &mut rng, index * entries + e).to_string();
                content.push_str(&line);
                content.push('\n');
            }
            (path, content)
        }
    }
}

/// The core memory files a context bundle reads.
fn core_files(vocabulary: &Vocabulary) -> Vec<(String, String)> {
    let mut rng = Rng::new(7);
    let mut facts = serde_json::Map::new();
    for i in 0..12 {
        facts.insert(
            format!("fact_{i}"),
            Value::from(vocabulary.sentence(&mut rng, 6, 16)),
        );
    }
    vec![
        (
            "memory/core/identity.md".to_owned(),
            format!(
                "# Identity\nI am the bench agent. {}\n",
                vocabulary.sentence(&mut rng, 20, 40)
            ),
        ),
        (
            "memory/core/values.md".to_owned(),
            format!(
                "# Values\n- {}\n- {}\n",
                vocabulary.sentence(&mut rng, 8, 16),
                vocabulary.sentence(&mut rng, 8, 16)
            ),
        ),
        (
            "memory/core/long_term_facts.json".to_owned(),
            Value::Object(facts).to_string(),
        ),
    ]
}

/// The selectors of a retrieve, and the capsules the fill writes for them.
const SELECTOR_KINDS: [&str; 4] = ["thread", "task", "user", "peer"];

fn capsule(vocabulary: &Vocabulary, kind: &str, id: &str, at: &str, n: u64) -> Value {
    let mut rng = Rng::new(n + 99);
    let list = |rng: &mut Rng, k: usize| -> Vec<String> {
        (0..k).map(|_| vocabulary.sentence(rng, 4, 10)).collect()
    };
    json!({
        "subject_kind": kind, "subject_id": id,
        "capsule": {
            "subject_kind": kind, "subject_id": id, "updated_at": at, "verified_at": at,
            "verification_kind": "self_review",
            "source": {"producer": "bench", "update_reason": "interaction_boundary"},
            "metadata": {"interaction_boundary_kind": "manual_checkpoint", "n": n},
            "continuity": {
                "top_priorities": list(&mut rng, 3),
                "active_concerns": list(&mut rng, 2),
                "active_constraints": list(&mut rng, 2),
                "open_loops": list(&mut rng, 3),
                "stance_summary": vocabulary.sentence(&mut rng, 20, 30),
                "drift_signals": list(&mut rng, 1),
                "session_trajectory": list(&mut rng, 3),
                "working_hypotheses": list(&mut rng, 2),
                "negative_decisions": [],
                "rationale_entries": []
            },
            "confidence": {"continuity": 0.8, "relationship_model": 0.5},
            "freshness": {"freshness_class": "durable"}
        }
    })
}

struct Bench {
    http: reqwest::Client,
    base: String,
    token: String,
    /// `x-noema-tenant`, when the bench works in a tenant of its own.
    tenant: Option<String>,
    /// The run's id, in every path and subject id.
    run: String,
    vocabulary: Vocabulary,
    counter: AtomicU64,
    seed: u64,
}

impl Bench {
    async fn post(&self, path: &str, body: &Value) -> Result<(), String> {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body);
        if let Some(tenant) = &self.tenant {
            request = request.header(noema_core::scopes::TENANT_METADATA, tenant);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        // Drain the body so the connection is reused.
        let answer = response.bytes().await.unwrap_or_default();
        if status == 200 {
            Ok(())
        } else {
            Err(format!(
                "{path}: HTTP {status}: {}",
                String::from_utf8_lossy(&answer[..answer.len().min(300)])
            ))
        }
    }

    fn selector_id(&self, i: usize) -> String {
        format!("{}-{}", self.run, SELECTOR_KINDS[i])
    }

    async fn one(&self, phase: Phase, file: u64) -> Result<Attempt, String> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut rng = Rng::new(self.seed ^ n.wrapping_mul(0x9e37_79b9));
        match phase {
            Phase::Retrieve => {
                let selectors: Vec<Value> = (0..SELECTOR_KINDS.len())
                    .map(|i| {
                        json!({"subject_kind": SELECTOR_KINDS[i], "subject_id": self.selector_id(i)})
                    })
                    .collect();
                let body = json!({
                    "task": self.vocabulary.query(&mut rng),
                    "continuity_selectors": selectors,
                    "continuity_max_capsules": 4,
                    "max_tokens_estimate": 4000,
                    "limit": 10,
                });
                self.post("/v1/context/retrieve", &body).await?;
            }
            Phase::Search => {
                let body = json!({"query": self.vocabulary.query(&mut rng), "limit": 10});
                self.post("/v1/search", &body).await?;
            }
            Phase::Append => {
                let body = json!({
                    "path": format!("memory/episodic/{}-live-{file:03}.jsonl", self.run),
                    "record": record(&self.vocabulary, &mut rng, n),
                });
                self.post("/v1/append", &body).await?;
            }
        }
        Ok(Attempt::Done)
    }

    /// Writes the capsules and the memory files; answers how many files and entries.
    async fn fill(self: &Arc<Self>, entries: u64, per_file: u64) -> Result<(u64, u64), String> {
        let at = noema_client::ledger::utc_seconds(OffsetDateTime::now_utc());
        for (i, kind) in SELECTOR_KINDS.iter().enumerate() {
            let body = capsule(&self.vocabulary, kind, &self.selector_id(i), &at, i as u64);
            self.post("/v1/continuity/upsert", &body).await?;
        }
        for (path, content) in core_files(&self.vocabulary) {
            self.post("/v1/write", &json!({"path": path, "content": content}))
                .await?;
        }
        let per_file = per_file.max(1);
        let files = entries.div_ceil(per_file);
        let mut fillers = Vec::new();
        for worker in 0..FILLERS {
            let bench = Arc::clone(self);
            fillers.push(tokio::spawn(async move {
                let mut index = worker;
                while index < files {
                    let count = per_file.min(entries - index * per_file);
                    let (path, content) = memory_file(&bench.vocabulary, &bench.run, index, count);
                    bench
                        .post("/v1/write", &json!({"path": path, "content": content}))
                        .await?;
                    index += FILLERS;
                }
                Ok::<(), String>(())
            }));
        }
        for filler in fillers {
            filler.await.map_err(|e| e.to_string())??;
        }
        Ok((files, entries))
    }
}

fn name(phase: Phase) -> String {
    phase
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

pub async fn bench(args: &ContextBenchArgs) -> Result<(), CommandError> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| CommandError::Usage(e.to_string()))?;
    let seed = u64::from_le_bytes(seed);
    let run = format!("bench-{:08x}", seed >> 32);
    let http = noema_tools::tls::client_builder()
        .pool_max_idle_per_host(args.concurrency.max(FILLERS as usize))
        .build()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let (base, tenant) = match &args.target {
        Some(target) => (target.clone(), None),
        None => (args.rest.clone(), Some(run.clone())),
    };
    let bench = Arc::new(Bench {
        http,
        base: base.trim_end_matches('/').to_owned(),
        token: args.client.token()?,
        tenant,
        run: run.clone(),
        vocabulary: Vocabulary::new(),
        counter: AtomicU64::new(0),
        seed,
    });
    let started = Instant::now();
    let (files, entries) = bench
        .fill(args.entries, args.entries_per_file)
        .await
        .map_err(CommandError::Usage)?;
    let fill_seconds = started.elapsed().as_secs_f64();
    let duration = Duration::from_secs(args.duration);
    let mut results = Vec::new();
    for &phase in &args.phases {
        let bench = Arc::clone(&bench);
        let calls = Arc::new(AtomicU64::new(0));
        let files = args.concurrency.max(1) as u64;
        let mut row = measure(args.concurrency, duration, args.server_pid, move || {
            let bench = Arc::clone(&bench);
            // The append phase spreads its records over one file per client, in turn.
            let file = calls.fetch_add(1, Ordering::Relaxed) % files;
            async move { bench.one(phase, file).await }
        })
        .await;
        if let Value::Object(map) = &mut row {
            map.insert("op".into(), Value::from(name(phase)));
            map.remove("conflicts");
        }
        results.push(row);
    }
    say_json(&json!({
        "started_at": noema_client::ledger::utc_seconds(OffsetDateTime::now_utc()),
        "concurrency": args.concurrency,
        "client_threads": super::bench::client_threads(),
        "seconds_per_phase": args.duration,
        "target": base,
        "tenant": bench.tenant,
        "fill": {
            "entries": entries, "files": files, "capsules": SELECTOR_KINDS.len(),
            "seconds": (fill_seconds * 10.0).round() / 10.0,
        },
        "results": results,
        "server_peak_rss_mb": args.server_pid.and_then(peak_rss_mb),
    }));
    Ok(())
}

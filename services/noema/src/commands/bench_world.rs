//! `noema bench world`: the world kernel in this process over a fresh database (a SQLite
//! file in a temporary directory, or `--database-url`), with the toys — the scripted LLM
//! and the toy weather source — in a process of their own (`noema toys serve`, this same
//! binary, started as a child on a loopback port), running a generated scenario of N agents,
//! each with one ambient source of its own (the toy weather, before its workflow) and one
//! LLM generation per turn that returns a WorldPatch changing its state.
//!
//! Two phases, reported as JSON, never asserted anywhere:
//! - `ordered`: `per_subject_ordered`, the LLM answering at once — the kernel's own cost per
//!   subject per turn (its HTTP calls to the toys, streaming, validation, the durable rows
//!   of every invocation and LLM call, the commit);
//! - `concurrent`: `per_subject_concurrent` with `world.max_concurrent_subjects`, the LLM
//!   taking `--llm-latency-ms` per answer — how long one turn of N subjects takes.
//!
//! Medians over the turns. CPU time (user and system, every thread, from /proc) is reported
//! per process: `kernel_*` is this process's — the kernel, its SQLite, the client side of its
//! HTTP calls, which are all the kernel's overhead — and `toys_*` the toys process's, the
//! scripted LLM's and the weather's own work, which a real deployment does not pay.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use noema_store::Database;
use noema_toys::scenario::{PARK, PARK_MODEL_ALIAS, PARK_URL_ENVS, WORLD_PATCH_SCHEMA, substitute};
use noema_world::domain::component::{ComponentKind, WORLD_PATCH_SCHEMA_NAME};
use noema_world::ops::kernel::TurnResult;
use noema_world::ops::{Caller, World};
use noema_world::{MIGRATIONS, WorldBuilder, WorldOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use super::bench::cpu_seconds;
use super::{CommandError, say_json};

#[derive(Debug, Args)]
pub struct WorldBenchArgs {
    /// Agents in the scenario.
    #[arg(long, default_value_t = 100)]
    pub subjects: usize,
    /// Turns per phase (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub turns: usize,
    /// The scripted LLM's latency per answer in the concurrent phase.
    #[arg(long, default_value_t = 200)]
    pub llm_latency_ms: u64,
    /// Subjects run at once in the concurrent phase.
    #[arg(long, default_value_t = 32)]
    pub max_concurrent_subjects: u32,
    /// A database for the kernel (default: a SQLite file in a temporary directory). A
    /// Postgres URL must name an empty database.
    #[arg(long)]
    pub database_url: Option<String>,
}

/// Every subject answers every turn with a patch that changes its own state: the LLM
/// script (`noema toys serve --script`).
fn script(subjects: &[String], turns: usize, latency_ms: u64) -> Value {
    let scripts: Vec<Value> = subjects
        .iter()
        .map(|id| {
            let outputs: Vec<Value> = (1..=turns)
                .map(|turn| {
                    json!({"json": {"kind": "final_patch", "patch": {
                        "narration": format!("{id} looks at the sky."),
                        "effects": [{"op": "set_entity_state", "entity_id": id,
                                     "state": format!("looked at the sky {turn} times")}]
                    }}})
                })
                .collect();
            json!({"subject": id, "outputs": outputs})
        })
        .collect();
    json!({"latency_ms": latency_ms, "chunk_chars": 0, "scripts": scripts})
}

/// How long the toys process may take to say where it listens.
const TOYS_START_TIMEOUT: Duration = Duration::from_secs(30);

/// The toys in a process of their own: `noema toys serve` of this binary, killed when
/// dropped.
struct ToysProcess {
    child: Child,
    pid: String,
    url: String,
    /// Its standard output, kept open so its remaining lines have somewhere to go.
    _stdout: Lines<BufReader<ChildStdout>>,
}

impl ToysProcess {
    /// Starts the toys with the LLM script in file `script` and waits for their URL.
    async fn start(script: &Path) -> Result<ToysProcess, CommandError> {
        let exe =
            std::env::current_exe().map_err(|e| CommandError::found("this program's path", e))?;
        let mut child = tokio::process::Command::new(exe)
            .args(["toys", "serve", "--addr", "127.0.0.1:0", "--script"])
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CommandError::found("starting the toys process", e))?;
        let pid = child
            .id()
            .ok_or_else(|| CommandError::found("the toys process", "it ended at once"))?
            .to_string();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| CommandError::found("the toys process", "no standard output"))?;
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(TOYS_START_TIMEOUT, async {
            // `noema toys serve` prints `TOYS  <url>` first, once it listens.
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("TOYS") {
                    return Ok(Some(url.trim().to_owned()));
                }
            }
            Ok::<_, std::io::Error>(None)
        })
        .await
        .map_err(|_| CommandError::found("the toys process", "it did not say its URL in time"))?
        .map_err(|e| CommandError::found("the toys process's output", e))?
        .ok_or_else(|| CommandError::found("the toys process", "it ended before listening"))?;
        Ok(ToysProcess {
            child,
            pid,
            url,
            _stdout: lines,
        })
    }

    /// CPU seconds the toys process has used so far.
    fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds(&self.pid)
    }

    async fn stop(mut self) {
        // The toys keep nothing worth a graceful end.
        let _ = self.child.kill().await;
    }
}

/// The workflow: the toy weather before each subject's workflow, visible to it alone; one
/// LLM generation returning a WorldPatch.
fn workflow(subjects: &[String], execution: &str, names: &BTreeMap<String, String>) -> Value {
    let ambient: Vec<Value> = subjects
        .iter()
        .map(|id| {
            json!({
                "id": format!("{id}_weather"),
                "source_ref": {"hash": names["toy-weather-source-hash"]},
                "run": "before_subject_workflow",
                "scope": {"entity_id": id},
                "visible_to": {"entity_id": id},
                "request_template": {"environment_label": "park",
                                     "turn": {"$from": "/world/attempted_turn"}},
                "result_schema_ref": {"hash": names["weather-result-schema-hash"]},
                "inject_as": format!("/ambient/entities/{id}/weather")
            })
        })
        .collect();
    json!({
        "version": 1,
        "execution": execution,
        "ambient_sources": ambient,
        "nodes": [{
            "id": "act",
            "type": "llm_tool_loop",
            "llm_source_ref": {"hash": names["llm-source-hash"]},
            "prompt_template": {"messages": [
                {"role": "system", "content": "Return a final WorldPatch for the acting subject."},
                {"role": "user", "content": "Acting subject:\n{{subject.rendered}}\n\nAmbient context:\n{{ambient.visible}}"}
            ]},
            "available_tools": [],
            "max_generation_attempts": 1,
            "max_tool_calls": 0,
            "final_schema_ref": {"hash": names[WORLD_PATCH_SCHEMA]}
        }],
        "apply": {"from": "act.final"}
    })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

struct Phase {
    name: &'static str,
    execution: &'static str,
    latency_ms: u64,
}

pub async fn bench_world(args: &WorldBenchArgs) -> Result<(), CommandError> {
    if args.subjects == 0 || args.turns == 0 {
        return Err(CommandError::Usage(
            "--subjects and --turns must be at least 1".into(),
        ));
    }
    let subjects: Vec<String> = (0..args.subjects)
        .map(|i| format!("agent_{i:04}"))
        .collect();
    let mut report = serde_json::Map::new();
    report.insert("subjects".into(), json!(args.subjects));
    report.insert("turns".into(), json!(args.turns));
    for phase in [
        Phase {
            name: "ordered",
            execution: "per_subject_ordered",
            latency_ms: 0,
        },
        Phase {
            name: "concurrent",
            execution: "per_subject_concurrent",
            latency_ms: args.llm_latency_ms,
        },
    ] {
        let result = run_phase(args, &subjects, &phase).await?;
        report.insert(phase.name.into(), result);
    }
    say_json(&Value::Object(report));
    Ok(())
}

async fn run_phase(
    args: &WorldBenchArgs,
    subjects: &[String],
    phase: &Phase,
) -> Result<Value, CommandError> {
    let dir = tempfile::Builder::new()
        .prefix("noema-bench-world-")
        .tempdir()
        .map_err(|e| CommandError::found("a temporary directory", e))?;
    let script_path = dir.path().join("llm-script.json");
    std::fs::write(
        &script_path,
        script(subjects, args.turns, phase.latency_ms).to_string(),
    )
    .map_err(|source| CommandError::File {
        path: script_path.display().to_string(),
        source,
    })?;
    let toys = ToysProcess::start(&script_path).await?;
    let url = match &args.database_url {
        Some(url) => url.clone(),
        None => format!("sqlite://{}", dir.path().join("world.db").display()),
    };
    let db = Database::connect(&url)
        .await
        .map_err(|e| CommandError::found("the database", e))?;
    db.migrate(&MIGRATIONS)
        .await
        .map_err(|e| CommandError::found("migrations", e))?;
    let mut options = WorldOptions::default();
    for name in PARK_URL_ENVS {
        options.source_env.insert(name.to_owned(), toys.url.clone());
    }
    options.llm.base_url = format!("{}/v1", toys.url);
    options
        .llm
        .models
        .insert(PARK_MODEL_ALIAS.to_owned(), "toy".to_owned());
    options.max_concurrent_subjects = args.max_concurrent_subjects;
    let world = WorldBuilder::new(db.clone(), options)
        .build()
        .await
        .map_err(|e| CommandError::found("the world service", e))?;
    let slug = install(&world, subjects, phase.execution).await?;

    let caller = Caller::local("bench:world");
    let (mut wall_ms, mut kernel_cpu_ms, mut toys_cpu_ms) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.turns {
        let kernel_before = cpu_seconds("self");
        let toys_before = toys.cpu_seconds();
        let started = Instant::now();
        let outcome = world
            .run_turn(&slug, &caller)
            .await
            .map_err(|e| CommandError::found("run_turn", e))?;
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        if let TurnResult::Failed(failure) = outcome.result {
            return Err(CommandError::found("a benchmark turn failed", failure));
        }
        wall_ms.push(elapsed);
        if let (Some(before), Some(after)) = (kernel_before, cpu_seconds("self")) {
            kernel_cpu_ms.push((after - before) * 1000.0);
        }
        if let (Some(before), Some(after)) = (toys_before, toys.cpu_seconds()) {
            toys_cpu_ms.push((after - before) * 1000.0);
        }
    }
    drop(world);
    db.close().await;
    toys.stop().await;
    drop(dir);
    #[allow(clippy::cast_precision_loss)]
    let n = subjects.len() as f64;
    let turn_ms = median(wall_ms);
    let kernel_cpu = median(kernel_cpu_ms);
    let toys_cpu = median(toys_cpu_ms);
    Ok(json!({
        "execution": phase.execution,
        "llm_latency_ms": phase.latency_ms,
        "max_concurrent_subjects": args.max_concurrent_subjects,
        "turn_ms_median": round(turn_ms),
        "per_subject_ms_median": round(turn_ms / n),
        "kernel_cpu_ms_per_turn_median": round(kernel_cpu),
        "kernel_cpu_ms_per_subject_median": round(kernel_cpu / n),
        "toys_cpu_ms_per_turn_median": round(toys_cpu),
        "toys_cpu_ms_per_subject_median": round(toys_cpu / n),
    }))
}

fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// The park's weather and LLM sources, the generated workflow, a profile and a scenario of
/// `subjects` agents; returns the world's slug.
async fn install(
    world: &Arc<World>,
    subjects: &[String],
    execution: &str,
) -> Result<String, CommandError> {
    let caller = Caller::local("bench:world");
    let builtin = world
        .builtin_component(WORLD_PATCH_SCHEMA_NAME)
        .await
        .map_err(|e| CommandError::found("the WorldPatch schema", e))?;
    let mut names = BTreeMap::from([(WORLD_PATCH_SCHEMA.to_owned(), builtin.hash.to_string())]);
    let wanted = [
        "weather-result-schema-hash",
        "toy-weather-source-hash",
        "llm-source-hash",
    ];
    for component in PARK.iter().filter(|c| wanted.contains(&c.name)) {
        let document = component
            .document()
            .map_err(|e| CommandError::found(component.name, e))?;
        let kind = ComponentKind::ALL
            .into_iter()
            .find(|k| k.as_str() == component.kind)
            .ok_or_else(|| CommandError::found(component.name, "unknown kind"))?;
        let (hash, _) = world
            .put_component(kind, &substitute(&document, &names), &caller)
            .await
            .map_err(|e| CommandError::found(component.name, e))?;
        names.insert(component.name.to_owned(), hash.to_string());
    }
    let put = |kind: ComponentKind, document: Value| {
        let world = Arc::clone(world);
        let caller = caller.clone();
        async move {
            world
                .put_component(kind, &document, &caller)
                .await
                .map(|(hash, _)| hash)
                .map_err(|e| CommandError::found(kind.as_str(), e))
        }
    };
    let workflow = put(
        ComponentKind::CognitionWorkflow,
        workflow(subjects, execution, &names),
    )
    .await?;
    let profile = put(
        ComponentKind::CognitionProfile,
        json!({"workflow_ref": {"hash": workflow.as_str()}}),
    )
    .await?;
    let entities: Vec<Value> = subjects
        .iter()
        .map(|id| {
            json!({"id": id, "kind": "agent", "environment_label": "park",
                   "state": "standing in the park",
                   "cognition_profile_ref": {"hash": profile.as_str()}})
        })
        .collect();
    let scenario = json!({
        "label": "bench",
        "environments": [{"label": "park", "content": "A wide, empty park."}],
        "simulation": {"start": "2026-01-01T08:00:00Z", "turn_seconds": 600},
        "entities": entities
    });
    let (scenario, _) = world
        .assemble_scenario(&scenario, &caller)
        .await
        .map_err(|e| CommandError::found("the scenario", e))?;
    let slug = "bench".to_owned();
    world
        .create_world(&slug, &scenario, &caller)
        .await
        .map_err(|e| CommandError::found("the world", e))?;
    Ok(slug)
}

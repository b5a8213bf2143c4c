//! The world kernel from the command line, against live processes: `noema toys serve`
//! writes the settings that point a world service at its toys, `noema up` runs on them,
//! and the world commands — `world demo park`, `component put|get`, `scenario assemble`,
//! `world create|run|show|diff|verify` — drive and read it; `world verify` exits 1 once a
//! stored turn has been edited under the service.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const NOEMA: &str = env!("CARGO_BIN_EXE_noema");

/// A `noema` command with a clean environment layer (no NOEMA__ leaking in).
fn noema() -> Command {
    let mut cmd = Command::new(NOEMA);
    for (key, _) in std::env::vars() {
        if key.starts_with("NOEMA") {
            cmd.env_remove(key);
        }
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every JSON document a command printed, in order.
fn documents(out: &Output) -> Vec<Value> {
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// Reads `lines` until one starts with `prefix`; returns the rest of it.
fn line_after(lines: &mut Lines<BufReader<ChildStdout>>, prefix: &str) -> String {
    loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the process exited before printing {prefix:?}"))
            .unwrap();
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.to_owned();
        }
    }
}

struct Stopped(Vec<Child>);

impl Drop for Stopped {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let started = Instant::now();
            while child.try_wait().ok().flatten().is_none() {
                if started.elapsed() > Duration::from_secs(20) {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

async fn tamper_with_turn_one(db: &Path) {
    let url = format!("sqlite://{}", db.display());
    let noema_store::Database::Sqlite(pool) = noema_store::Database::connect(&url).await.unwrap()
    else {
        panic!("{url} is not SQLite");
    };
    // The append-only trigger stands in the way; someone with the file drops it.
    sqlx::query("DROP TRIGGER turns_immutable_update")
        .execute(&pool)
        .await
        .unwrap();
    let edited = sqlx::query(
        "UPDATE turns SET record = REPLACE(record, 'holding a candy bar', 'holding two') \
         WHERE world_slug = 'park-demo' AND turn = 1",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(edited.rows_affected(), 1);
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_world_commands_drive_a_live_node_against_the_toys() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("toys.toml");
    let data = dir.path().join("data");
    let mut running = Stopped(Vec::new());

    let mut toys = noema()
        .args([
            "toys",
            "serve",
            "--write-config",
            settings.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut toy_lines = BufReader::new(toys.stdout.take().unwrap()).lines();
    running.0.push(toys);
    let toys_url = line_after(&mut toy_lines, "TOYS  ");
    assert_eq!(
        line_after(&mut toy_lines, "NOEMA__WORLD__LLM__BASE_URL="),
        format!("{toys_url}/v1")
    );
    assert!(
        std::fs::read_to_string(&settings)
            .unwrap()
            .contains(&toys_url)
    );

    let log = std::fs::File::create(dir.path().join("noema.log")).unwrap();
    let mut node = noema()
        .args(["--config", settings.to_str().unwrap(), "up"])
        .args(["--data-dir", data.to_str().unwrap()])
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let mut node_lines = BufReader::new(node.stdout.take().unwrap()).lines();
    running.0.push(node);
    let grpc = line_after(&mut node_lines, "gRPC  ");
    let client = [
        "--endpoint".to_owned(),
        format!("http://{grpc}"),
        "--data-dir".to_owned(),
        data.display().to_string(),
    ];
    let run = |args: &[&str]| noema().args(args).args(&client).output().unwrap();

    // The park end to end: 20 components, three committed turns, turn 1's diff.
    let out = run(&["world", "demo", "park"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let printed = documents(&out);
    let scenario = printed[0]["scenario"].as_str().unwrap().to_owned();
    let turns: Vec<&Value> = printed[1..4].iter().map(|d| &d["turn"]).collect();
    assert_eq!(turns, [&json!(1), &json!(2), &json!(3)]);
    let diff = &printed[4];
    assert_eq!(diff["patches"].as_array().unwrap().len(), 2);
    assert_eq!(
        diff["entities"]["bob"]["after"]["state"],
        json!("holding a candy bar")
    );

    // Components: 201-like then idempotent, read back as stored.
    let schema = dir.path().join("schema.json");
    std::fs::write(&schema, r#"{"type": "object", "required": ["x"]}"#).unwrap();
    let out = run(&["component", "put", "json_schema", schema.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let put = documents(&out).remove(0);
    assert_eq!(put["created"], json!(true));
    let out = run(&["component", "put", "json_schema", schema.to_str().unwrap()]);
    assert_eq!(
        documents(&out)[0],
        json!({"hash": put["hash"], "created": false})
    );
    let out = run(&[
        "component",
        "get",
        "json_schema",
        put["hash"].as_str().unwrap(),
    ]);
    assert_eq!(
        documents(&out)[0],
        json!({"type": "object", "required": ["x"]})
    );
    let out = run(&["component", "put", "no_such_kind", schema.to_str().unwrap()]);
    assert!(!out.status.success());

    // The park's scenario, read back and assembled again: the same hash, nothing new.
    let out = run(&["component", "get", "scenario", &scenario]);
    let scenario_file = dir.path().join("scenario.json");
    std::fs::write(&scenario_file, &out.stdout).unwrap();
    let out = run(&["scenario", "assemble", scenario_file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        documents(&out)[0],
        json!({"hash": scenario, "created": false})
    );

    // A second world of it; the toy LLM's script is spent, so its turn fails loudly
    // (exit 1, nothing committed).
    let out = run(&["world", "create", "park-two", "--scenario", &scenario]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(documents(&out)[0]["current_turn"], json!(0));
    let out = run(&["world", "run", "park-two"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert_eq!(documents(&out)[0]["status"], json!("failed"));

    // Show, diff, verify.
    let out = run(&["world", "show", "park-demo"]);
    assert_eq!(documents(&out)[0]["current_turn"], json!(3));
    let out = run(&["world", "show", "park-demo", "--turn", "1"]);
    let turn1 = documents(&out).remove(0);
    assert_eq!(turn1["turn"], json!(1));
    assert_eq!(turn1["record"]["patches"].as_array().unwrap().len(), 2);
    let out = run(&["world", "diff", "park-demo", "1"]);
    assert_eq!(&documents(&out)[0], diff);
    let out = run(&["world", "verify", "park-demo"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert_eq!(documents(&out)[0]["ok"], json!(true));

    tamper_with_turn_one(&data.join("world.db")).await;
    let out = run(&["world", "verify", "park-demo"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let report = documents(&out).remove(0);
    assert_eq!(
        (&report["ok"], &report["broken_turn"]),
        (&json!(false), &json!(1))
    );
}

//! CogniRelay's own client hooks against Noema's gateway: the continuity save hook
//! (template → dry-run → write → readback, facts, doctor) and the retrieval hook (startup
//! read, then context retrieval), run as the PyPI package `cognirelay==1.4.15` ships them. scripts/test installs
//! the package (scripts/lib/cognirelay_hooks.sh) and says where through
//! NOEMA_COGNIRELAY_HOOKS and NOEMA_COGNIRELAY_PYTHON; without them these tests fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use noema_e2e::{Backend, Shape, TestCluster};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_on_sqlite_all_in_one() {
    run(Backend::Sqlite, Shape::AllInOne).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_on_postgres_split() {
    run(Backend::PostgresS3, Shape::Split).await;
}

async fn run(backend: Backend, shape: Shape) {
    let cluster = noema_e2e::cluster(backend, shape).await;
    save_and_read_back(&cluster).await;
    cluster.shutdown().await.unwrap();
}

/// Where the hooks are, from scripts/test.
fn hooks() -> (PathBuf, PathBuf) {
    let var =
        |name: &str| {
            std::env::var_os(name).map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "{name} is not set: run through scripts/test (or `scripts/test --backends-only \
                 cargo nextest run ...`), which installs PyPI cognirelay==1.4.15 and sets it"
            )
        })
        };
    (
        var("NOEMA_COGNIRELAY_HOOKS"),
        var("NOEMA_COGNIRELAY_PYTHON"),
    )
}

/// One hook run: its exit code and its stdout envelope.
async fn hook(
    script: &str,
    args: &[&str],
    env: &[(&str, &str)],
    input: Option<&Value>,
) -> (i32, Value) {
    let (dir, python) = hooks();
    let mut command = tokio::process::Command::new(python);
    command
        .arg(dir.join(script))
        .args(args)
        .env_remove("COGNIRELAY_BASE_URL")
        .env_remove("COGNIRELAY_TOKEN")
        .env_remove("COGNIRELAY_SUBJECT_KIND")
        .env_remove("COGNIRELAY_SUBJECT_ID")
        .env_remove("COGNIRELAY_CONTEXT_RETRIEVE")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("the hook starts");
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        if let Some(input) = input {
            stdin
                .write_all(&serde_json::to_vec(input).unwrap())
                .await
                .unwrap();
        }
    }
    let output = child.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let envelope: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{script} {args:?}: stdout is not one JSON object ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap_or(-1), envelope)
}

/// The hook's template with every placeholder replaced by what an agent would write.
fn filled(mut payload: Value, updated_at: &str, priority: &str) -> Value {
    let capsule = &mut payload["capsule"];
    capsule["updated_at"] = json!(updated_at);
    capsule["verified_at"] = json!(updated_at);
    capsule["source"]["producer"] = json!("noema-hook-test");
    let continuity = &mut capsule["continuity"];
    continuity["top_priorities"] = json!([priority]);
    continuity["active_constraints"] = json!(["stay within the issue"]);
    continuity["open_loops"] = json!(["run the hook tests"]);
    continuity["stance_summary"] =
        json!("Checking that CogniRelay's own hooks work against Noema.");
    payload
}

async fn save_and_read_back(cluster: &TestCluster) {
    let token = cluster
        .issue_token("hook-agent", &["read:files", "write:projects", "search"])
        .await
        .unwrap();
    let stranger = cluster
        .issue_token("other-agent", &["read:files", "write:projects"])
        .await
        .unwrap();
    let url = cluster.rest_url.as_str();
    let net = [
        ("COGNIRELAY_BASE_URL", url),
        ("COGNIRELAY_TOKEN", token.as_str()),
    ];
    let subject = ["--subject-kind", "thread", "--subject-id", "issue-15"];
    let save = "cognirelay_continuity_save_hook.py";

    // template (offline) → the agent fills it in → dry-run (offline) accepts it.
    let (code, template) = hook(save, &[&["template"], &subject[..]].concat(), &[], None).await;
    assert_eq!(code, 0, "{template}");
    let payload = filled(
        template["result"]["payload"].clone(),
        "2026-01-01T00:00:10Z",
        "ship the REST routes",
    );
    let (code, dry) = hook(save, &["dry-run", "--input", "-"], &[], Some(&payload)).await;
    assert_eq!((code, &dry["ok"]), (0, &json!(true)), "{dry}");

    // write: the upsert through Noema's gateway.
    let (code, written) = hook(save, &["write", "--input", "-"], &net, Some(&payload)).await;
    assert_eq!(code, 0, "{written}");
    let upsert = &written["result"]["upsert_response"];
    assert_eq!(upsert["ok"], true, "{written}");
    assert_eq!(upsert["created"], true, "{written}");
    assert_eq!(upsert["path"], "memory/continuity/thread-issue-15.json");
    assert_eq!(upsert["capsule_sha256"].as_str().unwrap().len(), 64);
    // The same payload again is a no-op, acknowledged.
    let (code, again) = hook(save, &["write", "--input", "-"], &net, Some(&payload)).await;
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["result"]["upsert_response"]["created"], false);
    assert_eq!(
        again["result"]["upsert_response"]["capsule_sha256"],
        upsert["capsule_sha256"]
    );
    // An older capsule is refused with CogniRelay's 409, which the hook reports as such.
    let stale = filled(payload.clone(), "2026-01-01T00:00:05Z", "go back in time");
    let (code, refused) = hook(save, &["write", "--input", "-"], &net, Some(&stale)).await;
    assert_eq!(code, 4, "{refused}");
    assert_eq!(refused["result"]["status"], 409, "{refused}");

    // readback and doctor: the startup view of what was written.
    for mode in ["readback", "doctor"] {
        let (code, read) = hook(save, &[&[mode], &subject[..]].concat(), &net, None).await;
        assert_eq!(code, 0, "{read}");
        assert_eq!(read["ok"], true, "{read}");
        assert_eq!(read["result"]["expected_subject_matched"], true, "{read}");
        let readback = &read["result"]["readback"];
        assert_eq!(readback["source_state"], "active", "{read}");
        assert_eq!(
            readback["capsule"]["continuity"]["top_priorities"],
            json!(["ship the REST routes"])
        );
        assert!(read["result"]["trust_signals"].is_object(), "{read}");
        assert!(readback["startup_summary"].is_object(), "{read}");
    }
    // facts: the current state is read, no warning.
    let (code, facts) = hook(save, &[&["facts"], &subject[..]].concat(), &net, None).await;
    assert_eq!(code, 0, "{facts}");
    assert_eq!(facts["warnings"], json!([]), "{facts}");
    assert_eq!(
        facts["result"]["current_state"]["capsule"]["subject_id"], "issue-15",
        "{facts}"
    );

    // The retrieval hook's startup read (context retrieval off).
    let retrieval = "cognirelay_retrieval_hook.py";
    let (code, startup) = hook(
        retrieval,
        &[&["--no-context-retrieve"], &subject[..]].concat(),
        &net,
        None,
    )
    .await;
    assert_eq!(code, 0, "{startup}");
    assert_eq!(
        startup["result"]["startup"]["capsule"]["continuity"]["open_loops"],
        json!(["run the hook tests"]),
        "{startup}"
    );

    // The retrieval hook with context retrieval on: the startup read, then
    // `/v1/context/retrieve` for the same subject. The capsule says it was updated on
    // 2026-01-01, long enough ago to be `expired_by_age`, so retrieval leaves it out with
    // CogniRelay's warning, as §10 says (the startup read above still shows it).
    let (code, both) = hook(
        retrieval,
        &[
            &["--context-retrieve", "--task", "resume the hook tests"],
            &subject[..],
        ]
        .concat(),
        &net,
        None,
    )
    .await;
    assert_eq!(code, 0, "{both}");
    let bundle = &both["result"]["context"]["bundle"];
    assert_eq!(bundle["task"], "resume the hook tests", "{both}");
    let state = &bundle["continuity_state"];
    assert_eq!(
        state["requested_selectors"],
        json!(["thread:issue-15"]),
        "{both}"
    );
    assert_eq!(
        state["omitted_selectors"],
        json!(["thread:issue-15"]),
        "{both}"
    );
    assert_eq!(state["warnings"], json!(["continuity_expired"]), "{both}");
    assert_eq!(
        bundle["graph_context"]["anchor"]["id"], "thread:issue-15",
        "{both}"
    );

    // Another tenant's token finds nothing there: the startup read answers as for a
    // subject that does not exist (no capsule, source_state missing).
    let theirs = [
        ("COGNIRELAY_BASE_URL", url),
        ("COGNIRELAY_TOKEN", stranger.as_str()),
    ];
    let (code, missing) = hook(save, &[&["readback"], &subject[..]].concat(), &theirs, None).await;
    assert_eq!(code, 0, "{missing}");
    assert_eq!(
        missing["result"]["readback"]["source_state"], "missing",
        "{missing}"
    );
}

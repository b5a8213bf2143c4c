//! The release checklist (seed §12): `GET`-equivalent `CheckRelease` and `noema release
//! check` fail on each of the seven items when that item alone is broken, and pass when
//! none is. Items the API cannot break (it refuses to) are broken the way they would be
//! in life: rows written to the database directly, as another version or an operator with
//! database access would, then put back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_client::pb::orchestrator as pb;
use noema_core::Reason;
use noema_e2e::governed::{
    Governed, approval, approver, connect, eval, failure, json_of, plan, step, unique,
};
use noema_e2e::governed_cases;
use noema_store::Database;
use serde_json::{Value, json};

governed_cases!(the_release_check_fails_on_each_item_alone,);

const ITEMS: [&str; 7] = [
    "schema_version_mismatch",
    "risk_matrix_not_loaded",
    "approval_bypass_detected",
    "missing_execution_trace",
    "eval_gate_failed",
    "regression_suite_failed",
    "rollback_path_unavailable",
];

/// The failing items, through gRPC and through `noema release check`, which must agree.
async fn failing(g: &Governed) -> Vec<String> {
    let noema = connect(&g.cluster, &g.cluster.owner_token).await;
    let report = noema
        .orchestrator()
        .check_release(pb::CheckReleaseRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        report
            .items
            .iter()
            .map(|i| i.item.as_str())
            .collect::<Vec<_>>(),
        ITEMS
    );
    let failing: Vec<String> = report
        .items
        .iter()
        .filter(|i| !i.ok)
        .map(|i| {
            assert!(!i.details.is_empty(), "{} fails without details", i.item);
            i.item.clone()
        })
        .collect();
    assert_eq!(report.ok, failing.is_empty());

    let endpoint = g.cluster.endpoint("orchestrator").unwrap().to_owned();
    let token = g.cluster.owner_token.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(noema_test_support::noema_bin().unwrap())
            .args([
                "release",
                "check",
                "--endpoint",
                &endpoint,
                "--token",
                &token,
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.success(), failing.is_empty());
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stdout["ok"], report.ok);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for item in ITEMS {
        assert_eq!(
            stderr.contains(item),
            failing.iter().any(|f| f == item),
            "{item} in: {stderr}"
        );
    }
    failing
}

/// The orchestrator's database, as an operator would reach it.
async fn database(g: &Governed) -> Database {
    let spec = g.cluster.registry.get("orchestrator").unwrap();
    let url = g.cluster.config().database_url(spec);
    Database::connect(&url).await.unwrap()
}

async fn sql(db: &Database, statement: &str) {
    match db {
        Database::Sqlite(pool) => sqlx::query(statement).execute(pool).await.map(drop),
        Database::Postgres(pool) => sqlx::query(statement).execute(pool).await.map(drop),
    }
    .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

/// Lets the operator edit an append-only table (the triggers would refuse).
async fn allow_edits(db: &Database, table: &str) {
    match db {
        Database::Sqlite(_) => {
            sql(db, &format!("DROP TRIGGER IF EXISTS {table}_no_delete")).await;
            sql(db, &format!("DROP TRIGGER IF EXISTS {table}_no_update")).await;
        }
        Database::Postgres(_) => {
            sql(
                db,
                &format!("DROP TRIGGER IF EXISTS {table}_append_only ON {table}"),
            )
            .await;
        }
    }
}

fn noop() -> Value {
    json!([step("s", "noema.noop", &[], Value::Null)])
}

/// A full lifecycle of an L0 plan, evaluated with `eval_result`; its request id.
async fn evaluated(g: &Governed, eval_result: Value) -> String {
    let noema = connect(&g.cluster, &g.cluster.owner_token).await;
    let id = noema
        .plan(&plan("agent:alice", noop()))
        .await
        .unwrap()
        .request_id;
    noema.risk(&id).await.unwrap();
    noema.execute(&id).await.unwrap();
    // A fresh evaluator each time: one evaluator's votes in a row would be suppressed by
    // the anti-abuse cooldown, and a suppressed vote moves no suite.
    noema
        .evaluate(&id, &unique("agent:eve"), &eval_result)
        .await
        .unwrap();
    id
}

async fn the_release_check_fails_on_each_item_alone(g: &Governed) {
    let noema = connect(&g.cluster, &g.cluster.owner_token).await;
    // A fresh system has no evaluation of its required suite: the gate is not passed.
    assert_eq!(failing(g).await, ["eval_gate_failed"]);
    evaluated(g, eval(0.9, true, false)).await;
    // An approved external send that ran.
    let ops = approver(&g.cluster, "human:ops", 42).await;
    let sent = noema
        .plan(&plan(
            "agent:alice",
            json!([step(
                "n",
                "team.notify",
                &["team:notify"],
                json!({"marker": unique("m")})
            )]),
        ))
        .await
        .unwrap()
        .request_id;
    noema.risk(&sent).await.unwrap();
    noema
        .approve(
            &ops.key,
            &approval("human:ops", "approve", &["team:notify"], 0.0),
            &sent,
        )
        .await
        .unwrap();
    assert_eq!(
        json_of(&noema.execute(&sent).await.unwrap().exec_trace)["status"],
        "success"
    );
    assert!(failing(g).await.is_empty(), "nothing is broken yet");

    let db = database(g).await;

    // 1. A stored object of a schema version this server does not know.
    let alien = noema_core::content_id::ContentId::of_bytes(b"from the future").to_string();
    sql(
        &db,
        &format!(
            "INSERT INTO objects (content_id, object_type, object_id, schema_version, body, \
             created_at) VALUES ('{alien}', 'plan', 'p', '0.2', '{{}}', 0)"
        ),
    )
    .await;
    assert_eq!(failing(g).await, ["schema_version_mismatch"]);
    allow_edits(&db, "objects").await;
    sql(
        &db,
        &format!("DELETE FROM objects WHERE content_id = '{alien}'"),
    )
    .await;
    assert!(failing(g).await.is_empty());

    // 2. The policy file stops loading: the running policy stays, the item fails until a
    //    reload succeeds.
    std::fs::write(&g.policy_file, "{\"schema_version\": \"0.1\"}").unwrap();
    let f = failure(
        noema
            .orchestrator()
            .reload_policy(pb::ReloadPolicyRequest {})
            .await
            .map_err(noema_client::ClientError::from),
    );
    assert_eq!(f.reason, Reason::PolicyNotLoaded);
    assert!(
        f.message.starts_with("risk matrix not loaded"),
        "{}",
        f.message
    );
    assert_eq!(failing(g).await, ["risk_matrix_not_loaded"]);
    g.reload(|_| {}).await.unwrap();
    assert!(failing(g).await.is_empty());

    // 3. The approval the external send ran under disappears.
    allow_edits(&db, "approvals").await;
    sql(
        &db,
        "CREATE TABLE approvals_kept AS SELECT * FROM approvals",
    )
    .await;
    sql(
        &db,
        &format!("DELETE FROM approvals WHERE request_id = '{sent}'"),
    )
    .await;
    assert_eq!(failing(g).await, ["approval_bypass_detected"]);
    sql(&db, "INSERT INTO approvals SELECT * FROM approvals_kept").await;
    sql(&db, "DROP TABLE approvals_kept").await;
    assert!(failing(g).await.is_empty());

    // 4. An execution claimed and never traced (the process died in between).
    let claimed = noema
        .plan(&plan("agent:alice", noop()))
        .await
        .unwrap()
        .request_id;
    noema.risk(&claimed).await.unwrap();
    sql(
        &db,
        &format!("UPDATE requests SET state = 'EXECUTED' WHERE request_id = '{claimed}'"),
    )
    .await;
    assert_eq!(failing(g).await, ["missing_execution_trace"]);
    sql(
        &db,
        &format!("UPDATE requests SET state = 'RISKED' WHERE request_id = '{claimed}'"),
    )
    .await;
    assert!(failing(g).await.is_empty());

    // 5. The required suite's latest evaluation fails the gate (pass = false).
    evaluated(g, eval(0.9, false, false)).await;
    assert_eq!(failing(g).await, ["eval_gate_failed"]);
    evaluated(g, eval(0.9, true, false)).await;
    assert!(failing(g).await.is_empty());

    // 6. Its latest evaluation is a regression (flagged; pass and score fine).
    evaluated(g, eval(0.95, true, true)).await;
    assert_eq!(failing(g).await, ["regression_suite_failed"]);
    // Found by the server too: below the suite's baseline (0.9, the best passing score so
    // far) minus the tolerance (0.02), whatever the evaluator says.
    evaluated(g, eval(0.85, true, false)).await;
    assert_eq!(failing(g).await, ["regression_suite_failed"]);
    evaluated(g, eval(0.9, true, false)).await;
    assert!(failing(g).await.is_empty());

    // 7. A step failed and nothing rolled it back.
    let broken = noema
        .plan(&plan(
            "agent:alice",
            json!([step("f", "files.false", &[], Value::Null)]),
        ))
        .await
        .unwrap()
        .request_id;
    noema.risk(&broken).await.unwrap();
    noema.execute(&broken).await.unwrap();
    assert_eq!(failing(g).await, ["rollback_path_unavailable"]);
}

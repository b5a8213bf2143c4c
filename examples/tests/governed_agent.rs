//! The governed agent plans an external send, waits while a human approves it with a key
//! registered in identity, and executes: the webhook receives the message once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use noema_client::{Noema, SigningKeyPair};
use noema_test_support::{Backend, Shape, TestCluster};
use serde_json::{Value, json};

/// The default policy plus a webhook on `localhost`, which is not on the internal-hosts
/// list: sending to it is an external send (L2), so it needs an approval.
fn policy(port: u16) -> String {
    let mut policy: Value = serde_json::from_str(include_str!(
        "../../services/orchestrator/policy/default.json"
    ))
    .unwrap();
    policy["internal_hosts"] = json!(["127.0.0.1"]);
    policy["tools"]["team.notify"] = json!({
        "kind": "http_json", "level": "L1", "permission": "orchestrator:write",
        "http": {"url": format!("http://localhost:{port}/hook"), "timeout_ms": 5000,
                 "max_response_bytes": 65536}
    });
    policy.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_governed_agent_waits_for_approval_then_executes() {
    // The team's webhook.
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(body);
                axum::Json(json!({"ok": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let policy_file = dir.path().join("policy.json");
    std::fs::write(&policy_file, policy(port)).unwrap();
    let cluster = TestCluster::builder(Backend::Sqlite, Shape::AllInOne)
        .setting(
            "orchestrator.policy_file",
            &format!("{:?}", policy_file.display().to_string()),
        )
        .start()
        .await
        .unwrap();
    let endpoint = cluster.endpoint("orchestrator").unwrap().to_owned();
    let token = cluster
        .issue_token("agent:reporter", &["orchestrator:write"])
        .await
        .unwrap();

    // The approver's key, registered in identity.
    let key = SigningKeyPair::from_seed(&[42; 32]);
    let mut identity = cluster.identity().await.unwrap();
    identity
        .register_agent(noema_client::pb::identity::RegisterAgentRequest {
            agent_id: "human:ops".into(),
            public_key: key.public_key().to_base64(),
            first_object_id: String::new(),
        })
        .await
        .unwrap();

    let mut agent = Command::new(env!("CARGO_BIN_EXE_governed_agent"))
        .args([
            &endpoint,
            &token,
            "agent:reporter",
            "team.notify",
            "team:notify",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(agent.stdout.take().unwrap()).lines();
    let (request_id, lines) = tokio::task::spawn_blocking(move || {
        let first = lines.next().unwrap().unwrap();
        let id = first.strip_prefix("planned ").unwrap().to_owned();
        let second = lines.next().unwrap().unwrap();
        assert_eq!(second, format!("waiting for approval of {id}"));
        (id, lines)
    })
    .await
    .unwrap();
    // Nothing was sent before the approval.
    assert!(received.lock().unwrap().is_empty());

    let noema = Noema::connect(&endpoint, &cluster.owner_token)
        .await
        .unwrap();
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let approval = json!({
        "schema_version": "0.1", "id": "approval-1", "ts": now, "source": "human:ops",
        "decision": "approve", "approver": "human:ops", "reason": "fine to send",
        "scope": ["team:notify"]
    });
    let approved = noema.approve(&key, &approval, &request_id).await.unwrap();
    assert_eq!(approved.state, "APPROVAL_PENDING");
    assert_eq!(
        (approved.valid_approvers, approved.approvals_required),
        (1, 1)
    );

    let (last, status) = tokio::task::spawn_blocking(move || {
        let mut lines = lines;
        let last = lines.next().unwrap().unwrap();
        (last, agent.wait_with_output().unwrap())
    })
    .await
    .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert_eq!(last, "executed success");
    assert_eq!(
        *received.lock().unwrap(),
        [json!({"text": "agent:reporter: the nightly report is ready"})]
    );
    let detail = noema.request(&request_id).await.unwrap();
    assert_eq!(detail.state, "TRACED");
    cluster.shutdown().await.unwrap();
}

//! Pieces the orchestrator's end-to-end cases share: objects, a test policy with one tool
//! of every kind, a webhook that records what tools sent it, and registered approvers.

use std::sync::{Arc, Mutex};

use noema_client::orchestrator::object;
use noema_client::pb::orchestrator as pb;
use noema_client::{ClientError, Noema, SigningKeyPair};
use serde_json::{Value, json};

use crate::TestCluster;

/// RFC 3339 now, or `offset_secs` from now.
pub fn ts(offset_secs: f64) -> String {
    let at = time::OffsetDateTime::now_utc() + time::Duration::seconds_f64(offset_secs);
    match at.format(&time::format_description::well_known::Rfc3339) {
        Ok(text) => text,
        Err(err) => panic!("cannot format a time: {err}"),
    }
}

/// A fresh id.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// A plan by `source` with `steps`.
pub fn plan(source: &str, steps: Value) -> Value {
    json!({
        "schema_version": "0.1", "id": unique("plan"), "ts": ts(0.0), "source": source,
        "goal": "do what the steps say", "steps": steps, "assumptions": [],
        "rollback_plan": "undo by hand"
    })
}

/// A step using `tool`, with `scope` and `args`.
pub fn step(step_id: &str, tool: &str, scope: &[&str], args: Value) -> Value {
    let mut step = json!({"step_id": step_id, "action": format!("use {tool}"), "tool": tool,
                          "expected_output": "it worked"});
    if !scope.is_empty() {
        step["scope"] = json!(scope);
    }
    if args.is_object() {
        step["args"] = args;
    }
    step
}

/// An EvalResult of the default suite.
pub fn eval(score: f64, pass: bool, regression: bool) -> Value {
    json!({"schema_version": "0.1", "id": unique("eval"), "ts": ts(0.0), "source": "evaluator",
           "suite": "default", "score": score, "pass": pass, "regression": regression,
           "findings": []})
}

/// An Approval by `approver` covering `scope`, given `age_secs` ago.
pub fn approval(approver: &str, decision: &str, scope: &[&str], age_secs: f64) -> Value {
    json!({"schema_version": "0.1", "id": unique("approval"), "ts": ts(-age_secs),
           "source": approver, "decision": decision, "approver": approver,
           "reason": "reviewed", "scope": scope})
}

/// What the webhook received: path and body of each call, and its Authorization header.
#[derive(Debug, Clone, Default)]
pub struct Received {
    calls: Arc<Mutex<Vec<(String, Value, String)>>>,
}

impl Received {
    pub fn calls(&self) -> Vec<(String, Value, String)> {
        match self.calls.lock() {
            Ok(calls) => calls.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Calls whose body's `marker` is `marker`.
    pub fn with_marker(&self, marker: &str) -> usize {
        self.calls()
            .iter()
            .filter(|(_, body, _)| body["marker"] == marker)
            .count()
    }
}

/// A webhook on 127.0.0.1 answering every POST with `{"ok": true, "auth": <its
/// Authorization header>}`, or 500 when the body says `"fail": true`; its port.
pub async fn webhook() -> (u16, Received) {
    let received = Received::default();
    let calls = Arc::clone(&received.calls);
    let app = axum::Router::new().fallback(axum::routing::post(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::Json<Value>| {
            let calls = Arc::clone(&calls);
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let fail = body.0["fail"] == true;
                if let Ok(mut calls) = calls.lock() {
                    calls.push((uri.path().to_owned(), body.0, auth.clone()));
                }
                // It echoes the Authorization header back, as careless services do, so the
                // tests can see that the runner scrubs it.
                if fail {
                    (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        axum::Json(json!({"error": format!("denied for {auth}")})),
                    )
                } else {
                    (
                        axum::http::StatusCode::OK,
                        axum::Json(json!({"ok": true, "auth": auth})),
                    )
                }
            }
        },
    ));
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(err) => panic!("cannot bind the webhook: {err}"),
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, received)
}

/// The default policy with tools of every kind, the webhook on `port`:
/// - `team.notify`: http_json to `localhost` — not an internal host, so an external send (L2);
/// - `local.index`: http_json to `127.0.0.1` (internal, L1);
/// - `files.true` / `files.false`: commands that succeed / fail (L1);
/// - `files.remove`: `rm -f {path}`, a destructive command (L3, never runs);
/// - `secret.notify`: http_json to 127.0.0.1 with an Authorization header read from the
///   secret file `secret_file` (when given).
pub fn test_policy(port: u16, secret_file: Option<&std::path::Path>) -> Value {
    let mut policy: Value = match serde_json::from_str(include_str!(
        "../../services/orchestrator/policy/default.json"
    )) {
        Ok(p) => p,
        Err(err) => panic!("the default policy is not JSON: {err}"),
    };
    policy["internal_hosts"] = json!(["127.0.0.1"]);
    let http = |url: String| json!({"url": url, "timeout_ms": 5000, "max_response_bytes": 65536});
    let tools = &mut policy["tools"];
    tools["team.notify"] = json!({"kind": "http_json", "level": "L1", "permission": "orchestrator:write",
                                  "http": http(format!("http://localhost:{port}/team"))});
    tools["local.index"] = json!({"kind": "http_json", "level": "L1", "permission": "orchestrator:write",
                                  "http": http(format!("http://127.0.0.1:{port}/index"))});
    let command = |program: &str, argv: Value| {
        json!({"kind": "command", "level": "L1", "permission": "orchestrator:write",
               "command": {"program": program, "argv": argv, "timeout_ms": 5000,
                           "max_output_bytes": 4096}})
    };
    tools["files.true"] = command("/usr/bin/true", json!([]));
    tools["files.false"] = command("/usr/bin/false", json!([]));
    tools["files.remove"] = command("/usr/bin/rm", json!(["-f", "{path}"]));
    if let Some(file) = secret_file {
        let mut secret = http(format!("http://127.0.0.1:{port}/secret"));
        secret["headers"] =
            json!({"Authorization": {"file": file.display().to_string(), "prefix": "Bearer "}});
        tools["secret.notify"] = json!({"kind": "http_json", "level": "L1",
                                        "permission": "orchestrator:write", "http": secret});
    }
    policy
}

/// The TOML literal of a path setting.
pub fn toml_path(path: &std::path::Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// An approver: an agent id and its key, registered in identity.
pub struct Approver {
    pub id: String,
    pub key: SigningKeyPair,
}

/// Registers `id` with a key made from `seed`.
pub async fn approver(cluster: &TestCluster, id: &str, seed: u8) -> Approver {
    let key = SigningKeyPair::from_seed(&[seed; 32]);
    let mut identity = match cluster.identity().await {
        Ok(c) => c,
        Err(err) => panic!("identity: {err}"),
    };
    if let Err(status) = identity
        .register_agent(noema_client::pb::identity::RegisterAgentRequest {
            agent_id: id.to_owned(),
            public_key: key.public_key().to_base64(),
            first_object_id: String::new(),
        })
        .await
    {
        panic!("cannot register {id}: {status}");
    }
    Approver {
        id: id.to_owned(),
        key,
    }
}

/// The orchestrator's SDK client acting as `token`.
pub async fn connect(cluster: &TestCluster, token: &str) -> Noema {
    let Some(endpoint) = cluster.endpoint("orchestrator") else {
        panic!("the cluster runs no orchestrator")
    };
    match Noema::connect(endpoint, token).await {
        Ok(noema) => noema,
        Err(err) => panic!("cannot connect: {err}"),
    }
}

/// The gRPC status of a failed call.
pub fn status<T: std::fmt::Debug>(result: Result<T, ClientError>) -> tonic::Status {
    match result {
        Err(ClientError::Status(status)) => status,
        other => panic!("expected a status, got {other:?}"),
    }
}

/// The failure of a failed call, read back with its reason.
pub fn failure<T: std::fmt::Debug>(result: Result<T, ClientError>) -> noema_core::Failure {
    noema_core::Failure::from_status(&status(result))
}

/// A request's whole detail, rebuilt from its events.
pub async fn replayed(noema: &Noema, request_id: &str) -> pb::RequestDetail {
    match noema
        .orchestrator()
        .get_request(pb::GetRequestRequest {
            request_id: request_id.to_owned(),
            from_events: true,
            limit: 1000,
        })
        .await
    {
        Ok(r) => r.into_inner(),
        Err(status) => panic!("GetRequest {request_id}: {status}"),
    }
}

/// Every event of a request, oldest first.
pub async fn events(noema: &Noema, request_id: &str) -> Vec<pb::Event> {
    let mut all = Vec::new();
    let mut token = String::new();
    loop {
        let page = match noema
            .orchestrator()
            .list_events(pb::ListEventsRequest {
                request_id: request_id.to_owned(),
                page: Some(noema_client::pb::common::PageRequest {
                    page_size: 200,
                    page_token: token.clone(),
                }),
            })
            .await
        {
            Ok(r) => r.into_inner(),
            Err(status) => panic!("ListEvents {request_id}: {status}"),
        };
        all.extend(page.events);
        token = page.page.map(|p| p.next_page_token).unwrap_or_default();
        if token.is_empty() {
            return all;
        }
    }
}

/// A JSON object from reply bytes.
pub fn json_of(bytes: &[u8]) -> Value {
    match object(bytes) {
        Ok(v) => v,
        Err(err) => panic!("{err}"),
    }
}

/// A cluster running [`test_policy`] from a file, with its webhook and a secret file.
pub struct Governed {
    pub cluster: TestCluster,
    pub received: Received,
    pub port: u16,
    pub policy_file: std::path::PathBuf,
    /// A secret only the `secret.notify` tool reads.
    pub secret: String,
    _dir: tempfile::TempDir,
}

impl Governed {
    /// Starts a cluster of `shape` on `backend` with the test policy.
    pub async fn start(backend: crate::Backend, shape: crate::Shape) -> Governed {
        let (port, received) = webhook().await;
        let dir = match tempfile::tempdir() {
            Ok(d) => d,
            Err(err) => panic!("tempdir: {err}"),
        };
        let secret = format!("sk-test-{}", uuid::Uuid::new_v4().simple());
        let secret_file = dir.path().join("webhook.token");
        let policy_file = dir.path().join("policy.json");
        let written = std::fs::write(&secret_file, &secret).and_then(|()| {
            std::fs::write(
                &policy_file,
                test_policy(port, Some(&secret_file)).to_string(),
            )
        });
        if let Err(err) = written {
            panic!("cannot write the policy: {err}");
        }
        let cluster = match TestCluster::builder(backend, shape)
            .setting("orchestrator.policy_file", &toml_path(&policy_file))
            .start()
            .await
        {
            Ok(c) => c,
            Err(err) => panic!("cannot start a {shape:?} cluster on {backend}: {err}"),
        };
        Governed {
            cluster,
            received,
            port,
            policy_file,
            secret,
            _dir: dir,
        }
    }

    /// Rewrites the policy file with `edit` applied to the test policy, and reloads it.
    pub async fn reload(
        &self,
        edit: impl FnOnce(&mut Value),
    ) -> Result<pb::PolicyInfo, tonic::Status> {
        let secret_file = self.policy_file.with_file_name("webhook.token");
        let mut policy = test_policy(self.port, Some(&secret_file));
        edit(&mut policy);
        if let Err(err) = std::fs::write(&self.policy_file, policy.to_string()) {
            panic!("cannot write the policy: {err}");
        }
        connect(&self.cluster, &self.cluster.owner_token)
            .await
            .orchestrator()
            .reload_policy(pb::ReloadPolicyRequest {})
            .await
            .map(tonic::Response::into_inner)
    }
}

/// Expands each case (`async fn case(g: &Governed)`) into one test per shape × backend, on
/// a cluster running the test policy.
#[macro_export]
macro_rules! governed_cases {
    ($($case:ident),* $(,)?) => {
        $crate::governed_cases!(@shape all_in_one_sqlite, Sqlite, AllInOne; $($case),*);
        $crate::governed_cases!(@shape split_sqlite, Sqlite, Split; $($case),*);
        $crate::governed_cases!(@shape all_in_one_postgres_s3, PostgresS3, AllInOne; $($case),*);
        $crate::governed_cases!(@shape split_postgres_s3, PostgresS3, Split; $($case),*);
        $crate::governed_cases!(@shape processes_postgres_s3, PostgresS3, Processes; $($case),*);
    };
    (@shape $module:ident, $backend:ident, $shape:ident; $($case:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let governed = $crate::governed::Governed::start(
                        $crate::Backend::$backend,
                        $crate::Shape::$shape,
                    )
                    .await;
                    super::$case(&governed).await;
                    let $crate::governed::Governed { cluster, .. } = governed;
                    if let Err(err) = cluster.shutdown().await {
                        panic!("cluster did not shut down cleanly: {err}");
                    }
                }
            )*
        }
    };
}

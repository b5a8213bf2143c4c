//! The foundation seen from outside: health, readiness, metrics, OpenAPI, reflection,
//! and the ledger's system mode and audit chain, through REST and gRPC.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_e2e::{TestCluster, anonymous, cluster_cases, owner};
use noema_proto::ledger::v1 as pb;
use serde_json::Value;
use tokio_stream::StreamExt;

cluster_cases!(
    liveness_and_readiness,
    mode_transitions_are_audited_and_chained,
    grpc_health_and_reflection_list_the_ledger,
    openapi_documents_every_served_route,
    metrics_count_requests,
    bad_input_gets_invalid_argument,
    unknown_routes_are_404,
);

async fn get_json(cluster: &TestCluster, path: &str) -> (u16, Value) {
    let url = format!("{}{path}", cluster.rest_url);
    let response = owner(cluster).get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn liveness_and_readiness(cluster: &TestCluster) {
    let (status, body) = get_json(cluster, "/healthz").await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ok");
    let (status, body) = get_json(cluster, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["services"]["noema.ledger.v1.LedgerService"], "serving");
    assert_eq!(
        body["services"]["noema.identity.v1.IdentityService"],
        "serving"
    );
    // Operations endpoints need no token.
    let response = anonymous()
        .get(format!("{}/healthz", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
}

async fn mode_transitions_are_audited_and_chained(cluster: &TestCluster) {
    let base = &cluster.rest_url;
    let (status, body) = get_json(cluster, "/status").await;
    assert_eq!(status, 200);
    assert_eq!(body["mode"], "RUNNING");
    assert_eq!(body["changed_by"], "system:init");

    let response = owner(cluster)
        .post(format!("{base}/stop"))
        .header("X-Actor", "ops:alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    assert!(text.ends_with("}\n"), "Go-style trailing newline: {text:?}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["mode"], "STOPPED");
    assert_eq!(body["changed_by"], "ops:alice");
    let changed_at = body["changed_at"].as_str().unwrap();
    assert_eq!(changed_at.len(), 20, "UTC seconds with Z: {changed_at}");
    assert!(changed_at.ends_with('Z'));

    // Reads continue while STOPPED; no actor header means human:unknown.
    let (_, body) = get_json(cluster, "/status").await;
    assert_eq!(body["mode"], "STOPPED");
    let response = owner(cluster)
        .post(format!("{base}/resume"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["mode"], "RUNNING");
    assert_eq!(body["changed_by"], "human:unknown");

    let (status, audit) = get_json(cluster, "/audit").await;
    assert_eq!(status, 200);
    let entries = audit.as_array().unwrap();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["resume", "stop", "init"], "newest first");
    assert_eq!(entries[1]["actor"], "ops:alice");
    assert_eq!(entries[1]["target_type"], "system_state");
    assert_eq!(entries[1]["detail"]["mode"], "STOPPED");
    assert!(
        entries[1].get("target_id").is_none(),
        "empty target_id is omitted"
    );
    assert_eq!(entries[2]["actor"], "system:init");
    // Each entry commits to the one before it.
    for pair in entries.windows(2) {
        assert_eq!(pair[0]["prev_hash"], pair[1]["hash"]);
    }
    assert_eq!(entries[2]["prev_hash"], "");

    let (_, limited) = get_json(cluster, "/audit?limit=1").await;
    assert_eq!(limited.as_array().unwrap().len(), 1);
    let (_, none) = get_json(cluster, "/audit?limit=0").await;
    assert_eq!(none, Value::Array(vec![]));

    // The same log over gRPC, paged.
    let mut ledger = cluster.ledger().await.unwrap();
    let first = ledger
        .list_audit(noema_proto::common::v1::ListAuditRequest {
            page: Some(noema_proto::common::v1::PageRequest {
                page_size: 2,
                page_token: String::new(),
            }),
            oldest_first: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.entries.len(), 2);
    let token = first.page.unwrap().next_page_token;
    assert!(!token.is_empty());
    let rest = ledger
        .list_audit(noema_proto::common::v1::ListAuditRequest {
            page: Some(noema_proto::common::v1::PageRequest {
                page_size: 2,
                page_token: token,
            }),
            oldest_first: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rest.entries.len(), 1);
    assert_eq!(rest.entries[0].action, "init");
    assert!(rest.page.unwrap().next_page_token.is_empty());
}

async fn grpc_health_and_reflection_list_the_ledger(cluster: &TestCluster) {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let channel = cluster.ledger_channel().await.unwrap();
    let mut health = HealthClient::new(channel.clone());
    for service in ["", "noema.ledger.v1.LedgerService"] {
        // Health is public: no token on this client.
        let response = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap();
        assert_eq!(
            response.get_ref().status,
            ServingStatus::Serving as i32,
            "{service:?}"
        );
    }

    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection response");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "noema.ledger.v1.LedgerService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
}

async fn openapi_documents_every_served_route(cluster: &TestCluster) {
    let (status, doc) = get_json(cluster, "/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    for expected in [
        "/healthz", "/readyz", "/metrics", "/status", "/stop", "/resume", "/audit",
    ] {
        assert!(paths.contains_key(expected), "{expected} not documented");
    }
    // Every documented GET is routed: the document describes what is served. (A routed
    // 404 is a JSON error about a resource; an unrouted one has an empty body.)
    for (path, ops) in paths {
        if ops.get("get").is_some() && !path.contains('{') {
            let response = owner(cluster)
                .get(format!("{}{path}", cluster.rest_url))
                .send()
                .await
                .unwrap();
            let code = response.status().as_u16();
            let body = response.text().await.unwrap();
            assert_ne!(code, 405, "GET {path}");
            assert!(
                code != 404 || body.contains("\"error\""),
                "GET {path} is not routed"
            );
        }
    }
    // Beside CogniRelay's routes, FastAPI's bodies for what is not served, and its `Allow`
    // without HEAD (recorded from CogniRelay 1.4.15); a path with two routes lists both
    // (Starlette names only its first).
    const NOT_ALLOWED: &str = r#"{"detail":"Method Not Allowed"}"#;
    for (method, path, status, body, allow) in [
        (
            reqwest::Method::GET,
            "/v1/continuity/nope",
            404,
            r#"{"detail":"Not Found"}"#,
            None,
        ),
        (
            reqwest::Method::GET,
            "/v1/continuity/upsert",
            405,
            NOT_ALLOWED,
            Some("POST"),
        ),
        (
            reqwest::Method::DELETE,
            "/v1/capabilities",
            405,
            NOT_ALLOWED,
            Some("GET"),
        ),
        (
            reqwest::Method::DELETE,
            "/v1/schedule/items",
            405,
            NOT_ALLOWED,
            Some("POST, GET"),
        ),
        (
            reqwest::Method::HEAD,
            "/v1/capabilities",
            405,
            "",
            Some("GET"),
        ),
        (reqwest::Method::HEAD, "/v1/metrics", 405, "", Some("GET")),
        (
            reqwest::Method::HEAD,
            "/v1/schedule/items",
            405,
            "",
            Some("POST, GET"),
        ),
        (
            reqwest::Method::HEAD,
            "/v1/schedule/items/s-1",
            405,
            "",
            Some("GET, PATCH"),
        ),
        (
            reqwest::Method::OPTIONS,
            "/v1/help/hooks",
            405,
            NOT_ALLOWED,
            Some("GET"),
        ),
    ] {
        let response = owner(cluster)
            .request(method.clone(), format!("{}{path}", cluster.rest_url))
            .send()
            .await
            .unwrap();
        let allowed = response
            .headers()
            .get("allow")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(allowed.as_deref(), allow, "{method} {path}");
        assert_eq!(
            (response.status().as_u16(), response.text().await.unwrap()),
            (status, body.to_owned()),
            "{method} {path}"
        );
    }
    // Noema's own routes still answer HEAD.
    let response = owner(cluster)
        .head(format!("{}/healthz", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    // A served path but for a trailing slash: Starlette's 307 to the served path.
    let response = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/v1/capabilities/?x=1", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 307);
    assert_eq!(response.headers()["location"], "/v1/capabilities?x=1");
    // A body declared as something other than JSON is not read as JSON (FastAPI's 422,
    // recorded from CogniRelay 1.4.15); a query name given twice counts with its last value.
    let response = owner(cluster)
        .post(format!("{}/v1/continuity/read", cluster.rest_url))
        .header("content-type", "text/plain")
        .body(r#"{"subject_kind":"user","subject_id":"x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        (response.status().as_u16(), response.text().await.unwrap()),
        (
            422,
            r#"{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":"{\"subject_kind\":\"user\",\"subject_id\":\"x\"}"}]}"#
                .to_owned()
        )
    );
    let response = owner(cluster)
        .get(format!(
            "{}/v1/messages/inbox?recipient=a&recipient=b",
            cluster.rest_url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (response.status().as_u16(), response.text().await.unwrap()),
        (
            200,
            r#"{"ok":true,"recipient":"b","count":0,"messages":[]}"#.to_owned()
        )
    );
}

async fn metrics_count_requests(cluster: &TestCluster) {
    owner(cluster)
        .get(format!("{}/status", cluster.rest_url))
        .send()
        .await
        .unwrap();
    let response = owner(cluster)
        .get(format!("{}/metrics", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = response.text().await.unwrap();
    assert!(
        text.contains("noema_http_requests_total{method=\"GET\",route=\"/status\",status=\"200\"}"),
        "{text}"
    );
}

async fn bad_input_gets_invalid_argument(cluster: &TestCluster) {
    let mut ledger = cluster.ledger().await.unwrap();
    let err = ledger
        .list_audit(noema_proto::common::v1::ListAuditRequest {
            page: Some(noema_proto::common::v1::PageRequest {
                page_size: 10,
                page_token: "not-a-token".into(),
            }),
            oldest_first: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("page_token"), "{}", err.message());
}

async fn unknown_routes_are_404(cluster: &TestCluster) {
    let response = owner(cluster)
        .get(format!("{}/no/such/route", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
}

/// A service process without the gateway serves its own metrics on `server.metrics_addr`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_serve_metrics_on_their_own_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("\"127.0.0.1:{port}\"");
    let cluster = noema_e2e::TestCluster::start_with(
        noema_e2e::Backend::Sqlite,
        noema_e2e::Shape::AllInOne,
        &[("server.metrics_addr", addr.as_str())],
    )
    .await
    .unwrap();
    let mut ledger = cluster.ledger().await.unwrap();
    ledger.get_status(pb::GetStatusRequest {}).await.unwrap();
    let text = anonymous()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("noema_grpc_requests_total{code=\"0\",method=\"/noema.ledger.v1.LedgerService/GetStatus\"}"),
        "{text}"
    );
    cluster.shutdown().await.unwrap();
}

/// Object-store calls and database pools show up in a service's metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_metrics_are_exported() {
    let cluster = noema_e2e::TestCluster::start_with(
        noema_e2e::Backend::Sqlite,
        noema_e2e::Shape::AllInOne,
        &[("server.readiness_interval_ms", "100")],
    )
    .await
    .unwrap();
    let mut ledger = cluster.ledger().await.unwrap();
    ledger
        .put_canonical(noema_client::ledger::canonical_request(
            b"{\"metrics\":1}".to_vec(),
            "observation",
            "application/json",
            "metrics:test",
            time::OffsetDateTime::now_utc(),
        ))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let text = owner(&cluster)
        .get(format!("{}/metrics", cluster.rest_url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains(
            "noema_object_store_requests_total{op=\"put_if_absent\",outcome=\"ok\",service=\"ledger\"}"
        ),
        "{text}"
    );
    assert!(
        text.contains("noema_object_store_request_duration_seconds_bucket"),
        "{text}"
    );
    assert!(
        text.contains("noema_db_pool_connections{service=\"ledger\",state=\"idle\"}"),
        "{text}"
    );
    cluster.shutdown().await.unwrap();
}

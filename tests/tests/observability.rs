//! Following one request across processes: a REST `POST /reference` through the gateway
//! to the ledger, and from the ledger to identity (RegisterAgent, Authenticate), is one
//! trace in an OTLP collector — the gateway's server span the root, the ledger's a
//! descendant of it, identity's in the same trace. The collector is a real OTLP/gRPC
//! `TraceService` on loopback; spans reach it when the processes flush on SIGTERM.
//! Each service process also serves Prometheus metrics by RPC and status code. And the
//! standard `OTEL_EXPORTER_OTLP_ENDPOINT` variable alone, with no config file or setting,
//! turns export on for `noema up` (the Helm chart configures tracing that way).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use noema_client::ledger::{canonical_request, signed_reference};
use noema_core::keys::SigningKeyPair;
use noema_e2e::{Backend, Shape, TestCluster, owner};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use serde_json::json;

/// A span as received, with the `service.name` of the process that sent it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    span: Span,
}

/// An OTLP/gRPC trace collector that keeps everything it is sent.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| string_attr(&r.attributes, "service.name"))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(Received {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn string_attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(AnyValue::StringValue(s)) => Some(s.clone()),
            Some(AnyValue::IntValue(i)) => Some(i.to_string()),
            _ => None,
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts the collector on `127.0.0.1:0`; returns its endpoint and what it received.
async fn start_collector() -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let collector = Collector::default();
    let spans = collector.spans.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    (format!("http://{addr}"), spans)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_rest_request_is_one_trace_across_three_processes() {
    let (endpoint, received) = start_collector().await;
    let setting = format!("\"{endpoint}\"");
    let cluster = match TestCluster::start_with(
        Backend::PostgresS3,
        Shape::Processes,
        &[("telemetry.otlp_endpoint", setting.as_str())],
    )
    .await
    {
        Ok(cluster) => cluster,
        Err(err) => panic!("cannot start a processes cluster on Postgres + S3: {err}"),
    };
    let http = owner(&cluster);
    let r = canonical_request(
        b"{\"traced\":true}".to_vec(),
        "observation",
        "application/json",
        "trace:test",
        time::OffsetDateTime::now_utc(),
    );
    let canonical_id = r.id.clone();
    let response = http
        .post(format!("{}/canonical", cluster.rest_url))
        .json(&json!({
            "schema_version": r.schema_version, "id": r.id, "object_type": r.object_type,
            "content_type": r.content_type, "size_bytes": r.size_bytes,
            "created_at": r.created_at, "created_by": r.created_by,
            "storage_path": r.storage_path,
            "payload": data_encoding::BASE64.encode(&r.payload),
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);

    // The traced request: a new agent's first reference makes the ledger register its key
    // with identity.
    let key = SigningKeyPair::from_seed(&[41; 32]);
    let reference = signed_reference(
        &key,
        "agent:traced",
        &canonical_id,
        "followed",
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    let response = http
        .post(format!("{}/reference", cluster.rest_url))
        .json(&json!({
            "schema_version": reference.schema_version, "id": reference.id,
            "canonical_object_id": reference.canonical_object_id,
            "agent_id": reference.agent_id, "created_at": reference.created_at,
            "context": reference.context, "signature": reference.signature,
            "public_key": reference.public_key,
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        201,
        "{:?}",
        response.text().await
    );

    // Per-service metrics, on each service process's own listener: counts and latency
    // histograms by RPC and status code.
    let ledger_metrics = noema_e2e::anonymous()
        .get(cluster.metrics_url("ledger").unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for expected in [
        "noema_grpc_requests_total{code=\"0\",method=\"/noema.ledger.v1.LedgerService/PutReference\"} 1",
        "noema_grpc_request_duration_seconds_count{code=\"0\",method=\"/noema.ledger.v1.LedgerService/PutReference\"} 1",
        "noema_grpc_request_duration_seconds_bucket{code=\"0\",method=\"/noema.ledger.v1.LedgerService/PutCanonical\",le=\"+Inf\"} 1",
    ] {
        assert!(
            ledger_metrics.contains(expected),
            "{expected}\nnot in:\n{ledger_metrics}"
        );
    }
    let identity_metrics = noema_e2e::anonymous()
        .get(cluster.metrics_url("identity").unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        identity_metrics.contains(
            "noema_grpc_requests_total{code=\"0\",method=\"/noema.identity.v1.IdentityService/RegisterAgent\"} 1"
        ),
        "{identity_metrics}"
    );

    // SIGTERM: each process must flush its pending spans before exiting 0.
    if let Err(err) = cluster.shutdown().await {
        panic!("cluster did not shut down cleanly: {err}");
    }
    let spans = received.lock().unwrap().clone();
    assert!(!spans.is_empty(), "the collector received no spans");

    let roots: Vec<&Received> = spans
        .iter()
        .filter(|r| {
            r.service == "noema-gateway"
                && r.span.name == "http.request"
                && string_attr(&r.span.attributes, "http.route").as_deref() == Some("/reference")
        })
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "one gateway span for POST /reference: {spans:#?}"
    );
    let root = &roots[0].span;
    assert!(
        root.parent_span_id.is_empty(),
        "the gateway span is the root"
    );
    assert_eq!(root.kind, SpanKind::Server as i32);
    let trace_id = root.trace_id.clone();

    let in_trace: Vec<&Received> = spans
        .iter()
        .filter(|r| r.span.trace_id == trace_id)
        .collect();
    let by_id: HashMap<Vec<u8>, &Received> = in_trace
        .iter()
        .map(|r| (r.span.span_id.clone(), *r))
        .collect();
    // Every span of the trace leads up to the gateway's root through received parents.
    let ancestors = |span: &Span| -> Vec<String> {
        let mut chain = Vec::new();
        let mut parent = span.parent_span_id.clone();
        for _ in 0..64 {
            if parent.is_empty() {
                break;
            }
            match by_id.get(&parent) {
                Some(r) => {
                    chain.push(format!("{}:{}", r.service, r.span.name));
                    parent = r.span.parent_span_id.clone();
                }
                None => {
                    chain.push(format!("missing parent {}", hex(&parent)));
                    break;
                }
            }
        }
        chain
    };
    for r in &in_trace {
        if r.span.span_id == root.span_id {
            continue;
        }
        let chain = ancestors(&r.span);
        assert_eq!(
            chain.last().map(String::as_str),
            Some("noema-gateway:http.request"),
            "{}:{} does not lead to the gateway's span: {chain:?}",
            r.service,
            r.span.name
        );
    }

    let server_span = |service: &str, method: &str| {
        in_trace
            .iter()
            .find(|r| {
                r.service == service
                    && r.span.name == "grpc.request"
                    && string_attr(&r.span.attributes, "rpc.method")
                        .is_some_and(|m| m.ends_with(method))
            })
            .map(|r| r.span.clone())
            .unwrap_or_else(|| {
                let names: Vec<String> = in_trace
                    .iter()
                    .map(|r| {
                        format!(
                            "{}:{} {:?}",
                            r.service,
                            r.span.name,
                            string_attr(&r.span.attributes, "rpc.method")
                        )
                    })
                    .collect();
                panic!(
                    "no {service} server span for {method} in trace {}: {names:#?}",
                    hex(&trace_id)
                )
            })
    };
    let ledger = server_span("noema-ledger", "/PutReference");
    assert_eq!(ledger.kind, SpanKind::Server as i32);
    let register = server_span("noema-identity", "/RegisterAgent");
    assert!(
        ancestors(&register).contains(&"noema-ledger:grpc.request".to_owned()),
        "RegisterAgent is called by the ledger's PutReference"
    );
    // Services check tokens with identity in the split shape; the ledger's first call
    // with the owner token was PutCanonical (cached since), so that check is in the
    // canonical's trace rather than this one — but it is in *a* trace with the gateway's
    // span as root.
    let authenticate = spans
        .iter()
        .find(|r| {
            r.service == "noema-identity"
                && string_attr(&r.span.attributes, "rpc.method")
                    .is_some_and(|m| m.ends_with("/Authenticate"))
        })
        .expect("identity's Authenticate span");
    let auth_trace_root = spans.iter().find(|r| {
        r.span.trace_id == authenticate.span.trace_id && r.span.parent_span_id.is_empty()
    });
    assert_eq!(
        auth_trace_root.map(|r| r.service.as_str()),
        Some("noema-gateway"),
        "Authenticate belongs to a trace started by the gateway"
    );
}

/// `noema up` with `OTEL_EXPORTER_OTLP_ENDPOINT` set and nothing else configured: its
/// request spans reach the collector by the time it exits on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_otel_environment_variable_alone_turns_export_on() {
    use std::io::{BufRead as _, BufReader};
    use std::process::{Command, Stdio};

    let (endpoint, received) = start_collector().await;
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(noema_test_support::noema_bin().unwrap());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("NOEMA__") {
            command.env_remove(key);
        }
    }
    let mut child = command
        .args(["up", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let rest = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix("REST  ").map(str::to_owned))
    })
    .await
    .unwrap()
    .expect("noema up exited before printing its REST address");

    let response = noema_e2e::anonymous()
        .get(format!("{rest}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "noema up exited with {exit}");

    let spans = received.lock().unwrap().clone();
    let health: Vec<&Received> = spans
        .iter()
        .filter(|r| {
            r.span.name == "http.request"
                && string_attr(&r.span.attributes, "http.route").as_deref() == Some("/healthz")
        })
        .collect();
    assert_eq!(health.len(), 1, "one span for GET /healthz: {spans:#?}");
    assert_eq!(health[0].service, "noema");
}

//! The REST gateway: the seed systems' own paths in front of the gRPC services, plus
//! health, readiness, metrics and the OpenAPI document.

pub mod error;
pub mod go_json;
pub mod openapi;
pub mod routes;
pub mod time_format;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{MethodRouter, get, post};
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::client::{ClientOptions, TracedChannel, channel};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic_health::pb::health_client::HealthClient;
use tracing::Instrument;

/// Where the gateway finds each service it fronts.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub ledger_endpoint: String,
    pub request_timeout: Duration,
    pub max_body_bytes: usize,
}

/// Shared by every handler: one lazily connected client per service.
#[derive(Clone)]
pub struct GatewayState {
    pub ledger: LedgerServiceClient<TracedChannel>,
    /// gRPC health clients, by the service name they check.
    pub health: Vec<(&'static str, HealthClient<TracedChannel>)>,
}

impl GatewayState {
    pub fn connect(config: &GatewayConfig) -> Result<Self, noema_runtime::client::ClientError> {
        let options = ClientOptions {
            request_timeout: config.request_timeout,
            ..ClientOptions::default()
        };
        let ledger_channel = channel("ledger", &config.ledger_endpoint, options)?;
        Ok(GatewayState {
            ledger: LedgerServiceClient::new(ledger_channel.clone()),
            health: vec![(
                "noema.ledger.v1.LedgerService",
                HealthClient::new(ledger_channel),
            )],
        })
    }
}

/// One served route and its documentation.
#[derive(Debug, Clone)]
pub struct RouteDoc {
    pub method: &'static str,
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    pub tag: &'static str,
    pub query: &'static [(&'static str, &'static str)],
    pub responses: &'static [(u16, &'static str)],
}

const fn doc(
    method: &'static str,
    path: &'static str,
    operation_id: &'static str,
    tag: &'static str,
    summary: &'static str,
) -> RouteDoc {
    RouteDoc {
        method,
        path,
        operation_id,
        summary,
        tag,
        query: &[],
        responses: &[(200, "OK"), (500, "Internal error"), (503, "Unavailable")],
    }
}

/// Every route the gateway serves. The router and the OpenAPI document both come from here.
pub fn route_table() -> Vec<(RouteDoc, MethodRouter<GatewayState>)> {
    use routes::{ledger, ops};
    vec![
        (
            doc(
                "GET",
                "/healthz",
                "healthz",
                "operations",
                "Liveness of the gateway process",
            ),
            get(ops::healthz),
        ),
        (
            doc(
                "GET",
                "/readyz",
                "readyz",
                "operations",
                "Readiness: every fronted service reports SERVING",
            ),
            get(ops::readyz),
        ),
        (
            doc(
                "GET",
                "/metrics",
                "metrics",
                "operations",
                "Prometheus metrics (text format)",
            ),
            get(ops::metrics),
        ),
        (
            doc(
                "GET",
                "/openapi.json",
                "openapi",
                "operations",
                "This document",
            ),
            get(ops::openapi),
        ),
        (
            doc(
                "GET",
                "/status",
                "getStatus",
                "ledger",
                "System mode (RUNNING or STOPPED)",
            ),
            get(ledger::status),
        ),
        (
            doc(
                "POST",
                "/stop",
                "stop",
                "ledger",
                "Halt writes; reads continue. Actor from X-Actor",
            ),
            post(ledger::stop),
        ),
        (
            doc(
                "POST",
                "/resume",
                "resume",
                "ledger",
                "Accept writes again. Actor from X-Actor",
            ),
            post(ledger::resume),
        ),
        (
            RouteDoc {
                query: &[("limit", "Entries to return: default 50, at most 200")],
                ..doc(
                    "GET",
                    "/audit",
                    "listAudit",
                    "ledger",
                    "Audit log, newest first, hash-chained",
                )
            },
            get(ledger::audit),
        ),
    ]
}

pub fn router(state: GatewayState, config: &GatewayConfig) -> Router {
    let mut router = Router::new();
    for (doc, method_router) in route_table() {
        router = router.route(doc.path, method_router);
    }
    router
        .layer(axum::middleware::from_fn(observe))
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .with_state(state)
}

/// A span per request that continues the caller's W3C trace, and request metrics.
async fn observe(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let span = tracing::info_span!(
        "http.request",
        otel.kind = "server",
        http.method = %method,
        http.route = %route,
        http.status_code = tracing::field::Empty,
    );
    noema_runtime::trace_context::adopt_remote_parent(&span, request.headers());
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    span.record("http.status_code", status);
    if let Some(m) = noema_runtime::metrics::global() {
        m.http_requests
            .with_label_values(&[method.as_str(), &route, &status.to_string()])
            .inc();
        m.http_latency
            .with_label_values(&[method.as_str(), &route])
            .observe(started.elapsed().as_secs_f64());
    }
    response
}

/// Serves REST on `listener` until `shutdown`, then drains in-flight requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    tracing::info!(?addr, "REST gateway listening");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

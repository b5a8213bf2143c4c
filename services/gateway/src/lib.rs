//! The REST gateway: the seed systems' own paths in front of the gRPC services, plus
//! health, readiness, metrics and the OpenAPI document.

pub mod error;
pub mod forward;
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
use axum::routing::MethodRouter;
use noema_proto::identity::v1::diary_service_client::DiaryServiceClient;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::client::{ClientOptions, LocalService, TracedChannel, channel, local_channel};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic_health::pb::health_client::HealthClient;
use tracing::Instrument;

/// Where the gateway finds each service it fronts.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub identity_endpoint: String,
    pub ledger_endpoint: String,
    pub request_timeout: Duration,
    pub max_body_bytes: usize,
}

/// Shared by every handler: one lazily connected client per service.
#[derive(Clone)]
pub struct GatewayState {
    pub identity: IdentityServiceClient<TracedChannel>,
    /// Signed diaries, served by the identity process.
    pub diary: DiaryServiceClient<TracedChannel>,
    pub ledger: LedgerServiceClient<TracedChannel>,
    /// gRPC health clients, by the service name they check.
    pub health: Vec<(&'static str, HealthClient<TracedChannel>)>,
}

impl GatewayState {
    pub fn connect(config: &GatewayConfig) -> Result<Self, noema_runtime::client::ClientError> {
        let options = client_options(config);
        let identity_channel = channel("identity", &config.identity_endpoint, options)?;
        let ledger_channel = channel("ledger", &config.ledger_endpoint, options)?;
        Ok(GatewayState {
            identity: IdentityServiceClient::new(identity_channel.clone()),
            diary: DiaryServiceClient::new(identity_channel.clone()),
            ledger: ledger_client(ledger_channel.clone()),
            health: vec![
                (
                    "noema.identity.v1.IdentityService",
                    HealthClient::new(identity_channel),
                ),
                (
                    "noema.ledger.v1.LedgerService",
                    HealthClient::new(ledger_channel),
                ),
            ],
        })
    }

    /// Calls the services this process hosts (`identity`, `ledger`) in memory through
    /// `local`, their server stack, instead of over loopback. Health checks stay on the
    /// network so readiness still means the gRPC listener answers.
    pub fn in_process(
        mut self,
        local: &LocalService,
        identity: bool,
        ledger: bool,
        config: &GatewayConfig,
    ) -> Self {
        let options = client_options(config);
        if identity {
            let channel = local_channel(local.clone(), options);
            self.identity = IdentityServiceClient::new(channel.clone());
            self.diary = DiaryServiceClient::new(channel);
        }
        if ledger {
            self.ledger = ledger_client(local_channel(local.clone(), options));
        }
        self
    }
}

fn client_options(config: &GatewayConfig) -> ClientOptions {
    ClientOptions {
        request_timeout: config.request_timeout,
        ..ClientOptions::default()
    }
}

fn ledger_client(channel: TracedChannel) -> LedgerServiceClient<TracedChannel> {
    LedgerServiceClient::new(channel)
        .max_decoding_message_size(noema_ledger_message_limit())
        .max_encoding_message_size(noema_ledger_message_limit())
}

/// Largest ledger message (a 16 MiB payload and its fields), as the ledger allows.
const fn noema_ledger_message_limit() -> usize {
    20 * 1024 * 1024
}

/// One served route and its documentation.
#[derive(Debug, Clone)]
pub struct RouteDoc {
    pub method: &'static str,
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    pub tag: &'static str,
    /// Callable without a token (operations endpoints only).
    pub public: bool,
    pub query: &'static [(&'static str, &'static str)],
    pub responses: &'static [(u16, &'static str)],
}

pub const fn doc(
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
        public: false,
        query: &[],
        responses: &[
            (200, "OK"),
            (400, "Invalid input"),
            (401, "Missing or invalid token"),
            (403, "The token lacks the required scope"),
            (500, "Internal error"),
            (503, "Unavailable"),
        ],
    }
}

/// An operations route: no token needed.
pub const fn public(doc: RouteDoc) -> RouteDoc {
    RouteDoc {
        public: true,
        responses: &[(200, "OK"), (503, "Unavailable")],
        ..doc
    }
}

/// Every route the gateway serves. The router and the OpenAPI document both come from here.
pub fn route_table() -> Vec<(RouteDoc, MethodRouter<GatewayState>)> {
    let mut routes = routes::ops::routes();
    routes.extend(routes::identity::routes());
    routes.extend(routes::ledger::routes());
    routes.extend(routes::ledger_objects::routes());
    routes.extend(routes::diary::routes());
    routes
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
        let status = status.to_string();
        m.http_requests
            .with_label_values(&[method.as_str(), &route, &status])
            .inc();
        m.http_latency
            .with_label_values(&[method.as_str(), &route, &status])
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
    // Responses must not wait for Nagle's algorithm and the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!(error = %err, "TCP_NODELAY not set");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

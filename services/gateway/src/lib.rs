//! The REST gateway: the seed systems' own paths in front of the gRPC services, plus
//! health, readiness, metrics and the OpenAPI document.

pub mod clients;
pub mod error;
pub mod features;
pub mod forward;
pub mod go_json;
pub mod key_order;
pub mod mcp;
pub mod object_body;
pub mod openapi;
pub mod reply;
pub mod route;
pub mod routes;
pub mod schema_file;
mod unrouted;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use noema_runtime::auth::{Authenticator, RemoteAuthenticator};
use noema_runtime::client::{
    ClientOptions, LocalService, TracedChannel, channel, local_channel, unavailable_channel,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic_health::pb::health_client::HealthClient;
use tracing::Instrument;

/// A service the gateway fronts.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its registry name, e.g. `ledger`.
    pub name: &'static str,
    /// Where it is reached over gRPC.
    pub endpoint: String,
    /// Its gRPC services, each checked by `/readyz`.
    pub grpc_services: &'static [&'static str],
    /// Hosted by this process: called in memory rather than over loopback.
    pub in_process: bool,
}

/// Where the gateway finds each service it fronts.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub upstreams: Vec<Upstream>,
    pub request_timeout: Duration,
    pub max_body_bytes: usize,
    /// `auth.anonymous_scopes`: with none, a route that calls a service refuses a
    /// request without a valid token before reading its body.
    pub anonymous_scopes: Vec<String>,
    /// `auth.cache_ttl_secs`: how long the gateway remembers the token authority's answer
    /// about a token (the services check it again on every call).
    pub token_cache_ttl: Duration,
}

/// The fronted service that resolves tokens (`IdentityService/Authenticate`).
const TOKEN_AUTHORITY: &str = "identity";

/// Shared by every handler: one lazily connected channel per fronted service (the route
/// modules make their typed clients from it, see [`clients`]).
#[derive(Clone)]
pub struct GatewayState {
    channels: Arc<BTreeMap<&'static str, TracedChannel>>,
    /// gRPC health clients, by the service name they check (shared: the state is cloned for
    /// every request).
    pub health: Arc<[(&'static str, HealthClient<TracedChannel>)]>,
    /// The largest request body (`gateway.max_body_bytes`), as help publishes it.
    pub max_body_bytes: usize,
}

impl GatewayState {
    /// Channels to every upstream. Those `in_process` are called through `local`, the
    /// process's own server stack, instead of over loopback; health checks stay on the
    /// network so readiness still means the gRPC listener answers.
    pub fn connect(
        config: &GatewayConfig,
        local: Option<&LocalService>,
    ) -> Result<Self, noema_runtime::client::ClientError> {
        let options = client_options(config);
        let mut channels = BTreeMap::new();
        let mut health = Vec::new();
        for upstream in &config.upstreams {
            let network = channel(upstream.name, &upstream.endpoint, options)?;
            for service in upstream.grpc_services {
                health.push((*service, HealthClient::new(network.clone())));
            }
            let calls = match local {
                Some(local) if upstream.in_process => local_channel(local.clone(), options),
                _ => network,
            };
            channels.insert(upstream.name, calls);
        }
        Ok(GatewayState {
            channels: Arc::new(channels),
            health: health.into(),
            max_body_bytes: config.max_body_bytes,
        })
    }

    /// The channel to the fronted service `name`. A service the gateway was not given an
    /// upstream for answers every call UNAVAILABLE.
    pub fn channel(&self, name: &'static str) -> TracedChannel {
        self.channels
            .get(name)
            .cloned()
            .unwrap_or_else(|| unavailable_channel(name))
    }
}

fn client_options(config: &GatewayConfig) -> ClientOptions {
    ClientOptions {
        request_timeout: config.request_timeout,
        ..ClientOptions::default()
    }
}

/// Property-test settings for the gateway's parsers of outside input: few enough cases to
/// run in every `scripts/test`, no regression files written into the source tree.
#[cfg(test)]
pub(crate) fn proptest_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: 96,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// Every route the gateway serves. The router and the OpenAPI document both come from here.
pub fn route_table() -> Vec<route::Route> {
    let mut routes = routes::ops::routes();
    routes.extend(routes::identity::routes());
    routes.extend(routes::tokens::routes());
    routes.extend(routes::ledger::routes());
    routes.extend(routes::ledger_objects::routes());
    routes.extend(routes::diaries::routes());
    routes.extend(routes::grants::routes());
    routes.extend(routes::feed::routes());
    routes.extend(routes::entries::routes());
    routes.extend(routes::signing::routes());
    routes.extend(routes::relations::routes());
    routes.extend(routes::chain::routes());
    routes.extend(routes::continuity::routes());
    routes.extend(routes::memory::routes());
    routes.extend(routes::tasks::routes());
    routes.extend(routes::peers::routes());
    routes.extend(routes::coordination::routes());
    routes.extend(routes::messages::routes());
    routes.extend(routes::metrics::routes());
    routes.extend(routes::schedule::routes());
    routes.extend(routes::backup::routes());
    routes.extend(mcp::routes());
    routes.extend(routes::discovery::routes());
    routes.extend(routes::workflows::routes());
    routes.extend(routes::help::routes());
    routes.extend(routes::world_components::routes());
    routes.extend(routes::world::routes());
    routes.extend(routes::orchestrator::routes());
    routes
}

/// The gateway's router. MCP tool calls run through the same routes (without the
/// request span and metrics of the MCP request that carries them).
pub fn router(state: GatewayState, config: &GatewayConfig) -> Router {
    let mut routes = Router::new();
    let authenticator: Arc<dyn Authenticator> = Arc::new(RemoteAuthenticator::new(
        state.channel(TOKEN_AUTHORITY),
        config.token_cache_ttl,
    ));
    for route in route_table() {
        let mut handler = route.method_router();
        if config.anonymous_scopes.is_empty() && !route.rpcs().is_empty() {
            let check = forward::TokenCheck {
                style: route.errors,
                authenticator: authenticator.clone(),
                keeps_principal: route.path == mcp::PATH,
            };
            handler = handler.route_layer(axum::middleware::from_fn_with_state(
                check,
                forward::require_token,
            ));
        }
        routes = routes.route(route.path, handler);
    }
    let routes = routes
        .fallback(unrouted::not_found)
        .method_not_allowed_fallback(unrouted::method_not_allowed)
        .layer(DefaultBodyLimit::max(config.max_body_bytes))
        .with_state(state);
    let mcp = mcp::Mcp::new(routes.clone(), config.max_body_bytes).with_token_cache(authenticator);
    routes
        .layer(axum::Extension(mcp))
        .layer(axum::middleware::from_fn(observe))
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
    // The peer address lets host-only endpoints (`POST /v1/ops/run`) tell local callers.
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move { shutdown.cancelled().await })
    .await
}

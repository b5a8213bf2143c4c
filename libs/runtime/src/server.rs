//! The gRPC server every service process runs: the services it hosts, gRPC health for
//! each, reflection (v1 and v1alpha) limited to what is served, per-RPC tracing spans
//! that continue the caller's trace, metrics, and graceful shutdown.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::service::RoutesBuilder;
use tonic_health::ServingStatus;
use tonic_health::server::{HealthReporter, HealthService};

use crate::auth::AuthLayer;
use crate::metrics;
use crate::trace_context;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("building gRPC reflection failed: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A tonic service (a generated `…Server`) that a [`GrpcServer`] can host.
pub trait HostedService:
    tower::Service<
        http::Request<Body>,
        Error = Infallible,
        Response: axum::response::IntoResponse,
        Future: Send + 'static,
    > + NamedService
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> HostedService for S where
    S: tower::Service<
            http::Request<Body>,
            Error = Infallible,
            Response: axum::response::IntoResponse,
            Future: Send + 'static,
        > + NamedService
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// Assembles the services of one process onto one tonic server.
pub struct GrpcServer {
    routes: RoutesBuilder,
    names: Vec<&'static str>,
    /// Encoded descriptor sets of the hosted contracts, for reflection.
    descriptors: Vec<&'static [u8]>,
    health: HealthReporter,
    auth: AuthLayer,
}

impl GrpcServer {
    /// A server whose every non-public RPC goes through `auth`.
    pub fn new(auth: AuthLayer) -> Self {
        GrpcServer {
            routes: RoutesBuilder::default(),
            names: Vec::new(),
            descriptors: Vec::new(),
            health: HealthReporter::new(),
            auth,
        }
    }

    /// Hosts `service` on this server; it is reported SERVING once the server starts.
    pub fn add_service<S: HostedService>(&mut self, service: S) -> &mut Self {
        self.names.push(S::NAME);
        self.routes.add_service(service);
        self
    }

    /// Makes the contracts in `descriptors` (an encoded `FileDescriptorSet`) available to
    /// reflection; a set already added is not added again.
    pub fn add_descriptors(&mut self, descriptors: &'static [u8]) -> &mut Self {
        if !self
            .descriptors
            .iter()
            .any(|d| std::ptr::eq(*d, descriptors))
        {
            self.descriptors.push(descriptors);
        }
        self
    }

    /// The fully qualified names of the hosted services.
    pub fn service_names(&self) -> &[&'static str] {
        &self.names
    }

    /// The hosted services behind the same layers as the network server (a span per RPC,
    /// metrics, auth), for clients in this process: see `client::local_channel`.
    pub fn local_service(&self) -> crate::client::LocalService {
        let stack = tower::ServiceBuilder::new()
            .layer(GrpcMetricsLayer)
            .layer(self.auth.clone())
            .service(self.routes.clone().routes());
        crate::client::LocalService::new(Traced { inner: stack })
    }

    /// A handle to flip health statuses (readiness) while serving.
    pub fn health(&self) -> HealthReporter {
        self.health.clone()
    }

    /// Serves on `listener` until `shutdown` is cancelled, then reports NOT_SERVING,
    /// stops accepting and waits up to `grace` for in-flight requests to finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: CancellationToken,
        grace: Duration,
    ) -> Result<(), ServerError> {
        let GrpcServer {
            mut routes,
            names,
            descriptors,
            health,
            auth,
        } = self;
        let health_service = tonic_health::pb::health_server::HealthServer::new(
            HealthService::from_health_reporter(health.clone()),
        );
        health.set_service_status("", ServingStatus::Serving).await;
        for name in &names {
            health
                .set_service_status(*name, ServingStatus::Serving)
                .await;
        }
        routes
            .add_service(health_service)
            .add_service(reflection(&names, &descriptors).build_v1()?)
            .add_service(reflection(&names, &descriptors).build_v1alpha()?);
        let routes = routes.routes();

        let stopping = shutdown.clone();
        let drain = async move {
            stopping.cancelled().await;
            for name in &names {
                health
                    .set_service_status(*name, ServingStatus::NotServing)
                    .await;
            }
            health
                .set_service_status("", ServingStatus::NotServing)
                .await;
            tracing::info!("gRPC server draining in-flight requests");
        };
        // Small gRPC frames must not wait for Nagle's algorithm and the peer's delayed ACK
        // (about 40 ms per call); tonic sets this only on listeners it binds itself.
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let server = tonic::transport::Server::builder()
            .trace_fn(request_span)
            .layer(GrpcMetricsLayer)
            .layer(auth)
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, drain);
        // The drain future resolves as soon as shutdown starts; bound the wait for
        // in-flight requests by the grace period.
        tokio::select! {
            result = server => result?,
            () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!(?grace, "grace period elapsed with requests still in flight");
            }
        }
        Ok(())
    }
}

/// The span of one RPC, continuing the caller's trace.
fn request_span<B>(request: &http::Request<B>) -> tracing::Span {
    let span = tracing::info_span!(
        "grpc.request",
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.method = %request.uri().path(),
    );
    trace_context::adopt_remote_parent(&span, request.headers());
    span
}

/// Runs each in-memory call inside its RPC span, as `trace_fn` does for the network.
#[derive(Clone)]
struct Traced<S> {
    inner: S,
}

impl<S> tower::Service<http::Request<Body>> for Traced<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        use tracing::Instrument as _;
        let span = request_span(&request);
        let future = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        Box::pin(future.instrument(span))
    }
}

fn reflection(
    names: &[&'static str],
    descriptors: &[&'static [u8]],
) -> tonic_reflection::server::Builder<'static> {
    let mut builder = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET);
    for set in descriptors {
        builder = builder.register_encoded_file_descriptor_set(set);
    }
    for name in names {
        builder = builder.with_service_name(*name);
    }
    // Naming services limits the listing to them, so name the standard ones too.
    for standard in [
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        builder = builder.with_service_name(standard);
    }
    builder
}

/// Counts requests and records latency per RPC path and gRPC status.
#[derive(Debug, Clone, Copy)]
pub struct GrpcMetricsLayer;

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics { inner }
    }
}

#[derive(Debug, Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, B, RB> tower::Service<http::Request<B>> for GrpcMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().to_owned();
        let started = Instant::now();
        let future = self.inner.call(request);
        Box::pin(async move {
            let result = future.await;
            // Errors are sent trailers-only, so their status is in the headers; a
            // success carries its status in trailers, which are always OK for us.
            let code = match &result {
                Ok(response) => response
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("0")
                    .to_owned(),
                Err(_) => "transport".to_owned(),
            };
            if let Some(m) = metrics::global() {
                m.grpc_requests.with_label_values(&[&method, &code]).inc();
                m.grpc_latency
                    .with_label_values(&[&method, &code])
                    .observe(started.elapsed().as_secs_f64());
            }
            result
        })
    }
}

//! Channels to other Noema services, addressed from config, with timeouts and the
//! caller's trace context carried on every call. A service hosted by the same process is
//! called in memory through its server stack (auth, metrics, spans): no socket, no HTTP/2.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tonic::body::Body;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tower::util::BoxCloneSyncService;

use crate::trace_context;

#[derive(Debug, thiserror::Error)]
#[error("endpoint `{endpoint}` for {service} is not a valid http(s) URL: {reason}")]
pub struct ClientError {
    pub service: &'static str,
    pub endpoint: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Adds the W3C trace context of the current span to each outgoing request.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceContextInterceptor;

impl tonic::service::Interceptor for TraceContextInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        trace_context::inject_into_metadata(request.metadata_mut());
        Ok(request)
    }
}

/// A channel whose calls carry the trace context.
pub type TracedChannel = InterceptedService<Transport, TraceContextInterceptor>;

/// A process's own gRPC server stack, callable in memory (see
/// `GrpcServer::local_service`).
pub type LocalService = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, Infallible>;

/// How a client reaches a service.
#[derive(Clone)]
pub enum Transport {
    /// Over the network.
    Remote(Channel),
    /// In this process, with the client's request timeout.
    Local(LocalService, Duration),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Remote(channel) => f.debug_tuple("Remote").field(channel).finish(),
            Transport::Local(_, timeout) => f.debug_tuple("Local").field(timeout).finish(),
        }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl tower::Service<http::Request<Body>> for Transport {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self {
            Transport::Remote(channel) => channel.poll_ready(cx),
            Transport::Local(service, _) => service.poll_ready(cx).map(|ready| match ready {
                Ok(()) => Ok(()),
                Err(never) => match never {},
            }),
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        match self {
            Transport::Remote(channel) => Box::pin(channel.call(request)),
            Transport::Local(service, timeout) => {
                let response = service.call(request);
                let timeout = *timeout;
                Box::pin(async move {
                    match tokio::time::timeout(timeout, response).await {
                        Ok(Ok(response)) => Ok(response),
                        Ok(Err(never)) => match never {},
                        Err(_) => Ok(tonic::Status::deadline_exceeded(format!(
                            "no answer within the request timeout of {timeout:?}"
                        ))
                        .into_http()),
                    }
                })
            }
        }
    }
}

/// A channel to a service hosted by this process.
pub fn local_channel(service: LocalService, options: ClientOptions) -> TracedChannel {
    InterceptedService::new(
        Transport::Local(service, options.request_timeout),
        TraceContextInterceptor,
    )
}

/// A lazily connecting channel to `endpoint` (`http://host:port`): the process starts even
/// when the peer is not up yet; calls fail with UNAVAILABLE until it is.
pub fn channel(
    service: &'static str,
    endpoint: &str,
    options: ClientOptions,
) -> Result<TracedChannel, ClientError> {
    let err = |reason: String| ClientError {
        service,
        endpoint: endpoint.to_owned(),
        reason,
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(err("it must start with http:// or https://".into()));
    }
    let channel = Endpoint::from_shared(endpoint.to_owned())
        .map_err(|e| err(e.to_string()))?
        .connect_timeout(options.connect_timeout)
        .timeout(options.request_timeout)
        .tcp_nodelay(true)
        .connect_lazy();
    Ok(InterceptedService::new(
        Transport::Remote(channel),
        TraceContextInterceptor,
    ))
}

/// A channel whose every call answers UNAVAILABLE: what a caller gets for a service it has
/// no endpoint for.
pub fn unavailable_channel(service: &'static str) -> TracedChannel {
    let answer = tower::service_fn(move |_: http::Request<Body>| async move {
        Ok::<_, Infallible>(
            tonic::Status::unavailable(format!("no endpoint is configured for {service}"))
                .into_http(),
        )
    });
    local_channel(BoxCloneSyncService::new(answer), ClientOptions::default())
}

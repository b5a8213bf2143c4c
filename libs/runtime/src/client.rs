//! Channels to other Noema services, addressed from config, with timeouts and the
//! caller's trace context carried on every call.

use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

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
pub type TracedChannel = InterceptedService<Channel, TraceContextInterceptor>;

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
    Ok(InterceptedService::new(channel, TraceContextInterceptor))
}

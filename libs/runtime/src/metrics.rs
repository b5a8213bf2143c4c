//! Prometheus metrics: one process-wide registry, rendered as text on `/metrics`.

use std::sync::OnceLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    pub registry: Registry,
    pub grpc_requests: IntCounterVec,
    pub grpc_latency: HistogramVec,
    pub http_requests: IntCounterVec,
    pub http_latency: HistogramVec,
    pub object_store_requests: IntCounterVec,
    pub object_store_latency: HistogramVec,
    pub db_pool_connections: IntGaugeVec,
}

const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn build() -> Result<Metrics, prometheus::Error> {
    let registry = Registry::new_custom(Some("noema".into()), None)?;
    let grpc_requests = IntCounterVec::new(
        Opts::new(
            "grpc_requests_total",
            "gRPC requests served, by method and status code",
        ),
        &["method", "code"],
    )?;
    let grpc_latency = HistogramVec::new(
        HistogramOpts::new(
            "grpc_request_duration_seconds",
            "gRPC request latency, by method and status code",
        )
        .buckets(LATENCY_BUCKETS.to_vec()),
        // By code too: failures are often fast (or slow) and would skew the successes.
        &["method", "code"],
    )?;
    let http_requests = IntCounterVec::new(
        Opts::new(
            "http_requests_total",
            "REST requests served, by route and status",
        ),
        &["method", "route", "status"],
    )?;
    let http_latency = HistogramVec::new(
        HistogramOpts::new(
            "http_request_duration_seconds",
            "REST request latency, by route and status",
        )
        .buckets(LATENCY_BUCKETS.to_vec()),
        &["method", "route", "status"],
    )?;
    let object_store_requests = IntCounterVec::new(
        Opts::new(
            "object_store_requests_total",
            "Object store calls, by service, operation and outcome",
        ),
        &["service", "op", "outcome"],
    )?;
    let object_store_latency = HistogramVec::new(
        HistogramOpts::new(
            "object_store_request_duration_seconds",
            "Object store call latency, by service and operation",
        )
        .buckets(LATENCY_BUCKETS.to_vec()),
        &["service", "op"],
    )?;
    let db_pool_connections = IntGaugeVec::new(
        Opts::new(
            "db_pool_connections",
            "Database pool connections, by service and state (idle or in_use)",
        ),
        &["service", "state"],
    )?;
    registry.register(Box::new(object_store_requests.clone()))?;
    registry.register(Box::new(object_store_latency.clone()))?;
    registry.register(Box::new(db_pool_connections.clone()))?;
    registry.register(Box::new(grpc_requests.clone()))?;
    registry.register(Box::new(grpc_latency.clone()))?;
    registry.register(Box::new(http_requests.clone()))?;
    registry.register(Box::new(http_latency.clone()))?;
    Ok(Metrics {
        registry,
        grpc_requests,
        grpc_latency,
        http_requests,
        http_latency,
        object_store_requests,
        object_store_latency,
        db_pool_connections,
    })
}

/// The process-wide metrics. Metric definitions are static, so building them cannot fail
/// at run time; if it ever did, metrics would be absent rather than the process down.
pub fn global() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match build() {
            Ok(m) => Some(m),
            Err(err) => {
                tracing::error!(error = %err, "metrics registry could not be built");
                None
            }
        })
        .as_ref()
}

/// Everything in the registry, in the Prometheus text exposition format.
pub fn render() -> String {
    let Some(metrics) = global() else {
        return String::new();
    };
    let mut buffer = Vec::new();
    if let Err(err) = TextEncoder::new().encode(&metrics.registry.gather(), &mut buffer) {
        tracing::error!(error = %err, "encoding metrics failed");
    }
    String::from_utf8(buffer).unwrap_or_default()
}

/// Serves `GET /metrics` on `listener` until `shutdown` (for processes without the gateway).
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use axum::http::header::CONTENT_TYPE;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            (
                [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                render(),
            )
        }),
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn counters_show_up_in_the_text_format() {
        if let Some(m) = super::global() {
            m.grpc_requests.with_label_values(&["/x.Y/Z", "0"]).inc();
        }
        let text = super::render();
        assert!(
            text.contains("noema_grpc_requests_total{code=\"0\",method=\"/x.Y/Z\"}"),
            "{text}"
        );
    }
}

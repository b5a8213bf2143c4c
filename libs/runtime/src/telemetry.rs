//! Logging and tracing: a `tracing` subscriber (text or JSON), plus OTLP export of spans
//! when an endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or `telemetry.otlp_endpoint`).

use std::io::IsTerminal;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::{LogFormat, TelemetryConfig};

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("telemetry.log_filter {filter:?} is not a valid tracing filter: {reason}")]
    Filter { filter: String, reason: String },
    #[error("cannot build the OTLP exporter for {endpoint}: {reason}")]
    Exporter { endpoint: String, reason: String },
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// Keeps the span exporter alive; flushes pending spans when dropped.
#[must_use = "dropping the guard stops span export"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(err) = provider.shutdown()
        {
            tracing::warn!(error = %err, "flushing spans at shutdown failed");
        }
    }
}

/// Installs the process-wide subscriber, logging to stderr (stdout is for command output).
/// `RUST_LOG`, when set, overrides the filter.
pub fn init(config: &TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let filter_text = std::env::var("RUST_LOG").unwrap_or_else(|_| config.log_filter.clone());
    let filter = EnvFilter::try_new(&filter_text).map_err(|e| TelemetryError::Filter {
        filter: filter_text.clone(),
        reason: e.to_string(),
    })?;

    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let provider = if config.otlp_endpoint.is_empty() {
        None
    } else {
        Some(otlp_provider(&config.otlp_endpoint, &config.service_name)?)
    };
    let otel_layer = provider
        .as_ref()
        .map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("noema")));

    let (text, json) = match config.log_format {
        LogFormat::Text => (
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::stderr().is_terminal()),
            ),
            None,
        ),
        LogFormat::Json => (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr)
                    .flatten_event(true)
                    .with_current_span(true),
            ),
        ),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .with(otel_layer)
        .try_init()
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    Ok(TelemetryGuard { provider })
}

fn otlp_provider(endpoint: &str, service_name: &str) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| TelemetryError::Exporter {
            endpoint: endpoint.to_owned(),
            reason: e.to_string(),
        })?;
    let resource = Resource::builder()
        .with_service_name(service_name.to_owned())
        .build();
    Ok(SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build())
}

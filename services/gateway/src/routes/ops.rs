//! Operational endpoints: liveness, readiness, metrics and the OpenAPI document.

use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use serde_json::{Map, Value, json};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;

use crate::GatewayState;
use crate::go_json::GoJson;
use crate::{RouteDoc, doc, public};
use axum::routing::{MethodRouter, get};

/// Liveness: the gateway process answers. Says nothing about the services behind it.
pub async fn healthz() -> impl IntoResponse {
    GoJson(json!({"status": "ok"}))
}

/// Readiness: every fronted service reports SERVING over gRPC health.
pub async fn readyz(State(state): State<GatewayState>) -> impl IntoResponse {
    let mut services = Map::new();
    let mut ready = true;
    for (name, client) in &state.health {
        let mut client = client.clone();
        let request = HealthCheckRequest {
            service: (*name).to_owned(),
        };
        let status = match client.check(request).await {
            Ok(response) if response.get_ref().status == ServingStatus::Serving as i32 => {
                "serving".to_owned()
            }
            Ok(response) => {
                ready = false;
                match ServingStatus::try_from(response.get_ref().status) {
                    Ok(s) => s.as_str_name().to_ascii_lowercase(),
                    Err(_) => "unknown".to_owned(),
                }
            }
            Err(status) => {
                ready = false;
                format!("unreachable: {}", status.code())
            }
        };
        services.insert((*name).to_owned(), Value::String(status));
    }
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let status = if ready { "ready" } else { "not_ready" };
    (
        code,
        GoJson(json!({"status": status, "services": services})),
    )
}

/// Prometheus text exposition of this process's metrics.
pub async fn metrics() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        noema_runtime::metrics::render(),
    )
}

pub async fn openapi() -> impl IntoResponse {
    GoJson(crate::openapi::document())
}

/// This module's routes and their documentation (see `crate::route_table`).
pub fn routes() -> Vec<(RouteDoc, MethodRouter<GatewayState>)> {
    let ops_doc = |method, path, id, summary| public(doc(method, path, id, "operations", summary));
    vec![
        (
            ops_doc(
                "GET",
                "/healthz",
                "healthz",
                "Liveness of the gateway process",
            ),
            get(healthz),
        ),
        (
            ops_doc(
                "GET",
                "/readyz",
                "readyz",
                "Readiness: every fronted service reports SERVING",
            ),
            get(readyz),
        ),
        (
            ops_doc(
                "GET",
                "/metrics",
                "metrics",
                "Prometheus metrics (text format)",
            ),
            get(metrics),
        ),
        (
            ops_doc("GET", "/openapi.json", "openapi", "This document"),
            get(openapi),
        ),
    ]
}

//! Operational endpoints: liveness, readiness, metrics and the OpenAPI document. They
//! need no token.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;

use crate::GatewayState;
use crate::error::ErrorStyle;
use crate::go_json::GoJson;
use crate::reply::PrometheusText;
use crate::route::{OperationDoc, Reply, Route, Routes, Schemas, Verb};

const OPERATIONS: Routes = Routes::new("operations", ErrorStyle::Noema, "");

/// `{"status": "ok"}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Liveness {
    pub status: &'static str,
}

/// Liveness: the gateway process answers. Says nothing about the services behind it.
async fn healthz() -> GoJson<Liveness> {
    GoJson(Liveness { status: "ok" })
}

/// Every fronted service's gRPC health, and whether all of them serve.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadinessBody {
    /// By gRPC service name: `serving`, `not_serving`, … or `unreachable: <code>`.
    pub services: BTreeMap<String, String>,
    /// `ready` or `not_ready`.
    pub status: &'static str,
}

/// 200 when every service serves, 503 otherwise, with the same body.
pub struct Readiness(ReadinessBody);

impl IntoResponse for Readiness {
    fn into_response(self) -> Response {
        let code = if self.0.status == "ready" {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        (code, GoJson(self.0)).into_response()
    }
}

impl Reply for Readiness {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<ReadinessBody>(schemas, 200, "Every fronted service is serving");
        doc.json_response::<ReadinessBody>(schemas, 503, "A fronted service is not serving");
    }
}

/// Readiness: every fronted service reports SERVING over gRPC health.
async fn readyz(State(state): State<GatewayState>) -> Readiness {
    let mut services = BTreeMap::new();
    let mut ready = true;
    for (name, client) in state.health.iter() {
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
        services.insert((*name).to_owned(), status);
    }
    Readiness(ReadinessBody {
        services,
        status: if ready { "ready" } else { "not_ready" },
    })
}

/// Prometheus text exposition of this process's metrics.
async fn metrics() -> PrometheusText {
    PrometheusText(noema_runtime::metrics::render())
}

async fn openapi() -> GoJson<Value> {
    GoJson(crate::openapi::document())
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = OPERATIONS;
    vec![
        r.route(
            Verb::Get,
            "/healthz",
            "healthz",
            "Liveness of the gateway process",
            healthz,
        )
        .public(),
        r.route(
            Verb::Get,
            "/readyz",
            "readyz",
            "Readiness: every fronted service reports SERVING",
            readyz,
        )
        .public(),
        r.route(
            Verb::Get,
            "/metrics",
            "metrics",
            "Prometheus metrics (text format)",
            metrics,
        )
        .public(),
        r.route(
            Verb::Get,
            "/openapi.json",
            "openapi",
            "This document",
            openapi,
        )
        .public(),
    ]
}

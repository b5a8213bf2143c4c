//! open-cognition's routes (`shared/compat/open-cognition.md`), same paths, shapes and
//! status codes, served by the ledger over gRPC.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use noema_core::time::proto::rfc3339_seconds;
use noema_proto::common::v1::PageRequest;
use noema_proto::ledger::v1 as pb;
use serde::Serialize;
use serde_json::Value;

use crate::GatewayState;
use crate::error::ApiError;
use crate::forward::grpc;
use crate::go_json::GoJson;
use crate::{RouteDoc, doc};
use axum::routing::{MethodRouter, get, post};

/// open-cognition's SystemState: `mode`, `changed_by`, `changed_at` (UTC seconds).
#[derive(Debug, Serialize)]
pub struct SystemStateBody {
    pub mode: &'static str,
    pub changed_by: String,
    pub changed_at: String,
}

fn state_body(state: pb::SystemState) -> SystemStateBody {
    let mode = match pb::SystemMode::try_from(state.mode) {
        Ok(pb::SystemMode::Stopped) => "STOPPED",
        _ => "RUNNING",
    };
    SystemStateBody {
        mode,
        changed_by: state.changed_by,
        changed_at: state
            .changed_at
            .as_ref()
            .map(rfc3339_seconds)
            .unwrap_or_default(),
    }
}

pub async fn status(
    State(state): State<GatewayState>,
    headers: HeaderMap,
) -> Result<GoJson<SystemStateBody>, ApiError> {
    let mut ledger = state.ledger();
    let response = ledger
        .get_status(grpc(&headers, pb::GetStatusRequest {}))
        .await?;
    Ok(GoJson(state_body(response.into_inner())))
}

/// `X-Actor`, or empty (the ledger records `human:unknown`).
fn actor(headers: &HeaderMap) -> String {
    headers
        .get("x-actor")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

pub async fn stop(
    State(state): State<GatewayState>,
    headers: HeaderMap,
) -> Result<GoJson<SystemStateBody>, ApiError> {
    let mut ledger = state.ledger();
    let response = ledger
        .stop(grpc(
            &headers,
            pb::SetModeRequest {
                actor: actor(&headers),
            },
        ))
        .await?;
    Ok(GoJson(state_body(response.into_inner())))
}

pub async fn resume(
    State(state): State<GatewayState>,
    headers: HeaderMap,
) -> Result<GoJson<SystemStateBody>, ApiError> {
    let mut ledger = state.ledger();
    let response = ledger
        .resume(grpc(
            &headers,
            pb::SetModeRequest {
                actor: actor(&headers),
            },
        ))
        .await?;
    Ok(GoJson(state_body(response.into_inner())))
}

/// open-cognition's list parameters: a non-integer or negative value means the default,
/// larger values clamp to 200, and 0 is honoured.
pub fn list_limit(raw: Option<&str>) -> u32 {
    const DEFAULT: u32 = 50;
    const MAX: u32 = 200;
    match raw.map(str::parse::<i64>) {
        Some(Ok(n)) if n >= 0 => u32::try_from(n.min(i64::from(MAX))).unwrap_or(MAX),
        _ => DEFAULT,
    }
}

#[derive(Debug, serde::Deserialize)]
pub struct AuditQuery {
    limit: Option<String>,
}

/// AuditEntry in open-cognition's field order, plus the chain fields it lacks.
#[derive(Debug, Serialize)]
pub struct AuditEntryBody {
    pub id: i64,
    pub occurred_at: String,
    pub actor: String,
    pub action: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
    pub prev_hash: String,
    pub hash: String,
}

pub async fn audit(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Query(query): Query<AuditQuery>,
) -> Result<GoJson<Vec<AuditEntryBody>>, ApiError> {
    let limit = list_limit(query.limit.as_deref());
    if limit == 0 {
        return Ok(GoJson(Vec::new()));
    }
    let mut ledger = state.ledger();
    let response = ledger
        .list_audit(grpc(
            &headers,
            noema_proto::common::v1::ListAuditRequest {
                page: Some(PageRequest {
                    page_size: limit,
                    page_token: String::new(),
                }),
                oldest_first: false,
            },
        ))
        .await?;
    let entries = response
        .into_inner()
        .entries
        .into_iter()
        .map(|e| AuditEntryBody {
            id: e.id,
            occurred_at: e
                .occurred_at
                .as_ref()
                .map(rfc3339_seconds)
                .unwrap_or_default(),
            actor: e.actor,
            action: e.action,
            target_id: e.target_id,
            target_type: e.target_type,
            detail: e
                .detail
                .as_ref()
                .map(noema_proto::json::from_proto_struct)
                .filter(|d| d.as_object().is_some_and(|m| !m.is_empty())),
            prev_hash: e.prev_hash,
            hash: e.hash,
        })
        .collect();
    Ok(GoJson(entries))
}

/// This module's routes and their documentation (see `crate::route_table`).
pub fn routes() -> Vec<(RouteDoc, MethodRouter<GatewayState>)> {
    vec![
        (
            doc(
                "GET",
                "/status",
                "getStatus",
                "ledger",
                "System mode (RUNNING or STOPPED)",
            ),
            get(status),
        ),
        (
            doc(
                "POST",
                "/stop",
                "stop",
                "ledger",
                "Halt writes; reads continue. Actor from X-Actor",
            ),
            post(stop),
        ),
        (
            doc(
                "POST",
                "/resume",
                "resume",
                "ledger",
                "Accept writes again. Actor from X-Actor",
            ),
            post(resume),
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
            get(audit),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::list_limit;

    #[test]
    fn limits_follow_open_cognition() {
        assert_eq!(list_limit(None), 50);
        assert_eq!(list_limit(Some("abc")), 50);
        assert_eq!(list_limit(Some("-3")), 50);
        assert_eq!(list_limit(Some("0")), 0);
        assert_eq!(list_limit(Some("7")), 7);
        assert_eq!(list_limit(Some("9999")), 200);
    }
}

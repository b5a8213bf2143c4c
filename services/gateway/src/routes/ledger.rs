//! open-cognition's system mode and audit routes (`shared/compat/open-cognition.md`),
//! same paths, shapes and status codes, served by the ledger over gRPC. Their errors
//! have always been Noema's own shape.

use noema_core::time::proto::rfc3339_seconds;
use noema_proto::common::v1::PageRequest;
use noema_proto::ledger::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::error::ErrorStyle;
use crate::forward::{Caller, Query};
use crate::go_json::GoJson;
use crate::reply::Answer;
use crate::route::{Route, Routes, Verb};

const LEDGER: Routes = Routes::new("ledger", ErrorStyle::Noema, "noema.ledger.v1.LedgerService");

/// open-cognition's SystemState: `mode`, `changed_by`, `changed_at` (UTC seconds).
#[derive(Debug, Serialize, JsonSchema)]
pub struct SystemStateBody {
    /// `RUNNING` or `STOPPED`.
    pub mode: &'static str,
    pub changed_by: String,
    pub changed_at: String,
}

impl From<pb::SystemState> for SystemStateBody {
    fn from(state: pb::SystemState) -> Self {
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
}

async fn status(caller: Caller) -> Answer<SystemStateBody> {
    let response = caller
        .ledger()
        .get_status(caller.request(pb::GetStatusRequest {}))
        .await?;
    Ok(GoJson(response.into_inner().into()))
}

/// `X-Actor`, or empty (the ledger records `human:unknown`).
fn set_mode(caller: &Caller) -> tonic::Request<pb::SetModeRequest> {
    caller.request(pb::SetModeRequest {
        actor: caller.header("x-actor"),
    })
}

async fn stop(caller: Caller) -> Answer<SystemStateBody> {
    let response = caller.ledger().stop(set_mode(&caller)).await?;
    Ok(GoJson(response.into_inner().into()))
}

async fn resume(caller: Caller) -> Answer<SystemStateBody> {
    let response = caller.ledger().resume(set_mode(&caller)).await?;
    Ok(GoJson(response.into_inner().into()))
}

/// The most items an open-cognition list returns.
pub const MAX_LIST_LIMIT: u32 = 200;

/// open-cognition's list parameters: a non-integer or negative value means the default,
/// larger values clamp to 200, and 0 is honoured.
pub fn list_limit(raw: Option<&str>) -> u32 {
    const DEFAULT: u32 = 50;
    const MAX: u32 = MAX_LIST_LIMIT;
    match raw.map(str::parse::<i64>) {
        Some(Ok(n)) if n >= 0 => u32::try_from(n.min(i64::from(MAX))).unwrap_or(MAX),
        _ => DEFAULT,
    }
}

/// `GET /audit` parameters.
#[derive(Debug, serde::Deserialize, JsonSchema)]
pub struct AuditQuery {
    /// Entries to return: default 50, at most 200
    limit: Option<String>,
}

/// AuditEntry in open-cognition's field order, plus the chain fields it lacks.
#[derive(Debug, Serialize, JsonSchema)]
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
    /// The previous entry's hash: the chain.
    pub prev_hash: String,
    pub hash: String,
}

impl From<noema_proto::common::v1::AuditEntry> for AuditEntryBody {
    fn from(e: noema_proto::common::v1::AuditEntry) -> Self {
        AuditEntryBody {
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
        }
    }
}

async fn audit(caller: Caller, Query(query): Query<AuditQuery>) -> Answer<Vec<AuditEntryBody>> {
    let limit = list_limit(query.limit.as_deref());
    if limit == 0 {
        return Ok(GoJson(Vec::new()));
    }
    let request = noema_proto::common::v1::ListAuditRequest {
        page: Some(PageRequest {
            page_size: limit,
            page_token: String::new(),
        }),
        oldest_first: false,
    };
    let response = caller.ledger().list_audit(caller.request(request)).await?;
    Ok(GoJson(
        response
            .into_inner()
            .entries
            .into_iter()
            .map(AuditEntryBody::from)
            .collect(),
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = LEDGER;
    vec![
        r.route(
            Verb::Get,
            "/status",
            "getStatus",
            "System mode (RUNNING or STOPPED)",
            status,
        )
        .calls("GetStatus")
        .tool("ledger_status", "System mode: RUNNING or STOPPED"),
        r.route(
            Verb::Post,
            "/stop",
            "stop",
            "Halt writes; reads continue. Actor from X-Actor",
            stop,
        )
        .calls("Stop")
        .tool(
            "ledger_stop",
            "Halt ledger writes (reads go on); X-Actor names who",
        ),
        r.route(
            Verb::Post,
            "/resume",
            "resume",
            "Accept writes again. Actor from X-Actor",
            resume,
        )
        .calls("Resume")
        .tool("ledger_resume", "Accept ledger writes again"),
        r.route(
            Verb::Get,
            "/audit",
            "listAudit",
            "Audit log, newest first, hash-chained",
            audit,
        )
        .calls("ListAudit")
        .tool(
            "ledger_audit",
            "The ledger's audit log, newest first, hash-chained",
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

//! CogniRelay's coordination routes (`/v1/coordination/*`, digest §11), served by the
//! continuity service per tenant: bodies pass through as the caller's bytes, an artifact id
//! travels beside them, a query string goes on as a JSON object of its strings, and answers
//! come back as the service wrote them.

use axum::extract::Path;
use noema_proto::continuity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::continuity::{COGNIRELAY, Document, Original, Passed, body, call, request_models};
use crate::features;
use crate::forward::{Caller, LastQuery};
use crate::route::{Route, Verb, param_grammar};

request_models! {
    HandoffCreate => noema_continuity::domain::coordination::handoff::CREATE_REQUEST;
    HandoffConsume => noema_continuity::domain::coordination::handoff::CONSUME_REQUEST;
    SharedCreate => noema_continuity::domain::coordination::shared::CREATE_REQUEST;
    SharedUpdate => noema_continuity::domain::coordination::shared::UPDATE_REQUEST;
    ReconciliationOpen => noema_continuity::domain::coordination::reconciliation::OPEN_REQUEST;
    ReconciliationResolve => noema_continuity::domain::coordination::reconciliation::RESOLVE_REQUEST;
}

/// `GET /v1/coordination/handoffs/query` parameters.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct HandoffQueryParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient_peer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_peer: Option<String>,
    /// pending, accepted_advisory, deferred or rejected
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

/// `GET /v1/coordination/shared/query` parameters (one filter at least).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct SharedQueryParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_peer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub participant_peer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

/// `GET /v1/coordination/reconciliations/query` parameters (one filter at least).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct ReconciliationQueryParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_peer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimant_peer: Option<String>,
    /// open or resolved
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

/// Query parameters as the JSON object of strings the service validates.
fn params<T: Serialize>(params: &T) -> pb::JsonRequest {
    let object = serde_json::to_value(params).unwrap_or_else(|_| Value::Object(Map::new()));
    pb::JsonRequest {
        body: serde_json::to_vec(&object).unwrap_or_else(|_| b"{}".to_vec()),
    }
}

fn item(id: String, bytes: &[u8]) -> pb::ItemRequest {
    pb::ItemRequest {
        id,
        body: bytes.to_vec(),
    }
}

async fn handoff_create(caller: Caller, document: Document<HandoffCreate>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.create_handoff(request).await?.into_inner().body,
    ))
}

async fn handoff_get(caller: Caller, Path(handoff_id): Path<String>) -> Passed {
    let (mut client, request) = call(&caller, item(handoff_id, &[]));
    Ok(Original(
        client.get_handoff(request).await?.into_inner().body,
    ))
}

async fn handoffs_query(caller: Caller, LastQuery(query): LastQuery<HandoffQueryParams>) -> Passed {
    let (mut client, request) = call(&caller, params(&query));
    Ok(Original(
        client.query_handoffs(request).await?.into_inner().body,
    ))
}

async fn handoff_consume(
    caller: Caller,
    Path(handoff_id): Path<String>,
    document: Document<HandoffConsume>,
) -> Passed {
    let (mut client, request) = call(&caller, item(handoff_id, &document.bytes));
    Ok(Original(
        client.consume_handoff(request).await?.into_inner().body,
    ))
}

async fn shared_create(caller: Caller, document: Document<SharedCreate>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.create_shared(request).await?.into_inner().body,
    ))
}

async fn shared_get(caller: Caller, Path(shared_id): Path<String>) -> Passed {
    let (mut client, request) = call(&caller, item(shared_id, &[]));
    Ok(Original(
        client.get_shared(request).await?.into_inner().body,
    ))
}

async fn shared_history(caller: Caller, Path(shared_id): Path<String>) -> Passed {
    let (mut client, request) = call(&caller, item(shared_id, &[]));
    Ok(Original(
        client.get_shared_history(request).await?.into_inner().body,
    ))
}

async fn shared_query(caller: Caller, LastQuery(query): LastQuery<SharedQueryParams>) -> Passed {
    let (mut client, request) = call(&caller, params(&query));
    Ok(Original(
        client.query_shared(request).await?.into_inner().body,
    ))
}

async fn shared_update(
    caller: Caller,
    Path(shared_id): Path<String>,
    document: Document<SharedUpdate>,
) -> Passed {
    let (mut client, request) = call(&caller, item(shared_id, &document.bytes));
    Ok(Original(
        client.update_shared(request).await?.into_inner().body,
    ))
}

async fn reconciliation_open(caller: Caller, document: Document<ReconciliationOpen>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.open_reconciliation(request).await?.into_inner().body,
    ))
}

async fn reconciliation_get(caller: Caller, Path(reconciliation_id): Path<String>) -> Passed {
    let (mut client, request) = call(&caller, item(reconciliation_id, &[]));
    Ok(Original(
        client.get_reconciliation(request).await?.into_inner().body,
    ))
}

async fn reconciliations_query(
    caller: Caller,
    LastQuery(query): LastQuery<ReconciliationQueryParams>,
) -> Passed {
    let (mut client, request) = call(&caller, params(&query));
    Ok(Original(
        client
            .query_reconciliations(request)
            .await?
            .into_inner()
            .body,
    ))
}

async fn reconciliation_resolve(
    caller: Caller,
    Path(reconciliation_id): Path<String>,
    document: Document<ReconciliationResolve>,
) -> Passed {
    let (mut client, request) = call(&caller, item(reconciliation_id, &document.bytes));
    Ok(Original(
        client
            .resolve_reconciliation(request)
            .await?
            .into_inner()
            .body,
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    let routes = vec![
        r.route(
            Verb::Post,
            "/v1/coordination/handoff/create",
            "coordinationHandoffCreate",
            "CogniRelay: hand a registered peer the shareable part of an active capsule",
            handoff_create,
        )
        .calls("CreateHandoff")
        .tool(
            "coordination.handoff_create",
            "Hand a peer an active capsule's constraints",
        )
        .feature(features::COORDINATION_HANDOFFS)
        .status(404, "Peer or capsule not found")
        .status(409, "Peer is untrusted")
        .status(400, "sender_signature does not verify")
        .status(
            403,
            "Signing key not confirmed by identity, or the peer requires signed writes",
        )
        .status(503, "Identity unreachable for a signed write"),
        r.route(
            Verb::Get,
            "/v1/coordination/handoff/{handoff_id}",
            "coordinationHandoffGet",
            "CogniRelay: one handoff (its sender, its recipient or an admin)",
            handoff_get,
        )
        .calls("GetHandoff")
        .tool("coordination.handoff_read", "Read one visible handoff")
        .feature(features::COORDINATION_HANDOFFS)
        .status(404, "Handoff artifact not found"),
        r.route(
            Verb::Get,
            "/v1/coordination/handoffs/query",
            "coordinationHandoffsQuery",
            "CogniRelay: the caller's handoffs as sender or recipient, newest first",
            handoffs_query,
        )
        .query_model(&noema_continuity::domain::coordination::handoff::QUERY)
        .describe("recipient_peer or sender_peer is required (400 otherwise).")
        .calls("QueryHandoffs")
        .tool(
            "coordination.handoffs_query",
            "Query handoffs by sender or recipient",
        )
        .feature(features::COORDINATION_HANDOFFS),
        r.route(
            Verb::Post,
            "/v1/coordination/handoff/{handoff_id}/consume",
            "coordinationHandoffConsume",
            "CogniRelay: the recipient accepts, defers or rejects a handoff, once",
            handoff_consume,
        )
        .calls("ConsumeHandoff")
        .tool(
            "coordination.handoff_consume",
            "Accept, defer or reject a handoff",
        )
        .feature(features::COORDINATION_HANDOFFS)
        .status(404, "Handoff artifact not found")
        .status(409, "Handoff has already been consumed"),
        r.route(
            Verb::Post,
            "/v1/coordination/shared/create",
            "coordinationSharedCreate",
            "CogniRelay: owner-written coordination state for registered participants",
            shared_create,
        )
        .calls("CreateShared")
        .tool(
            "coordination.shared_create",
            "Create a shared coordination artifact",
        )
        .feature(features::COORDINATION_SHARED_STATE)
        .status(404, "Peer not found")
        .status(409, "Peer is untrusted")
        .status(400, "sender_signature does not verify")
        .status(
            403,
            "Signing key not confirmed by identity, or the peer requires signed writes",
        )
        .status(503, "Identity unreachable for a signed write"),
        r.route(
            Verb::Get,
            "/v1/coordination/shared/query",
            "coordinationSharedQuery",
            "CogniRelay: shared artifacts the caller owns or takes part in",
            shared_query,
        )
        .query_model(&noema_continuity::domain::coordination::shared::QUERY)
        .describe("owner_peer, participant_peer, task_id or thread_id is required (400 otherwise).")
        .calls("QueryShared")
        .tool("coordination.shared_query", "Query shared artifacts")
        .feature(features::COORDINATION_SHARED_STATE),
        r.route(
            Verb::Get,
            "/v1/coordination/shared/{shared_id}",
            "coordinationSharedGet",
            "CogniRelay: one shared artifact (owner, participant or admin)",
            shared_get,
        )
        .calls("GetShared")
        .tool(
            "coordination.shared_read",
            "Read one visible shared artifact",
        )
        .feature(features::COORDINATION_SHARED_STATE)
        .status(404, "Shared coordination artifact not found"),
        r.route(
            Verb::Get,
            "/v1/coordination/shared/{shared_id}/history",
            "coordinationSharedHistory",
            "Noema: the superseded versions of a shared artifact, oldest first",
            shared_history,
        )
        .calls("GetSharedHistory")
        .feature(features::COORDINATION_SHARED_STATE)
        .status(404, "Shared coordination artifact not found"),
        r.route(
            Verb::Post,
            "/v1/coordination/shared/{shared_id}/update",
            "coordinationSharedUpdate",
            "CogniRelay: the owner replaces the state at the version it read",
            shared_update,
        )
        .calls("UpdateShared")
        .tool(
            "coordination.shared_update",
            "Update a shared artifact at a version",
        )
        .feature(features::COORDINATION_SHARED_STATE)
        .status(404, "Shared coordination artifact not found")
        .status(409, "Shared coordination version conflict")
        .status(400, "sender_signature does not verify")
        .status(
            403,
            "Signing key not confirmed by identity, or the peer requires signed writes",
        )
        .status(503, "Identity unreachable for a signed write"),
        r.route(
            Verb::Post,
            "/v1/coordination/reconciliation/open",
            "coordinationReconciliationOpen",
            "CogniRelay: record a disagreement between claims on visible artifacts",
            reconciliation_open,
        )
        .calls("OpenReconciliation")
        .tool(
            "coordination.reconciliation_open",
            "Open a reconciliation over conflicting claims",
        )
        .describe("No two claims share source_kind, source_id and claimant_peer (400 otherwise).")
        .status(404, "Peer or source artifact not found")
        .status(409, "Peer is untrusted")
        .status(400, "sender_signature does not verify")
        .status(
            403,
            "Signing key not confirmed by identity, or the peer requires signed writes",
        )
        .status(503, "Identity unreachable for a signed write"),
        r.route(
            Verb::Get,
            "/v1/coordination/reconciliations/query",
            "coordinationReconciliationsQuery",
            "CogniRelay: reconciliations the caller owns or claims in",
            reconciliations_query,
        )
        .query_model(&noema_continuity::domain::coordination::reconciliation::QUERY)
        .describe("One filter at least is required (400 otherwise).")
        .calls("QueryReconciliations")
        .tool(
            "coordination.reconciliations_query",
            "Query reconciliations",
        ),
        r.route(
            Verb::Get,
            "/v1/coordination/reconciliation/{reconciliation_id}",
            "coordinationReconciliationGet",
            "CogniRelay: one reconciliation (owner, participant or admin)",
            reconciliation_get,
        )
        .calls("GetReconciliation")
        .tool(
            "coordination.reconciliation_read",
            "Read one visible reconciliation",
        )
        .status(404, "Reconciliation artifact not found"),
        r.route(
            Verb::Post,
            "/v1/coordination/reconciliation/{reconciliation_id}/resolve",
            "coordinationReconciliationResolve",
            "CogniRelay: the owner or an admin resolves a reconciliation, once",
            reconciliation_resolve,
        )
        .calls("ResolveReconciliation")
        .tool(
            "coordination.reconciliation_resolve",
            "Resolve a reconciliation once",
        )
        .status(404, "Reconciliation artifact not found")
        .status(409, "Already resolved or version conflict")
        .status(400, "sender_signature does not verify")
        .status(
            403,
            "Signing key not confirmed by identity, or the peer requires signed writes",
        )
        .status(503, "Identity unreachable for a signed write"),
    ];
    // Artifact ids: the kind's prefix and 32 lowercase hex digits (the service's `check_id`).
    use noema_continuity::domain::coordination::{handoff, reconciliation, shared};
    let id = |prefix: &str| serde_json::json!({"type": "string", "pattern": format!("^{prefix}[0-9a-f]{{32}}$")});
    let routes = param_grammar(routes, "handoff_id", &id(handoff::PREFIX));
    let routes = param_grammar(routes, "shared_id", &id(shared::PREFIX));
    param_grammar(routes, "reconciliation_id", &id(reconciliation::PREFIX))
}

//! Identity over REST: Noema's agent routes, MoltNet's agent and caller-identity routes,
//! and CogniRelay's token routes (`shared/compat/moltnet.md`, `cognirelay.md` §13).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use noema_core::time::proto::{parse_rfc3339, rfc3339_seconds};
use noema_proto::identity::v1 as pb;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::GatewayState;
use crate::error::{ApiError, ErrorStyle, Styled};
use crate::forward::{grpc, json_body};
use crate::go_json::GoJson;
use crate::{RouteDoc, doc};
use axum::routing::{MethodRouter, get, post};

fn agent_body(agent: &pb::Agent) -> Value {
    json!({
        "agent_id": agent.agent_id,
        "public_key": agent.public_key,
        "fingerprint": agent.fingerprint,
        "first_object_id": agent.first_object_id,
        "registered_at": agent.registered_at.as_ref().map(rfc3339_seconds),
        "key_version": agent.key_version,
        "key_rotated_at": agent.key_rotated_at.as_ref().map(rfc3339_seconds),
    })
}

#[derive(Debug, Deserialize)]
struct RegisterAgentBody {
    #[serde(default)]
    agent_id: String,
    #[serde(default)]
    public_key: String,
}

/// `POST /v1/agents`: 201 when registered now, 200 when already registered with this key,
/// 422 `public key mismatch` for another key.
pub async fn register_agent(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, GoJson<Value>), ApiError> {
    let body: RegisterAgentBody = json_body(&body, ErrorStyle::Noema)?;
    let mut identity = state.identity();
    let response = identity
        .register_agent(grpc(
            &headers,
            pb::RegisterAgentRequest {
                agent_id: body.agent_id,
                public_key: body.public_key,
                first_object_id: String::new(),
            },
        ))
        .await?
        .into_inner();
    let status = if response.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let agent = response.agent.unwrap_or_default();
    Ok((status, GoJson(agent_body(&agent))))
}

pub async fn get_agent(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Path(agent_id): Path<String>,
) -> Result<GoJson<Value>, ApiError> {
    let mut identity = state.identity();
    let agent = identity
        .get_agent(grpc(&headers, pb::GetAgentRequest { agent_id }))
        .await?
        .into_inner();
    Ok(GoJson(agent_body(&agent)))
}

#[derive(Debug, Deserialize)]
struct RotateKeyBody {
    #[serde(default)]
    new_public_key: String,
    #[serde(default)]
    proof_signature: String,
}

/// `POST /v1/agents/{agent_id}/rotate-key`: needs a signature by the current key.
pub async fn rotate_key(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Path(agent_id): Path<String>,
    body: Bytes,
) -> Result<GoJson<Value>, ApiError> {
    let body: RotateKeyBody = json_body(&body, ErrorStyle::Noema)?;
    let mut identity = state.identity();
    let agent = identity
        .rotate_key(grpc(
            &headers,
            pb::RotateKeyRequest {
                agent_id,
                new_public_key: body.new_public_key,
                proof_signature: body.proof_signature,
            },
        ))
        .await?
        .into_inner();
    Ok(GoJson(agent_body(&agent)))
}

/// MoltNet's `GET /agents/{fingerprint}` → `{publicKey, fingerprint}`.
pub async fn agent_by_fingerprint(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Path(fingerprint): Path<String>,
) -> Result<GoJson<Value>, ApiError> {
    let mut identity = state.identity();
    let agent = identity
        .get_agent_by_fingerprint(grpc(
            &headers,
            pb::GetAgentByFingerprintRequest { fingerprint },
        ))
        .await
        .styled(ErrorStyle::MoltNet)?
        .into_inner();
    Ok(GoJson(
        json!({"publicKey": agent.public_key, "fingerprint": agent.fingerprint}),
    ))
}

/// MoltNet's `GET /crypto/identity` → `{identityId, publicKey, fingerprint}`.
pub async fn caller_identity(
    State(state): State<GatewayState>,
    headers: HeaderMap,
) -> Result<GoJson<Value>, ApiError> {
    let mut identity = state.identity();
    let agent = identity
        .get_caller_identity(grpc(&headers, pb::GetCallerIdentityRequest {}))
        .await
        .styled(ErrorStyle::MoltNet)?
        .into_inner();
    Ok(GoJson(json!({
        "identityId": agent.agent_id,
        "publicKey": agent.public_key,
        "fingerprint": agent.fingerprint,
    })))
}

/// CogniRelay's `token_meta`: timestamps as UTC seconds or null, absent strings as null.
fn token_meta(meta: &pb::TokenMeta) -> Value {
    let text = |s: &str| if s.is_empty() { Value::Null } else { json!(s) };
    let time = |t: &Option<prost_types::Timestamp>| t.as_ref().map(rfc3339_seconds);
    json!({
        "token_id": meta.token_id,
        "peer_id": meta.peer_id,
        "scopes": meta.scopes,
        "read_namespaces": meta.read_namespaces,
        "write_namespaces": meta.write_namespaces,
        "status": meta.status,
        "effective_status": meta.effective_status,
        "issued_at": time(&meta.issued_at),
        "expires_at": time(&meta.expires_at),
        "revoked_at": time(&meta.revoked_at),
        "revoked_reason": text(&meta.revoked_reason),
        "rotated_at": time(&meta.rotated_at),
        "rotated_to_token_id": text(&meta.rotated_to_token_id),
        "rotated_from_token_id": text(&meta.rotated_from_token_id),
        "description": text(&meta.description),
        "token_sha256": meta.token_sha256,
    })
}

#[derive(Debug, Deserialize)]
pub struct ListTokensQuery {
    #[serde(default)]
    peer_id: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    include_inactive: Option<String>,
}

pub async fn list_tokens(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Query(query): Query<ListTokensQuery>,
) -> Result<GoJson<Value>, ApiError> {
    let include_inactive = matches!(
        query
            .include_inactive
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("true" | "1" | "yes")
    );
    let mut identity = state.identity();
    let tokens = identity
        .list_tokens(grpc(
            &headers,
            pb::ListTokensRequest {
                peer_id: query.peer_id,
                status: query.status,
                include_inactive,
            },
        ))
        .await
        .styled(ErrorStyle::CogniRelay)?
        .into_inner()
        .tokens;
    let tokens: Vec<Value> = tokens.iter().map(token_meta).collect();
    Ok(GoJson(
        json!({"ok": true, "count": tokens.len(), "tokens": tokens}),
    ))
}

#[derive(Debug, Default, Deserialize)]
struct IssueBody {
    #[serde(default)]
    peer_id: String,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    read_namespaces: Vec<String>,
    #[serde(default)]
    write_namespaces: Vec<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    ttl_seconds: Option<u64>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    token_id: Option<String>,
    #[serde(default)]
    template: Option<String>,
}

fn timestamp_field(
    field: &str,
    text: Option<&str>,
) -> Result<Option<prost_types::Timestamp>, ApiError> {
    match text {
        None | Some("") => Ok(None),
        Some(text) => parse_rfc3339(text).map(Some).ok_or_else(|| {
            ApiError::new(
                noema_core::ErrorCode::InvalidArgument,
                format!("{field} must be an RFC 3339 timestamp like 2026-01-31T12:00:00Z"),
            )
            .styled(ErrorStyle::CogniRelay)
        }),
    }
}

pub async fn issue_token(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<GoJson<Value>, ApiError> {
    let body: IssueBody = json_body(&body, ErrorStyle::CogniRelay)?;
    let mut identity = state.identity();
    let response = identity
        .issue_token(grpc(
            &headers,
            pb::IssueTokenRequest {
                peer_id: body.peer_id,
                scopes: body.scopes,
                read_namespaces: body.read_namespaces,
                write_namespaces: body.write_namespaces,
                expires_at: timestamp_field("expires_at", body.expires_at.as_deref())?,
                ttl_seconds: body.ttl_seconds.unwrap_or(0),
                description: body.description.unwrap_or_default(),
                token_id: body.token_id.unwrap_or_default(),
                template: body.template.unwrap_or_default(),
            },
        ))
        .await
        .styled(ErrorStyle::CogniRelay)?
        .into_inner();
    Ok(GoJson(json!({
        "ok": true,
        "token": response.token,
        "token_meta": response.token_meta.as_ref().map(token_meta),
        "committed": true,
        "latest_commit": null,
    })))
}

#[derive(Debug, Default, Deserialize)]
struct RevokeBody {
    #[serde(default)]
    token_id: Option<String>,
    #[serde(default)]
    token_sha256: Option<String>,
    #[serde(default)]
    peer_id: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

pub async fn revoke_token(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<GoJson<Value>, ApiError> {
    let body: RevokeBody = json_body(&body, ErrorStyle::CogniRelay)?;
    let mut identity = state.identity();
    let response = identity
        .revoke_token(grpc(
            &headers,
            pb::RevokeTokenRequest {
                token_id: body.token_id.unwrap_or_default(),
                token_sha256: body.token_sha256.unwrap_or_default(),
                peer_id: body.peer_id.unwrap_or_default(),
                reason: body.reason.unwrap_or_default(),
            },
        ))
        .await
        .styled(ErrorStyle::CogniRelay)?
        .into_inner();
    let tokens: Vec<Value> = response.tokens.iter().map(token_meta).collect();
    Ok(GoJson(json!({
        "ok": true,
        "matched": response.matched,
        "revoked": response.revoked,
        "tokens": tokens,
        "committed": true,
        "latest_commit": null,
    })))
}

#[derive(Debug, Default, Deserialize)]
struct RotateBody {
    #[serde(default)]
    token_id: Option<String>,
    #[serde(default)]
    token_sha256: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    read_namespaces: Vec<String>,
    #[serde(default)]
    write_namespaces: Vec<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    ttl_seconds: Option<u64>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    new_token_id: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

pub async fn rotate_token(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<GoJson<Value>, ApiError> {
    let body: RotateBody = json_body(&body, ErrorStyle::CogniRelay)?;
    let mut identity = state.identity();
    let response = identity
        .rotate_token(grpc(
            &headers,
            pb::RotateTokenRequest {
                token_id: body.token_id.unwrap_or_default(),
                token_sha256: body.token_sha256.unwrap_or_default(),
                scopes: body.scopes,
                read_namespaces: body.read_namespaces,
                write_namespaces: body.write_namespaces,
                expires_at: timestamp_field("expires_at", body.expires_at.as_deref())?,
                ttl_seconds: body.ttl_seconds.unwrap_or(0),
                description: body.description.unwrap_or_default(),
                new_token_id: body.new_token_id.unwrap_or_default(),
                reason: body.reason.unwrap_or_default(),
            },
        ))
        .await
        .styled(ErrorStyle::CogniRelay)?
        .into_inner();
    Ok(GoJson(json!({
        "ok": true,
        "token": response.token,
        "from_token": response.from_token.as_ref().map(token_meta),
        "token_meta": response.token_meta.as_ref().map(token_meta),
        "committed": true,
        "latest_commit": null,
    })))
}

/// This module's routes and their documentation (see `crate::route_table`).
pub fn routes() -> Vec<(RouteDoc, MethodRouter<GatewayState>)> {
    vec![
        (
            doc(
                "POST",
                "/v1/agents",
                "registerAgent",
                "identity",
                "Register an agent's Ed25519 key (trust on first use): 201 new, 200 same key, 422 public key mismatch",
            ),
            post(register_agent),
        ),
        (
            doc(
                "GET",
                "/v1/agents/{agent_id}",
                "getAgent",
                "identity",
                "An agent and its current key",
            ),
            get(get_agent),
        ),
        (
            doc(
                "POST",
                "/v1/agents/{agent_id}/rotate-key",
                "rotateKey",
                "identity",
                "Replace an agent's key; needs a signature by the current key",
            ),
            post(rotate_key),
        ),
        (
            doc(
                "GET",
                "/agents/{fingerprint}",
                "getAgentByFingerprint",
                "identity",
                "MoltNet: an agent's public key by fingerprint",
            ),
            get(agent_by_fingerprint),
        ),
        (
            doc(
                "GET",
                "/crypto/identity",
                "getCallerIdentity",
                "identity",
                "MoltNet: the caller's own identity and key",
            ),
            get(caller_identity),
        ),
        (
            RouteDoc {
                query: &[
                    ("peer_id", "Only this peer's tokens"),
                    ("status", "active, revoked or expired"),
                    (
                        "include_inactive",
                        "true to include revoked and expired tokens",
                    ),
                ],
                ..doc(
                    "GET",
                    "/v1/security/tokens",
                    "listTokens",
                    "identity",
                    "CogniRelay: tokens, newest first",
                )
            },
            get(list_tokens),
        ),
        (
            doc(
                "POST",
                "/v1/security/tokens/issue",
                "issueToken",
                "identity",
                "CogniRelay: issue a token (shown once)",
            ),
            post(issue_token),
        ),
        (
            doc(
                "POST",
                "/v1/security/tokens/revoke",
                "revokeToken",
                "identity",
                "CogniRelay: revoke by token_id, token_sha256 or peer_id",
            ),
            post(revoke_token),
        ),
        (
            doc(
                "POST",
                "/v1/security/tokens/rotate",
                "rotateToken",
                "identity",
                "CogniRelay: replace a token, revoking the old one",
            ),
            post(rotate_token),
        ),
    ]
}

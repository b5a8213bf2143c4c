//! CogniRelay's token routes (`shared/compat/cognirelay.md` §13): list, issue, revoke and
//! rotate API tokens. Tokens are shown once, stored only as SHA-256.

use noema_core::time::proto::{parse_rfc3339, rfc3339_seconds};
use noema_proto::identity::v1 as pb;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorStyle};
use crate::features;
use crate::forward::{Caller, JsonBody, Query};
use crate::go_json::GoJson;
use crate::reply::Answer;
use crate::route::{Route, Routes, Verb};

const COGNIRELAY: Routes = Routes::new(
    "identity",
    ErrorStyle::CogniRelay,
    "noema.identity.v1.IdentityService",
);

/// CogniRelay's `token_meta`: timestamps as UTC seconds or null, absent strings as null.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TokenMeta {
    pub description: Option<String>,
    /// `active`, `revoked` or `expired`, judged now.
    pub effective_status: String,
    pub expires_at: Option<String>,
    pub issued_at: Option<String>,
    pub peer_id: String,
    pub read_namespaces: Vec<String>,
    pub revoked_at: Option<String>,
    pub revoked_reason: Option<String>,
    pub rotated_at: Option<String>,
    pub rotated_from_token_id: Option<String>,
    pub rotated_to_token_id: Option<String>,
    pub scopes: Vec<String>,
    pub status: String,
    /// Whose data the token acts on (Noema's tenancy; by default its peer).
    pub tenant: String,
    pub token_id: String,
    pub token_sha256: String,
    pub write_namespaces: Vec<String>,
}

impl From<pb::TokenMeta> for TokenMeta {
    fn from(meta: pb::TokenMeta) -> Self {
        let text = |s: String| (!s.is_empty()).then_some(s);
        let time = |t: Option<prost_types::Timestamp>| t.as_ref().map(rfc3339_seconds);
        TokenMeta {
            description: text(meta.description),
            effective_status: meta.effective_status,
            expires_at: time(meta.expires_at),
            issued_at: time(meta.issued_at),
            peer_id: meta.peer_id,
            read_namespaces: meta.read_namespaces,
            revoked_at: time(meta.revoked_at),
            revoked_reason: text(meta.revoked_reason),
            rotated_at: time(meta.rotated_at),
            rotated_from_token_id: text(meta.rotated_from_token_id),
            rotated_to_token_id: text(meta.rotated_to_token_id),
            scopes: meta.scopes,
            status: meta.status,
            tenant: meta.tenant,
            token_id: meta.token_id,
            token_sha256: meta.token_sha256,
            write_namespaces: meta.write_namespaces,
        }
    }
}

/// `GET /v1/security/tokens` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TokensQuery {
    /// Only this peer's tokens
    #[serde(default)]
    pub peer_id: Option<String>,
    /// active, revoked or expired
    #[serde(default)]
    #[schemars(extend("enum" = ["", "active", "revoked", "expired"]))]
    pub status: Option<String>,
    /// true to include revoked and expired tokens
    #[serde(default)]
    pub include_inactive: Option<String>,
}

/// CogniRelay's token list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TokenList {
    pub count: u64,
    pub ok: bool,
    pub tokens: Vec<TokenMeta>,
}

async fn list_tokens(caller: Caller, Query(query): Query<TokensQuery>) -> Answer<TokenList> {
    let include_inactive = matches!(
        query
            .include_inactive
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("true" | "1" | "yes")
    );
    let request = pb::ListTokensRequest {
        peer_id: query.peer_id.unwrap_or_default(),
        status: query.status.unwrap_or_default(),
        include_inactive,
    };
    let tokens = caller
        .identity()
        .list_tokens(caller.request(request))
        .await?
        .into_inner()
        .tokens;
    Ok(GoJson(TokenList {
        count: u64::try_from(tokens.len()).unwrap_or(u64::MAX),
        ok: true,
        tokens: tokens.into_iter().map(TokenMeta::from).collect(),
    }))
}

/// A token to issue.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["peer_id"]))]
pub struct IssueInput {
    /// Who the token acts as; a registered agent id makes it act as that agent.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub peer_id: String,
    /// Default: every scope but `admin:peers`.
    #[serde(default)]
    #[schemars(schema_with = "scope_list")]
    pub scopes: Vec<String>,
    #[serde(default)]
    #[schemars(schema_with = "namespace_list")]
    pub read_namespaces: Vec<String>,
    #[serde(default)]
    #[schemars(schema_with = "namespace_list")]
    pub write_namespaces: Vec<String>,
    /// RFC 3339, in the future; not with `ttl_seconds`.
    #[serde(default)]
    #[schemars(extend("anyOf" = [{"type": "null"}, {"enum": [""]}, {"format": "date-time"}]))]
    pub expires_at: Option<String>,
    /// At most a year.
    #[serde(default)]
    #[schemars(range(max = noema_core::scopes::MAX_TOKEN_TTL_SECONDS))]
    pub ttl_seconds: Option<u64>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub token_id: Option<String>,
    #[serde(default)]
    #[schemars(extend("enum" = [null, "", "owner", "collaboration_peer", "replication_peer"]))]
    pub template: Option<String>,
    /// Whose data the token acts on; default its `peer_id`. Tokens with one tenant act
    /// for one agent. Only a superuser may name a tenant other than its own.
    #[serde(default)]
    pub tenant: Option<String>,
}

/// Scopes, each one a token may carry.
fn scope_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "enum": noema_core::scopes::known_scopes() }
    })
}

/// Namespaces (default `*`): `*`, or a relative path of non-empty segments other than `.` and `..`.
fn namespace_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": { "type": "string", "pattern": noema_core::scopes::NAMESPACE_PATTERN }
    })
}

fn timestamp_field(
    field: &str,
    text: Option<&str>,
) -> Result<Option<prost_types::Timestamp>, ApiError> {
    match text {
        None | Some("") => Ok(None),
        Some(text) => parse_rfc3339(text).map(Some).ok_or_else(|| {
            ApiError::invalid(format!(
                "{field} must be an RFC 3339 timestamp like 2026-01-31T12:00:00Z"
            ))
        }),
    }
}

/// A new token, shown once.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Issued {
    pub committed: bool,
    /// Always null (CogniRelay's git commit of its token file).
    pub latest_commit: (),
    pub ok: bool,
    pub token: String,
    pub token_meta: Option<TokenMeta>,
}

async fn issue_token(caller: Caller, JsonBody(body): JsonBody<IssueInput>) -> Answer<Issued> {
    let request = pb::IssueTokenRequest {
        peer_id: body.peer_id,
        expires_at: timestamp_field("expires_at", body.expires_at.as_deref())?,
        scopes: body.scopes,
        read_namespaces: body.read_namespaces,
        write_namespaces: body.write_namespaces,
        ttl_seconds: body.ttl_seconds.unwrap_or(0),
        description: body.description.unwrap_or_default(),
        token_id: body.token_id.unwrap_or_default(),
        template: body.template.unwrap_or_default(),
        tenant: body.tenant.unwrap_or_default(),
    };
    let response = caller
        .identity()
        .issue_token(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Issued {
        committed: true,
        latest_commit: (),
        ok: true,
        token: response.token,
        token_meta: response.token_meta.map(TokenMeta::from),
    }))
}

/// Tokens to revoke: by id, by hash, or every token of a peer.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("anyOf" = [
    {"required": ["token_id"], "properties": {"token_id": {"type": "string", "minLength": 1}}},
    {"required": ["token_sha256"], "properties": {"token_sha256": {"type": "string"}}},
    {"required": ["peer_id"], "properties": {"peer_id": {"type": "string", "minLength": 1}}},
]))]
pub struct RevokeInput {
    #[serde(default)]
    pub token_id: Option<String>,
    #[serde(default)]
    #[schemars(regex(pattern = "^(sha256:)?[0-9a-fA-F]{64}$"))]
    pub token_sha256: Option<String>,
    #[serde(default)]
    pub peer_id: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a revocation matched and changed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Revoked {
    pub committed: bool,
    pub latest_commit: (),
    pub matched: u32,
    pub ok: bool,
    pub revoked: u32,
    pub tokens: Vec<TokenMeta>,
}

async fn revoke_token(caller: Caller, JsonBody(body): JsonBody<RevokeInput>) -> Answer<Revoked> {
    let request = pb::RevokeTokenRequest {
        token_id: body.token_id.unwrap_or_default(),
        token_sha256: body.token_sha256.unwrap_or_default(),
        peer_id: body.peer_id.unwrap_or_default(),
        reason: body.reason.unwrap_or_default(),
    };
    let response = caller
        .identity()
        .revoke_token(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Revoked {
        committed: true,
        latest_commit: (),
        matched: response.matched,
        ok: true,
        revoked: response.revoked,
        tokens: response.tokens.into_iter().map(TokenMeta::from).collect(),
    }))
}

/// A token to replace (by id or hash) and what the new one gets. (Not a flattened
/// struct shared with [`IssueInput`]: serde's flatten would drop the line and column
/// from decode errors.)
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("anyOf" = [
    {"required": ["token_id"], "properties": {"token_id": {"type": "string", "minLength": 1}}},
    {"required": ["token_sha256"], "properties": {"token_sha256": {"type": "string"}}},
]))]
pub struct RotateInput {
    #[serde(default)]
    pub token_id: Option<String>,
    #[serde(default)]
    #[schemars(regex(pattern = "^(sha256:)?[0-9a-fA-F]{64}$"))]
    pub token_sha256: Option<String>,
    /// Default: every scope but `admin:peers`.
    #[serde(default)]
    #[schemars(schema_with = "scope_list")]
    pub scopes: Vec<String>,
    #[serde(default)]
    #[schemars(schema_with = "namespace_list")]
    pub read_namespaces: Vec<String>,
    #[serde(default)]
    #[schemars(schema_with = "namespace_list")]
    pub write_namespaces: Vec<String>,
    /// RFC 3339, in the future; not with `ttl_seconds`.
    #[serde(default)]
    #[schemars(extend("anyOf" = [{"type": "null"}, {"enum": [""]}, {"format": "date-time"}]))]
    pub expires_at: Option<String>,
    /// At most a year.
    #[serde(default)]
    #[schemars(range(max = noema_core::scopes::MAX_TOKEN_TTL_SECONDS))]
    pub ttl_seconds: Option<u64>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub new_token_id: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The new token (shown once) and the one it replaced.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Rotated {
    pub committed: bool,
    pub from_token: Option<TokenMeta>,
    pub latest_commit: (),
    pub ok: bool,
    pub token: String,
    pub token_meta: Option<TokenMeta>,
}

async fn rotate_token(caller: Caller, JsonBody(body): JsonBody<RotateInput>) -> Answer<Rotated> {
    let request = pb::RotateTokenRequest {
        token_id: body.token_id.unwrap_or_default(),
        token_sha256: body.token_sha256.unwrap_or_default(),
        expires_at: timestamp_field("expires_at", body.expires_at.as_deref())?,
        scopes: body.scopes,
        read_namespaces: body.read_namespaces,
        write_namespaces: body.write_namespaces,
        ttl_seconds: body.ttl_seconds.unwrap_or(0),
        description: body.description.unwrap_or_default(),
        new_token_id: body.new_token_id.unwrap_or_default(),
        reason: body.reason.unwrap_or_default(),
    };
    let response = caller
        .identity()
        .rotate_token(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Rotated {
        committed: true,
        from_token: response.from_token.map(TokenMeta::from),
        latest_commit: (),
        ok: true,
        token: response.token,
        token_meta: response.token_meta.map(TokenMeta::from),
    }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    vec![
        r.route(
            Verb::Get,
            "/v1/security/tokens",
            "listTokens",
            "CogniRelay: tokens, newest first",
            list_tokens,
        )
        .calls("ListTokens")
        .tool(
            "security.tokens_list",
            "API tokens (metadata, never secrets)",
        ),
        r.route(
            Verb::Post,
            "/v1/security/tokens/issue",
            "issueToken",
            "CogniRelay: issue a token (shown once)",
            issue_token,
        )
        .calls("IssueToken")
        .status(409, "A token with this token_id exists")
        .status(
            400,
            "Invalid; also expires_at in the past, or with ttl_seconds",
        )
        .tool(
            "security.tokens_issue",
            "Issue a scoped API token (the secret is shown once)",
        )
        .feature(features::SECURITY_TOKENS),
        r.route(
            Verb::Post,
            "/v1/security/tokens/revoke",
            "revokeToken",
            "CogniRelay: revoke by token_id, token_sha256 or peer_id",
            revoke_token,
        )
        .calls("RevokeToken")
        .status(404, "No token matched")
        .status(422, "The owner token cannot be revoked through the API")
        .tool(
            "security.tokens_revoke",
            "Revoke tokens by token_id, token_sha256 or peer_id",
        ),
        r.route(
            Verb::Post,
            "/v1/security/tokens/rotate",
            "rotateToken",
            "CogniRelay: replace a token, revoking the old one",
            rotate_token,
        )
        .calls("RotateToken")
        .status(404, "No token matched")
        .status(
            422,
            "The owner token cannot be rotated through the API, nor a revoked one",
        )
        .status(
            400,
            "Invalid; also expires_at in the past, or with ttl_seconds",
        )
        .tool(
            "security.tokens_rotate",
            "Replace a token; the old one is revoked",
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn bodies_keep_cognirelays_field_order() {
        let meta = || TokenMeta::from(pb::TokenMeta::default());
        assert_sorted(&meta());
        assert_sorted(&TokenList {
            count: 1,
            ok: true,
            tokens: vec![meta()],
        });
        assert_sorted(&Issued {
            committed: true,
            latest_commit: (),
            ok: true,
            token: "t".into(),
            token_meta: Some(meta()),
        });
        assert_sorted(&Revoked {
            committed: true,
            latest_commit: (),
            matched: 1,
            ok: true,
            revoked: 1,
            tokens: vec![meta()],
        });
        assert_sorted(&Rotated {
            committed: true,
            from_token: Some(meta()),
            latest_commit: (),
            ok: true,
            token: "t".into(),
            token_meta: None,
        });
        assert_eq!(
            serde_json::to_value(meta()).unwrap()["revoked_reason"],
            serde_json::Value::Null
        );
    }
}

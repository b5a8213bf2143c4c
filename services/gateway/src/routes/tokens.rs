//! CogniRelay's token routes (`shared/compat/cognirelay.md` §13): list, issue, revoke and
//! rotate API tokens. Tokens are shown once, stored only as SHA-256. Bodies keep the
//! original's key order (`app/security/service.py`); refusals the original makes itself
//! carry its own status and text.

use noema_continuity::domain::json::{Json, to_py_json};
use noema_continuity::domain::timestamp::parse_iso;
use noema_core::time::proto::{rfc3339_seconds, timestamp};
use noema_proto::identity::v1 as pb;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use noema_core::content_id::ContentId;
use noema_core::{ErrorCode, Reason};

use super::continuity::original;
use crate::error::{ApiError, ErrorStyle};
use crate::features;
use crate::forward::{Caller, JsonBody, LastQuery, RawJson, json_body};
use crate::reply::{FastApiAnswer, FastApiJson};
use crate::route::{Route, Routes, Verb};

const COGNIRELAY: Routes = Routes::new(
    "identity",
    ErrorStyle::CogniRelay,
    "noema.identity.v1.IdentityService",
);

/// CogniRelay's `token_meta` (`_token_public_view`): timestamps as UTC seconds or null,
/// absent strings as null, the digest as bare hex; Noema adds `tenant` last.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TokenMeta {
    pub token_id: String,
    pub peer_id: String,
    pub scopes: Vec<String>,
    pub read_namespaces: Vec<String>,
    pub write_namespaces: Vec<String>,
    pub status: String,
    /// `active`, `revoked` or `expired`, judged now.
    pub effective_status: String,
    pub issued_at: Option<String>,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    pub revoked_reason: Option<String>,
    pub rotated_at: Option<String>,
    pub rotated_to_token_id: Option<String>,
    pub rotated_from_token_id: Option<String>,
    pub description: Option<String>,
    /// The secret's SHA-256, 64 hex digits.
    pub token_sha256: String,
    /// Whose data the token acts on (Noema's tenancy; by default its peer).
    pub tenant: String,
}

impl From<pb::TokenMeta> for TokenMeta {
    fn from(meta: pb::TokenMeta) -> Self {
        let text = |s: String| (!s.is_empty()).then_some(s);
        let time = |t: Option<prost_types::Timestamp>| t.as_ref().map(rfc3339_seconds);
        let token_sha256 = ContentId::without_prefix(&meta.token_sha256).to_owned();
        TokenMeta {
            token_id: meta.token_id,
            peer_id: meta.peer_id,
            scopes: meta.scopes,
            read_namespaces: meta.read_namespaces,
            write_namespaces: meta.write_namespaces,
            status: meta.status,
            effective_status: meta.effective_status,
            issued_at: time(meta.issued_at),
            expires_at: time(meta.expires_at),
            revoked_at: time(meta.revoked_at),
            revoked_reason: text(meta.revoked_reason),
            rotated_at: time(meta.rotated_at),
            rotated_to_token_id: text(meta.rotated_to_token_id),
            rotated_from_token_id: text(meta.rotated_from_token_id),
            description: text(meta.description),
            token_sha256,
            tenant: meta.tenant,
        }
    }
}

/// CogniRelay's own refusal: `status` with `{"detail": detail}`.
fn refused(code: ErrorCode, status: u16, detail: &str) -> ApiError {
    original(
        code,
        status,
        serde_json::json!({ "detail": detail }).to_string(),
    )
}

/// The original's refusals for what the service found: no token matched (404), the token
/// to rotate is revoked (409); the service's answer otherwise.
fn not_matched(status: tonic::Status) -> ApiError {
    let error = ApiError::from(status);
    match (error.0.code, error.0.reason) {
        (ErrorCode::NotFound, _) => refused(ErrorCode::NotFound, 404, "Token entry not found"),
        (ErrorCode::FailedPrecondition, Reason::TokenRevoked) => refused(
            ErrorCode::FailedPrecondition,
            409,
            "Token is already revoked",
        ),
        _ => error,
    }
}

/// The original's 409 for a token id another token has (`token_id` on issue,
/// `new_token_id` on rotate); `error` otherwise.
fn taken(error: ApiError, token_id: &str) -> ApiError {
    if error.0.code == ErrorCode::AlreadyExists {
        return refused(
            ErrorCode::AlreadyExists,
            409,
            &format!("Token id already exists: {token_id}"),
        );
    }
    error
}

/// pydantic's 422 for `ttl_seconds` outside `ge=1, le=31536000`.
fn check_ttl(ttl_seconds: Option<u64>) -> Result<(), ApiError> {
    let max = noema_core::scopes::MAX_TOKEN_TTL_SECONDS;
    let (kind, msg, ctx) = match ttl_seconds {
        Some(0) => (
            "greater_than_equal",
            "Input should be greater than or equal to 1".to_owned(),
            r#"{"ge":1}"#.to_owned(),
        ),
        Some(ttl) if ttl > max => (
            "less_than_equal",
            format!("Input should be less than or equal to {max}"),
            format!(r#"{{"le":{max}}}"#),
        ),
        _ => return Ok(()),
    };
    Err(super::continuity::invalid_envelope(
        kind,
        r#"["body","ttl_seconds"]"#,
        &msg,
        &ttl_seconds.unwrap_or_default().to_string(),
        Some(ctx),
    ))
}

/// A digest as the original reads it: trimmed, without `sha256:`; empty when none.
fn bare_sha256(value: Option<&str>) -> &str {
    ContentId::without_prefix(value.unwrap_or_default().trim())
}

/// What a revoke or rotate names, as the original judges it. Its refusals come only after
/// the service has checked that the caller may manage tokens (the original checks
/// `admin:peers` first): the service is sent an empty selector, or the ill-formed digest,
/// and its refusal of that is answered with the original's.
struct Selector {
    token_id: String,
    token_sha256: String,
    /// The original's refusal of this selector, if it refuses it.
    refusal: Option<ApiError>,
}

impl Selector {
    /// One token, by id, else by digest.
    fn one(token_id: Option<String>, sha256: Option<&str>) -> Selector {
        let token_id = token_id.unwrap_or_default();
        let token_sha256 = bare_sha256(sha256).to_owned();
        let refusal = if !token_id.is_empty() {
            None
        } else if token_sha256.is_empty() {
            Some(refused(
                ErrorCode::InvalidArgument,
                400,
                "Provide token_id or token_sha256",
            ))
        } else if ContentId::from_hex(&token_sha256).is_err() {
            // The original compares it with every stored digest: nothing matches.
            Some(refused(ErrorCode::NotFound, 404, "Token entry not found"))
        } else {
            None
        };
        Selector {
            token_id,
            token_sha256,
            refusal,
        }
    }

    /// The service's answer to a call with this selector: the original's refusal where
    /// the service refused the selector itself.
    fn judged(&self, status: tonic::Status) -> ApiError {
        match &self.refusal {
            Some(refusal) if status.code() == tonic::Code::InvalidArgument => refusal.clone(),
            _ => not_matched(status),
        }
    }
}

/// `GET /v1/security/tokens` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TokensQuery {
    /// Only this peer's tokens
    #[serde(default)]
    pub peer_id: Option<String>,
    /// active, revoked or expired (the last two only with include_inactive)
    #[serde(default)]
    pub status: Option<String>,
    /// true to include revoked and expired tokens (pydantic's booleans: true/false, 1/0,
    /// yes/no, on/off, t/f, y/n, in any case)
    #[serde(default)]
    #[schemars(regex(pattern = QUERY_BOOLEAN))]
    pub include_inactive: Option<String>,
}

/// The booleans [`query_bool`] reads, in any case, as a pattern.
const QUERY_BOOLEAN: &str = "^([Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee]|1|0|[Yy][Ee][Ss]|[Nn][Oo]|[Oo][Nn]|[Oo][Ff][Ff]|[Tt]|[Ff]|[Yy]|[Nn])$";

/// A query boolean as pydantic reads one (FastAPI's 422 `bool_parsing` otherwise).
fn query_bool(name: &str, value: Option<&str>) -> Result<bool, ApiError> {
    let Some(value) = value else {
        return Ok(false);
    };
    match value.to_lowercase().as_str() {
        "1" | "on" | "t" | "true" | "y" | "yes" => Ok(true),
        "0" | "off" | "f" | "false" | "n" | "no" => Ok(false),
        _ => Err(super::continuity::invalid_envelope(
            "bool_parsing",
            &serde_json::json!(["query", name]).to_string(),
            "Input should be a valid boolean, unable to interpret input",
            &serde_json::Value::from(value).to_string(),
            None,
        )),
    }
}

/// A token status a listing can match: another matches none (the original compares it).
const LISTED_STATUSES: [&str; 4] = ["", "active", "revoked", "expired"];

/// CogniRelay's token list.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TokenList {
    pub ok: bool,
    pub count: u64,
    pub tokens: Vec<TokenMeta>,
}

async fn list_tokens(
    caller: Caller,
    LastQuery(query): LastQuery<TokensQuery>,
) -> FastApiAnswer<TokenList> {
    let include_inactive = query_bool("include_inactive", query.include_inactive.as_deref())?;
    let status = query.status.unwrap_or_default();
    // The original applies both filters: without `include_inactive` only active tokens are
    // listed, so a status other than active matches none.
    let inactive_excluded = !include_inactive && !status.is_empty() && status != "active";
    if !LISTED_STATUSES.contains(&status.as_str()) || inactive_excluded {
        return Ok(FastApiJson(TokenList {
            ok: true,
            count: 0,
            tokens: Vec::new(),
        }));
    }
    let request = pb::ListTokensRequest {
        peer_id: query.peer_id.unwrap_or_default(),
        status,
        include_inactive,
    };
    let tokens = caller
        .identity()
        .list_tokens(caller.request(request))
        .await?
        .into_inner()
        .tokens;
    Ok(FastApiJson(TokenList {
        ok: true,
        count: u64::try_from(tokens.len()).unwrap_or(u64::MAX),
        tokens: tokens.into_iter().map(TokenMeta::from).collect(),
    }))
}

/// A token to issue.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["peer_id"]))]
pub struct IssueInput {
    /// Who the token acts as; a registered agent id makes it act as that agent.
    #[serde(default)]
    #[schemars(with = "String", length(min = 1))]
    pub peer_id: Option<String>,
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
    /// ISO 8601 (naive: UTC; past: born expired); not with `ttl_seconds`.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// At most a year.
    #[serde(default)]
    #[schemars(range(min = 1, max = noema_core::scopes::MAX_TOKEN_TTL_SECONDS))]
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

/// The expiry a token request names, as the service is sent it, with the original's
/// refusal of it (`_resolve_token_expiry`: both an expiry and a TTL, or an expiry its
/// `fromisoformat` cannot read; a naive one is UTC, a past one gives a token born expired).
/// A refused expiry is sent with a TTL beside it, which the service refuses only after its
/// check that the caller may manage tokens; that refusal is answered with the original's
/// ([`Expiry::judged`]).
struct Expiry {
    expires_at: Option<prost_types::Timestamp>,
    /// The TTL to send instead of the request's: 1 second beside a refused expiry.
    ttl_seconds: Option<u64>,
    refusal: Option<ApiError>,
}

impl Expiry {
    fn of(expires_at: Option<&str>, ttl_seconds: Option<u64>) -> Expiry {
        let text = expires_at.unwrap_or_default();
        if text.is_empty() {
            return Expiry {
                expires_at: None,
                ttl_seconds,
                refusal: None,
            };
        }
        let parsed = parse_iso(text).map(timestamp);
        let refusal = if ttl_seconds.is_some_and(|ttl| ttl > 0) {
            Some("Provide either expires_at or ttl_seconds, not both")
        } else if parsed.is_none() {
            Some("Invalid expires_at format")
        } else {
            None
        };
        Expiry {
            expires_at: Some(parsed.unwrap_or_default()),
            ttl_seconds: if refusal.is_some() {
                Some(ttl_seconds.unwrap_or(1).max(1))
            } else {
                ttl_seconds
            },
            refusal: refusal.map(|detail| refused(ErrorCode::InvalidArgument, 400, detail)),
        }
    }

    /// The service's refusal, or the original's where the service refused the expiry.
    fn judged(&self, status: tonic::Status) -> ApiError {
        match &self.refusal {
            Some(refusal) if status.code() == tonic::Code::InvalidArgument => refusal.clone(),
            _ => ApiError::from(status),
        }
    }
}

/// A new token, shown once.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Issued {
    pub ok: bool,
    pub token: String,
    pub token_meta: Option<TokenMeta>,
    pub committed: bool,
    /// Always null (CogniRelay's git commit of its token file).
    pub latest_commit: (),
}

async fn issue_token(caller: Caller, raw: RawJson<IssueInput>) -> FastApiAnswer<Issued> {
    let bytes = raw.bytes;
    let body: IssueInput = json_body(&bytes)?;
    // Without a peer_id: pydantic's 422, echoing the body as FastAPI writes it back, once
    // the service has refused the empty peer id after its check that the caller may issue
    // tokens (a token without the scope gets its 403 first, as on every route).
    let missing_peer = body.peer_id.is_none().then(|| {
        let input = Json::parse(&bytes).map(|json| to_py_json(&json));
        super::continuity::invalid_envelope(
            "missing",
            r#"["body","peer_id"]"#,
            "Field required",
            input.as_deref().unwrap_or("{}"),
            None,
        )
    });
    let peer_id = body.peer_id.unwrap_or_default();
    check_ttl(body.ttl_seconds)?;
    let expiry = Expiry::of(body.expires_at.as_deref(), body.ttl_seconds);
    let request = pb::IssueTokenRequest {
        peer_id,
        expires_at: expiry.expires_at,
        ttl_seconds: expiry.ttl_seconds.unwrap_or(0),
        scopes: body.scopes,
        read_namespaces: body.read_namespaces,
        write_namespaces: body.write_namespaces,
        description: body.description.unwrap_or_default(),
        token_id: body.token_id.unwrap_or_default(),
        template: body.template.unwrap_or_default(),
        tenant: body.tenant.unwrap_or_default(),
    };
    let token_id = request.token_id.clone();
    let response = caller
        .identity()
        .issue_token(caller.request(request))
        .await
        .map_err(|status| match (missing_peer, status.code()) {
            (Some(refusal), tonic::Code::InvalidArgument) => refusal,
            _ => taken(expiry.judged(status), &token_id),
        })?
        .into_inner();
    Ok(FastApiJson(Issued {
        ok: true,
        token: response.token,
        token_meta: response.token_meta.map(TokenMeta::from),
        committed: true,
        latest_commit: (),
    }))
}

/// Tokens to revoke: by id or hash (a peer id is then ignored), or every token of a peer
/// with `revoke_all_for_peer: true`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("anyOf" = [
    {"required": ["token_id"], "properties": {"token_id": {"type": "string", "minLength": 1}, "revoke_all_for_peer": {"const": false}}},
    {"required": ["token_sha256"], "properties": {"token_sha256": {"type": "string"}, "revoke_all_for_peer": {"const": false}}},
    {"required": ["peer_id", "revoke_all_for_peer"], "properties": {"peer_id": {"type": "string", "minLength": 1}, "revoke_all_for_peer": {"const": true}}},
]))]
pub struct RevokeInput {
    #[serde(default)]
    pub token_id: Option<String>,
    #[serde(default)]
    #[schemars(regex(pattern = "^(sha256:)?[0-9a-fA-F]{64}$"))]
    pub token_sha256: Option<String>,
    #[serde(default)]
    pub peer_id: Option<String>,
    /// Revoke every token of `peer_id`.
    #[serde(default)]
    pub revoke_all_for_peer: bool,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a revocation matched and changed; `committed` is whether it changed anything.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Revoked {
    pub ok: bool,
    pub matched: u32,
    pub revoked: u32,
    pub tokens: Vec<TokenMeta>,
    pub committed: bool,
    pub latest_commit: (),
}

/// The service's request for `body`: a peer only when `revoke_all_for_peer` says so (a
/// peer id beside a token id must not widen the revocation), else an id or a digest; with
/// the original's refusal of what it names, if any ([`Selector`]).
fn revocation(body: RevokeInput) -> (pb::RevokeTokenRequest, Selector) {
    let reason = body.reason.unwrap_or_default();
    if body.revoke_all_for_peer {
        let peer_id = body.peer_id.unwrap_or_default();
        let refusal = peer_id.is_empty().then(|| {
            refused(
                ErrorCode::InvalidArgument,
                400,
                "peer_id is required when revoke_all_for_peer=true",
            )
        });
        let request = pb::RevokeTokenRequest {
            peer_id,
            reason,
            ..Default::default()
        };
        let selector = Selector {
            token_id: String::new(),
            token_sha256: String::new(),
            refusal,
        };
        return (request, selector);
    }
    let selector = Selector::one(body.token_id, body.token_sha256.as_deref());
    let request = pb::RevokeTokenRequest {
        token_id: selector.token_id.clone(),
        token_sha256: selector.token_sha256.clone(),
        peer_id: String::new(),
        reason,
    };
    (request, selector)
}

async fn revoke_token(
    caller: Caller,
    JsonBody(body): JsonBody<RevokeInput>,
) -> FastApiAnswer<Revoked> {
    let (request, selector) = revocation(body);
    let response = caller
        .identity()
        .revoke_token(caller.request(request))
        .await
        .map_err(|status| selector.judged(status))?
        .into_inner();
    Ok(FastApiJson(Revoked {
        ok: true,
        matched: response.matched,
        revoked: response.revoked,
        tokens: response.tokens.into_iter().map(TokenMeta::from).collect(),
        committed: response.revoked > 0,
        latest_commit: (),
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
    /// ISO 8601 (naive: UTC; past: born expired); not with `ttl_seconds`.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// At most a year.
    #[serde(default)]
    #[schemars(range(min = 1, max = noema_core::scopes::MAX_TOKEN_TTL_SECONDS))]
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
    pub ok: bool,
    pub token: String,
    pub from_token: Option<TokenMeta>,
    pub token_meta: Option<TokenMeta>,
    pub committed: bool,
    pub latest_commit: (),
}

async fn rotate_token(
    caller: Caller,
    JsonBody(body): JsonBody<RotateInput>,
) -> FastApiAnswer<Rotated> {
    check_ttl(body.ttl_seconds)?;
    let selector = Selector::one(body.token_id, body.token_sha256.as_deref());
    let expiry = Expiry::of(body.expires_at.as_deref(), body.ttl_seconds);
    let request = pb::RotateTokenRequest {
        token_id: selector.token_id.clone(),
        token_sha256: selector.token_sha256.clone(),
        expires_at: expiry.expires_at,
        ttl_seconds: expiry.ttl_seconds.unwrap_or(0),
        scopes: body.scopes,
        read_namespaces: body.read_namespaces,
        write_namespaces: body.write_namespaces,
        description: body.description.unwrap_or_default(),
        new_token_id: body.new_token_id.unwrap_or_default(),
        reason: body.reason.unwrap_or_default(),
    };
    let new_token_id = request.new_token_id.clone();
    let response = caller
        .identity()
        .rotate_token(caller.request(request))
        .await
        // The original finds the token before it reads the expiry.
        .map_err(|status| {
            let refused = match (&selector.refusal, status.code()) {
                (None, tonic::Code::InvalidArgument) => expiry.judged(status),
                _ => selector.judged(status),
            };
            taken(refused, &new_token_id)
        })?
        .into_inner();
    Ok(FastApiJson(Rotated {
        ok: true,
        token: response.token,
        from_token: response.from_token.map(TokenMeta::from),
        token_meta: response.token_meta.map(TokenMeta::from),
        committed: true,
        latest_commit: (),
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
            "Invalid; also an unreadable expires_at, or one with ttl_seconds",
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
            "CogniRelay: revoke by token_id or token_sha256, or every token of a peer_id with revoke_all_for_peer",
            revoke_token,
        )
        .calls("RevokeToken")
        .status(404, "No token matched")
        .status(400, "Neither token_id nor token_sha256, or revoke_all_for_peer without peer_id")
        .status(422, "The owner token cannot be revoked through the API")
        .tool(
            "security.tokens_revoke",
            "Revoke by token_id or token_sha256, or a peer's all (revoke_all_for_peer)",
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
        .status(409, "The token is already revoked")
        .status(
            422,
            "The owner token cannot be rotated through the API, nor an expired one",
        )
        .status(
            400,
            "Invalid; also an unreadable expires_at, or one with ttl_seconds",
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

    /// The keys of `body`'s JSON, in the order they are written.
    fn keys<T: Serialize>(body: &T) -> Vec<String> {
        let text = serde_json::to_string(body).unwrap();
        let map: std::collections::BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&text).unwrap();
        let mut keys: Vec<String> = map.into_keys().collect();
        keys.sort_by_key(|k| text.find(&format!("\"{k}\":")).unwrap());
        keys
    }

    /// Bodies keep the original's key order (`_token_public_view` and the service's
    /// return dicts in `app/security/service.py`).
    #[test]
    fn bodies_keep_cognirelays_key_order() {
        let meta = || {
            TokenMeta::from(pb::TokenMeta {
                token_sha256: format!("sha256:{}", "ab".repeat(32)),
                ..Default::default()
            })
        };
        assert_eq!(
            keys(&meta()),
            [
                "token_id",
                "peer_id",
                "scopes",
                "read_namespaces",
                "write_namespaces",
                "status",
                "effective_status",
                "issued_at",
                "expires_at",
                "revoked_at",
                "revoked_reason",
                "rotated_at",
                "rotated_to_token_id",
                "rotated_from_token_id",
                "description",
                "token_sha256",
                "tenant"
            ]
        );
        assert_eq!(
            meta().token_sha256,
            "ab".repeat(32),
            "bare hex, as stored by the original"
        );
        let list = TokenList {
            ok: true,
            count: 1,
            tokens: vec![meta()],
        };
        assert_eq!(keys(&list), ["ok", "count", "tokens"]);
        let issued = Issued {
            ok: true,
            token: "t".into(),
            token_meta: Some(meta()),
            committed: true,
            latest_commit: (),
        };
        assert_eq!(
            keys(&issued),
            ["ok", "token", "token_meta", "committed", "latest_commit"]
        );
        let revoked = Revoked {
            ok: true,
            matched: 1,
            revoked: 1,
            tokens: vec![meta()],
            committed: true,
            latest_commit: (),
        };
        assert_eq!(
            keys(&revoked),
            [
                "ok",
                "matched",
                "revoked",
                "tokens",
                "committed",
                "latest_commit"
            ]
        );
        let rotated = Rotated {
            ok: true,
            token: "t".into(),
            from_token: Some(meta()),
            token_meta: None,
            committed: true,
            latest_commit: (),
        };
        assert_eq!(
            keys(&rotated),
            [
                "ok",
                "token",
                "from_token",
                "token_meta",
                "committed",
                "latest_commit"
            ]
        );
        assert_eq!(
            serde_json::to_value(meta()).unwrap()["revoked_reason"],
            serde_json::Value::Null
        );
    }

    /// A peer id widens a revocation to all of the peer's tokens only when
    /// `revoke_all_for_peer` says so, as in the original; what names no token is refused
    /// with the original's text once the service has refused it.
    #[test]
    fn a_peer_id_alone_revokes_nothing() {
        let refusal = |selector: &Selector| {
            selector.refusal.as_ref().and_then(|err| {
                err.0
                    .metadata_value(noema_core::error::ORIGINAL_BODY_KEY)
                    .map(str::to_owned)
            })
        };
        let (request, selector) = revocation(RevokeInput {
            peer_id: Some("peer-x".into()),
            ..Default::default()
        });
        assert_eq!(request.peer_id, "", "the peer is not sent");
        assert_eq!(
            refusal(&selector).as_deref(),
            Some(r#"{"detail":"Provide token_id or token_sha256"}"#)
        );
        let refused = selector.judged(tonic::Status::invalid_argument("no selector"));
        assert_eq!(
            refused
                .0
                .metadata_value(noema_core::error::ORIGINAL_STATUS_KEY),
            Some("400")
        );
        // A scope the caller lacks is the service's answer, not the refusal.
        let denied = selector.judged(tonic::Status::permission_denied("missing scope"));
        assert_eq!(denied.0.code, ErrorCode::PermissionDenied);
        let (_, all_without_peer) = revocation(RevokeInput {
            revoke_all_for_peer: true,
            token_id: Some("t1".into()),
            ..Default::default()
        });
        assert_eq!(
            refusal(&all_without_peer).as_deref(),
            Some(r#"{"detail":"peer_id is required when revoke_all_for_peer=true"}"#)
        );
        let (by_id, selector) = revocation(RevokeInput {
            token_id: Some("t1".into()),
            peer_id: Some("peer-x".into()),
            ..Default::default()
        });
        assert_eq!(
            (by_id.token_id.as_str(), by_id.peer_id.as_str()),
            ("t1", "")
        );
        assert!(selector.refusal.is_none());
        let (by_digest, _) = revocation(RevokeInput {
            token_sha256: Some(format!(" sha256:{} ", "0f".repeat(32))),
            ..Default::default()
        });
        assert_eq!(by_digest.token_sha256, "0f".repeat(32));
        let (_, malformed) = revocation(RevokeInput {
            token_sha256: Some("sha256:zz".into()),
            ..Default::default()
        });
        assert_eq!(
            refusal(&malformed).as_deref(),
            Some(r#"{"detail":"Token entry not found"}"#)
        );
        let (all, _) = revocation(RevokeInput {
            peer_id: Some("peer-x".into()),
            revoke_all_for_peer: true,
            token_id: Some("t1".into()),
            ..Default::default()
        });
        assert_eq!(
            (all.token_id.as_str(), all.peer_id.as_str()),
            ("", "peer-x")
        );
    }
}

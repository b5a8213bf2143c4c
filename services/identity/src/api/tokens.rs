//! `IdentityService`'s token RPCs, and `Authenticate`.

use noema_core::scopes::Principal;
use noema_proto::identity::v1 as pb;
use noema_runtime::convert::timestamp;
use time::OffsetDateTime;
use tonic::Request;

use super::principal;
use crate::domain::token::{Rotation, TokenRecord, TokenRequest};
use crate::error::IdentityError;
use crate::ops::{Identity, RevokeToken, RotateToken};

fn token_to_proto(token: &TokenRecord, now: OffsetDateTime) -> pb::TokenMeta {
    pb::TokenMeta {
        token_id: token.token_id.clone(),
        peer_id: token.peer_id.clone(),
        scopes: token.scopes.clone(),
        read_namespaces: token.read_namespaces.clone(),
        write_namespaces: token.write_namespaces.clone(),
        status: token.status.as_str().to_owned(),
        effective_status: token.effective_status(now).to_owned(),
        issued_at: Some(timestamp(token.issued_at)),
        expires_at: token.expires_at.map(timestamp),
        revoked_at: token.revoked_at.map(timestamp),
        revoked_reason: token.revoked_reason.clone().unwrap_or_default(),
        rotated_at: token.rotated_at.map(timestamp),
        rotated_to_token_id: token.rotated_to_token_id.clone().unwrap_or_default(),
        rotated_from_token_id: token.rotated_from_token_id.clone().unwrap_or_default(),
        description: token.description.clone(),
        token_sha256: token.token_sha256.clone(),
        tenant: token.tenant.clone(),
    }
}

fn principal_to_proto(p: &Principal) -> pb::Principal {
    pb::Principal {
        token_id: p.token_id.clone(),
        peer_id: p.peer_id.clone(),
        scopes: p.scopes.clone(),
        read_namespaces: p.read_namespaces.clone(),
        write_namespaces: p.write_namespaces.clone(),
        superuser: p.superuser,
        expires_at: None,
        tenant: p.tenant.clone(),
    }
}

fn from_timestamp(
    field: &str,
    at: Option<&prost_types::Timestamp>,
) -> Result<Option<OffsetDateTime>, IdentityError> {
    at.map(|at| {
        noema_core::time::proto::to_time(at)
            .ok_or_else(|| IdentityError::InvalidArgument(format!("{field} is out of range")))
    })
    .transpose()
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(super) async fn authenticate(
    _ops: &Identity,
    request: Request<pb::AuthenticateRequest>,
) -> Result<pb::Principal, IdentityError> {
    Ok(principal_to_proto(principal(&request)?))
}

pub(super) async fn issue_token(
    ops: &Identity,
    request: Request<pb::IssueTokenRequest>,
) -> Result<pb::IssueTokenResponse, IdentityError> {
    let issuer = principal(&request)?.clone();
    let req = request.into_inner();
    let now = OffsetDateTime::now_utc();
    let token_request = TokenRequest {
        expires_at: from_timestamp("expires_at", req.expires_at.as_ref())?,
        peer_id: req.peer_id,
        scopes: req.scopes,
        read_namespaces: req.read_namespaces,
        write_namespaces: req.write_namespaces,
        ttl_seconds: req.ttl_seconds,
        description: req.description,
        template: req.template,
        tenant: req.tenant,
    };
    let (secret, record) = ops
        .issue_token(&issuer, token_request, &req.token_id, now)
        .await?;
    Ok(pb::IssueTokenResponse {
        token: secret,
        token_meta: Some(token_to_proto(&record, now)),
    })
}

pub(super) async fn list_tokens(
    ops: &Identity,
    request: Request<pb::ListTokensRequest>,
) -> Result<pb::ListTokensResponse, IdentityError> {
    let viewer = principal(&request)?.clone();
    let req = request.into_inner();
    let now = OffsetDateTime::now_utc();
    let tokens = ops
        .list_tokens(&viewer, &req.peer_id, req.status, req.include_inactive, now)
        .await?;
    Ok(pb::ListTokensResponse {
        tokens: tokens.iter().map(|t| token_to_proto(t, now)).collect(),
    })
}

pub(super) async fn revoke_token(
    ops: &Identity,
    request: Request<pb::RevokeTokenRequest>,
) -> Result<pb::RevokeTokenResponse, IdentityError> {
    let actor = principal(&request)?.clone();
    let req = request.into_inner();
    let now = OffsetDateTime::now_utc();
    let revoke = RevokeToken {
        token_id: req.token_id,
        token_sha256: req.token_sha256,
        peer_id: req.peer_id,
        reason: req.reason,
    };
    let revocation = ops.revoke_token(&actor, revoke, now).await?;
    Ok(pb::RevokeTokenResponse {
        matched: count(revocation.matched),
        revoked: count(revocation.revoked),
        tokens: revocation
            .tokens
            .iter()
            .map(|t| token_to_proto(t, now))
            .collect(),
    })
}

pub(super) async fn rotate_token(
    ops: &Identity,
    request: Request<pb::RotateTokenRequest>,
) -> Result<pb::RotateTokenResponse, IdentityError> {
    let issuer = principal(&request)?.clone();
    let req = request.into_inner();
    let now = OffsetDateTime::now_utc();
    let rotate = RotateToken {
        token_id: req.token_id,
        token_sha256: req.token_sha256,
        new_token_id: req.new_token_id,
        reason: req.reason,
        expires_at: from_timestamp("expires_at", req.expires_at.as_ref()),
        changes: Rotation {
            scopes: req.scopes,
            read_namespaces: req.read_namespaces,
            write_namespaces: req.write_namespaces,
            expires_at: None,
            ttl_seconds: req.ttl_seconds,
            description: req.description,
        },
    };
    let (secret, from, new) = ops.rotate_token(&issuer, rotate, now).await?;
    Ok(pb::RotateTokenResponse {
        token: secret,
        from_token: Some(token_to_proto(&from, now)),
        token_meta: Some(token_to_proto(&new, now)),
    })
}

//! `DiaryService`'s signing request RPCs.

use noema_proto::identity::v1 as pb;
use noema_runtime::convert::timestamp;
use time::OffsetDateTime;
use tonic::Request;

use super::{caller, principal};
use crate::domain::signing::SigningRequest;
use crate::error::IdentityError;
use crate::ops::{Identity, NewSigningRequest};

/// The request as of `now` (a pending request past its expiry reads as expired).
fn request_to_proto(r: SigningRequest, now: OffsetDateTime) -> pb::SigningRequest {
    pb::SigningRequest {
        signing_input: r.signing_input(),
        status: r.effective_status(now).as_str().to_owned(),
        id: r.id,
        agent_id: r.agent_id,
        message: r.message,
        nonce: r.nonce,
        signature: r.signature.unwrap_or_default(),
        valid: r.valid,
        entry_id: r.entry_id.unwrap_or_default(),
        purpose: r.purpose,
        verification_method: r.verification_method,
        created_at: Some(timestamp(r.created_at)),
        expires_at: Some(timestamp(r.expires_at)),
        completed_at: r.completed_at.map(timestamp),
        team_id: r.team_id,
    }
}

pub(super) async fn create_signing_request(
    ops: &Identity,
    request: Request<pb::CreateSigningRequestRequest>,
) -> Result<pb::SigningRequest, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let new = NewSigningRequest {
        message: req.message,
        entry_id: req.entry_id,
        purpose: req.purpose,
        team_id: req.team_id,
        verification_method: req.verification_method,
    };
    let created = ops.create_signing_request(&caller, new).await?;
    Ok(request_to_proto(created, OffsetDateTime::now_utc()))
}

pub(super) async fn get_signing_request(
    ops: &Identity,
    request: Request<pb::GetSigningRequestRequest>,
) -> Result<pb::SigningRequest, IdentityError> {
    let caller = caller(&request)?;
    let found = ops
        .get_signing_request(&caller, &request.into_inner().id)
        .await?;
    Ok(request_to_proto(found, OffsetDateTime::now_utc()))
}

pub(super) async fn list_signing_requests(
    ops: &Identity,
    request: Request<pb::ListSigningRequestsRequest>,
) -> Result<pb::ListSigningRequestsResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let (requests, total, limit) = ops
        .list_signing_requests(&caller, &req.status, req.limit, req.offset)
        .await?;
    let now = OffsetDateTime::now_utc();
    Ok(pb::ListSigningRequestsResponse {
        requests: requests
            .into_iter()
            .map(|r| request_to_proto(r, now))
            .collect(),
        total,
        limit,
        offset: req.offset,
    })
}

pub(super) async fn submit_signature(
    ops: &Identity,
    request: Request<pb::SubmitSignatureRequest>,
) -> Result<pb::SigningRequest, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let stored = ops
        .submit_signature(&caller, &req.id, &req.signature)
        .await?;
    Ok(request_to_proto(stored, OffsetDateTime::now_utc()))
}

pub(super) async fn verify_signature(
    ops: &Identity,
    request: Request<pb::VerifySignatureRequest>,
) -> Result<pb::VerifySignatureResponse, IdentityError> {
    let anonymous = principal(&request).is_err();
    let signature = request.into_inner().signature;
    Ok(match ops.verify_signature(&signature).await? {
        // A public RPC: a caller without a token learns only whether and by whom.
        Some((_, fingerprint)) if anonymous => pb::VerifySignatureResponse {
            valid: true,
            fingerprint,
            ..pb::VerifySignatureResponse::default()
        },
        Some((signed, fingerprint)) => pb::VerifySignatureResponse {
            valid: true,
            fingerprint,
            agent_id: signed.agent_id,
            message: signed.message,
        },
        None => pb::VerifySignatureResponse::default(),
    })
}

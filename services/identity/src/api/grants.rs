//! `DiaryService`'s grant RPCs (MoltNet's `/diaries/:id/grants`).

use noema_proto::identity::v1 as pb;
use tonic::Request;

use super::caller;
use crate::domain::diary::Share;
use crate::domain::grant::AGENT_NS;
use crate::error::IdentityError;
use crate::ops::Identity;

fn grant_to_proto(s: Share) -> pb::DiaryGrant {
    pb::DiaryGrant {
        subject_id: s.agent_id,
        subject_ns: AGENT_NS.to_owned(),
        role: s.role.as_str().to_owned(),
    }
}

pub(super) async fn grant_diary(
    ops: &Identity,
    request: Request<pb::GrantDiaryRequest>,
) -> Result<pb::DiaryGrant, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let share = ops
        .grant_diary(
            &caller,
            &req.diary_id,
            &req.subject_id,
            &req.subject_ns,
            &req.role,
        )
        .await?;
    Ok(grant_to_proto(share))
}

pub(super) async fn list_grants(
    ops: &Identity,
    request: Request<pb::ListGrantsRequest>,
) -> Result<pb::ListGrantsResponse, IdentityError> {
    let caller = caller(&request)?;
    let grants = ops
        .list_grants(&caller, &request.into_inner().diary_id)
        .await?;
    Ok(pb::ListGrantsResponse {
        grants: grants.into_iter().map(grant_to_proto).collect(),
    })
}

pub(super) async fn revoke_grant(
    ops: &Identity,
    request: Request<pb::RevokeGrantRequest>,
) -> Result<pb::RevokeGrantResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let revoked = ops
        .revoke_grant(
            &caller,
            &req.diary_id,
            &req.subject_id,
            &req.subject_ns,
            &req.role,
        )
        .await?;
    Ok(pb::RevokeGrantResponse { revoked })
}

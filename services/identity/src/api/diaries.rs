//! `DiaryService`'s diary and share RPCs.

use noema_core::keys::PublicKey;
use noema_proto::identity::v1 as pb;
use noema_runtime::convert::timestamp;
use tonic::Request;

use super::caller;
use crate::domain::diary::{Diary, Share};
use crate::error::IdentityError;
use crate::ops::Identity;

/// The fingerprint of a stored key, empty when there is none.
pub(super) fn fingerprint_of(key: Option<&str>) -> String {
    key.and_then(|k| PublicKey::parse(k).ok())
        .map(|k| k.fingerprint())
        .unwrap_or_default()
}

fn diary_to_proto(d: Diary) -> pb::Diary {
    pb::Diary {
        owner_fingerprint: fingerprint_of(d.owner_public_key.as_deref()),
        owner_public_key: d.owner_public_key.unwrap_or_default(),
        id: d.id,
        owner_id: d.owner_id,
        name: d.name,
        visibility: d.visibility.as_str().to_owned(),
        signed: d.signed,
        team_id: d.team_id,
        created_at: Some(timestamp(d.created_at)),
        updated_at: Some(timestamp(d.updated_at)),
    }
}

fn share_to_proto(s: Share) -> pb::DiaryShare {
    pb::DiaryShare {
        diary_id: s.diary_id,
        agent_id: s.agent_id,
        role: s.role.as_str().to_owned(),
        status: s.status.as_str().to_owned(),
        invited_by: s.invited_by,
        created_at: Some(timestamp(s.created_at)),
        updated_at: Some(timestamp(s.updated_at)),
    }
}

pub(super) async fn create_diary(
    ops: &Identity,
    request: Request<pb::CreateDiaryRequest>,
) -> Result<pb::Diary, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let diary = ops
        .create_diary(&caller, req.name, &req.visibility, req.team_id)
        .await?;
    Ok(diary_to_proto(diary))
}

pub(super) async fn get_diary(
    ops: &Identity,
    request: Request<pb::GetDiaryRequest>,
) -> Result<pb::Diary, IdentityError> {
    let caller = caller(&request)?;
    let diary = ops.get_diary(&caller, &request.into_inner().id).await?;
    Ok(diary_to_proto(diary))
}

pub(super) async fn list_diaries(
    ops: &Identity,
    request: Request<pb::ListDiariesRequest>,
) -> Result<pb::ListDiariesResponse, IdentityError> {
    let caller = caller(&request)?;
    let diaries = ops.list_diaries(&caller).await?;
    Ok(pb::ListDiariesResponse {
        diaries: diaries.into_iter().map(diary_to_proto).collect(),
    })
}

pub(super) async fn update_diary(
    ops: &Identity,
    request: Request<pb::UpdateDiaryRequest>,
) -> Result<pb::Diary, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let diary = ops
        .update_diary(&caller, &req.id, req.name, req.visibility)
        .await?;
    Ok(diary_to_proto(diary))
}

pub(super) async fn delete_diary(
    ops: &Identity,
    request: Request<pb::DeleteDiaryRequest>,
) -> Result<pb::DeleteDiaryResponse, IdentityError> {
    let caller = caller(&request)?;
    let deleted = ops.delete_diary(&caller, &request.into_inner().id).await?;
    Ok(pb::DeleteDiaryResponse {
        deleted_entries: u32::try_from(deleted).unwrap_or(u32::MAX),
    })
}

pub(super) async fn share_diary(
    ops: &Identity,
    request: Request<pb::ShareDiaryRequest>,
) -> Result<pb::DiaryShare, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let share = ops
        .share_diary(&caller, &req.diary_id, &req.agent_id, &req.role)
        .await?;
    Ok(share_to_proto(share))
}

pub(super) async fn respond_to_share(
    ops: &Identity,
    request: Request<pb::RespondToShareRequest>,
) -> Result<pb::DiaryShare, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let share = ops
        .respond_to_share(&caller, &req.diary_id, req.accept)
        .await?;
    Ok(share_to_proto(share))
}

pub(super) async fn revoke_share(
    ops: &Identity,
    request: Request<pb::RevokeShareRequest>,
) -> Result<pb::DiaryShare, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let share = ops
        .revoke_share(&caller, &req.diary_id, &req.agent_id)
        .await?;
    Ok(share_to_proto(share))
}

pub(super) async fn list_shares(
    ops: &Identity,
    request: Request<pb::ListSharesRequest>,
) -> Result<pb::ListSharesResponse, IdentityError> {
    let caller = caller(&request)?;
    let shares = ops
        .list_shares(&caller, &request.into_inner().diary_id)
        .await?;
    Ok(pb::ListSharesResponse {
        shares: shares.into_iter().map(share_to_proto).collect(),
    })
}

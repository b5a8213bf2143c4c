//! `DiaryService`'s entry RPCs.

use noema_proto::identity::v1 as pb;
use noema_runtime::convert::timestamp;
use tonic::Request;

use super::caller;
use super::diaries::fingerprint_of;
use crate::domain::entry::Entry;
use crate::error::IdentityError;
use crate::ops::{EntryChanges, EntryList, EntrySearch, Identity, NewEntry};

fn entry_to_proto(e: Entry) -> pb::Entry {
    let mut entry = pb::Entry {
        creator_fingerprint: fingerprint_of(e.creator_public_key.as_deref()),
        creator_public_key: e.creator_public_key.unwrap_or_default(),
        id: e.id,
        diary_id: e.diary_id,
        title: e.title,
        content: e.content,
        tags: e.tags.unwrap_or_default(),
        entry_type: e.entry_type.as_str().to_owned(),
        importance: e.importance,
        injection_risk: e.injection_risk,
        access_count: e.access_count,
        last_accessed_at: e.last_accessed_at.map(timestamp),
        content_hash: e.content_hash,
        created_by: e.created_by,
        created_at: Some(timestamp(e.created_at)),
        updated_at: Some(timestamp(e.updated_at)),
        superseded: e.superseded,
        visibility: e.visibility.as_str().to_owned(),
        ..pb::Entry::default()
    };
    if let Some(sig) = e.signature {
        entry.content_signature = sig.signature;
        entry.signing_nonce = sig.nonce;
        entry.signing_request_id = sig.signing_request_id;
        entry.signed_by = sig.signed_by;
        entry.signer_fingerprint = sig.signer_fingerprint;
        entry.signed_at = Some(timestamp(sig.signed_at));
        entry.chain_seq = sig.chain_seq;
        entry.chain_prev = sig.chain_prev;
        entry.chain_hash = sig.chain_hash;
    }
    entry
}

pub(super) async fn create_entry(
    ops: &Identity,
    request: Request<pb::CreateEntryRequest>,
) -> Result<pb::Entry, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let new = NewEntry {
        diary_id: req.diary_id,
        entry_type: req.entry_type,
        title: req.title,
        content: req.content,
        tags: req.tags,
        importance: req.importance,
        content_hash: req.content_hash,
        signing_request_id: req.signing_request_id,
    };
    Ok(entry_to_proto(ops.create_entry(&caller, new).await?))
}

pub(super) async fn get_entry(
    ops: &Identity,
    request: Request<pb::GetEntryRequest>,
) -> Result<pb::Entry, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let entry = ops
        .get_entry(&caller, &req.id, &req.expand, req.depth)
        .await?;
    Ok(entry_to_proto(entry))
}

pub(super) async fn list_entries(
    ops: &Identity,
    request: Request<pb::ListEntriesRequest>,
) -> Result<pb::ListEntriesResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let list = EntryList {
        diary_id: req.diary_id,
        limit: req.limit,
        offset: req.offset,
        ids: req.ids,
        tags: req.tags,
        exclude_tags: req.exclude_tags,
        entry_types: req.entry_types,
        exclude_superseded: req.exclude_superseded,
    };
    let (entries, total, limit) = ops.list_entries(&caller, list).await?;
    Ok(pb::ListEntriesResponse {
        entries: entries.into_iter().map(entry_to_proto).collect(),
        total,
        limit,
        offset: req.offset,
    })
}

pub(super) async fn list_diary_tags(
    ops: &Identity,
    request: Request<pb::ListDiaryTagsRequest>,
) -> Result<pb::ListDiaryTagsResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let tags = ops
        .list_diary_tags(
            &caller,
            &req.diary_id,
            req.prefix,
            req.min_count,
            &req.entry_types,
        )
        .await?;
    Ok(pb::ListDiaryTagsResponse {
        total: tags.len() as u64,
        tags: tags
            .into_iter()
            .map(|t| pb::DiaryTag {
                tag: t.tag,
                count: t.count,
            })
            .collect(),
    })
}

pub(super) async fn update_entry(
    ops: &Identity,
    request: Request<pb::UpdateEntryRequest>,
) -> Result<pb::Entry, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let changes = EntryChanges {
        title: req.title,
        content: req.content,
        tags: req.set_tags.then_some(req.tags),
        entry_type: req.entry_type,
        importance: req.importance,
        injection_risk: req.injection_risk,
        record_access: req.record_access,
    };
    Ok(entry_to_proto(
        ops.update_entry(&caller, &req.id, changes).await?,
    ))
}

pub(super) async fn delete_entry(
    ops: &Identity,
    request: Request<pb::DeleteEntryRequest>,
) -> Result<pb::DeleteEntryResponse, IdentityError> {
    let caller = caller(&request)?;
    ops.delete_entry(&caller, &request.into_inner().id).await?;
    Ok(pb::DeleteEntryResponse {})
}

pub(super) async fn delete_entries(
    ops: &Identity,
    request: Request<pb::DeleteEntriesRequest>,
) -> Result<pb::DeleteEntriesResponse, IdentityError> {
    let caller = caller(&request)?;
    let (deleted, skipped) = ops
        .delete_entries(&caller, &request.into_inner().ids)
        .await?;
    Ok(pb::DeleteEntriesResponse { deleted, skipped })
}

pub(super) async fn search_entries(
    ops: &Identity,
    request: Request<pb::SearchEntriesRequest>,
) -> Result<pb::SearchEntriesResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let search = EntrySearch {
        diary_id: req.diary_id,
        query: req.query,
        limit: req.limit,
        offset: req.offset,
        tags: req.tags,
        exclude_tags: req.exclude_tags,
        entry_types: req.entry_types,
        exclude_superseded: req.exclude_superseded,
    };
    let (entries, total) = ops.search_entries(&caller, search).await?;
    Ok(pb::SearchEntriesResponse {
        results: entries.into_iter().map(entry_to_proto).collect(),
        total,
    })
}

pub(super) async fn verify_entry(
    ops: &Identity,
    request: Request<pb::VerifyEntryRequest>,
) -> Result<pb::VerifyEntryResponse, IdentityError> {
    let caller = caller(&request)?;
    let Some(found) = ops.verify_entry(&caller, &request.into_inner().id).await? else {
        return Ok(pb::VerifyEntryResponse::default());
    };
    Ok(pb::VerifyEntryResponse {
        signed: true,
        hash_matches: found.check.hash_matches,
        signature_valid: found.check.signature_valid,
        valid: found.check.hash_matches && found.check.signature_valid,
        content_hash: found.content_hash,
        agent_fingerprint: found.signer_fingerprint,
        reason: found.check.reason,
    })
}

//! `DiaryService`'s public feed RPCs: no caller needed (their scope is `public`).

use noema_proto::identity::v1 as pb;
use noema_runtime::convert::timestamp;
use tonic::Request;

use super::diaries::fingerprint_of;
use crate::domain::feed::PublicEntry;
use crate::error::IdentityError;
use crate::ops::Identity;

fn public_entry_to_proto(e: PublicEntry) -> pb::PublicEntry {
    pb::PublicEntry {
        author_fingerprint: fingerprint_of(Some(&e.author_public_key)),
        author_public_key: e.author_public_key,
        id: e.id,
        title: e.title,
        content: e.content,
        has_tags: e.tags.is_some(),
        tags: e.tags.unwrap_or_default(),
        injection_risk: e.injection_risk,
        entry_type: e.entry_type.as_str().to_owned(),
        created_at: Some(timestamp(e.created_at)),
    }
}

pub(super) async fn list_public_feed(
    ops: &Identity,
    request: Request<pb::ListPublicFeedRequest>,
) -> Result<pb::ListPublicFeedResponse, IdentityError> {
    let req = request.into_inner();
    let page = ops
        .public_feed(req.limit, &req.cursor, &req.tag, req.include_suspicious)
        .await?;
    Ok(pb::ListPublicFeedResponse {
        items: page.items.into_iter().map(public_entry_to_proto).collect(),
        next_cursor: page.next.map(|c| c.encode()).unwrap_or_default(),
    })
}

pub(super) async fn search_public_feed(
    ops: &Identity,
    request: Request<pb::SearchPublicFeedRequest>,
) -> Result<pb::SearchPublicFeedResponse, IdentityError> {
    let req = request.into_inner();
    let items = ops
        .search_public_feed(
            &req.query,
            req.limit,
            &req.tag,
            &req.entry_types,
            req.exclude_superseded,
            req.include_suspicious,
        )
        .await?;
    Ok(pb::SearchPublicFeedResponse {
        items: items.into_iter().map(public_entry_to_proto).collect(),
        query: req.query,
    })
}

pub(super) async fn get_public_entry(
    ops: &Identity,
    request: Request<pb::GetPublicEntryRequest>,
) -> Result<pb::PublicEntry, IdentityError> {
    let entry = ops.public_entry(&request.into_inner().id).await?;
    Ok(public_entry_to_proto(entry))
}

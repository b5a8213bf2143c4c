//! `DiaryService`'s relation RPCs.

use noema_proto::identity::v1 as pb;
use noema_runtime::convert::timestamp;
use tonic::Request;

use super::caller;
use crate::domain::relation::Relation;
use crate::error::IdentityError;
use crate::ops::{Identity, RelationList};

fn relation_to_proto(r: Relation) -> pb::EntryRelation {
    pb::EntryRelation {
        id: r.id,
        source_id: r.source_id,
        target_id: r.target_id,
        relation: r.relation,
        status: r.status,
        source_cid_snapshot: r.source_cid_snapshot.unwrap_or_default(),
        target_cid_snapshot: r.target_cid_snapshot.unwrap_or_default(),
        created_at: Some(timestamp(r.created_at)),
        updated_at: Some(timestamp(r.updated_at)),
    }
}

pub(super) async fn create_relation(
    ops: &Identity,
    request: Request<pb::CreateRelationRequest>,
) -> Result<pb::CreateRelationResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let (relation, created) = ops
        .create_relation(
            &caller,
            &req.source_id,
            &req.target_id,
            req.relation,
            &req.status,
        )
        .await?;
    Ok(pb::CreateRelationResponse {
        relation: Some(relation_to_proto(relation)),
        created,
    })
}

pub(super) async fn list_relations(
    ops: &Identity,
    request: Request<pb::ListRelationsRequest>,
) -> Result<pb::ListRelationsResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let list = RelationList {
        entry_id: req.entry_id,
        relation: req.relation,
        status: req.status,
        direction: req.direction,
        limit: req.limit,
        offset: req.offset,
    };
    let (relations, total, limit) = ops.list_relations(&caller, list).await?;
    Ok(pb::ListRelationsResponse {
        relations: relations.into_iter().map(relation_to_proto).collect(),
        total,
        limit,
        offset: req.offset,
    })
}

pub(super) async fn walk_relations(
    ops: &Identity,
    request: Request<pb::WalkRelationsRequest>,
) -> Result<pb::WalkRelationsResponse, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let (depth, walked) = ops
        .walk_relations(&caller, &req.entry_id, req.depth, &req.status)
        .await?;
    Ok(pb::WalkRelationsResponse {
        requested_depth: depth,
        max_depth: walked.max_depth,
        items: walked
            .items
            .into_iter()
            .map(|w| pb::WalkedRelation {
                relation: Some(relation_to_proto(w.relation)),
                depth: w.depth,
                parent_relation_id: w.parent_relation_id.unwrap_or_default(),
            })
            .collect(),
    })
}

pub(super) async fn update_relation(
    ops: &Identity,
    request: Request<pb::UpdateRelationRequest>,
) -> Result<pb::EntryRelation, IdentityError> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let relation = ops.update_relation(&caller, &req.id, &req.status).await?;
    Ok(relation_to_proto(relation))
}

pub(super) async fn delete_relation(
    ops: &Identity,
    request: Request<pb::DeleteRelationRequest>,
) -> Result<pb::DeleteRelationResponse, IdentityError> {
    let caller = caller(&request)?;
    ops.delete_relation(&caller, &request.into_inner().id)
        .await?;
    Ok(pb::DeleteRelationResponse {})
}

//! MoltNet's entry relations (`shared/compat/moltnet.md` §9): relate two entries, list an
//! entry's relations (or, with `depth` above 1, walk them), change a relation's status,
//! delete one. Accepted `supersedes` relations mark their targets superseded.

use axum::extract::Path;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::forward::{Caller, JsonBody, RepeatedQuery, first};
use crate::go_json::GoJson;
use crate::reply::{Answer, CreatedOrFound, NoContent};
use crate::route::{Route, Verb};
use crate::routes::moltnet::{DIARIES, Page, depth, number, text_or_null, time};

/// MoltNet's EntryRelation (its workflow and scoring fields are always null here); a
/// relation reached by a walk also says how it was reached.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelationBody {
    pub confidence: Option<f64>,
    pub created_at: Option<String>,
    /// Walks only: steps from the starting entry (1-3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    pub id: String,
    /// Walks only: the relation this one was reached through (null at depth 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_relation_id: Option<Option<String>>,
    /// `supersedes`, `elaborates`, `contradicts`, `supports`, `caused_by` or `references`.
    pub relation: String,
    pub similarity: Option<f64>,
    pub source_cid_snapshot: Option<String>,
    pub source_id: String,
    /// `proposed`, `accepted` or `rejected`.
    pub status: String,
    pub target_cid_snapshot: Option<String>,
    pub target_id: String,
    pub updated_at: Option<String>,
    pub workflow_id: Option<String>,
}

impl From<pb::EntryRelation> for RelationBody {
    fn from(r: pb::EntryRelation) -> Self {
        RelationBody {
            confidence: None,
            created_at: time(&r.created_at),
            depth: None,
            parent_relation_id: None,
            source_cid_snapshot: text_or_null(&r.source_cid_snapshot),
            target_cid_snapshot: text_or_null(&r.target_cid_snapshot),
            updated_at: time(&r.updated_at),
            id: r.id,
            relation: r.relation,
            similarity: None,
            source_id: r.source_id,
            status: r.status,
            target_id: r.target_id,
            workflow_id: None,
        }
    }
}

/// A walked relation with its `depth` and `parentRelationId`.
pub fn walked(w: pb::WalkedRelation) -> RelationBody {
    RelationBody {
        depth: Some(w.depth),
        parent_relation_id: Some(text_or_null(&w.parent_relation_id)),
        ..RelationBody::from(w.relation.unwrap_or_default())
    }
}

/// A new relation from this entry (the source).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["targetId", "relation"]))]
pub struct RelationInput {
    #[serde(default)]
    pub target_id: String,
    #[serde(default)]
    #[schemars(extend("enum" = ["supersedes", "elaborates", "contradicts", "supports", "caused_by", "references"]))]
    pub relation: String,
    /// `proposed` (default) or `accepted`.
    #[serde(default)]
    #[schemars(extend("enum" = ["", "proposed", "accepted", null]))]
    pub status: Option<String>,
}

async fn create_relation(
    caller: Caller,
    Path(source_id): Path<String>,
    JsonBody(body): JsonBody<RelationInput>,
) -> Result<CreatedOrFound<RelationBody>, crate::error::ApiError> {
    let request = pb::CreateRelationRequest {
        source_id,
        target_id: body.target_id,
        relation: body.relation,
        status: body.status.unwrap_or_default(),
    };
    let created = caller
        .diary()
        .create_relation(caller.request(request))
        .await?
        .into_inner();
    Ok(CreatedOrFound {
        created: created.created,
        body: created.relation.unwrap_or_default().into(),
    })
}

/// `GET /entries/{id}/relations` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RelationsQuery {
    /// Only this type
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["", "supersedes", "elaborates", "contradicts", "supports", "caused_by", "references"]))]
    pub relation: Option<String>,
    /// proposed, accepted or rejected
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["", "proposed", "accepted", "rejected"]))]
    pub status: Option<String>,
    /// as_source, as_target or both
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["", "as_source", "as_target", "both"]))]
    pub direction: Option<String>,
    /// 1-100, default 50
    #[serde(default, deserialize_with = "first")]
    #[schemars(regex(pattern = r"^\+?(0+|0*(100|[1-9][0-9]?))$"))]
    pub limit: Option<String>,
    /// Skip this many
    #[serde(default, deserialize_with = "first")]
    pub offset: Option<String>,
    /// 1-3, default 1; above 1 every relation within that many steps (status filter
    /// only), limit = total
    #[serde(default, deserialize_with = "first")]
    pub depth: Option<String>,
}

async fn list_relations(
    caller: Caller,
    Path(entry_id): Path<String>,
    RepeatedQuery(q): RepeatedQuery<RelationsQuery>,
) -> Answer<Page<RelationBody>> {
    if let Some(depth) = depth(&q.depth).filter(|d| *d != 1) {
        // MoltNet's depth > 1: the undirected walk, status filter only (relation,
        // direction, limit and offset ignored), every edge at once without depth fields.
        let request = pb::WalkRelationsRequest {
            entry_id,
            depth: Some(depth),
            status: q.status.unwrap_or_default(),
        };
        let walk = caller
            .diary()
            .walk_relations(caller.request(request))
            .await?
            .into_inner();
        let items: Vec<RelationBody> = walk
            .items
            .into_iter()
            .map(|w| w.relation.unwrap_or_default().into())
            .collect();
        let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
        return Ok(GoJson(Page {
            items,
            limit: count,
            offset: 0,
            total: count,
        }));
    }
    let request = pb::ListRelationsRequest {
        entry_id,
        limit: number(&q.limit),
        offset: number(&q.offset),
        relation: q.relation.unwrap_or_default(),
        status: q.status.unwrap_or_default(),
        direction: q.direction.unwrap_or_default(),
    };
    let list = caller
        .diary()
        .list_relations(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Page {
        items: list.relations.into_iter().map(RelationBody::from).collect(),
        limit: list.limit.into(),
        offset: list.offset.into(),
        total: list.total,
    }))
}

/// A relation's new status.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct RelationStatusInput {
    /// `proposed`, `accepted` or `rejected`.
    #[serde(default)]
    pub status: String,
}

async fn update_relation(
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<RelationStatusInput>,
) -> Answer<RelationBody> {
    let request = pb::UpdateRelationRequest {
        id,
        status: body.status,
    };
    let r = caller
        .diary()
        .update_relation(caller.request(request))
        .await?;
    Ok(GoJson(r.into_inner().into()))
}

async fn delete_relation(
    caller: Caller,
    Path(id): Path<String>,
) -> Result<NoContent, crate::error::ApiError> {
    caller
        .diary()
        .delete_relation(caller.request(pb::DeleteRelationRequest { id }))
        .await?;
    Ok(NoContent)
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = DIARIES;
    vec![
        r.route(
            Verb::Post,
            "/entries/{id}/relations",
            "createRelation",
            "MoltNet: relate this entry (source) to targetId",
            create_relation,
        )
        .calls("CreateRelation")
        .status(
            400,
            "One or both entries not found (MoltNet's answer for an unknown entry)",
        )
        .tool("relations_create", "Relate entry `id` (source) to targetId"),
        r.route(
            Verb::Get,
            "/entries/{id}/relations",
            "listRelations",
            "MoltNet: an entry's relations",
            list_relations,
        )
        .calls("ListRelations")
        .calls("WalkRelations")
        .tool("relations_list", "Entry `id`'s relations")
        .param(
            "depth",
            serde_json::json!({"type": "string", "pattern": "^[1-3]$"}),
        ),
        r.route(
            Verb::Patch,
            "/relations/{id}",
            "updateRelation",
            "MoltNet: change a relation's status",
            update_relation,
        )
        .calls("UpdateRelation")
        .tool("relations_update", "Change relation `id`'s status"),
        r.route(
            Verb::Delete,
            "/relations/{id}",
            "deleteRelation",
            "MoltNet: delete a relation (204)",
            delete_relation,
        )
        .calls("DeleteRelation")
        .tool("relations_delete", "Delete relation `id`"),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn walked_relations_say_how_they_were_reached() {
        let walked = pb::WalkedRelation {
            relation: Some(pb::EntryRelation {
                id: "r2".into(),
                ..Default::default()
            }),
            depth: 2,
            parent_relation_id: "r1".into(),
        };
        let body = serde_json::to_value(super::walked(walked.clone())).unwrap();
        assert_eq!(body["id"], "r2");
        assert_eq!(body["depth"], 2);
        assert_eq!(body["parentRelationId"], "r1");
        let first = serde_json::to_value(super::walked(pb::WalkedRelation {
            depth: 1,
            parent_relation_id: String::new(),
            ..walked
        }))
        .unwrap();
        assert_eq!(first["parentRelationId"], serde_json::Value::Null);
    }

    #[test]
    fn bodies_are_in_moltnets_order() {
        assert_sorted(&RelationBody::from(pb::EntryRelation::default()));
        assert_sorted(&walked(pb::WalkedRelation::default()));
        let plain = serde_json::to_value(RelationBody::from(pb::EntryRelation::default())).unwrap();
        assert!(plain.get("depth").is_none() && plain.get("parentRelationId").is_none());
    }
}

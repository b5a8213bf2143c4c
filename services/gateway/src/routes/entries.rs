//! MoltNet's diary entries (`shared/compat/moltnet.md` §5, §8–§10): create (a draft, or
//! a signed entry from a completed signing request), list, read (with `expand=relations`
//! walking the relations), change, delete one or many, and verify.

use axum::extract::Path;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiError;
use crate::features;
use crate::forward::{Caller, JsonBody, RepeatedQuery, first};
use crate::go_json::GoJson;
use crate::reply::{Answer, Created, Creates};
use crate::route::{Route, Verb};
use crate::routes::moltnet::{
    Creator, DIARIES, Page, Success, depth, flag, number, text_or_null, time,
};
use crate::routes::relations::{RelationBody, walked};

/// MoltNet's DiaryEntry.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EntryBody {
    pub access_count: u64,
    pub content: String,
    /// The entry's CIDv1 (raw, sha2-256, base32lower), computed by the server.
    pub content_hash: String,
    pub content_signature: Option<String>,
    pub created_at: Option<String>,
    pub created_by: String,
    pub creator: Creator,
    pub diary_id: String,
    pub entry_type: String,
    pub id: String,
    pub importance: u32,
    pub injection_risk: bool,
    pub last_accessed_at: Option<String>,
    /// With `expand=relations` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relations: Option<Relations>,
    pub signed_at: Option<String>,
    pub signed_by: Option<String>,
    pub signer_fingerprint: Option<String>,
    /// Target of an accepted `supersedes` relation.
    pub superseded: bool,
    pub tags: Vec<String>,
    pub title: Option<String>,
    pub updated_at: Option<String>,
    pub visibility: String,
}

impl From<pb::Entry> for EntryBody {
    fn from(e: pb::Entry) -> Self {
        EntryBody {
            creator: Creator::new(&e.created_by, &e.creator_fingerprint, &e.creator_public_key),
            content_signature: text_or_null(&e.content_signature),
            created_at: time(&e.created_at),
            last_accessed_at: time(&e.last_accessed_at),
            signed_at: time(&e.signed_at),
            signed_by: text_or_null(&e.signed_by),
            signer_fingerprint: text_or_null(&e.signer_fingerprint),
            updated_at: time(&e.updated_at),
            relations: None,
            access_count: e.access_count,
            content: e.content,
            content_hash: e.content_hash,
            created_by: e.created_by,
            diary_id: e.diary_id,
            entry_type: e.entry_type,
            id: e.id,
            importance: e.importance,
            injection_risk: e.injection_risk,
            superseded: e.superseded,
            tags: e.tags,
            title: e.title,
            visibility: e.visibility,
        }
    }
}

/// An entry's relations walked breadth-first (`expand=relations`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Relations {
    pub items: Vec<RelationBody>,
    pub max_depth: u32,
    pub requested_depth: u32,
}

/// A new entry.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["content"]))]
pub struct EntryInput {
    #[serde(default)]
    #[schemars(length(min = 1, max = 100000))]
    pub content: String,
    #[serde(default)]
    #[schemars(length(max = 255))]
    pub title: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 20), inner(length(min = 1, max = 128)))]
    pub tags: Option<Vec<String>>,
    /// 1-10, default 5.
    #[serde(default)]
    #[schemars(range(max = 10))]
    pub importance: Option<u32>,
    /// episodic, semantic (default), procedural, reflection, identity or soul.
    #[serde(default)]
    #[schemars(extend("enum" = ["", "episodic", "semantic", "procedural", "reflection", "identity", "soul", null]))]
    pub entry_type: Option<String>,
    /// The client's CID of the entry; must equal the server's.
    #[serde(default)]
    pub content_hash: Option<String>,
    /// A completed signing request over this entry's CID: the entry is created signed.
    #[serde(default)]
    pub signing_request_id: Option<String>,
}

async fn create_entry(
    caller: Caller,
    Path(diary_id): Path<String>,
    JsonBody(body): JsonBody<EntryInput>,
) -> Creates<EntryBody> {
    let request = pb::CreateEntryRequest {
        diary_id,
        content: body.content,
        title: body.title,
        tags: body.tags.unwrap_or_default(),
        entry_type: body.entry_type.unwrap_or_default(),
        importance: body.importance.unwrap_or(0),
        content_hash: body.content_hash.unwrap_or_default(),
        signing_request_id: body.signing_request_id.unwrap_or_default(),
    };
    let e = caller.diary().create_entry(caller.request(request)).await?;
    Ok(Created(e.into_inner().into()))
}

/// `GET /diaries/{id}/entries` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EntriesQuery {
    /// 1-100, default 20
    #[serde(default, deserialize_with = "first")]
    pub limit: Option<String>,
    /// Skip this many
    #[serde(default, deserialize_with = "first")]
    pub offset: Option<String>,
    /// Only these ids (repeatable)
    #[serde(default)]
    pub ids: Vec<String>,
    /// Entries with all these tags (repeatable)
    #[serde(default)]
    #[schemars(
        length(max = 20),
        inner(length(min = 1, max = 128), regex(pattern = "^[^,]*$"))
    )]
    pub tags: Vec<String>,
    /// Entries with none of these tags (repeatable)
    #[serde(default)]
    #[schemars(
        length(max = 20),
        inner(length(min = 1, max = 128), regex(pattern = "^[^,]*$"))
    )]
    pub exclude_tags: Vec<String>,
    /// Only these types (repeatable)
    #[serde(default)]
    #[schemars(extend("items" = {"type": "string", "enum": ["episodic", "semantic", "procedural", "reflection", "identity", "soul"]}))]
    pub entry_type: Vec<String>,
    /// true hides targets of accepted supersedes relations
    #[serde(default, deserialize_with = "first")]
    pub exclude_superseded: Option<String>,
}

async fn list_entries(
    caller: Caller,
    Path(diary_id): Path<String>,
    RepeatedQuery(q): RepeatedQuery<EntriesQuery>,
) -> Answer<Page<EntryBody>> {
    let request = pb::ListEntriesRequest {
        diary_id,
        limit: number(&q.limit),
        offset: number(&q.offset),
        exclude_superseded: flag(&q.exclude_superseded),
        ids: q.ids,
        tags: q.tags,
        exclude_tags: q.exclude_tags,
        entry_types: q.entry_type,
    };
    let list = caller
        .diary()
        .list_entries(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Page {
        items: list.entries.into_iter().map(EntryBody::from).collect(),
        limit: list.limit.into(),
        offset: list.offset.into(),
        total: list.total,
    }))
}

/// `GET /entries/{id}` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EntryQuery {
    /// relations: add relations {requestedDepth, maxDepth, items} (each relation with
    /// depth and parentRelationId)
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["", "relations"]))]
    pub expand: Option<String>,
    /// 1-3, default 1: how far the relation walk goes
    #[serde(default, deserialize_with = "first")]
    pub depth: Option<String>,
}

/// MoltNet's `GET /entries/:entryId`; with `expand=relations` the entry gets
/// `relations` from WalkRelations. GetEntry checks `expand` (only `relations`, as
/// unknown enum values elsewhere are refused) and `depth`.
async fn get_entry(
    caller: Caller,
    Path(id): Path<String>,
    RepeatedQuery(q): RepeatedQuery<EntryQuery>,
) -> Answer<EntryBody> {
    let expand = q.expand.unwrap_or_default();
    let depth = depth(&q.depth);
    let request = pb::GetEntryRequest {
        id,
        expand: expand.clone(),
        depth,
    };
    let e = caller
        .diary()
        .get_entry(caller.request(request))
        .await?
        .into_inner();
    let mut body = EntryBody::from(e);
    if expand == "relations" {
        let request = pb::WalkRelationsRequest {
            entry_id: body.id.clone(),
            depth,
            status: String::new(),
        };
        let walk = caller
            .diary()
            .walk_relations(caller.request(request))
            .await?
            .into_inner();
        body.relations = Some(Relations {
            items: walk.items.into_iter().map(walked).collect(),
            max_depth: walk.max_depth,
            requested_depth: walk.requested_depth,
        });
    }
    Ok(GoJson(body))
}

/// Changes to an entry (content fields only while it is unsigned).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("anyOf" = [
    {"required": ["title"], "properties": {"title": {"type": "string"}}},
    {"required": ["content"], "properties": {"content": {"type": "string"}}},
    {"required": ["tags"], "properties": {"tags": {"type": "array"}}},
    {"required": ["importance"], "properties": {"importance": {"type": "integer"}}},
    {"required": ["entryType"], "properties": {"entryType": {"type": "string"}}},
    {"required": ["injectionRisk"], "properties": {"injectionRisk": {"type": "boolean"}}},
    {"required": ["recordAccess"], "properties": {"recordAccess": {"const": true}}},
]))]
pub struct EntryChanges {
    #[serde(default)]
    #[schemars(length(max = 255))]
    pub title: Option<String>,
    #[serde(default)]
    #[schemars(length(min = 1, max = 100000))]
    pub content: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 20), inner(length(min = 1, max = 128)))]
    pub tags: Option<Vec<String>>,
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub importance: Option<u32>,
    #[serde(default)]
    #[schemars(extend("enum" = ["", "episodic", "semantic", "procedural", "reflection", "identity", "soul", null]))]
    pub entry_type: Option<String>,
    #[serde(default)]
    pub injection_risk: Option<bool>,
    /// Count a read: sets lastAccessedAt and adds one to accessCount.
    #[serde(default)]
    pub record_access: Option<bool>,
}

async fn update_entry(
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<EntryChanges>,
) -> Answer<EntryBody> {
    let request = pb::UpdateEntryRequest {
        id,
        title: body.title,
        content: body.content,
        set_tags: body.tags.is_some(),
        tags: body.tags.unwrap_or_default(),
        entry_type: body.entry_type,
        importance: body.importance,
        injection_risk: body.injection_risk,
        record_access: body.record_access.unwrap_or(false),
    };
    let e = caller.diary().update_entry(caller.request(request)).await?;
    Ok(GoJson(e.into_inner().into()))
}

async fn delete_entry(caller: Caller, Path(id): Path<String>) -> Answer<Success> {
    caller
        .diary()
        .delete_entry(caller.request(pb::DeleteEntryRequest { id }))
        .await?;
    Ok(GoJson(Success { success: true }))
}

/// MoltNet's bulk delete request, read as plain JSON so that each wrong type gets its
/// own message; documented as [`DeleteEntriesShape`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct DeleteEntriesInput(#[schemars(with = "DeleteEntriesShape")] pub Value);

/// Entries to delete.
#[derive(Debug, JsonSchema)]
pub struct DeleteEntriesShape {
    /// 1-100 distinct entry UUIDs.
    #[schemars(length(min = 1, max = 100), extend("uniqueItems" = true), inner(regex(pattern = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")))]
    pub ids: Vec<String>,
}

/// `{deleted, skipped}`, both in request order.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeleteEntriesResult {
    pub deleted: Vec<String>,
    /// Signed, missing and not deletable ids.
    pub skipped: Vec<String>,
}

/// MoltNet's bulk delete. Only the body's JSON types are checked here (as typed bodies
/// are decoded on the other routes); the count, UUID and uniqueness rules are
/// identity's, after authentication. Missing `ids` is sent as none, which identity
/// refuses.
async fn delete_entries(
    caller: Caller,
    JsonBody(DeleteEntriesInput(body)): JsonBody<DeleteEntriesInput>,
) -> Answer<DeleteEntriesResult> {
    let Value::Object(body) = body else {
        return Err(ApiError::malformed_body(
            "the body must be a JSON object: {\"ids\": [entry ids]}",
        ));
    };
    let ids = match body.get("ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(id) => Ok(id.clone()),
                other => Err(ApiError::malformed_body(format!(
                    "ids[{i}] must be a UUID string, got {other}"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(ApiError::malformed_body(format!(
                "ids must be an array of entry ids, got {other}"
            )));
        }
    };
    let reply = caller
        .diary()
        .delete_entries(caller.request(pb::DeleteEntriesRequest { ids }))
        .await?
        .into_inner();
    Ok(GoJson(DeleteEntriesResult {
        deleted: reply.deleted,
        skipped: reply.skipped,
    }))
}

/// Whether an entry's signature holds.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    pub agent_fingerprint: Option<String>,
    pub content_hash: Option<String>,
    pub hash_matches: bool,
    /// Why `valid` is false, in words.
    pub reason: Option<String>,
    pub signature_valid: bool,
    pub signed: bool,
    pub valid: bool,
}

async fn verify_entry(caller: Caller, Path(id): Path<String>) -> Answer<Verification> {
    let v = caller
        .diary()
        .verify_entry(caller.request(pb::VerifyEntryRequest { id }))
        .await?
        .into_inner();
    Ok(GoJson(Verification {
        agent_fingerprint: text_or_null(&v.agent_fingerprint),
        content_hash: text_or_null(&v.content_hash),
        hash_matches: v.hash_matches,
        reason: text_or_null(&v.reason),
        signature_valid: v.signature_valid,
        signed: v.signed,
        valid: v.valid,
    }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = DIARIES;
    vec![
        r.route(
            Verb::Post,
            "/diaries/{id}/entries",
            "createEntry",
            "MoltNet: create a draft entry, or a signed one with signingRequestId",
            create_entry,
        )
        .calls("CreateEntry")
        .status(
            400,
            "Invalid; also a contentHash that is not the CIDv1 of the content",
        )
        .tool(
            "entries_create",
            "Create an entry in diary `id`; signed when signingRequestId is set",
        )
        .feature(features::DIARY_ENTRIES),
        r.route(
            Verb::Get,
            "/diaries/{id}/entries",
            "listEntries",
            "MoltNet: entries, newest first",
            list_entries,
        )
        .calls("ListEntries")
        .tool("entries_list", "Entries of diary `id`, newest first")
        .param(
            "limit",
            // 1-100; 0 is the default, 20.
            serde_json::json!({"type": "string", "pattern": "^\\+?(0+|0*(100|[1-9][0-9]?))$"}),
        ),
        r.route(
            Verb::Get,
            "/entries/{id}",
            "getEntry",
            "MoltNet: an entry (superseded ones stay readable)",
            get_entry,
        )
        .calls("GetEntry")
        .calls("WalkRelations")
        .status(404, "No such entry, or not readable")
        .tool(
            "entries_get",
            "Entry `id`; expand=relations walks its relations",
        )
        .param(
            "depth",
            serde_json::json!({"type": "string", "pattern": "^[1-3]$"}),
        ),
        r.route(
            Verb::Patch,
            "/entries/{id}",
            "updateEntry",
            "MoltNet: update (content fields only while unsigned; 409 when signed)",
            update_entry,
        )
        .calls("UpdateEntry")
        .status(409, "The entry is signed")
        .tool(
            "entries_update",
            "Update entry `id` (content only while unsigned)",
        ),
        r.route(
            Verb::Delete,
            "/entries/{id}",
            "deleteEntry",
            "MoltNet: delete a draft (409 for a signed entry)",
            delete_entry,
        )
        .calls("DeleteEntry")
        .status(409, "The entry is signed")
        .tool("entries_delete", "Delete unsigned entry `id`"),
        r.route(
            Verb::Delete,
            "/entries",
            "deleteEntries",
            "MoltNet: delete drafts in bulk; body {ids: 1-100 unique UUIDs} → {deleted, skipped} \
             in request order (signed, missing and not deletable ids are skipped)",
            delete_entries,
        )
        .calls("DeleteEntries")
        .tool(
            "entries_delete_many",
            "Delete up to 100 unsigned entries by id",
        ),
        r.route(
            Verb::Get,
            "/entries/{id}/verify",
            "verifyEntry",
            "MoltNet: signed, hashMatches, signatureValid, valid",
            verify_entry,
        )
        .calls("VerifyEntry")
        .tool(
            "entries_verify",
            "Check entry `id`'s content hash and signature",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn bodies_are_in_moltnets_order() {
        let mut entry = EntryBody::from(pb::Entry {
            creator_public_key: "ed25519:k".into(),
            title: Some("t".into()),
            ..Default::default()
        });
        assert_sorted(&entry);
        entry.relations = Some(Relations {
            items: vec![walked(pb::WalkedRelation::default())],
            max_depth: 1,
            requested_depth: 2,
        });
        assert_sorted(&entry);
        assert_sorted(&Page {
            items: vec![entry],
            limit: 20,
            offset: 0,
            total: 1,
        });
        assert_sorted(&Verification {
            agent_fingerprint: None,
            content_hash: Some("b".into()),
            hash_matches: true,
            reason: None,
            signature_valid: true,
            signed: true,
            valid: true,
        });
        assert_sorted(&DeleteEntriesResult {
            deleted: vec!["a".into()],
            skipped: vec![],
        });
    }
}

//! MoltNet's diaries (`shared/compat/moltnet.md` §2, §6): create, list, read, change and
//! delete; Noema's reader/writer invitations (shares) on their own paths, MoltNet's
//! grants being served over the same shares (`routes::grants`); a diary's tag counts;
//! full-text search over entries.
//!
//! `x-moltnet-team-id` is accepted and stored on new diaries; it grants nothing:
//! authorisation follows the seed's owner / shares / visibility model.

use axum::extract::Path;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::forward::{Caller, JsonBody, RepeatedQuery, first};
use crate::go_json::GoJson;
use crate::reply::{Answer, Created, Creates};
use crate::route::{Route, Verb};
use crate::routes::entries::EntryBody;
use crate::routes::moltnet::{Creator, DIARIES, Success, text_or_null, time};

/// MoltNet's Diary.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiaryBody {
    pub created_at: Option<String>,
    pub creator: Creator,
    pub id: String,
    pub name: String,
    pub owner_id: String,
    pub signed: bool,
    pub team_id: Option<String>,
    pub updated_at: Option<String>,
    pub visibility: String,
}

impl From<pb::Diary> for DiaryBody {
    fn from(d: pb::Diary) -> Self {
        DiaryBody {
            created_at: time(&d.created_at),
            creator: Creator::new(&d.owner_id, &d.owner_fingerprint, &d.owner_public_key),
            team_id: text_or_null(&d.team_id),
            updated_at: time(&d.updated_at),
            id: d.id,
            name: d.name,
            owner_id: d.owner_id,
            signed: d.signed,
            visibility: d.visibility,
        }
    }
}

/// A diary share (Noema's reader/writer invitation).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareBody {
    pub agent_id: String,
    pub created_at: Option<String>,
    pub diary_id: String,
    pub invited_by: String,
    /// `reader` or `writer`.
    pub role: String,
    /// `pending`, `accepted`, `declined` or `revoked`.
    pub status: String,
    pub updated_at: Option<String>,
}

impl From<pb::DiaryShare> for ShareBody {
    fn from(s: pb::DiaryShare) -> Self {
        ShareBody {
            created_at: time(&s.created_at),
            updated_at: time(&s.updated_at),
            agent_id: s.agent_id,
            diary_id: s.diary_id,
            invited_by: s.invited_by,
            role: s.role,
            status: s.status,
        }
    }
}

/// Changes a diary: its name, its visibility or both.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("anyOf" = [
    {"required": ["name"], "properties": {"name": {"type": "string"}}},
    {"required": ["visibility"], "properties": {"visibility": {"type": "string"}}},
]))]
pub struct DiaryInput {
    #[serde(default)]
    #[schemars(length(min = 1, max = 255), regex(pattern = r"\S"))]
    pub name: Option<String>,
    /// `private`, `moltnet` or `public`.
    #[serde(default)]
    #[schemars(extend("enum" = ["", "private", "moltnet", "public"]))]
    pub visibility: Option<String>,
}

/// Creates a diary: a [`DiaryInput`] whose name is required (a missing one is refused as
/// empty, after authentication).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["name"]))]
pub struct NewDiaryInput {
    #[serde(default)]
    #[schemars(with = "String", length(min = 1, max = 255), regex(pattern = r"\S"))]
    pub name: Option<String>,
    /// `private`, `moltnet` or `public`.
    #[serde(default)]
    #[schemars(extend("enum" = ["", "private", "moltnet", "public"]))]
    pub visibility: Option<String>,
}

async fn create_diary(
    caller: Caller,
    JsonBody(body): JsonBody<NewDiaryInput>,
) -> Creates<DiaryBody> {
    let request = pb::CreateDiaryRequest {
        name: body.name.unwrap_or_default(),
        visibility: body.visibility.unwrap_or_default(),
        team_id: caller.header("x-moltnet-team-id"),
    };
    let d = caller.diary().create_diary(caller.request(request)).await?;
    Ok(Created(d.into_inner().into()))
}

/// `{"items": [diaries]}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Diaries {
    pub items: Vec<DiaryBody>,
}

async fn list_diaries(caller: Caller) -> Answer<Diaries> {
    let list = caller
        .diary()
        .list_diaries(caller.request(pb::ListDiariesRequest {}))
        .await?
        .into_inner();
    Ok(GoJson(Diaries {
        items: list.diaries.into_iter().map(DiaryBody::from).collect(),
    }))
}

async fn get_diary(caller: Caller, Path(id): Path<String>) -> Answer<DiaryBody> {
    let d = caller
        .diary()
        .get_diary(caller.request(pb::GetDiaryRequest { id }))
        .await?;
    Ok(GoJson(d.into_inner().into()))
}

async fn update_diary(
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<DiaryInput>,
) -> Answer<DiaryBody> {
    let request = pb::UpdateDiaryRequest {
        id,
        name: body.name,
        visibility: body.visibility,
    };
    let d = caller.diary().update_diary(caller.request(request)).await?;
    Ok(GoJson(d.into_inner().into()))
}

async fn delete_diary(caller: Caller, Path(id): Path<String>) -> Answer<Success> {
    caller
        .diary()
        .delete_diary(caller.request(pb::DeleteDiaryRequest { id }))
        .await?;
    Ok(GoJson(Success { success: true }))
}

/// Invites an agent to a diary.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["agentId", "role"]))]
pub struct ShareInput {
    #[serde(default)]
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^[^\x00]*[^\s\x00][^\x00]*$")
    )]
    pub agent_id: String,
    /// `reader`, `writer` or `manager`.
    #[serde(default)]
    #[schemars(extend("enum" = ["reader", "writer", "manager"]))]
    pub role: String,
}

async fn share_diary(
    caller: Caller,
    Path(diary_id): Path<String>,
    JsonBody(body): JsonBody<ShareInput>,
) -> Creates<ShareBody> {
    let request = pb::ShareDiaryRequest {
        diary_id,
        agent_id: body.agent_id,
        role: body.role,
    };
    let share = caller.diary().share_diary(caller.request(request)).await?;
    Ok(Created(share.into_inner().into()))
}

/// `{"shares": [shares]}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Shares {
    pub shares: Vec<ShareBody>,
}

async fn list_shares(caller: Caller, Path(diary_id): Path<String>) -> Answer<Shares> {
    let list = caller
        .diary()
        .list_shares(caller.request(pb::ListSharesRequest { diary_id }))
        .await?
        .into_inner();
    Ok(GoJson(Shares {
        shares: list.shares.into_iter().map(ShareBody::from).collect(),
    }))
}

async fn respond(caller: Caller, diary_id: String, accept: bool) -> Answer<ShareBody> {
    let request = pb::RespondToShareRequest { diary_id, accept };
    let share = caller
        .diary()
        .respond_to_share(caller.request(request))
        .await?;
    Ok(GoJson(share.into_inner().into()))
}

async fn accept_share(caller: Caller, Path(diary_id): Path<String>) -> Answer<ShareBody> {
    respond(caller, diary_id, true).await
}

async fn decline_share(caller: Caller, Path(diary_id): Path<String>) -> Answer<ShareBody> {
    respond(caller, diary_id, false).await
}

async fn revoke_share(
    caller: Caller,
    Path((diary_id, agent_id)): Path<(String, String)>,
) -> Answer<ShareBody> {
    let request = pb::RevokeShareRequest { diary_id, agent_id };
    let share = caller.diary().revoke_share(caller.request(request)).await?;
    Ok(GoJson(share.into_inner().into()))
}

/// `GET /diaries/{id}/tags` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TagsQuery {
    /// Only tags starting with this (literal, case-sensitive)
    #[serde(default, deserialize_with = "first")]
    pub prefix: Option<String>,
    /// Only tags on at least this many entries (>= 1)
    #[serde(default, deserialize_with = "first")]
    pub min_count: Option<String>,
    /// Count only entries of these types (repeatable or comma-separated)
    #[serde(default)]
    #[schemars(inner(regex(
        pattern = r"^(episodic|semantic|procedural|reflection|identity|soul)(,(episodic|semantic|procedural|reflection|identity|soul))*$"
    )))]
    pub entry_types: Vec<String>,
}

impl TagsQuery {
    /// `minCount` for the service, which refuses values below 1: absent is `None`; a
    /// value that is not an integer becomes 0 so it is refused after authentication; an
    /// all-digit value too large for an i64 is `i64::MAX` (valid, matches nothing).
    fn min_count(&self) -> Option<i64> {
        self.min_count.as_deref().map(|v| match v.parse::<i64>() {
            Ok(n) => n,
            Err(_) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => i64::MAX,
            Err(_) => 0,
        })
    }

    /// `entryTypes` both repeated and comma-separated; the service checks each type.
    /// Splitting keeps empty pieces so `a,,b` is refused rather than read as `a,b`.
    fn entry_types(&self) -> Vec<String> {
        self.entry_types
            .iter()
            .flat_map(|v| v.split(',').map(str::to_owned))
            .collect()
    }
}

/// A tag and how many of the diary's entries carry it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TagCount {
    pub count: u64,
    pub tag: String,
}

/// `{tags: [{count, tag}], total}`, most used first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Tags {
    pub tags: Vec<TagCount>,
    pub total: u64,
}

async fn list_tags(
    caller: Caller,
    Path(diary_id): Path<String>,
    RepeatedQuery(q): RepeatedQuery<TagsQuery>,
) -> Answer<Tags> {
    let request = pb::ListDiaryTagsRequest {
        diary_id,
        min_count: q.min_count(),
        entry_types: q.entry_types(),
        prefix: q.prefix.unwrap_or_default(),
    };
    let list = caller
        .diary()
        .list_diary_tags(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Tags {
        tags: list
            .tags
            .into_iter()
            .map(|t| TagCount {
                count: t.count,
                tag: t.tag,
            })
            .collect(),
        total: list.total,
    }))
}

/// MoltNet's search request.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchInput {
    /// Search this diary only.
    #[serde(default)]
    pub diary_id: Option<String>,
    /// Full-text query.
    #[serde(default)]
    pub query: Option<String>,
    #[serde(default)]
    #[schemars(
        length(max = 20),
        inner(length(min = 1, max = 128), regex(pattern = "^[^,]*$"))
    )]
    pub tags: Vec<String>,
    #[serde(default)]
    #[schemars(
        length(max = 20),
        inner(length(min = 1, max = 128), regex(pattern = "^[^,]*$"))
    )]
    pub exclude_tags: Vec<String>,
    #[serde(default)]
    #[schemars(extend("items" = {"type": "string", "enum": ["episodic", "semantic", "procedural", "reflection", "identity", "soul"]}))]
    pub entry_types: Vec<String>,
    /// Hide targets of accepted `supersedes` relations.
    #[serde(default)]
    pub exclude_superseded: bool,
    #[serde(default)]
    #[schemars(range(max = 100))]
    pub limit: Option<u32>,
    #[serde(default)]
    #[schemars(range(max = u32::MAX))]
    pub offset: Option<u32>,
}

/// `{results: [entries], total}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResults {
    pub results: Vec<EntryBody>,
    pub total: u64,
}

async fn search(caller: Caller, JsonBody(body): JsonBody<SearchInput>) -> Answer<SearchResults> {
    let request = pb::SearchEntriesRequest {
        diary_id: body.diary_id.unwrap_or_default(),
        query: body.query.unwrap_or_default(),
        tags: body.tags,
        exclude_tags: body.exclude_tags,
        entry_types: body.entry_types,
        exclude_superseded: body.exclude_superseded,
        limit: body.limit.unwrap_or(0),
        offset: body.offset.unwrap_or(0),
    };
    let found = caller
        .diary()
        .search_entries(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(SearchResults {
        results: found.results.into_iter().map(EntryBody::from).collect(),
        total: found.total,
    }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = DIARIES;
    vec![
        r.route(
            Verb::Post,
            "/diaries",
            "createDiary",
            "MoltNet: create a diary (x-moltnet-team-id is stored, grants nothing)",
            create_diary,
        )
        .calls("CreateDiary")
        .tool("diaries_create", "Create a diary"),
        r.route(
            Verb::Get,
            "/diaries",
            "listDiaries",
            "MoltNet: diaries the caller owns or has an accepted share of",
            list_diaries,
        )
        .calls("ListDiaries")
        .tool("diaries_list", "Your diaries and those shared with you"),
        r.route(
            Verb::Get,
            "/diaries/{id}",
            "getDiary",
            "MoltNet: a diary (404 when missing or not readable)",
            get_diary,
        )
        .calls("GetDiary")
        .status(404, "No such diary, or not readable")
        .tool("diaries_get", "Diary `id`'s metadata"),
        r.route(
            Verb::Patch,
            "/diaries/{id}",
            "updateDiary",
            "MoltNet: rename or change visibility (owner)",
            update_diary,
        )
        .calls("UpdateDiary")
        .tool(
            "diaries_update",
            "Rename diary `id` or change its visibility",
        ),
        r.route(
            Verb::Delete,
            "/diaries/{id}",
            "deleteDiary",
            "MoltNet: delete a diary without signed entries (owner)",
            delete_diary,
        )
        .calls("DeleteDiary")
        .tool(
            "diaries_delete",
            "Delete diary `id` (only without signed entries)",
        ),
        r.route(
            Verb::Post,
            "/diaries/{id}/shares",
            "shareDiary",
            "Noema: invite an agent as reader or writer (pending until accepted)",
            share_diary,
        )
        .calls("ShareDiary")
        .tool(
            "diary_shares_create",
            "Invite an agent to diary `id` as reader or writer",
        ),
        r.route(
            Verb::Get,
            "/diaries/{id}/shares",
            "listShares",
            "Noema: a diary's shares (owner) or the caller's own",
            list_shares,
        )
        .calls("ListShares")
        .tool("diary_shares_list", "Diary `id`'s shares"),
        r.route(
            Verb::Post,
            "/diaries/{id}/shares/accept",
            "acceptShare",
            "Noema: accept the caller's pending share",
            accept_share,
        )
        .calls("RespondToShare")
        .param(
            "id",
            serde_json::json!({"type": "string", "pattern": "\\S"}),
        )
        .tool(
            "diary_shares_accept",
            "Accept your pending share of diary `id`",
        ),
        r.route(
            Verb::Post,
            "/diaries/{id}/shares/decline",
            "declineShare",
            "Noema: decline the caller's pending share",
            decline_share,
        )
        .calls("RespondToShare")
        .param(
            "id",
            serde_json::json!({"type": "string", "pattern": "\\S"}),
        )
        .tool(
            "diary_shares_decline",
            "Decline your pending share of diary `id`",
        ),
        r.route(
            Verb::Delete,
            "/diaries/{id}/shares/{agent_id}",
            "revokeShare",
            "Noema: revoke an agent's share (owner)",
            revoke_share,
        )
        .calls("RevokeShare")
        .tool(
            "diary_shares_revoke",
            "Revoke agent_id's share of diary `id`",
        ),
        r.route(
            Verb::Get,
            "/diaries/{id}/tags",
            "listDiaryTags",
            "MoltNet: the diary's tags with entry counts, most used first",
            list_tags,
        )
        .calls("ListDiaryTags")
        .tool("diary_tags", "Diary `id`'s tags with entry counts")
        .param(
            "minCount",
            serde_json::json!({"type": "string", "pattern": "^0*[1-9][0-9]*$"}),
        ),
        r.route(
            Verb::Post,
            "/diaries/search",
            "searchEntries",
            "MoltNet: full-text search with filters and excludeSuperseded",
            search,
        )
        .calls("SearchEntries")
        .status(404, "Diary not found or access denied")
        .status(
            400,
            "Invalid; also a query with no word to search for (no letter or digit)",
        )
        .tool("entries_search", "Full-text search over readable entries"),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    fn tags_query(raw: &str) -> TagsQuery {
        crate::forward::parse_repeated(Some(raw)).unwrap()
    }

    #[test]
    fn tag_query_parameters() {
        let q = tags_query("entryTypes=semantic,episodic&entryTypes=soul&minCount=2&prefix=a%25_");
        assert_eq!(q.entry_types(), ["semantic", "episodic", "soul"]);
        assert_eq!(q.min_count(), Some(2));
        assert_eq!(q.prefix.as_deref(), Some("a%_"));
        assert_eq!(tags_query("").min_count(), None);
        for (raw, expected) in [
            ("minCount=abc", 0),
            ("minCount=1.5", 0),
            ("minCount=", 0),
            ("minCount=-3", -3),
            ("minCount=99999999999999999999", i64::MAX),
        ] {
            assert_eq!(tags_query(raw).min_count(), Some(expected), "{raw}");
        }
    }

    #[test]
    fn bodies_are_in_moltnets_order() {
        assert_sorted(&DiaryBody::from(pb::Diary {
            owner_public_key: "ed25519:k".into(),
            ..Default::default()
        }));
        assert_sorted(&DiaryBody::from(pb::Diary::default()));
        assert_sorted(&ShareBody::from(pb::DiaryShare::default()));
        assert_sorted(&Tags {
            tags: vec![TagCount {
                count: 2,
                tag: "t".into(),
            }],
            total: 1,
        });
    }
}

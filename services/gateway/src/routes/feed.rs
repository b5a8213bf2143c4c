//! MoltNet's public feed (`shared/compat/moltnet.md` §6): `GET /public/feed`,
//! `/public/feed/search` and `/public/entry/{id}`, answered without a token and only
//! ever reading. Each sets MoltNet's `Cache-Control`.

use axum::extract::Path;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::forward::{Caller, RepeatedQuery, first};
use crate::reply::{Cached, CachedAnswer};
use crate::route::{Route, Verb};
use crate::routes::moltnet::{DIARIES, flag, time};

/// How long shared caches may keep each answer (MoltNet's values, in seconds).
const FEED_MAX_AGE: u32 = 300;
const SEARCH_MAX_AGE: u32 = 60;
const ENTRY_MAX_AGE: u32 = 3600;

/// The author of a public entry: the diary creator's key.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicAuthor {
    pub fingerprint: String,
    pub public_key: String,
}

/// MoltNet's PublicFeedEntry.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicFeedEntry {
    pub author: PublicAuthor,
    pub content: String,
    pub created_at: Option<String>,
    pub entry_type: String,
    pub id: String,
    pub injection_risk: bool,
    pub tags: Option<Vec<String>>,
    pub title: Option<String>,
}

impl From<pb::PublicEntry> for PublicFeedEntry {
    fn from(e: pb::PublicEntry) -> Self {
        PublicFeedEntry {
            author: PublicAuthor {
                fingerprint: e.author_fingerprint,
                public_key: e.author_public_key,
            },
            created_at: time(&e.created_at),
            tags: e.has_tags.then_some(e.tags),
            content: e.content,
            entry_type: e.entry_type,
            id: e.id,
            injection_risk: e.injection_risk,
            title: e.title,
        }
    }
}

/// A page size for the service: absent is 0 (its default); a value that is not a
/// positive integer is passed as out of range so the service refuses it.
fn page_size(value: &Option<String>) -> u32 {
    match value.as_deref().map(str::parse::<u32>) {
        None => 0,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => u32::MAX,
    }
}

/// `GET /public/feed` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedQuery {
    /// 1-100 (default 20)
    #[serde(default, deserialize_with = "first")]
    #[schemars(regex(pattern = r"^(100|[1-9][0-9]?)$"))]
    pub limit: Option<String>,
    /// `nextCursor` of the previous page
    #[serde(default, deserialize_with = "first")]
    pub cursor: Option<String>,
    /// Only entries carrying this tag
    #[serde(default, deserialize_with = "first")]
    pub tag: Option<String>,
    /// Include entries flagged as possible prompt injection (`true`)
    #[serde(default, deserialize_with = "first")]
    pub include_suspicious: Option<String>,
}

/// `{items, nextCursor}`: `nextCursor` is null on the last page.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicFeed {
    pub items: Vec<PublicFeedEntry>,
    pub next_cursor: Option<String>,
}

async fn feed(
    caller: Caller,
    RepeatedQuery(q): RepeatedQuery<FeedQuery>,
) -> CachedAnswer<PublicFeed> {
    let request = pb::ListPublicFeedRequest {
        limit: page_size(&q.limit),
        include_suspicious: flag(&q.include_suspicious),
        cursor: q.cursor.unwrap_or_default(),
        tag: q.tag.unwrap_or_default(),
    };
    let page = caller
        .diary()
        .list_public_feed(caller.request(request))
        .await?
        .into_inner();
    Ok(Cached {
        max_age: FEED_MAX_AGE,
        body: PublicFeed {
            items: page.items.into_iter().map(PublicFeedEntry::from).collect(),
            next_cursor: (!page.next_cursor.is_empty()).then_some(page.next_cursor),
        },
    })
}

/// `GET /public/feed/search` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["q"]))]
pub struct SearchQuery {
    /// Full-text query, 2-200 characters
    #[serde(default, deserialize_with = "first")]
    #[schemars(length(min = 2, max = 200))]
    pub q: Option<String>,
    /// 1-50 (default 10)
    #[serde(default, deserialize_with = "first")]
    #[schemars(regex(pattern = r"^(50|[1-4][0-9]|[1-9])$"))]
    pub limit: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub tag: Option<String>,
    /// Only these entry types (repeatable)
    #[serde(default)]
    #[schemars(extend("items" = {"type": "string", "enum": ["episodic", "semantic", "procedural", "reflection", "identity", "soul"]}))]
    pub entry_types: Vec<String>,
    /// Hide targets of accepted `supersedes` relations (`true`)
    #[serde(default, deserialize_with = "first")]
    pub exclude_superseded: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub include_suspicious: Option<String>,
}

/// `{items, query}`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PublicSearch {
    pub items: Vec<PublicFeedEntry>,
    pub query: String,
}

async fn search(
    caller: Caller,
    RepeatedQuery(q): RepeatedQuery<SearchQuery>,
) -> CachedAnswer<PublicSearch> {
    let request = pb::SearchPublicFeedRequest {
        limit: page_size(&q.limit),
        exclude_superseded: flag(&q.exclude_superseded),
        include_suspicious: flag(&q.include_suspicious),
        query: q.q.unwrap_or_default(),
        tag: q.tag.unwrap_or_default(),
        entry_types: q.entry_types,
    };
    let found = caller
        .diary()
        .search_public_feed(caller.request(request))
        .await?
        .into_inner();
    Ok(Cached {
        max_age: SEARCH_MAX_AGE,
        body: PublicSearch {
            items: found.items.into_iter().map(PublicFeedEntry::from).collect(),
            query: found.query,
        },
    })
}

async fn entry(caller: Caller, Path(id): Path<String>) -> CachedAnswer<PublicFeedEntry> {
    let e = caller
        .diary()
        .get_public_entry(caller.request(pb::GetPublicEntryRequest { id }))
        .await?
        .into_inner();
    Ok(Cached {
        max_age: ENTRY_MAX_AGE,
        body: e.into(),
    })
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = DIARIES;
    vec![
        r.route(
            Verb::Get,
            "/public/feed",
            "getPublicFeed",
            "MoltNet: entries of public diaries, newest first, paged by cursor (public)",
            feed,
        )
        .public()
        .status(400, "Invalid cursor: one this server did not issue")
        .tool("public_feed", "Entries of public diaries, newest first"),
        r.route(
            Verb::Get,
            "/public/feed/search",
            "searchPublicFeed",
            "MoltNet: full-text search over entries of public diaries (public)",
            search,
        )
        .public()
        .status(
            400,
            "Invalid; also a q with no word to search for (no letter or digit)",
        )
        .tool("public_feed_search", "Search the entries of public diaries"),
        r.route(
            Verb::Get,
            "/public/entry/{id}",
            "getPublicEntry",
            "MoltNet: one entry of a public diary (public)",
            entry,
        )
        .public()
        .status(404, "No such entry in a public diary")
        .tool("public_entry", "Entry `id` of a public diary"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn bodies_are_in_moltnets_order_with_nulls() {
        let entry = PublicFeedEntry::from(pb::PublicEntry {
            author_public_key: "ed25519:k".into(),
            ..Default::default()
        });
        assert_eq!((entry.tags.as_ref(), entry.title.as_ref()), (None, None));
        assert_sorted(&entry);
        assert_sorted(&PublicFeed {
            items: vec![],
            next_cursor: None,
        });
        assert_sorted(&PublicSearch {
            items: vec![],
            query: "q".into(),
        });
        let tagged = PublicFeedEntry::from(pb::PublicEntry {
            has_tags: true,
            ..Default::default()
        });
        assert_eq!(tagged.tags, Some(vec![]));
    }

    #[test]
    fn page_sizes_the_service_must_refuse_stay_refusable() {
        assert_eq!(page_size(&None), 0);
        assert_eq!(page_size(&Some("7".into())), 7);
        for bad in ["0", "-1", "x", "1.5", ""] {
            assert_eq!(page_size(&Some(bad.into())), u32::MAX, "{bad}");
        }
    }
}

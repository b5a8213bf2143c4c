//! MoltNet's public feed (`shared/compat/moltnet.md` §6): entries of `public` diaries,
//! readable without a token, newest first, paged by an opaque keyset cursor.
//!
//! The cursor is MoltNet's: base64url of `{"c": <createdAt>, "i": <entry id>}`. Where
//! MoltNet writes `createdAt` at millisecond precision (and so skips entries created in the
//! same millisecond as a page's last one, after it), `c` here carries the stored timestamp
//! at full precision, still an ISO 8601 string, so every entry is walked exactly once.

use data_encoding::BASE64URL_NOPAD;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use super::entry::{EntryType, MAX_TAG_CHARS, type_filters};
use super::input;
use crate::error::IdentityError;

/// Feed page size: MoltNet's 1-100, 20 by default.
pub const FEED_DEFAULT_LIMIT: u32 = 20;
pub const FEED_MAX_LIMIT: u32 = 100;
/// Feed search: 1-50 results, 10 by default; the query 2-200 characters.
pub const SEARCH_DEFAULT_LIMIT: u32 = 10;
pub const SEARCH_MAX_LIMIT: u32 = 50;
pub const SEARCH_MIN_QUERY_CHARS: usize = 2;
pub const SEARCH_MAX_QUERY_CHARS: usize = 200;

/// MoltNet's message for a cursor it cannot read.
pub const INVALID_CURSOR: &str = "Invalid cursor";
/// MoltNet's answer for a missing entry or one outside a public diary.
pub const ENTRY_NOT_FOUND: &str = "Entry not found";

/// A position in the feed: entries strictly older than it (by created_at, then id) follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: OffsetDateTime,
    pub id: String,
}

impl Cursor {
    /// The opaque text handed to clients.
    pub fn encode(&self) -> String {
        let c = noema_core::time::rfc3339(self.created_at);
        BASE64URL_NOPAD.encode(json!({"c": c, "i": self.id}).to_string().as_bytes())
    }

    /// Reads a cursor this service (or MoltNet) wrote; anything else is `Invalid cursor`.
    pub fn decode(text: &str) -> Result<Cursor, IdentityError> {
        let invalid = || IdentityError::InvalidArgument(INVALID_CURSOR.into());
        let bytes = BASE64URL_NOPAD
            .decode(text.trim_end_matches('=').as_bytes())
            .map_err(|_| invalid())?;
        let json: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        let (Some(c), Some(i)) = (json["c"].as_str(), json["i"].as_str()) else {
            return Err(invalid());
        };
        let created_at = noema_core::time::parse_rfc3339(c).ok_or_else(invalid)?;
        let id = (i.len() == 36)
            .then(|| Uuid::try_parse(i).ok())
            .flatten()
            .ok_or_else(invalid)?;
        Ok(Cursor {
            created_at,
            id: id.hyphenated().to_string(),
        })
    }
}

/// An entry as the public feed shows it: no diary, no signature, its author being the
/// diary's creator (an agent with a registered key; diaries of others are not in the feed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicEntry {
    pub id: String,
    pub title: Option<String>,
    pub content: String,
    pub tags: Option<Vec<String>>,
    pub injection_risk: bool,
    pub entry_type: EntryType,
    pub created_at: OffsetDateTime,
    pub author_public_key: String,
}

/// A page of the feed and the cursor of the next one, if there are more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedPage {
    pub items: Vec<PublicEntry>,
    pub next: Option<Cursor>,
}

/// The page from `limit + 1` rows fetched: the extra row only says that more follow.
pub fn page(mut rows: Vec<PublicEntry>, limit: u32) -> FeedPage {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next = more.then(|| rows.last()).flatten().map(|last| Cursor {
        created_at: last.created_at,
        id: last.id.clone(),
    });
    FeedPage { items: rows, next }
}

/// A checked feed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedQuery {
    pub limit: u32,
    pub after: Option<Cursor>,
    pub tag: Option<String>,
    pub include_suspicious: bool,
}

/// Checks a feed request: limit 1-100 (0 is the default), a readable cursor, a tag of at
/// most MoltNet's tag length.
pub fn feed_query(
    limit: u32,
    cursor: &str,
    tag: &str,
    include_suspicious: bool,
) -> Result<FeedQuery, IdentityError> {
    let limit = input::limit("limit", limit, FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT)?;
    let after = (!cursor.is_empty())
        .then(|| Cursor::decode(cursor))
        .transpose()?;
    Ok(FeedQuery {
        limit,
        after,
        tag: tag_filter(tag)?,
        include_suspicious,
    })
}

fn tag_filter(tag: &str) -> Result<Option<String>, IdentityError> {
    if tag.chars().count() > MAX_TAG_CHARS {
        return Err(IdentityError::InvalidArgument(format!(
            "tag must be at most {MAX_TAG_CHARS} characters"
        )));
    }
    Ok((!tag.is_empty()).then(|| tag.to_owned()))
}

/// A checked public search request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub query: String,
    pub limit: u32,
    pub tag: Option<String>,
    pub entry_types: Vec<String>,
    pub exclude_superseded: bool,
    pub include_suspicious: bool,
}

/// Checks a public search: `q` 2-200 characters with a word to search for, limit 1-50.
pub fn search_query(
    query: &str,
    limit: u32,
    tag: &str,
    entry_types: &[String],
    exclude_superseded: bool,
    include_suspicious: bool,
) -> Result<SearchQuery, IdentityError> {
    let chars = query.chars().count();
    if !(SEARCH_MIN_QUERY_CHARS..=SEARCH_MAX_QUERY_CHARS).contains(&chars) {
        return Err(IdentityError::InvalidArgument(format!(
            "q must be {SEARCH_MIN_QUERY_CHARS}-{SEARCH_MAX_QUERY_CHARS} characters"
        )));
    }
    let query = super::search::validate_query(query)?.ok_or_else(|| {
        IdentityError::InvalidArgument("q has no words to search for (letters or digits)".into())
    })?;
    Ok(SearchQuery {
        query,
        limit: input::limit("limit", limit, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT)?,
        tag: tag_filter(tag)?,
        entry_types: type_filters(entry_types)?,
        exclude_superseded,
        include_suspicious,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ID: &str = "0b7f3c1e-5d2a-4c8e-9f10-2a3b4c5d6e7f";

    #[test]
    fn cursors_round_trip_at_full_precision() {
        let at =
            OffsetDateTime::UNIX_EPOCH + time::Duration::nanoseconds(1_700_000_000_123_456_789);
        let cursor = Cursor {
            created_at: at,
            id: ID.into(),
        };
        let text = cursor.encode();
        assert!(!text.contains('=') && !text.contains('+') && !text.contains('/'));
        assert_eq!(Cursor::decode(&text).unwrap(), cursor);
        let json = String::from_utf8(BASE64URL_NOPAD.decode(text.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            json,
            format!("{{\"c\":\"2023-11-14T22:13:20.123456789Z\",\"i\":\"{ID}\"}}")
        );
    }

    #[test]
    fn moltnets_own_cursors_are_read() {
        let json = format!(
            "{{\"c\":\"2026-04-14T18:20:43.005Z\",\"i\":\"{}\"}}",
            ID.to_uppercase()
        );
        let padded = data_encoding::BASE64URL.encode(json.as_bytes());
        let cursor = Cursor::decode(&padded).unwrap();
        assert_eq!(cursor.id, ID);
        assert_eq!(cursor.created_at.millisecond(), 5);
    }

    #[test]
    fn unreadable_cursors_are_invalid() {
        let b64 = |s: &str| BASE64URL_NOPAD.encode(s.as_bytes());
        for bad in [
            "not base64!".to_owned(),
            b64("not json"),
            b64("{\"c\":\"yesterday\",\"i\":\"0b7f3c1e-5d2a-4c8e-9f10-2a3b4c5d6e7f\"}"),
            b64("{\"c\":\"2026-04-14T18:20:43.005Z\",\"i\":\"entry-1\"}"),
            b64("{\"c\":\"2026-04-14T18:20:43.005Z\"}"),
            b64("[1,2]"),
        ] {
            let err = Cursor::decode(&bad).unwrap_err();
            assert_eq!(err.to_string(), INVALID_CURSOR, "{bad}");
        }
    }

    #[test]
    fn a_page_has_a_cursor_only_when_more_follow() {
        let entry = |n: i64| PublicEntry {
            id: format!("00000000-0000-4000-8000-{n:012}"),
            title: None,
            content: "c".into(),
            tags: None,
            injection_risk: false,
            entry_type: EntryType::Semantic,
            created_at: OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(100 - n),
            author_public_key: "k".into(),
        };
        let full = page((0..3).map(entry).collect(), 2);
        assert_eq!(full.items.len(), 2);
        let next = full.next.unwrap();
        assert_eq!(
            (next.id, next.created_at),
            (entry(1).id, entry(1).created_at)
        );
        let last = page((0..2).map(entry).collect(), 2);
        assert_eq!((last.items.len(), last.next), (2, None));
        assert_eq!(page(Vec::new(), 2).next, None);
    }

    #[test]
    fn feed_and_search_limits() {
        let q = feed_query(0, "", "", false).unwrap();
        assert_eq!((q.limit, q.after, q.tag), (20, None, None));
        assert!(feed_query(101, "", "", false).is_err());
        assert!(feed_query(1, "", &"t".repeat(MAX_TAG_CHARS + 1), false).is_err());
        let s = search_query("hello", 0, "", &[], false, false).unwrap();
        assert_eq!((s.limit, s.query.as_str()), (10, "hello"));
        assert!(search_query("h", 0, "", &[], false, false).is_err());
        assert!(search_query(&"h".repeat(201), 0, "", &[], false, false).is_err());
        assert!(search_query("--", 0, "", &[], false, false).is_err());
        assert!(search_query("hello", 51, "", &[], false, false).is_err());
        assert!(search_query("hello", 5, "", &["memo".into()], false, false).is_err());
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_cursor_text_is_read_or_invalid(text in proptest::prelude::any::<String>()) {
            if let Err(err) = Cursor::decode(&text) {
                proptest::prop_assert_eq!(err.to_string(), INVALID_CURSOR);
            }
        }

        #[test]
        fn base64_of_any_json_is_read_or_invalid(
            c in "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,12})?(Z|[+-][0-9]{2}:[0-9]{2})",
            i in "[0-9a-fA-F-]{30,40}",
            padded in proptest::prelude::any::<bool>(),
        ) {
            let json = json!({"c": c, "i": i}).to_string();
            let text = if padded {
                data_encoding::BASE64URL.encode(json.as_bytes())
            } else {
                BASE64URL_NOPAD.encode(json.as_bytes())
            };
            if let Ok(cursor) = Cursor::decode(&text) {
                proptest::prop_assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
            }
        }

        #[test]
        fn cursors_round_trip(
            nanos in -62_135_596_800_000_000_000i128..253_402_300_799_000_000_000,
            id in proptest::prelude::any::<u128>(),
        ) {
            let cursor = Cursor {
                created_at: OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap(),
                id: Uuid::from_u128(id).hyphenated().to_string(),
            };
            proptest::prop_assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        }
    }
}

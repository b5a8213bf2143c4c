//! Context snapshots (`POST /v1/context/snapshot`, `GET /v1/context/snapshot/{id}`): the
//! original's snapshot document (task, core memory, evidence items, open questions,
//! provenance), stored immutably as the original writes it (its key order) and addressed by
//! the sha256 of its canonical JSON (RFC 8785) bytes, which no key order changes, so a later
//! session reads exactly what an earlier one saw and can check it.
//!
//! The original keeps snapshots as files in its git repository and can build one "as of" a
//! commit or a time. Noema's stores keep no file history, so only `working_tree` (now) is
//! served; the other modes answer the original's refusals for a ref that does not resolve.

use noema_core::content_id::ContentId;
use time::OffsetDateTime;

use crate::domain::error::ContinuityError;
use crate::domain::json::{Json, JsonObject, to_py_json};
use crate::domain::timestamp::{format_compact, format_iso};

use super::bundle::{MemoryDocument, snippet_text};
use super::request::SnapshotRequest;

/// Where the original keeps snapshots (its `path` in the create answer).
pub const SNAPSHOT_DIR: &str = "snapshots/context";
/// The snapshot document's schema version.
const SCHEMA_VERSION: &str = "1.0";
/// Core memory snippets in a snapshot (characters, whitespace collapsed).
const CORE_SNIPPET_CHARS: usize = 300;

/// A snapshot ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSnapshot {
    pub snapshot_id: String,
    pub path: String,
    pub created_at: String,
    /// The document as the original writes it (compact, its key order): what is stored and
    /// read back.
    pub body: Vec<u8>,
    /// `sha256:<hex>` of the document's canonical JSON bytes.
    pub content_id: String,
    pub as_of: Json,
    pub item_count: usize,
}

/// `_resolve_as_of_ref`: `working_tree` is served; `commit`/`timestamp` need a value and then
/// name history this store does not keep.
pub fn resolve_as_of(mode: &str, value: Option<&str>) -> Result<Json, ContinuityError> {
    let value = value.filter(|v| !v.is_empty());
    match (mode, value) {
        ("working_tree", _) => {
            let mut as_of = JsonObject::new();
            as_of.insert("mode", Json::from("working_tree"));
            as_of.insert("value", Json::Null);
            Ok(Json::Object(as_of))
        }
        ("commit", None) => Err(ContinuityError::invalid(
            "as_of.value is required for mode=commit",
        )),
        ("commit", Some(v)) => Err(ContinuityError::invalid(format!("Invalid commit ref: {v}"))),
        ("timestamp", None) => Err(ContinuityError::invalid(
            "as_of.value is required for mode=timestamp",
        )),
        ("timestamp", Some(v)) => Err(ContinuityError::not_found(format!(
            "No commit found before timestamp: {v}"
        ))),
        (other, _) => Err(ContinuityError::invalid(format!(
            "Unsupported as_of.mode: {other}"
        ))),
    }
}

/// Core memory as a snapshot lists it: whitespace-collapsed 300-character snippets.
pub fn snapshot_core_memory(documents: &[MemoryDocument]) -> Json {
    Json::Array(
        documents
            .iter()
            .map(|d| {
                let mut entry = JsonObject::new();
                entry.insert("path", Json::from(d.path.as_str()));
                entry.insert(
                    "snippet",
                    Json::String(snippet_text(&d.text, CORE_SNIPPET_CHARS)),
                );
                Json::Object(entry)
            })
            .collect(),
    )
}

/// Builds the snapshot document. Its id is `snap_<YYYYMMDDTHHMMSSZ>_<8 hex>`, the hex being
/// the start of the sha256 of the document's canonical bytes without the id (the original
/// takes 8 random hex digits), so the same content at the same second is the same snapshot.
pub fn new_snapshot(
    request: &SnapshotRequest,
    as_of: Json,
    now: OffsetDateTime,
    core_memory: Json,
    items: Vec<Json>,
    service_version: &str,
) -> Result<NewSnapshot, ContinuityError> {
    let open_questions: Vec<Json> = items
        .iter()
        .take(10)
        .filter_map(|row| row.get("snippet").and_then(Json::as_str))
        .filter(|s| s.contains('?'))
        .take(5)
        .map(Json::from)
        .collect();
    let item_count = items.len();
    let created_at = format_iso(now);
    let mut filters = JsonObject::new();
    filters.insert(
        "include_types",
        Json::Array(
            request
                .include_types
                .iter()
                .map(|t| Json::from(t.as_str()))
                .collect(),
        ),
    );
    filters.insert("limit", Json::from(request.limit));
    filters.insert("include_core", Json::Bool(request.include_core));
    let mut provenance = JsonObject::new();
    provenance.insert("source", Json::from("context_snapshot_create"));
    provenance.insert("service_version", Json::from(service_version));

    let mut document = JsonObject::new();
    document.insert("schema_version", Json::from(SCHEMA_VERSION));
    document.insert("snapshot_id", Json::Null);
    document.insert("task", Json::from(request.task.as_str()));
    document.insert("created_at", Json::from(created_at.as_str()));
    document.insert("as_of", as_of.clone());
    document.insert("filters", Json::Object(filters));
    document.insert(
        "core_memory",
        if request.include_core {
            core_memory
        } else {
            Json::Array(vec![])
        },
    );
    document.insert("items", Json::Array(items));
    document.insert("open_questions", Json::Array(open_questions));
    document.insert("provenance", Json::Object(provenance));

    let unnamed = canonical(&Json::Object(document.clone()))?;
    let digest = ContentId::of_bytes(&unnamed);
    let snapshot_id = format!("snap_{}_{}", format_compact(now), &digest.hex()[..8]);
    document.insert("snapshot_id", Json::from(snapshot_id.as_str()));
    let document = Json::Object(document);
    let content_id = ContentId::of_bytes(&canonical(&document)?).into_string();
    let body = to_py_json(&document).into_bytes();
    Ok(NewSnapshot {
        path: format!("{SNAPSHOT_DIR}/{snapshot_id}.json"),
        snapshot_id,
        created_at,
        body,
        content_id,
        as_of,
        item_count,
    })
}

fn canonical(value: &Json) -> Result<Vec<u8>, ContinuityError> {
    noema_core::jcs::canonicalize(&value.to_value()).map_err(|err| ContinuityError::Unhandled {
        code: "ValueError".to_owned(),
        detail: err.to_string(),
    })
}

/// The create answer: `{ok, snapshot_id, path, as_of, item_count, committed, latest_commit}`
/// plus the snapshot's `content_id` (Noema's addition; there is no git commit, so
/// `committed` is whether it was stored now and `latest_commit` is null).
pub fn create_response(snapshot: &NewSnapshot, committed: bool) -> Json {
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("snapshot_id", Json::from(snapshot.snapshot_id.as_str()));
    body.insert("path", Json::from(snapshot.path.as_str()));
    body.insert("as_of", snapshot.as_of.clone());
    body.insert("item_count", Json::from(snapshot.item_count));
    body.insert("committed", Json::Bool(committed));
    body.insert("latest_commit", Json::Null);
    body.insert("content_id", Json::from(snapshot.content_id.as_str()));
    Json::Object(body)
}

/// The read answer `{"ok":true,"snapshot":<the stored bytes>}`, the snapshot exactly as
/// stored. A body whose canonical bytes no longer match its content id is refused (500),
/// never served. (Snapshots stored before the original's key order was kept are their
/// canonical bytes themselves, which this check accepts too.)
pub fn read_response(content_id: &str, body: &[u8]) -> Result<Vec<u8>, ContinuityError> {
    let canonical_bytes = Json::parse(body)
        .ok()
        .and_then(|document| canonical(&document).ok());
    let matches = ContentId::parse_normalizing(content_id)
        .ok()
        .zip(canonical_bytes)
        .is_some_and(|(id, bytes)| id.matches(&bytes));
    if !matches {
        return Err(ContinuityError::Unhandled {
            code: "SnapshotIntegrityError".to_owned(),
            detail: "Failed to parse snapshot: content does not match its content id".to_owned(),
        });
    }
    let mut out = Vec::with_capacity(body.len() + 24);
    out.extend_from_slice(br#"{"ok":true,"snapshot":"#);
    out.extend_from_slice(body);
    out.push(b'}');
    Ok(out)
}

/// `Snapshot not found: <id>` (404); ids are checked before use as in the original's path
/// rule (a plain name, no separators).
pub fn check_snapshot_id(snapshot_id: &str) -> Result<(), ContinuityError> {
    let plain = !snapshot_id.is_empty()
        && snapshot_id.len() <= 200
        && snapshot_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !snapshot_id.starts_with('.');
    if plain {
        Ok(())
    } else {
        Err(ContinuityError::not_found(format!(
            "Snapshot not found: {snapshot_id}"
        )))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn request() -> SnapshotRequest {
        SnapshotRequest::from_json(&Json::parse(br#"{"task":"why?"}"#).unwrap()).unwrap()
    }

    #[test]
    fn the_same_content_at_the_same_second_is_the_same_snapshot() {
        let now = time::macros::datetime!(2026-01-02 03:04:05 UTC);
        let a = new_snapshot(
            &request(),
            resolve_as_of("working_tree", None).unwrap(),
            now,
            Json::Array(vec![]),
            vec![],
            "1",
        )
        .unwrap();
        let b = new_snapshot(
            &request(),
            resolve_as_of("working_tree", None).unwrap(),
            now,
            Json::Array(vec![]),
            vec![],
            "1",
        )
        .unwrap();
        assert_eq!(a, b);
        assert!(a.snapshot_id.starts_with("snap_20260102T030405Z_"));
        // Addressed by its canonical bytes, stored and read in the original's key order.
        let document = Json::parse(&a.body).unwrap();
        assert_eq!(
            a.content_id,
            ContentId::of_bytes(&canonical(&document).unwrap()).into_string()
        );
        let read = read_response(&a.content_id, &a.body).unwrap();
        let expected = format!(
            r#"{{"ok":true,"snapshot":{{"schema_version":"1.0","snapshot_id":"{}","task":"why?","created_at":"2026-01-02T03:04:05Z","as_of":{{"mode":"working_tree","value":null}},"filters":{{"include_types":[],"limit":20,"include_core":true}},"core_memory":[],"items":[],"open_questions":[],"provenance":{{"source":"context_snapshot_create","service_version":"1"}}}}}}"#,
            a.snapshot_id
        );
        assert_eq!(String::from_utf8(read).unwrap(), expected);
        // The canonical bytes (how earlier snapshots were stored) read back too.
        let canonical_body = canonical(&document).unwrap();
        assert!(read_response(&a.content_id, &canonical_body).is_ok());
        assert!(read_response(&a.content_id, b"{}").is_err());
        assert!(read_response(&a.content_id, b"not json").is_err());
    }

    #[test]
    fn history_modes_answer_the_originals_refusals() {
        assert_eq!(
            resolve_as_of("commit", None).unwrap_err(),
            ContinuityError::invalid("as_of.value is required for mode=commit")
        );
        assert_eq!(
            resolve_as_of("timestamp", Some("2026-01-01")).unwrap_err(),
            ContinuityError::not_found("No commit found before timestamp: 2026-01-01")
        );
    }
}

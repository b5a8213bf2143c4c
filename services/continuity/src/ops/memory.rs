//! Memory files and search (CogniRelay's `/v1/write`, `/v1/read`, `/v1/append`, `/v1/search`,
//! `/v1/recent`, `/v1/index/*`): each checks the request, the caller's scope and namespaces
//! in the original's order, then reads or writes the caller's tenant only.

use serde_json::json;

use super::{Continuity, audit, bytes_of, now};
use crate::domain::access::{Caller, INDEX, Need, READ};
use crate::domain::error::ContinuityError;
use crate::domain::json::{Json, canonical_json};
use crate::domain::memory::{
    self, AppendRequest, Hit, MAX_PAYLOAD_BYTES, RecentRequest, SearchRequest, WriteRequest,
};
use crate::domain::request::parse_body;
use crate::domain::subject::SubjectKey;
use crate::domain::write::fallback_envelope;
use crate::error::Error;
use crate::store::{HitQuery, HitRow, MemoryChange, MemoryWrite};

/// Search and recency listings (`search`).
const SEARCH: Need = Need {
    noema: "continuity:read",
    cognirelay: "search",
};

/// The original's 413 when `payload` (its canonical JSON) is over the limit.
fn payload_limit(payload: &serde_json::Value, label: &str) -> Result<(), ContinuityError> {
    let size = canonical_json(payload).len();
    if size > MAX_PAYLOAD_BYTES {
        return Err(ContinuityError::TooLarge(format!(
            "Payload too large for {label}: {size} bytes > limit {MAX_PAYLOAD_BYTES}"
        )));
    }
    Ok(())
}

/// The write scope of `path`: the original's (`write:journal`, `write:messages`,
/// `write:projects`) or Noema's `continuity:write`.
fn write_need(path: &str) -> Need {
    Need {
        noema: "continuity:write",
        cognirelay: memory::scope_for_path(path),
    }
}

/// The namespaces a caller may read, for filtering hits (`None`: all).
fn readable(caller: &Caller) -> Option<Vec<String>> {
    let p = &caller.principal;
    if p.superuser || p.read_namespaces.iter().any(|ns| ns == "*") {
        None
    } else {
        Some(p.read_namespaces.clone())
    }
}

pub(super) fn hit(row: HitRow, searching: bool) -> Hit {
    let score = if searching {
        Some(memory::relevance_score(row.relevance, row.importance))
    } else {
        row.importance
    };
    Hit {
        tags: serde_json::from_str(&row.tags).unwrap_or_default(),
        path: row.path,
        doc_type: row.doc_type,
        size: row.size,
        modified_at: row.modified_at,
        snippet: row.snippet,
        importance: row.importance,
        score,
    }
}

impl Continuity {
    /// `POST /v1/write`.
    pub async fn write_file(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = WriteRequest::from_json(&parse_body(body)?)?;
        payload_limit(&json!({"path": req.path, "content": req.content}), "write")?;
        caller.require(write_need(&req.path))?;
        caller.require_write_path(&req.path)?;
        let path = memory::document_path(&req.path)?;
        let at = now();
        let draft = audit(
            caller,
            "memory.write",
            &path,
            json!({"path": path, "bytes": req.content.len()}),
        );
        let written = self
            .store()
            .memory_write(MemoryWrite {
                tenant: caller.tenant.clone(),
                path,
                change: MemoryChange::Replace(req.content),
                at,
                audit: draft,
            })
            .await?;
        Ok(bytes_of(&memory::written_body(
            &req.path,
            written.committed,
            &written.revision_id,
        )))
    }

    /// `POST /v1/append`: one JSON line at the end of the document.
    pub async fn append_record(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = AppendRequest::from_json(&parse_body(body)?)?;
        payload_limit(
            &json!({"path": req.path, "record": req.record.to_value()}),
            "append",
        )?;
        caller.require(write_need(&req.path))?;
        caller.require_write_path(&req.path)?;
        let path = memory::document_path(&req.path)?;
        let at = now();
        if let Some(refusal) = memory::journal_day_refusal(&path, at) {
            return Err(refusal.into());
        }
        let line = memory::jsonl_line(&req.record);
        let draft = audit(
            caller,
            "memory.append",
            &path,
            json!({"path": path, "bytes": line.len()}),
        );
        let written = self
            .store()
            .memory_write(MemoryWrite {
                tenant: caller.tenant.clone(),
                path,
                change: MemoryChange::Append(line),
                at,
                audit: draft,
            })
            .await?;
        Ok(bytes_of(&memory::written_body(
            &req.path,
            written.committed,
            &written.revision_id,
        )))
    }

    /// `GET /v1/read?path=…` (the query as `{"path": …}`).
    pub async fn read_file(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let requested = memory::read_path(&parse_body(body)?)?;
        caller.require(READ)?;
        caller.require_read_path(&requested)?;
        let normalized = crate::domain::text::posix_normpath(&requested);
        if let Some((subject, fallback)) = SubjectKey::of_capsule_file(&normalized) {
            let content = self
                .capsule_file(&caller.tenant, &subject, fallback)
                .await?
                .ok_or_else(|| ContinuityError::not_found("File not found"))?;
            return Ok(bytes_of(&memory::read_body(&requested, &content)));
        }
        let path = memory::document_path(&requested).map_err(|err| {
            // A managed path or a top-level directory is no document: it is not found, as
            // any other missing file (the original checks `is_file()`).
            if memory::holds_no_document(&normalized) {
                ContinuityError::not_found("File not found")
            } else {
                err
            }
        })?;
        let document = self
            .store()
            .memory_document(&caller.tenant, &path)
            .await?
            .ok_or_else(|| ContinuityError::not_found("File not found"))?;
        Ok(bytes_of(&memory::read_body(&requested, &document.content)))
    }

    /// The text of a subject's capsule file as the original keeps it: the active capsule's
    /// canonical JSON, or the fallback snapshot's envelope; `None` when there is none.
    async fn capsule_file(
        &self,
        tenant: &str,
        subject: &SubjectKey,
        fallback: bool,
    ) -> Result<Option<String>, Error> {
        let Some(row) = self.store().subject(tenant, subject).await? else {
            return Ok(None);
        };
        if !fallback {
            return Ok(row
                .active
                .as_ref()
                .map(|active| String::from_utf8_lossy(&active.capsule).into_owned()));
        }
        let Some((sequence, _)) = row.fallback.clone() else {
            return Ok(None);
        };
        let key = (row.subject_kind.clone(), row.subject_key.clone(), sequence);
        let stored = self.store().revisions(tenant, &[key]).await?;
        Ok(stored.first().and_then(|(_, _, revision)| {
            self.capsule(&revision.revision_id, &revision.capsule)
                .map(|capsule| {
                    canonical_json(&fallback_envelope(&capsule, &subject.active_path(), now()))
                })
        }))
    }

    /// `POST /v1/search`: the query's terms, any of them; best match first (or newest).
    pub async fn search(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = SearchRequest::from_json(&parse_body(body)?)?;
        caller.require(SEARCH)?;
        let terms = memory::query_terms(&req.query);
        let hits = if terms.is_empty() {
            Vec::new()
        } else {
            let q = HitQuery {
                terms,
                types: memory::type_filter(&req.include_types),
                since_micros: memory::window_start(now(), req.time_window_hours, None),
                by_recency: req.by_recency(),
                limit: req.limit,
                namespaces: readable(caller),
            };
            let mut hits: Vec<Hit> = self
                .store()
                .memory_hits(&caller.tenant, &q)
                .await?
                .into_iter()
                .map(|row| hit(row, true))
                .collect();
            if !q.by_recency {
                memory::rank_by_score(&mut hits);
            }
            hits
        };
        Ok(bytes_of(&memory::search_body(
            &req.query,
            &req.sort_by,
            &hits,
        )))
    }

    /// `POST /v1/recent`: the most recently changed documents, newest first.
    pub async fn recent(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = RecentRequest::from_json(&parse_body(body)?)?;
        caller.require(SEARCH)?;
        let q = HitQuery {
            terms: Vec::new(),
            types: memory::type_filter(&req.include_types),
            since_micros: memory::window_start(now(), req.time_window_hours, req.time_window_days),
            by_recency: true,
            limit: req.limit,
            namespaces: readable(caller),
        };
        let hits: Vec<Hit> = self
            .store()
            .memory_hits(&caller.tenant, &q)
            .await?
            .into_iter()
            .map(|row| hit(row, false))
            .collect();
        Ok(bytes_of(&memory::recent_body(&hits)))
    }

    /// `GET /v1/index/status`.
    pub async fn index_status(&self, caller: &Caller) -> Result<Vec<u8>, Error> {
        caller.require(INDEX)?;
        let state = self.store().memory_index_state(&caller.tenant).await?;
        let generated_at = state
            .latest
            .as_ref()
            .map(|(modified_at, _)| whole_seconds(modified_at));
        Ok(bytes_of(&memory::index_status_body(
            generated_at.as_deref(),
            state.file_count,
        )))
    }

    /// `POST /v1/index/rebuild-incremental` (and `/v1/index/rebuild`, whose body says
    /// `{"full": true}` and whose answer has no incremental counts): recovery. The index is
    /// written with every document, so this finds nothing to do unless index rows were lost
    /// or damaged; it then rewrites them from the documents.
    pub async fn index_rebuild(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let full = !body.is_empty()
            && parse_body(body)?
                .get("full")
                .is_some_and(|f| matches!(f, Json::Bool(true)));
        caller.require(INDEX)?;
        let at = now();
        let draft = audit(caller, "memory.index_rebuild", "index", json!({}));
        let counts = self
            .store()
            .memory_rebuild_index(&caller.tenant, draft, at)
            .await?;
        let state = self.store().memory_index_state(&caller.tenant).await?;
        Ok(bytes_of(&memory::rebuild_body(
            state.file_count,
            (!full).then_some(counts),
            state.latest.as_ref().map(|(_, revision)| revision.as_str()),
        )))
    }
}

/// `2026-11-25T22:40:25.501503Z` → `2026-11-25T22:40:25Z` (the original's `generated_at` has
/// whole seconds).
fn whole_seconds(iso: &str) -> String {
    match iso.split_once('.') {
        Some((seconds, _)) => format!("{seconds}Z"),
        None => iso.to_owned(),
    }
}

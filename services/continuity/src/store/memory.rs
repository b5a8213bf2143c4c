//! Memory documents and their full-text index (migration 0004).
//!
//! A document is one path of a tenant (`memory/core/identity.md`, …) with its content, its
//! revision id and what search shows of it (type, size, tags, importance, snippet, modified).
//! Every write updates the document *and* its index row in one audited transaction, so search
//! is never stale: FTS5 (`memory_fts`, rowid = document id) on SQLite, a `tsvector` row with a
//! GIN index (`memory_search`) on Postgres. Both index the path (weighted higher) and the whole
//! content with no stemming, so both engines find the same documents for the same terms.
//! An append (SQLite migration 0008, Postgres 0007) does not rewrite its document: its line is a row of
//! `memory_appends` (and of `memory_fts_lines` on SQLite; on Postgres its terms are added to
//! the document's vector), and the document's description is updated from the line alone, so
//! an append costs its line whatever the document's size. A document's content is its stored
//! content followed by its lines; a whole write folds them back.
//! On SQLite a search whose words are single tokens is answered from the tenant's in-memory
//! index of the stored term counts ([`super::memory_postings`]), ranked with FTS5's `bm25()`
//! over the tenant's own statistics; words FTS5 reads as phrases (`x-ray`) query `memory_fts`
//! and `memory_fts_lines`.
//! [`ContinuityStore::memory_rebuild_index`] is recovery: it rewrites index rows that are
//! missing or do not match their document and drops rows without one.

use std::collections::HashMap;
use std::sync::LazyLock;

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, query};
use noema_store::{Backend, Database, with_pool};
use time::OffsetDateTime;

use super::ContinuityStore;
use super::memory_postings::IndexChange;
use super::memory_terms::{self, CountedLine};
use super::writes::{Landed, Write};
use crate::domain::bm25;
use crate::domain::memory::{
    Description, RebuildCounts, appended_revision_id, describe, describe_appended, modified,
    revision_id,
};
use crate::error::Error;

/// A tenant's document.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct MemoryDocument {
    pub path: String,
    pub content: String,
    pub revision_id: String,
    pub doc_type: String,
    pub size: i64,
    pub importance: Option<f64>,
    /// JSON list of the document's `#tags`.
    pub tags: String,
    pub snippet: String,
    pub modified_at: String,
    pub modified_micros: i64,
}

/// What a write does to a document's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryChange {
    /// The whole content (`/v1/write`); writing the same content again changes nothing.
    Replace(String),
    /// One line added at the end (`/v1/append`), the document created if missing.
    Append(String),
}

/// One document write of a tenant, with its audit entry.
#[derive(Debug, Clone)]
pub struct MemoryWrite {
    pub tenant: String,
    /// The normalised path.
    pub path: String,
    pub change: MemoryChange,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A memory write as the group writer applies it: on SQLite an append's line counted
/// beforehand ([`memory_terms::LineCounter`]), away from the writer's serial path.
#[derive(Debug, Clone)]
pub struct PreparedMemoryWrite {
    pub(super) write: MemoryWrite,
    line: Option<CountedLine>,
}

/// The document's revision after a write, and whether the write changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryWritten {
    pub revision_id: String,
    pub committed: bool,
}

/// Which documents a search or recency listing returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HitQuery {
    /// Search terms, any of which makes a hit (empty: a recency listing, no matching).
    pub terms: Vec<String>,
    /// Lowercased document types to keep (empty: all).
    pub types: Vec<String>,
    /// Oldest modification kept, microseconds since the epoch.
    pub since_micros: Option<i64>,
    /// Newest first instead of best match first.
    pub by_recency: bool,
    pub limit: i64,
    /// Path namespaces the caller may read (`None`: all). A path is readable when it equals
    /// a namespace or lies under it.
    pub namespaces: Option<Vec<String>>,
}

/// A document as a hit: what search shows, and the engine's relevance (higher is better;
/// 0 for recency listings).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct HitRow {
    pub path: String,
    pub doc_type: String,
    pub size: i64,
    pub modified_at: String,
    pub modified_micros: i64,
    pub snippet: String,
    pub tags: String,
    pub importance: Option<f64>,
    pub relevance: f64,
}

/// A tenant's index at a glance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexState {
    pub file_count: i64,
    /// `modified_at` and revision of the most recently changed document.
    pub latest: Option<(String, String)>,
}

/// The whole content of the document row `table` names: its content as last written whole,
/// followed by the lines appended since.
fn whole_content(table: &str, backend: Backend) -> String {
    let lines = match backend {
        Backend::Sqlite => "group_concat(a.line, '' ORDER BY a.id)",
        Backend::Postgres => "string_agg(a.line, '' ORDER BY a.id)",
    };
    format!(
        "{table}.content || COALESCE((SELECT {lines} FROM memory_appends a \
         WHERE a.doc = {table}.id), '')"
    )
}

/// A document's columns, its whole content as `content`.
fn document_columns(backend: Backend) -> String {
    format!(
        "path, {} AS content, revision_id, doc_type, size, importance, tags, snippet, \
         modified_at, modified_micros",
        whole_content("memory_documents", backend)
    )
}
const HIT_COLUMNS: &str = "d.path, d.doc_type, d.size, d.modified_at, d.modified_micros, \
     d.snippet, d.tags, d.importance";

/// Postgres: the document's index vector (path words weighted A, content B).
const PG_TERMS: &str = "setweight(to_tsvector('simple', translate($3, '/._', '   ')), 'A') \
     || setweight(to_tsvector('simple', $4), 'B')";

impl ContinuityStore {
    /// Writes one document and its index row in one audited transaction, committed in a
    /// group with the other writes waiting (one WAL fsync for all on SQLite).
    pub async fn memory_write(&self, write: MemoryWrite) -> Result<MemoryWritten, Error> {
        let line = match (&write.change, self.database()) {
            (MemoryChange::Append(line), Database::Sqlite(_)) => {
                Some(self.line_counter.count(line)?)
            }
            _ => None,
        };
        let prepared = PreparedMemoryWrite { write, line };
        match self
            .writer()
            .write(Write::Memory(Box::new(prepared)))
            .await?
        {
            Ok(Landed::Memory(written, _)) => Ok(written),
            // A memory write is never refused and always answers its revision.
            Ok(Landed::Done) | Err(_) => {
                Err(Error::Corrupt("a memory write answered no revision".into()))
            }
        }
    }

    /// The tenant's document at `path` (normalised).
    pub async fn memory_document(
        &self,
        tenant: &str,
        path: &str,
    ) -> Result<Option<MemoryDocument>, Error> {
        Ok(with_pool!(self.database(), |pool| {
            let sql = format!(
                "SELECT {} FROM memory_documents WHERE tenant = $1 AND path = $2",
                document_columns(pool_backend(pool))
            );
            query(&sql)
                .bind(tenant)
                .bind(path)
                .fetch_optional(pool)
                .await?
        }))
    }

    /// The tenant's documents at `paths` (normalised) that exist, in the order of `paths`:
    /// one query for all of them.
    pub async fn memory_documents_at(
        &self,
        tenant: &str,
        paths: &[String],
    ) -> Result<Vec<MemoryDocument>, Error> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<MemoryDocument> = with_pool!(self.database(), |pool| {
            let mut b = Builder::new(format!(
                "SELECT {} FROM memory_documents WHERE tenant = ",
                document_columns(pool_backend(pool))
            ));
            b.push_bind(tenant);
            b.push(" AND path IN (");
            b.push_list(paths.iter().map(String::as_str));
            b.push(")");
            b.build().fetch_all(pool).await?
        });
        Ok(paths
            .iter()
            .filter_map(|path| found.iter().find(|d| &d.path == path).cloned())
            .collect())
    }

    /// The tenant's documents at `root` or under it (`memory/core`: its core memory), by path.
    pub async fn memory_documents_under(
        &self,
        tenant: &str,
        root: &str,
    ) -> Result<Vec<MemoryDocument>, Error> {
        let root = root.trim_end_matches('/');
        let prefix = format!("{root}/");
        let len = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
        Ok(with_pool!(self.database(), |pool| {
            let sql = format!(
                "SELECT {} FROM memory_documents WHERE tenant = $1 \
                 AND (path = $2 OR substr(path, 1, $3) = $4) ORDER BY path",
                document_columns(pool_backend(pool))
            );
            query(&sql)
                .bind(tenant)
                .bind(root)
                .bind(len)
                .bind(prefix.as_str())
                .fetch_all(pool)
                .await?
        }))
    }

    /// The tenant's documents matching `q`: by relevance (then path) or newest first.
    /// Without terms, the most recently modified documents.
    pub async fn memory_hits(&self, tenant: &str, q: &HitQuery) -> Result<Vec<HitRow>, Error> {
        match self.database() {
            // Words FTS5 reads as one token each: matched and ranked by the tenant's
            // in-memory index of the stored term counts.
            noema_store::Database::Sqlite(pool)
                if !q.terms.is_empty() && q.terms.iter().all(|t| bm25::single_token(t)) =>
            {
                let best = match self.memory_postings.search(tenant, q) {
                    Some(best) => best,
                    None => {
                        let _turn = self.sqlite_writer.lock().await;
                        self.memory_postings.load(pool, tenant).await?;
                        self.memory_postings.search(tenant, q).unwrap_or_default()
                    }
                };
                Ok(best)
            }
            database => Ok(with_pool!(database, |pool| {
                let mut b = hit_statement(pool_backend(pool), tenant, q);
                b.build().fetch_all(pool).await?
            })),
        }
    }

    /// How many documents the tenant has and its latest change.
    pub async fn memory_index_state(&self, tenant: &str) -> Result<IndexState, Error> {
        let (count, latest): ((i64,), Option<(String, String)>) =
            with_pool!(self.database(), |pool| {
                let count = query("SELECT COUNT(*) FROM memory_documents WHERE tenant = $1")
                    .bind(tenant)
                    .fetch_one(pool)
                    .await?;
                let latest = query(
                    "SELECT modified_at, revision_id FROM memory_documents WHERE tenant = $1 \
                     ORDER BY modified_micros DESC, path ASC LIMIT 1",
                )
                .bind(tenant)
                .fetch_optional(pool)
                .await?;
                (count, latest)
            });
        Ok(IndexState {
            file_count: count.0,
            latest,
        })
    }

    /// Recovery: makes the tenant's index rows match its documents, in one audited
    /// transaction.
    pub async fn memory_rebuild_index(
        &self,
        tenant: &str,
        audit: AuditDraft,
        at: OffsetDateTime,
    ) -> Result<RebuildCounts, Error> {
        let _turn = match self.database() {
            noema_store::Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            noema_store::Database::Postgres(_) => None,
        };
        with_pool!(self.database(), |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let counts = rebuild(&mut tx, tenant).await?;
            tx.record(audit, at);
            tx.commit().await?;
            // Loaded again from the repaired counts by the next search.
            self.memory_postings.drop_tenant(tenant);
            Ok(counts)
        })
    }
}

/// The engine of a pool, for statements whose text differs.
fn pool_backend<D: Engine>(_: &sqlx::Pool<D>) -> Backend {
    D::BACKEND
}

/// The FTS5 query: each term a quoted string (no operator can be injected), any of them.
fn fts_match(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// Each engine's relevance of a hit (higher is better).
const SQLITE_RELEVANCE: &str = "-bm25(memory_fts, 0.0, 2.0, 1.0)";
const SQLITE_LINE_RELEVANCE: &str = "-bm25(memory_fts_lines)";
const PG_RELEVANCE: &str = "CAST(ts_rank(s.terms, q.q) AS DOUBLE PRECISION)";

/// A search in three steps, so that a query whose words most documents contain costs one
/// relevance per match and nothing more:
/// 1. `matches`: the engine's matches of the tenant with their relevance, computed once per
///    match, and only the narrow columns the filters and the order need (on SQLite read from
///    `memory_documents_rank_idx`, so a match never reads its document's row, whose content
///    spans overflow pages);
/// 2. `top`: the best `limit` of them, in the order hits are answered in;
/// 3. the columns a hit shows, read for those `limit` documents only.
///
/// A recency listing (no terms) walks `memory_documents_recent_idx` instead.
fn hit_statement<'a, D: Engine>(
    backend: Backend,
    tenant: &'a str,
    q: &'a HitQuery,
) -> Builder<'a, D> {
    if q.terms.is_empty() {
        let mut b = Builder::new(format!(
            "SELECT {HIT_COLUMNS}, CAST(0.0 AS DOUBLE PRECISION) AS relevance \
             FROM memory_documents d WHERE d.tenant = "
        ));
        b.push_bind(tenant);
        push_filters(&mut b, q);
        b.push(" ORDER BY d.modified_micros DESC, d.path ASC LIMIT ");
        b.push_bind(q.limit);
        return b;
    }
    let mut b = match backend {
        Backend::Sqlite => {
            // CROSS JOIN keeps the full-text match the outer loop: given a time window, the
            // planner would otherwise walk the tenant's documents by modification time and
            // run the whole MATCH once per document (seconds at 1,000 large documents).
            // MATERIALIZED keeps the relevance a column: inlined, it would be computed again
            // for the order.
            // A document's appended lines are rows of their own: it matches when its
            // content as last written whole or one of its lines does, with the best of
            // their relevances.
            let mut b = Builder::new(format!(
                "WITH hits AS MATERIALIZED (SELECT rowid AS doc, {SQLITE_RELEVANCE} AS relevance \
                 FROM memory_fts WHERE memory_fts MATCH "
            ));
            b.push_bind(fts_match(&q.terms));
            b.push(format!(
                " UNION ALL SELECT a.doc, {SQLITE_LINE_RELEVANCE} FROM memory_fts_lines \
                 JOIN memory_appends a ON a.id = memory_fts_lines.rowid \
                 WHERE memory_fts_lines MATCH "
            ));
            b.push_bind(fts_match(&q.terms));
            b.push(
                "), matches AS MATERIALIZED (SELECT d.id, MAX(h.relevance) AS relevance, \
                 d.importance, d.path, d.modified_micros FROM hits h CROSS JOIN \
                 memory_documents d INDEXED BY memory_documents_rank_idx \
                 ON d.id = h.doc WHERE d.tenant = ",
            );
            b.push_bind(tenant);
            b
        }
        Backend::Postgres => {
            let mut b = Builder::new(format!(
                "WITH matches AS MATERIALIZED (SELECT d.id, {PG_RELEVANCE} AS relevance, \
                 d.importance, d.path, d.modified_micros FROM memory_search s \
                 JOIN memory_documents d ON d.id = s.id, (SELECT "
            ));
            for (i, term) in q.terms.iter().enumerate() {
                if i > 0 {
                    b.push(" || ");
                }
                b.push("plainto_tsquery('simple', ");
                b.push_bind(term.as_str());
                b.push(")");
            }
            b.push(") AS q(q) WHERE s.terms @@ q.q AND s.tenant = ");
            b.push_bind(tenant);
            b.push(" AND d.tenant = ");
            b.push_bind(tenant);
            b
        }
    };
    push_filters(&mut b, q);
    if backend == Backend::Sqlite {
        b.push(" GROUP BY d.id");
    }
    push_top(&mut b, q);
    b
}

/// The end of a search statement whose `matches` are open: the best `limit` of them, then
/// the columns a hit shows for those only, in the order of the hits.
fn push_top<'a, D: Engine>(b: &mut Builder<'a, D>, q: &'a HitQuery) {
    let (inner, outer) = if q.by_recency {
        (
            "modified_micros DESC, path ASC",
            "d.modified_micros DESC, d.path ASC",
        )
    } else {
        (
            "relevance + COALESCE(importance, 0) DESC, path ASC",
            "top.relevance + COALESCE(d.importance, 0) DESC, d.path ASC",
        )
    };
    b.push(format!(
        "), top AS MATERIALIZED (SELECT id, relevance FROM matches ORDER BY {inner} LIMIT "
    ));
    b.push_bind(q.limit);
    b.push(format!(
        ") SELECT {HIT_COLUMNS}, top.relevance AS relevance FROM top \
         JOIN memory_documents d ON d.id = top.id ORDER BY {outer}"
    ));
}

/// The time window, type and namespace filters of a hit query, on the documents as `d`.
fn push_filters<'a, D: Engine>(b: &mut Builder<'a, D>, q: &'a HitQuery) {
    if let Some(since) = q.since_micros {
        b.push(" AND d.modified_micros >= ");
        b.push_bind(since);
    }
    if !q.types.is_empty() {
        b.push(" AND lower(d.doc_type) IN (");
        b.push_list(q.types.iter().map(String::as_str));
        b.push(")");
    }
    if let Some(namespaces) = &q.namespaces {
        b.push(" AND (1 = 0");
        for ns in namespaces {
            let prefix = format!("{}/", ns.trim_end_matches('/'));
            let len = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
            b.push(" OR d.path = ");
            b.push_bind(ns.as_str());
            b.push(" OR substr(d.path, 1, ");
            b.push_bind(len);
            b.push(") = ");
            b.push_bind(prefix);
        }
        b.push(")");
    }
}

type Put = (MemoryWritten, Option<Box<IndexChange>>);

/// Writes `w`; answers the revision and, on SQLite, what the write changed in the tenant's
/// in-memory index (applied by the writer once the write committed).
pub(super) async fn put<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    prepared: &PreparedMemoryWrite,
    group: &mut GroupAppends,
) -> Result<Put, Error> {
    let w = &prepared.write;
    // Whatever this write does to the document, what was read of it before is no longer
    // its state: an append that lands as a row of its own puts its new state back.
    let read = group.take(&w.tenant, &w.path);
    if let MemoryChange::Append(line) = &w.change
        && let Some(put) = append_line(tx, w, line, prepared.line.as_ref(), read, group).await?
    {
        return Ok(put);
    }
    // A whole write reads the document's lines: the group's go in first.
    group.flush(tx).await?;
    put_whole(tx, w, prepared.line.as_ref()).await
}

/// What an append reads of its document ([`append_target`]'s columns).
#[derive(Debug, Clone, sqlx::FromRow)]
struct AppendTarget {
    id: i64,
    revision_id: String,
    doc_type: String,
    size: i64,
    importance: Option<f64>,
    /// JSON list of the document's `#tags`.
    tags: String,
    snippet: String,
    /// The content's last character.
    last: String,
}

/// An [`AppendTarget`] with the tenant and path it was read for.
#[derive(Debug, sqlx::FromRow)]
struct KeyedAppendTarget {
    tenant: String,
    path: String,
    #[sqlx(flatten)]
    target: AppendTarget,
}

/// SQLite: a group's appends, written as few times as the group allows. The documents they
/// go to are read in one query before the group's writes (instead of one round trip to
/// SQLite's thread per append) and kept as each append moves them (a write that changes a
/// document otherwise drops what was read of it). The rows of the appends that land as rows
/// of their own are held ([`PendingAppends`]) and written in one query ([`flush`]) before
/// any other statement of the group runs, and before it commits, so every statement still
/// sees the writes before it.
///
/// [`flush`]: GroupAppends::flush
#[derive(Debug, Default)]
pub(super) struct GroupAppends {
    targets: HashMap<(String, String), AppendTarget>,
    pending: PendingAppends,
}

impl GroupAppends {
    /// The documents `writes` append to (none on Postgres, where each append reads its own).
    pub(super) async fn read<D: Engine>(
        tx: &mut AuditedTx<'_, D>,
        writes: &[Write],
    ) -> Result<Self, Error> {
        let keys: Vec<[&str; 2]> = writes
            .iter()
            .filter_map(|write| match write {
                Write::Memory(w) if matches!(w.write.change, MemoryChange::Append(_)) => {
                    Some([w.write.tenant.as_str(), w.write.path.as_str()])
                }
                _ => None,
            })
            .collect();
        if D::BACKEND != Backend::Sqlite || keys.is_empty() {
            return Ok(GroupAppends::default());
        }
        let keys = serde_json::to_string(&keys)
            .map_err(|err| Error::Corrupt(format!("append targets: {err}")))?;
        let rows: Vec<KeyedAppendTarget> = query(&SQLITE_APPEND_TARGETS)
            .bind(keys)
            .fetch_all(tx.conn())
            .await?;
        Ok(GroupAppends {
            targets: rows
                .into_iter()
                .map(|row| ((row.tenant, row.path), row.target))
                .collect(),
            pending: PendingAppends::default(),
        })
    }

    fn take(&mut self, tenant: &str, path: &str) -> Option<AppendTarget> {
        self.targets.remove(&(tenant.to_owned(), path.to_owned()))
    }

    /// Writes the held appends' rows: one query, whatever their number.
    pub(super) async fn flush<D: Engine>(
        &mut self,
        tx: &mut AuditedTx<'_, D>,
    ) -> Result<(), Error> {
        let pending = std::mem::take(&mut self.pending);
        if pending.lines == 0 {
            return Ok(());
        }
        let tokens = pending.tokens;
        let (lines, documents) = pending.into_json()?;
        query(SQLITE_APPENDS)
            .bind(lines)
            .bind(documents)
            .bind(tokens)
            .execute(tx.conn())
            .await?;
        Ok(())
    }
}

/// SQLite: the rows of appends not yet written: each line with its document and counts, and
/// each document's description after its last line, with the tokens its lines add.
#[derive(Debug, Default)]
struct PendingAppends {
    /// The lines as a JSON array of `[doc, line, terms]`, in append order, still open.
    json: String,
    lines: usize,
    /// The documents in the order first appended to.
    documents: Vec<PendingDocument>,
    tokens: i64,
}

/// A document's description after the group's last append to it ([`SQLITE_APPENDS`]'s
/// `$2` element), and the tokens the group's lines add to it.
#[derive(Debug, serde::Serialize)]
struct PendingDocument {
    id: i64,
    revision_id: String,
    size: i64,
    /// JSON list of the document's `#tags`.
    tags: String,
    snippet: String,
    modified_at: String,
    modified_micros: i64,
    tokens: i64,
}

impl PendingAppends {
    /// Holds `line`, appended with its `counted` terms to the document `described` as it
    /// now is (`described.tokens`: the line's).
    fn push(
        &mut self,
        line: &str,
        counted: &CountedLine,
        mut described: PendingDocument,
    ) -> Result<(), Error> {
        self.json.push(if self.lines == 0 { '[' } else { ',' });
        let row = serde_json::to_string(&(described.id, line, counted.json.as_str()))
            .map_err(|err| Error::Corrupt(format!("an appended line: {err}")))?;
        self.json.push_str(&row);
        self.lines += 1;
        self.tokens += counted.tokens;
        match self
            .documents
            .iter_mut()
            .find(|held| held.id == described.id)
        {
            Some(held) => {
                described.tokens += held.tokens;
                *held = described;
            }
            None => self.documents.push(described),
        }
        Ok(())
    }

    /// The lines' JSON and the documents'.
    fn into_json(mut self) -> Result<(String, String), Error> {
        self.json.push(']');
        let documents = serde_json::to_string(&self.documents)
            .map_err(|err| Error::Corrupt(format!("appended documents: {err}")))?;
        Ok((self.json, documents))
    }
}

/// SQLite: a group's held appends written at once ($1 the lines, $2 the documents, $3 the
/// tokens the lines add in all, as [`PendingAppends`] makes them): the lines stored with
/// their counts and indexed (row ids are assigned in order, above every id before, so the
/// newest rows are the lines just stored), each document described as after its last line,
/// the lines' tokens added to their documents' and the index's.
const SQLITE_APPENDS: &str = "\
     INSERT INTO memory_appends (doc, line, terms) \
     SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each($1) ORDER BY key; \
     INSERT INTO memory_fts_lines (rowid, body) SELECT id, line FROM memory_appends \
     ORDER BY id DESC LIMIT json_array_length($1); \
     UPDATE memory_documents SET revision_id = d.value ->> 'revision_id', \
     size = d.value ->> 'size', tags = d.value ->> 'tags', snippet = d.value ->> 'snippet', \
     modified_at = d.value ->> 'modified_at', modified_micros = d.value ->> 'modified_micros' \
     FROM json_each($2) d WHERE memory_documents.id = d.value ->> 'id'; \
     UPDATE memory_term_documents SET tokens = tokens + (d.value ->> 'tokens') \
     FROM json_each($2) d WHERE memory_term_documents.doc = d.value ->> 'id'; \
     UPDATE memory_term_totals SET tokens = tokens + $3";

/// An append as a row of its own: the line stored with its counts (`counted`, on SQLite),
/// indexed, the description updated from the line alone. On SQLite its row waits in `group`
/// for the group's next flush. `None` when the document is new or only its whole content can
/// describe it ([`describe_appended`]), or on SQLite without the line's counts; then it is
/// written whole.
async fn append_line<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &MemoryWrite,
    line: &str,
    counted: Option<&CountedLine>,
    read: Option<AppendTarget>,
    group: &mut GroupAppends,
) -> Result<Option<Put>, Error> {
    if D::BACKEND == Backend::Sqlite && counted.is_none() {
        return Ok(None);
    }
    let current = match read {
        Some(read) => Some(read),
        None => {
            group.flush(tx).await?;
            let sql: &str = match D::BACKEND {
                Backend::Sqlite => &SQLITE_APPEND_TARGET,
                Backend::Postgres => &POSTGRES_APPEND_TARGET,
            };
            query(sql)
                .bind(w.tenant.as_str())
                .bind(w.path.as_str())
                .fetch_optional(tx.conn())
                .await?
        }
    };
    let Some(current) = current else {
        return Ok(None);
    };
    let id = current.id;
    let old = Description {
        doc_type: current.doc_type,
        importance: current.importance,
        tags: serde_json::from_str(&current.tags).unwrap_or_default(),
        snippet: current.snippet,
        size: current.size,
    };
    let before = current.last;
    // The line's tokens must not run into the content's: its index row and counts are its own.
    let Some(new) = describe_appended(&w.path, &old, before.chars().next_back(), line)
        .filter(|_| bm25::separate_at_seam(&before, line))
    else {
        return Ok(None);
    };
    let revision = appended_revision_id(&current.revision_id, &w.path, line);
    let tags = serde_json::to_string(&new.tags).unwrap_or_else(|_| "[]".to_owned());
    let (modified_at, micros) = modified(w.at);
    match counted {
        Some(counted) => {
            group.pending.push(
                line,
                counted,
                PendingDocument {
                    id,
                    revision_id: revision.clone(),
                    size: new.size,
                    tags: tags.clone(),
                    snippet: new.snippet.clone(),
                    modified_at: modified_at.clone(),
                    modified_micros: micros,
                    tokens: counted.tokens,
                },
            )?;
            // The document as the next append of the group finds it.
            let state = AppendTarget {
                id,
                revision_id: revision.clone(),
                doc_type: new.doc_type.clone(),
                size: new.size,
                importance: new.importance,
                tags: tags.clone(),
                snippet: new.snippet.clone(),
                last: line.chars().next_back().map(String::from).unwrap_or(before),
            };
            group
                .targets
                .insert((w.tenant.clone(), w.path.clone()), state);
        }
        // Postgres: the line stored and indexed, the description moved, in one statement.
        None => {
            query(&POSTGRES_APPEND)
                .bind(id)
                .bind(line)
                .bind(revision.as_str())
                .bind(new.size)
                .bind(tags.as_str())
                .bind(new.snippet.as_str())
                .bind(modified_at.as_str())
                .bind(micros)
                .execute(tx.conn())
                .await?;
        }
    }
    let change = counted.map(|counted| {
        Box::new(IndexChange {
            tenant: w.tenant.clone(),
            doc: id,
            row: hit_row(&w.path, new, tags, (modified_at, micros)),
            terms: counted.terms.clone(),
            tokens: counted.tokens,
            added: true,
        })
    });
    Ok(Some((
        MemoryWritten {
            revision_id: revision,
            committed: true,
        },
        change,
    )))
}

/// What an append reads of its document: its description and its content's last character
/// (its last appended line's, else its stored content's: COALESCE reads the content only
/// when there is no line), given each engine's last-character expression of a column.
fn append_target(last_char: fn(&str) -> String) -> String {
    format!(
        "SELECT d.id, d.revision_id, d.doc_type, d.size, d.importance, d.tags, d.snippet, \
         COALESCE((SELECT {} FROM memory_appends a WHERE a.doc = d.id \
         ORDER BY a.id DESC LIMIT 1), {}) AS last \
         FROM memory_documents d WHERE d.tenant = $1 AND d.path = $2",
        last_char("a.line"),
        last_char("d.content")
    )
}

static SQLITE_APPEND_TARGET: LazyLock<String> =
    LazyLock::new(|| append_target(|column| format!("substr({column}, -1)")));
/// SQLite: [`append_target`] for several documents (`$1`, a JSON array of `[tenant, path]`),
/// each row led by its tenant and path.
static SQLITE_APPEND_TARGETS: LazyLock<String> = LazyLock::new(|| {
    SQLITE_APPEND_TARGET
        .replacen("SELECT d.id", "SELECT d.tenant, d.path, d.id", 1)
        .replacen(
            "FROM memory_documents d WHERE d.tenant = $1 AND d.path = $2",
            "FROM json_each($1) k JOIN memory_documents d \
             ON d.tenant = k.value ->> 0 AND d.path = k.value ->> 1",
            1,
        )
});
static POSTGRES_APPEND_TARGET: LazyLock<String> =
    LazyLock::new(|| append_target(|column| format!("right({column}, 1)")));

/// The description an append moves ($1 the document, $3… its new description).
const DESCRIBE_APPENDED: &str = "UPDATE memory_documents SET revision_id = $3, size = $4, \
     tags = $5, snippet = $6, modified_at = $7, modified_micros = $8 WHERE id = $1";

/// Postgres: an append as one statement (data-modifying WITHs), answering no rows.
static POSTGRES_APPEND: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH appended AS (INSERT INTO memory_appends (doc, line) VALUES ($1, $2)), \
         indexed AS (UPDATE memory_search SET terms = terms || \
         setweight(to_tsvector('simple', $2), 'B') WHERE id = $1) {DESCRIBE_APPENDED}"
    )
});

/// Document `id`'s appended lines dropped, with their index rows (its content is about to
/// be written whole).
async fn fold<D: Engine>(tx: &mut AuditedTx<'_, D>, id: i64) -> Result<(), Error> {
    if D::BACKEND == Backend::Sqlite {
        query(
            "DELETE FROM memory_fts_lines WHERE rowid IN \
             (SELECT id FROM memory_appends WHERE doc = $1)",
        )
        .bind(id)
        .execute(tx.conn())
        .await?;
    }
    query("DELETE FROM memory_appends WHERE doc = $1")
        .bind(id)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// What search shows of a document described by `d` (its tags as stored: JSON), modified at
/// `modified`.
fn hit_row(path: &str, d: Description, tags: String, modified: (String, i64)) -> HitRow {
    HitRow {
        path: path.to_owned(),
        doc_type: d.doc_type,
        size: d.size,
        modified_at: modified.0,
        modified_micros: modified.1,
        snippet: d.snippet,
        tags,
        importance: d.importance,
        relevance: 0.0,
    }
}

/// A write of the document's whole content: a `/v1/write`, the document's first append, or
/// an append only the whole content can describe. Lines appended before are folded into the
/// content. `counted`: an appended line's counts (SQLite).
async fn put_whole<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &MemoryWrite,
    counted: Option<&CountedLine>,
) -> Result<Put, Error> {
    // The whole content: its stored content and the lines appended since.
    let sql = format!(
        "SELECT id, {}, revision_id FROM memory_documents WHERE tenant = $1 AND path = $2",
        whole_content("memory_documents", D::BACKEND)
    );
    let current: Option<(i64, String, String)> = query(&sql)
        .bind(w.tenant.as_str())
        .bind(w.path.as_str())
        .fetch_optional(tx.conn())
        .await?;
    let content = match (&w.change, &current) {
        (MemoryChange::Replace(new), Some((_, old, revision))) if new == old => {
            return Ok((
                MemoryWritten {
                    revision_id: revision.clone(),
                    committed: false,
                },
                None,
            ));
        }
        (MemoryChange::Replace(new), _) => new.clone(),
        (MemoryChange::Append(line), Some((_, old, _))) => format!("{old}{line}"),
        (MemoryChange::Append(line), None) => line.clone(),
    };
    let description = describe(&w.path, &content);
    let tags = serde_json::to_string(&description.tags).unwrap_or_else(|_| "[]".to_owned());
    let revision = match (&w.change, &current) {
        (MemoryChange::Append(line), Some((_, _, previous))) => {
            appended_revision_id(previous, &w.path, line)
        }
        _ => revision_id(
            current.as_ref().map(|(_, _, r)| r.as_str()),
            &w.path,
            &content,
        ),
    };
    let (modified_at, micros) = modified(w.at);
    // An appended line's terms are counted on their own when its tokens cannot run into
    // the document's last ones.
    let appended = match (&w.change, &current, counted) {
        (MemoryChange::Append(line), Some((_, old, _)), Some(counted))
            if bm25::separate_at_seam(old, line) =>
        {
            Some(counted)
        }
        _ => None,
    };
    let id: i64 = match &current {
        Some((id, _, _)) => {
            // Counted from the document's counts: those its lines keep join them first.
            if D::BACKEND == Backend::Sqlite && appended.is_some() {
                memory_terms::fold_lines(tx, *id).await?;
            }
            fold(tx, *id).await?;
            query(
                "UPDATE memory_documents SET content = $1, revision_id = $2, doc_type = $3, \
                 size = $4, importance = $5, tags = $6, snippet = $7, modified_at = $8, \
                 modified_micros = $9 WHERE id = $10",
            )
            .bind(content.as_str())
            .bind(revision.as_str())
            .bind(description.doc_type.as_str())
            .bind(description.size)
            .bind(description.importance)
            .bind(tags.as_str())
            .bind(description.snippet.as_str())
            .bind(modified_at.as_str())
            .bind(micros)
            .bind(*id)
            .execute(tx.conn())
            .await?;
            *id
        }
        None => {
            let (id,): (i64,) = query(
                "INSERT INTO memory_documents (tenant, path, content, revision_id, doc_type, \
                 size, importance, tags, snippet, modified_at, modified_micros) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
            )
            .bind(w.tenant.as_str())
            .bind(w.path.as_str())
            .bind(content.as_str())
            .bind(revision.as_str())
            .bind(description.doc_type.as_str())
            .bind(description.size)
            .bind(description.importance)
            .bind(tags.as_str())
            .bind(description.snippet.as_str())
            .bind(modified_at.as_str())
            .bind(micros)
            .fetch_one(tx.conn())
            .await?;
            id
        }
    };
    let counted = index(tx, id, &w.tenant, &w.path, &content, appended).await?;
    let change = counted.map(|(terms, tokens)| {
        Box::new(IndexChange {
            tenant: w.tenant.clone(),
            doc: id,
            row: hit_row(&w.path, description, tags, (modified_at, micros)),
            terms,
            tokens,
            added: appended.is_some(),
        })
    });
    Ok((
        MemoryWritten {
            revision_id: revision,
            committed: true,
        },
        change,
    ))
}

/// Writes document `id`'s index row (and on SQLite its term counts: the `appended` line's
/// added when it is the only change since the row was last written, all of them otherwise;
/// answered as counted, with their tokens).
async fn index<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    id: i64,
    tenant: &str,
    path: &str,
    content: &str,
    appended: Option<&CountedLine>,
) -> Result<Option<(Vec<(String, i64)>, i64)>, Error> {
    match D::BACKEND {
        Backend::Sqlite => {
            query("DELETE FROM memory_fts WHERE rowid = $1")
                .bind(id)
                .execute(tx.conn())
                .await?;
            query("INSERT INTO memory_fts (rowid, tenant, path, body) VALUES ($1, $2, $3, $4)")
                .bind(id)
                .bind(tenant)
                .bind(path)
                .bind(content)
                .execute(tx.conn())
                .await?;
            Ok(Some(match appended {
                Some(counted) => memory_terms::append(tx, id, counted).await?,
                None => memory_terms::replace(tx, id, path, content).await?,
            }))
        }
        Backend::Postgres => {
            let sql = format!(
                "INSERT INTO memory_search (id, tenant, terms) VALUES ($1, $2, {PG_TERMS}) \
                 ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, terms = excluded.terms"
            );
            query(&sql)
                .bind(id)
                .bind(tenant)
                .bind(path)
                .bind(content)
                .execute(tx.conn())
                .await?;
            Ok(None)
        }
    }
}

async fn rebuild<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    tenant: &str,
) -> Result<RebuildCounts, Error> {
    match D::BACKEND {
        Backend::Sqlite => rebuild_sqlite(tx, tenant).await,
        Backend::Postgres => rebuild_postgres(tx, tenant).await,
    }
}

/// SQLite: a document whose row in `memory_fts` or whose lines' rows in `memory_fts_lines`
/// do not match it is folded and indexed whole; one without term counts is counted again;
/// rows and counts of no document are dropped.
async fn rebuild_sqlite<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    tenant: &str,
) -> Result<RebuildCounts, Error> {
    use std::collections::{HashMap, HashSet};
    let documents: Vec<(i64, String, String)> =
        query("SELECT id, path, content FROM memory_documents WHERE tenant = $1 ORDER BY id")
            .bind(tenant)
            .fetch_all(tx.conn())
            .await?;
    let rows: Vec<(i64, Option<String>, Option<String>)> =
        query("SELECT rowid, path, body FROM memory_fts WHERE tenant = $1")
            .bind(tenant)
            .fetch_all(tx.conn())
            .await?;
    let indexed: HashMap<i64, (Option<String>, Option<String>)> = rows
        .into_iter()
        .map(|(id, path, body)| (id, (path, body)))
        .collect();
    // Each appended line of the tenant's documents, with its index row's body if it has one.
    let lines: Vec<(i64, String, Option<String>)> = query(
        "SELECT a.doc, a.line, l.body FROM memory_appends a \
         JOIN memory_documents d ON d.id = a.doc \
         LEFT JOIN memory_fts_lines l ON l.rowid = a.id WHERE d.tenant = $1 ORDER BY a.id",
    )
    .bind(tenant)
    .fetch_all(tx.conn())
    .await?;
    let mut appended: HashMap<i64, (String, bool)> = HashMap::new();
    for (doc, line, body) in lines {
        let entry = appended.entry(doc).or_insert_with(|| (String::new(), true));
        entry.1 &= body.as_deref() == Some(line.as_str());
        entry.0.push_str(&line);
    }
    // Documents with term counts: one without them (lost with a damaged index) has them
    // written again even when its index rows are intact.
    let counted: Vec<(i64,)> = query(
        "SELECT n.doc FROM memory_term_documents n JOIN memory_documents d \
         ON d.id = n.doc WHERE d.tenant = $1",
    )
    .bind(tenant)
    .fetch_all(tx.conn())
    .await?;
    let counted: HashSet<i64> = counted.into_iter().map(|(id,)| id).collect();
    let mut counts = RebuildCounts::default();
    for (id, path, base) in &documents {
        let (lines, lines_intact) = appended.remove(id).unwrap_or_else(|| (String::new(), true));
        let intact = lines_intact
            && matches!(indexed.get(id), Some((Some(p), Some(b))) if p == path && b == base);
        let content = format!("{base}{lines}");
        if intact && counted.contains(id) {
            counts.unchanged += 1;
            continue;
        }
        if intact {
            // Search reads the counts: a document without them is repaired too.
            memory_terms::replace(tx, *id, path, &content).await?;
        } else {
            if !lines.is_empty() {
                query("UPDATE memory_documents SET content = $1 WHERE id = $2")
                    .bind(content.as_str())
                    .bind(*id)
                    .execute(tx.conn())
                    .await?;
                fold(tx, *id).await?;
            }
            index(tx, *id, tenant, path, &content, None).await?;
        }
        counts.changed += 1;
    }
    let live: HashSet<i64> = documents.iter().map(|(id, _, _)| *id).collect();
    let mut removed = HashSet::new();
    for id in indexed.keys().filter(|id| !live.contains(id)) {
        query("DELETE FROM memory_fts WHERE rowid = $1")
            .bind(*id)
            .execute(tx.conn())
            .await?;
        memory_terms::remove(tx, *id).await?;
        removed.insert(*id);
    }
    // Counts and lines of no document at all (no tenant's: dropped by any tenant's rebuild).
    for id in memory_terms::orphans(tx).await? {
        memory_terms::remove(tx, id).await?;
        removed.insert(id);
    }
    query(
        "DELETE FROM memory_fts_lines WHERE rowid NOT IN \
         (SELECT a.id FROM memory_appends a JOIN memory_documents d ON d.id = a.doc)",
    )
    .execute(tx.conn())
    .await?;
    query("DELETE FROM memory_appends WHERE doc NOT IN (SELECT id FROM memory_documents)")
        .execute(tx.conn())
        .await?;
    counts.removed = i64::try_from(removed.len()).unwrap_or(i64::MAX);
    memory_terms::recount(tx).await?;
    Ok(counts)
}

/// Postgres: a document whose `memory_search` vector is missing or is not its whole
/// content's is indexed again; vectors of no document are dropped.
async fn rebuild_postgres<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    tenant: &str,
) -> Result<RebuildCounts, Error> {
    let whole = whole_content("d", Backend::Postgres);
    let sql = format!(
        "SELECT d.id, d.path, {whole} FROM memory_documents d LEFT JOIN memory_search s \
         ON s.id = d.id WHERE d.tenant = $1 AND (s.id IS NULL OR s.tenant <> d.tenant \
         OR s.terms <> ({})) ORDER BY d.id",
        PG_TERMS.replace("$3", "d.path").replace("$4", &whole)
    );
    let stale: Vec<(i64, String, String)> = query(&sql).bind(tenant).fetch_all(tx.conn()).await?;
    for (id, path, content) in &stale {
        index(tx, *id, tenant, path, content, None).await?;
    }
    let (documents,): (i64,) = query("SELECT COUNT(*) FROM memory_documents WHERE tenant = $1")
        .bind(tenant)
        .fetch_one(tx.conn())
        .await?;
    let changed = i64::try_from(stale.len()).unwrap_or(i64::MAX);
    let removed = query(
        "DELETE FROM memory_search s WHERE s.tenant = $1 AND NOT EXISTS \
         (SELECT 1 FROM memory_documents d WHERE d.id = s.id AND d.tenant = $1)",
    )
    .bind(tenant)
    .execute(tx.conn())
    .await?;
    query("DELETE FROM memory_appends WHERE doc NOT IN (SELECT id FROM memory_documents)")
        .execute(tx.conn())
        .await?;
    Ok(RebuildCounts {
        changed,
        unchanged: documents - changed,
        removed: i64::try_from(removed).unwrap_or(i64::MAX),
    })
}

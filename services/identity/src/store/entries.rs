//! Diary entries: writes, the list and full-text search, tag counts. The only spellings
//! that differ between the engines are full-text search (SQLite's FTS5 table, Postgres'
//! generated `tsvector`) and reading a JSON tag array as rows.

use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, is_unique_violation, query};
use noema_store::{Backend, with_pool};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::{IdentityStore, chain, draft, signed, unsigned};
use crate::domain::diary::Visibility;
use crate::domain::entry::{Entry, EntrySignature, EntryType, UNDELETABLE_MESSAGE};
use crate::domain::search::fts5_query;
use crate::domain::tag::{TagCount, TagQuery};
use crate::error::IdentityError;

/// Filters of an entry list or search.
#[derive(Debug, Clone, Default)]
pub struct EntryFilter {
    pub diary_id: Option<String>,
    /// Only diaries this agent owns or holds an accepted share of.
    pub reader: Option<String>,
    pub ids: Vec<String>,
    pub tags: Vec<String>,
    pub exclude_tags: Vec<String>,
    pub entry_types: Vec<String>,
    pub exclude_superseded: bool,
    /// Full-text query, already checked to contain words.
    pub query: Option<String>,
    pub limit: i64,
    pub offset: i64,
}

/// What signing adds to an entry at insert (MoltNet's create-signed flow) or later.
#[derive(Debug, Clone)]
pub struct SignatureInput {
    pub request_id: String,
    pub signature: String,
    pub nonce: String,
    pub signed_by: String,
    pub signer_fingerprint: String,
}

const ENTRY_SELECT: &str = "SELECT e.id, e.diary_id, e.title, e.content, e.tags, \
     e.entry_type, e.importance, e.injection_risk, e.access_count, e.last_accessed_at, \
     e.content_hash, e.content_signature, e.signing_nonce, e.signing_request_id, \
     e.signed_by, e.signer_fingerprint, e.signed_at, e.chain_seq, e.chain_prev, \
     e.chain_hash, e.created_by, e.created_at, e.updated_at, d.visibility, \
     a.public_key AS creator_public_key, \
     EXISTS (SELECT 1 FROM entry_relations r WHERE r.target_id = e.id \
       AND r.relation = 'supersedes' AND r.status = 'accepted') AS superseded \
     FROM diary_entries e JOIN diaries d ON d.id = e.diary_id \
     LEFT JOIN agents a ON a.agent_id = e.created_by";

#[derive(sqlx::FromRow)]
struct EntryRow {
    id: String,
    diary_id: String,
    title: Option<String>,
    content: String,
    tags: Option<String>,
    entry_type: String,
    importance: i32,
    injection_risk: bool,
    access_count: i64,
    last_accessed_at: Option<OffsetDateTime>,
    content_hash: String,
    content_signature: Option<String>,
    signing_nonce: Option<String>,
    signing_request_id: Option<String>,
    signed_by: Option<String>,
    signer_fingerprint: Option<String>,
    signed_at: Option<OffsetDateTime>,
    chain_seq: Option<i64>,
    chain_prev: Option<String>,
    chain_hash: Option<String>,
    created_by: String,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    visibility: String,
    creator_public_key: Option<String>,
    superseded: bool,
}

impl TryFrom<EntryRow> for Entry {
    type Error = IdentityError;

    fn try_from(row: EntryRow) -> Result<Entry, IdentityError> {
        let signature = row.content_signature.map(|signature| EntrySignature {
            signature,
            nonce: row.signing_nonce.unwrap_or_default(),
            signing_request_id: row.signing_request_id.unwrap_or_default(),
            signed_by: row.signed_by.unwrap_or_default(),
            signer_fingerprint: row.signer_fingerprint.unwrap_or_default(),
            signed_at: row.signed_at.unwrap_or(OffsetDateTime::UNIX_EPOCH),
            chain_seq: unsigned(row.chain_seq.unwrap_or(0)),
            chain_prev: row.chain_prev.unwrap_or_default(),
            chain_hash: row.chain_hash.unwrap_or_default(),
        });
        Ok(Entry {
            id: row.id,
            diary_id: row.diary_id,
            title: row.title,
            content: row.content,
            tags: tags_from_text(row.tags)?,
            entry_type: EntryType::from_stored(&row.entry_type)?,
            importance: u32::try_from(row.importance).unwrap_or(0),
            injection_risk: row.injection_risk,
            access_count: unsigned(row.access_count),
            last_accessed_at: row.last_accessed_at,
            content_hash: row.content_hash,
            signature,
            created_by: row.created_by,
            creator_public_key: row.creator_public_key,
            created_at: row.created_at,
            updated_at: row.updated_at,
            superseded: row.superseded,
            visibility: Visibility::from_stored(&row.visibility)?,
        })
    }
}

pub(super) fn tags_from_text(text: Option<String>) -> Result<Option<Vec<String>>, IdentityError> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| IdentityError::Corrupt(format!("entry tags: {e}")))
    })
    .transpose()
}

fn tags_to_text(tags: Option<&Vec<String>>) -> Option<String> {
    tags.map(|t| Value::from(t.clone()).to_string())
}

/// The rows of `e.tags` as `j.value`.
pub(super) fn tag_rows(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "json_each(e.tags) AS j",
        Backend::Postgres => "jsonb_array_elements_text(e.tags::jsonb) AS j(value)",
    }
}

/// SQLite ranks matches in a joined FTS5 query; Postgres filters and ranks on the
/// entry's own `search_vector`.
pub(super) fn push_fts_join<D: Engine>(qb: &mut Builder<'_, D>, query: &str) {
    if D::BACKEND == Backend::Sqlite {
        qb.push(
            " JOIN (SELECT entry_id, bm25(diary_entries_fts) AS score FROM diary_entries_fts \
             WHERE diary_entries_fts MATCH ",
        );
        qb.push_bind(fts5_query(query).unwrap_or_default());
        qb.push(") f ON f.entry_id = e.id");
    }
}

pub(super) fn push_fts_where<D: Engine>(qb: &mut Builder<'_, D>, query: &str) {
    if D::BACKEND == Backend::Postgres {
        qb.push(" AND e.search_vector @@ plainto_tsquery('english', ");
        qb.push_bind(query.to_owned());
        qb.push(")");
    }
}

pub(super) fn push_fts_order<D: Engine>(qb: &mut Builder<'_, D>, query: &str) {
    match D::BACKEND {
        Backend::Sqlite => {
            qb.push(" ORDER BY f.score ASC, e.created_at DESC, e.id DESC");
        }
        Backend::Postgres => {
            qb.push(" ORDER BY ts_rank(e.search_vector, plainto_tsquery('english', ");
            qb.push_bind(query.to_owned());
            qb.push(")) DESC, e.created_at DESC, e.id DESC");
        }
    }
}

/// The `WHERE` clause of an entry list.
pub(super) fn push_filters<'a, D: Engine>(qb: &mut Builder<'a, D>, filter: &'a EntryFilter) {
    qb.push(" WHERE 1 = 1");
    if let Some(diary_id) = &filter.diary_id {
        qb.push(" AND e.diary_id = ").push_bind(diary_id.as_str());
    }
    if let Some(reader) = &filter.reader {
        qb.push(" AND (d.owner_id = ").push_bind(reader.as_str());
        qb.push(
            " OR EXISTS (SELECT 1 FROM diary_shares s WHERE s.diary_id = d.id \
             AND s.status = 'accepted' AND s.agent_id = ",
        );
        qb.push_bind(reader.as_str()).push("))");
    }
    if !filter.ids.is_empty() {
        qb.push(" AND e.id IN (")
            .push_list(filter.ids.iter().map(String::as_str))
            .push(")");
    }
    if !filter.entry_types.is_empty() {
        qb.push(" AND e.entry_type IN (")
            .push_list(filter.entry_types.iter().map(String::as_str))
            .push(")");
    }
    for tag in &filter.tags {
        qb.push(format!(
            " AND EXISTS (SELECT 1 FROM {} WHERE j.value = ",
            tag_rows(D::BACKEND)
        ));
        qb.push_bind(tag.as_str()).push(")");
    }
    for tag in &filter.exclude_tags {
        qb.push(format!(
            " AND NOT EXISTS (SELECT 1 FROM {} WHERE j.value = ",
            tag_rows(D::BACKEND)
        ));
        qb.push_bind(tag.as_str()).push(")");
    }
    if filter.exclude_superseded {
        qb.push(
            " AND NOT EXISTS (SELECT 1 FROM entry_relations x WHERE x.target_id = e.id \
             AND x.relation = 'supersedes' AND x.status = 'accepted')",
        );
    }
    if let Some(query) = &filter.query {
        push_fts_where(qb, query);
    }
}

impl IdentityStore {
    /// Inserts an entry, signed when `signing` is given (MoltNet's create flow).
    pub async fn insert_entry(
        &self,
        entry: &Entry,
        signing: Option<&SignatureInput>,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let link = match signing {
                Some(s) => Some(
                    chain::extend(
                        &mut tx,
                        &s.signed_by,
                        &entry.id,
                        &entry.content_hash,
                        &s.signature,
                        now,
                    )
                    .await?,
                ),
                None => None,
            };
            let inserted = query(
                "INSERT INTO diary_entries (id, diary_id, title, content, tags, entry_type, \
                 importance, injection_risk, access_count, content_hash, content_signature, \
                 signing_nonce, signing_request_id, signed_by, signer_fingerprint, signed_at, \
                 chain_seq, chain_prev, chain_hash, created_by, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $10, $11, $12, $13, $14, $15, \
                 $16, $17, $18, $19, $20, $21)",
            )
            .bind(&entry.id)
            .bind(&entry.diary_id)
            .bind(&entry.title)
            .bind(&entry.content)
            .bind(tags_to_text(entry.tags.as_ref()))
            .bind(entry.entry_type.as_str())
            .bind(i32::try_from(entry.importance).unwrap_or(5))
            .bind(entry.injection_risk)
            .bind(&entry.content_hash)
            .bind(signing.map(|s| s.signature.clone()))
            .bind(signing.map(|s| s.nonce.clone()))
            .bind(signing.map(|s| s.request_id.clone()))
            .bind(signing.map(|s| s.signed_by.clone()))
            .bind(signing.map(|s| s.signer_fingerprint.clone()))
            .bind(signing.map(|_| now))
            .bind(link.as_ref().map(|l| signed(l.seq)))
            .bind(link.as_ref().map(|l| l.prev.clone()))
            .bind(link.as_ref().map(|l| l.hash.clone()))
            .bind(&entry.created_by)
            .bind(entry.created_at)
            .bind(entry.updated_at)
            .execute(tx.conn())
            .await;
            match inserted {
                Ok(_) => {}
                Err(err) if is_unique_violation(&err) && signing.is_some() => {
                    return Err(IdentityError::SignatureReused);
                }
                Err(err) => return Err(err.into()),
            }
            let detail = json!({
                "diary_id": entry.diary_id,
                "content_hash": entry.content_hash,
                "signed": signing.is_some(),
            });
            tx.record(
                draft(actor, "create_entry", "entry", &entry.id, detail),
                now,
            );
            tx.commit().await?;
            Ok(())
        })
    }

    pub async fn get_entry(&self, id: &str) -> Result<Option<Entry>, IdentityError> {
        let sql = format!("{ENTRY_SELECT} WHERE e.id = $1");
        self.find::<EntryRow>(&sql, id)
            .await?
            .map(Entry::try_from)
            .transpose()
    }

    /// Entries matching `filter`, a page of them and the total count.
    pub async fn list_entries(
        &self,
        filter: &EntryFilter,
    ) -> Result<(Vec<Entry>, u64), IdentityError> {
        let (rows, total): (Vec<EntryRow>, i64) = with_pool!(&self.db, |pool| {
            let mut count = Builder::new(
                "SELECT COUNT(*) AS n FROM diary_entries e JOIN diaries d ON d.id = e.diary_id",
            );
            if let Some(query) = &filter.query {
                push_fts_join(&mut count, query);
            }
            push_filters(&mut count, filter);
            let (total,): (i64,) = count.build().fetch_one(pool).await?;
            let mut page = Builder::new(ENTRY_SELECT);
            if let Some(query) = &filter.query {
                push_fts_join(&mut page, query);
            }
            push_filters(&mut page, filter);
            match &filter.query {
                Some(query) => push_fts_order(&mut page, query),
                None => {
                    page.push(" ORDER BY e.created_at DESC, e.id DESC");
                }
            }
            page.push(" LIMIT ").push_bind(filter.limit);
            page.push(" OFFSET ").push_bind(filter.offset);
            (page.build().fetch_all(pool).await?, total)
        });
        let entries = rows
            .into_iter()
            .map(Entry::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((entries, unsigned(total)))
    }

    /// Each tag of the diary's entries (of `entry_types` when not empty) with the number
    /// of entries carrying it, unordered (the domain orders them). The prefix is compared
    /// with `substr` rather than `LIKE`, so `%` and `_` in it match only themselves, and
    /// case-sensitively on both backends.
    pub async fn list_tags(
        &self,
        diary_id: &str,
        query: &TagQuery,
        entry_types: &[String],
    ) -> Result<Vec<TagCount>, IdentityError> {
        let rows: Vec<(String, i64)> = with_pool!(&self.db, |pool| {
            let mut qb = Builder::new(format!(
                "SELECT j.value AS tag, COUNT(DISTINCT e.id) AS n FROM diary_entries e, {} \
                 WHERE e.diary_id = ",
                tag_rows(self.db.backend())
            ));
            qb.push_bind(diary_id);
            if !entry_types.is_empty() {
                qb.push(" AND e.entry_type IN (")
                    .push_list(entry_types.iter().map(String::as_str))
                    .push(")");
            }
            if let Some(prefix) = &query.prefix {
                // The domain caps a prefix at a tag's length, so it fits an int4 (Postgres
                // has no substr(text, int, bigint)).
                let chars = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
                qb.push(" AND substr(j.value, 1, ").push_bind(chars);
                qb.push(") = ").push_bind(prefix.as_str());
            }
            qb.push(" GROUP BY j.value HAVING COUNT(DISTINCT e.id) >= ");
            qb.push_bind(query.min_count);
            qb.build().fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(tag, n)| TagCount {
                tag,
                count: unsigned(n),
            })
            .collect())
    }

    /// Writes an update computed by the domain. `before` guards against a concurrent
    /// change: the row must still have its hash and signing state.
    pub async fn update_entry(
        &self,
        before: &Entry,
        after: &Entry,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let changed = query(
                "UPDATE diary_entries SET title = $1, content = $2, tags = $3, \
                 entry_type = $4, importance = $5, injection_risk = $6, access_count = $7, \
                 last_accessed_at = $8, content_hash = $9, updated_at = $10 \
                 WHERE id = $11 AND content_hash = $12 AND (content_signature IS NULL) = $13",
            )
            .bind(&after.title)
            .bind(&after.content)
            .bind(tags_to_text(after.tags.as_ref()))
            .bind(after.entry_type.as_str())
            .bind(i32::try_from(after.importance).unwrap_or(5))
            .bind(after.injection_risk)
            .bind(signed(after.access_count))
            .bind(after.last_accessed_at)
            .bind(&after.content_hash)
            .bind(after.updated_at)
            .bind(&before.id)
            .bind(&before.content_hash)
            .bind(!before.is_signed())
            .execute(tx.conn())
            .await?;
            if changed != 1 {
                return Err(IdentityError::FailedPrecondition(
                    "the entry changed while updating (signed, edited or deleted); fetch it \
                     and retry"
                        .into(),
                ));
            }
            let detail = json!({
                "content_hash": after.content_hash,
                "previous_content_hash": before.content_hash,
                "importance": after.importance,
            });
            tx.record(
                draft(actor, "update_entry", "entry", &before.id, detail),
                now,
            );
            tx.commit().await?;
            Ok(())
        })
    }

    /// Deletes a draft. A signed entry is never deleted.
    pub async fn delete_entry(
        &self,
        id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let deleted =
                query("DELETE FROM diary_entries WHERE id = $1 AND content_signature IS NULL")
                    .bind(id)
                    .execute(tx.conn())
                    .await?;
            if deleted != 1 {
                return Err(IdentityError::FailedPrecondition(
                    UNDELETABLE_MESSAGE.into(),
                ));
            }
            tx.record(draft(actor, "delete_entry", "entry", id, json!({})), now);
            tx.commit().await?;
            Ok(())
        })
    }

    /// Counts one access of each entry (search results). Not audited: a read, not a write
    /// of the entry.
    pub async fn record_access(
        &self,
        ids: &[String],
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            for id in ids {
                query(
                    "UPDATE diary_entries SET access_count = access_count + 1, \
                     last_accessed_at = $1 WHERE id = $2",
                )
                .bind(now)
                .bind(id)
                .execute(pool)
                .await?;
            }
        });
        Ok(())
    }
}

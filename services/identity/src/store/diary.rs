//! SQL for diaries, entries, signing requests, relations and the signature chain,
//! expanded once per backend by `diary_queries!`. The few spellings that differ (full-text
//! search and reading a JSON tag array) come from the backend's `dialect` module.
//!
//! Every write transaction starts by locking the audit chain head (a write), so writes are
//! serialised on both backends and SQLite never has to upgrade a read lock.

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

/// Filters of a relation list.
#[derive(Debug, Clone, Default)]
pub struct RelationFilter {
    pub entry_id: String,
    pub relation: Option<String>,
    pub status: Option<String>,
    /// as_source | as_target | both
    pub direction: &'static str,
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

/// The words of a free-text query as an FTS5 expression: each word quoted (so no
/// operator syntax leaks through), all required.
pub fn fts5_query(query: &str) -> Option<String> {
    let words: Vec<String> = query
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    if words.is_empty() {
        None
    } else {
        Some(words.join(" "))
    }
}

pub mod dialect {
    pub mod sqlite {
        use sqlx::QueryBuilder;

        /// Rows of `e.tags` as `j.value`.
        pub const TAG_ROWS: &str = "json_each(e.tags) AS j";

        pub fn push_fts_join(qb: &mut QueryBuilder<'_, sqlx::Sqlite>, query: &str) {
            let expr = super::super::fts5_query(query).unwrap_or_default();
            qb.push(
                " JOIN (SELECT entry_id, bm25(diary_entries_fts) AS score FROM diary_entries_fts \
                 WHERE diary_entries_fts MATCH ",
            );
            qb.push_bind(expr);
            qb.push(") f ON f.entry_id = e.id");
        }

        pub fn push_fts_where(_qb: &mut QueryBuilder<'_, sqlx::Sqlite>, _query: &str) {}

        pub fn push_fts_order(qb: &mut QueryBuilder<'_, sqlx::Sqlite>, _query: &str) {
            qb.push(" ORDER BY f.score ASC, e.created_at DESC, e.id DESC");
        }
    }

    pub mod postgres {
        use sqlx::QueryBuilder;

        /// Rows of `e.tags` as `j.value`.
        pub const TAG_ROWS: &str = "jsonb_array_elements_text(e.tags::jsonb) AS j(value)";

        pub fn push_fts_join(_qb: &mut QueryBuilder<'_, sqlx::Postgres>, _query: &str) {}

        pub fn push_fts_where(qb: &mut QueryBuilder<'_, sqlx::Postgres>, query: &str) {
            qb.push(" AND e.search_vector @@ plainto_tsquery('english', ");
            qb.push_bind(query.to_owned());
            qb.push(")");
        }

        pub fn push_fts_order(qb: &mut QueryBuilder<'_, sqlx::Postgres>, query: &str) {
            qb.push(" ORDER BY ts_rank(e.search_vector, plainto_tsquery('english', ");
            qb.push_bind(query.to_owned());
            qb.push(")) DESC, e.created_at DESC, e.id DESC");
        }
    }
}

macro_rules! diary_queries {
    ($module:ident, $db:ty) => {
        pub mod $module {
            use noema_core::audit::AuditDraft;
            use noema_store::audit::$module as audit;
            use serde_json::{Value, json};
            use sqlx::{QueryBuilder, Row as _};
            use time::OffsetDateTime;

            use super::dialect::$module as dialect;
            use super::{EntryFilter, RelationFilter, SignatureInput};
            use crate::domain::chain::{self, Link};
            use crate::domain::diary::{Diary, Share, ShareRole, ShareStatus, Visibility};
            use crate::domain::entry::{Entry, EntrySignature, EntryType};
            use crate::domain::relation::Relation;
            use crate::domain::signing::{RequestStatus, SigningRequest};
            use crate::domain::tag::{TagCount, TagQuery};
            use crate::error::IdentityError;
            use crate::store::is_unique_violation;

            type Db = $db;
            type Pool = sqlx::Pool<Db>;
            type DbRow = <Db as sqlx::Database>::Row;
            type Tx<'a> = sqlx::Transaction<'a, Db>;

            const DIARY_SELECT: &str = "SELECT d.id, d.owner_id, d.name, d.visibility, d.signed, \
                 d.team_id, d.created_at, d.updated_at, a.public_key AS owner_public_key \
                 FROM diaries d LEFT JOIN agents a ON a.agent_id = d.owner_id";
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
            const SHARE_COLUMNS: &str =
                "diary_id, agent_id, role, status, invited_by, created_at, updated_at";
            const REQUEST_COLUMNS: &str = "id, agent_id, message, nonce, entry_id, purpose, \
                 team_id, verification_method, status, signature, valid, created_at, expires_at, \
                 completed_at";
            const RELATION_COLUMNS: &str = "id, source_id, target_id, relation, status, \
                 source_cid_snapshot, target_cid_snapshot, created_at, updated_at";

            fn draft(
                actor: &str,
                action: &str,
                target_type: &str,
                target_id: &str,
                detail: Value,
            ) -> AuditDraft {
                AuditDraft {
                    actor: actor.to_owned(),
                    action: action.to_owned(),
                    target_id: Some(target_id.to_owned()),
                    target_type: Some(target_type.to_owned()),
                    detail: Some(detail),
                }
            }

            fn diary_from_row(row: &DbRow) -> Result<Diary, IdentityError> {
                let visibility: String = row.try_get("visibility")?;
                Ok(Diary {
                    id: row.try_get("id")?,
                    owner_id: row.try_get("owner_id")?,
                    name: row.try_get("name")?,
                    visibility: Visibility::from_stored(&visibility)?,
                    signed: row.try_get("signed")?,
                    team_id: row.try_get("team_id")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                    owner_public_key: row.try_get("owner_public_key")?,
                })
            }

            fn share_from_row(row: &DbRow) -> Result<Share, IdentityError> {
                let role: String = row.try_get("role")?;
                let status: String = row.try_get("status")?;
                Ok(Share {
                    diary_id: row.try_get("diary_id")?,
                    agent_id: row.try_get("agent_id")?,
                    role: ShareRole::parse(&role)
                        .map_err(|_| IdentityError::Corrupt(format!("share role {role:?}")))?,
                    status: ShareStatus::from_stored(&status)?,
                    invited_by: row.try_get("invited_by")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                })
            }

            fn tags_from_text(text: Option<String>) -> Result<Option<Vec<String>>, IdentityError> {
                text.map(|t| {
                    serde_json::from_str(&t)
                        .map_err(|e| IdentityError::Corrupt(format!("entry tags: {e}")))
                })
                .transpose()
            }

            fn tags_to_text(tags: Option<&Vec<String>>) -> Option<String> {
                tags.map(|t| Value::from(t.clone()).to_string())
            }

            fn entry_from_row(row: &DbRow) -> Result<Entry, IdentityError> {
                let entry_type: String = row.try_get("entry_type")?;
                let visibility: String = row.try_get("visibility")?;
                let importance: i32 = row.try_get("importance")?;
                let access_count: i64 = row.try_get("access_count")?;
                let signature: Option<String> = row.try_get("content_signature")?;
                let signed = match signature {
                    Some(signature) => {
                        let seq: Option<i64> = row.try_get("chain_seq")?;
                        let signed_at: Option<OffsetDateTime> = row.try_get("signed_at")?;
                        Some(EntrySignature {
                            signature,
                            nonce: row.try_get::<Option<String>, _>("signing_nonce")?.unwrap_or_default(),
                            signing_request_id: row
                                .try_get::<Option<String>, _>("signing_request_id")?
                                .unwrap_or_default(),
                            signed_by: row.try_get::<Option<String>, _>("signed_by")?.unwrap_or_default(),
                            signer_fingerprint: row
                                .try_get::<Option<String>, _>("signer_fingerprint")?
                                .unwrap_or_default(),
                            signed_at: signed_at.unwrap_or(OffsetDateTime::UNIX_EPOCH),
                            chain_seq: u64::try_from(seq.unwrap_or(0)).unwrap_or(0),
                            chain_prev: row.try_get::<Option<String>, _>("chain_prev")?.unwrap_or_default(),
                            chain_hash: row.try_get::<Option<String>, _>("chain_hash")?.unwrap_or_default(),
                        })
                    }
                    None => None,
                };
                Ok(Entry {
                    id: row.try_get("id")?,
                    diary_id: row.try_get("diary_id")?,
                    title: row.try_get("title")?,
                    content: row.try_get("content")?,
                    tags: tags_from_text(row.try_get("tags")?)?,
                    entry_type: EntryType::from_stored(&entry_type)?,
                    importance: u32::try_from(importance).unwrap_or(0),
                    injection_risk: row.try_get("injection_risk")?,
                    access_count: u64::try_from(access_count).unwrap_or(0),
                    last_accessed_at: row.try_get("last_accessed_at")?,
                    content_hash: row.try_get("content_hash")?,
                    signature: signed,
                    created_by: row.try_get("created_by")?,
                    creator_public_key: row.try_get("creator_public_key")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                    superseded: row.try_get("superseded")?,
                    visibility: Visibility::from_stored(&visibility)?,
                })
            }

            fn request_from_row(row: &DbRow) -> Result<SigningRequest, IdentityError> {
                let status: String = row.try_get("status")?;
                Ok(SigningRequest {
                    id: row.try_get("id")?,
                    agent_id: row.try_get("agent_id")?,
                    message: row.try_get("message")?,
                    nonce: row.try_get("nonce")?,
                    entry_id: row.try_get("entry_id")?,
                    purpose: row.try_get("purpose")?,
                    team_id: row.try_get("team_id")?,
                    verification_method: row.try_get("verification_method")?,
                    status: RequestStatus::parse(&status)
                        .map_err(|_| IdentityError::Corrupt(format!("request status {status:?}")))?,
                    signature: row.try_get("signature")?,
                    valid: row.try_get("valid")?,
                    created_at: row.try_get("created_at")?,
                    expires_at: row.try_get("expires_at")?,
                    completed_at: row.try_get("completed_at")?,
                })
            }

            fn relation_from_row(row: &DbRow) -> Result<Relation, IdentityError> {
                Ok(Relation {
                    id: row.try_get("id")?,
                    source_id: row.try_get("source_id")?,
                    target_id: row.try_get("target_id")?,
                    relation: row.try_get("relation")?,
                    status: row.try_get("status")?,
                    source_cid_snapshot: row.try_get("source_cid_snapshot")?,
                    target_cid_snapshot: row.try_get("target_cid_snapshot")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                })
            }

            // ---- diaries ------------------------------------------------------------

            pub async fn insert_diary(
                pool: &Pool,
                diary: &Diary,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                sqlx::query(
                    "INSERT INTO diaries (id, owner_id, name, visibility, signed, team_id, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&diary.id)
                .bind(&diary.owner_id)
                .bind(&diary.name)
                .bind(diary.visibility.as_str())
                .bind(diary.signed)
                .bind(&diary.team_id)
                .bind(diary.created_at)
                .bind(diary.updated_at)
                .execute(&mut *tx)
                .await?;
                let detail = json!({"name": diary.name, "visibility": diary.visibility.as_str()});
                audit::append_after(&mut tx, head, draft(actor, "create_diary", "diary", &diary.id, detail), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            pub async fn get_diary(pool: &Pool, id: &str) -> Result<Option<Diary>, IdentityError> {
                let sql = format!("{DIARY_SELECT} WHERE d.id = $1");
                let row = sqlx::query(&sql).bind(id).fetch_optional(pool).await?;
                row.as_ref().map(diary_from_row).transpose()
            }

            /// Diaries `caller` owns or holds an accepted share of; every diary for `None`.
            pub async fn list_diaries(
                pool: &Pool,
                caller: Option<&str>,
            ) -> Result<Vec<Diary>, IdentityError> {
                let sql = format!(
                    "{DIARY_SELECT} WHERE $1 = '' OR d.owner_id = $1 OR EXISTS (SELECT 1 FROM diary_shares s \
                     WHERE s.diary_id = d.id AND s.agent_id = $1 AND s.status = 'accepted') \
                     ORDER BY d.created_at DESC, d.id DESC"
                );
                let rows = sqlx::query(&sql).bind(caller.unwrap_or("")).fetch_all(pool).await?;
                rows.iter().map(diary_from_row).collect()
            }

            pub async fn update_diary(
                pool: &Pool,
                diary: &Diary,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                sqlx::query("UPDATE diaries SET name = $1, visibility = $2, updated_at = $3 WHERE id = $4")
                    .bind(&diary.name)
                    .bind(diary.visibility.as_str())
                    .bind(now)
                    .bind(&diary.id)
                    .execute(&mut *tx)
                    .await?;
                let detail = json!({"name": diary.name, "visibility": diary.visibility.as_str()});
                audit::append_after(&mut tx, head, draft(actor, "update_diary", "diary", &diary.id, detail), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            /// Deletes a diary and its draft entries; refused while it holds signed ones.
            pub async fn delete_diary(
                pool: &Pool,
                id: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<u64, IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                let signed: i64 = sqlx::query(
                    "SELECT COUNT(*) AS n FROM diary_entries WHERE diary_id = $1 AND content_signature IS NOT NULL",
                )
                .bind(id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
                if signed > 0 {
                    let noun = if signed == 1 { "entry" } else { "entries" };
                    return Err(IdentityError::FailedPrecondition(format!(
                        "Cannot delete diary: it contains {signed} signed {noun}. Delete unsigned \
                         entries individually and use entry relations (supersedes) for signed ones."
                    )));
                }
                let deleted = sqlx::query("DELETE FROM diary_entries WHERE diary_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                sqlx::query("DELETE FROM diaries WHERE id = $1").bind(id).execute(&mut *tx).await?;
                let detail = json!({"deleted_entries": deleted});
                audit::append_after(&mut tx, head, draft(actor, "delete_diary", "diary", id, detail), now).await?;
                tx.commit().await?;
                Ok(deleted)
            }

            // ---- shares -------------------------------------------------------------

            pub async fn get_share(
                pool: &Pool,
                diary_id: &str,
                agent_id: &str,
            ) -> Result<Option<Share>, IdentityError> {
                let sql = format!("SELECT {SHARE_COLUMNS} FROM diary_shares WHERE diary_id = $1 AND agent_id = $2");
                let row = sqlx::query(&sql).bind(diary_id).bind(agent_id).fetch_optional(pool).await?;
                row.as_ref().map(share_from_row).transpose()
            }

            /// Inserts or replaces the share of (diary, agent).
            pub async fn put_share(
                pool: &Pool,
                share: &Share,
                action: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                sqlx::query(
                    "INSERT INTO diary_shares (diary_id, agent_id, role, status, invited_by, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (diary_id, agent_id) DO UPDATE SET \
                     role = excluded.role, status = excluded.status, invited_by = excluded.invited_by, \
                     updated_at = excluded.updated_at",
                )
                .bind(&share.diary_id)
                .bind(&share.agent_id)
                .bind(share.role.as_str())
                .bind(share.status.as_str())
                .bind(&share.invited_by)
                .bind(share.created_at)
                .bind(share.updated_at)
                .execute(&mut *tx)
                .await?;
                let detail = json!({
                    "agent_id": share.agent_id,
                    "role": share.role.as_str(),
                    "status": share.status.as_str(),
                });
                audit::append_after(&mut tx, head, draft(actor, action, "diary", &share.diary_id, detail), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            pub async fn list_shares(
                pool: &Pool,
                diary_id: &str,
                only_agent: Option<&str>,
            ) -> Result<Vec<Share>, IdentityError> {
                let sql = format!(
                    "SELECT {SHARE_COLUMNS} FROM diary_shares WHERE diary_id = $1 AND ($2 = '' OR agent_id = $2) \
                     ORDER BY created_at, agent_id"
                );
                let rows = sqlx::query(&sql)
                    .bind(diary_id)
                    .bind(only_agent.unwrap_or(""))
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(share_from_row).collect()
            }

            // ---- entries ------------------------------------------------------------

            async fn chain_head(tx: &mut Tx<'_>, agent_id: &str) -> Result<Option<(u64, String)>, IdentityError> {
                let row = sqlx::query("SELECT seq, head_hash FROM signature_chain_heads WHERE agent_id = $1")
                    .bind(agent_id)
                    .fetch_optional(&mut **tx)
                    .await?;
                match row {
                    Some(row) => {
                        let seq: i64 = row.try_get("seq")?;
                        Ok(Some((u64::try_from(seq).unwrap_or(0), row.try_get("head_hash")?)))
                    }
                    None => Ok(None),
                }
            }

            /// Appends the entry's signature to its signer's chain and returns the link.
            async fn extend_chain(
                tx: &mut Tx<'_>,
                signer: &str,
                entry_id: &str,
                content_hash: &str,
                signature: &str,
                now: OffsetDateTime,
            ) -> Result<Link, IdentityError> {
                let head = chain_head(tx, signer).await?;
                let link = chain::next_link(signer, head, entry_id, content_hash, signature)?;
                sqlx::query(
                    "INSERT INTO signature_chain_heads (agent_id, seq, head_hash, updated_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (agent_id) DO UPDATE SET seq = excluded.seq, head_hash = excluded.head_hash, \
                     updated_at = excluded.updated_at",
                )
                .bind(signer)
                .bind(i64::try_from(link.seq).unwrap_or(i64::MAX))
                .bind(&link.hash)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                Ok(link)
            }

            /// Inserts an entry, signed when `signing` is given (MoltNet's create flow).
            pub async fn insert_entry(
                pool: &Pool,
                entry: &Entry,
                signing: Option<&SignatureInput>,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                let link = match signing {
                    Some(s) => Some(
                        extend_chain(&mut tx, &s.signed_by, &entry.id, &entry.content_hash, &s.signature, now).await?,
                    ),
                    None => None,
                };
                let result = sqlx::query(
                    "INSERT INTO diary_entries (id, diary_id, title, content, tags, entry_type, importance, \
                     injection_risk, access_count, content_hash, content_signature, signing_nonce, \
                     signing_request_id, signed_by, signer_fingerprint, signed_at, chain_seq, chain_prev, \
                     chain_hash, created_by, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)",
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
                .bind(link.as_ref().map(|l| i64::try_from(l.seq).unwrap_or(i64::MAX)))
                .bind(link.as_ref().map(|l| l.prev.clone()))
                .bind(link.as_ref().map(|l| l.hash.clone()))
                .bind(&entry.created_by)
                .bind(entry.created_at)
                .bind(entry.updated_at)
                .execute(&mut *tx)
                .await;
                match result {
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
                audit::append_after(&mut tx, head, draft(actor, "create_entry", "entry", &entry.id, detail), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            pub async fn get_entry(pool: &Pool, id: &str) -> Result<Option<Entry>, IdentityError> {
                let sql = format!("{ENTRY_SELECT} WHERE e.id = $1");
                let row = sqlx::query(&sql).bind(id).fetch_optional(pool).await?;
                row.as_ref().map(entry_from_row).transpose()
            }

            fn push_filters<'a>(qb: &mut QueryBuilder<'a, Db>, filter: &'a EntryFilter) {
                qb.push(" WHERE 1 = 1");
                if let Some(diary_id) = &filter.diary_id {
                    qb.push(" AND e.diary_id = ").push_bind(diary_id.as_str());
                }
                if let Some(reader) = &filter.reader {
                    qb.push(" AND (d.owner_id = ").push_bind(reader.as_str());
                    qb.push(" OR EXISTS (SELECT 1 FROM diary_shares s WHERE s.diary_id = d.id AND s.status = 'accepted' AND s.agent_id = ");
                    qb.push_bind(reader.as_str()).push("))");
                }
                if !filter.ids.is_empty() {
                    qb.push(" AND e.id IN (");
                    let mut list = qb.separated(", ");
                    for id in &filter.ids {
                        list.push_bind(id.as_str());
                    }
                    qb.push(")");
                }
                if !filter.entry_types.is_empty() {
                    qb.push(" AND e.entry_type IN (");
                    let mut list = qb.separated(", ");
                    for t in &filter.entry_types {
                        list.push_bind(t.as_str());
                    }
                    qb.push(")");
                }
                for tag in &filter.tags {
                    qb.push(format!(" AND EXISTS (SELECT 1 FROM {} WHERE j.value = ", dialect::TAG_ROWS));
                    qb.push_bind(tag.as_str()).push(")");
                }
                for tag in &filter.exclude_tags {
                    qb.push(format!(" AND NOT EXISTS (SELECT 1 FROM {} WHERE j.value = ", dialect::TAG_ROWS));
                    qb.push_bind(tag.as_str()).push(")");
                }
                if filter.exclude_superseded {
                    qb.push(
                        " AND NOT EXISTS (SELECT 1 FROM entry_relations x WHERE x.target_id = e.id \
                         AND x.relation = 'supersedes' AND x.status = 'accepted')",
                    );
                }
                if let Some(query) = &filter.query {
                    dialect::push_fts_where(qb, query);
                }
            }

            /// Entries matching `filter`, a page of them and the total count.
            pub async fn list_entries(
                pool: &Pool,
                filter: &EntryFilter,
            ) -> Result<(Vec<Entry>, u64), IdentityError> {
                let mut count = QueryBuilder::<Db>::new(
                    "SELECT COUNT(*) AS n FROM diary_entries e JOIN diaries d ON d.id = e.diary_id",
                );
                if let Some(query) = &filter.query {
                    dialect::push_fts_join(&mut count, query);
                }
                push_filters(&mut count, filter);
                let total: i64 = count.build().fetch_one(pool).await?.try_get("n")?;

                let mut page = QueryBuilder::<Db>::new(ENTRY_SELECT);
                if let Some(query) = &filter.query {
                    dialect::push_fts_join(&mut page, query);
                }
                push_filters(&mut page, filter);
                match &filter.query {
                    Some(query) => dialect::push_fts_order(&mut page, query),
                    None => {
                        page.push(" ORDER BY e.created_at DESC, e.id DESC");
                    }
                }
                page.push(" LIMIT ").push_bind(filter.limit);
                page.push(" OFFSET ").push_bind(filter.offset);
                let rows = page.build().fetch_all(pool).await?;
                let entries = rows.iter().map(entry_from_row).collect::<Result<Vec<_>, _>>()?;
                Ok((entries, u64::try_from(total).unwrap_or(0)))
            }

            /// Each tag of the diary's entries (of `entry_types` when not empty) with the
            /// number of entries carrying it, unordered (the domain orders them). The prefix
            /// is compared with `substr` rather than `LIKE`, so `%` and `_` in it match only
            /// themselves, and case-sensitively on both backends.
            pub async fn list_tags(
                pool: &Pool,
                diary_id: &str,
                query: &TagQuery,
                entry_types: &[String],
            ) -> Result<Vec<TagCount>, IdentityError> {
                let mut qb = QueryBuilder::<Db>::new(format!(
                    "SELECT j.value AS tag, COUNT(DISTINCT e.id) AS n FROM diary_entries e, {} \
                     WHERE e.diary_id = ",
                    dialect::TAG_ROWS
                ));
                qb.push_bind(diary_id);
                if !entry_types.is_empty() {
                    qb.push(" AND e.entry_type IN (");
                    let mut list = qb.separated(", ");
                    for t in entry_types {
                        list.push_bind(t.as_str());
                    }
                    qb.push(")");
                }
                if let Some(prefix) = &query.prefix {
                    // The domain caps a prefix at a tag's length, so it fits an int4
                    // (Postgres has no substr(text, int, bigint)).
                    let chars = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
                    qb.push(" AND substr(j.value, 1, ").push_bind(chars);
                    qb.push(") = ").push_bind(prefix.as_str());
                }
                qb.push(" GROUP BY j.value HAVING COUNT(DISTINCT e.id) >= ");
                qb.push_bind(query.min_count);
                let rows = qb.build().fetch_all(pool).await?;
                rows.iter()
                    .map(|row| -> Result<TagCount, IdentityError> {
                        let n: i64 = row.try_get("n")?;
                        Ok(TagCount {
                            tag: row.try_get("tag")?,
                            count: u64::try_from(n).unwrap_or(0),
                        })
                    })
                    .collect()
            }

            /// Writes an update computed by the domain. `before` guards against a concurrent
            /// change: the row must still have its hash and signing state.
            pub async fn update_entry(
                pool: &Pool,
                before: &Entry,
                after: &Entry,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                let done = sqlx::query(
                    "UPDATE diary_entries SET title = $1, content = $2, tags = $3, entry_type = $4, \
                     importance = $5, injection_risk = $6, access_count = $7, last_accessed_at = $8, \
                     content_hash = $9, updated_at = $10 WHERE id = $11 AND content_hash = $12 AND \
                     (content_signature IS NULL) = $13",
                )
                .bind(&after.title)
                .bind(&after.content)
                .bind(tags_to_text(after.tags.as_ref()))
                .bind(after.entry_type.as_str())
                .bind(i32::try_from(after.importance).unwrap_or(5))
                .bind(after.injection_risk)
                .bind(i64::try_from(after.access_count).unwrap_or(i64::MAX))
                .bind(after.last_accessed_at)
                .bind(&after.content_hash)
                .bind(after.updated_at)
                .bind(&before.id)
                .bind(&before.content_hash)
                .bind(!before.is_signed())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    return Err(IdentityError::FailedPrecondition(
                        "the entry changed while updating (signed, edited or deleted); fetch it and retry".into(),
                    ));
                }
                let detail = json!({
                    "content_hash": after.content_hash,
                    "previous_content_hash": before.content_hash,
                    "importance": after.importance,
                });
                audit::append_after(&mut tx, head, draft(actor, "update_entry", "entry", &before.id, detail), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            /// Deletes a draft. A signed entry is never deleted.
            pub async fn delete_entry(
                pool: &Pool,
                id: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                let done = sqlx::query("DELETE FROM diary_entries WHERE id = $1 AND content_signature IS NULL")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                if done.rows_affected() != 1 {
                    return Err(IdentityError::FailedPrecondition(
                        crate::domain::entry::UNDELETABLE_MESSAGE.into(),
                    ));
                }
                audit::append_after(&mut tx, head, draft(actor, "delete_entry", "entry", id, json!({})), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            /// Counts one access of each entry (search results).
            pub async fn record_access(
                pool: &Pool,
                ids: &[String],
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                for id in ids {
                    sqlx::query(
                        "UPDATE diary_entries SET access_count = access_count + 1, last_accessed_at = $1 WHERE id = $2",
                    )
                    .bind(now)
                    .bind(id)
                    .execute(pool)
                    .await?;
                }
                Ok(())
            }

            // ---- signing requests ---------------------------------------------------

            /// Stores a new pending request unless the agent already holds `max_pending`
            /// unexpired ones; then returns the seconds until the earliest expires.
            pub async fn insert_signing_request(
                pool: &Pool,
                request: &SigningRequest,
                max_pending: u64,
                now: OffsetDateTime,
            ) -> Result<Result<(), i64>, IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                sqlx::query(
                    "UPDATE signing_requests SET status = 'expired' WHERE agent_id = $1 AND status = 'pending' \
                     AND expires_at <= $2",
                )
                .bind(&request.agent_id)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let rows = sqlx::query(
                    "SELECT expires_at FROM signing_requests WHERE agent_id = $1 AND status = 'pending' \
                     ORDER BY expires_at",
                )
                .bind(&request.agent_id)
                .fetch_all(&mut *tx)
                .await?;
                if rows.len() as u64 >= max_pending {
                    let earliest: OffsetDateTime = match rows.first() {
                        Some(row) => row.try_get("expires_at")?,
                        None => now,
                    };
                    let wait = (earliest - now).whole_seconds().max(1);
                    return Ok(Err(wait));
                }
                sqlx::query(
                    "INSERT INTO signing_requests (id, agent_id, message, nonce, entry_id, purpose, team_id, \
                     verification_method, status, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10)",
                )
                .bind(&request.id)
                .bind(&request.agent_id)
                .bind(&request.message)
                .bind(&request.nonce)
                .bind(&request.entry_id)
                .bind(&request.purpose)
                .bind(&request.team_id)
                .bind(&request.verification_method)
                .bind(request.created_at)
                .bind(request.expires_at)
                .execute(&mut *tx)
                .await?;
                let detail = json!({
                    "agent_id": request.agent_id,
                    "entry_id": request.entry_id,
                    "message_sha256": noema_core::content_id::sha256_hex(request.message.as_bytes()),
                });
                audit::append_after(
                    &mut tx,
                    head,
                    draft(&request.agent_id, "create_signing_request", "signing_request", &request.id, detail),
                    now,
                )
                .await?;
                tx.commit().await?;
                Ok(Ok(()))
            }

            pub async fn get_signing_request(
                pool: &Pool,
                id: &str,
            ) -> Result<Option<SigningRequest>, IdentityError> {
                let sql = format!("SELECT {REQUEST_COLUMNS} FROM signing_requests WHERE id = $1");
                let row = sqlx::query(&sql).bind(id).fetch_optional(pool).await?;
                row.as_ref().map(request_from_row).transpose()
            }

            /// The newest completed request carrying `signature`.
            pub async fn signing_request_by_signature(
                pool: &Pool,
                signature: &str,
            ) -> Result<Option<SigningRequest>, IdentityError> {
                let sql = format!(
                    "SELECT {REQUEST_COLUMNS} FROM signing_requests WHERE signature = $1 AND status = 'completed' \
                     ORDER BY completed_at DESC LIMIT 1"
                );
                let row = sqlx::query(&sql).bind(signature).fetch_optional(pool).await?;
                row.as_ref().map(request_from_row).transpose()
            }

            /// An agent's requests, newest first, filtered by stored status.
            pub async fn list_signing_requests(
                pool: &Pool,
                agent_id: &str,
                statuses: &[String],
                limit: i64,
                offset: i64,
            ) -> Result<(Vec<SigningRequest>, u64), IdentityError> {
                let push_where = |qb: &mut QueryBuilder<'_, Db>| {
                    qb.push(" WHERE agent_id = ").push_bind(agent_id.to_owned());
                    if !statuses.is_empty() {
                        qb.push(" AND status IN (");
                        let mut list = qb.separated(", ");
                        for s in statuses {
                            list.push_bind(s.clone());
                        }
                        qb.push(")");
                    }
                };
                let mut count = QueryBuilder::<Db>::new("SELECT COUNT(*) AS n FROM signing_requests");
                push_where(&mut count);
                let total: i64 = count.build().fetch_one(pool).await?.try_get("n")?;
                let mut page = QueryBuilder::<Db>::new(format!("SELECT {REQUEST_COLUMNS} FROM signing_requests"));
                push_where(&mut page);
                page.push(" ORDER BY created_at DESC, id DESC LIMIT ").push_bind(limit);
                page.push(" OFFSET ").push_bind(offset);
                let rows = page.build().fetch_all(pool).await?;
                let requests = rows.iter().map(request_from_row).collect::<Result<Vec<_>, _>>()?;
                Ok((requests, u64::try_from(total).unwrap_or(0)))
            }

            async fn complete_request(
                tx: &mut Tx<'_>,
                id: &str,
                signature: &str,
                valid: bool,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let done = sqlx::query(
                    "UPDATE signing_requests SET status = 'completed', signature = $1, valid = $2, \
                     completed_at = $3 WHERE id = $4 AND status = 'pending' AND expires_at > $3",
                )
                .bind(signature)
                .bind(valid)
                .bind(now)
                .bind(id)
                .execute(&mut **tx)
                .await?;
                if done.rows_affected() != 1 {
                    return Err(IdentityError::SigningRequestCompleted);
                }
                Ok(())
            }

            /// Completes a message request with its verification result (one shot).
            pub async fn complete_message_request(
                pool: &Pool,
                request: &SigningRequest,
                signature: &str,
                valid: bool,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                complete_request(&mut tx, &request.id, signature, valid, now).await?;
                let detail = json!({"valid": valid, "signature": signature});
                audit::append_after(
                    &mut tx,
                    head,
                    draft(&request.agent_id, "submit_signature", "signing_request", &request.id, detail),
                    now,
                )
                .await?;
                tx.commit().await?;
                Ok(())
            }

            /// Signs draft `entry_id` with a verified signature: completes the request,
            /// stores the signature and nonce on the entry (only if it still has the
            /// prepared CID and is unsigned) and extends the signer's chain, atomically.
            pub async fn sign_entry(
                pool: &Pool,
                request: &SigningRequest,
                entry_id: &str,
                signing: &SignatureInput,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                complete_request(&mut tx, &request.id, &signing.signature, true, now).await?;
                let link = extend_chain(&mut tx, &signing.signed_by, entry_id, &request.message, &signing.signature, now)
                    .await?;
                let done = sqlx::query(
                    "UPDATE diary_entries SET content_signature = $1, signing_nonce = $2, signing_request_id = $3, \
                     signed_by = $4, signer_fingerprint = $5, signed_at = $6, chain_seq = $7, chain_prev = $8, \
                     chain_hash = $9, updated_at = $6 WHERE id = $10 AND content_signature IS NULL AND content_hash = $11",
                )
                .bind(&signing.signature)
                .bind(&signing.nonce)
                .bind(&signing.request_id)
                .bind(&signing.signed_by)
                .bind(&signing.signer_fingerprint)
                .bind(now)
                .bind(i64::try_from(link.seq).unwrap_or(i64::MAX))
                .bind(&link.prev)
                .bind(&link.hash)
                .bind(entry_id)
                .bind(&request.message)
                .execute(&mut *tx)
                .await;
                match done {
                    Ok(done) if done.rows_affected() == 1 => {}
                    Ok(_) => {
                        return Err(IdentityError::FailedPrecondition(
                            "the entry changed since the signing request was prepared (edited, signed or \
                             deleted); prepare a new signing request for its current contentHash".into(),
                        ));
                    }
                    Err(err) if is_unique_violation(&err) => return Err(IdentityError::SignatureReused),
                    Err(err) => return Err(err.into()),
                }
                let detail = json!({
                    "content_hash": request.message,
                    "signature": signing.signature,
                    "signing_request_id": request.id,
                    "chain_seq": link.seq,
                    "chain_hash": link.hash,
                });
                audit::append_after(&mut tx, head, draft(&signing.signed_by, "sign_entry", "entry", entry_id, detail), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            /// The key `agent_id` held with `fingerprint` (current or rotated away).
            pub async fn historic_key(
                pool: &Pool,
                agent_id: &str,
                fingerprint: &str,
            ) -> Result<Option<String>, IdentityError> {
                let row = sqlx::query(
                    "SELECT public_key FROM agent_key_history WHERE agent_id = $1 AND fingerprint = $2 \
                     ORDER BY key_version DESC LIMIT 1",
                )
                .bind(agent_id)
                .bind(fingerprint)
                .fetch_optional(pool)
                .await?;
                row.map(|r| r.try_get("public_key")).transpose().map_err(Into::into)
            }

            // ---- signature chain ----------------------------------------------------

            pub async fn chain_links(
                pool: &Pool,
                agent_id: &str,
            ) -> Result<(Vec<Link>, Option<(u64, String)>), IdentityError> {
                let rows = sqlx::query(
                    "SELECT id, content_hash, content_signature, chain_seq, chain_prev, chain_hash \
                     FROM diary_entries WHERE signed_by = $1 AND chain_seq IS NOT NULL ORDER BY chain_seq, id",
                )
                .bind(agent_id)
                .fetch_all(pool)
                .await?;
                let mut links = Vec::with_capacity(rows.len());
                for row in &rows {
                    let seq: i64 = row.try_get("chain_seq")?;
                    links.push(Link {
                        entry_id: row.try_get("id")?,
                        content_hash: row.try_get("content_hash")?,
                        signature: row.try_get::<Option<String>, _>("content_signature")?.unwrap_or_default(),
                        seq: u64::try_from(seq).unwrap_or(0),
                        prev: row.try_get::<Option<String>, _>("chain_prev")?.unwrap_or_default(),
                        hash: row.try_get::<Option<String>, _>("chain_hash")?.unwrap_or_default(),
                    });
                }
                let head_row = sqlx::query("SELECT seq, head_hash FROM signature_chain_heads WHERE agent_id = $1")
                    .bind(agent_id)
                    .fetch_optional(pool)
                    .await?;
                let head = match head_row {
                    Some(row) => {
                        let seq: i64 = row.try_get("seq")?;
                        Some((u64::try_from(seq).unwrap_or(0), row.try_get("head_hash")?))
                    }
                    None => None,
                };
                Ok((links, head))
            }

            // ---- relations ----------------------------------------------------------

            /// Inserts a relation, or returns the existing one for the same triple.
            pub async fn insert_relation(
                pool: &Pool,
                relation: &Relation,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(Relation, bool), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                let inserted = sqlx::query(
                    "INSERT INTO entry_relations (id, source_id, target_id, relation, status, source_cid_snapshot, \
                     target_cid_snapshot, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                     ON CONFLICT (source_id, target_id, relation) DO NOTHING",
                )
                .bind(&relation.id)
                .bind(&relation.source_id)
                .bind(&relation.target_id)
                .bind(&relation.relation)
                .bind(&relation.status)
                .bind(&relation.source_cid_snapshot)
                .bind(&relation.target_cid_snapshot)
                .bind(relation.created_at)
                .bind(relation.updated_at)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1;
                let sql = format!(
                    "SELECT {RELATION_COLUMNS} FROM entry_relations WHERE source_id = $1 AND target_id = $2 AND relation = $3"
                );
                let row = sqlx::query(&sql)
                    .bind(&relation.source_id)
                    .bind(&relation.target_id)
                    .bind(&relation.relation)
                    .fetch_one(&mut *tx)
                    .await?;
                let stored = relation_from_row(&row)?;
                if inserted {
                    let detail = json!({
                        "source_id": stored.source_id,
                        "target_id": stored.target_id,
                        "relation": stored.relation,
                        "status": stored.status,
                    });
                    audit::append_after(&mut tx, head, draft(actor, "create_relation", "relation", &stored.id, detail), now)
                        .await?;
                }
                tx.commit().await?;
                Ok((stored, inserted))
            }

            pub async fn get_relation(pool: &Pool, id: &str) -> Result<Option<Relation>, IdentityError> {
                let sql = format!("SELECT {RELATION_COLUMNS} FROM entry_relations WHERE id = $1");
                let row = sqlx::query(&sql).bind(id).fetch_optional(pool).await?;
                row.as_ref().map(relation_from_row).transpose()
            }

            pub async fn list_relations(
                pool: &Pool,
                filter: &RelationFilter,
            ) -> Result<(Vec<Relation>, u64), IdentityError> {
                let push_where = |qb: &mut QueryBuilder<'_, Db>| {
                    match filter.direction {
                        "as_source" => {
                            qb.push(" WHERE source_id = ").push_bind(filter.entry_id.clone());
                        }
                        "as_target" => {
                            qb.push(" WHERE target_id = ").push_bind(filter.entry_id.clone());
                        }
                        _ => {
                            qb.push(" WHERE (source_id = ").push_bind(filter.entry_id.clone());
                            qb.push(" OR target_id = ").push_bind(filter.entry_id.clone()).push(")");
                        }
                    }
                    if let Some(relation) = &filter.relation {
                        qb.push(" AND relation = ").push_bind(relation.clone());
                    }
                    if let Some(status) = &filter.status {
                        qb.push(" AND status = ").push_bind(status.clone());
                    }
                };
                let mut count = QueryBuilder::<Db>::new("SELECT COUNT(*) AS n FROM entry_relations");
                push_where(&mut count);
                let total: i64 = count.build().fetch_one(pool).await?.try_get("n")?;
                let mut page = QueryBuilder::<Db>::new(format!("SELECT {RELATION_COLUMNS} FROM entry_relations"));
                push_where(&mut page);
                page.push(" ORDER BY created_at DESC, id DESC LIMIT ").push_bind(filter.limit);
                page.push(" OFFSET ").push_bind(filter.offset);
                let rows = page.build().fetch_all(pool).await?;
                let relations = rows.iter().map(relation_from_row).collect::<Result<Vec<_>, _>>()?;
                Ok((relations, u64::try_from(total).unwrap_or(0)))
            }

            /// One level of a relation walk: every relation with source or target in
            /// `ids`, optionally of one status, newest first (ties by id descending).
            pub async fn relations_touching(
                pool: &Pool,
                ids: &[String],
                status: Option<&str>,
            ) -> Result<Vec<Relation>, IdentityError> {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut qb = QueryBuilder::<Db>::new(format!("SELECT {RELATION_COLUMNS} FROM entry_relations WHERE (source_id IN ("));
                let mut list = qb.separated(", ");
                for id in ids {
                    list.push_bind(id.clone());
                }
                qb.push(") OR target_id IN (");
                let mut list = qb.separated(", ");
                for id in ids {
                    list.push_bind(id.clone());
                }
                qb.push("))");
                if let Some(status) = status {
                    qb.push(" AND status = ").push_bind(status.to_owned());
                }
                qb.push(" ORDER BY created_at DESC, id DESC");
                let rows = qb.build().fetch_all(pool).await?;
                rows.iter().map(relation_from_row).collect()
            }

            pub async fn update_relation_status(
                pool: &Pool,
                id: &str,
                status: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                sqlx::query("UPDATE entry_relations SET status = $1, updated_at = $2 WHERE id = $3")
                    .bind(status)
                    .bind(now)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                audit::append_after(
                    &mut tx,
                    head,
                    draft(actor, "update_relation", "relation", id, json!({"status": status})),
                    now,
                )
                .await?;
                tx.commit().await?;
                Ok(())
            }

            pub async fn delete_relation(
                pool: &Pool,
                id: &str,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<(), IdentityError> {
                let mut tx = pool.begin().await?;
                let head = audit::lock_head(&mut tx).await?;
                sqlx::query("DELETE FROM entry_relations WHERE id = $1").bind(id).execute(&mut *tx).await?;
                audit::append_after(&mut tx, head, draft(actor, "delete_relation", "relation", id, json!({})), now)
                    .await?;
                tx.commit().await?;
                Ok(())
            }
        }
    };
}

diary_queries!(sqlite, sqlx::Sqlite);
diary_queries!(postgres, sqlx::Postgres);

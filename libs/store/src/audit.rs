//! SQL for the hash-chained audit log every service keeps in its own database
//! (`audit_log` + the one-row `audit_head`, created by each service's migrations).
//!
//! Appends run inside the caller's transaction: the head row's lock serialises appends
//! across connections and replicas, so each entry commits to the hash of the previous one.

use noema_core::audit::{AuditDraft, AuditEntry};

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit log query failed")]
    Database(#[from] sqlx::Error),
    #[error("audit entry cannot be canonicalised")]
    Canonical(#[from] noema_core::jcs::JcsError),
}

impl noema_core::ServiceError for AuditError {
    fn code(&self) -> noema_core::ErrorCode {
        match self {
            AuditError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                noema_core::ErrorCode::Unavailable
            }
            _ => noema_core::ErrorCode::Internal,
        }
    }
}

macro_rules! audit_queries {
    ($module:ident, $db:ty) => {
        pub mod $module {
            use serde_json::Value;
            use sqlx::Row;
            use sqlx::types::Json;
            use time::OffsetDateTime;

            use super::{AuditDraft, AuditEntry, AuditError};

            type Db = $db;
            type Tx<'a> = sqlx::Transaction<'a, Db>;

            /// Locks the chain head and returns `(last_id, last_hash)`. Make it the first
            /// write of a SQLite transaction's audit work so the write lock is taken once.
            pub async fn lock_head(tx: &mut Tx<'_>) -> Result<(i64, String), AuditError> {
                let row = sqlx::query(
                    "UPDATE audit_head SET last_id = last_id WHERE id = 1 RETURNING last_id, last_hash",
                )
                .fetch_one(&mut **tx)
                .await?;
                Ok((row.try_get("last_id")?, row.try_get("last_hash")?))
            }

            /// Appends `draft` after the locked `head` and moves the head.
            pub async fn append_after(
                tx: &mut Tx<'_>,
                head: (i64, String),
                draft: AuditDraft,
                now: OffsetDateTime,
            ) -> Result<AuditEntry, AuditError> {
                let entry = draft.chain(head.0, &head.1, now)?;
                insert_chained(tx, std::slice::from_ref(&entry)).await?;
                Ok(entry)
            }

            /// Locks the head once and appends every draft in order, with one insert and one
            /// head update however many there are: the audit side of a group commit.
            pub async fn append_all(
                tx: &mut Tx<'_>,
                drafts: Vec<(AuditDraft, OffsetDateTime)>,
            ) -> Result<Vec<AuditEntry>, AuditError> {
                if drafts.is_empty() {
                    return Ok(Vec::new());
                }
                let (mut last_id, mut last_hash) = lock_head(tx).await?;
                let mut entries = Vec::with_capacity(drafts.len());
                for (draft, now) in drafts {
                    let entry = draft.chain(last_id, &last_hash, now)?;
                    last_id = entry.id;
                    last_hash.clone_from(&entry.hash);
                    entries.push(entry);
                }
                insert_chained(tx, &entries).await?;
                Ok(entries)
            }

            /// Inserts `entries`, chained in order after the locked head, and moves the head
            /// to the last of them.
            async fn insert_chained(tx: &mut Tx<'_>, entries: &[AuditEntry]) -> Result<(), AuditError> {
                let Some(last) = entries.last() else {
                    return Ok(());
                };
                let mut insert = sqlx::QueryBuilder::<Db>::new(
                    "INSERT INTO audit_log \
                     (id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash) ",
                );
                insert.push_values(entries, |mut row, entry| {
                    row.push_bind(entry.id)
                        .push_bind(entry.occurred_at)
                        .push_bind(&entry.actor)
                        .push_bind(&entry.action)
                        .push_bind(&entry.target_id)
                        .push_bind(&entry.target_type)
                        .push_bind(entry.detail.clone().map(Json))
                        .push_bind(&entry.prev_hash)
                        .push_bind(&entry.hash);
                });
                insert.build().execute(&mut **tx).await?;
                sqlx::query("UPDATE audit_head SET last_id = $1, last_hash = $2 WHERE id = 1")
                    .bind(last.id)
                    .bind(&last.hash)
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            /// Locks the head and appends one entry, inside the caller's transaction.
            pub async fn append(
                tx: &mut Tx<'_>,
                draft: AuditDraft,
                now: OffsetDateTime,
            ) -> Result<AuditEntry, AuditError> {
                let head = lock_head(tx).await?;
                append_after(tx, head, draft, now).await
            }

            /// Writes `draft` as the chain's first entry if the log is empty. Safe to race.
            pub async fn append_if_empty(
                pool: &sqlx::Pool<Db>,
                draft: AuditDraft,
                now: OffsetDateTime,
            ) -> Result<(), AuditError> {
                let mut tx = pool.begin().await?;
                let head = lock_head(&mut tx).await?;
                if head.0 == 0 {
                    append_after(&mut tx, head, draft, now).await?;
                }
                tx.commit().await?;
                Ok(())
            }

            fn entry_from_row(row: &<Db as sqlx::Database>::Row) -> Result<AuditEntry, AuditError> {
                let detail: Option<Json<Value>> = row.try_get("detail")?;
                Ok(AuditEntry {
                    id: row.try_get("id")?,
                    occurred_at: row.try_get("occurred_at")?,
                    actor: row.try_get("actor")?,
                    action: row.try_get("action")?,
                    target_id: row.try_get("target_id")?,
                    target_type: row.try_get("target_type")?,
                    detail: detail.map(|d| d.0),
                    prev_hash: row.try_get("prev_hash")?,
                    hash: row.try_get("hash")?,
                })
            }

            /// Entries newest first, strictly older than `before_id` when given.
            pub async fn list_newest_first(
                pool: &sqlx::Pool<Db>,
                before_id: Option<i64>,
                limit: i64,
            ) -> Result<Vec<AuditEntry>, AuditError> {
                let rows = sqlx::query(
                    "SELECT id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash \
                     FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2",
                )
                .bind(before_id.unwrap_or(i64::MAX))
                .bind(limit)
                .fetch_all(pool)
                .await?;
                rows.iter().map(entry_from_row).collect()
            }

            /// Entries oldest first, strictly newer than `after_id`: for chain verification.
            pub async fn list_oldest_first(
                pool: &sqlx::Pool<Db>,
                after_id: i64,
                limit: i64,
            ) -> Result<Vec<AuditEntry>, AuditError> {
                let rows = sqlx::query(
                    "SELECT id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash \
                     FROM audit_log WHERE id > $1 ORDER BY id ASC LIMIT $2",
                )
                .bind(after_id)
                .bind(limit)
                .fetch_all(pool)
                .await?;
                rows.iter().map(entry_from_row).collect()
            }
        }
    };
}

audit_queries!(sqlite, sqlx::Sqlite);
audit_queries!(postgres, sqlx::Postgres);

/// Backend-independent reads of a service's audit log.
impl crate::Database {
    pub async fn audit_newest_first(
        &self,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, AuditError> {
        match self {
            crate::Database::Sqlite(pool) => {
                sqlite::list_newest_first(pool, before_id, limit).await
            }
            crate::Database::Postgres(pool) => {
                postgres::list_newest_first(pool, before_id, limit).await
            }
        }
    }

    pub async fn audit_oldest_first(
        &self,
        after_id: i64,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, AuditError> {
        match self {
            crate::Database::Sqlite(pool) => sqlite::list_oldest_first(pool, after_id, limit).await,
            crate::Database::Postgres(pool) => {
                postgres::list_oldest_first(pool, after_id, limit).await
            }
        }
    }

    /// Writes the chain's first entry if the log is empty.
    pub async fn audit_init(&self, draft: AuditDraft) -> Result<(), AuditError> {
        let now = time::OffsetDateTime::now_utc();
        match self {
            crate::Database::Sqlite(pool) => sqlite::append_if_empty(pool, draft, now).await,
            crate::Database::Postgres(pool) => postgres::append_if_empty(pool, draft, now).await,
        }
    }
}

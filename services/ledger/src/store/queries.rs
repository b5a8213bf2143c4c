//! The ledger's SQL, expanded once per backend by `backend_queries!`.

macro_rules! backend_queries {
    ($module:ident, $db:ty) => {
        pub mod $module {
            use serde_json::Value;
            use sqlx::Row;
            use sqlx::types::Json;
            use time::OffsetDateTime;

            use crate::domain::audit::{AuditDraft, AuditEntry};
            use crate::domain::mode::{SystemMode, SystemState};
            use crate::error::LedgerError;

            type Db = $db;
            type Pool = sqlx::Pool<Db>;
            type Tx<'a> = sqlx::Transaction<'a, Db>;

            /// Takes the chain head's row lock (first statement of the transaction, so
            /// SQLite takes its write lock at once) and returns `(last_id, last_hash)`.
            async fn lock_chain_head(tx: &mut Tx<'_>) -> Result<(i64, String), LedgerError> {
                let row = sqlx::query(
                    "UPDATE audit_head SET last_id = last_id WHERE id = 1 RETURNING last_id, last_hash",
                )
                .fetch_one(&mut **tx)
                .await?;
                Ok((row.try_get("last_id")?, row.try_get("last_hash")?))
            }

            /// Appends one entry after the locked head and moves the head.
            async fn append(
                tx: &mut Tx<'_>,
                head: (i64, String),
                draft: AuditDraft,
                now: OffsetDateTime,
            ) -> Result<AuditEntry, LedgerError> {
                let entry = draft.chain(head.0, &head.1, now)?;
                sqlx::query(
                    "INSERT INTO audit_log \
                     (id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(entry.id)
                .bind(entry.occurred_at)
                .bind(&entry.actor)
                .bind(&entry.action)
                .bind(&entry.target_id)
                .bind(&entry.target_type)
                .bind(entry.detail.clone().map(Json))
                .bind(&entry.prev_hash)
                .bind(&entry.hash)
                .execute(&mut **tx)
                .await?;
                sqlx::query("UPDATE audit_head SET last_id = $1, last_hash = $2 WHERE id = 1")
                    .bind(entry.id)
                    .bind(&entry.hash)
                    .execute(&mut **tx)
                    .await?;
                Ok(entry)
            }

            pub async fn append_if_empty(
                pool: &Pool,
                draft: AuditDraft,
                now: OffsetDateTime,
            ) -> Result<(), LedgerError> {
                let mut tx = pool.begin().await?;
                let head = lock_chain_head(&mut tx).await?;
                if head.0 == 0 {
                    append(&mut tx, head, draft, now).await?;
                }
                tx.commit().await?;
                Ok(())
            }

            fn state_from_row(row: &<Db as sqlx::Database>::Row) -> Result<SystemState, LedgerError> {
                let mode: String = row.try_get("mode")?;
                Ok(SystemState {
                    mode: mode.parse().map_err(LedgerError::Corrupt)?,
                    changed_by: row.try_get("changed_by")?,
                    changed_at: row.try_get("changed_at")?,
                })
            }

            pub async fn system_state(pool: &Pool) -> Result<SystemState, LedgerError> {
                let row = sqlx::query("SELECT mode, changed_by, changed_at FROM system_state WHERE id = 1")
                    .fetch_one(pool)
                    .await?;
                state_from_row(&row)
            }

            pub async fn set_mode(
                pool: &Pool,
                mode: SystemMode,
                actor: &str,
                now: OffsetDateTime,
            ) -> Result<SystemState, LedgerError> {
                let mut tx = pool.begin().await?;
                let row = sqlx::query(
                    "UPDATE system_state SET mode = $1, changed_by = $2, changed_at = $3 \
                     WHERE id = 1 RETURNING mode, changed_by, changed_at",
                )
                .bind(mode.as_str())
                .bind(actor)
                .bind(now.replace_nanosecond(0).unwrap_or(now))
                .fetch_one(&mut *tx)
                .await?;
                let state = state_from_row(&row)?;
                let head = lock_chain_head(&mut tx).await?;
                let draft = AuditDraft {
                    actor: actor.to_owned(),
                    action: mode.transition_action().to_owned(),
                    target_id: None,
                    target_type: Some("system_state".to_owned()),
                    detail: Some(serde_json::json!({ "mode": mode.as_str() })),
                };
                append(&mut tx, head, draft, now).await?;
                tx.commit().await?;
                Ok(state)
            }

            fn entry_from_row(row: &<Db as sqlx::Database>::Row) -> Result<AuditEntry, LedgerError> {
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

            const AUDIT_COLUMNS: &str =
                "id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash";

            pub async fn list_audit(
                pool: &Pool,
                before_id: Option<i64>,
                limit: i64,
            ) -> Result<Vec<AuditEntry>, LedgerError> {
                let sql = format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2"
                );
                let rows = sqlx::query(&sql)
                    .bind(before_id.unwrap_or(i64::MAX))
                    .bind(limit)
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(entry_from_row).collect()
            }

            pub async fn audit_ascending(
                pool: &Pool,
                after_id: i64,
                limit: i64,
            ) -> Result<Vec<AuditEntry>, LedgerError> {
                let sql = format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id > $1 ORDER BY id ASC LIMIT $2"
                );
                let rows = sqlx::query(&sql)
                    .bind(after_id)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(entry_from_row).collect()
            }
        }
    };
}

backend_queries!(sqlite, sqlx::Sqlite);
backend_queries!(postgres, sqlx::Postgres);

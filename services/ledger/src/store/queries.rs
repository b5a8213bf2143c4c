//! The ledger's SQL, expanded once per backend by `backend_queries!`.

macro_rules! backend_queries {
    ($module:ident, $db:ty) => {
        pub mod $module {
            use noema_core::audit::AuditDraft;
            use noema_store::audit::$module as audit;
            use sqlx::Row;
            use time::OffsetDateTime;

            use crate::domain::mode::{SystemMode, SystemState};
            use crate::error::LedgerError;

            type Db = $db;
            type Pool = sqlx::Pool<Db>;

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

            /// Sets the mode and appends its audit entry in one transaction.
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
                let draft = AuditDraft {
                    actor: actor.to_owned(),
                    action: mode.transition_action().to_owned(),
                    target_id: None,
                    target_type: Some("system_state".to_owned()),
                    detail: Some(serde_json::json!({ "mode": mode.as_str() })),
                };
                audit::append(&mut tx, draft, now).await?;
                tx.commit().await?;
                Ok(state)
            }
        }
    };
}

backend_queries!(sqlite, sqlx::Sqlite);
backend_queries!(postgres, sqlx::Postgres);

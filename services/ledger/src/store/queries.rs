//! The ledger's SQL, expanded once per backend by `backend_queries!`.

macro_rules! backend_queries {
    ($module:ident, $db:ty, mode_lock = $mode_lock:expr) => {
        pub mod $module {
            use noema_core::audit::AuditDraft;
            use noema_store::audit::$module as audit;
            use serde_json::{Value, json};
            use sqlx::Row as _;
            use sqlx::types::Json;
            use time::OffsetDateTime;

            use crate::domain::canonical::CanonicalObject;
            use crate::domain::mode::{SystemMode, SystemState};
            use crate::domain::reference::AgentReference;
            use crate::error::LedgerError;
            use std::collections::HashSet;

            use crate::store::{Page, Query, Write};

            type Db = $db;
            type Pool = sqlx::Pool<Db>;
            type DbRow = <Db as sqlx::Database>::Row;

            /// Reads the mode under a lock that holds until commit, so a concurrent Stop
            /// waits for this write (or this write sees STOPPED): the halt holds across
            /// replicas. SQLite takes its write lock here; Postgres a share lock.
            async fn require_running(tx: &mut sqlx::Transaction<'_, Db>) -> Result<(), LedgerError> {
                let mode: String = sqlx::query_scalar($mode_lock).fetch_one(&mut **tx).await?;
                match mode.parse::<SystemMode>() {
                    Ok(SystemMode::Running) => Ok(()),
                    Ok(SystemMode::Stopped) => Err(LedgerError::Stopped),
                    Err(e) => Err(LedgerError::Corrupt(e)),
                }
            }

            fn unix(at: OffsetDateTime) -> i64 {
                at.unix_timestamp()
            }

            fn from_unix(seconds: i64) -> Result<OffsetDateTime, LedgerError> {
                OffsetDateTime::from_unix_timestamp(seconds)
                    .map_err(|e| LedgerError::Corrupt(format!("stored time {seconds}: {e}")))
            }

            const CANONICAL_COLUMNS: &str = "id, object_type, content_type, size_bytes, created_by, \
                 created_at, created_at_text, storage_path, metadata, recorded_at";

            fn canonical_from_row(row: &DbRow) -> Result<CanonicalObject, LedgerError> {
                let metadata: Option<Json<Value>> = row.try_get("metadata")?;
                Ok(CanonicalObject {
                    id: row.try_get("id")?,
                    object_type: row.try_get("object_type")?,
                    content_type: row.try_get("content_type")?,
                    size_bytes: row.try_get("size_bytes")?,
                    created_by: row.try_get("created_by")?,
                    created_at: from_unix(row.try_get("created_at")?)?,
                    created_at_text: row.try_get("created_at_text")?,
                    storage_path: row.try_get("storage_path")?,
                    metadata: metadata.map(|m| m.0),
                    recorded_at: row.try_get("recorded_at")?,
                })
            }

            fn canonical_audit(object: &CanonicalObject, submitted_by: &str) -> AuditDraft {
                AuditDraft {
                    actor: object.created_by.clone(),
                    action: "create_canonical".into(),
                    target_id: Some(object.id.clone()),
                    target_type: Some("canonical_object".into()),
                    detail: Some(json!({
                        "object_type": object.object_type,
                        "size_bytes": object.size_bytes,
                        "storage_path": object.storage_path,
                        "submitted_by": submitted_by,
                    })),
                }
            }

            fn reference_audit(reference: &AgentReference, submitted_by: &str) -> AuditDraft {
                AuditDraft {
                    actor: reference.agent_id.clone(),
                    action: "create_reference".into(),
                    target_id: Some(reference.id.clone()),
                    target_type: Some("agent_reference".into()),
                    detail: Some(json!({
                        "canonical_object_id": reference.canonical_object_id,
                        "submitted_by": submitted_by,
                    })),
                }
            }

            /// A group commit: every write of `writes` in one transaction that checks the
            /// mode once, inserts each table's rows with one statement, and advances the
            /// audit chain once (in the order of `writes`). A write whose id exists already,
            /// in the table or earlier in the batch, is skipped and answered as a duplicate.
            /// `Err` means nothing was written.
            pub async fn insert_batch<'c>(
                conn: impl sqlx::Acquire<'c, Database = Db>,
                writes: &[Write],
            ) -> Result<Vec<Result<(), LedgerError>>, LedgerError> {
                let mut tx = conn.begin().await?;
                if let Err(err) = require_running(&mut tx).await {
                    // Now, not lazily on the connection's next use: the writer keeps its
                    // connection through STOPPED, and until this rollback its transaction
                    // holds the mode row that Resume must update.
                    tx.rollback().await?;
                    return Err(err);
                }
                let mut outcomes: Vec<Result<(), LedgerError>> = Vec::with_capacity(writes.len());
                let mut seen = HashSet::new();
                let mut canonicals = Vec::new();
                let mut references = Vec::new();
                for write in writes {
                    let first = seen.insert(write.key());
                    outcomes.push(if first { Ok(()) } else { Err(write.duplicate()) });
                    match write {
                        Write::Canonical { object, .. } if first => canonicals.push(object),
                        Write::Reference { reference, public_key, .. } if first => {
                            references.push((reference, public_key))
                        }
                        _ => {}
                    }
                }
                let mut inserted: HashSet<(&str, String)> = HashSet::new();
                if !canonicals.is_empty() {
                    let mut insert = sqlx::QueryBuilder::<Db>::new(
                        "INSERT INTO canonical_objects (id, object_type, content_type, size_bytes, created_by, \
                         created_at, created_at_text, storage_path, metadata, recorded_at) ",
                    );
                    insert.push_values(&canonicals, |mut row, object| {
                        row.push_bind(&object.id)
                            .push_bind(&object.object_type)
                            .push_bind(&object.content_type)
                            .push_bind(object.size_bytes)
                            .push_bind(&object.created_by)
                            .push_bind(unix(object.created_at))
                            .push_bind(&object.created_at_text)
                            .push_bind(&object.storage_path)
                            .push_bind(object.metadata.clone().map(Json))
                            .push_bind(object.recorded_at);
                    });
                    insert.push(" ON CONFLICT DO NOTHING RETURNING id");
                    let ids: Vec<String> = insert.build_query_scalar().fetch_all(&mut *tx).await?;
                    inserted.extend(ids.into_iter().map(|id| (Write::CANONICAL, id)));
                }
                if !references.is_empty() {
                    let mut insert = sqlx::QueryBuilder::<Db>::new(
                        "INSERT INTO agent_references (id, canonical_object_id, agent_id, created_at, \
                         signed_created_at, context, relevance, trust_weight, time_horizon, signature, \
                         public_key, metadata, recorded_at) ",
                    );
                    insert.push_values(&references, |mut row, (reference, public_key)| {
                        row.push_bind(&reference.id)
                            .push_bind(&reference.canonical_object_id)
                            .push_bind(&reference.agent_id)
                            .push_bind(unix(reference.created_at))
                            .push_bind(&reference.signed_created_at)
                            .push_bind(&reference.context)
                            .push_bind(reference.relevance)
                            .push_bind(reference.trust_weight)
                            .push_bind(&reference.time_horizon)
                            .push_bind(&reference.signature)
                            .push_bind(public_key.as_str())
                            .push_bind(reference.metadata.clone().map(Json))
                            .push_bind(reference.recorded_at);
                    });
                    insert.push(" ON CONFLICT DO NOTHING RETURNING id");
                    let ids: Vec<String> = insert.build_query_scalar().fetch_all(&mut *tx).await?;
                    inserted.extend(ids.into_iter().map(|id| (Write::REFERENCE, id)));
                }
                let mut drafts = Vec::with_capacity(inserted.len());
                for (write, outcome) in writes.iter().zip(outcomes.iter_mut()) {
                    if outcome.is_err() {
                        continue;
                    }
                    let (table, id) = write.key();
                    if !inserted.contains(&(table, id.to_owned())) {
                        *outcome = Err(write.duplicate());
                        continue;
                    }
                    drafts.push(match write {
                        Write::Canonical { object, submitted_by } => {
                            (canonical_audit(object, submitted_by), object.recorded_at)
                        }
                        Write::Reference { reference, submitted_by, .. } => {
                            (reference_audit(reference, submitted_by), reference.recorded_at)
                        }
                    });
                }
                audit::append_all(&mut tx, drafts).await?;
                tx.commit().await?;
                Ok(outcomes)
            }

            pub async fn get_canonical(pool: &Pool, id: &str) -> Result<Option<CanonicalObject>, LedgerError> {
                let sql = format!("SELECT {CANONICAL_COLUMNS} FROM canonical_objects WHERE id = $1");
                let row = sqlx::query(&sql).bind(id).fetch_optional(pool).await?;
                row.as_ref().map(canonical_from_row).transpose()
            }

            /// Newest `created_at` first (ties by id), filtered, by offset or cursor.
            pub async fn list_canonicals(
                pool: &Pool,
                query: &Query,
                page: &Page,
            ) -> Result<Vec<CanonicalObject>, LedgerError> {
                let sql = format!(
                    "SELECT {CANONICAL_COLUMNS} FROM canonical_objects \
                     WHERE ($1 = '' OR object_type = $1) AND ($2 = '' OR created_by = $2) \
                     AND created_at >= $3 AND created_at < $4 \
                     AND (created_at < $5 OR (created_at = $5 AND id < $6)) \
                     ORDER BY created_at DESC, id DESC LIMIT $7 OFFSET $8"
                );
                let rows = sqlx::query(&sql)
                    .bind(&query.kind)
                    .bind(&query.actor)
                    .bind(query.from)
                    .bind(query.until)
                    .bind(page.before.0)
                    .bind(&page.before.1)
                    .bind(i64::from(page.limit))
                    .bind(i64::from(page.offset))
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(canonical_from_row).collect()
            }

            /// Oldest first after `(created_at, id)`: for export.
            pub async fn canonicals_oldest_first(
                pool: &Pool,
                after: &(i64, String),
                limit: u32,
            ) -> Result<Vec<CanonicalObject>, LedgerError> {
                let sql = format!(
                    "SELECT {CANONICAL_COLUMNS} FROM canonical_objects \
                     WHERE created_at > $1 OR (created_at = $1 AND id > $2) \
                     ORDER BY created_at ASC, id ASC LIMIT $3"
                );
                let rows = sqlx::query(&sql)
                    .bind(after.0)
                    .bind(&after.1)
                    .bind(i64::from(limit))
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(canonical_from_row).collect()
            }

            /// `(id, storage_path)` by id, for reconciliation.
            pub async fn storage_paths(
                pool: &Pool,
                after_id: &str,
                limit: u32,
            ) -> Result<Vec<(String, String)>, LedgerError> {
                let rows = sqlx::query(
                    "SELECT id, storage_path FROM canonical_objects WHERE id > $1 ORDER BY id LIMIT $2",
                )
                .bind(after_id)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
                rows.iter()
                    .map(|r| Ok((r.try_get("id")?, r.try_get("storage_path")?)))
                    .collect()
            }

            const REFERENCE_COLUMNS: &str = "id, canonical_object_id, agent_id, created_at, \
                 signed_created_at, context, relevance, trust_weight, time_horizon, signature, \
                 metadata, recorded_at";

            fn reference_from_row(row: &DbRow) -> Result<AgentReference, LedgerError> {
                let metadata: Option<Json<Value>> = row.try_get("metadata")?;
                Ok(AgentReference {
                    id: row.try_get("id")?,
                    canonical_object_id: row.try_get("canonical_object_id")?,
                    agent_id: row.try_get("agent_id")?,
                    created_at: from_unix(row.try_get("created_at")?)?,
                    signed_created_at: row.try_get("signed_created_at")?,
                    context: row.try_get("context")?,
                    relevance: row.try_get("relevance")?,
                    trust_weight: row.try_get("trust_weight")?,
                    time_horizon: row.try_get("time_horizon")?,
                    signature: row.try_get("signature")?,
                    metadata: metadata.map(|m| m.0),
                    recorded_at: row.try_get("recorded_at")?,
                })
            }

            pub async fn list_references(
                pool: &Pool,
                query: &Query,
                page: &Page,
            ) -> Result<Vec<AgentReference>, LedgerError> {
                let sql = format!(
                    "SELECT {REFERENCE_COLUMNS} FROM agent_references \
                     WHERE ($1 = '' OR agent_id = $1) AND ($2 = '' OR canonical_object_id = $2) \
                     AND created_at >= $3 AND created_at < $4 \
                     AND (created_at < $5 OR (created_at = $5 AND id < $6)) \
                     ORDER BY created_at DESC, id DESC LIMIT $7 OFFSET $8"
                );
                let rows = sqlx::query(&sql)
                    .bind(&query.actor)
                    .bind(&query.kind)
                    .bind(query.from)
                    .bind(query.until)
                    .bind(page.before.0)
                    .bind(&page.before.1)
                    .bind(i64::from(page.limit))
                    .bind(i64::from(page.offset))
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(reference_from_row).collect()
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

backend_queries!(
    sqlite,
    sqlx::Sqlite,
    mode_lock = "UPDATE system_state SET mode = mode WHERE id = 1 RETURNING mode"
);
backend_queries!(
    postgres,
    sqlx::Postgres,
    mode_lock = "SELECT mode FROM system_state WHERE id = 1 FOR SHARE"
);

//! Scheduled items (migration 0004): the original's `scheduled_items` rows per tenant. Each
//! write is one audited transaction; an update lands only on the version it was computed on.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::query;
use noema_store::with_pool;
use time::OffsetDateTime;

use super::ContinuityStore;
use super::read_cache::{Change, ChangeOnDrop, PENDING_SCHEDULE};
use crate::domain::schedule::Item;
use crate::error::Error;

#[derive(sqlx::FromRow)]
struct ItemRecord {
    schedule_id: String,
    kind: String,
    status: String,
    title: String,
    note: Option<String>,
    due_at: String,
    due_at_ts: i64,
    created_at: String,
    updated_at: String,
    created_by: String,
    updated_by: String,
    terminal_at: Option<String>,
    terminal_by: Option<String>,
    terminal_reason: Option<String>,
    task_id: Option<String>,
    thread_id: Option<String>,
    subject_kind: Option<String>,
    subject_id: Option<String>,
    idempotency_key: Option<String>,
    identity_sha256: String,
    identity_json: String,
    metadata: String,
    version: i64,
}

impl From<ItemRecord> for Item {
    fn from(r: ItemRecord) -> Item {
        Item {
            schedule_id: r.schedule_id,
            kind: r.kind,
            status: r.status,
            title: r.title,
            note: r.note,
            due_at: r.due_at,
            due_at_ts: r.due_at_ts,
            created_at: r.created_at,
            updated_at: r.updated_at,
            created_by: r.created_by,
            updated_by: r.updated_by,
            terminal_at: r.terminal_at,
            terminal_by: r.terminal_by,
            terminal_reason: r.terminal_reason,
            task_id: r.task_id,
            thread_id: r.thread_id,
            subject_kind: r.subject_kind,
            subject_id: r.subject_id,
            idempotency_key: r.idempotency_key,
            identity_sha256: r.identity_sha256,
            identity_json: r.identity_json,
            metadata: r.metadata,
            version: r.version,
        }
    }
}

const COLUMNS: &str = "schedule_id, kind, status, title, note, due_at, due_at_ts, created_at, \
     updated_at, created_by, updated_by, terminal_at, terminal_by, terminal_reason, task_id, \
     thread_id, subject_kind, subject_id, idempotency_key, identity_sha256, identity_json, \
     metadata, version";

/// A scheduled item to store: created (`expected_version: None`) or replacing that version.
#[derive(Debug, Clone)]
pub struct ScheduleWrite {
    pub tenant: String,
    pub item: Item,
    pub expected_version: Option<i64>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

impl ContinuityStore {
    /// The tenant's item `schedule_id`.
    pub async fn schedule_item(
        &self,
        tenant: &str,
        schedule_id: &str,
    ) -> Result<Option<Item>, Error> {
        let sql = format!(
            "SELECT {COLUMNS} FROM continuity_schedule WHERE tenant = $1 AND schedule_id = $2"
        );
        let row: Option<ItemRecord> = with_pool!(self.database(), |pool| {
            query(&sql)
                .bind(tenant)
                .bind(schedule_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(Item::from))
    }

    /// The tenant's item created with `idempotency_key`.
    pub async fn schedule_item_by_key(
        &self,
        tenant: &str,
        key: &str,
    ) -> Result<Option<Item>, Error> {
        let sql = format!(
            "SELECT {COLUMNS} FROM continuity_schedule WHERE tenant = $1 AND idempotency_key = $2"
        );
        let row: Option<ItemRecord> = with_pool!(self.database(), |pool| {
            query(&sql)
                .bind(tenant)
                .bind(key)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(Item::from))
    }

    /// Every item of the tenant (only `pending` ones with `pending_only`), earliest due first.
    pub async fn schedule_items(
        &self,
        tenant: &str,
        pending_only: bool,
    ) -> Result<Vec<Item>, Error> {
        if pending_only && let noema_store::Database::Sqlite(_) = self.database() {
            let read = self.schedule_items_read(tenant, pending_only);
            return self.read_cache.table(tenant, PENDING_SCHEDULE, read).await;
        }
        self.schedule_items_read(tenant, pending_only).await
    }

    async fn schedule_items_read(
        &self,
        tenant: &str,
        pending_only: bool,
    ) -> Result<Vec<Item>, Error> {
        let filter = if pending_only {
            " AND status = 'pending'"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM continuity_schedule WHERE tenant = $1{filter} \
             ORDER BY due_at_ts ASC, schedule_id ASC"
        );
        let rows: Vec<ItemRecord> = with_pool!(self.database(), |pool| {
            query(&sql).bind(tenant).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(Item::from).collect())
    }

    /// Stores `write`: `Ok(false)` when the id or idempotency key is taken (create) or the
    /// item moved since it was read (update).
    pub async fn schedule_write(&self, write: ScheduleWrite) -> Result<bool, Error> {
        let _turn = match self.database() {
            noema_store::Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            noema_store::Database::Postgres(_) => None,
        };
        // Dropped (under the write gate) after the write, whether or not it landed.
        let _changed = ChangeOnDrop {
            cache: &self.read_cache,
            tenant: &write.tenant,
            change: Change::Schedule,
        };
        let i = &write.item;
        let sql = match write.expected_version {
            None => format!(
                "INSERT INTO continuity_schedule (tenant, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, \
                 $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, \
                 $22, $23, $24) ON CONFLICT DO NOTHING"
            ),
            Some(_) => "UPDATE continuity_schedule SET kind = $3, status = $4, title = $5, \
                 note = $6, due_at = $7, due_at_ts = $8, created_at = $9, updated_at = $10, \
                 created_by = $11, updated_by = $12, terminal_at = $13, terminal_by = $14, \
                 terminal_reason = $15, task_id = $16, thread_id = $17, subject_kind = $18, \
                 subject_id = $19, idempotency_key = $20, identity_sha256 = $21, \
                 identity_json = $22, metadata = $23, version = $24 \
                 WHERE tenant = $1 AND schedule_id = $2 AND version = $25"
                .to_owned(),
        };
        with_pool!(self.database(), |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let mut q = query(&sql)
                .bind(write.tenant.as_str())
                .bind(i.schedule_id.as_str())
                .bind(i.kind.as_str())
                .bind(i.status.as_str())
                .bind(i.title.as_str())
                .bind(i.note.as_deref())
                .bind(i.due_at.as_str())
                .bind(i.due_at_ts)
                .bind(i.created_at.as_str())
                .bind(i.updated_at.as_str())
                .bind(i.created_by.as_str())
                .bind(i.updated_by.as_str())
                .bind(i.terminal_at.as_deref())
                .bind(i.terminal_by.as_deref())
                .bind(i.terminal_reason.as_deref())
                .bind(i.task_id.as_deref())
                .bind(i.thread_id.as_deref())
                .bind(i.subject_kind.as_deref())
                .bind(i.subject_id.as_deref())
                .bind(i.idempotency_key.as_deref())
                .bind(i.identity_sha256.as_str())
                .bind(i.identity_json.as_str())
                .bind(i.metadata.as_str())
                .bind(i.version);
            if let Some(version) = write.expected_version {
                q = q.bind(version);
            }
            let landed = q.execute(tx.conn()).await? == 1;
            if landed {
                tx.record(write.audit.clone(), write.at);
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            Ok(landed)
        })
    }
}

//! Tasks (migration 0004): one row per tenant and task id holding the original's task
//! document, its filter columns and a version that every update moves. Each write is one
//! audited transaction.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, query};
use noema_store::with_pool;
use time::OffsetDateTime;

use super::ContinuityStore;
use super::read_cache::{Change, ChangeOnDrop, TASKS};
use crate::error::Error;

/// A stored task.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TaskRow {
    pub task_id: String,
    pub status: String,
    pub owner_peer: String,
    pub thread_id: Option<String>,
    pub updated_at: String,
    /// The original's task document (JSON, its key order).
    pub document: String,
    pub revision_id: String,
    pub version: i64,
}

/// A task to store: created (`expected_version: None`) or replacing the version read.
#[derive(Debug, Clone)]
pub struct TaskWrite {
    pub tenant: String,
    pub task_id: String,
    pub status: String,
    pub owner_peer: String,
    pub thread_id: Option<String>,
    pub updated_at: String,
    pub document: String,
    pub revision_id: String,
    pub expected_version: Option<i64>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// Which of a tenant's tasks to list (all when empty), newest `updated_at` first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskFilter {
    pub status: Option<String>,
    pub owner_peer: Option<String>,
    pub thread_id: Option<String>,
}

const TASK_COLUMNS: &str =
    "task_id, status, owner_peer, thread_id, updated_at, document, revision_id, version";

impl ContinuityStore {
    /// The tenant's task `task_id`.
    pub async fn task(&self, tenant: &str, task_id: &str) -> Result<Option<TaskRow>, Error> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM continuity_tasks WHERE tenant = $1 AND task_id = $2"
        );
        Ok(with_pool!(self.database(), |pool| {
            query(&sql)
                .bind(tenant)
                .bind(task_id)
                .fetch_optional(pool)
                .await?
        }))
    }

    /// The tenant's tasks matching `filter`, newest `updated_at` first (then task id,
    /// descending, as the original sorts). On SQLite all of them from the read cache when it
    /// holds the tenant's.
    pub async fn tasks(&self, tenant: &str, filter: &TaskFilter) -> Result<Vec<TaskRow>, Error> {
        if *filter == TaskFilter::default()
            && let noema_store::Database::Sqlite(_) = self.database()
        {
            let read = self.tasks_read(tenant, filter);
            return self.read_cache.table(tenant, TASKS, read).await;
        }
        self.tasks_read(tenant, filter).await
    }

    async fn tasks_read(&self, tenant: &str, filter: &TaskFilter) -> Result<Vec<TaskRow>, Error> {
        Ok(with_pool!(self.database(), |pool| {
            let mut b = Builder::new(format!(
                "SELECT {TASK_COLUMNS} FROM continuity_tasks WHERE tenant = "
            ));
            b.push_bind(tenant);
            if let Some(status) = &filter.status {
                b.push(" AND status = ");
                b.push_bind(status.as_str());
            }
            if let Some(owner) = &filter.owner_peer {
                b.push(" AND owner_peer = ");
                b.push_bind(owner.as_str());
            }
            if let Some(thread) = &filter.thread_id {
                b.push(" AND thread_id = ");
                b.push_bind(thread.as_str());
            }
            b.push(" ORDER BY updated_at DESC, task_id DESC");
            b.build().fetch_all(pool).await?
        }))
    }

    /// Stores `write`: `Ok(false)` when the task already exists (create) or moved since it
    /// was read (update).
    pub async fn task_write(&self, write: TaskWrite) -> Result<bool, Error> {
        let _turn = match self.database() {
            noema_store::Database::Sqlite(_) => Some(self.sqlite_writer.lock().await),
            noema_store::Database::Postgres(_) => None,
        };
        // Dropped (under the write gate) after the write, whether or not it landed.
        let _changed = ChangeOnDrop {
            cache: &self.read_cache,
            tenant: &write.tenant,
            change: Change::Tasks,
        };
        with_pool!(self.database(), |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let landed =
                match write.expected_version {
                    None => {
                        query(
                            "INSERT INTO continuity_tasks (tenant, task_id, status, owner_peer, \
                     thread_id, updated_at, document, revision_id, version) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1) ON CONFLICT DO NOTHING",
                        )
                        .bind(write.tenant.as_str())
                        .bind(write.task_id.as_str())
                        .bind(write.status.as_str())
                        .bind(write.owner_peer.as_str())
                        .bind(write.thread_id.as_deref())
                        .bind(write.updated_at.as_str())
                        .bind(write.document.as_str())
                        .bind(write.revision_id.as_str())
                        .execute(tx.conn())
                        .await?
                    }
                    Some(version) => query(
                        "UPDATE continuity_tasks SET status = $3, owner_peer = $4, thread_id = $5, \
                     updated_at = $6, document = $7, revision_id = $8, version = version + 1 \
                     WHERE tenant = $1 AND task_id = $2 AND version = $9",
                    )
                    .bind(write.tenant.as_str())
                    .bind(write.task_id.as_str())
                    .bind(write.status.as_str())
                    .bind(write.owner_peer.as_str())
                    .bind(write.thread_id.as_deref())
                    .bind(write.updated_at.as_str())
                    .bind(write.document.as_str())
                    .bind(write.revision_id.as_str())
                    .bind(version)
                    .execute(tx.conn())
                    .await?,
                } == 1;
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

//! The hash-chained audit log every service keeps in its own database (`audit_log` + the
//! one-row `audit_head`, created by each service's migrations), and [`AuditedTx`]: the one
//! way a store writes.
//!
//! Appends run inside the writer's transaction: the head row's lock serialises appends
//! across connections and replicas, so each entry commits to the hash of the previous one.

use noema_core::audit::{AuditDraft, AuditEntry};
use serde_json::Value;
use sqlx::Acquire;
use sqlx::types::Json;
use time::OffsetDateTime;

use crate::Backend;
use crate::sql::{Builder, Conn, Engine, query};
use crate::with_pool;

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

/// Why an audited write transaction could not begin or commit.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// Beginning or committing the transaction failed.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// Locking the audit chain's head or appending to it failed.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// A store's write transaction: the one way a service writes. It is begun holding the lock
/// on the audit chain's head, the writer runs its statements on [`AuditedTx::conn`] and
/// [`AuditedTx::record`]s the audit entry of each write, and [`AuditedTx::commit`] appends
/// those entries to the chain and commits, atomically with the writes.
///
/// Locking the head first serialises a database's writers (on SQLite the write lock is
/// taken at once, so a transaction never has to upgrade a read lock), and a check made
/// inside the transaction (such as the ledger's STOPPED) sees every write committed before
/// it. Dropped without `commit`, the transaction rolls back (when its connection is next
/// used; [`AuditedTx::rollback`] does it at once).
pub struct AuditedTx<'c, D: Engine> {
    tx: sqlx::Transaction<'c, D>,
    /// The chain's last `(id, hash)`, locked.
    head: (i64, String),
    recorded: Vec<(AuditDraft, OffsetDateTime)>,
}

impl<'c, D: Engine> AuditedTx<'c, D> {
    /// Begins a transaction on `conn` (a pool or a connection) and locks the chain's head.
    pub async fn begin(conn: impl Acquire<'c, Database = D>) -> Result<Self, TxError> {
        let mut tx = conn.begin().await?;
        let head = lock_head(&mut tx).await?;
        Ok(AuditedTx {
            tx,
            head,
            recorded: Vec::new(),
        })
    }

    /// Where the writer's statements run.
    pub fn conn(&mut self) -> Conn<'_, D> {
        Conn::from(&mut self.tx)
    }

    /// Whether the audit log has no entry yet.
    pub fn log_is_empty(&self) -> bool {
        self.head.0 == 0
    }

    /// Records the audit entry of a write of this transaction. Entries are chained in the
    /// order recorded, when the transaction commits; `at` is the entry's time.
    pub fn record(&mut self, draft: AuditDraft, at: OffsetDateTime) {
        self.recorded.push((draft, at));
    }

    /// Appends the recorded entries after the head and commits.
    pub async fn commit(self) -> Result<(), TxError> {
        let AuditedTx {
            mut tx,
            head,
            recorded,
        } = self;
        append(&mut tx, head, recorded).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Rolls back now, rather than when the connection is next used: a connection the
    /// caller keeps then holds no lock.
    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

/// Locks the chain head and returns `(last_id, last_hash)`.
async fn lock_head<D: Engine>(
    tx: &mut sqlx::Transaction<'_, D>,
) -> Result<(i64, String), AuditError> {
    Ok(
        query("UPDATE audit_head SET last_id = last_id WHERE id = 1 RETURNING last_id, last_hash")
            .fetch_one(tx)
            .await?,
    )
}

/// Chains `drafts` in order after the locked `head`, inserts them with one statement and
/// moves the head to the last.
async fn append<D: Engine>(
    tx: &mut sqlx::Transaction<'_, D>,
    head: (i64, String),
    drafts: Vec<(AuditDraft, OffsetDateTime)>,
) -> Result<(), AuditError> {
    let (mut last_id, mut last_hash) = head;
    let mut entries = Vec::with_capacity(drafts.len());
    for (draft, at) in drafts {
        let entry = draft.chain(last_id, &last_hash, at)?;
        last_id = entry.id;
        last_hash.clone_from(&entry.hash);
        entries.push(entry);
    }
    if entries.is_empty() {
        return Ok(());
    }
    // The insert and the head's move go to the database together: on Postgres as one
    // statement (a data-modifying WITH), on SQLite as two statements in one query, which its
    // connection's thread runs in one hand-off.
    let postgres = D::BACKEND == Backend::Postgres;
    let mut statement = Builder::<D>::new(if postgres { "WITH appended AS (" } else { "" });
    statement.push(
        "INSERT INTO audit_log \
         (id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash) ",
    );
    statement.push_values(&entries, |row, entry| {
        row.bind(entry.id)
            .bind(entry.occurred_at)
            .bind(&entry.actor)
            .bind(&entry.action)
            .bind(&entry.target_id)
            .bind(&entry.target_type)
            .bind(entry.detail.as_ref().map(Json))
            .bind(&entry.prev_hash)
            .bind(&entry.hash);
    });
    statement
        .push(if postgres { ") " } else { "; " })
        .push("UPDATE audit_head SET last_id = ")
        .push_bind(last_id)
        .push(", last_hash = ")
        .push_bind(&last_hash)
        .push(" WHERE id = 1");
    statement.build().execute(tx).await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct EntryRow {
    id: i64,
    occurred_at: OffsetDateTime,
    actor: String,
    action: String,
    target_id: Option<String>,
    target_type: Option<String>,
    detail: Option<Json<Value>>,
    prev_hash: String,
    hash: String,
}

impl From<EntryRow> for AuditEntry {
    fn from(row: EntryRow) -> Self {
        AuditEntry {
            id: row.id,
            occurred_at: row.occurred_at,
            actor: row.actor,
            action: row.action,
            target_id: row.target_id,
            target_type: row.target_type,
            detail: row.detail.map(|d| d.0),
            prev_hash: row.prev_hash,
            hash: row.hash,
        }
    }
}

const ENTRY_COLUMNS: &str =
    "id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash";

/// Backend-independent reads of a service's audit log, and its first entry.
impl crate::Database {
    /// Entries newest first, strictly older than `before_id` when given.
    pub async fn audit_newest_first(
        &self,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, AuditError> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS} FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2"
        );
        let rows: Vec<EntryRow> = with_pool!(self, |pool| {
            query(&sql)
                .bind(before_id.unwrap_or(i64::MAX))
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    /// Entries oldest first, strictly newer than `after_id`: for chain verification.
    pub async fn audit_oldest_first(
        &self,
        after_id: i64,
        limit: i64,
    ) -> Result<Vec<AuditEntry>, AuditError> {
        let sql =
            format!("SELECT {ENTRY_COLUMNS} FROM audit_log WHERE id > $1 ORDER BY id ASC LIMIT $2");
        let rows: Vec<EntryRow> = with_pool!(self, |pool| {
            query(&sql)
                .bind(after_id)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    /// Writes `draft` as the chain's first entry if the log is empty. Safe to race.
    pub async fn audit_init(&self, draft: AuditDraft) -> Result<(), AuditError> {
        let now = OffsetDateTime::now_utc();
        with_pool!(self, |pool| append_first(pool, draft, now).await).map_err(|err| match err {
            TxError::Database(err) => AuditError::Database(err),
            TxError::Audit(err) => err,
        })
    }
}

async fn append_first<D: Engine>(
    pool: &sqlx::Pool<D>,
    draft: AuditDraft,
    now: OffsetDateTime,
) -> Result<(), TxError> {
    let mut tx = AuditedTx::begin(pool).await?;
    if tx.log_is_empty() {
        tx.record(draft, now);
    }
    tx.commit().await
}

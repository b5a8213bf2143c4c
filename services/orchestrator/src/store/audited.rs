//! TEMPORARY: `AuditedTx` as the platform-shape branch adds it to `noema_store::audit`, until
//! that branch lands on main; then this file goes and the store imports it from there.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditError;
use sqlx::Acquire;
use sqlx::types::Json;
use time::OffsetDateTime;

use super::sql::{Builder, Conn, Engine, query};

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
    Builder::<D>::new(
        "INSERT INTO audit_log \
         (id, occurred_at, actor, action, target_id, target_type, detail, prev_hash, hash) ",
    )
    .push_values(&entries, |row, entry| {
        row.bind(entry.id)
            .bind(entry.occurred_at)
            .bind(&entry.actor)
            .bind(&entry.action)
            .bind(&entry.target_id)
            .bind(&entry.target_type)
            .bind(entry.detail.as_ref().map(Json))
            .bind(&entry.prev_hash)
            .bind(&entry.hash);
    })
    .build()
    .execute(&mut *tx)
    .await?;
    query("UPDATE audit_head SET last_id = $1, last_hash = $2 WHERE id = 1")
        .bind(last_id)
        .bind(last_hash)
        .execute(tx)
        .await?;
    Ok(())
}

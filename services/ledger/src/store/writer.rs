//! Group commit for ledger writes.
//!
//! Every canonical object and reference goes through one writer task per process. It takes
//! whatever writes are waiting (up to [`MAX_BATCH`]) and commits them in one transaction:
//! one mode check, one insert per table, one audit-chain advance and one commit (one WAL
//! fsync on SQLite) for the whole batch. Each caller is answered only after the commit, so
//! an acknowledged write is durable exactly as before; what changes is that 32 concurrent
//! writers share one transaction instead of queueing for 32.
//!
//! If a batch fails for any reason other than STOPPED, its writes are retried one by one in
//! their own transactions, so one bad write cannot fail its neighbours and each caller gets
//! its own error.

use noema_store::Database;
use std::sync::Arc;
use tokio::sync::{Mutex, mpsc, oneshot};

use super::{Write, queries};
use crate::error::LedgerError;

/// Most writes in one transaction. Bounds bind parameters (13 per reference) and the time
/// the SQLite write lock is held.
const MAX_BATCH: usize = 256;
/// Writes waiting for the writer before callers wait to hand theirs over.
const QUEUE: usize = 4 * MAX_BATCH;

pub(super) struct Pending {
    pub write: Write,
    pub done: oneshot::Sender<Result<(), LedgerError>>,
}

/// The handle callers send writes through; the task ends when every handle is dropped.
#[derive(Debug, Clone)]
pub(super) struct GroupWriter {
    queue: mpsc::Sender<Pending>,
}

impl GroupWriter {
    /// Starts the writer task. `sqlite_writer` is the process's SQLite write gate, held for
    /// each batch.
    pub fn start(db: Database, sqlite_writer: Arc<Mutex<()>>) -> Self {
        let (queue, incoming) = mpsc::channel(QUEUE);
        tokio::spawn(run(db, sqlite_writer, incoming));
        GroupWriter { queue }
    }

    /// Hands `write` to the writer and waits for its commit.
    pub async fn write(&self, write: Write) -> Result<(), LedgerError> {
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Pending { write, done })
            .await
            .map_err(|_| LedgerError::WriterGone)?;
        answer.await.map_err(|_| LedgerError::WriterGone)?
    }
}

async fn run(db: Database, sqlite_writer: Arc<Mutex<()>>, mut incoming: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while incoming.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let _turn = match db {
            Database::Sqlite(_) => Some(sqlite_writer.lock().await),
            Database::Postgres(_) => None,
        };
        let (writes, replies): (Vec<Write>, Vec<_>) =
            batch.drain(..).map(|p| (p.write, p.done)).unzip();
        let outcomes = commit(&db, &writes).await;
        tracing::debug!(writes = writes.len(), "group commit");
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // A caller that went away still had its write committed; nobody to tell.
            let _ = reply.send(outcome);
        }
    }
}

pub(super) async fn commit(db: &Database, writes: &[Write]) -> Vec<Result<(), LedgerError>> {
    let batch = match db {
        Database::Sqlite(pool) => queries::sqlite::insert_batch(pool, writes).await,
        Database::Postgres(pool) => queries::postgres::insert_batch(pool, writes).await,
    };
    match batch {
        Ok(outcomes) => outcomes,
        Err(LedgerError::Stopped) => writes.iter().map(|_| Err(LedgerError::Stopped)).collect(),
        Err(err) if writes.len() == 1 => vec![Err(err)],
        Err(err) => {
            tracing::warn!(writes = writes.len(), error = %noema_core::ErrorChain(&err), "group commit failed; retrying its writes one by one");
            let mut outcomes = Vec::with_capacity(writes.len());
            for write in writes {
                outcomes.push(commit_one(db, write).await);
            }
            outcomes
        }
    }
}

/// One write in its own transaction: a batch of one.
async fn commit_one(db: &Database, write: &Write) -> Result<(), LedgerError> {
    let batch = match db {
        Database::Sqlite(pool) => {
            queries::sqlite::insert_batch(pool, std::slice::from_ref(write)).await
        }
        Database::Postgres(pool) => {
            queries::postgres::insert_batch(pool, std::slice::from_ref(write)).await
        }
    };
    batch?.pop().unwrap_or_else(|| {
        Err(LedgerError::Corrupt(
            "a batch of one write gave no outcome".into(),
        ))
    })
}

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
use sqlx::pool::PoolConnection;
use sqlx::sqlite::SqliteConnection;
use sqlx::{ConnectOptions as _, Postgres};
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
        noema_store::spawn_writer(
            db.backend(),
            "ledger-writer",
            run(db, sqlite_writer, incoming),
        );
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
    let mut session = Session::new(db);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while incoming.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let _turn = match session.db {
            Database::Sqlite(_) => Some(sqlite_writer.lock().await),
            Database::Postgres(_) => None,
        };
        let (writes, replies): (Vec<Write>, Vec<_>) =
            batch.drain(..).map(|p| (p.write, p.done)).unzip();
        let outcomes = commit(&mut session, &writes).await;
        tracing::debug!(writes = writes.len(), "group commit");
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // A caller that went away still had its write committed; nobody to tell.
            let _ = reply.send(outcome);
        }
    }
}

/// A connection the writer keeps from one batch to the next. SQLite drops a connection's
/// page cache whenever another connection has written since its last transaction, so a
/// writer that took whichever pooled connection was idle read its hot index pages back
/// from disk on every batch; its own connection keeps them.
///
/// On SQLite it is a connection of the writer's own, opened with the pool's options but
/// never part of the pool: the pool keeps all its connections for readers, and none of them
/// ever carries the writer's large page cache. On Postgres it is a pooled connection kept
/// for the life of the process (it saves an acquire per batch).
enum Held {
    Sqlite(SqliteConnection),
    Postgres(PoolConnection<Postgres>),
}

/// Where a group of writes is committed: the database and the connection held for it.
pub(super) struct Session {
    db: Database,
    held: Option<Held>,
}

impl Session {
    pub fn new(db: Database) -> Self {
        Session { db, held: None }
    }

    /// One transaction over `writes` (see `queries::insert_batch`). After a failure
    /// other than STOPPED the connection is let go (closed on SQLite, given back to the
    /// pool on Postgres): it may be the cause, and a fresh one costs one connect.
    async fn insert_batch(
        &mut self,
        writes: &[Write],
    ) -> Result<Vec<Result<(), LedgerError>>, LedgerError> {
        // A closed database takes no more writes, even though the writer's own SQLite
        // connection would still work.
        if self.db.is_closed() {
            self.held = None;
            return Err(sqlx::Error::PoolClosed.into());
        }
        let held = match self.held.take() {
            Some(held) => held,
            None => match &self.db {
                // A pool of one connection is a private in-memory database: another
                // connection would be another database, and holding the only one would
                // starve every reader. Such a writer borrows it for each batch.
                Database::Sqlite(pool) if pool.options().get_max_connections() <= 1 => {
                    let mut conn = pool.acquire().await?;
                    return queries::insert_batch(&mut *conn, writes).await;
                }
                Database::Sqlite(pool) => {
                    let mut conn = pool.connect_options().connect().await?;
                    sqlx::query(noema_store::SQLITE_WRITER_CACHE)
                        .execute(&mut conn)
                        .await?;
                    Held::Sqlite(conn)
                }
                Database::Postgres(pool) => Held::Postgres(pool.acquire().await?),
            },
        };
        let (held, outcome) = match held {
            Held::Sqlite(mut conn) => {
                let outcome = queries::insert_batch(&mut conn, writes).await;
                (Held::Sqlite(conn), outcome)
            }
            Held::Postgres(mut conn) => {
                let outcome = queries::insert_batch(&mut *conn, writes).await;
                (Held::Postgres(conn), outcome)
            }
        };
        if matches!(outcome, Ok(_) | Err(LedgerError::Stopped)) {
            self.held = Some(held);
        }
        outcome
    }
}

/// Commits `writes` as one group, answering each; a write that fails alone does not fail
/// the others.
pub(super) async fn commit(
    session: &mut Session,
    writes: &[Write],
) -> Vec<Result<(), LedgerError>> {
    match session.insert_batch(writes).await {
        Ok(outcomes) => outcomes,
        Err(LedgerError::Stopped) => writes.iter().map(|_| Err(LedgerError::Stopped)).collect(),
        Err(err) if writes.len() == 1 => vec![Err(err)],
        Err(err) => {
            tracing::warn!(writes = writes.len(), error = %noema_core::ErrorChain(&err), "group commit failed; retrying its writes one by one");
            let mut outcomes = Vec::with_capacity(writes.len());
            for write in writes {
                outcomes.push(commit_one(session, write).await);
            }
            outcomes
        }
    }
}

/// One write in its own transaction: a batch of one.
async fn commit_one(session: &mut Session, write: &Write) -> Result<(), LedgerError> {
    session
        .insert_batch(std::slice::from_ref(write))
        .await?
        .pop()
        .unwrap_or_else(|| {
            Err(LedgerError::Corrupt(
                "a batch of one write gave no outcome".into(),
            ))
        })
}

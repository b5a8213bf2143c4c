//! Group commit: every continuity write of a process goes through one writer task, which
//! commits whatever writes are waiting (up to [`MAX_BATCH`]) in one audited transaction:
//! one audit-chain lock, one commit (one WAL fsync on SQLite) for the group. Each caller is
//! answered after the commit, so an acknowledged write is as durable as one committed alone.
//! A write whose state moved is refused inside the group without disturbing the others; if
//! the group's transaction fails, its writes are retried one by one so each caller gets its
//! own answer. What committed memory writes changed is applied to search's in-memory
//! index, and the subjects whose rows changed are dropped from the read cache, before the gate is released and the callers are answered.

use std::sync::Arc;

use noema_store::Database;
use noema_store::audit::AuditedTx;
use noema_store::sql::Engine;
use sqlx::Acquire;
use tokio::sync::{Mutex, mpsc, oneshot};

use super::memory_postings::MemoryPostings;
use super::read_cache::{Change, ReadCache};
use super::writes::{Landed, Refusal, Write};
use crate::domain::subject::SubjectKey;
use crate::error::Error;

/// Most writes in one transaction: bounds how long the SQLite write lock is held.
const MAX_BATCH: usize = 128;
/// Writes waiting for the writer before callers wait to hand theirs over.
const QUEUE: usize = 4 * MAX_BATCH;

type Outcome = Result<Result<Landed, Refusal>, Error>;

struct Pending {
    write: Write,
    done: oneshot::Sender<Outcome>,
}

/// The handle callers send writes through; the task ends when every handle is dropped.
#[derive(Debug, Clone)]
pub(super) struct GroupWriter {
    queue: mpsc::Sender<Pending>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pending")
    }
}

impl GroupWriter {
    /// Starts the writer task; `sqlite_writer` is the process's SQLite write gate, held for
    /// each group.
    pub fn start(
        db: Database,
        sqlite_writer: Arc<Mutex<()>>,
        postings: Arc<MemoryPostings>,
        cache: Arc<ReadCache>,
    ) -> Self {
        let (queue, incoming) = mpsc::channel(QUEUE);
        noema_store::spawn_writer(
            db.backend(),
            "continuity-writer",
            run(db, sqlite_writer, postings, cache, incoming),
        );
        GroupWriter { queue }
    }

    /// Hands `write` to the writer and waits for its group's commit.
    pub async fn write(&self, write: Write) -> Outcome {
        self.submit(write).await?.await
    }

    /// Hands `write` to the writer and returns the wait for its group's commit. Writes
    /// handed over one after the other are applied in that order (in one group, or the
    /// earlier one in an earlier group).
    pub async fn submit(
        &self,
        write: Write,
    ) -> Result<impl Future<Output = Outcome> + use<>, Error> {
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Pending { write, done })
            .await
            .map_err(|_| Error::WriterGone)?;
        Ok(async move { answer.await.map_err(|_| Error::WriterGone)? })
    }
}

async fn run(
    db: Database,
    sqlite_writer: Arc<Mutex<()>>,
    postings: Arc<MemoryPostings>,
    cache: Arc<ReadCache>,
    mut incoming: mpsc::Receiver<Pending>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut held = WriterConnection::default();
    while incoming.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let _turn = match db {
            Database::Sqlite(_) => Some(sqlite_writer.lock().await),
            Database::Postgres(_) => None,
        };
        let (writes, replies): (Vec<Write>, Vec<_>) =
            batch.drain(..).map(|p| (p.write, p.done)).unzip();
        let count = writes.len();
        let outcomes = commit(&db, &mut held, &postings, &cache, writes).await;
        tracing::debug!(writes = count, "continuity group commit");
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // A caller that went away still had its write committed; nobody to tell.
            let _ = reply.send(outcome);
        }
    }
}

/// Commits `writes` as one group, answering each; if the group fails, each write is
/// retried alone. The caller holds the SQLite write gate: the committed writes' index
/// and pointer changes are applied under it.
pub(super) async fn commit(
    db: &Database,
    held: &mut WriterConnection,
    postings: &MemoryPostings,
    cache: &ReadCache,
    writes: Vec<Write>,
) -> Vec<Outcome> {
    let moving: Vec<(usize, String, SubjectKey)> = writes
        .iter()
        .enumerate()
        .filter_map(|(i, write)| {
            let (tenant, subject) = write.moves_pointers_of()?;
            Some((i, tenant.to_owned(), subject.clone()))
        })
        .collect();
    let mut outcomes = commit_group(db, held, writes).await;
    cache.changed(
        moving
            .iter()
            // A write that failed may have landed all the same: only a refusal surely did not.
            .filter(|(i, _, _)| !matches!(outcomes.get(*i), Some(Ok(Err(_)))))
            .map(|(_, tenant, subject)| (tenant.as_str(), Change::Pointers(subject))),
    );
    let changes: Vec<_> = outcomes
        .iter_mut()
        .filter_map(|outcome| match outcome {
            Ok(Ok(Landed::Memory(_, change))) => change.take().map(|change| *change),
            _ => None,
        })
        .collect();
    postings.apply(&changes);
    outcomes
}

async fn commit_group(
    db: &Database,
    held: &mut WriterConnection,
    writes: Vec<Write>,
) -> Vec<Outcome> {
    match group(db, held, &writes).await {
        Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
        Err(err) if writes.len() == 1 => vec![Err(err)],
        Err(err) => {
            tracing::warn!(writes = writes.len(), error = %noema_core::ErrorChain(&err), "continuity group commit failed; retrying its writes one by one");
            let mut outcomes = Vec::with_capacity(writes.len());
            for write in writes {
                outcomes.push(match group(db, held, std::slice::from_ref(&write)).await {
                    Ok(mut one) => one.pop().map_or_else(
                        || {
                            Err(Error::Corrupt(
                                "a group of one write gave no outcome".into(),
                            ))
                        },
                        Ok,
                    ),
                    Err(err) => Err(err),
                });
            }
            outcomes
        }
    }
}

/// The SQLite connection the writer keeps between groups: its page cache (made larger when
/// the writer takes it), prepared statements and temporary tables stay warm instead of
/// being spread over the pool's connections (each of which would read again the pages
/// another's commits changed).
#[derive(Debug, Default)]
pub(super) struct WriterConnection(Option<sqlx::pool::PoolConnection<sqlx::Sqlite>>);

async fn group(
    db: &Database,
    held: &mut WriterConnection,
    writes: &[Write],
) -> Result<Vec<Result<Landed, Refusal>>, Error> {
    match db {
        Database::Sqlite(pool) => {
            let mut conn = match held.0.take() {
                Some(conn) => conn,
                None => {
                    let mut conn = pool.acquire().await?;
                    sqlx::query(noema_store::SQLITE_WRITER_CACHE)
                        .execute(&mut *conn)
                        .await?;
                    conn
                }
            };
            let outcomes = in_transaction(conn.acquire().await?, writes).await;
            // A connection whose group failed goes back to the pool, which checks it.
            if outcomes.is_ok() {
                held.0 = Some(conn);
            }
            outcomes
        }
        Database::Postgres(pool) => {
            let mut conn = pool.acquire().await?;
            in_transaction(conn.acquire().await?, writes).await
        }
    }
}

async fn in_transaction<'c, D: Engine>(
    conn: impl sqlx::Acquire<'c, Database = D>,
    writes: &[Write],
) -> Result<Vec<Result<Landed, Refusal>>, Error> {
    let mut tx = AuditedTx::begin(conn).await?;
    let mut appends = super::memory::GroupAppends::read(&mut tx, writes).await?;
    let mut outcomes = Vec::with_capacity(writes.len());
    for write in writes {
        outcomes.push(write.apply(&mut tx, &mut appends).await?);
    }
    appends.flush(&mut tx).await?;
    tx.commit().await?;
    Ok(outcomes)
}

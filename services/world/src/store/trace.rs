//! The trace writer: every source invocation and LLM call row goes through one task per
//! store, which commits what is queued in one transaction.
//!
//! A call's `running` rows must be durable before its first byte leaves (D17): those are
//! [`TraceWriter::write_now`], which returns once they are committed — together with every
//! write queued before them, and with the `write_now`s of concurrent subjects that arrived
//! meanwhile (one commit, one fsync, for all of them). What a finished call recorded, and
//! streamed chunks, are [`TraceWriter::write_later`]: committed with the next durable write
//! or within [`FLUSH_INTERVAL`], whichever comes first. A process that dies in between
//! leaves the call `running`, which recovery marks `interrupted`: never an invisible call.
//!
//! The writer keeps one connection from batch to batch ([`Session`]): on SQLite a
//! connection's page cache is dropped whenever another connection has written since its last
//! transaction, so a writer taking whichever pooled connection was idle read the trace
//! tables' pages back from disk on nearly every batch.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use noema_store::audit::AuditedTx;
use noema_store::sql::Engine;
use noema_store::{Database, with_pool};
use sqlx::pool::PoolConnection;
use sqlx::sqlite::SqliteConnection;
use sqlx::{Acquire, ConnectOptions, Postgres};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::invocations::{
    InvocationEnd, LlmCallUpdate, finish_invocation, insert_chunks, insert_invocation,
    insert_llm_call, update_llm_call,
};
use super::{StoreError, WorldStore};
use crate::domain::invocation::SourceInvocation;
use crate::domain::llm_call::{LlmCall, LlmChunk};

/// The longest a queued write waits for a commit.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// One row write of a trace.
#[derive(Debug, Clone)]
pub enum TraceWrite {
    /// A `running` invocation (ambient or tool call). Shared with the caller, who gets it
    /// back once it is durable, rather than copied.
    StartInvocation(Arc<SourceInvocation>),
    /// A generation's `running` invocation and its `running` LLM call, linked.
    StartGeneration(Arc<SourceInvocation>, Arc<LlmCall>),
    /// An invocation's final state.
    FinishInvocation(Box<InvocationEnd>),
    /// An LLM call's current state (all but its request and its chunks).
    UpdateLlmCall(Box<LlmCallUpdate>),
    /// Streamed chunks of a running call.
    AppendChunks(Uuid, Vec<LlmChunk>),
}

impl TraceWrite {
    /// The final state of `invocation`.
    pub fn finish(invocation: &SourceInvocation) -> TraceWrite {
        TraceWrite::FinishInvocation(Box::new(InvocationEnd::of(invocation)))
    }

    /// The current state of `call`.
    pub fn update_call(call: &LlmCall) -> TraceWrite {
        TraceWrite::UpdateLlmCall(Box::new(LlmCallUpdate::of(call)))
    }
}

type Ack = oneshot::Sender<Result<(), String>>;

struct Job {
    writes: Vec<TraceWrite>,
    ack: Option<Ack>,
}

/// Queues trace writes for the store's writer task; cheap to clone.
#[derive(Clone)]
pub struct TraceWriter {
    jobs: mpsc::UnboundedSender<Job>,
    /// Why the last batch that nobody waited for failed, told to the next waiter.
    lost: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceWriter")
    }
}

/// Why a durable trace write failed.
#[derive(Debug, thiserror::Error)]
#[error("trace write failed: {0}")]
pub struct TraceError(pub String);

impl TraceWriter {
    /// Starts the writer task of `store`. It ends when every clone of the writer is dropped,
    /// after committing what was queued.
    pub fn start(store: WorldStore) -> TraceWriter {
        let (jobs, rx) = mpsc::unbounded_channel();
        let lost = Arc::new(Mutex::new(None));
        tokio::spawn(run(store, rx, Arc::clone(&lost)));
        TraceWriter { jobs, lost }
    }

    /// Commits `writes` and everything queued before them; returns once they are durable.
    pub async fn write_now(&self, writes: Vec<TraceWrite>) -> Result<(), TraceError> {
        let (ack, done) = oneshot::channel();
        self.jobs
            .send(Job {
                writes,
                ack: Some(ack),
            })
            .map_err(|_| TraceError("the trace writer has stopped".into()))?;
        let result = done
            .await
            .map_err(|_| TraceError("the trace writer has stopped".into()))?;
        result.map_err(TraceError)?;
        match self.lost.lock().ok().and_then(|mut lost| lost.take()) {
            Some(why) => Err(TraceError(format!("an earlier batch was lost: {why}"))),
            None => Ok(()),
        }
    }

    /// Queues `writes`, committed with the next durable write or within [`FLUSH_INTERVAL`].
    pub fn write_later(&self, writes: Vec<TraceWrite>) {
        if self.jobs.send(Job { writes, ack: None }).is_err()
            && let Ok(mut lost) = self.lost.lock()
        {
            *lost = Some("the trace writer has stopped".into());
        }
    }

    /// Commits everything queued; returns once it is durable.
    pub async fn flush(&self) -> Result<(), TraceError> {
        self.write_now(Vec::new()).await
    }
}

async fn run(
    store: WorldStore,
    mut rx: mpsc::UnboundedReceiver<Job>,
    lost: Arc<Mutex<Option<String>>>,
) {
    let mut session = Session { store, held: None };
    let mut pending: Vec<TraceWrite> = Vec::new();
    let mut acks: Vec<Ack> = Vec::new();
    // When the oldest queued write must be committed at the latest.
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let job = match deadline {
            None => rx.recv().await,
            Some(at) => match tokio::time::timeout_at(at, rx.recv()).await {
                Ok(job) => job,
                // Queued writes have waited long enough: commit them.
                Err(_) => Some(Job {
                    writes: Vec::new(),
                    ack: None,
                }),
            },
        };
        let closed = job.is_none();
        let mut flush_now = closed || deadline.is_some_and(|at| at <= tokio::time::Instant::now());
        if let Some(job) = job {
            take(job, &mut pending, &mut acks);
        }
        while let Ok(job) = rx.try_recv() {
            take(job, &mut pending, &mut acks);
        }
        flush_now |= !acks.is_empty();
        if flush_now {
            let result = session.apply(&pending).await.map_err(|e| e.to_string());
            pending.clear();
            deadline = None;
            if let Err(why) = &result {
                tracing::error!(error = %why, "trace batch failed");
                if acks.is_empty()
                    && let Ok(mut slot) = lost.lock()
                {
                    *slot = Some(why.clone());
                }
            }
            for ack in acks.drain(..) {
                let _ = ack.send(result.clone());
            }
        }
        if !pending.is_empty() && deadline.is_none() {
            deadline = Some(tokio::time::Instant::now() + FLUSH_INTERVAL);
        }
        if closed {
            return;
        }
    }
}

fn take(job: Job, pending: &mut Vec<TraceWrite>, acks: &mut Vec<Ack>) {
    pending.extend(job.writes);
    acks.extend(job.ack);
}

/// The connection the writer keeps: on SQLite (a file) one of its own, opened with the
/// pool's options but outside the pool, so the pool's connections stay for readers; on
/// Postgres a pooled connection held for the writer's life.
enum Held {
    Sqlite(SqliteConnection),
    Postgres(PoolConnection<Postgres>),
}

/// Where the writer commits its batches.
struct Session {
    store: WorldStore,
    held: Option<Held>,
}

impl Session {
    /// Commits `writes` in one transaction on the held connection. After a failure the
    /// connection is let go (it may be the cause); the next batch opens a fresh one.
    async fn apply(&mut self, writes: &[TraceWrite]) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        let db = self.store.database();
        // A closed database takes no more writes, even though a held connection would.
        if db.is_closed() {
            self.held = None;
            return Err(sqlx::Error::PoolClosed.into());
        }
        let held = match self.held.take() {
            Some(held) => held,
            None => match db {
                // A pool of one connection is a private in-memory database: another
                // connection would be another database, and holding the only one would
                // starve every reader. The writer borrows it for each batch.
                Database::Sqlite(pool) if pool.options().get_max_connections() <= 1 => {
                    return self.store.apply_trace(writes).await;
                }
                Database::Sqlite(pool) => Held::Sqlite(pool.connect_options().connect().await?),
                Database::Postgres(pool) => Held::Postgres(pool.acquire().await?),
            },
        };
        let (held, result) = match held {
            Held::Sqlite(mut conn) => {
                let result = apply(&mut conn, writes).await;
                (Held::Sqlite(conn), result)
            }
            Held::Postgres(mut conn) => {
                let result = apply(&mut *conn, writes).await;
                (Held::Postgres(conn), result)
            }
        };
        if result.is_ok() {
            self.held = Some(held);
        }
        result
    }
}

async fn apply<'c, D: Engine>(
    conn: impl Acquire<'c, Database = D>,
    writes: &[TraceWrite],
) -> Result<(), StoreError> {
    let mut tx = AuditedTx::begin(conn).await?;
    for write in writes {
        match write {
            TraceWrite::StartInvocation(invocation) => {
                insert_invocation(tx.conn(), invocation).await?;
            }
            TraceWrite::StartGeneration(invocation, call) => {
                // The invocation names its call: both rows commit together (the foreign keys
                // between them are deferred to the commit).
                insert_invocation(tx.conn(), invocation).await?;
                insert_llm_call(tx.conn(), call).await?;
            }
            TraceWrite::FinishInvocation(invocation) => {
                finish_invocation(tx.conn(), invocation).await?;
            }
            TraceWrite::UpdateLlmCall(call) => update_llm_call(tx.conn(), call).await?,
            TraceWrite::AppendChunks(id, chunks) => insert_chunks(tx.conn(), *id, chunks).await?,
        }
    }
    tx.commit().await?;
    Ok(())
}

impl WorldStore {
    /// Writes `writes` in one transaction (the trace writer's batch).
    pub async fn apply_trace(&self, writes: &[TraceWrite]) -> Result<(), StoreError> {
        if writes.is_empty() {
            return Ok(());
        }
        with_pool!(&self.db, |pool| apply(pool, writes).await)
    }
}

//! Where a store's group-commit writer task runs.
//!
//! A writer's transaction is a chain of statements, and on SQLite each one is a hand-off to
//! the connection's own thread and back. When that thread wakes a task of the server's
//! runtime, tokio queues the task in its global queue, which a busy worker looks at only
//! every few dozen polls: each statement of the writer then waits behind the request
//! handlers' work, and the whole group commit (and everyone waiting on it) with it. On a
//! thread of its own, the writer is woken by the operating system straight away.

use std::future::Future;

use crate::Backend;

/// The page cache of a SQLite writer's own connection (32 MiB), set with this statement
/// when the writer takes the connection. A group commit touches a page per random key in
/// each index it writes; at SQLite's 2 MiB default those pages were read again in every
/// group and, past the cache, spilled to the log in the middle of the transaction.
pub const SQLITE_WRITER_CACHE: &str = "PRAGMA cache_size = -32768";

/// Runs a store's writer `task` until it ends. On SQLite it runs on a thread named `name`
/// with a single-threaded runtime of its own. On Postgres it stays on the caller's runtime:
/// there each statement is a network round trip anyway, and a pooled connection's socket
/// belongs to the runtime that opened it.
pub fn spawn_writer<F>(backend: Backend, name: &str, task: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    if backend == Backend::Postgres {
        tokio::spawn(task);
        return;
    }
    // Timers only (the pool's acquire timeout): a runtime without an I/O driver parks on a
    // futex, which the connection's thread wakes more cheaply than an I/O driver's eventfd.
    // A SQLite writer does no network I/O.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::warn!(writer = name, error = %err, "cannot build the writer's runtime; running it on the server's");
            tokio::spawn(task);
            return;
        }
    };
    // The task is handed to the thread through a slot, so it is still here to run on the
    // server's runtime if no thread can be started.
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(task)));
    let theirs = std::sync::Arc::clone(&slot);
    let started = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let task = theirs.lock().ok().and_then(|mut slot| slot.take());
            if let Some(task) = task {
                runtime.block_on(task);
            }
        });
    if let Err(err) = started {
        tracing::warn!(writer = name, error = %err, "cannot start the writer's thread; running it on the server's runtime");
        if let Some(task) = slot.lock().ok().and_then(|mut slot| slot.take()) {
            tokio::spawn(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sqlite_writer_runs_on_its_own_thread_and_a_postgres_one_on_the_callers() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        spawn_writer(Backend::Sqlite, "test-writer", async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        });
        assert_eq!(rx.await.ok().flatten().as_deref(), Some("test-writer"));

        let caller = std::thread::current().id();
        let (tx, rx) = tokio::sync::oneshot::channel();
        spawn_writer(Backend::Postgres, "test-writer", async move {
            let _ = tx.send(std::thread::current().id());
        });
        assert_eq!(rx.await.ok(), Some(caller));
    }
}

//! Checkpoints a SQLite file's write-ahead log off the writers' path.
//!
//! By default SQLite checkpoints inside the commit that grows the log past 1,000 pages:
//! that commit copies the pages into the database file and fsyncs it before it returns,
//! and a group commit's callers all wait for it. A connection of the checkpointer's own
//! copies the log every [`EVERY`] instead, alongside the writers (WAL lets a checkpoint
//! run while a writer appends). The writers still checkpoint, as a backstop, when the log
//! passes [`WRITER_CHECKPOINT_PAGES`]: under writes that never pause, the log is never
//! wholly copied between two commits, and SQLite starts it again from the beginning only
//! when it has been.
//!
//! SQLite fsyncs the database file only in a checkpoint that copies the whole log, which
//! under writes that never pause is the writers' backstop, inside a commit: that fsync then
//! flushed every page the checkpointer had copied since the last one (~6 ms for a 32 MiB
//! log, measured with strace under the orchestrator's lifecycle bench), and the group's
//! callers waited for it. So the checkpointer flushes the file itself after each checkpoint
//! that copied pages, off the writers' path, and the backstop's fsync finds little to write.

use std::time::Duration;

use sqlx::{ConnectOptions, SqlitePool};
use tokio::time::MissedTickBehavior;

/// How often the checkpointer copies the log into the database file.
const EVERY: Duration = Duration::from_millis(100);
/// Pages of log (4 KiB each: 32 MiB) past which a committing writer checkpoints itself.
pub(crate) const WRITER_CHECKPOINT_PAGES: &str = "8192";

/// Starts checkpointing `pool`'s file until the pool is closed or dropped.
pub(crate) fn start(pool: &SqlitePool) {
    let options = pool.connect_options().as_ref().clone();
    let mut closed = pool.close_event();
    tokio::spawn(async move {
        let mut conn = None;
        let mut copied = Copied::default();
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let _ = closed
            .do_until(async {
                loop {
                    tick.tick().await;
                    checkpoint(&options, &mut conn, &mut copied).await;
                }
            })
            .await;
    });
}

/// What the last checkpoint left: the log's frames and how many of them were copied, as
/// `PRAGMA wal_checkpoint` answers them.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Copied {
    log: i64,
    copied: i64,
}

/// One passive checkpoint (it never waits for a reader or writer), then the database file
/// flushed if it copied pages. A failure is logged and the connection opened again next
/// time: the writers' own checkpoints keep the log bounded meanwhile.
async fn checkpoint(
    options: &sqlx::sqlite::SqliteConnectOptions,
    conn: &mut Option<sqlx::SqliteConnection>,
    last: &mut Copied,
) {
    let connection = match conn {
        Some(connection) => connection,
        None => match options.connect().await {
            Ok(connection) => conn.insert(connection),
            Err(err) => {
                tracing::warn!(error = %err, "the WAL checkpointer cannot connect");
                return;
            }
        },
    };
    let (_busy, log, copied): (i64, i64, i64) =
        match sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut *connection)
            .await
        {
            Ok(row) => row,
            Err(err) => {
                tracing::warn!(error = %err, "WAL checkpoint failed");
                *conn = None;
                return;
            }
        };
    let now = Copied { log, copied };
    if copied <= 0 || now == *last {
        return;
    }
    *last = now;
    let path = options.get_filename().to_owned();
    let flushed = tokio::task::spawn_blocking(move || std::fs::File::open(&path)?.sync_data())
        .await
        .map_err(std::io::Error::other)
        .and_then(|flushed| flushed);
    // Not a loss if it fails: SQLite fsyncs the file in the checkpoint that copies the
    // whole log.
    if let Err(err) = flushed {
        tracing::warn!(error = %err, "flushing the checkpointed database file failed");
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use crate::Database;

    /// Pages reach the database file only through a checkpoint, and a write under the
    /// writers' backstop does not make its writer checkpoint: the file grows only if the
    /// checkpointer runs.
    #[tokio::test]
    async fn the_log_is_copied_into_the_file_without_a_writer_checkpointing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("checkpointed.db");
        let url = format!("sqlite://{}", path.display());
        let Database::Sqlite(pool) = Database::connect(&url).await.expect("connect") else {
            panic!("a sqlite URL gives a SQLite pool");
        };
        let (backstop,): (i64,) = sqlx::query_as("PRAGMA wal_autocheckpoint")
            .fetch_one(&pool)
            .await
            .expect("pragma");
        assert_eq!(backstop.to_string(), super::WRITER_CHECKPOINT_PAGES);

        sqlx::query("CREATE TABLE filler (body BLOB NOT NULL)")
            .execute(&pool)
            .await
            .expect("create");
        let before = std::fs::metadata(&path).expect("db file").len();
        // About 500 pages of log: well under the backstop.
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) \
             INSERT INTO filler SELECT randomblob(4000) FROM n",
        )
        .execute(&pool)
        .await
        .expect("fill");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let now = std::fs::metadata(&path).expect("db file").len();
            if now >= before + 500 * 4000 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the database file stayed at {now} bytes: nothing checkpointed the log"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

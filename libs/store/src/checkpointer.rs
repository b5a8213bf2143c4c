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
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let _ = closed
            .do_until(async {
                loop {
                    tick.tick().await;
                    checkpoint(&options, &mut conn).await;
                }
            })
            .await;
    });
}

/// One passive checkpoint (it never waits for a reader or writer). A failure is logged and
/// the connection opened again next time: the writers' own checkpoints keep the log bounded
/// meanwhile.
async fn checkpoint(
    options: &sqlx::sqlite::SqliteConnectOptions,
    conn: &mut Option<sqlx::SqliteConnection>,
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
    if let Err(err) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .execute(&mut *connection)
        .await
    {
        tracing::warn!(error = %err, "WAL checkpoint failed");
        *conn = None;
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

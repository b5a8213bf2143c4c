//! Database pools chosen by URL (`sqlite://…`, `sqlite::memory:`, `postgres://…`) and migrations.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, PgPool, SqlitePool};

use crate::redact::redact_url;

/// The URL forms [`Database::connect`] accepts, quoted in every URL error.
pub const ACCEPTED_DATABASE_URLS: &str = "sqlite://<path> (relative) or sqlite:///<absolute path>, \
     sqlite::memory:, or postgres://[user[:password]@]host[:port]/database (postgresql:// also accepted)";

/// How long a SQLite connection waits for another writer's lock before failing with SQLITE_BUSY.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Rows a SQLite query's thread may queue for its reader (see `sqlite_options`).
const SQLITE_ROW_CHANNEL: usize = 1024;

/// Serialises SQLite migrations within this process (see [`Database::migrate`]).
static SQLITE_MIGRATION_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Errors from connecting to, migrating or querying a database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL is malformed or names a backend we do not support. Never contains a password.
    #[error(
        "invalid database URL `{url_redacted}`: {reason}; accepted forms: {ACCEPTED_DATABASE_URLS}"
    )]
    InvalidUrl {
        url_redacted: String,
        reason: String,
    },

    /// The database could not be reached or refused the connection.
    #[error("cannot connect to {backend} database `{url_redacted}`")]
    Connect {
        backend: Backend,
        url_redacted: String,
        #[source]
        source: sqlx::Error,
    },

    /// Preparing the database's location (e.g. the SQLite file's directory) failed.
    #[error("cannot prepare database location `{path}`")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// Applying a service's migrations failed.
    #[error("migrating the {service} database ({backend}) failed")]
    Migrate {
        service: &'static str,
        backend: Backend,
        #[source]
        source: MigrateError,
    },

    /// The operation does not exist for this engine.
    #[error("{what} is not supported on {backend}: {instead}")]
    Unsupported {
        what: &'static str,
        backend: Backend,
        instead: &'static str,
    },

    /// A query failed (ping, test-database administration).
    #[error("{what} failed on the {backend} database")]
    Query {
        what: &'static str,
        backend: Backend,
        #[source]
        source: sqlx::Error,
    },
}

/// Which SQL engine a [`Database`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        })
    }
}

/// Pool settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbOptions {
    /// Upper bound on open connections. An in-memory SQLite database always uses one.
    pub max_connections: u32,
    /// How long a query waits for a free connection before failing.
    pub acquire_timeout: Duration,
}

impl Default for DbOptions {
    fn default() -> Self {
        Self {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

/// One service's migrations, for both engines. Build it in a `static` with `sqlx::migrate!`,
/// whose paths are relative to the calling crate's `Cargo.toml` (a service would name
/// `../../migrations/<svc>/sqlite` and `../../migrations/<svc>/postgres`):
///
/// ```
/// use noema_store::Migrations;
///
/// pub static MIGRATIONS: Migrations = Migrations {
///     service: "probe",
///     sqlite: sqlx::migrate!("tests/migrations/sqlite"),
///     postgres: sqlx::migrate!("tests/migrations/postgres"),
/// };
/// assert_eq!(MIGRATIONS.sqlite.iter().count(), 1);
/// ```
#[derive(Debug)]
pub struct Migrations {
    pub service: &'static str,
    pub sqlite: Migrator,
    pub postgres: Migrator,
}

/// A connection pool to one service's database.
#[derive(Debug, Clone)]
pub enum Database {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Database {
    /// Connect with default [`DbOptions`]. See [`Database::connect_with`].
    pub async fn connect(url: &str) -> Result<Database, DbError> {
        Self::connect_with(url, &DbOptions::default()).await
    }

    /// Connect to the database named by `url` and check that it answers.
    ///
    /// - `sqlite://<path>`: the file (and its directory) is created if missing.
    /// - `sqlite::memory:`: a private in-memory database (tests); one connection, kept open.
    /// - `postgres://…` / `postgresql://…`: any URL sqlx understands.
    #[tracing::instrument(skip_all, fields(url = %redact_url(url).text))]
    pub async fn connect_with(url: &str, options: &DbOptions) -> Result<Database, DbError> {
        let redacted = redact_url(url);
        let invalid = |reason: String| DbError::InvalidUrl {
            url_redacted: redacted.text.clone(),
            reason: redacted.scrub(&reason),
        };
        let connect_err = |backend, source| DbError::Connect {
            backend,
            url_redacted: redacted.text.clone(),
            source,
        };

        match parse_target(url).map_err(invalid)? {
            Target::SqliteMemory => {
                let opts = sqlite_options(SqliteConnectOptions::from_str("sqlite::memory:"))
                    .map_err(|e| invalid(e.to_string()))?;
                // Every connection to `:memory:` would otherwise be its own database, and shared
                // cache mode brings table-level locking errors; one long-lived connection is the
                // simple, correct choice for tests.
                let pool = SqlitePoolOptions::new()
                    .max_connections(1)
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(opts)
                    .await
                    .map_err(|e| connect_err(Backend::Sqlite, e))?;
                Ok(Database::Sqlite(pool))
            }
            Target::SqliteFile { path } => {
                let opts = sqlite_options(SqliteConnectOptions::from_str(url))
                    .map_err(|e| invalid(e.to_string()))?;
                create_parent_dir(&path).await?;
                let pool = SqlitePoolOptions::new()
                    .max_connections(options.max_connections.max(1))
                    // A local file's connection cannot drop away as a server's can; testing it
                    // before each use is a round trip to its thread per query (the pool still
                    // tests it when it comes back).
                    .test_before_acquire(false)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(opts)
                    .await
                    .map_err(|e| connect_err(Backend::Sqlite, e))?;
                crate::checkpointer::start(&pool);
                Ok(Database::Sqlite(pool))
            }
            Target::Postgres => {
                let opts = PgConnectOptions::from_str(url).map_err(|e| invalid(e.to_string()))?;
                let pool = PgPoolOptions::new()
                    .max_connections(options.max_connections.max(1))
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(opts)
                    .await
                    .map_err(|e| connect_err(Backend::Postgres, e))?;
                Ok(Database::Postgres(pool))
            }
        }
    }

    /// `(open connections, idle connections)` of the pool, for metrics.
    pub fn pool_stats(&self) -> (u32, usize) {
        match self {
            Database::Sqlite(pool) => (pool.size(), pool.num_idle()),
            Database::Postgres(pool) => (pool.size(), pool.num_idle()),
        }
    }

    /// The engine behind this pool.
    pub fn backend(&self) -> Backend {
        match self {
            Database::Sqlite(_) => Backend::Sqlite,
            Database::Postgres(_) => Backend::Postgres,
        }
    }

    /// Round-trip a trivial query (readiness checks).
    #[tracing::instrument(skip_all, fields(backend = %self.backend()))]
    pub async fn ping(&self) -> Result<(), DbError> {
        let result = match self {
            Database::Sqlite(pool) => sqlx::query("SELECT 1").execute(pool).await.map(drop),
            Database::Postgres(pool) => sqlx::query("SELECT 1").execute(pool).await.map(drop),
        };
        result.map_err(|source| DbError::Query {
            what: "ping",
            backend: self.backend(),
            source,
        })
    }

    /// Writes a consistent copy of this SQLite database to the new file `dest` with
    /// `VACUUM INTO`: it reads inside one transaction, so the copy is one committed state
    /// and, in WAL mode, writers carry on meanwhile. Postgres has `pg_dump` for this.
    #[tracing::instrument(skip_all, fields(backend = %self.backend()))]
    pub async fn snapshot_into(&self, dest: &std::path::Path) -> Result<(), DbError> {
        match self {
            Database::Sqlite(pool) => {
                let target = dest.to_str().ok_or_else(|| DbError::Io {
                    path: dest.display().to_string(),
                    source: std::io::Error::other("the path is not UTF-8"),
                })?;
                sqlx::query("VACUUM INTO ?")
                    .bind(target)
                    .execute(pool)
                    .await
                    .map(drop)
                    .map_err(|source| DbError::Query {
                        what: "VACUUM INTO",
                        backend: Backend::Sqlite,
                        source,
                    })
            }
            Database::Postgres(_) => Err(DbError::Unsupported {
                what: "snapshot_into",
                backend: Backend::Postgres,
                instead: "use pg_dump or the provider's point-in-time recovery",
            }),
        }
    }

    /// Close every connection, waiting for checked-out ones to come back.
    #[tracing::instrument(skip_all, fields(backend = %self.backend()))]
    pub async fn close(&self) {
        match self {
            Database::Sqlite(pool) => pool.close().await,
            Database::Postgres(pool) => pool.close().await,
        }
    }

    /// Whether [`Database::close`] has been called: a closed database takes no more work.
    pub fn is_closed(&self) -> bool {
        match self {
            Database::Sqlite(pool) => pool.is_closed(),
            Database::Postgres(pool) => pool.is_closed(),
        }
    }

    /// Apply the pending migrations of `m` for this engine. Already-applied migrations are
    /// skipped (checked by version and checksum), so calling this twice is a no-op.
    ///
    /// Concurrency: sqlx 0.8's `Migrator` has `locking: true` by default (`Migrator::DEFAULT`,
    /// which `migrate!` uses). On Postgres, `run` first takes `pg_advisory_lock(<id derived from
    /// the database name>)` — before even creating `_sqlx_migrations` — and releases it at the
    /// end, so several processes migrating the same database at once serialise: one applies,
    /// the others then find everything applied. sqlx does not unlock when a migration fails,
    /// and an advisory lock belongs to the session, so we migrate on a connection detached from
    /// the pool and close it afterwards: on any error the session ends and Postgres drops the
    /// lock, instead of a pooled connection holding it forever.
    ///
    /// SQLite has no such lock in sqlx (its `lock()` is a no-op) and two migrators racing on one
    /// file could both try the same `CREATE TABLE`. SQLite is the embedded, one-process shape,
    /// so a process-wide mutex serialises SQLite migrations; several processes migrating the same
    /// SQLite file at once is not supported.
    #[tracing::instrument(skip_all, fields(service = m.service, backend = %self.backend()))]
    pub async fn migrate(&self, m: &Migrations) -> Result<(), DbError> {
        let backend = self.backend();
        let err = |source| DbError::Migrate {
            service: m.service,
            backend,
            source,
        };
        match self {
            Database::Sqlite(pool) => {
                let _guard = SQLITE_MIGRATION_LOCK.lock().await;
                m.sqlite.run(pool).await.map_err(err)?;
            }
            Database::Postgres(pool) => {
                let mut conn = pool
                    .acquire()
                    .await
                    .map_err(|e| err(MigrateError::Execute(e)))?
                    .detach();
                let result = m.postgres.run(&mut conn).await;
                if let Err(e) = conn.close().await {
                    tracing::warn!(error = %e, "closing the migration connection failed");
                }
                result.map_err(err)?;
            }
        }
        tracing::info!("migrations applied");
        Ok(())
    }
}

/// What a URL asks for, decided before handing it to sqlx (whose parser is more lenient: it
/// would read `sqlite:` as an anonymous temporary database).
#[derive(Debug, PartialEq, Eq)]
enum Target {
    SqliteMemory,
    SqliteFile { path: String },
    Postgres,
}

fn parse_target(url: &str) -> Result<Target, String> {
    if url.trim().is_empty() {
        return Err("the URL is empty".into());
    }
    if url != url.trim() {
        return Err("the URL has leading or trailing whitespace".into());
    }
    if url == "sqlite::memory:" || url == "sqlite://:memory:" {
        return Ok(Target::SqliteMemory);
    }
    if let Some(rest) = url.strip_prefix("sqlite://") {
        let path = rest.split('?').next().unwrap_or_default();
        if path.is_empty() {
            return Err("the sqlite URL has no file path".into());
        }
        return Ok(Target::SqliteFile {
            path: path.to_owned(),
        });
    }
    if url.starts_with("sqlite:") {
        return Err("a sqlite URL must be sqlite://<path> or sqlite::memory:".into());
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        // Let the url crate explain what is wrong; its messages never echo the input.
        let parsed = url::Url::parse(url).map_err(|e| format!("malformed postgres URL: {e}"))?;
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err("the postgres URL has no host".into());
        }
        return Ok(Target::Postgres);
    }
    match url.split_once(':') {
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            Err(format!("unsupported database scheme `{scheme}`"))
        }
        _ => Err("the URL has no scheme".into()),
    }
}

/// The settings every SQLite database gets.
fn sqlite_options(
    parsed: Result<SqliteConnectOptions, sqlx::Error>,
) -> Result<SqliteConnectOptions, sqlx::Error> {
    Ok(parsed?
        .create_if_missing(true)
        // WAL: readers do not block the writer and the writer does not block readers.
        .journal_mode(SqliteJournalMode::Wal)
        // In WAL mode, synchronous=NORMAL already survives a process crash (kill -9), because
        // the committed frames are in the OS page cache; but it only fsyncs the WAL at
        // checkpoints, so an OS crash or power loss can roll back transactions that were
        // reported committed. FULL fsyncs the WAL at every commit: a write we acknowledge is on
        // stable storage, which is the durability rule of the design.
        .synchronous(SqliteSynchronous::Full)
        // Statement journals and RETURNING's ephemeral tables stay in memory. With the default
        // (files), every multi-row insert of a group commit spilled a statement journal past
        // 64 KiB into a new /var/tmp file: created, written, unlinked once per batch.
        .pragma("temp_store", "MEMORY")
        // The log is checkpointed by a connection of its own (see `checkpointer`); a
        // writer's commit does it only past this backstop.
        .pragma(
            "wal_autocheckpoint",
            crate::checkpointer::WRITER_CHECKPOINT_PAGES,
        )
        .foreign_keys(true)
        // Rows a query's thread may queue ahead of their reader. At sqlx's default (50) a
        // long read (a replay's page of 10,000 events) stops its thread every 50 rows until
        // the reader wakes and catches up.
        .row_buffer_size(SQLITE_ROW_CHANNEL)
        .busy_timeout(SQLITE_BUSY_TIMEOUT))
}

/// Make sure the directory that will hold a SQLite file exists.
async fn create_parent_dir(path: &str) -> Result<(), DbError> {
    let Some(parent) = std::path::Path::new(path).parent() else {
        return Ok(());
    };
    if parent.as_os_str().is_empty() {
        return Ok(());
    }
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|source| DbError::Io {
            path: parent.display().to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_accepted_forms() {
        assert_eq!(parse_target("sqlite::memory:"), Ok(Target::SqliteMemory));
        assert_eq!(
            parse_target("sqlite://data/ledger.db"),
            Ok(Target::SqliteFile {
                path: "data/ledger.db".into()
            })
        );
        assert_eq!(
            parse_target("sqlite:///var/lib/noema/ledger.db?mode=rwc"),
            Ok(Target::SqliteFile {
                path: "/var/lib/noema/ledger.db".into()
            })
        );
        assert_eq!(
            parse_target("postgres://u:p@localhost:5432/db"),
            Ok(Target::Postgres)
        );
        assert_eq!(
            parse_target("postgresql://localhost/db"),
            Ok(Target::Postgres)
        );
    }

    #[test]
    fn rejects_other_forms_with_a_reason() {
        for (url, needle) in [
            ("", "empty"),
            ("sqlite:", "sqlite://<path>"),
            ("sqlite://", "no file path"),
            ("mysql://x", "`mysql`"),
            ("postgres://[bad", "malformed postgres URL"),
            ("postgres:///db", "no host"),
            ("no-scheme-here", "no scheme"),
        ] {
            match parse_target(url) {
                Err(reason) => assert!(reason.contains(needle), "{url}: {reason}"),
                Ok(t) => panic!("{url} parsed as {t:?}"),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_database_url_is_read_or_refused(
            url in "(sqlite:|sqlite://|postgres://|postgresql://| )[a-z:/.?=&@]{0,16}",
            other in proptest::prelude::any::<String>(),
        ) {
            let _ = parse_target(&url);
            let _ = parse_target(&other);
        }
    }
}

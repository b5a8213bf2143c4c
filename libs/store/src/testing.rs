//! Helpers for tests in this and other crates: fresh, uniquely named Postgres databases.

use sqlx::{Connection, PgConnection};

use crate::db::{Backend, DbError};
use crate::redact::redact_url;

/// Postgres limits identifiers to 63 bytes.
const MAX_IDENTIFIER: usize = 63;

/// How often `CREATE DATABASE` is tried when the server says the failure is passing.
const CREATE_ATTEMPTS: u64 = 5;

/// Failures a busy test server can give and later not give: the template database held by
/// another session (class 55, e.g. an autovacuum worker on `template1`), exhausted resources
/// (class 53) and a server still starting (57P03). Everything else fails at once.
fn is_transient(error: &sqlx::Error) -> bool {
    let Some(code) = error.as_database_error().and_then(|e| e.code()) else {
        return false;
    };
    code.starts_with("55") || code.starts_with("53") || code == "57P03"
}

/// Create an empty database named `<prefix>_<random hex>` on the server of `admin_url` (a URL
/// whose user may `CREATE DATABASE`, e.g. `postgres://postgres@127.0.0.1:5432/postgres`) and
/// return the URL of the new database: `admin_url` with its database name replaced.
///
/// `prefix` is lowercased and every character outside `[a-z0-9_]` becomes `_`.
pub async fn create_test_database(admin_url: &str, prefix: &str) -> Result<String, DbError> {
    let (mut url, redacted) = parse_admin_url(admin_url)?;
    let name = database_name(prefix);

    let mut attempt = 1;
    loop {
        let mut admin =
            PgConnection::connect(admin_url)
                .await
                .map_err(|source| DbError::Connect {
                    backend: Backend::Postgres,
                    url_redacted: redacted.clone(),
                    source,
                })?;
        // `name` is made of [a-z0-9_] only, so quoting it is enough.
        let created = sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut admin)
            .await;
        if let Err(e) = admin.close().await {
            tracing::warn!(error = %e, "closing the admin connection failed");
        }
        match created {
            Ok(_) => break,
            Err(source) if attempt < CREATE_ATTEMPTS && is_transient(&source) => {
                tracing::warn!(error = %source, attempt, "CREATE DATABASE failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(200 * attempt)).await;
                attempt += 1;
            }
            Err(source) => {
                return Err(DbError::Query {
                    what: "CREATE DATABASE",
                    backend: Backend::Postgres,
                    source,
                });
            }
        }
    }

    url.set_path(&format!("/{name}"));
    tracing::debug!(database = %name, "created test database");
    Ok(url.to_string())
}

/// Drop a database made by [`create_test_database`], disconnecting its sessions first.
/// Dropping a database that does not exist is not an error.
pub async fn drop_test_database(admin_url: &str, database_url: &str) -> Result<(), DbError> {
    let (_, redacted) = parse_admin_url(admin_url)?;
    let (target, _) = parse_admin_url(database_url)?;
    let name = target.path().trim_start_matches('/').to_owned();
    if name.is_empty() || !name.bytes().all(is_name_byte) {
        return Err(DbError::InvalidUrl {
            url_redacted: redact_url(database_url).text,
            reason: "not a database made by create_test_database".into(),
        });
    }
    let mut admin = PgConnection::connect(admin_url)
        .await
        .map_err(|source| DbError::Connect {
            backend: Backend::Postgres,
            url_redacted: redacted,
            source,
        })?;
    let dropped = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .execute(&mut admin)
        .await;
    if let Err(e) = admin.close().await {
        tracing::warn!(error = %e, "closing the admin connection failed");
    }
    dropped.map(drop).map_err(|source| DbError::Query {
        what: "DROP DATABASE",
        backend: Backend::Postgres,
        source,
    })
}

/// Set to keep the databases of [`TestDatabase`] guards after their tests, to inspect them.
pub const KEEP_DATABASES_ENV: &str = "NOEMA_TEST_KEEP_DATABASES";

/// A database made by [`create_test_database`] that is dropped with this guard, so a test run
/// does not leave a database (7 MB or more each) behind per test: a full run made over a
/// thousand of them and filled the disk of a CI host. Set [`KEEP_DATABASES_ENV`] to keep them.
#[derive(Debug)]
pub struct TestDatabase {
    admin_url: String,
    url: String,
}

impl TestDatabase {
    /// [`create_test_database`], with the database dropped when the guard is.
    pub async fn create(admin_url: &str, prefix: &str) -> Result<Self, DbError> {
        let url = create_test_database(admin_url, prefix).await?;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            url,
        })
    }

    /// The new database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if std::env::var_os(KEEP_DATABASES_ENV).is_some_and(|v| !v.is_empty()) {
            tracing::info!(url = %redact_url(&self.url).text, "keeping the test database");
            return;
        }
        let admin_url = std::mem::take(&mut self.admin_url);
        let url = std::mem::take(&mut self.url);
        // `drop` cannot await and may run on a runtime's thread, where blocking on that runtime
        // would panic: the drop runs on a thread of its own, with a runtime of its own.
        let dropped = std::thread::Builder::new()
            .name("noema-test-db-drop".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                runtime
                    .block_on(drop_test_database(&admin_url, &url))
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())
            .and_then(|thread| {
                thread
                    .join()
                    .map_err(|_| "the dropping thread panicked".to_owned())?
            });
        if let Err(error) = dropped {
            tracing::warn!(%error, "dropping a test database failed; it is left behind");
        }
    }
}

/// Cuts a database made by [`create_test_database`] off (`allow = false`: no new
/// connections, existing sessions terminated) or lets it be reached again (`allow = true`),
/// as an outage of the database would. For readiness tests.
pub async fn set_database_reachable(
    admin_url: &str,
    database_url: &str,
    allow: bool,
) -> Result<(), DbError> {
    let (_, redacted) = parse_admin_url(admin_url)?;
    let (target, _) = parse_admin_url(database_url)?;
    let name = target.path().trim_start_matches('/').to_owned();
    if name.is_empty() || !name.bytes().all(is_name_byte) {
        return Err(DbError::InvalidUrl {
            url_redacted: redact_url(database_url).text,
            reason: "not a database made by create_test_database".into(),
        });
    }
    let mut admin = PgConnection::connect(admin_url)
        .await
        .map_err(|source| DbError::Connect {
            backend: Backend::Postgres,
            url_redacted: redacted,
            source,
        })?;
    // `name` is made of [a-z0-9_] only, so quoting it is enough.
    let mut sql = format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS {allow};");
    if !allow {
        sql.push_str(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}';"
        ));
    }
    let changed = sqlx::raw_sql(&sql).execute(&mut admin).await;
    if let Err(e) = admin.close().await {
        tracing::warn!(error = %e, "closing the admin connection failed");
    }
    changed.map(drop).map_err(|source| DbError::Query {
        what: "ALTER DATABASE ALLOW_CONNECTIONS",
        backend: Backend::Postgres,
        source,
    })
}

fn parse_admin_url(admin_url: &str) -> Result<(url::Url, String), DbError> {
    let redacted = redact_url(admin_url);
    let invalid = |reason: String| DbError::InvalidUrl {
        url_redacted: redacted.text.clone(),
        reason,
    };
    if !(admin_url.starts_with("postgres://") || admin_url.starts_with("postgresql://")) {
        return Err(invalid("test databases need a postgres:// URL".into()));
    }
    let url =
        url::Url::parse(admin_url).map_err(|e| invalid(format!("malformed postgres URL: {e}")))?;
    Ok((url, redacted.text.clone()))
}

fn database_name(prefix: &str) -> String {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let mut clean: String = prefix
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() || clean.starts_with(|c: char| c.is_ascii_digit()) {
        clean.insert_str(0, "t_");
    }
    clean.truncate(MAX_IDENTIFIER - suffix.len() - 1);
    format!("{clean}_{suffix}")
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_unique_and_short() {
        let a = database_name("Noema Store-Test!");
        let b = database_name("Noema Store-Test!");
        assert_ne!(a, b);
        assert!(a.starts_with("noema_store_test__"), "{a}");
        assert!(a.bytes().all(is_name_byte), "{a}");
        let long = database_name(&"x".repeat(200));
        assert!(long.len() <= MAX_IDENTIFIER, "{}", long.len());
        assert!(database_name("").starts_with("t__"));
        assert!(database_name("1abc").starts_with("t_1abc_"));
    }
}

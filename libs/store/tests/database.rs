//! Database pools and migrations on SQLite (always) and Postgres (NOEMA_TEST_DATABASE_URL,
//! required: a missing backend fails loudly).
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report

use std::time::Duration;

use noema_store::testing::{TestDatabase, create_test_database, drop_test_database};
use noema_store::{Backend, Database, DbError, DbOptions, Migrations};

static PROBE: Migrations = Migrations {
    service: "probe",
    sqlite: sqlx::migrate!("tests/migrations/sqlite"),
    postgres: sqlx::migrate!("tests/migrations/postgres"),
};

fn admin_url() -> String {
    match std::env::var("NOEMA_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "NOEMA_TEST_DATABASE_URL is not set: the Postgres tests need an admin URL such as \
             postgres://postgres@127.0.0.1:5432/postgres (scripts/test starts a server and sets it). \
             A missing backend is a failure, never a skip."
        ),
    }
}

async fn applied_migrations(db: &Database) -> i64 {
    let sql = "SELECT COUNT(*) FROM _sqlx_migrations";
    match db {
        Database::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        Database::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
    }
    .expect("count _sqlx_migrations")
}

async fn count_probe_rows(db: &Database) -> i64 {
    let sql = "SELECT COUNT(*) FROM probe";
    match db {
        Database::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        Database::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
    }
    .expect("count probe rows")
}

/// The whole error chain, as a log line would show it.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[tokio::test]
async fn sqlite_file_connect_migrate_twice_is_a_noop() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A directory that does not exist yet: connect creates it and the file.
    let path = dir.path().join("nested/dir/probe.db");
    let url = format!("sqlite://{}", path.display());

    let db = Database::connect(&url).await.expect("connect");
    assert_eq!(db.backend(), Backend::Sqlite);
    db.ping().await.expect("ping");
    db.migrate(&PROBE).await.expect("first migrate");
    assert_eq!(applied_migrations(&db).await, 1);
    db.migrate(&PROBE).await.expect("second migrate");
    assert_eq!(
        applied_migrations(&db).await,
        1,
        "migrating twice applied again"
    );

    if let Database::Sqlite(pool) = &db {
        sqlx::query("INSERT INTO probe (id, label) VALUES (1, 'kept')")
            .execute(pool)
            .await
            .expect("insert");
        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(pool)
            .await
            .expect("journal_mode");
        assert_eq!(journal, "wal");
        let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(pool)
            .await
            .expect("synchronous");
        assert_eq!(synchronous, 2, "synchronous must be FULL (2)");
        let fk: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(pool)
            .await
            .expect("foreign_keys");
        assert_eq!(fk, 1);
        let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
            .fetch_one(pool)
            .await
            .expect("busy_timeout");
        assert_eq!(busy, 5000);
    }
    db.close().await;
    assert!(path.is_file(), "the database file was not created");

    // The data and the migration record survive a reconnect.
    let db = Database::connect(&url).await.expect("reconnect");
    db.migrate(&PROBE).await.expect("migrate after reconnect");
    assert_eq!(applied_migrations(&db).await, 1);
    assert_eq!(count_probe_rows(&db).await, 1);
    db.close().await;
}

#[tokio::test]
async fn sqlite_memory_database_is_one_database() {
    let db = Database::connect_with(
        "sqlite::memory:",
        &DbOptions {
            max_connections: 8,
            acquire_timeout: Duration::from_secs(5),
        },
    )
    .await
    .expect("connect");
    db.migrate(&PROBE).await.expect("migrate");
    db.migrate(&PROBE).await.expect("migrate again");
    // Every query sees the migrated schema: the pool is one connection to one database.
    for _ in 0..5 {
        assert_eq!(count_probe_rows(&db).await, 0);
    }
    assert_eq!(applied_migrations(&db).await, 1);
    db.ping().await.expect("ping");
}

#[tokio::test]
async fn sqlite_concurrent_migrations_in_one_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("race.db").display());
    let a = Database::connect(&url).await.expect("connect a");
    let b = Database::connect(&url).await.expect("connect b");
    let (ra, rb) = tokio::join!(a.migrate(&PROBE), b.migrate(&PROBE));
    ra.expect("migrate a");
    rb.expect("migrate b");
    assert_eq!(applied_migrations(&a).await, 1);
}

#[tokio::test]
async fn malformed_urls_are_explained_without_secrets() {
    let cases = [
        ("mysql://x", "unsupported database scheme `mysql`"),
        ("sqlite:", "sqlite://<path>"),
        ("sqlite://", "no file path"),
        ("postgres://[bad", "malformed postgres URL"),
        ("", "empty"),
        ("postgres://admin:hunter2@[bad/db", "malformed postgres URL"),
        ("postgres://admin:hunter2@/db", "empty host"),
        ("mysql://admin:hunter2@db/x", "`mysql`"),
        (
            "postgres://admin@db/x?sslmode=bogus&password=hunter2",
            "ssl_mode",
        ),
    ];
    for (url, needle) in cases {
        let err = Database::connect(url).await.expect_err(url);
        let text = chain(&err);
        assert!(
            matches!(err, DbError::InvalidUrl { .. }),
            "{url}: expected InvalidUrl, got {err:?}"
        );
        assert!(
            text.contains(needle),
            "{url}: {text:?} does not mention {needle:?}"
        );
        assert!(
            text.contains("accepted forms")
                && text.contains("postgres://")
                && text.contains("sqlite://"),
            "{url}: the message does not list the accepted forms: {text}"
        );
        assert!(
            !text.contains("hunter2"),
            "{url}: the password leaked: {text}"
        );
        assert!(
            !format!("{err:?}").contains("hunter2"),
            "{url}: the password leaked: {err:?}"
        );
    }
}

#[tokio::test]
async fn connection_failures_do_not_leak_the_password() {
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    let url = "postgres://admin:hunter2@127.0.0.1:1/db";
    let options = DbOptions {
        max_connections: 1,
        acquire_timeout: Duration::from_secs(2),
    };
    let err = Database::connect_with(url, &options)
        .await
        .expect_err("nothing listens on port 1");
    assert!(
        matches!(
            err,
            DbError::Connect {
                backend: Backend::Postgres,
                ..
            }
        ),
        "{err:?}"
    );
    let text = chain(&err);
    assert!(text.contains("admin:***@127.0.0.1:1"), "{text}");
    assert!(!text.contains("hunter2"), "the password leaked: {text}");
    assert!(
        !format!("{err:?}").contains("hunter2"),
        "the password leaked: {err:?}"
    );
}

#[tokio::test]
async fn postgres_connect_migrate_twice_is_a_noop() {
    let admin = admin_url();
    let url = create_test_database(&admin, "noema_store_migrate")
        .await
        .expect("create test database");
    let db = Database::connect(&url).await.expect("connect");
    assert_eq!(db.backend(), Backend::Postgres);
    db.ping().await.expect("ping");
    db.migrate(&PROBE).await.expect("first migrate");
    assert_eq!(applied_migrations(&db).await, 1);
    db.migrate(&PROBE).await.expect("second migrate");
    assert_eq!(
        applied_migrations(&db).await,
        1,
        "migrating twice applied again"
    );
    assert_eq!(count_probe_rows(&db).await, 0);
    db.close().await;

    // The postgresql:// spelling reaches the same database.
    let alt = url.replacen("postgres://", "postgresql://", 1);
    let db = Database::connect(&alt)
        .await
        .expect("connect postgresql://");
    assert_eq!(applied_migrations(&db).await, 1);
    db.close().await;
    drop_test_database(&admin, &url)
        .await
        .expect("drop test database");
}

#[tokio::test]
async fn postgres_concurrent_migrations_are_serialised() {
    let admin = admin_url();
    let url = create_test_database(&admin, "noema_store_race")
        .await
        .expect("create test database");
    // Separate pools stand for separate processes starting at the same moment.
    let mut pools = Vec::new();
    for _ in 0..4 {
        pools.push(Database::connect(&url).await.expect("connect"));
    }
    let results = futures::future::join_all(pools.iter().map(|db| db.migrate(&PROBE))).await;
    for (i, r) in results.into_iter().enumerate() {
        if let Err(e) = r {
            panic!("concurrent migrate #{i} failed: {}", chain(&e));
        }
    }
    assert_eq!(applied_migrations(&pools[0]).await, 1);
    assert_eq!(count_probe_rows(&pools[0]).await, 0);
    // The advisory lock was released: a later migrate does not hang.
    tokio::time::timeout(Duration::from_secs(10), pools[1].migrate(&PROBE))
        .await
        .expect("migrate after the race hung: advisory lock still held")
        .expect("migrate after the race");
    for db in &pools {
        db.close().await;
    }
    drop_test_database(&admin, &url)
        .await
        .expect("drop test database");
}

#[tokio::test]
async fn create_test_database_gives_distinct_databases() {
    let admin = admin_url();
    let a = create_test_database(&admin, "noema_store_distinct")
        .await
        .expect("create a");
    let b = create_test_database(&admin, "noema_store_distinct")
        .await
        .expect("create b");
    assert_ne!(a, b);
    let da = Database::connect(&a).await.expect("connect a");
    da.migrate(&PROBE).await.expect("migrate a");
    let db = Database::connect(&b).await.expect("connect b");
    let Database::Postgres(pool) = &db else {
        panic!("not postgres")
    };
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'probe'",
    )
    .fetch_one(pool)
    .await
    .expect("query b");
    assert_eq!(tables, 0, "migrating one test database changed another");
    da.close().await;
    db.close().await;
    drop_test_database(&admin, &a).await.expect("drop a");
    drop_test_database(&admin, &b).await.expect("drop b");
}

/// Whether a database of this name is on the server of `admin`.
async fn database_exists(admin: &str, url: &str) -> bool {
    let name = url::Url::parse(url).expect("test database URL").path()[1..].to_owned();
    let db = Database::connect(admin).await.expect("connect admin");
    let Database::Postgres(pool) = &db else {
        panic!("not postgres")
    };
    let found: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_database WHERE datname = $1")
        .bind(&name)
        .fetch_one(pool)
        .await
        .expect("query pg_database");
    db.close().await;
    found == 1
}

// A guard is dropped at the end of a test, on the test's runtime, with the test's pools often
// still open: the database goes all the same.
#[tokio::test]
async fn a_test_database_guard_drops_its_database_even_while_connected() {
    let admin = admin_url();
    let guard = TestDatabase::create(&admin, "noema_store_guard")
        .await
        .expect("create test database");
    let url = guard.url().to_owned();
    let db = Database::connect(&url).await.expect("connect");
    db.migrate(&PROBE).await.expect("migrate");
    assert!(database_exists(&admin, &url).await);
    drop(guard);
    assert!(
        !database_exists(&admin, &url).await,
        "the guard left {url} behind"
    );
    drop(db);
}

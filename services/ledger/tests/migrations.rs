//! Upgrading a ledger database that already holds data: every row, the audit chain, the
//! foreign key and the immutability triggers survive each migration, on SQLite and on
//! Postgres.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use noema_ledger::domain::canonical::{CanonicalObject, validate};
use noema_ledger::domain::reference::AgentReference;
use noema_ledger::error::LedgerError;
use noema_ledger::store::{Page, Query};
use noema_ledger::{LedgerStore, MIGRATIONS};
use noema_store::testing::TestDatabase;
use noema_store::{Database, Migrations};
use sqlx::migrate::Migrator;
use time::OffsetDateTime;

mod support;

/// The last migration before the unique keys on `storage_path` and `hash` were dropped.
const BEFORE_DROPPED_KEYS: &str = "0003";

/// The ledger's migrations up to and including version `last`, read from the source tree
/// as an older build would have embedded them.
async fn migrations_up_to(last: &str, scratch: &Path) -> Migrations {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/ledger");
    let mut migrators = Vec::new();
    for backend in ["sqlite", "postgres"] {
        let dir = scratch.join(backend);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(source.join(backend)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            if name.split('_').next() <= Some(last) {
                std::fs::copy(&path, dir.join(&name)).unwrap();
            }
        }
        migrators.push(Migrator::new(dir.as_path()).await.unwrap());
    }
    let postgres = migrators.pop().unwrap();
    let sqlite = migrators.pop().unwrap();
    Migrations {
        service: "ledger",
        sqlite,
        postgres,
    }
}

/// A database of either engine, and (Postgres) the guard that drops it when the test ends.
async fn database(postgres: bool, dir: &Path) -> (Database, Option<TestDatabase>) {
    let (url, database) = if postgres {
        let admin = std::env::var("NOEMA_TEST_DATABASE_URL").expect(
            "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test, which starts Postgres",
        );
        let database = TestDatabase::create(&admin, "migrations").await.unwrap();
        (database.url().to_owned(), Some(database))
    } else {
        (
            format!("sqlite://{}", dir.join("ledger.db").display()),
            None,
        )
    };
    (Database::connect(&url).await.unwrap(), database)
}

fn canonical(n: u32) -> CanonicalObject {
    let submission =
        support::submission(format!("{{\"upgrade\":{n}}}").into_bytes(), "upgrade:test");
    validate(submission, OffsetDateTime::now_utc()).unwrap().0
}

fn reference_to(object: &CanonicalObject, n: u32) -> AgentReference {
    AgentReference {
        canonical_object_id: object.id.clone(),
        ..support::orphan_reference(&format!("7d0c9a52-1b3e-4c8f-9a6d-{n:012}"))
    }
}

/// Runs one statement, for the checks the ledger's own API cannot make (it has no update
/// or delete path).
async fn execute(db: &Database, sql: &str) -> Result<u64, sqlx::Error> {
    match db {
        Database::Sqlite(pool) => Ok(sqlx::query(sql).execute(pool).await?.rows_affected()),
        Database::Postgres(pool) => Ok(sqlx::query(sql).execute(pool).await?.rows_affected()),
    }
}

/// Unique constraints on the two tables the migration rebuilt, by the column they cover.
async fn unique_columns(db: &Database) -> Vec<String> {
    match db {
        Database::Sqlite(pool) => sqlx::query_scalar(
            "SELECT t.name || '.' || c.name FROM (SELECT 'canonical_objects' AS name \
             UNION ALL SELECT 'audit_log') t, pragma_index_list(t.name) i, \
             pragma_index_info(i.name) c WHERE i.\"unique\" = 1 ORDER BY 1",
        )
        .fetch_all(pool)
        .await
        .unwrap(),
        Database::Postgres(pool) => sqlx::query_scalar(
            "SELECT r.relname || '.' || a.attname FROM pg_index x \
             JOIN pg_class r ON r.oid = x.indrelid \
             JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum = ANY(x.indkey) \
             WHERE x.indisunique AND r.relname IN ('canonical_objects', 'audit_log') ORDER BY 1",
        )
        .fetch_all(pool)
        .await
        .unwrap(),
    }
}

struct Contents {
    canonicals: Vec<CanonicalObject>,
    references: Vec<AgentReference>,
    audit: Vec<noema_core::audit::AuditEntry>,
}

async fn contents(store: &LedgerStore, db: &Database) -> Contents {
    let audit = db.audit_oldest_first(0, 1000).await.unwrap();
    noema_core::audit::verify_chain(0, String::new(), &audit).unwrap();
    Contents {
        canonicals: store
            .list_canonicals(&Query::default(), &Page::first(1000))
            .await
            .unwrap(),
        references: store
            .list_references(&Query::default(), &Page::first(1000))
            .await
            .unwrap(),
        audit,
    }
}

/// A database written by a build before the unique keys were dropped upgrades in place: its
/// objects, references and audit chain are unchanged, the keys are gone (ids stay unique),
/// and the foreign key and append-only triggers still hold.
async fn a_populated_ledger_upgrades_in_place(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (db, _database) = database(postgres, dir.path()).await;
    db.migrate(&migrations_up_to(BEFORE_DROPPED_KEYS, &dir.path().join("old")).await)
        .await
        .unwrap();
    let store = LedgerStore::new(db.clone());
    store.ensure_initialized().await.unwrap();
    let objects: Vec<_> = (0..20).map(canonical).collect();
    for object in &objects {
        store.insert_canonical(object, "upgrade").await.unwrap();
    }
    for (n, object) in objects.iter().enumerate().take(5) {
        let n = u32::try_from(n).unwrap();
        store
            .insert_reference(&reference_to(object, n), "key", "upgrade")
            .await
            .unwrap();
    }
    let before = contents(&store, &db).await;
    let dropped = ["audit_log.hash", "canonical_objects.storage_path"];
    let unique = unique_columns(&db).await;
    assert!(
        dropped.iter().all(|key| unique.iter().any(|u| u == key)),
        "the old schema this test starts from: {unique:?}"
    );
    drop(store);

    db.migrate(&MIGRATIONS).await.unwrap();
    let store = LedgerStore::new(db.clone());
    let after = contents(&store, &db).await;
    assert_eq!(after.canonicals, before.canonicals);
    assert_eq!(after.references, before.references);
    assert_eq!(after.audit, before.audit);
    let unique = unique_columns(&db).await;
    assert!(
        !unique.iter().any(|u| dropped.contains(&u.as_str())),
        "{unique:?}"
    );
    assert!(
        unique.iter().any(|u| u == "canonical_objects.id"),
        "{unique:?}"
    );

    // Ids stay unique, the foreign key holds, and nothing can be changed or removed.
    assert!(matches!(
        store.insert_canonical(&objects[0], "upgrade").await,
        Err(LedgerError::DuplicateCanonical)
    ));
    let orphan = support::orphan_reference("0f3c1d2e-4a9b-4f6a-8e6f-0e4d5b9a5911");
    assert!(
        store
            .insert_reference(&orphan, "key", "upgrade")
            .await
            .is_err(),
        "a reference to a missing object is refused"
    );
    for statement in [
        "UPDATE canonical_objects SET created_by = 'mallory'",
        "DELETE FROM canonical_objects",
        "UPDATE audit_log SET actor = 'mallory'",
        "DELETE FROM audit_log",
    ] {
        assert!(
            execute(&db, statement).await.is_err(),
            "{statement} was allowed"
        );
    }

    // And the ledger keeps writing on the new schema, its chain continuing the old one.
    let more = canonical(100);
    store.insert_canonical(&more, "upgrade").await.unwrap();
    store
        .insert_reference(&reference_to(&more, 100), "key", "upgrade")
        .await
        .unwrap();
    let grown = contents(&store, &db).await;
    assert_eq!(grown.canonicals.len(), before.canonicals.len() + 1);
    assert_eq!(grown.references.len(), before.references.len() + 1);
    assert_eq!(grown.audit[..before.audit.len()], before.audit[..]);
    assert_eq!(grown.audit.len(), before.audit.len() + 2);
}

mod sqlite_file {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_populated_ledger_upgrades_in_place() {
        super::a_populated_ledger_upgrades_in_place(false).await;
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_populated_ledger_upgrades_in_place() {
        super::a_populated_ledger_upgrades_in_place(true).await;
    }
}

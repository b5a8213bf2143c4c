//! The group-commit writer's SQLite connection: it must neither starve the pool's readers
//! nor hand its large page cache to them, whatever happens to its batches.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use noema_ledger::domain::canonical::{CanonicalObject, validate};
use noema_ledger::domain::reference::AgentReference;
use noema_ledger::error::LedgerError;
use noema_ledger::store::{Page, Query};
use noema_ledger::{LedgerStore, MIGRATIONS};
use noema_store::{Database, DbOptions};
use sqlx::ConnectOptions as _;
use time::OffsetDateTime;

mod support;

/// Long enough for any honest acquire on a test machine, short enough that a starved reader
/// fails the test instead of hanging it.
const ACQUIRE: Duration = Duration::from_secs(3);

async fn store(url: &str, max_connections: u32) -> (LedgerStore, Database) {
    let options = DbOptions {
        max_connections,
        acquire_timeout: ACQUIRE,
    };
    let db = Database::connect_with(url, &options).await.unwrap();
    db.migrate(&MIGRATIONS).await.unwrap();
    let store = LedgerStore::new(db.clone());
    store.ensure_initialized().await.unwrap();
    (store, db)
}

fn canonical(n: u32) -> CanonicalObject {
    let submission = support::submission(format!("{{\"writer\":{n}}}").into_bytes(), "writer:test");
    validate(submission, OffsetDateTime::now_utc()).unwrap().0
}

/// A reference whose insert breaks the foreign key, so the writer's batch fails.
fn orphan_reference() -> AgentReference {
    support::orphan_reference("0f3c1d2e-4a9b-4f6a-8e6f-0e4d5b9a590f")
}

/// `sqlite::memory:` is one connection; a writer that kept it would leave every read
/// waiting for a connection until the acquire timeout.
#[tokio::test]
async fn an_in_memory_ledger_still_reads_after_writes() {
    let (store, _db) = store("sqlite::memory:", 1).await;
    store.insert_canonical(&canonical(1), "t").await.unwrap();
    store.insert_canonical(&canonical(2), "t").await.unwrap();

    let listed = store
        .list_canonicals(&Query::default(), &Page::first(10))
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    let audit = store.list_audit(None, 10).await.unwrap();
    assert_eq!(audit.len(), 3, "init and one entry per object");
    store.insert_canonical(&canonical(3), "t").await.unwrap();
}

/// The writer's connection is its own: after good batches, a failed batch and a batch
/// through `write_batch`, every pooled connection is free and has a new connection's page
/// cache size, not the writer's.
#[tokio::test]
async fn pooled_connections_never_carry_the_writers_cache() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let (store, db) = store(&url, 2).await;
    store.insert_canonical(&canonical(1), "t").await.unwrap();
    let failed = store
        .insert_reference(&orphan_reference(), "ed25519:AAAA", "t")
        .await;
    assert!(
        matches!(failed, Err(LedgerError::Database(_))),
        "{failed:?}"
    );
    store.insert_canonical(&canonical(2), "t").await.unwrap();
    let outcomes = store
        .write_batch(&[noema_ledger::store::Write::Canonical {
            object: canonical(3),
            submitted_by: "t".into(),
        }])
        .await;
    assert!(outcomes[0].is_ok(), "{outcomes:?}");

    let Database::Sqlite(pool) = &db else {
        unreachable!("a sqlite:// URL opens SQLite")
    };
    let mut fresh = pool.connect_options().connect().await.unwrap();
    let default_cache: i64 = sqlx::query_scalar("PRAGMA cache_size")
        .fetch_one(&mut fresh)
        .await
        .unwrap();
    // Both pooled connections at once: neither is held by the writer.
    let mut first = pool.acquire().await.unwrap();
    let mut second = pool.acquire().await.unwrap();
    for conn in [&mut first, &mut second] {
        let cache: i64 = sqlx::query_scalar("PRAGMA cache_size")
            .fetch_one(&mut **conn)
            .await
            .unwrap();
        assert_eq!(
            cache, default_cache,
            "a pooled connection has the writer's cache"
        );
    }
    drop((first, second));
    assert_eq!(
        store
            .list_canonicals(&Query::default(), &Page::first(10))
            .await
            .unwrap()
            .len(),
        3
    );
}

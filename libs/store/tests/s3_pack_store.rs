//! The packed S3 store (`s3+pack://`) on the test S3 server (NOEMA_TEST_S3_URL) with its index
//! on SQLite and on Postgres (NOEMA_TEST_DATABASE_URL), both required: a missing backend fails
//! loudly. The conformance suite, then what packing adds: concurrent puts share packs, a
//! pack goes when its last key does, replicas share one index, stores never share rows.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use noema_store::object::{self, ObjectStore, PutOutcome, S3PackObjectStore, conformance};
use noema_store::testing::TestDatabase;
use noema_store::{Database, ObjectError};

fn env(name: &str) -> String {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => value,
        _ => panic!(
            "{name} is not set: the packed store's tests need the test S3 server and Postgres \
             (scripts/test starts both). A missing backend is a failure, never a skip."
        ),
    }
}

fn fresh(what: &str) -> String {
    format!("{what}-{}", uuid::Uuid::new_v4().simple())
}

/// `s3://bucket/<fresh prefix>?query` of the test server, with `scheme` for `s3`.
fn url(scheme: &str, prefix: &str) -> String {
    let s3 = env("NOEMA_TEST_S3_URL");
    let (location, query) = s3.split_once('?').unwrap_or((&s3, ""));
    let bucket = location
        .strip_prefix("s3://")
        .expect("NOEMA_TEST_S3_URL starts with s3://")
        .split('/')
        .next()
        .unwrap();
    format!("{scheme}://{bucket}/{prefix}?{query}")
}

/// An index database: a SQLite file in `dir`, or a fresh Postgres database.
async fn index_db(postgres: bool, dir: &tempfile::TempDir) -> (Database, Option<TestDatabase>) {
    if postgres {
        let guard = TestDatabase::create(&env("NOEMA_TEST_DATABASE_URL"), "s3pack")
            .await
            .unwrap();
        (Database::connect(guard.url()).await.unwrap(), Some(guard))
    } else {
        let url = format!("sqlite://{}", dir.path().join("index.db").display());
        (Database::connect(&url).await.unwrap(), None)
    }
}

/// The pack objects under `prefix` in the bucket, seen as plain S3 objects.
async fn packs(prefix: &str) -> Vec<String> {
    let raw = object::open(&url("s3", prefix)).await.unwrap();
    let page = raw.list("packs/", None, 10_000).await.unwrap();
    page.objects.into_iter().map(|m| m.key).collect()
}

async fn conformance_on(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (db, _guard) = index_db(postgres, &dir).await;
    let store = object::open_with_database(&url("s3+pack", &fresh("conformance")), &db)
        .await
        .unwrap();
    conformance::run_all(store, &fresh("cases")).await;
}

#[tokio::test]
async fn conformance_with_a_sqlite_index() {
    conformance_on(false).await;
}

#[tokio::test]
async fn conformance_with_a_postgres_index() {
    conformance_on(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_share_packs_and_read_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _guard) = index_db(true, &dir).await;
    let prefix = fresh("shared");
    let store: Arc<dyn ObjectStore> = object::open_with_database(&url("s3+pack", &prefix), &db)
        .await
        .unwrap();
    let writers: Vec<_> = (0..64u32)
        .map(|n| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let body = Bytes::from(format!("object {n} ").repeat(usize::try_from(n).unwrap()));
                let key = format!("objects/{n:03}.json");
                let outcome = store
                    .put_if_absent(&key, body.clone(), "application/json")
                    .await
                    .unwrap();
                (key, body, outcome)
            })
        })
        .collect();
    let mut written = Vec::new();
    for writer in writers {
        written.push(writer.await.unwrap());
    }
    for (key, body, outcome) in &written {
        assert_eq!(*outcome, PutOutcome::Created, "{key}");
        let read = store.get(key).await.unwrap();
        assert_eq!(read.meta.size, u64::try_from(body.len()).unwrap(), "{key}");
        assert_eq!(
            read.meta.content_type.as_deref(),
            Some("application/json"),
            "{key}"
        );
        assert_eq!(read.bytes().await.unwrap(), *body, "{key}");
    }
    let packs = packs(&prefix).await;
    assert!(
        !packs.is_empty() && packs.len() < written.len(),
        "64 concurrent puts went into {} packs",
        packs.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_conditional_puts_of_one_key_create_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _guard) = index_db(true, &dir).await;
    let store: Arc<dyn ObjectStore> =
        object::open_with_database(&url("s3+pack", &fresh("race")), &db)
            .await
            .unwrap();
    let racers: Vec<_> = (0..16u8)
        .map(|n| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let outcome = store
                    .put_if_absent("the/key", Bytes::from(vec![n; 10]), "")
                    .await
                    .unwrap();
                (n, outcome)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for racer in racers {
        let (n, outcome) = racer.await.unwrap();
        if outcome == PutOutcome::Created {
            winners.push(n);
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let stored = store.get("the/key").await.unwrap().bytes().await.unwrap();
    assert_eq!(
        stored,
        Bytes::from(vec![winners[0]; 10]),
        "the winner's bytes"
    );
}

#[tokio::test]
async fn a_pack_is_deleted_with_its_last_key() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _guard) = index_db(false, &dir).await;
    let prefix = fresh("drop");
    let store = object::open_with_database(&url("s3+pack", &prefix), &db)
        .await
        .unwrap();
    store
        .put("a", Bytes::from_static(b"first"), "")
        .await
        .unwrap();
    store
        .put("b", Bytes::from_static(b"second"), "")
        .await
        .unwrap();
    let before: BTreeSet<String> = packs(&prefix).await.into_iter().collect();
    assert_eq!(before.len(), 2, "one pack per sequential put");

    // Replacing `a` moves it to a new pack; its old pack holds nothing any more.
    store
        .put("a", Bytes::from_static(b"third"), "")
        .await
        .unwrap();
    let after: BTreeSet<String> = packs(&prefix).await.into_iter().collect();
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(
        before.intersection(&after).count(),
        1,
        "the old pack of `a` is gone"
    );
    assert_eq!(
        store.get("a").await.unwrap().bytes().await.unwrap(),
        Bytes::from_static(b"third")
    );

    store.delete("a").await.unwrap();
    store.delete("b").await.unwrap();
    assert!(packs(&prefix).await.is_empty(), "no key left, no pack left");
    assert!(store.get("b").await.unwrap_err().is_not_found());
}

#[tokio::test]
async fn replicas_share_the_index_and_stores_never_share_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _guard) = index_db(true, &dir).await;
    let prefix = fresh("replicas");
    let one = S3PackObjectStore::open(&url("s3+pack", &prefix), db.clone())
        .await
        .unwrap();
    let two = S3PackObjectStore::open(&url("s3+pack", &prefix), db.clone())
        .await
        .unwrap();
    let other = S3PackObjectStore::open(&url("s3+pack", &fresh("other")), db.clone())
        .await
        .unwrap();

    one.put("k", Bytes::from_static(b"from one"), "text/plain")
        .await
        .unwrap();
    assert_eq!(
        two.get("k").await.unwrap().bytes().await.unwrap(),
        Bytes::from_static(b"from one")
    );
    assert_eq!(
        two.put_if_absent("k", Bytes::from_static(b"from two"), "")
            .await
            .unwrap(),
        PutOutcome::Exists
    );
    assert!(
        other.head("k").await.unwrap().is_none(),
        "another store's key"
    );
    assert!(other.list("", None, 10).await.unwrap().objects.is_empty());
}

#[tokio::test]
async fn opening_it_without_a_database_says_why_not() {
    let err = object::open(&url("s3+pack", "anything")).await.unwrap_err();
    assert!(
        matches!(&err, ObjectError::InvalidUrl { reason, .. } if reason.contains("database")),
        "{err}"
    );
}

//! Shared pieces of continuity's store and operations tests: a service over SQLite + files
//! or Postgres + S3 (the servers scripts/test provides; a missing one fails, never skips),
//! callers, and request bodies.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use noema_continuity::domain::access::Caller;
use noema_continuity::ops::{Continuity, Options};
use noema_continuity::{ContinuityStore, MIGRATIONS};
use noema_core::scopes::Principal;
use noema_store::object::FaultyObjectStore;
use noema_store::testing::TestDatabase;
use noema_store::{Database, DbOptions, ObjectStore};
use serde_json::{Value, json};

/// Runs each named `async fn case(Backend)` of the test file once on SQLite (`sqlite::case`)
/// and once on Postgres (`postgres::case`). Not every file that shares this module uses it.
#[allow(unused_macros)]
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::support::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::support::Backend::Postgres).await;
                }
            )*
        }
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub struct Harness {
    pub continuity: Continuity,
    pub store: ContinuityStore,
    pub objects: Arc<dyn ObjectStore>,
    /// The service's view of `objects`: faults armed here reach the service's writes only.
    pub faults: Arc<FaultyObjectStore>,
    pub db: Database,
    _dir: tempfile::TempDir,
    /// Postgres: the test's database, dropped after the pools above.
    _database: Option<TestDatabase>,
}

fn env(name: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not set: run through scripts/test (or scripts/test --backends-only \
             cargo nextest run -p noema-continuity)"
            )
        })
}

pub async fn harness(backend: Backend) -> Harness {
    harness_with(backend, Options::default()).await
}

pub async fn harness_with(backend: Backend, options: Options) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let db_options = DbOptions {
        max_connections: 8,
        ..DbOptions::default()
    };
    let mut database = None;
    let (db, objects) = match backend {
        Backend::Sqlite => {
            let url = format!("sqlite://{}", dir.path().join("continuity.db").display());
            let objects = noema_store::object::open(&format!(
                "file://{}",
                dir.path().join("objects").display()
            ))
            .await
            .unwrap();
            (
                Database::connect_with(&url, &db_options).await.unwrap(),
                objects,
            )
        }
        Backend::Postgres => {
            let guard = TestDatabase::create(&env("NOEMA_TEST_DATABASE_URL"), "continuity")
                .await
                .unwrap();
            let url = guard.url().to_owned();
            database = Some(guard);
            let s3 = env("NOEMA_TEST_S3_URL");
            let (location, query) = s3.split_once('?').unwrap_or((&s3, ""));
            let prefix = format!(
                "{}/continuity-{}",
                location.trim_end_matches('/'),
                noema_core::content_id::sha256_hex(dir.path().display().to_string().as_bytes())
                    .get(..12)
                    .unwrap()
            );
            let s3 = if query.is_empty() {
                prefix
            } else {
                format!("{prefix}?{query}")
            };
            let objects = noema_store::object::open(&s3).await.unwrap();
            (
                Database::connect_with(&url, &db_options).await.unwrap(),
                objects,
            )
        }
    };
    db.migrate(&MIGRATIONS).await.unwrap();
    let store = ContinuityStore::new(db.clone());
    store.ensure_initialized().await.unwrap();
    let faults = Arc::new(FaultyObjectStore::new(Arc::clone(&objects)));
    let continuity = Continuity::new(store.clone(), faults.clone(), options);
    Harness {
        continuity,
        store,
        objects,
        faults,
        db,
        _dir: dir,
        _database: database,
    }
}

/// A token's caller: `scopes`, namespaces, acting in `tenant`.
pub fn caller_with(tenant: &str, scopes: &[&str], read: &[&str], write: &[&str]) -> Caller {
    let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
    Caller::resolve(
        Principal {
            token_id: format!("tok-{tenant}"),
            peer_id: tenant.to_owned(),
            scopes: list(scopes),
            read_namespaces: list(read),
            write_namespaces: list(write),
            superuser: scopes.contains(&"admin:peers"),
            tenant: tenant.to_owned(),
        },
        None,
    )
    .unwrap()
}

/// An agent of `tenant` with continuity read and write.
pub fn agent(tenant: &str) -> Caller {
    caller_with(tenant, &["continuity:write"], &["*"], &["*"])
}

/// The owner (superuser) acting in `tenant`.
pub fn owner(tenant: &str) -> Caller {
    caller_with(tenant, &["admin:peers"], &["*"], &["*"])
}

/// `YYYY-01-01T00:00:<n>Z`-style increasing timestamps: minute `n / 60`, second `n % 60`.
pub fn at(n: u32) -> String {
    format!(
        "2026-01-01T{:02}:{:02}:{:02}Z",
        n / 3600,
        (n / 60) % 60,
        n % 60
    )
}

/// A valid capsule of `kind`/`id` at `updated_at`, with `priorities`.
pub fn capsule(kind: &str, id: &str, updated_at: &str, priorities: &[&str]) -> Value {
    json!({
        "subject_kind": kind,
        "subject_id": id,
        "updated_at": updated_at,
        "verified_at": updated_at,
        "source": {"producer": "test", "update_reason": "manual"},
        "continuity": {
            "top_priorities": priorities,
            "active_concerns": [],
            "active_constraints": ["stay small"],
            "open_loops": ["finish the test"],
            "stance_summary": "A steady stance that is long enough to be adequate.",
            "drift_signals": []
        },
        "confidence": {"continuity": 0.75, "relationship_model": 0.5}
    })
}

/// An upsert body.
pub fn upsert(kind: &str, id: &str, updated_at: &str, priorities: &[&str]) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "subject_kind": kind,
        "subject_id": id,
        "capsule": capsule(kind, id, updated_at, priorities),
    }))
    .unwrap()
}

pub fn body(value: Value) -> Vec<u8> {
    serde_json::to_vec(&value).unwrap()
}

pub fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

pub fn read_body(kind: &str, id: &str) -> Vec<u8> {
    body(json!({"subject_kind": kind, "subject_id": id}))
}

/// A refusal's HTTP status and exact body, as the REST front will send them.
pub fn refusal(err: &noema_continuity::Error) -> (u16, String) {
    let refusal = err
        .refusal()
        .unwrap_or_else(|| panic!("not a refusal: {err}"));
    (
        refusal.http_status(),
        noema_continuity::domain::json::to_py_json(&refusal.body()),
    )
}

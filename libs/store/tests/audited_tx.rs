//! `AuditedTx` and the engine-independent SQL (`noema_store::sql`), on SQLite (a file, so
//! writers really contend) and on Postgres (NOEMA_TEST_DATABASE_URL, required: a missing
//! backend fails, never skips).
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, query};
use noema_store::testing::TestDatabase;
use noema_store::{Database, DbOptions, Migrations, with_pool};
use serde_json::json;
use sqlx::Pool;
use time::OffsetDateTime;

static AUDITED: Migrations = Migrations {
    service: "audited",
    sqlite: sqlx::migrate!("tests/audit_migrations/sqlite"),
    postgres: sqlx::migrate!("tests/audit_migrations/postgres"),
};

async fn sqlite(dir: &tempfile::TempDir) -> Database {
    let url = format!("sqlite://{}", dir.path().join("audited.db").display());
    let db = Database::connect(&url).await.unwrap();
    db.migrate(&AUDITED).await.unwrap();
    db
}

/// A migrated database, and the guard that drops it when the test ends.
async fn postgres() -> (Database, TestDatabase) {
    let admin = std::env::var("NOEMA_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test (or scripts/test \
             --backends-only cargo nextest run -p noema-store)"
        )
    });
    let database = TestDatabase::create(&admin, "audited_tx").await.unwrap();
    let url = database.url().to_owned();
    let options = DbOptions {
        max_connections: 8,
        ..DbOptions::default()
    };
    let db = Database::connect_with(&url, &options).await.unwrap();
    db.migrate(&AUDITED).await.unwrap();
    (db, database)
}

fn note_audit(id: &str) -> AuditDraft {
    AuditDraft {
        actor: "agent:test".into(),
        action: "create_note".into(),
        target_id: Some(id.into()),
        target_type: Some("note".into()),
        detail: Some(json!({"id": id})),
    }
}

/// Inserts notes `ids` and records one audit entry each, in one audited transaction.
async fn write_notes<D: Engine>(pool: &Pool<D>, ids: &[&str], commit: bool) {
    let mut tx = AuditedTx::begin(pool).await.unwrap();
    for (n, id) in ids.iter().enumerate() {
        query("INSERT INTO notes (id, body, n) VALUES ($1, $2, $3)")
            .bind(*id)
            .bind(format!("body of {id}"))
            .bind(n as i64)
            .execute(tx.conn())
            .await
            .unwrap();
        tx.record(note_audit(id), OffsetDateTime::now_utc());
    }
    if commit {
        tx.commit().await.unwrap();
    }
}

async fn note_ids(db: &Database) -> Vec<String> {
    let rows: Vec<(String,)> = with_pool!(db, |pool| {
        query("SELECT id FROM notes ORDER BY id")
            .fetch_all(pool)
            .await
            .unwrap()
    });
    rows.into_iter().map(|(id,)| id).collect()
}

/// Every entry chains to the one before, its hash recomputes, and the ids run 1..=n.
async fn assert_chain(db: &Database, targets: &[&str]) {
    let entries = db.audit_oldest_first(0, 1000).await.unwrap();
    let got: Vec<&str> = entries
        .iter()
        .map(|e| e.target_id.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(got, targets);
    let mut prev = String::new();
    for (n, entry) in entries.iter().enumerate() {
        assert_eq!(entry.id, n as i64 + 1);
        assert_eq!(entry.prev_hash, prev, "entry {} breaks the chain", entry.id);
        assert_eq!(entry.hash, entry.compute_hash().unwrap());
        prev.clone_from(&entry.hash);
    }
}

async fn commit_appends_in_order_and_drop_or_rollback_writes_nothing(db: Database) {
    with_pool!(&db, |pool| write_notes(pool, &["a", "b"], true).await);
    assert_chain(&db, &["a", "b"]).await;

    // Dropped without commit: neither the rows nor their entries.
    with_pool!(&db, |pool| write_notes(pool, &["c"], false).await);
    with_pool!(&db, |pool| {
        let mut tx = AuditedTx::begin(pool).await.unwrap();
        query("INSERT INTO notes (id, body, n) VALUES ($1, $2, $3)")
            .bind("d")
            .bind("body")
            .bind(0_i64)
            .execute(tx.conn())
            .await
            .unwrap();
        tx.record(note_audit("d"), OffsetDateTime::now_utc());
        tx.rollback().await.unwrap();
    });
    assert_eq!(note_ids(&db).await, ["a", "b"]);

    // The chain carries on from where the last commit left it.
    with_pool!(&db, |pool| write_notes(pool, &["e"], true).await);
    assert_chain(&db, &["a", "b", "e"]).await;
    assert_eq!(note_ids(&db).await, ["a", "b", "e"]);
}

async fn concurrent_writers_are_serialised_on_the_head(db: Database) {
    let writers: Vec<_> = (0..16)
        .map(|n| {
            let db = db.clone();
            tokio::spawn(async move {
                let id = format!("w{n:02}");
                with_pool!(&db, |pool| write_notes(pool, &[id.as_str()], true).await);
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let entries = db.audit_oldest_first(0, 1000).await.unwrap();
    let mut targets: Vec<String> = entries
        .iter()
        .map(|e| e.target_id.clone().unwrap_or_default())
        .collect();
    let chain: Vec<&str> = targets.iter().map(String::as_str).collect();
    assert_chain(&db, &chain).await;
    targets.sort();
    let expected: Vec<String> = (0..16).map(|n| format!("w{n:02}")).collect();
    assert_eq!(targets, expected);
}

async fn audit_init_writes_the_first_entry_once(db: Database) {
    let init = || AuditDraft {
        actor: "system:init".into(),
        action: "init".into(),
        target_id: None,
        target_type: Some("test".into()),
        detail: None,
    };
    db.audit_init(init()).await.unwrap();
    db.audit_init(init()).await.unwrap();
    let entries = db.audit_oldest_first(0, 10).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].action, "init");
    let newest = db.audit_newest_first(None, 10).await.unwrap();
    assert_eq!(newest, entries);
}

async fn builder_binds_lists_and_rows(db: Database) {
    with_pool!(&db, |pool| {
        let mut tx = AuditedTx::begin(pool).await.unwrap();
        let notes = [("x", 1_i64), ("y", 2), ("z", 3)];
        let mut insert = Builder::new("INSERT INTO notes (id, body, n) ");
        insert.push_values(notes, |row, (id, n)| {
            row.bind(id).bind(format!("{id}!")).bind(n);
        });
        let inserted = insert.build().execute(tx.conn()).await.unwrap();
        assert_eq!(inserted, 3);
        tx.record(note_audit("xyz"), OffsetDateTime::now_utc());
        tx.commit().await.unwrap();

        let mut select = Builder::new("SELECT id, body, n FROM notes WHERE id IN (");
        select
            .push_list(["z", "x", "missing"])
            .push(") ORDER BY n DESC");
        let rows: Vec<(String, String, i64)> = select.build().fetch_all(pool).await.unwrap();
        assert_eq!(
            rows,
            [("z".into(), "z!".into(), 3), ("x".into(), "x!".into(), 1)]
        );
        let none: Option<(String,)> = query("SELECT id FROM notes WHERE id = $1")
            .bind("missing")
            .fetch_optional(pool)
            .await
            .unwrap();
        assert_eq!(none, None);
        let (count,): (i64,) = query("SELECT COUNT(*) FROM notes")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(count, 3);
    });
}

#[tokio::test]
async fn sqlite_commit_appends_in_order_and_drop_or_rollback_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    commit_appends_in_order_and_drop_or_rollback_writes_nothing(sqlite(&dir).await).await;
}

#[tokio::test]
async fn postgres_commit_appends_in_order_and_drop_or_rollback_writes_nothing() {
    let (db, _database) = postgres().await;
    commit_appends_in_order_and_drop_or_rollback_writes_nothing(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_concurrent_writers_are_serialised_on_the_head() {
    let dir = tempfile::tempdir().unwrap();
    concurrent_writers_are_serialised_on_the_head(sqlite(&dir).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_concurrent_writers_are_serialised_on_the_head() {
    let (db, _database) = postgres().await;
    concurrent_writers_are_serialised_on_the_head(db).await;
}

#[tokio::test]
async fn sqlite_audit_init_writes_the_first_entry_once() {
    let dir = tempfile::tempdir().unwrap();
    audit_init_writes_the_first_entry_once(sqlite(&dir).await).await;
}

#[tokio::test]
async fn postgres_audit_init_writes_the_first_entry_once() {
    let (db, _database) = postgres().await;
    audit_init_writes_the_first_entry_once(db).await;
}

#[tokio::test]
async fn sqlite_builder_binds_lists_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    builder_binds_lists_and_rows(sqlite(&dir).await).await;
}

#[tokio::test]
async fn postgres_builder_binds_lists_and_rows() {
    let (db, _database) = postgres().await;
    builder_binds_lists_and_rows(db).await;
}

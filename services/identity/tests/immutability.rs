//! The database refuses to change or delete a signed entry even when the application is
//! bypassed: a direct SQL UPDATE of a signed entry's content fails, on SQLite and on
//! Postgres (which needs NOEMA_TEST_DATABASE_URL, set by scripts/test; it fails, never
//! skips, without it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_identity::IdentityStore;
use noema_identity::domain::diary::{Diary, Visibility};
use noema_identity::domain::entry::{Entry, EntryType};
use noema_identity::store::SignatureInput;
use noema_store::Database;
use noema_store::testing::TestDatabase;
use time::OffsetDateTime;

async fn sqlite() -> Database {
    let db = Database::connect("sqlite::memory:").await.unwrap();
    db.migrate(&noema_identity::MIGRATIONS).await.unwrap();
    db
}

/// A migrated database, and the guard that drops it when the test ends.
async fn postgres() -> (Database, TestDatabase) {
    let admin = std::env::var("NOEMA_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test (or scripts/test \
             --backends-only cargo test -p noema-identity --test immutability)"
        )
    });
    let database = TestDatabase::create(&admin, "identity_immutability")
        .await
        .unwrap();
    let url = database.url().to_owned();
    let db = Database::connect(&url).await.unwrap();
    db.migrate(&noema_identity::MIGRATIONS).await.unwrap();
    (db, database)
}

/// A diary with one signed and one draft entry, written through the store.
async fn seed(db: &Database) -> (String, String) {
    let store = IdentityStore::new(db.clone());
    let now = OffsetDateTime::now_utc();
    let diary = Diary {
        id: "diary-1".into(),
        owner_id: "agent:a".into(),
        name: "journal".into(),
        visibility: Visibility::Private,
        signed: false,
        team_id: String::new(),
        created_at: now,
        updated_at: now,
        owner_public_key: None,
    };
    store.insert_diary(&diary, "agent:a", now).await.unwrap();
    let mut ids = Vec::new();
    for (id, signed, entry_type) in [
        ("signed-1", true, EntryType::Semantic),
        ("draft-1", false, EntryType::Reflection),
    ] {
        let mut e = Entry {
            id: id.into(),
            diary_id: diary.id.clone(),
            title: Some("Title".into()),
            content: "Content".into(),
            tags: Some(vec!["tag1".into()]),
            entry_type,
            importance: 5,
            injection_risk: false,
            access_count: 0,
            last_accessed_at: None,
            content_hash: String::new(),
            signature: None,
            created_by: "agent:a".into(),
            creator_public_key: None,
            created_at: now,
            updated_at: now,
            superseded: false,
            visibility: Visibility::Private,
        };
        e.content_hash = e.computed_hash();
        let signing = signed.then(|| SignatureInput {
            request_id: format!("req-{id}"),
            signature: format!("sig-{id}"),
            nonce: format!("nonce-{id}"),
            signed_by: "agent:a".into(),
            signer_fingerprint: "21FE-31DF-A154-A261".into(),
        });
        store
            .insert_entry(&e, signing.as_ref(), "agent:a", now)
            .await
            .unwrap();
        ids.push(e.id);
    }
    (ids[0].clone(), ids[1].clone())
}

async fn exec(db: &Database, sql: &str, id: &str) -> Result<u64, String> {
    let result = match db {
        Database::Sqlite(pool) => sqlx::query(sql)
            .bind(id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()),
        Database::Postgres(pool) => sqlx::query(sql)
            .bind(id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()),
    };
    result.map_err(|e| e.to_string())
}

async fn signed_entries_resist_direct_sql(db: Database) {
    let (signed, draft) = seed(&db).await;
    for sql in [
        "UPDATE diary_entries SET content = 'tampered' WHERE id = $1",
        "UPDATE diary_entries SET title = NULL WHERE id = $1",
        "UPDATE diary_entries SET tags = '[]' WHERE id = $1",
        "UPDATE diary_entries SET entry_type = 'episodic' WHERE id = $1",
        "UPDATE diary_entries SET content_hash = 'bafkrei' WHERE id = $1",
        "UPDATE diary_entries SET content_signature = NULL WHERE id = $1",
        "DELETE FROM diary_entries WHERE id = $1",
    ] {
        let err = exec(&db, sql, &signed).await.expect_err(sql);
        assert!(
            err.contains("content-signed"),
            "{sql} failed for another reason: {err}"
        );
    }
    // Always-allowed columns still change on a signed (non-reflection) entry.
    assert_eq!(
        exec(
            &db,
            "UPDATE diary_entries SET importance = 9, access_count = 3 WHERE id = $1",
            &signed
        )
        .await,
        Ok(1)
    );
    // Drafts are freely editable and deletable.
    assert_eq!(
        exec(
            &db,
            "UPDATE diary_entries SET content = 'new' WHERE id = $1",
            &draft
        )
        .await,
        Ok(1)
    );
    // Deleting the diary would cascade into the signed entry: refused too.
    let err = exec(&db, "DELETE FROM diaries WHERE id = $1", "diary-1")
        .await
        .unwrap_err();
    assert!(err.contains("content-signed"), "{err}");
    assert_eq!(
        exec(&db, "DELETE FROM diary_entries WHERE id = $1", &draft).await,
        Ok(1)
    );
}

#[tokio::test]
async fn sqlite_refuses_changes_to_signed_entries() {
    signed_entries_resist_direct_sql(sqlite().await).await;
}

#[tokio::test]
async fn postgres_refuses_changes_to_signed_entries() {
    let (db, _database) = postgres().await;
    signed_entries_resist_direct_sql(db).await;
}

#[tokio::test]
async fn sqlite_has_fts5() {
    let db = sqlite().await;
    let Database::Sqlite(pool) = &db else {
        unreachable!()
    };
    let row: (i64,) = sqlx::query_as("SELECT sqlite_compileoption_used('ENABLE_FTS5')")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(row.0, 1, "the bundled SQLite must have FTS5");
}

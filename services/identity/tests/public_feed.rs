//! The public feed's keyset paging on both engines, where the e2e cases cannot reach:
//! entries that share a timestamp, and entries within one millisecond (MoltNet's
//! millisecond cursor would skip some of them). Every entry is walked exactly once, newest
//! first by (created_at, id). Postgres needs NOEMA_TEST_DATABASE_URL (set by scripts/test;
//! it fails, never skips, without it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_core::keys::SigningKeyPair;
use noema_identity::IdentityStore;
use noema_identity::domain::diary::{Diary, Visibility};
use noema_identity::domain::entry::{Entry, EntryType};
use noema_identity::ops::Identity;
use noema_store::Database;
use noema_store::testing::TestDatabase;
use time::{Duration, OffsetDateTime};

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
             --backends-only cargo test -p noema-identity --test public_feed)"
        )
    });
    let database = TestDatabase::create(&admin, "identity_public_feed")
        .await
        .unwrap();
    let url = database.url().to_owned();
    let db = Database::connect(&url).await.unwrap();
    db.migrate(&noema_identity::MIGRATIONS).await.unwrap();
    (db, database)
}

async fn diary(store: &IdentityStore, id: &str, visibility: Visibility, now: OffsetDateTime) {
    let d = Diary {
        id: id.into(),
        owner_id: "agent:a".into(),
        name: "journal".into(),
        visibility,
        signed: false,
        team_id: String::new(),
        created_at: now,
        updated_at: now,
        owner_public_key: None,
    };
    store.insert_diary(&d, "agent:a", now).await.unwrap();
}

async fn entry(store: &IdentityStore, id: String, diary_id: &str, created_at: OffsetDateTime) {
    let mut e = Entry {
        id,
        diary_id: diary_id.into(),
        title: None,
        content: "feed".into(),
        tags: None,
        entry_type: EntryType::Semantic,
        importance: 5,
        injection_risk: false,
        access_count: 0,
        last_accessed_at: None,
        content_hash: String::new(),
        signature: None,
        created_by: "agent:a".into(),
        creator_public_key: None,
        created_at,
        updated_at: created_at,
        superseded: false,
        visibility: Visibility::Public,
    };
    e.content_hash = e.computed_hash();
    store
        .insert_entry(&e, None, "agent:a", created_at)
        .await
        .unwrap();
}

async fn keyset_paging_walks_every_entry_once(db: Database) {
    let store = IdentityStore::new(db.clone());
    // Microseconds: what both engines store exactly. Not a whole second: SQLite keeps
    // timestamps as RFC 3339 text without trailing zeros, which sorts a whole second after
    // the fractions within it (true of every created_at order there, rare with real clocks).
    let base = OffsetDateTime::from_unix_timestamp(1_790_000_000).unwrap()
        + Duration::microseconds(123_456);
    let key = SigningKeyPair::from_seed(&[5; 32]).public_key();
    store
        .register_agent("agent:a", &key, "", "agent:a", base)
        .await
        .unwrap();
    diary(&store, "public", Visibility::Public, base).await;
    diary(&store, "private", Visibility::Private, base).await;
    // Three entries at one instant, three more within the same millisecond, two older.
    let times =
        [0, 0, 0, 100, 400, 900, -5_000, -9_000].map(|us| base + Duration::microseconds(us));
    let mut expected: Vec<(OffsetDateTime, String)> = Vec::new();
    for (n, at) in times.iter().enumerate() {
        let id = format!("00000000-0000-4000-8000-{:012}", (n * 7919) % 1000);
        entry(&store, id.clone(), "public", *at).await;
        expected.push((*at, id));
        let hidden = format!("10000000-0000-4000-8000-{n:012}");
        entry(&store, hidden, "private", *at).await;
    }
    expected.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = expected.into_iter().map(|(_, id)| id).collect();

    let ops = Identity::new(store);
    for limit in [1, 2, 3, 100] {
        let mut walked = Vec::new();
        let mut cursor = String::new();
        for _ in 0..20 {
            let page = ops.public_feed(limit, &cursor, "", false).await.unwrap();
            walked.extend(page.items.iter().map(|e| e.id.clone()));
            match page.next {
                Some(next) => cursor = next.encode(),
                None => break,
            }
        }
        assert_eq!(walked, expected, "limit {limit}");
    }
}

#[tokio::test]
async fn sqlite_feed_keyset() {
    keyset_paging_walks_every_entry_once(sqlite().await).await;
}

#[tokio::test]
async fn postgres_feed_keyset() {
    let (db, _database) = postgres().await;
    keyset_paging_walks_every_entry_once(db).await;
}

//! Durability of the write path against a fault-injecting object store, on SQLite +
//! pack:// (the embedded default), on Postgres + S3 (s3://) and on Postgres + packed S3
//! (s3+pack://, its index in the ledger's database): a failure between storage and ledger
//! never leaves a ledger row without bytes, reconcile reports the orphan, and a retry adopts it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use noema_ledger::domain::canonical::CanonicalSubmission;
use noema_ledger::domain::mode::SystemMode;
use noema_ledger::error::LedgerError;
use noema_ledger::ledger::Ledger;
use noema_ledger::{LedgerStore, MIGRATIONS};
use noema_store::object::faulty::FaultyObjectStore;
use noema_store::testing::TestDatabase;
use noema_store::{Database, ObjectStore};
use time::OffsetDateTime;

mod support;

struct Rig {
    ledger: Arc<Ledger>,
    faults: Arc<FaultyObjectStore>,
    db: Database,
    _dir: tempfile::TempDir,
    /// Postgres: the test's database, dropped with the rig.
    _database: Option<TestDatabase>,
}

/// What a rig's ledger keeps its rows and objects in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    SqlitePack,
    PostgresS3,
    PostgresS3Pack,
}

async fn rig(backing: Backing) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let mut database = None;
    let scheme = if backing == Backing::PostgresS3Pack {
        "s3+pack"
    } else {
        "s3"
    };
    let (db_url, store_url) = if backing != Backing::SqlitePack {
        let admin = std::env::var("NOEMA_TEST_DATABASE_URL").expect(
            "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test, which starts Postgres",
        );
        let s3 = std::env::var("NOEMA_TEST_S3_URL").expect(
            "NOEMA_TEST_S3_URL is not set: run through scripts/test, which starts the S3 server",
        );
        let guard = TestDatabase::create(&admin, "durability").await.unwrap();
        let url = guard.url().to_owned();
        database = Some(guard);
        let (location, query) = s3.split_once('?').unwrap_or((&s3, ""));
        let location = location.trim_end_matches('/');
        let location = location.strip_prefix("s3://").unwrap_or(location);
        let prefix = format!("{scheme}://{location}/durability-{}", uuid_like());
        (url, format!("{prefix}?{query}"))
    } else {
        (
            format!("sqlite://{}", dir.path().join("ledger.db").display()),
            format!("pack://{}", dir.path().join("packs").display()),
        )
    };
    let db = Database::connect(&db_url).await.unwrap();
    db.migrate(&MIGRATIONS).await.unwrap();
    // The packed store's index gets a pool of its own: a test that closes the ledger's pool
    // stands for a failure of the ledger's writes, not of the store's.
    let index_db = Database::connect(&db_url).await.unwrap();
    let inner = noema_store::object::open_with_database(&store_url, &index_db)
        .await
        .unwrap();
    let faults = Arc::new(FaultyObjectStore::new(inner));
    let store = LedgerStore::new(db.clone());
    store.ensure_initialized().await.unwrap();
    // Canonical writes never call identity; a channel to nowhere proves it.
    let identity =
        noema_runtime::client::channel("identity", "http://127.0.0.1:9", Default::default())
            .unwrap();
    let objects: Arc<dyn ObjectStore> = faults.clone();
    let ledger = Ledger::new(
        store,
        objects,
        noema_proto::identity::v1::identity_service_client::IdentityServiceClient::new(identity),
        Duration::from_secs(1),
    );
    Rig {
        ledger: Arc::new(ledger),
        faults,
        db,
        _dir: dir,
        _database: database,
    }
}

fn uuid_like() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    data_encoding::HEXLOWER.encode(&bytes)
}

fn submission(n: u32) -> CanonicalSubmission {
    support::submission(
        format!("{{\"durable\":{n},\"run\":\"{}\"}}", uuid_like()).into_bytes(),
        "durability:test",
    )
}

async fn transient_storage_failures_are_retried(backing: Backing) {
    let rig = rig(backing).await;
    rig.faults.fail_next_puts(2);
    let object = rig.ledger.put_canonical(submission(1), "t").await.unwrap();
    assert_eq!(rig.faults.injected_faults(), 2);
    assert!(
        rig.faults
            .inner()
            .head(&object.storage_path)
            .await
            .unwrap()
            .is_some()
    );
    // A lost acknowledgement (bytes written, error returned) is retried harmlessly too.
    rig.faults.lose_next_put_acks(1);
    rig.ledger.put_canonical(submission(2), "t").await.unwrap();
    let report = rig.ledger.reconcile(true).await.unwrap();
    assert_eq!((report.checked, report.ok()), (2, 2));
    assert!(report.orphans_in_storage.is_empty());
}

async fn storage_that_stays_down_writes_no_row(backing: Backing) {
    let rig = rig(backing).await;
    rig.faults
        .fail_next_puts(noema_store::object::faulty::STICKY);
    let s = submission(3);
    let id = s.id.clone();
    let err = rig.ledger.put_canonical(s, "t").await.unwrap_err();
    assert!(matches!(err, LedgerError::StorageWrite(_)), "{err:?}");
    // The ledger retries through the one write policy: its attempts reach the store, no
    // more and no fewer.
    assert_eq!(
        rig.faults.injected_faults(),
        u64::from(noema_store::object::WriteRetry::STANDARD.attempts)
    );
    assert!(
        rig.ledger
            .store()
            .get_canonical(&id)
            .await
            .unwrap()
            .is_none(),
        "no row without bytes"
    );
    let audit = rig.ledger.store().list_audit(None, 10).await.unwrap();
    assert!(audit.iter().all(|e| e.action != "create_canonical"));
}

/// A halt that lands between the storage write and the ledger insert: the insert's own
/// transaction refuses it, the bytes are an orphan that reconcile reports, and the same
/// write after resuming adopts them.
async fn a_failure_between_storage_and_ledger_leaves_a_detectable_orphan(backing: Backing) {
    let rig = rig(backing).await;
    rig.faults.set_latency(Duration::from_millis(400));
    let s = submission(4);
    let (id, path) = (s.id.clone(), s.storage_path.clone());
    let retry = s.clone();
    let ledger = Arc::clone(&rig.ledger);
    let write = tokio::spawn(async move { ledger.put_canonical(s, "t").await });
    // The write is now sleeping in the object store's put; halt the system meanwhile.
    tokio::time::sleep(Duration::from_millis(150)).await;
    rig.ledger
        .store()
        .set_mode(SystemMode::Stopped, "ops:test", OffsetDateTime::now_utc())
        .await
        .unwrap();
    let err = write.await.unwrap().unwrap_err();
    assert!(matches!(err, LedgerError::Stopped), "{err:?}");
    rig.faults.reset();
    assert!(
        rig.ledger
            .store()
            .get_canonical(&id)
            .await
            .unwrap()
            .is_none()
    );
    let report = rig.ledger.reconcile(true).await.unwrap();
    assert_eq!(report.orphans_in_storage.len(), 1, "{report:?}");
    assert_eq!(report.orphans_in_storage[0].0, path);
    assert!(report.missing_in_storage.is_empty());

    rig.ledger
        .store()
        .set_mode(SystemMode::Running, "ops:test", OffsetDateTime::now_utc())
        .await
        .unwrap();
    rig.ledger.put_canonical(retry, "t").await.unwrap();
    let report = rig.ledger.reconcile(true).await.unwrap();
    assert!(
        report.orphans_in_storage.is_empty(),
        "the retry adopted the orphan"
    );
    assert_eq!((report.checked, report.ok()), (1, 1));
}

/// The database failing after the bytes are stored: the caller is told the object may
/// need reconciliation, and there is no row without bytes.
async fn a_database_failure_after_storage_is_reported(backing: Backing) {
    let rig = rig(backing).await;
    rig.faults.set_latency(Duration::from_millis(300));
    let s = submission(5);
    let ledger = Arc::clone(&rig.ledger);
    let write = tokio::spawn(async move { ledger.put_canonical(s, "t").await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    rig.db.close().await;
    let err = write.await.unwrap().unwrap_err();
    assert!(
        matches!(err, LedgerError::LedgerInsertAfterStore(_)),
        "{err:?}"
    );
    let status = tonic::Status::from(err);
    assert_eq!(
        status.message(),
        "payload stored but ledger insert failed — object may need reconciliation"
    );
}

async fn stored_bytes_that_change_are_reported_corrupt(backing: Backing) {
    let rig = rig(backing).await;
    let object = rig.ledger.put_canonical(submission(6), "t").await.unwrap();
    rig.faults
        .inner()
        .put(
            &object.storage_path,
            bytes::Bytes::from_static(b"tampered"),
            "application/json",
        )
        .await
        .unwrap();
    let quick = rig.ledger.reconcile(false).await.unwrap();
    assert!(
        quick.corrupt.is_empty(),
        "presence-only check does not read bytes"
    );
    let full = rig.ledger.reconcile(true).await.unwrap();
    assert_eq!(full.corrupt.len(), 1);
    assert_eq!(full.corrupt[0].0, object.id);
    assert_eq!(full.ok(), 0);
}

/// The whole audit log, after checking its hash chain.
async fn verified_audit(db: &Database) -> Vec<noema_core::audit::AuditEntry> {
    let entries = db.audit_oldest_first(0, 1000).await.unwrap();
    noema_core::audit::verify_chain(0, String::new(), &entries).unwrap();
    entries
}

fn count(entries: &[noema_core::audit::AuditEntry], action: &str) -> usize {
    entries.iter().filter(|e| e.action == action).count()
}

/// Concurrent writers share group commits: every acknowledged write is a row with its own
/// audit entry, racing twins of one object yield exactly one success, and the chain holds.
async fn concurrent_writes_are_group_committed_and_all_kept(backing: Backing) {
    let rig = rig(backing).await;
    let twin = submission(0);
    let mut tasks = tokio::task::JoinSet::new();
    for n in 1..=64 {
        let ledger = Arc::clone(&rig.ledger);
        tasks.spawn(async move { (false, ledger.put_canonical(submission(n), "t").await) });
    }
    for _ in 0..8 {
        let ledger = Arc::clone(&rig.ledger);
        let twin = twin.clone();
        tasks.spawn(async move { (true, ledger.put_canonical(twin, "t").await) });
    }
    let (mut distinct, mut twins_ok, mut twins_duplicate) = (0, 0, 0);
    while let Some(joined) = tasks.join_next().await {
        match joined.unwrap() {
            (false, Ok(_)) => distinct += 1,
            (false, Err(err)) => panic!("distinct write failed: {err}"),
            (true, Ok(_)) => twins_ok += 1,
            (true, Err(LedgerError::DuplicateCanonical)) => twins_duplicate += 1,
            (true, Err(err)) => panic!("twin write failed oddly: {err}"),
        }
    }
    assert_eq!((distinct, twins_ok, twins_duplicate), (64, 1, 7));

    let rows = rig
        .ledger
        .list_canonicals(
            &noema_ledger::store::Query::default(),
            &noema_ledger::store::Page::first(1000),
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 65);
    let entries = verified_audit(&rig.db).await;
    assert_eq!(
        count(&entries, "create_canonical"),
        65,
        "one audit entry per row, none for duplicates"
    );
    let report = rig.ledger.reconcile(true).await.unwrap();
    assert_eq!(report.ok(), 65);
    assert!(report.orphans_in_storage.is_empty());
}

/// A write that fails inside a group commit (a reference to a missing object breaks the
/// foreign key) fails alone: the batch is retried write by write, and duplicates within
/// the batch are answered as such.
async fn a_failing_write_does_not_fail_its_batch(backing: Backing) {
    use noema_ledger::store::Write;
    let rig = rig(backing).await;
    let canonical = |n| {
        let (object, _) =
            noema_ledger::domain::canonical::validate(submission(n), OffsetDateTime::now_utc())
                .unwrap();
        Write::Canonical {
            object,
            submitted_by: "t".into(),
        }
    };
    let orphan_reference = Write::Reference {
        reference: support::orphan_reference("9b2f6a3e-6f0e-4d5b-9a59-0f8f3c1d2e4a"),
        public_key: "ed25519:AAAA".into(),
        submitted_by: "t".into(),
    };
    let first = canonical(1);
    let writes = vec![
        first.clone(),
        canonical(2),
        orphan_reference,
        first,
        canonical(3),
    ];
    let outcomes = rig.ledger.store().write_batch(&writes).await;
    assert!(outcomes[0].is_ok() && outcomes[1].is_ok() && outcomes[4].is_ok());
    assert!(
        matches!(outcomes[2], Err(LedgerError::Database(_))),
        "{:?}",
        outcomes[2]
    );
    assert!(matches!(outcomes[3], Err(LedgerError::DuplicateCanonical)));

    // Without the bad write, the same shape commits as one group.
    let fourth = canonical(4);
    let writes = vec![fourth.clone(), canonical(5), fourth];
    let outcomes = rig.ledger.store().write_batch(&writes).await;
    assert!(outcomes[0].is_ok() && outcomes[1].is_ok());
    assert!(matches!(outcomes[2], Err(LedgerError::DuplicateCanonical)));

    let entries = verified_audit(&rig.db).await;
    assert_eq!(
        count(&entries, "create_canonical"),
        5,
        "one entry per inserted row"
    );
    assert_eq!(count(&entries, "create_reference"), 0);
}

macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite_file {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Backing::SqlitePack).await;
                }
            )*
        }
        mod postgres_s3 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Backing::PostgresS3).await;
                }
            )*
        }
        mod postgres_s3_pack {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Backing::PostgresS3Pack).await;
                }
            )*
        }
    };
}

on_both_backends!(
    transient_storage_failures_are_retried,
    storage_that_stays_down_writes_no_row,
    a_failure_between_storage_and_ledger_leaves_a_detectable_orphan,
    a_database_failure_after_storage_is_reported,
    stored_bytes_that_change_are_reported_corrupt,
    concurrent_writes_are_group_committed_and_all_kept,
    a_failing_write_does_not_fail_its_batch,
);

//! Durability of the write path against a fault-injecting object store, on SQLite +
//! file:// and on Postgres + S3: a failure between storage and ledger never leaves a
//! ledger row without bytes, reconcile reports the orphan, and a retry adopts it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use noema_ledger::domain::canonical::CanonicalSubmission;
use noema_ledger::domain::mode::SystemMode;
use noema_ledger::error::LedgerError;
use noema_ledger::ledger::Ledger;
use noema_ledger::{LedgerStore, MIGRATIONS};
use noema_store::object::faulty::FaultyObjectStore;
use noema_store::{Database, ObjectStore};
use time::OffsetDateTime;

struct Rig {
    ledger: Arc<Ledger>,
    faults: Arc<FaultyObjectStore>,
    db: Database,
    _dir: tempfile::TempDir,
}

async fn rig(postgres: bool) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let (db_url, store_url) = if postgres {
        let admin = std::env::var("NOEMA_TEST_DATABASE_URL").expect(
            "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test, which starts Postgres",
        );
        let s3 = std::env::var("NOEMA_TEST_S3_URL").expect(
            "NOEMA_TEST_S3_URL is not set: run through scripts/test, which starts the S3 server",
        );
        let url = noema_store::testing::create_test_database(&admin, "durability")
            .await
            .unwrap();
        let (location, query) = s3.split_once('?').unwrap_or((&s3, ""));
        let prefix = format!(
            "{}/durability-{}",
            location.trim_end_matches('/'),
            uuid_like()
        );
        (url, format!("{prefix}?{query}"))
    } else {
        (
            format!("sqlite://{}", dir.path().join("ledger.db").display()),
            format!("file://{}", dir.path().join("objects").display()),
        )
    };
    let db = Database::connect(&db_url).await.unwrap();
    db.migrate(&MIGRATIONS).await.unwrap();
    let inner = noema_store::object::open(&store_url).await.unwrap();
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
    }
}

fn uuid_like() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    data_encoding::HEXLOWER.encode(&bytes)
}

fn submission(n: u32) -> CanonicalSubmission {
    let request = noema_client::ledger::canonical_request(
        format!("{{\"durable\":{n},\"run\":\"{}\"}}", uuid_like()).into_bytes(),
        "observation",
        "application/json",
        "durability:test",
        OffsetDateTime::now_utc(),
    );
    CanonicalSubmission {
        schema_version: request.schema_version,
        id: request.id,
        object_type: request.object_type,
        content_type: request.content_type,
        size_bytes: request.size_bytes,
        created_at: request.created_at,
        created_by: request.created_by,
        storage_path: request.storage_path,
        payload: request.payload,
        metadata: None,
    }
}

async fn transient_storage_failures_are_retried(postgres: bool) {
    let rig = rig(postgres).await;
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

async fn storage_that_stays_down_writes_no_row(postgres: bool) {
    let rig = rig(postgres).await;
    rig.faults
        .fail_next_puts(noema_store::object::faulty::STICKY);
    let s = submission(3);
    let id = s.id.clone();
    let err = rig.ledger.put_canonical(s, "t").await.unwrap_err();
    assert!(matches!(err, LedgerError::StorageWrite(_)), "{err:?}");
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
async fn a_failure_between_storage_and_ledger_leaves_a_detectable_orphan(postgres: bool) {
    let rig = rig(postgres).await;
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
async fn a_database_failure_after_storage_is_reported(postgres: bool) {
    let rig = rig(postgres).await;
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

async fn stored_bytes_that_change_are_reported_corrupt(postgres: bool) {
    let rig = rig(postgres).await;
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

macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite_file {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(false).await;
                }
            )*
        }
        mod postgres_s3 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(true).await;
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
);

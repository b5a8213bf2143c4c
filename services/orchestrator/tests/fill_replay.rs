//! The benchmark's fill writes what the calls write: its requests replay to their live
//! rows, through the group-commit writer's batched version checks and upserts, on SQLite
//! and on Postgres — including a history longer than one write of the fill.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use noema_orchestrator::{Dependencies, Options, Orchestrator, OrchestratorStore};
use noema_runtime::client::unavailable_channel;
use noema_store::Database;
use noema_store::testing::TestDatabase;

async fn sqlite() -> (Database, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("orchestrator.db").display());
    let db = Database::connect(&url).await.unwrap();
    db.migrate(&noema_orchestrator::MIGRATIONS).await.unwrap();
    (db, dir)
}

async fn postgres() -> (Database, tempfile::TempDir, TestDatabase) {
    let admin = std::env::var("NOEMA_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test (or scripts/test \
             --backends-only cargo nextest run -p noema-orchestrator --test fill_replay)"
        )
    });
    let database = TestDatabase::create(&admin, "orchestrator_fill_replay")
        .await
        .unwrap();
    let url = database.url().to_owned();
    let db = Database::connect(&url).await.unwrap();
    db.migrate(&noema_orchestrator::MIGRATIONS).await.unwrap();
    (db, tempfile::tempdir().unwrap(), database)
}

async fn fills_replay_to_their_live_rows(db: Database, data_dir: &std::path::Path) {
    let orchestrator = Orchestrator::new(
        OrchestratorStore::new(db),
        &Options::default(),
        Dependencies {
            identity: unavailable_channel("identity"),
            ledger: unavailable_channel("ledger"),
            data_dir: data_dir.to_path_buf(),
        },
    )
    .unwrap();
    // Many requests at once: their writes share transactions.
    let many = orchestrator.fill(40, 3, 16).await.unwrap();
    assert_eq!((many.requests, many.events), (40, 40 * 8));
    // One request past a write's thousand events.
    let long = orchestrator.fill(1, 1500, 1).await.unwrap();
    assert_eq!(long.events, 1505);
    let long_id = long.last_request.unwrap();

    let report = orchestrator.replay_all().await.unwrap();
    assert_eq!(report.mismatches, vec![]);
    assert_eq!((report.requests, report.events), (41, 40 * 8 + 1505));

    let live = orchestrator.get_request(&long_id, false, 0).await.unwrap();
    assert_eq!(live.row.state, "EVALUATED");
    assert_eq!((live.row.version, live.row.evaluation_count), (1505, 1500));
    assert_eq!(live.events.len(), 100);
    assert_eq!(live.more_events_after, Some(100));
    assert_eq!(live.evaluations.len(), 100);
    let replayed = orchestrator.get_request(&long_id, true, 0).await.unwrap();
    assert!(replayed.replay.unwrap().matches());
    assert_eq!(replayed.row, live.row);
}

#[tokio::test]
async fn fills_replay_to_their_live_rows_on_sqlite() {
    let (db, dir) = sqlite().await;
    fills_replay_to_their_live_rows(db, dir.path()).await;
}

#[tokio::test]
async fn fills_replay_to_their_live_rows_on_postgres() {
    let (db, dir, _database) = postgres().await;
    fills_replay_to_their_live_rows(db, dir.path()).await;
}

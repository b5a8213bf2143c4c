//! Readiness follows storage: while a service's object store or database is unreachable
//! its gRPC health is NOT_SERVING and the gateway's `/readyz` answers 503; when storage
//! comes back both recover by themselves, within `server.readiness_interval_ms`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use noema_e2e::{Backend, Shape, TestCluster, anonymous};
use serde_json::Value;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const LEDGER: &str = "noema.ledger.v1.LedgerService";
const PATIENCE: Duration = Duration::from_secs(20);
const STEP: Duration = Duration::from_millis(50);
/// Fast probes, so the test waits for readiness changes in tenths of a second.
const FAST_PROBES: (&str, &str) = ("server.readiness_interval_ms", "100");

/// The ledger's gRPC health and the gateway's `/readyz` status code.
async fn readiness(cluster: &TestCluster) -> (ServingStatus, u16, Value) {
    let channel = cluster.ledger_channel().await.unwrap();
    let status = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: LEDGER.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status();
    let response = anonymous()
        .get(format!("{}/readyz", cluster.rest_url))
        .send()
        .await
        .unwrap();
    let code = response.status().as_u16();
    (status, code, response.json().await.unwrap_or(Value::Null))
}

/// Waits (bounded) until health is `want` and `/readyz` answers `code`.
async fn wait_for(cluster: &TestCluster, want: ServingStatus, code: u16) -> Value {
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < PATIENCE {
        let (status, got, body) = readiness(cluster).await;
        if status == want && got == code {
            return body;
        }
        last = Some((status, got, body));
        tokio::time::sleep(STEP).await;
    }
    panic!("not {want:?} / {code} after {PATIENCE:?}; last seen {last:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_object_store() {
    let cluster = TestCluster::start_with(Backend::Sqlite, Shape::Split, &[FAST_PROBES])
        .await
        .unwrap();
    wait_for(&cluster, ServingStatus::Serving, 200).await;

    // The object store's root goes away (an unmounted volume, say).
    let root = cluster.data_dir().join("packs");
    let away = cluster.data_dir().join("packs.away");
    std::fs::rename(&root, &away).unwrap();
    let body = wait_for(&cluster, ServingStatus::NotServing, 503).await;
    assert_eq!(body["services"][LEDGER], "not_serving", "{body}");
    assert_eq!(body["status"], "not_ready");

    std::fs::rename(&away, &root).unwrap();
    let body = wait_for(&cluster, ServingStatus::Serving, 200).await;
    assert_eq!(body["status"], "ready");
    cluster.shutdown().await.unwrap();
}

/// On Postgres, with every service its own process: the ledger's database refuses
/// connections (and its sessions are ended), then accepts them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_database_across_processes() {
    let env = noema_test_support::DATABASE_URL_ENV;
    let admin = std::env::var(env).unwrap_or_else(|_| {
        panic!("{env} is not set: run the suite through scripts/test, which starts Postgres")
    });
    let cluster = TestCluster::start_with(Backend::PostgresS3, Shape::Processes, &[FAST_PROBES])
        .await
        .unwrap();
    wait_for(&cluster, ServingStatus::Serving, 200).await;
    let ledger_db = cluster.config().services["ledger"].database_url.clone();

    noema_store::testing::set_database_reachable(&admin, &ledger_db, false)
        .await
        .unwrap();
    let body = wait_for(&cluster, ServingStatus::NotServing, 503).await;
    assert_eq!(body["services"][LEDGER], "not_serving", "{body}");
    // Identity, on its own database, is unaffected.
    assert_eq!(
        body["services"]["noema.identity.v1.IdentityService"],
        "serving"
    );

    noema_store::testing::set_database_reachable(&admin, &ledger_db, true)
        .await
        .unwrap();
    wait_for(&cluster, ServingStatus::Serving, 200).await;
    // And it serves again, not just reports it.
    let response = noema_e2e::owner(&cluster)
        .get(format!("{}/status", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    cluster.shutdown().await.unwrap();
}

//! One service process killed mid-run (SIGKILL) and restarted on the same ports, with the
//! other processes left alone: while it is down the gateway answers 503 with a JSON error
//! and gRPC callers get UNAVAILABLE; after the restart calls succeed again, and every write
//! acknowledged before, during or after the outage is there with its bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use noema_client::ledger::canonical_request;
use noema_e2e::{Backend, Shape, TestCluster, owner};
use noema_proto::ledger::v1 as pb;
use serde_json::{Value, json};

/// Every wait in this file gives up after this long.
const PATIENCE: Duration = Duration::from_secs(30);
const STEP: Duration = Duration::from_millis(100);

fn canonical_json(payload: Vec<u8>) -> (String, Value) {
    let r = canonical_request(
        payload,
        "observation",
        "application/json",
        "resilience:test",
        time::OffsetDateTime::now_utc(),
    );
    let body = json!({
        "schema_version": r.schema_version, "id": r.id, "object_type": r.object_type,
        "content_type": r.content_type, "size_bytes": r.size_bytes, "created_at": r.created_at,
        "created_by": r.created_by, "storage_path": r.storage_path,
        "payload": data_encoding::BASE64.encode(&r.payload),
    });
    (r.id, body)
}

/// Polls `probe` every [`STEP`] until it returns true; panics after [`PATIENCE`].
async fn eventually<F, Fut>(what: &str, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    for _ in 0..(PATIENCE.as_millis() / STEP.as_millis()) {
        if probe().await {
            return;
        }
        tokio::time::sleep(STEP).await;
    }
    panic!("{what}: not true after {:?}", started.elapsed());
}

/// A gRPC ledger client on a lazily connecting channel, so it can exist while the ledger
/// is down (an eager connect would fail before any call).
fn lazy_ledger(cluster: &TestCluster) -> noema_e2e::LedgerClient {
    let channel = tonic::transport::Endpoint::from_shared(cluster.ledger_endpoint.clone())
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .connect_lazy();
    pb::ledger_service_client::LedgerServiceClient::with_interceptor(
        channel,
        noema_e2e::BearerToken::new(&cluster.owner_token).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_ledger_is_unavailable_then_recovers_with_nothing_acknowledged_lost() {
    let mut cluster = match TestCluster::start(Backend::PostgresS3, Shape::Processes).await {
        Ok(cluster) => cluster,
        Err(err) => panic!("cannot start a processes cluster on Postgres + S3: {err}"),
    };
    let rest = cluster.rest_url.clone();
    let http = owner(&cluster);

    // Writers keep writing through the outage; only 201s count as acknowledged.
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let refused = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3 {
        let (http, rest) = (http.clone(), rest.clone());
        let (acknowledged, refused, stop) = (acknowledged.clone(), refused.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let (id, body) = canonical_json(format!("{{\"w\":{w},\"i\":{i}}}").into_bytes());
                let sent = http
                    .post(format!("{rest}/canonical"))
                    .timeout(Duration::from_secs(10))
                    .json(&body)
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status().as_u16() == 201 => {
                        acknowledged.lock().unwrap().push(id);
                    }
                    _ => {
                        refused.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    let acked = || acknowledged.lock().unwrap().len();
    eventually("30 writes acknowledged before the kill", || async {
        acked() >= 30
    })
    .await;

    cluster.kill("ledger").await.unwrap();
    let acked_at_kill = acked();

    // REST through the gateway: 503 with the JSON error body, for reads and writes.
    let response = http.get(format!("{rest}/status")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let body: Value = response.json().await.expect("a JSON error body");
    assert!(body["error"].is_string(), "{body}");
    let (_, write) = canonical_json(b"{\"during\":\"outage\"}".to_vec());
    let response = http
        .post(format!("{rest}/canonical"))
        .json(&write)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    // gRPC straight to the ledger: UNAVAILABLE.
    let err = lazy_ledger(&cluster)
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    // The gateway reports itself not ready, and names the ledger.
    let response = http.get(format!("{rest}/readyz")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let ready: Value = response.json().await.unwrap();
    assert!(
        ready["services"]["noema.ledger.v1.LedgerService"]
            .as_str()
            .unwrap()
            .starts_with("unreachable"),
        "{ready}"
    );
    let refused_while_down = refused.load(Ordering::SeqCst);
    eventually("the writers see the outage", || async {
        refused.load(Ordering::SeqCst) > refused_while_down
    })
    .await;
    // Nothing is acknowledged while the ledger is down (the one in flight at the kill
    // may still land, acknowledged or not).
    assert!(
        acked() <= acked_at_kill + 3,
        "writes acknowledged while down"
    );

    cluster.restart("ledger").await.unwrap();

    eventually("GET /status answers 200 again", || async {
        matches!(
            http.get(format!("{rest}/status")).send().await,
            Ok(r) if r.status().as_u16() == 200
        )
    })
    .await;
    let state = lazy_ledger(&cluster)
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.mode, pb::SystemMode::Running as i32);
    let acked_after_restart = acked();
    eventually("the writers succeed again", || async {
        acked() >= acked_after_restart + 10
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for writer in writers {
        writer.await.unwrap();
    }

    // Everything acknowledged — before, around and after the outage — is there.
    let acknowledged = acknowledged.lock().unwrap().clone();
    for id in &acknowledged {
        let response = http
            .get(format!("{rest}/canonicals/{id}/payload"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status().as_u16(),
            200,
            "acknowledged {id} was lost"
        );
        let bytes = response.bytes().await.unwrap();
        assert_eq!(
            noema_core::content_id::ContentId::of_bytes(&bytes).into_string(),
            *id
        );
    }
    // No row without its bytes; bytes without a row (a write killed between the two
    // steps, never acknowledged) are allowed orphans.
    let report = lazy_ledger(&cluster)
        .reconcile(pb::ReconcileRequest {
            verify_hashes: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        report.missing_in_storage.is_empty() && report.corrupt.is_empty(),
        "{report:?}"
    );
    assert!(report.checked >= u64::try_from(acknowledged.len()).unwrap());

    if let Err(err) = cluster.shutdown().await {
        panic!("cluster did not shut down cleanly: {err}");
    }
}

/// With identity down, a token the ledger has not cached cannot be checked: UNAVAILABLE,
/// not UNAUTHENTICATED (the caller should retry, not drop its credentials). After the
/// restart the same token works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_identity_makes_uncached_tokens_unavailable_not_invalid() {
    let mut cluster = match TestCluster::start(Backend::PostgresS3, Shape::Processes).await {
        Ok(cluster) => cluster,
        Err(err) => panic!("cannot start a processes cluster on Postgres + S3: {err}"),
    };
    let token = cluster
        .issue_token("peer:resilience", &["ledger:read"])
        .await
        .unwrap();
    cluster.kill("identity").await.unwrap();

    let response = noema_e2e::client_as(&token)
        .get(format!("{}/status", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let mut ledger = lazy_ledger(&cluster);
    let mut ledger_as = pb::ledger_service_client::LedgerServiceClient::with_interceptor(
        tonic::transport::Endpoint::from_shared(cluster.ledger_endpoint.clone())
            .unwrap()
            .connect_lazy(),
        noema_e2e::BearerToken::new(&token).unwrap(),
    );
    let err = ledger_as
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");

    cluster.restart("identity").await.unwrap();
    let mut ok = false;
    for _ in 0..(PATIENCE.as_millis() / STEP.as_millis()) {
        if ledger_as.get_status(pb::GetStatusRequest {}).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(STEP).await;
    }
    assert!(
        ok,
        "the token does not work {PATIENCE:?} after identity restarted"
    );
    ledger.get_status(pb::GetStatusRequest {}).await.unwrap();
    if let Err(err) = cluster.shutdown().await {
        panic!("cluster did not shut down cleanly: {err}");
    }
}

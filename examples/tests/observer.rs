//! The example observer runs against a real cluster and its writes are there afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_test_support::{Backend, Shape, TestCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_example_records_an_observation_and_a_signed_reference() {
    let cluster = TestCluster::start(Backend::Sqlite, Shape::AllInOne)
        .await
        .unwrap();
    let token = cluster
        .issue_token("agent:example", &["ledger:write"])
        .await
        .unwrap();
    let endpoint = cluster.ledger_endpoint.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_observer"))
            .args([&endpoint, &token, "agent:example"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let mut ledger = cluster.ledger().await.unwrap();
    let references = ledger
        .list_references(noema_client::pb::ledger::ListReferencesRequest {
            canonical_object_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .references;
    assert_eq!(references.len(), 1);
    assert_eq!(references[0].agent_id, "agent:example");
    cluster.shutdown().await.unwrap();
}

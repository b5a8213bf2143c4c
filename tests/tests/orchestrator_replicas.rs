//! Two orchestrator replicas — two `noema serve orchestrator` processes on one Postgres
//! database — racing `execute` on the same requests: each request runs exactly once (its
//! tool called once, one `executed` and one `traced` event), the other call is refused
//! with the request's state, and both replicas replay the same history.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_client::Noema;
use noema_core::{ErrorCode, Reason};
use noema_e2e::governed::{Governed, approval, approver, events, plan, replayed, step, unique};
use noema_e2e::{Backend, Shape};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_execute_run_each_request_once() {
    let mut g = Governed::start(Backend::PostgresS3, Shape::Processes).await;
    let replica = g.cluster.start_replica("orchestrator").await.unwrap();
    let first = noema_e2e::governed::connect(&g.cluster, &g.cluster.owner_token).await;
    let second = Noema::connect(&replica, &g.cluster.owner_token)
        .await
        .unwrap();
    let ops = approver(&g.cluster, "human:ops", 42).await;

    // L1 requests (an internal http_json call) and L2 ones (an external send, approved).
    let mut requests = Vec::new();
    for i in 0..12 {
        let marker = unique("race");
        let external = i % 3 == 0;
        let tool = if external {
            "team.notify"
        } else {
            "local.index"
        };
        let scope: &[&str] = if external { &["team:notify"] } else { &[] };
        let planned = first
            .plan(&plan(
                "agent:alice",
                json!([step("s", tool, scope, json!({"marker": marker}))]),
            ))
            .await
            .unwrap();
        let id = planned.request_id;
        // Each replica sees what the other wrote.
        second.risk(&id).await.unwrap();
        if external {
            let ok = approval("human:ops", "approve", &["team:notify"], 0.0);
            first.approve(&ops.key, &ok, &id).await.unwrap();
        }
        requests.push((id, marker));
    }

    let races = requests.iter().map(|(id, _)| {
        let (first, second) = (&first, &second);
        async move { tokio::join!(first.execute(id), second.execute(id)) }
    });
    let outcomes = futures::future::join_all(races).await;
    for ((id, marker), (a, b)) in requests.iter().zip(outcomes) {
        let (won, lost) = match (a, b) {
            (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
            (a, b) => panic!("{id}: not exactly one execution: {a:?} / {b:?}"),
        };
        assert_eq!(won.state, "TRACED");
        let lost = noema_e2e::governed::failure::<()>(Err(lost));
        assert_eq!(
            (lost.code, lost.reason),
            (ErrorCode::FailedPrecondition, Reason::WrongState),
            "{id}: {lost:?}"
        );
        assert_eq!(
            g.received.with_marker(marker),
            1,
            "{id}: the tool ran other than once"
        );
        for noema in [&first, &second] {
            let history = events(noema, id).await;
            let count = |kind: &str| history.iter().filter(|e| e.event_type == kind).count();
            assert_eq!((count("executed"), count("traced")), (1, 1), "{id}");
            let detail = replayed(noema, id).await;
            assert!(detail.replay.unwrap().matches, "{id}");
            assert_eq!(detail.state, "TRACED");
        }
    }
    let Governed { cluster, .. } = g;
    cluster.shutdown().await.unwrap();
}

//! The orchestrator from outside: the lifecycle through gRPC (the SDK) and REST, replay,
//! approvals and their forgeries, execution, evaluation and reward, the release check.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_client::orchestrator::object;
use noema_client::{Code, Noema};
use noema_e2e::{TestCluster, cluster_cases};
use serde_json::{Value, json};

cluster_cases!(a_request_runs_from_plan_to_reward_and_replays,);

async fn noema(cluster: &TestCluster) -> Noema {
    let endpoint = cluster.endpoint("orchestrator").unwrap();
    Noema::connect(endpoint, &cluster.owner_token)
        .await
        .unwrap()
}

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap()
}

fn plan(source: &str, steps: Value) -> Value {
    json!({
        "schema_version": "0.1", "id": format!("plan-{}", uuid()), "ts": now(), "source": source,
        "goal": "say hello", "steps": steps, "assumptions": [], "rollback_plan": "nothing to undo"
    })
}

fn noop(step_id: &str) -> Value {
    json!({"step_id": step_id, "action": "nothing", "tool": "noema.noop", "expected_output": "ok"})
}

fn eval(score: f64, pass: bool) -> Value {
    json!({"schema_version": "0.1", "id": format!("ev-{}", uuid()), "ts": now(), "source": "agent:eve",
           "suite": "default", "score": score, "pass": pass, "regression": false, "findings": []})
}

fn uuid() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

async fn a_request_runs_from_plan_to_reward_and_replays(cluster: &TestCluster) {
    let noema = noema(cluster).await;
    let planned = noema
        .plan(&plan("agent:alice", json!([noop("s1")])))
        .await
        .unwrap();
    assert_eq!(planned.state, "PLANNED");
    assert_eq!(planned.allowed_next, ["risk"]);
    let id = planned.request_id.clone();

    let risked = noema.risk(&id).await.unwrap();
    assert_eq!(risked.state, "RISKED");
    let report = object(&risked.risk_report).unwrap();
    assert_eq!(report["risk_level"], "L0");
    assert_eq!(report["requires_approval"], false);

    // Wrong-state calls name the state and what is allowed.
    let err = noema.risk(&id).await.unwrap_err();
    let noema_client::ClientError::Status(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code(), Code::FailedPrecondition);

    let executed = noema.execute(&id).await.unwrap();
    assert_eq!(executed.state, "TRACED");
    let trace = object(&executed.exec_trace).unwrap();
    assert_eq!(trace["status"], "success");
    assert_eq!(trace["tool_calls"].as_array().unwrap().len(), 1);

    let evaluated = noema
        .evaluate(&id, "agent:eve", &eval(0.9, true))
        .await
        .unwrap();
    assert_eq!(evaluated.state, "EVALUATED");
    assert!(evaluated.gate.unwrap().gate_passed);

    let rewarded = noema.update_reward(&id).await.unwrap();
    assert_eq!(rewarded.state, "REWARDED");
    let update = object(&rewarded.reward_update).unwrap();
    assert_eq!(update["actor_id"], "agent:alice");
    // Eve has no gold record: her confidence moves nothing.
    assert_eq!(update["delta"], 0.0);
    assert_eq!(update["reason_codes"], json!(["no_gold_record"]));

    let detail = noema
        .orchestrator()
        .get_request(noema_client::pb::orchestrator::GetRequestRequest {
            request_id: id.clone(),
            from_events: true,
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(detail.state, "REWARDED");
    assert_eq!(detail.event_count, 7);
    assert_eq!(detail.events.len(), 7);
    let replay = detail.replay.unwrap();
    assert!(replay.matches, "{:?}", replay.differences);

    let report = noema
        .orchestrator()
        .replay_all(noema_client::pb::orchestrator::ReplayAllRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.events, 7);
}

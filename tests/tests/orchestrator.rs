//! The orchestrator from outside (gRPC through the SDK, and REST on the seed's paths): the
//! lifecycle and its replay, approvals and their forgeries, what execution refuses,
//! rollback, secrets, the approval queue and the L1 optional confirm. Each case runs on
//! every shape and backend, on a cluster with the test policy (`noema_e2e::governed`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_client::pb::orchestrator as pb;
use noema_core::Reason;
use noema_e2e::governed::{
    Governed, approval, approver, connect, eval, events, failure, json_of, plan, replayed, step,
};
use noema_e2e::governed_cases;
use serde_json::{Value, json};

governed_cases!(
    a_request_runs_from_plan_to_reward_and_replays,
    wrong_state_calls_name_the_state_and_what_is_allowed,
    approvals_bind_the_request_and_forgeries_fail_closed,
    an_l2_request_never_runs_unapproved,
    execution_refuses_what_the_policy_forbids,
    a_failing_step_runs_the_rollback_and_the_trace_says_so,
    secrets_reach_the_tool_and_nothing_else,
    the_approval_queue_shows_what_waits_and_since_when,
    an_optional_confirm_is_recorded_and_a_rejection_blocks,
    rest_serves_the_seeds_paths_json_in_and_out,
);

fn noop(id: &str) -> Value {
    step(id, "noema.noop", &[], Value::Null)
}

async fn a_request_runs_from_plan_to_reward_and_replays(g: &Governed) {
    let noema = connect(&g.cluster, &g.cluster.owner_token).await;
    let planned = noema
        .plan(&plan("agent:alice", json!([noop("s1")])))
        .await
        .unwrap();
    assert_eq!(planned.state, "PLANNED");
    assert_eq!(planned.allowed_next, ["risk"]);
    let id = planned.request_id.clone();
    assert!(id.starts_with("req_"), "{id}");

    let risked = noema.risk(&id).await.unwrap();
    assert_eq!(risked.state, "RISKED");
    assert_eq!(risked.allowed_next, ["approve", "execute"]);
    let report = json_of(&risked.risk_report);
    assert_eq!(report["risk_level"], "L0");
    assert_eq!(report["requires_approval"], false);
    let policy = noema
        .orchestrator()
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report["policy_hash"], policy.policy_hash);

    let executed = noema.execute(&id).await.unwrap();
    assert_eq!(executed.state, "TRACED");
    let trace = json_of(&executed.exec_trace);
    assert_eq!(trace["status"], "success");
    assert_eq!(trace["request_id"], id);
    assert_eq!(trace["tool_calls"][0]["tool"], "noema.noop");
    // The trace is found by its id and by its request's.
    for key in [trace["trace_id"].as_str().unwrap(), id.as_str()] {
        let found = noema
            .orchestrator()
            .get_trace(pb::GetTraceRequest { id: key.into() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(found.request_id, id);
        assert_eq!(json_of(&found.exec_trace), trace);
    }

    let evaluated = noema
        .evaluate(&id, "agent:eve", &eval(0.9, true, false))
        .await
        .unwrap();
    assert_eq!(evaluated.state, "EVALUATED");
    assert_eq!(evaluated.allowed_next, ["evaluate", "reward_update"]);
    assert!(evaluated.gate.unwrap().gate_passed);

    let rewarded = noema.update_reward(&id).await.unwrap();
    assert_eq!(rewarded.state, "REWARDED");
    assert!(rewarded.allowed_next.is_empty());
    let update = json_of(&rewarded.reward_update);
    assert_eq!(update["actor_id"], "agent:alice");
    // Eve has no gold record: her confidence moves nothing.
    assert_eq!(update["delta"], 0.0);
    assert_eq!(update["reason_codes"], json!(["no_gold_record"]));

    // Seven events, hash-chained, and a replay that rebuilds the live state.
    let detail = replayed(&noema, &id).await;
    assert_eq!(detail.state, "REWARDED");
    assert_eq!(detail.event_count, 7);
    let replay = detail.replay.unwrap();
    assert!(replay.matches, "{:?}", replay.differences);
    let events = events(&noema, &id).await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "received",
            "planned",
            "risked",
            "executed",
            "traced",
            "evaluated",
            "rewarded"
        ]
    );
    for pair in events.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
        assert_eq!(pair[1].prev_state, pair[0].next_state);
    }
    assert_eq!(detail.head_hash, events[6].hash);

    // The whole store replays, and the audit chain holds every transition.
    let report = noema
        .orchestrator()
        .replay_all(pb::ReplayAllRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(report.ok, "{report:?}");
    assert_eq!((report.requests, report.events), (1, 7));
    let audit = noema
        .orchestrator()
        .list_audit(noema_client::pb::common::ListAuditRequest {
            page: None,
            oldest_first: true,
        })
        .await
        .unwrap()
        .into_inner()
        .entries;
    let transitions = audit
        .iter()
        .filter(|e| e.action.starts_with("request."))
        .count();
    assert_eq!(transitions, 7);
    for pair in audit.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
    }
}

async fn wrong_state_calls_name_the_state_and_what_is_allowed(g: &Governed) {
    let noema = connect(&g.cluster, &g.cluster.owner_token).await;
    let id = noema
        .plan(&plan("agent:alice", json!([noop("s1")])))
        .await
        .unwrap()
        .request_id;
    // No RECEIVED/PLANNED → EXECUTED: RISKED is not skipped.
    let f = failure(noema.execute(&id).await);
    assert_eq!(f.code, noema_core::ErrorCode::FailedPrecondition);
    assert_eq!(f.reason, Reason::WrongState);
    assert_eq!(f.metadata["state"], "PLANNED");
    assert_eq!(f.metadata["allowed"], "risk");
    let f = failure(noema.update_reward(&id).await);
    assert_eq!(f.reason, Reason::WrongState);
    let f = failure(
        noema
            .evaluate(&id, "agent:eve", &eval(1.0, true, false))
            .await,
    );
    assert_eq!(f.reason, Reason::WrongState);

    // Unknown requests are NOT_FOUND; malformed objects name the field.
    let f = failure(noema.risk("req_000000000000nothing").await);
    assert_eq!(f.code, noema_core::ErrorCode::NotFound);
    let mut bad = plan("agent:alice", json!([noop("s1")]));
    bad["steps"][0]["tool"] = json!(5);
    let f = failure(noema.plan(&bad).await);
    assert_eq!(f.code, noema_core::ErrorCode::InvalidArgument);
    assert_eq!(f.reason, Reason::SchemaViolation);
    assert_eq!(f.metadata["field"], "steps[0].tool");
    let mut future = plan("agent:alice", json!([noop("s1")]));
    future["schema_version"] = json!("0.2");
    let f = failure(noema.plan(&future).await);
    assert_eq!(f.reason, Reason::UnknownSchemaVersion);
    assert!(f.message.contains("\"0.2\""), "{}", f.message);

    // An evaluation of a suite the policy does not declare is refused.
    noema.risk(&id).await.unwrap();
    noema.execute(&id).await.unwrap();
    let mut other = eval(1.0, true, false);
    other["suite"] = json!("nightly");
    let f = failure(noema.evaluate(&id, "agent:eve", &other).await);
    assert_eq!(f.reason, Reason::UnknownEvalSuite);
    // An actor does not judge its own request.
    let f = failure(
        noema
            .evaluate(&id, "agent:alice", &eval(1.0, true, false))
            .await,
    );
    assert_eq!(f.code, noema_core::ErrorCode::PermissionDenied);
    // Nothing of the refused calls was recorded.
    assert_eq!(replayed(&noema, &id).await.event_count, 5);
}

/// An L2 plan: an external send (to `localhost`, not an internal host).
fn external_send(source: &str, marker: &str) -> Value {
    plan(
        source,
        json!([step(
            "notify",
            "team.notify",
            &["team:notify"],
            json!({"marker": marker})
        )]),
    )
}

async fn approvals_bind_the_request_and_forgeries_fail_closed(g: &Governed) {
    let owner = connect(&g.cluster, &g.cluster.owner_token).await;
    let ops = approver(&g.cluster, "human:ops", 42).await;
    let marker = noema_e2e::governed::unique("m");
    let id = owner
        .plan(&external_send("agent:alice", &marker))
        .await
        .unwrap()
        .request_id;
    let risked = owner.risk(&id).await.unwrap();
    assert_eq!(risked.state, "APPROVAL_PENDING");
    let report = json_of(&risked.risk_report);
    assert_eq!(report["risk_level"], "L2");
    assert_eq!(report["approvals_required"], 1);
    let other = owner
        .plan(&external_send("agent:alice", "other"))
        .await
        .unwrap()
        .request_id;
    owner.risk(&other).await.unwrap();

    // A token holder with orchestrator:write (and identity:read) but not the approver's
    // key: signing with its own key fails at identity's check.
    let mallory = g
        .cluster
        .issue_token("agent:mallory", &["orchestrator:write", "identity:read"])
        .await
        .unwrap();
    let mallory = connect(&g.cluster, &mallory).await;
    let forged_key = noema_client::SigningKeyPair::from_seed(&[66; 32]);
    let good = approval("human:ops", "approve", &["team:notify"], 0.0);
    let f = failure(mallory.approve(&forged_key, &good, &id).await);
    assert_eq!(f.code, noema_core::ErrorCode::PermissionDenied);
    assert_eq!(f.reason, Reason::ApprovalRefused);
    assert_eq!(f.metadata["check"], "key_not_registered");

    // A signature over another request.
    let mut request = noema_client::orchestrator::signed_approval(&ops.key, &good, &other).unwrap();
    request.request_id = id.clone();
    let f = failure(
        mallory
            .orchestrator()
            .approve(request)
            .await
            .map_err(noema_client::ClientError::from),
    );
    assert_eq!(f.metadata["check"], "bad_signature");

    // Expired: given longer ago than the policy's TTL (3600 s).
    let stale = approval("human:ops", "approve", &["team:notify"], 3700.0);
    let f = failure(mallory.approve(&ops.key, &stale, &id).await);
    assert_eq!(f.code, noema_core::ErrorCode::FailedPrecondition);
    assert_eq!(f.metadata["check"], "expired");

    // Mis-scoped.
    let narrow = approval("human:ops", "approve", &["something:else"], 0.0);
    let f = failure(mallory.approve(&ops.key, &narrow, &id).await);
    assert_eq!(f.metadata["check"], "scope_not_covered");

    // Nothing was recorded: still waiting, no approval.
    let detail = replayed(&owner, &id).await;
    assert_eq!(detail.state, "APPROVAL_PENDING");
    assert!(detail.approvals.is_empty());

    // The approver's own signature counts (submitted by anyone holding orchestrator:write).
    let signed = noema_client::orchestrator::signed_approval(&ops.key, &good, &id).unwrap();
    let approved = mallory
        .orchestrator()
        .approve(signed.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(approved.state, "APPROVAL_PENDING");
    assert_eq!(
        (approved.valid_approvers, approved.approvals_required),
        (1, 1)
    );
    // Replayed: the same signed approval again, on this request or another.
    let f = failure(
        mallory
            .orchestrator()
            .approve(signed.clone())
            .await
            .map_err(noema_client::ClientError::from),
    );
    assert_eq!(f.metadata["check"], "replayed");
    let mut elsewhere = signed;
    elsewhere.request_id = other.clone();
    let f = failure(
        mallory
            .orchestrator()
            .approve(elsewhere)
            .await
            .map_err(noema_client::ClientError::from),
    );
    assert_eq!(f.metadata["check"], "bad_signature");

    // Approved: it runs, and the webhook hears it once.
    let executed = owner.execute(&id).await.unwrap();
    let trace = json_of(&executed.exec_trace);
    assert_eq!(trace["status"], "success", "{trace}");
    assert_eq!(trace["approval_ids"], json!([good["id"]]));
    assert_eq!(g.received.with_marker(&marker), 1);
    let replay = replayed(&owner, &id).await.replay.unwrap();
    assert!(replay.matches, "{:?}", replay.differences);

    // A rejection blocks the other request; its execution is refused with a trace.
    let no = approval("human:ops", "reject", &["team:notify"], 0.0);
    let rejected = owner.approve(&ops.key, &no, &other).await.unwrap();
    assert_eq!(rejected.state, "BLOCKED");
    let executed = owner.execute(&other).await.unwrap();
    assert_eq!(executed.state, "TRACED");
    let trace = json_of(&executed.exec_trace);
    assert_eq!(trace["status"], "blocked");
    assert!(trace["tool_calls"].as_array().unwrap().is_empty());
    assert_eq!(g.received.with_marker("other"), 0);
}

async fn an_l2_request_never_runs_unapproved(g: &Governed) {
    let owner = connect(&g.cluster, &g.cluster.owner_token).await;
    let marker = noema_e2e::governed::unique("m");
    let id = owner
        .plan(&external_send("agent:alice", &marker))
        .await
        .unwrap()
        .request_id;
    owner.risk(&id).await.unwrap();
    // Executing without an approval fails closed: BLOCKED, then TRACED with the reason.
    let executed = owner.execute(&id).await.unwrap();
    assert_eq!(executed.state, "TRACED");
    let trace = json_of(&executed.exec_trace);
    assert_eq!(trace["status"], "blocked");
    assert!(
        trace["blocked_reasons"][0]
            .as_str()
            .unwrap()
            .contains("no approval"),
        "{trace}"
    );
    assert_eq!(g.received.with_marker(&marker), 0);
    let kinds: Vec<String> = events(&owner, &id)
        .await
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(
        kinds,
        [
            "received",
            "planned",
            "risked",
            "approval_requested",
            "blocked",
            "traced"
        ]
    );

    // A self-approval does not count either.
    let alice = approver(&g.cluster, "agent:alice", 7).await;
    let id = owner
        .plan(&external_send("agent:alice", &marker))
        .await
        .unwrap()
        .request_id;
    owner.risk(&id).await.unwrap();
    let mine = approval("agent:alice", "approve", &["team:notify"], 0.0);
    let f = failure(owner.approve(&alice.key, &mine, &id).await);
    assert_eq!(f.metadata["check"], "self_approval");

    // Dual mode (after a policy reload) needs two distinct approvers.
    g.reload(|p| p["approval"]["mode"] = json!("dual"))
        .await
        .unwrap();
    let ops = approver(&g.cluster, "human:ops", 42).await;
    let sec = approver(&g.cluster, "human:sec", 43).await;
    let dual = owner
        .plan(&external_send("agent:alice", &marker))
        .await
        .unwrap()
        .request_id;
    let report = json_of(&owner.risk(&dual).await.unwrap().risk_report);
    assert_eq!(report["approvals_required"], 2);
    let first = approval("human:ops", "approve", &["team:notify"], 0.0);
    let one = owner.approve(&ops.key, &first, &dual).await.unwrap();
    assert_eq!((one.valid_approvers, one.approvals_required), (1, 2));
    let again = approval("human:ops", "approve", &["team:notify"], 0.0);
    let f = failure(owner.approve(&ops.key, &again, &dual).await);
    assert_eq!(f.metadata["check"], "same_approver");
    let second = approval("human:sec", "approve", &["team:notify"], 0.0);
    let two = owner.approve(&sec.key, &second, &dual).await.unwrap();
    assert_eq!((two.valid_approvers, two.approvals_required), (2, 2));
    let trace = json_of(&owner.execute(&dual).await.unwrap().exec_trace);
    assert_eq!(trace["status"], "success", "{trace}");
    assert_eq!(g.received.with_marker(&marker), 1);
}

async fn execution_refuses_what_the_policy_forbids(g: &Governed) {
    let owner = connect(&g.cluster, &g.cluster.owner_token).await;
    let dir = tempfile::tempdir().unwrap();
    let sentinel = dir.path().join("keep-me");
    std::fs::write(&sentinel, "precious").unwrap();

    // A destructive command (L3) and a tool the policy does not list: blocked at
    // assessment, refused at execution, with a trace and no tool call.
    let cases = [
        step(
            "rm",
            "files.remove",
            &["files:write"],
            json!({"path": sentinel.display().to_string()}),
        ),
        step("sh", "shell.exec", &["shell"], json!({"cmd": "id"})),
    ];
    for bad in cases {
        let id = owner
            .plan(&plan("agent:alice", json!([noop("s0"), bad])))
            .await
            .unwrap()
            .request_id;
        let risked = owner.risk(&id).await.unwrap();
        assert_eq!(risked.state, "BLOCKED");
        let report = json_of(&risked.risk_report);
        assert_eq!(
            (report["risk_level"].clone(), report["forbidden"].clone()),
            (json!("L3"), json!(true))
        );
        let f = failure(
            owner
                .approve(
                    &noema_client::SigningKeyPair::from_seed(&[1; 32]),
                    &approval("human:ops", "approve", &["files:write", "shell"], 0.0),
                    &id,
                )
                .await,
        );
        assert_eq!(f.reason, Reason::WrongState);
        let trace = json_of(&owner.execute(&id).await.unwrap().exec_trace);
        assert_eq!(trace["status"], "blocked");
        assert!(trace["tool_calls"].as_array().unwrap().is_empty());
    }
    assert_eq!(std::fs::read_to_string(&sentinel).unwrap(), "precious");

    // A token lacking a tool's permission runs nothing (least privilege): the ledger tool
    // needs ledger:write.
    let limited = g
        .cluster
        .issue_token("agent:limited", &["orchestrator:write"])
        .await
        .unwrap();
    let limited = connect(&g.cluster, &limited).await;
    let id = limited
        .plan(&plan(
            "agent:limited",
            json!([step(
                "put",
                "noema.put_canonical",
                &[],
                json!({"content": {"hello": "ledger"}})
            )]),
        ))
        .await
        .unwrap()
        .request_id;
    assert_eq!(limited.risk(&id).await.unwrap().state, "RISKED");
    let trace = json_of(&limited.execute(&id).await.unwrap().exec_trace);
    assert_eq!(trace["status"], "blocked");
    assert!(
        trace["blocked_reasons"][0]
            .as_str()
            .unwrap()
            .contains("ledger:write"),
        "{trace}"
    );
    // With the permission, it runs and the ledger has the object.
    let id = owner
        .plan(&plan(
            "agent:alice",
            json!([step(
                "put",
                "noema.put_canonical",
                &[],
                json!({"content": {"hello": "ledger"}})
            )]),
        ))
        .await
        .unwrap()
        .request_id;
    owner.risk(&id).await.unwrap();
    let trace = json_of(&owner.execute(&id).await.unwrap().exec_trace);
    assert_eq!(trace["status"], "success", "{trace}");
    let stored = trace["artifacts"][0]["ledger"]["canonical_object_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut ledger = g.cluster.ledger().await.unwrap();
    let object = ledger
        .get_canonical(noema_client::pb::ledger::GetCanonicalRequest { id: stored.clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(object.created_by, "agent:alice");
    assert_eq!(
        stored,
        noema_core::content_id::ContentId::of_bytes(br#"{"hello":"ledger"}"#).to_string()
    );
}

async fn a_failing_step_runs_the_rollback_and_the_trace_says_so(g: &Governed) {
    let owner = connect(&g.cluster, &g.cluster.owner_token).await;
    let marker = noema_e2e::governed::unique("m");
    let mut with_rollback = plan(
        "agent:alice",
        json!([
            step("index", "local.index", &[], json!({"marker": marker})),
            step("fail", "files.false", &[], Value::Null),
            step("never", "local.index", &[], json!({"marker": "never"})),
        ]),
    );
    with_rollback["rollback_steps"] = json!([step(
        "undo",
        "local.index",
        &[],
        json!({"marker": format!("{marker}-undo")})
    )]);
    let id = owner.plan(&with_rollback).await.unwrap().request_id;
    owner.risk(&id).await.unwrap();
    let trace = json_of(&owner.execute(&id).await.unwrap().exec_trace);
    assert_eq!(trace["status"], "rolled_back", "{trace}");
    let calls = trace["tool_calls"].as_array().unwrap();
    let steps: Vec<(&str, bool, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["step_id"].as_str().unwrap(),
                c["rollback"].as_bool().unwrap(),
                c["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("index", false, "success"),
            ("fail", false, "failed"),
            ("undo", true, "success")
        ]
    );
    assert_eq!(g.received.with_marker(&marker), 1);
    assert_eq!(g.received.with_marker(&format!("{marker}-undo")), 1);
    assert_eq!(g.received.with_marker("never"), 0);
    for call in calls {
        assert!(call["args_hash"].as_str().unwrap().starts_with("sha256:"));
        assert!(
            call["result_digest"]
                .as_str()
                .unwrap()
                .starts_with("sha256:")
        );
    }

    // Without rollback steps the trace says failed.
    let id = owner
        .plan(&plan(
            "agent:alice",
            json!([step("fail", "files.false", &[], Value::Null)]),
        ))
        .await
        .unwrap()
        .request_id;
    owner.risk(&id).await.unwrap();
    let trace = json_of(&owner.execute(&id).await.unwrap().exec_trace);
    assert_eq!(trace["status"], "failed");
}

async fn secrets_reach_the_tool_and_nothing_else(g: &Governed) {
    let owner = connect(&g.cluster, &g.cluster.owner_token).await;
    let mut ids = Vec::new();
    for (marker, fail) in [("secret-ok", false), ("secret-fail", true)] {
        let id = owner
            .plan(&plan(
                "agent:alice",
                json!([step(
                    "s",
                    "secret.notify",
                    &[],
                    json!({"marker": marker, "fail": fail})
                )]),
            ))
            .await
            .unwrap()
            .request_id;
        owner.risk(&id).await.unwrap();
        let executed = owner.execute(&id).await.unwrap();
        let text = String::from_utf8(executed.exec_trace.clone()).unwrap();
        assert!(!text.contains(&g.secret), "{text}");
        ids.push(id);
    }
    // The tool sent it (and the webhook echoed it back in both answers).
    let sent: Vec<String> = g
        .received
        .calls()
        .into_iter()
        .filter(|(path, _, _)| path == "/secret")
        .map(|(_, _, auth)| auth)
        .collect();
    assert_eq!(
        sent,
        [
            format!("Bearer {}", g.secret),
            format!("Bearer {}", g.secret)
        ]
    );

    // Nothing the service answers or keeps carries it: requests (objects and events), the
    // failed call's error, the audit log, the policy, and every process's log.
    let mut seen = String::new();
    for id in &ids {
        let detail = replayed(&owner, id).await;
        seen.push_str(&format!("{detail:?}"));
        for e in events(&owner, id).await {
            seen.push_str(&String::from_utf8_lossy(&e.meta));
        }
    }
    let failed = json_of(&replayed(&owner, &ids[1]).await.exec_trace);
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["tool_calls"][0]["error"]
            .as_str()
            .unwrap()
            .contains("500"),
        "{failed}"
    );
    let audit = owner
        .orchestrator()
        .list_audit(noema_client::pb::common::ListAuditRequest::default())
        .await
        .unwrap()
        .into_inner();
    seen.push_str(&format!("{audit:?}"));
    let policy = owner
        .orchestrator()
        .get_policy(pb::GetPolicyRequest {})
        .await
        .unwrap()
        .into_inner();
    seen.push_str(&String::from_utf8_lossy(&policy.document));
    assert!(!seen.contains(&g.secret), "a response carries the secret");
    if g.cluster.shape == noema_e2e::Shape::Processes {
        for role in ["identity", "ledger", "orchestrator", "gateway"] {
            let log = g.cluster.process_log(role);
            assert!(!log.is_empty() || role == "gateway", "{role} wrote no log");
            assert!(!log.contains(&g.secret), "{role}'s log carries the secret");
        }
    }
}

async fn the_approval_queue_shows_what_waits_and_since_when(g: &Governed) {
    let owner = connect(&g.cluster, &g.cluster.owner_token).await;
    let before = time::OffsetDateTime::now_utc();
    let mut waiting = Vec::new();
    for n in 0..3 {
        let id = owner
            .plan(&external_send("agent:alice", &format!("q{n}")))
            .await
            .unwrap()
            .request_id;
        owner.risk(&id).await.unwrap();
        waiting.push(id);
    }
    // One that needs none is not in the queue.
    let id = owner
        .plan(&plan("agent:alice", json!([noop("s")])))
        .await
        .unwrap()
        .request_id;
    owner.risk(&id).await.unwrap();

    let page = |token: String| {
        let owner = owner.clone();
        async move {
            owner
                .orchestrator()
                .list_pending_approvals(pb::ListPendingApprovalsRequest {
                    page: Some(noema_client::pb::common::PageRequest {
                        page_size: 2,
                        page_token: token,
                    }),
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let first = page(String::new()).await;
    assert_eq!(first.pending.len(), 2);
    let token = first.page.unwrap().next_page_token;
    assert!(!token.is_empty());
    let second = page(token).await;
    let listed: Vec<String> = first
        .pending
        .iter()
        .chain(&second.pending)
        .map(|p| p.request_id.clone())
        .collect();
    assert_eq!(listed, waiting);
    for p in first.pending.iter().chain(&second.pending) {
        assert_eq!(p.required_scope, ["team:notify"]);
        assert_eq!((p.approvals_required, p.valid_approvers), (1, 0));
        let since = p.waiting_since.unwrap();
        assert!(since.seconds >= before.unix_timestamp() - 1);
        assert_eq!(json_of(&p.plan)["source"], "agent:alice");
    }
    // Listing by state pages the same way.
    let pending = owner
        .orchestrator()
        .list_requests(pb::ListRequestsRequest {
            state: "APPROVAL_PENDING".into(),
            page: None,
        })
        .await
        .unwrap()
        .into_inner()
        .requests;
    assert_eq!(
        pending
            .iter()
            .map(|r| r.request_id.clone())
            .collect::<Vec<_>>(),
        waiting
    );
    let f = failure(
        owner
            .orchestrator()
            .list_requests(pb::ListRequestsRequest {
                state: "WAITING".into(),
                page: None,
            })
            .await
            .map_err(noema_client::ClientError::from),
    );
    assert_eq!(f.code, noema_core::ErrorCode::InvalidArgument);
}

async fn an_optional_confirm_is_recorded_and_a_rejection_blocks(g: &Governed) {
    let owner = connect(&g.cluster, &g.cluster.owner_token).await;
    let ops = approver(&g.cluster, "human:ops", 42).await;
    // local.index is L1 ("optional single confirm").
    let l1 = |marker: &str| {
        plan(
            "agent:alice",
            json!([step(
                "i",
                "local.index",
                &["index:write"],
                json!({"marker": marker})
            )]),
        )
    };
    let id = owner.plan(&l1("confirmed")).await.unwrap().request_id;
    let risked = owner.risk(&id).await.unwrap();
    assert_eq!(risked.state, "RISKED");
    assert_eq!(json_of(&risked.risk_report)["risk_level"], "L1");
    let ok = approval("human:ops", "approve", &["index:write"], 0.0);
    let confirmed = owner.approve(&ops.key, &ok, &id).await.unwrap();
    assert_eq!(confirmed.state, "RISKED");
    assert_eq!(
        (confirmed.valid_approvers, confirmed.approvals_required),
        (1, 0)
    );
    let trace = json_of(&owner.execute(&id).await.unwrap().exec_trace);
    assert_eq!(trace["status"], "success");

    let id = owner.plan(&l1("rejected")).await.unwrap().request_id;
    owner.risk(&id).await.unwrap();
    let no = approval("human:ops", "reject", &["index:write"], 0.0);
    assert_eq!(
        owner.approve(&ops.key, &no, &id).await.unwrap().state,
        "BLOCKED"
    );
    let trace = json_of(&owner.execute(&id).await.unwrap().exec_trace);
    assert_eq!(trace["status"], "blocked");
    assert_eq!(g.received.with_marker("rejected"), 0);

    // L0 takes none.
    let id = owner
        .plan(&plan("agent:alice", json!([noop("s")])))
        .await
        .unwrap()
        .request_id;
    owner.risk(&id).await.unwrap();
    let ok = approval("human:ops", "approve", &[], 0.0);
    let f = failure(owner.approve(&ops.key, &ok, &id).await);
    assert_eq!(f.metadata["check"], "not_required");
    assert_eq!(f.code, noema_core::ErrorCode::FailedPrecondition);
}

/// POST `body` (JSON) to `path` as the owner: status and JSON answer.
async fn post(g: &Governed, path: &str, body: &Value) -> (u16, Value) {
    let response = noema_e2e::owner(&g.cluster)
        .post(format!("{}{path}", g.cluster.rest_url))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(g: &Governed, path: &str) -> (u16, Value) {
    let response = noema_e2e::owner(&g.cluster)
        .get(format!("{}{path}", g.cluster.rest_url))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn rest_serves_the_seeds_paths_json_in_and_out(g: &Governed) {
    // POST /plan: a Plan in, 201 with the request.
    let (status, planned) = post(g, "/plan", &plan("agent:alice", json!([noop("s1")]))).await;
    assert_eq!(status, 201, "{planned}");
    assert_eq!(planned["state"], "PLANNED");
    assert_eq!(planned["plan"]["source"], "agent:alice");
    assert_eq!(planned["allowed_next"], json!(["risk"]));
    let id = planned["request_id"].as_str().unwrap().to_owned();
    let ask = json!({"request_id": id});

    // 409 with the state and the calls allowed next.
    let (status, body) = post(g, "/execute", &ask).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["reason"], "WRONG_STATE");
    assert_eq!(body["state"], "PLANNED");
    assert_eq!(body["allowed_next"], json!(["risk"]));
    // 422 naming the field; a body that is not JSON at all is a malformed plan too.
    let mut bad = plan("agent:alice", json!([noop("s1")]));
    bad.as_object_mut().unwrap().remove("goal");
    let (status, body) = post(g, "/plan", &bad).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        (body["reason"].clone(), body["field"].clone()),
        (json!("SCHEMA_VIOLATION"), json!("goal"))
    );
    let response = noema_e2e::owner(&g.cluster)
        .post(format!("{}/plan", g.cluster.rest_url))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 422);
    // 404 for an unknown request.
    let (status, body) = post(g, "/risk", &json!({"request_id": "req_000000000000nope"})).await;
    assert_eq!((status, body["code"].clone()), (404, json!("not_found")));

    let (status, risked) = post(g, "/risk", &ask).await;
    assert_eq!((status, risked["state"].clone()), (200, json!("RISKED")));
    assert_eq!(risked["risk_report"]["risk_level"], "L0");
    let (status, executed) = post(g, "/execute", &ask).await;
    assert_eq!(
        (status, executed["state"].clone()),
        (200, json!("TRACED")),
        "{executed}"
    );
    let trace_id = executed["exec_trace"]["trace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for key in [&trace_id, &id] {
        let (status, trace) = get(g, &format!("/trace/{key}")).await;
        assert_eq!(status, 200);
        assert_eq!(trace["exec_trace"], executed["exec_trace"]);
    }
    let (status, evaluated) = post(
        g,
        "/evaluate",
        &json!({"request_id": id, "evaluator_id": "agent:eve", "eval_result": eval(0.9, true, false)}),
    )
    .await;
    assert_eq!(
        (status, evaluated["state"].clone()),
        (200, json!("EVALUATED")),
        "{evaluated}"
    );
    assert_eq!(evaluated["gate"]["gate_passed"], true);
    assert_eq!(evaluated["screening"]["suppressed"], false);
    let (status, rewarded) = post(g, "/reward/update", &ask).await;
    assert_eq!(
        (status, rewarded["state"].clone()),
        (200, json!("REWARDED")),
        "{rewarded}"
    );
    assert_eq!(rewarded["reward_update"]["actor_id"], "agent:alice");

    let (status, detail) = get(g, &format!("/requests/{id}?from=events")).await;
    assert_eq!(status, 200);
    assert_eq!(detail["replay"]["matches"], true, "{detail}");
    assert_eq!(detail["event_count"], 7);
    assert_eq!(detail["events"][0]["event_type"], "received");
    assert_eq!(detail["events"][0]["prev_state"], Value::Null);
    let (_, live) = get(g, &format!("/requests/{id}")).await;
    assert_eq!(live["head_hash"], detail["head_hash"]);
    assert!(live.get("replay").is_none());
    let (status, events) = get(g, &format!("/requests/{id}/events?limit=5")).await;
    assert_eq!(status, 200);
    assert_eq!(events["events"].as_array().unwrap().len(), 5);
    let cursor = events["next_cursor"].as_str().unwrap();
    let (_, rest) = get(g, &format!("/requests/{id}/events?limit=5&cursor={cursor}")).await;
    assert_eq!(rest["events"].as_array().unwrap().len(), 2);
    assert_eq!(rest["next_cursor"], Value::Null);
    let (_, listed) = get(g, "/requests?state=REWARDED").await;
    assert_eq!(listed["requests"][0]["request_id"], id);

    let (status, rep) = get(g, "/reputation/agent:alice").await;
    assert_eq!(
        (status, rep["rep"].clone(), rep["updates"].clone()),
        (200, json!(0.0), json!(1))
    );
    let (status, release) = get(g, "/release/check").await;
    assert_eq!(status, 200);
    assert_eq!(release["ok"], true, "{release}");
    assert_eq!(release["items"].as_array().unwrap().len(), 7);
    let (status, schema) = get(g, "/schemas/plan").await;
    assert_eq!(status, 200);
    assert_eq!(schema["properties"]["schema_version"]["const"], "0.1");
    let (status, _) = get(g, "/schemas/nothing").await;
    assert_eq!(status, 404);
    let (_, names) = get(g, "/schemas").await;
    assert!(
        names["schemas"]
            .as_array()
            .unwrap()
            .contains(&json!("exec_trace.v0.1.json"))
    );

    // An approval over REST, signed as the SDK signs it.
    let ops = approver(&g.cluster, "human:ops", 42).await;
    let (_, planned) = post(g, "/plan", &external_send("agent:alice", "rest")).await;
    let id = planned["request_id"].as_str().unwrap().to_owned();
    let (_, risked) = post(g, "/risk", &json!({"request_id": id})).await;
    assert_eq!(risked["state"], "APPROVAL_PENDING");
    let (_, queue) = get(g, "/approvals/pending").await;
    assert_eq!(queue["pending"][0]["request_id"], id);
    assert!(queue["pending"][0]["waiting_since"].is_string());
    let ok = approval("human:ops", "approve", &["team:notify"], 0.0);
    let signed = noema_client::orchestrator::signed_approval(&ops.key, &ok, &id).unwrap();
    let (status, approved) = post(
        g,
        "/approve",
        &json!({"request_id": id, "approval": ok, "signature": signed.signature,
                "public_key": signed.public_key}),
    )
    .await;
    assert_eq!(
        (status, approved["valid_approvers"].clone()),
        (200, json!(1)),
        "{approved}"
    );
    let (status, refused) = post(
        g,
        "/approve",
        &json!({"request_id": id, "approval": ok, "signature": signed.signature,
                "public_key": signed.public_key}),
    )
    .await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        (refused["reason"].clone(), refused["check"].clone()),
        (json!("APPROVAL_REFUSED"), json!("replayed"))
    );
    let (_, executed) = post(g, "/execute", &json!({"request_id": id})).await;
    assert_eq!(executed["exec_trace"]["status"], "success");

    // The evaluator's next item.
    let (status, item) = get(g, "/evaluations/next?evaluator_id=agent:eve2").await;
    assert_eq!(status, 200, "{item}");
    assert!(item["exec_trace"]["trace_id"].is_string());
}

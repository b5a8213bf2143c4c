//! Gold calibration, the reward formula and each anti-abuse rule through the API, with the
//! worked numbers of docs/orchestrator.md ("Reputation").

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use noema_client::Noema;
use noema_client::pb::orchestrator as pb;
use noema_e2e::governed::{Governed, connect, eval, json_of, plan, step};
use noema_e2e::governed_cases;
use serde_json::{Value, json};

governed_cases!(
    gold_tasks_calibrate_evaluators_and_the_reward_follows_the_formula,
    each_anti_abuse_rule_fires_and_costs_the_actor,
);

/// A traced L0 request by `actor`.
async fn traced(noema: &Noema, actor: &str) -> String {
    let id = noema
        .plan(&plan(
            actor,
            json!([step("s", "noema.noop", &[], Value::Null)]),
        ))
        .await
        .unwrap()
        .request_id;
    noema.risk(&id).await.unwrap();
    noema.execute(&id).await.unwrap();
    id
}

/// The anti-abuse parameters.
fn abuse(cooldown: u64, per_submission: u32, burst: u32) -> Value {
    json!({"duplicate_vote_cooldown_seconds": cooldown, "max_votes_per_submission": per_submission,
           "burst_window_seconds": 600, "burst_max_votes": burst})
}

/// Serves items to `evaluator` until a gold task comes (gold is drawn at the policy's
/// ratio, so this takes a few calls); its id.
async fn next_gold(noema: &Noema, evaluator: &str, gold: &BTreeSet<String>) -> String {
    for _ in 0..5000 {
        match noema
            .orchestrator()
            .next_evaluation(pb::NextEvaluationRequest {
                evaluator_id: evaluator.to_owned(),
            })
            .await
        {
            Ok(item) => {
                let item = item.into_inner();
                // Real and gold items look the same.
                assert!(item.request_id.starts_with("req_"), "{}", item.request_id);
                assert_eq!(item.request_id.len(), "req_".len() + 32);
                assert!(item.item_id.starts_with("it_"));
                let trace = json_of(&item.exec_trace);
                assert_eq!(trace["request_id"], item.request_id);
                assert!(trace["trace_id"].as_str().unwrap().starts_with("tr_"));
                assert!(json_of(&item.plan)["steps"].is_array());
                assert!(json_of(&item.risk_report)["risk_level"].is_string());
                if gold.contains(&item.request_id) {
                    return item.request_id;
                }
            }
            Err(status) => assert_eq!(status.code(), noema_client::Code::NotFound, "{status}"),
        }
    }
    panic!("no gold task was served to {evaluator}")
}

async fn gold_tasks_calibrate_evaluators_and_the_reward_follows_the_formula(g: &Governed) {
    // docs/orchestrator.md, worked example 1: reputation 50; three evaluations pass the
    // gate, by A (influence 1.0), B (0.8) and C (no gold record, 0).
    g.reload(|p| {
        p["reward"]["initial_rep"] = json!(50);
        p["gold"]["ratio"] = json!(0.15);
        p["anti_abuse"] = abuse(0, 100, 1000);
    })
    .await
    .unwrap();
    let noema = connect(&g.cluster, &g.cluster.owner_token).await;
    let source = traced(&noema, "agent:zed").await;
    let mut gold = BTreeSet::new();
    for _ in 0..6 {
        let task = noema
            .orchestrator()
            .add_gold_task(pb::AddGoldTaskRequest {
                from_request_id: source.clone(),
                answer: Some(pb::GoldAnswer {
                    pass: true,
                    min_score: 0.8,
                    max_score: 1.0,
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_ne!(task.gold_id, source);
        gold.insert(task.gold_id);
    }

    // A matches one gold task: 1 of 1.
    let task = next_gold(&noema, "eval:a", &gold).await;
    let judged = noema
        .evaluate(&task, "eval:a", &eval(0.9, true, false))
        .await
        .unwrap();
    // A gold judgement answers like an evaluation.
    assert_eq!(judged.state, "EVALUATED");
    assert_eq!(judged.request_id, task);
    // B misses its first and matches the next four: 4 of 5, the last a match.
    for n in 0..5 {
        let task = next_gold(&noema, "eval:b", &gold).await;
        let judgement = if n == 0 {
            eval(0.9, false, false)
        } else {
            eval(0.95, true, false)
        };
        noema.evaluate(&task, "eval:b", &judgement).await.unwrap();
    }
    let standing = |id: &'static str| {
        let noema = noema.clone();
        async move {
            noema
                .orchestrator()
                .get_evaluator(pb::GetEvaluatorRequest {
                    evaluator_id: id.into(),
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let a = standing("eval:a").await;
    assert_eq!((a.gold_attempts, a.gold_matches, a.influence), (1, 1, 1.0));
    let b = standing("eval:b").await;
    assert_eq!(
        (b.gold_attempts, b.gold_matches, b.consecutive_mismatches),
        (5, 4, 0)
    );
    assert!((b.influence - 0.8).abs() < 1e-9, "{}", b.influence);
    // Gold judgements touch no request and no suite.
    let replay = noema
        .orchestrator()
        .replay_all(pb::ReplayAllRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(replay.ok);
    assert_eq!(replay.requests, 1);

    let id = traced(&noema, "agent:alice").await;
    for evaluator in ["eval:a", "eval:b", "eval:c"] {
        let r = noema
            .evaluate(&id, evaluator, &eval(0.9, true, false))
            .await
            .unwrap();
        assert!(r.gate.unwrap().gate_passed);
        assert!(!r.screening.unwrap().suppressed);
    }
    let update = json_of(&noema.update_reward(&id).await.unwrap().reward_update);
    assert_eq!(update["rep_before"], 50.0);
    assert_eq!(update["rep_after"], 51.8);
    assert_eq!(update["delta"], 1.8);
    assert_eq!(update["inputs"]["correct"], 1.8);
    assert_eq!(update["inputs"]["incorrect"], 0.0);
    assert_eq!(update["inputs"]["noise"], 0.0);
    assert_eq!(
        update["reason_codes"],
        json!(["gate_passed", "no_gold_record"])
    );
    let rep = noema
        .orchestrator()
        .get_reputation(pb::GetReputationRequest {
            actor_id: "agent:alice".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((rep.rep, rep.rep_cap, rep.updates), (51.8, 100.0, 1));
    assert_eq!(rep.last_reward_id, update["id"].as_str().unwrap());

    // A mismatch now costs A: 1 of 2 and a streak of one, × 0.5 → 0.25.
    let task = next_gold(&noema, "eval:a", &gold).await;
    noema
        .evaluate(&task, "eval:a", &eval(0.5, true, false))
        .await
        .unwrap();
    let a = standing("eval:a").await;
    assert_eq!(
        (a.gold_attempts, a.gold_matches, a.consecutive_mismatches),
        (2, 1, 1)
    );
    assert!((a.influence - 0.25).abs() < 1e-9, "{}", a.influence);
}

/// `rule` fired on the vote, and the reward of its request is `rep_after` from 10.
async fn each_anti_abuse_rule_fires_and_costs_the_actor(g: &Governed) {
    let noema = connect(&g.cluster, &g.cluster.owner_token).await;
    // An evaluator with influence 1.0 (one gold task matched), with no rule in the way.
    g.reload(|p| {
        p["reward"]["initial_rep"] = json!(10);
        p["gold"]["ratio"] = json!(0.15);
        p["anti_abuse"] = abuse(0, 100, 1000);
    })
    .await
    .unwrap();
    let source = traced(&noema, "agent:zed").await;
    let task = noema
        .orchestrator()
        .add_gold_task(pb::AddGoldTaskRequest {
            from_request_id: source,
            answer: Some(pb::GoldAnswer {
                pass: true,
                min_score: 0.8,
                max_score: 1.0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .gold_id;
    let gold = BTreeSet::from([task]);
    let task = next_gold(&noema, "eval:a", &gold).await;
    noema
        .evaluate(&task, "eval:a", &eval(0.9, true, false))
        .await
        .unwrap();

    // A failed gate costs beta × influence: 10 − 1.2 × 1.0 = 8.8.
    let id = traced(&noema, "agent:erin").await;
    noema
        .evaluate(&id, "eval:a", &eval(0.9, false, false))
        .await
        .unwrap();
    let update = json_of(&noema.update_reward(&id).await.unwrap().reward_update);
    assert_eq!(
        (update["rep_after"].clone(), update["reason_codes"].clone()),
        (json!(8.8), json!(["gate_failed"]))
    );

    // repeated_vote_suppressed (1 vote per submission): the second vote is noise.
    // 10 + 1.0 × 1.0 − 0.5 × 1 = 10.5.
    g.reload(|p| {
        p["reward"]["initial_rep"] = json!(10);
        p["anti_abuse"] = abuse(0, 1, 1000);
    })
    .await
    .unwrap();
    let id = traced(&noema, "agent:bob").await;
    let first = noema
        .evaluate(&id, "eval:a", &eval(0.9, true, false))
        .await
        .unwrap();
    assert!(!first.screening.unwrap().suppressed);
    let second = noema
        .evaluate(&id, "eval:a", &eval(0.9, true, false))
        .await
        .unwrap();
    assert_eq!(
        second.screening.unwrap().reason_codes,
        ["repeated_vote_suppressed"]
    );
    let update = json_of(&noema.update_reward(&id).await.unwrap().reward_update);
    assert_eq!(update["inputs"]["correct"], 1.0);
    assert_eq!(update["inputs"]["noise"], 1.0);
    assert_eq!(update["rep_after"], 10.5);
    assert_eq!(
        update["reason_codes"],
        json!(["gate_passed", "repeated_vote_suppressed"])
    );

    // duplicate_vote_cooldown (60 s): A voted a moment ago, so this vote is noise.
    // 10 − 0.5 × 1 = 9.5.
    g.reload(|p| {
        p["reward"]["initial_rep"] = json!(10);
        p["anti_abuse"] = abuse(60, 100, 1000);
    })
    .await
    .unwrap();
    let id = traced(&noema, "agent:carol").await;
    let vote = noema
        .evaluate(&id, "eval:a", &eval(0.9, true, false))
        .await
        .unwrap();
    assert_eq!(
        vote.screening.unwrap().reason_codes,
        ["duplicate_vote_cooldown"]
    );
    let update = json_of(&noema.update_reward(&id).await.unwrap().reward_update);
    assert_eq!(update["rep_after"], 9.5);
    assert_eq!(update["delta"], -0.5);
    assert_eq!(update["reason_codes"], json!(["duplicate_vote_cooldown"]));

    // anomalous_burst (2 votes per 600 s): D's third vote within the window is noise.
    g.reload(|p| {
        p["reward"]["initial_rep"] = json!(10);
        p["anti_abuse"] = abuse(0, 100, 2);
    })
    .await
    .unwrap();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(traced(&noema, "agent:dave").await);
    }
    for (n, id) in ids.iter().enumerate() {
        let vote = noema
            .evaluate(id, "eval:d", &eval(0.9, true, false))
            .await
            .unwrap();
        let screening = vote.screening.unwrap();
        if n < 2 {
            assert!(!screening.suppressed);
        } else {
            assert_eq!(screening.reason_codes, ["anomalous_burst"]);
        }
    }
    // D has no gold record: its counted votes move nothing; its burst vote costs 0.5.
    let first = json_of(&noema.update_reward(&ids[0]).await.unwrap().reward_update);
    assert_eq!(first["rep_after"], 10.0);
    assert_eq!(first["reason_codes"], json!(["no_gold_record"]));
    let third = json_of(&noema.update_reward(&ids[2]).await.unwrap().reward_update);
    assert_eq!(third["rep_before"], 10.0);
    assert_eq!(third["rep_after"], 9.5);
    assert_eq!(third["reason_codes"], json!(["anomalous_burst"]));
}

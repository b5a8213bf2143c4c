//! Random request streams through the public API (the SDK over gRPC, against a running
//! cluster) on both backends: random plans over tools of every kind and level, random
//! policies (approval mode, a tool dropped from the allowlist between assessment and
//! execution), approvals genuine and forged (rejecting, expired, signed for another
//! request, by an unregistered key, mis-scoped, replayed), failing steps, and concurrent
//! calls (the requests of a case run at once, and some race two `execute`s).
//!
//! What must hold whatever the stream, judged from the outside (the webhook the tools call,
//! files a destructive step would remove, the events and objects the API serves):
//! - no forbidden transition: each request's events chain state to state along the seed's
//!   machine only;
//! - replay equals the live state, per request and for the whole store;
//! - every execution has a trace, and a tool that ran is in a trace;
//! - no L2 step ran without genuine approvals (as many distinct approvers as the policy in
//!   force asks), whatever forgeries were sent;
//! - no L3 step ran, and no tool ran that the policy in force did not allow;
//! - a raced execution ran once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use noema_client::pb::orchestrator as pb;
use noema_client::{ClientError, Noema, SigningKeyPair};
use noema_core::ErrorCode;
use noema_e2e::governed::{
    Approver, Governed, approval, approver, connect, eval, events, json_of, plan, replayed, step,
    unique,
};
use noema_e2e::{Backend, Shape};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

/// A step's tool. Levels under the test policy: Noop L0; Index, True, False L1; Notify L2
/// (an external send); Remove L3 (destructive); Unlisted is on no allowlist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Noop,
    Index,
    True,
    False,
    Notify,
    Remove,
    Unlisted,
}

/// An approval as sent: genuine ones by approver 0 or 1, and every kind of forgery.
#[derive(Debug, Clone, Copy)]
enum Sent {
    Genuine(usize),
    Reject(usize),
    Expired,
    ForAnotherRequest,
    UnregisteredKey,
    MisScoped,
    /// The last approval sent for this request, sent again (byte for byte).
    Replayed,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Risk,
    Approve(Sent),
    Execute,
    /// Two `execute`s at once.
    ExecuteRace,
    Evaluate(bool),
    Reward,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Policy {
    dual: bool,
    index_allowed: bool,
}

#[derive(Debug, Clone)]
struct RequestPlan {
    /// Each step's tool, and whether its call fails (for the tools that can).
    steps: Vec<(Tool, bool)>,
    ops: Vec<Op>,
}

#[derive(Debug, Clone)]
struct Stream {
    /// The policy in force while the requests are planned and assessed.
    before: Policy,
    /// The policy in force when they execute (reloaded in between).
    at_execute: Policy,
    requests: Vec<RequestPlan>,
}

fn tool() -> impl Strategy<Value = Tool> {
    prop_oneof![
        3 => Just(Tool::Noop),
        2 => Just(Tool::Index),
        1 => Just(Tool::True),
        1 => Just(Tool::False),
        3 => Just(Tool::Notify),
        1 => Just(Tool::Remove),
        1 => Just(Tool::Unlisted),
    ]
}

fn sent() -> impl Strategy<Value = Sent> {
    prop_oneof![
        4 => (0..2usize).prop_map(Sent::Genuine),
        1 => (0..2usize).prop_map(Sent::Reject),
        1 => Just(Sent::Expired),
        1 => Just(Sent::ForAnotherRequest),
        1 => Just(Sent::UnregisteredKey),
        1 => Just(Sent::MisScoped),
        1 => Just(Sent::Replayed),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Risk),
        4 => sent().prop_map(Op::Approve),
        2 => Just(Op::Execute),
        1 => Just(Op::ExecuteRace),
        1 => any::<bool>().prop_map(Op::Evaluate),
        1 => Just(Op::Reward),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    (any::<bool>(), prop::bool::weighted(0.8)).prop_map(|(dual, index_allowed)| Policy {
        dual,
        index_allowed,
    })
}

fn request_plan() -> impl Strategy<Value = RequestPlan> {
    (
        prop::collection::vec((tool(), prop::bool::weighted(0.2)), 1..4),
        // Mostly the lifecycle's order with random calls around it, so that streams get far.
        any::<bool>(),
        prop::collection::vec(op(), 0..5),
        prop::collection::vec(op(), 0..4),
    )
        .prop_map(|(steps, approved, extra, late)| {
            let mut ops = vec![Op::Risk];
            if approved {
                ops.extend([Op::Approve(Sent::Genuine(0)), Op::Approve(Sent::Genuine(1))]);
            }
            ops.extend(extra);
            ops.push(Op::Execute);
            ops.extend(late);
            ops.extend([Op::Evaluate(true), Op::Reward]);
            RequestPlan { steps, ops }
        })
}

fn stream() -> impl Strategy<Value = Stream> {
    (
        policy(),
        policy(),
        prop::collection::vec(request_plan(), 1..5),
    )
        .prop_map(|(before, at_execute, requests)| Stream {
            before,
            at_execute,
            requests,
        })
}

/// The seed's state machine, written out here rather than taken from the service: every
/// move an event may record (`None` before the first).
fn allowed_move(from: Option<&str>, to: &str) -> bool {
    matches!(
        (from, to),
        (None, "RECEIVED")
            | (Some("RECEIVED"), "PLANNED")
            | (Some("PLANNED"), "RISKED")
            // L1's optional confirm is recorded in place; a rejection blocks.
            | (Some("RISKED"), "RISKED" | "APPROVAL_PENDING" | "BLOCKED" | "EXECUTED")
            | (Some("APPROVAL_PENDING"), "APPROVAL_PENDING" | "BLOCKED" | "EXECUTED")
            | (Some("EXECUTED" | "BLOCKED"), "TRACED")
            | (Some("TRACED"), "EVALUATED")
            | (Some("EVALUATED"), "EVALUATED" | "REWARDED")
    )
}

/// What a stream may not be refused with: a refusal is a decision, never a breakage.
fn refusal(result: &Result<impl std::fmt::Debug, ClientError>) -> Result<(), TestCaseError> {
    if let Err(err) = result {
        let ClientError::Status(status) = err else {
            return Err(TestCaseError::fail(format!("not a refusal: {err:?}")));
        };
        let failure = noema_core::Failure::from_status(status);
        prop_assert!(
            !matches!(failure.code, ErrorCode::Internal | ErrorCode::Unavailable),
            "a call broke: {failure:?}"
        );
    }
    Ok(())
}

/// The fixture a backend's cases share.
struct World {
    g: Governed,
    owner: Noema,
    approvers: [Approver; 2],
    files: tempfile::TempDir,
    /// Requests whose steps ran, and those with an L2 step among them: the streams must
    /// reach execution, not only refusals.
    executed: AtomicUsize,
    l2_executed: AtomicUsize,
}

impl World {
    async fn start(backend: Backend) -> World {
        let g = Governed::start(backend, Shape::AllInOne).await;
        let owner = connect(&g.cluster, &g.cluster.owner_token).await;
        let approvers = [
            approver(&g.cluster, "human:ops1", 41).await,
            approver(&g.cluster, "human:ops2", 43).await,
        ];
        World {
            g,
            owner,
            approvers,
            files: tempfile::tempdir().unwrap(),
            executed: AtomicUsize::new(0),
            l2_executed: AtomicUsize::new(0),
        }
    }

    async fn set_policy(&self, policy: Policy) {
        self.g
            .reload(|p| {
                p["approval"]["mode"] = json!(if policy.dual { "dual" } else { "single" });
                if !policy.index_allowed {
                    p["tools"].as_object_mut().unwrap().remove("local.index");
                }
            })
            .await
            .unwrap();
    }
}

/// One request of a stream, as the test drives and observes it.
struct Driven {
    id: String,
    plan: RequestPlan,
    /// The webhook marker of each step (for the tools that call it).
    markers: Vec<String>,
    /// The file each Remove step would delete.
    files: Vec<PathBuf>,
    /// The approvers of the genuine approvals sent so far.
    genuine: BTreeSet<usize>,
    /// The last approval sent, for a replay.
    last_sent: Option<pb::ApproveRequest>,
    /// How many distinct approvers had sent genuine approvals before each execute call.
    genuine_before_execute: Vec<usize>,
}

fn step_of(tool: Tool, fail: bool, index: usize, marker: &str, file: &std::path::Path) -> Value {
    let id = format!("s{index}");
    match tool {
        Tool::Noop => step(&id, "noema.noop", &[], Value::Null),
        Tool::Index => step(
            &id,
            "local.index",
            &[],
            json!({"marker": marker, "fail": fail}),
        ),
        Tool::True => step(&id, "files.true", &[], Value::Null),
        Tool::False => step(&id, "files.false", &[], Value::Null),
        Tool::Notify => step(
            &id,
            "team.notify",
            &["team:notify"],
            json!({"marker": marker, "fail": fail}),
        ),
        Tool::Remove => step(
            &id,
            "files.remove",
            &[],
            json!({"path": file.display().to_string()}),
        ),
        Tool::Unlisted => step(&id, "shell.exec", &[], json!({"cmd": "true"})),
    }
}

/// Plans a request (under the policy in force).
async fn plan_request(w: &World, plan_of: RequestPlan) -> Result<Driven, TestCaseError> {
    let mut markers = Vec::new();
    let mut files = Vec::new();
    let mut steps = Vec::new();
    for (i, (tool, fail)) in plan_of.steps.iter().enumerate() {
        let marker = unique("m");
        let file = w.files.path().join(unique("keep"));
        std::fs::write(&file, "must survive").unwrap();
        steps.push(step_of(*tool, *fail, i, &marker, &file));
        markers.push(marker);
        files.push(file);
    }
    let planned = w
        .owner
        .plan(&plan("agent:alice", Value::Array(steps)))
        .await;
    refusal(&planned)?;
    let id = planned
        .map_err(|e| TestCaseError::fail(format!("a valid plan was refused: {e:?}")))?
        .request_id;
    Ok(Driven {
        id,
        plan: plan_of,
        markers,
        files,
        genuine: BTreeSet::new(),
        last_sent: None,
        genuine_before_execute: Vec::new(),
    })
}

/// Runs `ops` on the request, in order.
async fn drive(w: &World, r: &mut Driven, ops: &[Op]) -> Result<(), TestCaseError> {
    for op in ops {
        match *op {
            Op::Risk => refusal(&w.owner.risk(&r.id).await)?,
            Op::Approve(sent) => {
                let scope = ["team:notify"];
                let (key, request) = match sent {
                    Sent::Genuine(i) => {
                        let a = &w.approvers[i];
                        (&a.key, approval(&a.id, "approve", &scope, 0.0))
                    }
                    Sent::Reject(i) => {
                        let a = &w.approvers[i];
                        (&a.key, approval(&a.id, "reject", &scope, 0.0))
                    }
                    Sent::Expired => {
                        let a = &w.approvers[0];
                        (&a.key, approval(&a.id, "approve", &scope, 7200.0))
                    }
                    Sent::MisScoped => {
                        let a = &w.approvers[0];
                        (&a.key, approval(&a.id, "approve", &["other:thing"], 0.0))
                    }
                    Sent::ForAnotherRequest | Sent::UnregisteredKey | Sent::Replayed => {
                        let a = &w.approvers[1];
                        (&a.key, approval(&a.id, "approve", &scope, 0.0))
                    }
                };
                let request = match sent {
                    Sent::ForAnotherRequest => {
                        let mut signed = noema_client::orchestrator::signed_approval(
                            key,
                            &request,
                            "req_some_other_request",
                        )
                        .unwrap();
                        signed.request_id.clone_from(&r.id);
                        signed
                    }
                    Sent::UnregisteredKey => noema_client::orchestrator::signed_approval(
                        &SigningKeyPair::from_seed(&[66; 32]),
                        &request,
                        &r.id,
                    )
                    .unwrap(),
                    Sent::Replayed => match &r.last_sent {
                        Some(last) => last.clone(),
                        None => continue,
                    },
                    _ => noema_client::orchestrator::signed_approval(key, &request, &r.id).unwrap(),
                };
                if let Sent::Genuine(i) = sent {
                    r.genuine.insert(i);
                }
                r.last_sent = Some(request.clone());
                let answer = w
                    .owner
                    .orchestrator()
                    .approve(request)
                    .await
                    .map_err(ClientError::from);
                refusal(&answer)?;
            }
            Op::Execute => {
                r.genuine_before_execute.push(r.genuine.len());
                let answer = w.owner.execute(&r.id).await;
                refusal(&answer)?;
                if let Ok(executed) = answer {
                    prop_assert_eq!(executed.state, "TRACED");
                    prop_assert!(
                        !executed.exec_trace.is_empty(),
                        "an execution without trace"
                    );
                }
            }
            Op::ExecuteRace => {
                r.genuine_before_execute.push(r.genuine.len());
                let (a, b) = tokio::join!(w.owner.execute(&r.id), w.owner.execute(&r.id));
                refusal(&a)?;
                refusal(&b)?;
                prop_assert!(!(a.is_ok() && b.is_ok()), "a raced execute ran twice");
            }
            Op::Evaluate(pass) => {
                let score = if pass { 0.9 } else { 0.1 };
                refusal(
                    &w.owner
                        .evaluate(&r.id, "agent:eve", &eval(score, pass, false))
                        .await,
                )?;
            }
            Op::Reward => refusal(&w.owner.update_reward(&r.id).await)?,
        }
    }
    Ok(())
}

/// Checks every invariant on one driven request.
async fn check(w: &World, r: &Driven, s: &Stream) -> Result<(), TestCaseError> {
    // No forbidden transition, and the chain links.
    let history = events(&w.owner, &r.id).await;
    let mut previous: Option<&pb::Event> = None;
    for e in &history {
        let from = previous.map(|p| p.next_state.as_str());
        let recorded_from = (!e.prev_state.is_empty()).then_some(e.prev_state.as_str());
        prop_assert_eq!(recorded_from, from, "event {} does not follow on", e.seq);
        prop_assert!(
            allowed_move(from, &e.next_state),
            "forbidden move {:?} → {} ({})",
            from,
            e.next_state,
            e.event_type
        );
        if let Some(p) = previous {
            prop_assert_eq!(&e.prev_hash, &p.hash);
        }
        previous = Some(e);
    }

    // Replay equals the live state.
    let detail = replayed(&w.owner, &r.id).await;
    let replay = detail.replay.clone().unwrap_or_default();
    prop_assert!(replay.matches, "replay differs: {:?}", replay.differences);

    // Every execution has a trace.
    let executed = history.iter().any(|e| e.event_type == "executed");
    let traced = history.iter().any(|e| e.event_type == "traced");
    prop_assert_eq!(
        executed,
        traced && json_of(&detail.exec_trace)["status"] != "blocked",
        "an execution and its trace disagree"
    );
    let trace = json_of(&detail.exec_trace);
    let traced_tools: Vec<&str> = trace["tool_calls"]
        .as_array()
        .map(|calls| calls.iter().filter_map(|c| c["tool"].as_str()).collect())
        .unwrap_or_default();

    // What ran, seen from outside.
    let ran = |tool: Tool| -> usize {
        r.plan
            .steps
            .iter()
            .zip(&r.markers)
            .filter(|((t, _), _)| *t == tool)
            .map(|(_, marker)| w.g.received.with_marker(marker))
            .sum()
    };
    let notified = ran(Tool::Notify);
    let indexed = ran(Tool::Index);
    for marker in &r.markers {
        prop_assert!(w.g.received.with_marker(marker) <= 1, "a step ran twice");
    }
    if notified + indexed > 0 {
        prop_assert!(traced, "a tool ran without a trace");
        prop_assert!(executed, "a tool ran in an execution not recorded");
    }

    // No L3 ran, no unallowlisted tool ran.
    for ((tool, _), file) in r.plan.steps.iter().zip(&r.files) {
        if *tool == Tool::Remove {
            prop_assert!(file.exists(), "an L3 step removed {}", file.display());
        }
    }
    prop_assert!(
        !traced_tools.contains(&"files.remove"),
        "an L3 step was called"
    );
    prop_assert!(
        !traced_tools.contains(&"shell.exec"),
        "an unlisted tool was called"
    );
    let forbidden = r
        .plan
        .steps
        .iter()
        .any(|(t, _)| matches!(t, Tool::Remove | Tool::Unlisted));
    prop_assert!(
        !(forbidden && executed),
        "a request with a forbidden step executed"
    );
    if executed && r.plan.steps.iter().any(|(t, _)| *t == Tool::Index) {
        prop_assert!(
            s.before.index_allowed && s.at_execute.index_allowed,
            "local.index ran while the policy did not allow it"
        );
    }

    // No L2 ran without genuine approvals from as many approvers as the policy asks.
    let needs_approval = r.plan.steps.iter().any(|(t, _)| *t == Tool::Notify);
    if executed {
        w.executed.fetch_add(1, Ordering::Relaxed);
        if needs_approval {
            w.l2_executed.fetch_add(1, Ordering::Relaxed);
        }
    }
    if executed && needs_approval {
        // The policy in force at execution decides (the service re-assesses under it).
        let required = if s.at_execute.dual { 2 } else { 1 };
        let genuine = r.genuine_before_execute.iter().copied().max().unwrap_or(0);
        prop_assert!(
            genuine >= required,
            "an L2 request ran with {} genuine approver(s), {} required",
            genuine,
            required
        );
        prop_assert!(
            detail.approvals.len() >= required,
            "an L2 request ran without its approvals recorded"
        );
    }
    Ok(())
}

/// One stream: plan and assess under `before`, reload `at_execute`, then the rest; the
/// requests of each phase run concurrently.
async fn run_stream(w: &World, s: Stream) -> Result<(), TestCaseError> {
    w.set_policy(s.before).await;
    let mut driven = Vec::new();
    for plan_of in s.requests.clone() {
        driven.push(plan_request(w, plan_of).await?);
    }
    // Phase one: the calls before the first execute.
    let split: Vec<usize> = driven
        .iter()
        .map(|r| {
            r.plan
                .ops
                .iter()
                .position(|op| matches!(op, Op::Execute | Op::ExecuteRace))
                .unwrap_or(r.plan.ops.len())
        })
        .collect();
    let phase = |driven: Vec<Driven>, from_execute: bool| {
        let split = &split;
        async move {
            let runs = driven.into_iter().enumerate().map(|(i, mut r)| async move {
                let ops = r.plan.ops.clone();
                let (early, late) = ops.split_at(split[i]);
                drive(w, &mut r, if from_execute { late } else { early }).await?;
                Ok::<Driven, TestCaseError>(r)
            });
            futures::future::join_all(runs)
                .await
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
        }
    };
    let driven = phase(driven, false).await?;
    if s.at_execute != s.before {
        w.set_policy(s.at_execute).await;
    }
    let driven = phase(driven, true).await?;
    for r in &driven {
        check(w, r, &s).await?;
    }
    Ok(())
}

async fn streams_hold_on(backend: Backend) {
    let world = World::start(backend).await;
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config {
        cases: 24,
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = tokio::task::block_in_place(|| {
        runner.run(&stream(), |s| handle.block_on(run_stream(&world, s)))
    });
    if let Err(err) = outcome {
        panic!("{err}");
    }

    // The whole store replays to its live state.
    let report = world
        .owner
        .orchestrator()
        .replay_all(pb::ReplayAllRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(report.ok, "{report:?}");
    assert!(report.requests >= 24, "{report:?}");
    // The streams reached the far end of the machine, not only refusals.
    let rewarded = world
        .owner
        .orchestrator()
        .list_requests(pb::ListRequestsRequest {
            state: "REWARDED".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!rewarded.requests.is_empty(), "no stream got to REWARDED");
    assert!(
        world.executed.load(Ordering::Relaxed) > 0,
        "nothing executed"
    );
    assert!(
        world.l2_executed.load(Ordering::Relaxed) > 0,
        "no approved L2 request executed"
    );
    let Governed { cluster, .. } = world.g;
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_streams_keep_the_invariants_on_sqlite() {
    streams_hold_on(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_streams_keep_the_invariants_on_postgres() {
    streams_hold_on(Backend::PostgresS3).await;
}

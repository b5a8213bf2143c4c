//! The kernel over real storage (SQLite and Postgres), with the real sources — the streaming
//! LLM source against the scripted toy LLM, `http_json` against the toy sources, both on
//! 127.0.0.1 — running the seed's Phase I park scenarios: every check reads what the store
//! recorded (source invocations, LLM calls, turns, events), as the API serves it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod rig;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use noema_world::domain::attempt::AttemptStatus;
use noema_world::domain::component::ComponentKind;
use noema_world::domain::failure::{Failure, FailureClass};
use noema_world::domain::invocation::{
    InvocationKind, InvocationStatus, ModelOutputKind, SourceInvocation,
};
use noema_world::domain::llm_call::ArtifactKind;
use noema_world::domain::problem::Problem;
use noema_world::domain::schema::CompiledSchema;
use noema_world::domain::source::{
    ResponseSource, ResponseSourceDefinition, SourceError, SourceInvocationContext, SourceKind,
    SourceOutput, SourceRequest, SourceRole,
};
use noema_world::ops::Page;
use noema_world::ops::kernel::TurnResult;
use noema_world::sources::SourceFactory;
use noema_world::store::invocations::InvocationFilter;
use rig::{Backend, Rig, caller, final_patch, park_script, rig};
use serde_json::{Value, json};

/// The seed's examples.
fn seed(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/seed/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn invocations(rig: &Rig, slug: &str) -> Vec<SourceInvocation> {
    let filter = InvocationFilter {
        world_slug: Some(slug.to_owned()),
        ..InvocationFilter::default()
    };
    let mut all = rig
        .world
        .list_invocations(&filter, Page::new(0, 1000))
        .await
        .unwrap();
    all.sort_by_key(|i| (i.attempted_turn, i.invocation_seq));
    all
}

fn of_ambient<'a>(all: &'a [SourceInvocation], id: &str) -> Vec<&'a SourceInvocation> {
    all.iter()
        .filter(|i| {
            i.ambient_source_id
                .as_ref()
                .is_some_and(|a| a.as_str() == id)
        })
        .collect()
}

fn of_kind(all: &[SourceInvocation], kind: InvocationKind) -> Vec<&SourceInvocation> {
    all.iter().filter(|i| i.invocation_kind == kind).collect()
}

both_backends!(
    three_turns_in_the_park,
    available_tools_go_unused_when_the_model_does_not_call_them,
    two_agents_and_one_candy_bar,
    send_text_runs_only_when_the_model_sends_one,
    a_source_that_answers_no_json_fails_the_attempt_before_commit,
    a_provider_that_refuses_response_format_fails_loudly,
    invalid_generations_exhaust_the_retry_lane,
    prompt_only_delivery_is_authored_not_chosen,
    concurrent_subjects_run_at_once_up_to_the_limit_and_commit_in_order,
    a_held_lease_refuses_a_second_attempt,
    the_third_kind_runs_through_the_kernel,
    a_world_can_be_forked_at_a_turn,
);

/// Seed Phase I, tests 1-3, 5 and 7: weather, PA and phone inbox over three turns, Bob's
/// tool call, Bob and the ant in one committed turn.
async fn three_turns_in_the_park(backend: Backend) {
    let rig = rig(backend, park_script()).start().await;
    rig.world_with("park-demo", &rig.park_workflow()).await;
    for turn in 1..=3 {
        assert_eq!(rig.commit("park-demo").await, turn);
    }
    let world = rig.world.get_world("park-demo").await.unwrap();
    assert_eq!(world.current_turn, 3);
    let report = rig
        .world
        .verify_world("park-demo", &caller())
        .await
        .unwrap();
    assert!(report.ok, "{report:?}");
    assert_eq!(report.turns_checked, 4);

    // Turn 1: both patches in one committed turn, in subject order (A5, Example 7).
    let t1 = rig
        .world
        .get_turn("park-demo", 1)
        .await
        .unwrap()
        .record
        .unwrap();
    let patches: Vec<(u32, &str)> = t1
        .patches
        .iter()
        .map(|p| (p.patch_seq, p.subject_entity_id.as_str()))
        .collect();
    assert_eq!(patches, [(1, "ant"), (2, "bob")]);
    let state = |id: &str| t1.state.entity(id).unwrap().state.clone();
    assert_eq!(state("bob"), "holding a candy bar");
    assert_eq!(state("vending_machine"), "empty");
    assert_eq!(state("crumb"), "gone");
    assert_eq!(state("ant"), "fed, standing where the crumb was");
    let events = rig
        .world
        .list_events("park-demo", Some(1), Page::new(0, 10))
        .await
        .unwrap();
    assert_eq!(events.len(), 2);
    let touched: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            e.touches
                .iter()
                .filter_map(|t| t.entity_id.clone())
                .collect()
        })
        .collect();
    assert_eq!(
        touched,
        [vec!["ant", "crumb"], vec!["bob", "vending_machine"]]
    );
    let diff = rig.world.turn_diff("park-demo", 1).await.unwrap();
    assert_eq!(diff.patches.len(), 2);
    assert_eq!(diff.entities.len(), 4);

    let all = invocations(&rig, "park-demo").await;
    // Weather: one invocation per turn, colder each time (A9).
    let weather: Vec<i64> = of_ambient(&all, "park_weather")
        .iter()
        .map(|i| {
            i.response_json.as_ref().unwrap()["temperature_f"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(weather, [72, 64, 55]);
    // PA: traced every turn, empty or not (A10).
    let pa: Vec<usize> = of_ambient(&all, "park_pa")
        .iter()
        .map(|i| {
            i.response_json.as_ref().unwrap()["announcements"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(pa, [0, 1, 0]);
    // Phone: before Bob only, spam on turn 3 (A11).
    let inbox = of_ambient(&all, "bob_phone_inbox");
    assert_eq!(inbox.len(), 3);
    assert!(
        inbox
            .iter()
            .all(|i| i.workflow_subject_entity_id.as_ref().unwrap().as_str() == "bob")
    );
    assert_eq!(
        inbox[2].response_json.as_ref().unwrap(),
        &seed("example6_phone_inbox")
    );

    // What the model saw: the announcement on turn 2 (both), the spam on turn 3 (Bob only),
    // the candy bar's result in Bob's second turn-1 generation.
    let requests = rig.llm.requests();
    let seen = |subject: &str, turn: u64, needle: &str| {
        requests
            .iter()
            .filter(|r| r.subject.as_deref() == Some(subject) && r.turn == Some(turn))
            .any(|r| r.body.to_string().contains(needle))
    };
    assert!(seen("bob", 2, "east vending area is closed"));
    assert!(seen("ant", 2, "east vending area is closed"));
    assert!(!seen("ant", 1, "east vending area is closed"));
    assert!(seen("bob", 3, "free candy coupons"));
    assert!(!seen("ant", 3, "free candy coupons"));
    assert!(seen("bob", 1, "A candy bar was dispensed."));
    assert!(
        requests
            .iter()
            .all(|r| r.stream && r.body["response_format"]["type"] == json!("json_schema"))
    );

    // The one tool call ran because Bob's model asked, as a child of that generation (A7, A8).
    let tools = of_kind(&all, InvocationKind::ModelElectedTool);
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].tool_name.as_deref(), Some("buy_candy"));
    assert_eq!(
        tools[0].response_json.as_ref().unwrap(),
        &seed("example1_vending_result_dispensed")
    );
    let parent = all
        .iter()
        .find(|i| Some(i.source_invocation_id) == tools[0].parent_source_invocation_id)
        .unwrap();
    assert_eq!(parent.invocation_kind, InvocationKind::LlmGeneration);
    assert_eq!(parent.model_output_kind, Some(ModelOutputKind::ToolCall));
    assert_eq!(rig.park.calls("/buy_candy").len(), 1);

    // Turn 2: Bob's first generation was not JSON; the retry is a new invocation and LLM
    // call under the same node and source (A13).
    let bob_turn2: Vec<&SourceInvocation> = all
        .iter()
        .filter(|i| {
            i.attempted_turn == 2
                && i.invocation_kind == InvocationKind::LlmGeneration
                && i.workflow_subject_entity_id.as_ref().unwrap().as_str() == "bob"
        })
        .collect();
    let lanes: Vec<(u32, InvocationStatus, Option<ModelOutputKind>)> = bob_turn2
        .iter()
        .map(|i| {
            (
                i.logical_generation_attempt.unwrap(),
                i.status,
                i.model_output_kind,
            )
        })
        .collect();
    assert_eq!(
        lanes,
        [
            (1, InvocationStatus::Failed, Some(ModelOutputKind::Invalid)),
            (
                2,
                InvocationStatus::Succeeded,
                Some(ModelOutputKind::FinalPatch)
            ),
        ]
    );
    assert_eq!(bob_turn2[0].source_hash, bob_turn2[1].source_hash);
    assert_eq!(bob_turn2[0].workflow_node_id, bob_turn2[1].workflow_node_id);
    let refused = rig
        .world
        .get_llm_call(&bob_turn2[0].llm_call_id.unwrap().to_string())
        .await
        .unwrap();
    assert!(!refused.parse_errors.is_empty());
    assert_eq!(
        refused.raw_text.as_deref(),
        Some("Bob hears the announcement and decides to wait.")
    );

    // Every generation's rich trace (A15): chunks as streamed, texts, tokens, artifacts.
    let accepted = rig
        .world
        .get_llm_call(&bob_turn2[1].llm_call_id.unwrap().to_string())
        .await
        .unwrap();
    assert!(accepted.chunks.len() > 1);
    let streamed: String = accepted.chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(Some(streamed.as_str()), accepted.raw_text.as_deref());
    assert!(accepted.tokens.unwrap().total_tokens.unwrap() > 0);
    let kinds: Vec<ArtifactKind> = accepted.artifacts.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [ArtifactKind::ToolLoopOutput, ArtifactKind::WorldPatch]
    );
    assert_eq!(
        accepted.source_invocation_id,
        bob_turn2[1].source_invocation_id
    );
    assert_eq!(accepted.model, "toy");
    assert_eq!(accepted.requested_model, "@chat");

    // 7 + 6 + 5 invocations, none left running; one attempt per turn, each summarised.
    assert_eq!(all.len(), 7 + 6 + 5);
    assert!(all.iter().all(|i| i.status != InvocationStatus::Running));
    let attempts = rig
        .world
        .list_attempts("park-demo", Page::new(0, 10))
        .await
        .unwrap();
    assert_eq!(attempts.len(), 3);
    let turn2 = attempts.iter().find(|a| a.attempted_turn == 2).unwrap();
    assert_eq!(turn2.status, AttemptStatus::Committed);
    assert_eq!(turn2.source_invocation_count, 6);
    assert_eq!(turn2.source_trace_summary.failures.len(), 1);
    assert_eq!(rig.llm.remaining(), 0);

    // Bob's history: three changes, each patch's own before and after.
    let history = rig.world.entity_history("park-demo", "bob").await.unwrap();
    assert_eq!(history.changes.len(), 3);
    assert_eq!(
        history.changes[0].after["state"],
        json!("holding a candy bar")
    );
    assert_eq!(
        history.changes[1].before["state"],
        json!("holding a candy bar")
    );
}

/// Seed Phase I, test 4 (A12).
async fn available_tools_go_unused_when_the_model_does_not_call_them(backend: Backend) {
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]},
        {"subject": "bob", "outputs": [final_patch(seed("example3_world_patch"))]}
    ]});
    let rig = rig(backend, script).start().await;
    rig.world_with("unused", &rig.park_workflow()).await;
    assert_eq!(rig.commit("unused").await, 1);
    let all = invocations(&rig, "unused").await;
    assert!(of_kind(&all, InvocationKind::ModelElectedTool).is_empty());
    for path in ["/buy_candy", "/drinking_fountain", "/send"] {
        assert!(rig.park.calls(path).is_empty(), "{path} was called");
    }
    // Ambient context ran anyway: it is the workflow's choice, not the model's.
    assert_eq!(of_kind(&all, InvocationKind::AmbientContext).len(), 3);
    assert_eq!(of_kind(&all, InvocationKind::LlmGeneration).len(), 2);
    let world = rig.world.get_world("unused").await.unwrap();
    assert_eq!(
        world.state.entity("bob").unwrap().state,
        "eating a candy bar from his pocket"
    );
}

/// Seed Phase I, test 6.
async fn two_agents_and_one_candy_bar(backend: Backend) {
    let buy = |actor: &str| json!({"json": {"kind": "tool_call", "tool_call": {"name": "buy_candy", "arguments": {"actor_id": actor, "machine_id": "vending_machine", "button": "C"}}}});
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [buy("ant"), final_patch(json!({"narration": "The ant gets a candy bar.", "effects": [
            {"op": "set_entity_state", "entity_id": "ant", "state": "next to a candy bar"},
            {"op": "set_entity_state", "entity_id": "vending_machine", "state": "empty"}]}))]},
        {"subject": "bob", "outputs": [buy("bob"), final_patch(seed("example2_world_patch"))]}
    ]});
    let rig = rig(backend, script).start().await;
    rig.world_with("candy", &rig.park_workflow()).await;
    assert_eq!(rig.commit("candy").await, 1);
    let all = invocations(&rig, "candy").await;
    let results: Vec<&str> = of_kind(&all, InvocationKind::ModelElectedTool)
        .iter()
        .map(|i| {
            i.response_json.as_ref().unwrap()["status"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(results, ["dispensed", "empty"]);
    let world = rig.world.get_world("candy").await.unwrap();
    assert_eq!(
        world.state.entity("vending_machine").unwrap().state,
        "empty"
    );
    assert_eq!(
        world.state.entity("bob").unwrap().memory.as_deref(),
        Some("I tried the vending machine, but it was empty.")
    );
}

/// A11: the dummy send-text tool runs only when the model sends a text.
async fn send_text_runs_only_when_the_model_sends_one(backend: Backend) {
    let send = json!({"json": {"kind": "tool_call", "tool_call": {"name": "send_text", "arguments": {"from_phone_id": "bob_phone", "to": "alice", "body": "Candy?"}}}});
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]},
        {"subject": "bob", "outputs": [send, final_patch(json!({"narration": "Bob texts Alice.", "effects": [
            {"op": "append_entity_memory", "entity_id": "bob", "content": "I texted Alice about candy."}]}))]}
    ]});
    let rig = rig(backend, script).start().await;
    rig.world_with("texting", &rig.park_workflow()).await;
    assert_eq!(rig.commit("texting").await, 1);
    let sends = rig.park.calls("/send");
    assert_eq!(sends.len(), 1);
    assert_eq!(
        sends[0].body,
        json!({"from_phone_id": "bob_phone", "to": "alice", "body": "Candy?"})
    );
    let all = invocations(&rig, "texting").await;
    let tool = of_kind(&all, InvocationKind::ModelElectedTool)[0];
    assert_eq!(tool.request_json, sends[0].body);
    assert_eq!(
        tool.response_json.as_ref().unwrap()["status"],
        json!("sent")
    );
    assert_eq!(tool.http_status, Some(200));
    assert!(tool.response_headers.contains_key("content-type"));
}

/// Seed smoke 8: a source answering non-JSON fails the attempt before commit (D11).
async fn a_source_that_answers_no_json_fails_the_attempt_before_commit(backend: Backend) {
    let script = json!({"scripts": [{"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]}]});
    let rig = rig(backend, script).start().await;
    let broken = json!({"version": 1, "label": "broken_inbox", "interface": {"name": "http_json", "method": "POST",
        "url_env": "CHUKWA_TOY_PHONE_URL", "path": "/faults/not_json", "timeout_ms": 5000}});
    let (broken, _) = rig
        .world
        .put_component(ComponentKind::ResponseSource, &broken, &caller())
        .await
        .unwrap();
    let mut workflow = rig.park_workflow();
    workflow["ambient_sources"][2]["source_ref"]["hash"] = json!(broken.as_str());
    rig.world_with("broken", &workflow).await;
    let outcome = rig.run("broken").await;
    let TurnResult::Failed(failure) = &outcome.result else {
        panic!("{outcome:?}")
    };
    assert_eq!(failure.class, FailureClass::SourceInvalidJson);
    assert_eq!(failure.class.http_status().as_u16(), 502);
    // The ant's patch had been applied to the working world; nothing of it is committed.
    let world = rig.world.get_world("broken").await.unwrap();
    assert_eq!(world.current_turn, 0);
    assert_eq!(
        world.state.entity("ant").unwrap().state,
        "hungry, on the plate on the picnic table"
    );
    let attempt = rig
        .world
        .get_attempt(&outcome.attempt_id.to_string())
        .await
        .unwrap();
    assert_eq!(attempt.status, AttemptStatus::Failed);
    assert_eq!(attempt.failure_class, Some(FailureClass::SourceInvalidJson));
    // Its traces stay.
    let all = invocations(&rig, "broken").await;
    let failed = all.last().unwrap();
    assert_eq!(failed.status, InvocationStatus::Failed);
    assert_eq!(failed.failure_class, Some(FailureClass::SourceInvalidJson));
    assert_eq!(
        failed.response_text.as_deref(),
        Some("service temporarily unavailable")
    );
    assert_eq!(of_kind(&all, InvocationKind::LlmGeneration).len(), 1);
    assert_eq!(attempt.source_invocation_count as usize, all.len());
    // The lease is free again: the next attempt runs (and fails the same way).
    assert!(matches!(
        rig.run("broken").await.result,
        TurnResult::Failed(_)
    ));
}

/// D14: a provider that refuses response_format fails the generation loudly; nothing is
/// resent without it.
async fn a_provider_that_refuses_response_format_fails_loudly(backend: Backend) {
    let script = json!({"reject_response_format": true, "scripts": [{"outputs": [final_patch(seed("d9_world_patch_cooler"))]}]});
    let rig = rig(backend, script).start().await;
    rig.world_with("strict", &rig.park_workflow()).await;
    let outcome = rig.run("strict").await;
    let TurnResult::Failed(failure) = outcome.result else {
        panic!("{outcome:?}")
    };
    assert_eq!(failure.class, FailureClass::StructuredOutputRejected);
    assert_eq!(rig.llm.requests().len(), 1);
    let all = invocations(&rig, "strict").await;
    let generations = of_kind(&all, InvocationKind::LlmGeneration);
    assert_eq!(generations.len(), 1);
    assert_eq!(generations[0].http_status, Some(400));
    let call = rig
        .world
        .get_llm_call(&generations[0].llm_call_id.unwrap().to_string())
        .await
        .unwrap();
    assert_eq!(
        call.failure_class,
        Some(FailureClass::StructuredOutputRejected)
    );
}

/// A13: the retry lane ends after max_generation_attempts, each attempt traced.
async fn invalid_generations_exhaust_the_retry_lane(backend: Backend) {
    let script = json!({"scripts": [{"subject": "ant", "outputs": [
        {"text": "no"}, {"json": {"kind": "tool_call", "tool_call": {"name": "fly", "arguments": {}}}},
        final_patch(json!({"narration": "n", "effects": [{"op": "set_entity_state", "entity_id": "ghost", "state": "x"}]}))
    ]}]});
    let rig = rig(backend, script).start().await;
    rig.world_with("stubborn", &rig.park_workflow()).await;
    let outcome = rig.run("stubborn").await;
    let TurnResult::Failed(failure) = outcome.result else {
        panic!("{outcome:?}")
    };
    assert_eq!(failure.class, FailureClass::ModelOutputInvalid);
    assert_eq!(failure.class.http_status().as_u16(), 422);
    let all = invocations(&rig, "stubborn").await;
    let generations = of_kind(&all, InvocationKind::LlmGeneration);
    let attempts: Vec<u32> = generations
        .iter()
        .map(|i| i.logical_generation_attempt.unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(
        generations
            .iter()
            .all(|g| g.llm_call_id.is_some() && g.status == InvocationStatus::Failed)
    );
    let requests = rig.llm.requests();
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("the reply is not JSON")
    );
    assert!(requests[2].body.to_string().contains("/tool_call/name"));
}

/// D14: prompt-only delivery happens only when the source says so.
async fn prompt_only_delivery_is_authored_not_chosen(backend: Backend) {
    let script = json!({"scripts": [{"outputs": [
        final_patch(seed("d9_world_patch_cooler")), final_patch(seed("d9_world_patch_cooler"))
    ]}]});
    let rig = rig(backend, script).start().await;
    let source = json!({"version": 1, "label": "prompt_only_router",
        "interface": {"name": "llm_chat_completions", "model": "@chat", "schema_delivery": "prompt_only"}});
    let (source, _) = rig
        .world
        .put_component(ComponentKind::ResponseSource, &source, &caller())
        .await
        .unwrap();
    let mut workflow = rig.park_workflow();
    workflow["nodes"][0]["llm_source_ref"]["hash"] = json!(source.as_str());
    rig.world_with("prompted", &workflow).await;
    assert_eq!(rig.commit("prompted").await, 1);
    let requests = rig.llm.requests();
    assert_eq!(requests.len(), 2);
    for request in requests {
        assert!(request.body.get("response_format").is_none());
        assert!(
            request
                .body
                .to_string()
                .contains("matching this JSON Schema")
        );
    }
}

/// Issue 19 item 8: subjects run at once — they meet at a barrier that only releases when
/// every one of them waits there — and their patches commit in subject order; with a limit
/// below the number of subjects they cannot meet, and the attempt fails.
async fn concurrent_subjects_run_at_once_up_to_the_limit_and_commit_in_order(backend: Backend) {
    let barrier = json!({"version": 1, "label": "barrier", "interface": {"name": "http_json", "method": "POST",
        "url_env": "CHUKWA_TOY_PA_URL", "path": "/barrier", "timeout_ms": 10000}});
    let ant = json!({"narration": "The ant waits.", "effects": [{"op": "set_entity_state", "entity_id": "ant", "state": "waited"}]});
    let bob = json!({"narration": "Bob waits.", "effects": [{"op": "set_entity_state", "entity_id": "bob", "state": "waited"}]});
    // Bob answers first (no latency); the ant after a while: the order of commit is still
    // the subjects' order.
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [{"json": {"kind": "final_patch", "patch": ant}, "latency_ms": 300}, {"json": {"kind": "final_patch", "patch": ant}}]},
        {"subject": "bob", "outputs": [final_patch(bob.clone()), final_patch(bob)]}
    ]});
    for (limit, commits) in [(2, true), (1, false)] {
        let rig = rig(backend, script.clone())
            .options(move |o| o.max_concurrent_subjects = limit)
            .start()
            .await;
        let (barrier, _) = rig
            .world
            .put_component(ComponentKind::ResponseSource, &barrier, &caller())
            .await
            .unwrap();
        let mut workflow = rig.park_workflow();
        workflow["execution"] = json!("per_subject_concurrent");
        workflow["ambient_sources"] = json!([{
            "id": "meet", "source_ref": {"hash": barrier.as_str()}, "run": "before_subject_workflow",
            "scope": "acting_subject", "visible_to": "acting_subject",
            "request_template": {"name": {"$from": "/world/slug"}, "parties": 2, "timeout_ms": 1500},
            "inject_as": "/ambient/meet"
        }]);
        rig.world_with("together", &workflow).await;
        let outcome = rig.run("together").await;
        if commits {
            let TurnResult::Committed { turn, .. } = outcome.result else {
                panic!("limit {limit}: {outcome:?}")
            };
            let record = rig
                .world
                .get_turn("together", turn)
                .await
                .unwrap()
                .record
                .unwrap();
            let order: Vec<&str> = record
                .patches
                .iter()
                .map(|p| p.subject_entity_id.as_str())
                .collect();
            assert_eq!(order, ["ant", "bob"]);
        } else {
            let TurnResult::Failed(failure) = outcome.result else {
                panic!("limit {limit}: {outcome:?}")
            };
            assert_eq!(failure.class, FailureClass::SourceHttpError);
            let world = rig.world.get_world("together").await.unwrap();
            assert_eq!(world.current_turn, 0);
            // Nothing was left running.
            let all = invocations(&rig, "together").await;
            assert!(
                all.iter().all(|i| i.status != InvocationStatus::Running),
                "{all:#?}"
            );
        }
    }
}

/// Issue 19 item 2: one writer per world: a second attempt while the first holds the lease
/// is refused (LEASE_HELD), and the first commits.
async fn a_held_lease_refuses_a_second_attempt(backend: Backend) {
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [{"json": {"kind": "final_patch", "patch": seed("d9_world_patch_cooler")}, "latency_ms": 1500}]},
        {"subject": "bob", "outputs": [final_patch(seed("example3_world_patch"))]}
    ]});
    let rig = rig(backend, script).start().await;
    rig.world_with("contested", &rig.park_workflow()).await;
    let world = Arc::clone(&rig.world);
    let first = tokio::spawn(async move { world.run_turn("contested", &caller()).await });
    // Wait until the first attempt is recorded.
    for _ in 0..100 {
        if !rig
            .world
            .list_attempts("contested", Page::new(0, 1))
            .await
            .unwrap()
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let second = rig.world.run_turn("contested", &caller()).await;
    let Err(noema_world::WorldError::LeaseHeld { slug }) = second else {
        panic!("{second:?}")
    };
    assert_eq!(slug, "contested");
    let first = first.await.unwrap().unwrap();
    assert!(
        matches!(first.result, TurnResult::Committed { turn: 1, .. }),
        "{first:?}"
    );
}

/// A17 / D20: a source kind defined only here runs as an ambient source through the real
/// kernel — registered with the service builder, no kernel code knows it.
async fn the_third_kind_runs_through_the_kernel(backend: Backend) {
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]},
        {"subject": "bob", "outputs": [final_patch(seed("d9_world_patch_shivers"))]}
    ]});
    let rig = rig(backend, script)
        .builder(|b| b.source_kind(Arc::new(StaticJsonKind), Arc::new(StaticJsonFactory)))
        .start()
        .await;
    let constant = json!({"version": 1, "label": "constant_weather",
        "interface": {"name": "static_json", "value": seed("example4_weather_turn3")}});
    let (constant, _) = rig
        .world
        .put_component(ComponentKind::ResponseSource, &constant, &caller())
        .await
        .unwrap();
    let mut workflow = rig.park_workflow();
    workflow["ambient_sources"][0]["source_ref"]["hash"] = json!(constant.as_str());
    rig.world_with("third", &workflow).await;
    assert_eq!(rig.commit("third").await, 1);
    let all = invocations(&rig, "third").await;
    let weather = of_ambient(&all, "park_weather");
    assert_eq!(weather[0].source_hash, constant);
    assert_eq!(
        weather[0].response_json.as_ref().unwrap(),
        &seed("example4_weather_turn3")
    );
    assert!(rig.park.calls("/weather").is_empty());
    assert!(
        rig.llm.requests()[0]
            .body
            .to_string()
            .contains("The cold front has settled over the park.")
    );
}

/// Forks: the world's state at a turn becomes a new scenario, with its lineage.
async fn a_world_can_be_forked_at_a_turn(backend: Backend) {
    let rig = rig(backend, park_script()).start().await;
    rig.world_with("original", &rig.park_workflow()).await;
    assert_eq!(rig.commit("original").await, 1);
    let parent = rig.world.get_world("original").await.unwrap();
    let parent_hash = noema_world::domain::hash::ContentHash::parse(&parent.scenario_hash).unwrap();
    let (fork, created, lineage) = rig
        .world
        .fork_scenario(
            &parent_hash,
            "park-after-candy",
            Some(("original", 1)),
            &caller(),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(lineage.parent_hash, parent_hash);
    assert_eq!(lineage.turn, Some(1));
    rig.world
        .create_world("branch", &fork, &caller())
        .await
        .unwrap();
    let branch = rig.world.get_world("branch").await.unwrap();
    assert_eq!(branch.state, parent.state);
    assert_eq!(branch.simulation_time, "2026-01-01T08:10:00Z");
    // Forking the same turn again finds the same scenario.
    let (again, created, _) = rig
        .world
        .fork_scenario(
            &parent_hash,
            "park-after-candy",
            Some(("original", 1)),
            &caller(),
        )
        .await
        .unwrap();
    assert_eq!((again, created), (fork, false));
}

// --- a test-only third source kind --------------------------------------------------------

struct StaticJsonKind;

static STATIC_JSON_INTERFACE: LazyLock<CompiledSchema> = LazyLock::new(|| {
    CompiledSchema::compile(&json!({
        "type": "object", "additionalProperties": false, "required": ["name", "value"],
        "properties": {"name": {"const": "static_json"}, "value": true}
    }))
    .unwrap()
});

impl SourceKind for StaticJsonKind {
    fn name(&self) -> &str {
        "static_json"
    }
    fn role(&self) -> SourceRole {
        SourceRole::Json
    }
    fn interface_schema(&self) -> Result<&CompiledSchema, Problem> {
        Ok(&STATIC_JSON_INTERFACE)
    }
}

struct StaticJsonFactory;

impl SourceFactory for StaticJsonFactory {
    fn build(
        &self,
        definition: &ResponseSourceDefinition,
    ) -> Result<Arc<dyn ResponseSource>, Vec<Problem>> {
        Ok(Arc::new(StaticJsonSource(
            definition.interface.config["value"].clone(),
        )))
    }
}

struct StaticJsonSource(Value);

#[async_trait]
impl ResponseSource for StaticJsonSource {
    async fn invoke_json(
        &self,
        _: &SourceInvocationContext,
        request: SourceRequest,
    ) -> Result<SourceOutput, SourceError> {
        match request {
            SourceRequest::Json(_) => Ok(SourceOutput {
                http_status: None,
                headers: BTreeMap::new(),
                text: self.0.to_string(),
                tokens: None,
            }),
            SourceRequest::Chat(_) => Err(SourceError::new(Failure::new(
                FailureClass::SourceHttpError,
                "a static source answers JSON requests only",
            ))),
        }
    }
}

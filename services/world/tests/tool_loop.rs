//! The llm_tool_loop node's decisions: tools run only when the model emits a valid permitted
//! call; model-content failures go through the one retry lane with corrective context;
//! limits end the loop with `model_output_invalid`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use std::sync::Arc;

use common::{Park, seed, set, text};
use noema_world::domain::chat::{ChatMessage, ChatRole};
use noema_world::domain::failure::FailureClass;
use noema_world::domain::invocation::ModelOutputKind;
use noema_world::domain::patch::WorldPatch;
use noema_world::domain::schema::CompiledSchema;
use noema_world::domain::source::SchemaDelivery;
use noema_world::domain::tool_loop::{LoopError, NodeContract, Step, ToolLoop};
use noema_world::domain::workflow::{CognitionWorkflow, LlmToolLoopNode};
use noema_world::domain::world::WorldState;
use serde_json::{Value, json};

struct Setup {
    node: LlmToolLoopNode,
    contract: Arc<NodeContract>,
    world: WorldState,
    park: Park,
}

async fn setup_with(edit: impl FnOnce(&mut Value)) -> Setup {
    let mut park = Park::new();
    let mut workflow = park.workflow();
    edit(&mut workflow);
    let assembled = park.assemble_workflow(&workflow).await.unwrap();
    let (hash, parsed) = assembled.workflows.iter().next().unwrap();
    let node = parsed.applied_node().unwrap().clone();
    let contract = Arc::new(assembled.node_contract(hash).unwrap());
    Setup {
        node,
        contract,
        world: assembled.initial_world(),
        park,
    }
}

async fn setup() -> Setup {
    setup_with(|_| {}).await
}

impl Setup {
    fn start(&self) -> ToolLoop {
        let prompt = vec![ChatMessage::system("act"), ChatMessage::user("the park")];
        ToolLoop::new(
            &self.node,
            self.contract.clone(),
            prompt,
            SchemaDelivery::ResponseFormat,
        )
    }
}

fn final_patch(patch: Value) -> String {
    json!({"kind": "final_patch", "patch": patch}).to_string()
}

fn tool_call(name: &str, arguments: Value) -> String {
    json!({"kind": "tool_call", "tool_call": {"name": name, "arguments": arguments}}).to_string()
}

#[tokio::test]
async fn available_tools_are_not_called_when_the_model_emits_a_final_patch() {
    let s = setup().await;
    let mut tool_loop = s.start();
    let generation = tool_loop.generation().unwrap();
    assert_eq!(
        (
            generation.logical_generation_attempt,
            generation.tool_loop_round
        ),
        (1, 0)
    );
    let judged = tool_loop
        .judge(&final_patch(seed("example3_world_patch")), &s.world)
        .unwrap();
    assert_eq!(judged.model_output_kind, ModelOutputKind::FinalPatch);
    assert_eq!(
        judged.step,
        Step::Final(WorldPatch::from_json(&seed("example3_world_patch")).unwrap())
    );
    assert_eq!(tool_loop.tool_calls_made(), 0);
    assert_eq!(tool_loop.generation().unwrap_err(), LoopError::Finished);
    // The seed's own final-patch example, verbatim.
    let mut tool_loop = s.start();
    let judged = tool_loop
        .judge(&text("seed", "tool_loop_output_final_patch"), &s.world)
        .unwrap();
    assert!(matches!(judged.step, Step::Final(_)));
}

#[tokio::test]
async fn a_permitted_tool_call_runs_and_its_result_returns_as_context() {
    let s = setup().await;
    let mut tool_loop = s.start();
    let judged = tool_loop
        .judge(&text("seed", "tool_loop_output_tool_call"), &s.world)
        .unwrap();
    assert_eq!(judged.model_output_kind, ModelOutputKind::ToolCall);
    let Step::CallTool {
        name,
        arguments,
        source_ref,
        arguments_schema_ref,
        result_schema_ref,
    } = judged.step
    else {
        panic!("{:?}", judged.step);
    };
    assert_eq!(name, "buy_candy");
    assert_eq!(
        arguments,
        seed("tool_loop_output_tool_call")["tool_call"]["arguments"]
    );
    assert_eq!(source_ref.hash, s.park.hash("http-vending-source-hash"));
    assert_eq!(
        arguments_schema_ref.hash,
        s.park.hash("buy-candy-arguments-schema-hash")
    );
    assert_eq!(
        result_schema_ref.unwrap().hash,
        s.park.hash("vending-result-schema-hash")
    );
    assert_eq!(tool_loop.tool_calls_made(), 1);
    // No generation until the tool's result is in.
    assert_eq!(tool_loop.generation().unwrap_err(), LoopError::ToolPending);

    tool_loop
        .tool_result(&seed("example1_vending_result_dispensed"))
        .unwrap();
    let generation = tool_loop.generation().unwrap();
    assert_eq!(
        (
            generation.logical_generation_attempt,
            generation.tool_loop_round
        ),
        (1, 1)
    );
    let messages = generation.messages;
    assert_eq!(messages[messages.len() - 2].role, ChatRole::Assistant);
    let last: Value = serde_json::from_str(&messages[messages.len() - 1].content).unwrap();
    assert_eq!(
        last,
        json!({"tool_result": {"name": "buy_candy", "result": seed("example1_vending_result_dispensed")}})
    );
    let judged = tool_loop
        .judge(&final_patch(seed("example1_world_patch")), &s.world)
        .unwrap();
    assert!(matches!(judged.step, Step::Final(_)));
    assert_eq!(
        tool_loop.tool_result(&json!({})),
        Err(LoopError::NoPendingTool)
    );
}

/// Judges `output` expecting a retry with a validation problem at `pointer`.
fn expect_retry(
    tool_loop: &mut ToolLoop,
    world: &WorldState,
    output: &str,
    pointer: &str,
    needle: &str,
) {
    let before = tool_loop.generation().unwrap().logical_generation_attempt;
    let schema_before = tool_loop.generation().unwrap().response_schema.cloned();
    let judged = tool_loop.judge(output, world).unwrap();
    assert_eq!(judged.step, Step::Retry, "{output}");
    assert!(
        judged
            .validation_errors
            .iter()
            .any(|p| p.pointer == pointer && p.message.contains(needle)),
        "{output}: {:?}",
        judged.validation_errors
    );
    let generation = tool_loop.generation().unwrap();
    // Same contract, next attempt, the rejected output and a correction appended.
    assert_eq!(generation.logical_generation_attempt, before + 1);
    assert_eq!(generation.response_schema.cloned(), schema_before);
    let n = generation.messages.len();
    assert_eq!(generation.messages[n - 2].role, ChatRole::Assistant);
    assert_eq!(generation.messages[n - 1].role, ChatRole::User);
    assert!(
        generation.messages[n - 1].content.contains(pointer),
        "{}",
        generation.messages[n - 1].content
    );
    assert_eq!(tool_loop.tool_calls_made(), 0);
}

#[tokio::test]
async fn model_content_failures_retry_through_the_same_node_and_contract() {
    let s = setup().await;
    let cases = [
        (tool_call("steal_candy", json!({})), "/tool_call/name", "\"steal_candy\" is not an available tool (available: buy_candy, use_drinking_fountain, send_text)"),
        (tool_call("buy_candy", json!({"actor_id": "bob", "machine_id": "vending_machine", "button": "CC"})), "/tool_call/arguments/button", "does not match"),
        (tool_call("buy_candy", json!({"actor_id": "bob", "button": "C"})), "/tool_call/arguments/machine_id", "is required"),
        (tool_call("buy_candy", json!({"actor_id": "bob", "machine_id": "vending_machine", "button": "C", "coins": 2})), "/tool_call/arguments/coins", "is not allowed here"),
        (json!({"kind": "final"}).to_string(), "/kind", "is not one of"),
        (json!({"kind": "final_patch"}).to_string(), "/patch", "is required"),
        (json!({"kind": "final_patch", "patch": {"narration": "n", "effects": []}, "tool_call": {}}).to_string(), "/tool_call", "is not allowed here"),
        (final_patch(json!({"narration": "n", "effects": [{"op": "delete_entity", "entity_id": "crumb"}]})), "/patch/effects/0/op", "is not one of"),
        (final_patch(json!({"narration": "n", "agent_state_after": "x", "effects": []})), "/patch/agent_state_after", "is not allowed here"),
        (final_patch(json!({"narration": "n", "effects": [{"op": "set_entity_state", "entity_id": "Bob", "state": "x"}]})), "/patch/effects/0/entity_id", "there is no entity \"Bob\""),
        (final_patch(json!({"narration": "n", "effects": [{"op": "append_entity_memory", "entity_id": "vending_machine", "content": "x"}]})), "/patch/effects/0/entity_id", "a prop has no memory"),
        (final_patch(json!({"narration": "n", "effects": [{"op": "set_environment_content", "environment_label": "beach", "content": "x"}]})), "/patch/effects/0/environment_label", "no environment \"beach\""),
    ];
    for (output, pointer, needle) in cases {
        let mut tool_loop = s.start();
        expect_retry(&mut tool_loop, &s.world, &output, pointer, needle);
        // And the next, valid generation is accepted.
        let judged = tool_loop
            .judge(&final_patch(seed("d9_world_patch_cooler")), &s.world)
            .unwrap();
        assert!(matches!(judged.step, Step::Final(_)), "after {output}");
    }
}

#[tokio::test]
async fn a_reply_that_is_not_json_is_a_parse_error_and_retries() {
    let s = setup().await;
    let mut tool_loop = s.start();
    let judged = tool_loop
        .judge("I think Bob should buy candy.", &s.world)
        .unwrap();
    assert_eq!(judged.model_output_kind, ModelOutputKind::Invalid);
    assert_eq!(judged.step, Step::Retry);
    assert_eq!(judged.parsed, None);
    assert_eq!(judged.parse_errors.len(), 1);
    assert!(
        judged.parse_errors[0].starts_with("the reply is not JSON"),
        "{:?}",
        judged.parse_errors
    );
    assert!(judged.validation_errors.is_empty());
    let generation = tool_loop.generation().unwrap();
    assert_eq!(generation.logical_generation_attempt, 2);
    assert_eq!(generation.messages.last().unwrap().role, ChatRole::User);
}

#[tokio::test]
async fn a_fenced_json_reply_is_normalised_not_refused() {
    let s = setup().await;
    let mut tool_loop = s.start();
    let fenced = format!(
        "```json\n{}\n```\n",
        text("seed", "tool_loop_output_final_patch").trim()
    );
    let judged = tool_loop.judge(&fenced, &s.world).unwrap();
    assert!(matches!(judged.step, Step::Final(_)), "{:?}", judged.step);
}

#[tokio::test]
async fn the_retry_lane_ends_after_max_generation_attempts() {
    let s = setup().await;
    let mut tool_loop = s.start();
    assert_eq!(tool_loop.judge("nope", &s.world).unwrap().step, Step::Retry);
    assert_eq!(
        tool_loop.judge("still nope", &s.world).unwrap().step,
        Step::Retry
    );
    let judged = tool_loop
        .judge(&tool_call("teleport", json!({})), &s.world)
        .unwrap();
    let Step::Failed(failure) = judged.step else {
        panic!("{:?}", judged.step)
    };
    assert_eq!(failure.class, FailureClass::ModelOutputInvalid);
    assert_eq!(failure.class.http_status().as_u16(), 422);
    assert!(
        failure
            .message
            .contains("no valid output after 3 generation attempt(s)"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("/tool_call/name"),
        "{}",
        failure.message
    );
    assert_eq!(tool_loop.generation().unwrap_err(), LoopError::Finished);
    assert!(tool_loop.judge("{}", &s.world).is_err());
    // A failed loop has no final patch to reject.
    let patch = WorldPatch::from_json(&seed("d9_world_patch_cooler")).unwrap();
    assert_eq!(
        tool_loop.reject_final(&patch, vec![]),
        Err(LoopError::NoFinalPatch)
    );
}

#[tokio::test]
async fn attempts_are_counted_per_round() {
    let s = setup().await;
    let mut tool_loop = s.start();
    assert_eq!(tool_loop.judge("bad", &s.world).unwrap().step, Step::Retry);
    let judged = tool_loop
        .judge(&text("seed", "tool_loop_output_tool_call"), &s.world)
        .unwrap();
    assert!(matches!(judged.step, Step::CallTool { .. }));
    tool_loop
        .tool_result(&seed("example2_vending_result_empty"))
        .unwrap();
    let generation = tool_loop.generation().unwrap();
    assert_eq!(
        (
            generation.logical_generation_attempt,
            generation.tool_loop_round
        ),
        (1, 1)
    );
    assert_eq!(tool_loop.judge("bad", &s.world).unwrap().step, Step::Retry);
    assert_eq!(tool_loop.judge("bad", &s.world).unwrap().step, Step::Retry);
    assert_eq!(
        tool_loop.generation().unwrap().logical_generation_attempt,
        3
    );
    let judged = tool_loop
        .judge(&final_patch(seed("example2_world_patch")), &s.world)
        .unwrap();
    assert!(matches!(judged.step, Step::Final(_)));
}

#[tokio::test]
async fn the_tool_budget_ends_the_loop_when_spent() {
    let s = setup_with(|w| set(w, "/nodes/0/max_tool_calls", json!(1))).await;
    let mut tool_loop = s.start();
    let call = text("seed", "tool_loop_output_tool_call");
    assert!(matches!(
        tool_loop.judge(&call, &s.world).unwrap().step,
        Step::CallTool { .. }
    ));
    tool_loop
        .tool_result(&seed("example1_vending_result_dispensed"))
        .unwrap();
    let judged = tool_loop.judge(&call, &s.world).unwrap();
    assert_eq!(judged.model_output_kind, ModelOutputKind::ToolCall);
    let Step::Failed(failure) = judged.step else {
        panic!("{:?}", judged.step)
    };
    assert_eq!(failure.class, FailureClass::ModelOutputInvalid);
    assert!(
        failure.message.contains("max_tool_calls"),
        "{}",
        failure.message
    );
    assert_eq!(tool_loop.tool_calls_made(), 1);

    let s = setup_with(|w| set(w, "/nodes/0/max_tool_calls", json!(0))).await;
    let mut tool_loop = s.start();
    assert!(matches!(
        tool_loop.judge(&call, &s.world).unwrap().step,
        Step::Failed(_)
    ));
    assert_eq!(tool_loop.tool_calls_made(), 0);
}

#[tokio::test]
async fn the_response_schema_is_the_nodes_contract() {
    let s = setup().await;
    let tool_loop = s.start();
    let schema = tool_loop
        .generation()
        .unwrap()
        .response_schema
        .unwrap()
        .clone();
    assert_eq!(schema.name, "tool_loop_output");
    assert_eq!(schema.response_format()["type"], json!("json_schema"));
    let compiled = CompiledSchema::compile(&schema.schema).unwrap();
    compiled.check(&seed("tool_loop_output_tool_call")).unwrap();
    compiled
        .check(&seed("tool_loop_output_final_patch"))
        .unwrap();
    for patch in ["example1_world_patch", "example7_world_patch_ant"] {
        compiled
            .check(&json!({"kind": "final_patch", "patch": seed(patch)}))
            .unwrap();
    }
    assert!(
        compiled
            .check(
                &json!({"kind": "tool_call", "tool_call": {"name": "teleport", "arguments": {}}})
            )
            .is_err()
    );
    assert!(compiled.check(&json!({"kind": "tool_call", "tool_call": {"name": "buy_candy", "arguments": {"button": "C"}}})).is_err());
    assert!(compiled.check(&json!({"kind": "final_patch", "patch": {"narration": "n", "effects": [{"op": "delete_entity"}]}})).is_err());

    // Without tools, only a final patch is possible.
    let simple = setup_with(|w| {
        set(w, "/nodes/0/available_tools", json!([]));
        set(w, "/nodes/0/max_tool_calls", json!(0));
    })
    .await;
    let schema = simple
        .start()
        .generation()
        .unwrap()
        .response_schema
        .unwrap()
        .schema
        .clone();
    let compiled = CompiledSchema::compile(&schema).unwrap();
    assert!(compiled.check(&seed("tool_loop_output_tool_call")).is_err());
    compiled
        .check(&seed("tool_loop_output_final_patch"))
        .unwrap();
}

#[tokio::test]
async fn prompt_only_delivery_is_explicit_and_puts_the_contract_in_the_prompt() {
    let s = setup().await;
    let prompt = vec![ChatMessage::user("the park")];
    let tool_loop = ToolLoop::new(
        &s.node,
        s.contract.clone(),
        prompt,
        SchemaDelivery::PromptOnly,
    );
    let generation = tool_loop.generation().unwrap();
    assert!(generation.response_schema.is_none());
    let last = generation.messages.last().unwrap();
    assert_eq!(last.role, ChatRole::System);
    assert!(last.content.contains("JSON Schema"));
    assert!(last.content.contains("final_patch"));
}

#[tokio::test]
async fn a_patch_that_no_longer_applies_goes_back_through_the_same_lane() {
    let s = setup().await;
    let mut tool_loop = s.start();
    let judged = tool_loop
        .judge(&final_patch(seed("example1_world_patch")), &s.world)
        .unwrap();
    let Step::Final(patch) = judged.step else {
        panic!()
    };
    let problems = vec![noema_world::domain::problem::Problem::new(
        "/effects/2/entity_id",
        "gone meanwhile",
    )];
    assert_eq!(
        tool_loop.reject_final(&patch, problems.clone()).unwrap(),
        Step::Retry
    );
    let generation = tool_loop.generation().unwrap();
    assert_eq!(generation.logical_generation_attempt, 2);
    assert!(
        generation
            .messages
            .last()
            .unwrap()
            .content
            .contains("/patch/effects/2/entity_id: gone meanwhile")
    );
    // Two more rejections use up the lane.
    let judged = tool_loop
        .judge(&final_patch(seed("example1_world_patch")), &s.world)
        .unwrap();
    let Step::Final(patch) = judged.step else {
        panic!()
    };
    assert_eq!(
        tool_loop.reject_final(&patch, problems.clone()).unwrap(),
        Step::Retry
    );
    let judged = tool_loop
        .judge(&final_patch(seed("example1_world_patch")), &s.world)
        .unwrap();
    let Step::Final(patch) = judged.step else {
        panic!()
    };
    assert!(matches!(
        tool_loop.reject_final(&patch, problems).unwrap(),
        Step::Failed(_)
    ));
}

#[tokio::test]
async fn the_seeds_prompt_renders_every_placeholder() {
    use noema_world::domain::workflow::prompt::{PromptValues, render_prompt};
    let s = setup().await;
    let values = PromptValues {
        world_projection: s.world.projection().to_string(),
        subject_rendered: s.world.subject_facts("bob").unwrap().to_string(),
        ambient_visible:
            json!({"environments": {"park": {"weather": seed("example4_weather_turn2")}}})
                .to_string(),
        tools_available: s.contract.tools_available().to_string(),
        ..PromptValues::default()
    };
    let messages = render_prompt(&s.node.prompt_template, &values).unwrap();
    assert_eq!(messages.len(), 2);
    assert!(messages.iter().all(|m| !m.content.contains("{{")));
    assert!(messages[1].content.contains("A cold front is arriving."));
    assert!(messages[1].content.contains("use_drinking_fountain"));
    // The projection shows states, never memories.
    assert!(!s.world.projection().to_string().contains("memory"));
    let workflow: CognitionWorkflow = CognitionWorkflow::from_json(&s.park.workflow()).unwrap();
    assert_eq!(
        workflow.applied_node().unwrap().prompt_template,
        s.node.prompt_template
    );
}

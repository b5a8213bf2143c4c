//! Every JSON example of the seed parses with the kernel's contract types, verbatim, and
//! serialises back to the same JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use std::collections::BTreeMap;

use common::{Park, seed, seed_names, text};
use noema_world::domain::hash::ContentHash;
use noema_world::domain::patch::{WorldEffect, WorldPatch};
use noema_world::domain::source::{
    HttpJsonInterface, LlmChatInterface, ResponseSourceDefinition, SchemaDelivery, SourceKinds,
};
use noema_world::domain::tool_loop::ToolLoopOutput;
use noema_world::domain::workflow::{
    AmbientRunMode, AmbientScope, AmbientVisibility, CognitionWorkflow, ExecutionMode, WorkflowNode,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Parses `value` as `T` and checks it serialises back to the same JSON.
fn round_trip<T: DeserializeOwned + Serialize>(name: &str, value: &Value) -> T {
    let typed: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        &serde_json::to_value(&typed).unwrap(),
        value,
        "{name} does not round-trip"
    );
    typed
}

#[test]
fn every_seed_example_is_claimed_by_a_test() {
    let claimed = [
        "cognition_workflow",
        "d19_pa_speaks",
        "d3_empty_announcements",
        "d3_empty_messages",
        "d9_weather_result",
        "d9_world_patch_cooler",
        "d9_world_patch_shivers",
        "example1_initial_world",
        "example1_vending_result_dispensed",
        "example1_world_patch",
        "example2_vending_result_empty",
        "example2_world_patch",
        "example3_available_tool",
        "example3_world_patch",
        "example4_weather_turn1",
        "example4_weather_turn2",
        "example4_weather_turn3",
        "example4_world_patch",
        "example5_pa_turn1",
        "example5_pa_turn2",
        "example5_pa_turn3",
        "example6_phone_inbox",
        "example7_world_patch_ant",
        "example7_world_patch_bob",
        "source_dummy_send_text",
        "source_llm_chat_router",
        "source_toy_park_pa",
        "source_toy_park_weather",
        "source_toy_phone_inbox",
        "source_toy_vending_machine",
        "source_weather_mcp_future",
        "tool_loop_output_final_patch",
        "tool_loop_output_tool_call",
    ];
    assert_eq!(seed_names(), claimed);
}

#[test]
fn the_seeds_world_patches_parse_and_round_trip() {
    let patches = [
        ("d9_world_patch_shivers", 1),
        ("d9_world_patch_cooler", 0),
        ("example1_world_patch", 3),
        ("example2_world_patch", 1),
        ("example3_world_patch", 1),
        ("example4_world_patch", 1),
        ("example7_world_patch_bob", 2),
        ("example7_world_patch_ant", 2),
    ];
    for (name, effects) in patches {
        let value = seed(name);
        let patch: WorldPatch = round_trip(name, &value);
        assert_eq!(patch.effects.len(), effects, "{name}");
        assert_eq!(WorldPatch::from_json(&value).unwrap(), patch, "{name}");
    }
    let example1: WorldPatch = serde_json::from_value(seed("example1_world_patch")).unwrap();
    assert_eq!(
        example1.effects,
        vec![
            WorldEffect::SetEntityState {
                entity_id: "bob".into(),
                state: "holding a candy bar".into()
            },
            WorldEffect::AppendEntityMemory {
                entity_id: "bob".into(),
                content: "I bought a candy bar from the vending machine.".into()
            },
            WorldEffect::SetEntityState {
                entity_id: "vending_machine".into(),
                state: "empty".into()
            },
        ]
    );
}

#[test]
fn the_seeds_tool_loop_outputs_parse_and_round_trip() {
    let call = seed("tool_loop_output_tool_call");
    match round_trip::<ToolLoopOutput>("tool_call", &call) {
        ToolLoopOutput::ToolCall { tool_call } => {
            assert_eq!(tool_call.name, "buy_candy");
            assert_eq!(
                Value::Object(tool_call.arguments),
                json!({"actor_id": "bob", "machine_id": "vending_machine", "button": "C"})
            );
        }
        other => panic!("{other:?}"),
    }
    let (_, parsed) = ToolLoopOutput::parse(&text("seed", "tool_loop_output_tool_call")).unwrap();
    assert!(matches!(parsed, ToolLoopOutput::ToolCall { .. }));

    let final_patch = seed("tool_loop_output_final_patch");
    match round_trip::<ToolLoopOutput>("final_patch", &final_patch) {
        ToolLoopOutput::FinalPatch { patch } => {
            let patch = WorldPatch::from_json(&patch).unwrap();
            assert_eq!(patch.narration, "Bob ignores the vending machine.");
            assert!(patch.effects.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let (_, parsed) = ToolLoopOutput::parse(&text("seed", "tool_loop_output_final_patch")).unwrap();
    assert!(matches!(parsed, ToolLoopOutput::FinalPatch { .. }));
}

#[test]
fn the_seeds_source_definitions_parse_round_trip_and_check() {
    let kinds = SourceKinds::standard();
    let llm = seed("source_llm_chat_router");
    let definition: ResponseSourceDefinition = round_trip("llm", &llm);
    assert_eq!(
        ResponseSourceDefinition::from_json(&llm).unwrap(),
        definition
    );
    kinds.check(&definition).unwrap();
    let interface = LlmChatInterface::of(&definition).unwrap();
    assert_eq!(interface.model, "@chat");
    assert_eq!(interface.schema_delivery, SchemaDelivery::ResponseFormat);

    let http = [
        (
            "source_toy_vending_machine",
            "CHUKWA_TOY_VENDING_URL",
            "/buy_candy",
        ),
        (
            "source_toy_park_weather",
            "CHUKWA_TOY_WEATHER_URL",
            "/weather",
        ),
        ("source_toy_park_pa", "CHUKWA_TOY_PA_URL", "/announcement"),
        ("source_toy_phone_inbox", "CHUKWA_TOY_PHONE_URL", "/inbox"),
        ("source_dummy_send_text", "CHUKWA_TOY_PHONE_URL", "/send"),
    ];
    for (name, url_env, path) in http {
        let value = seed(name);
        let definition: ResponseSourceDefinition = round_trip(name, &value);
        kinds
            .check(&definition)
            .unwrap_or_else(|p| panic!("{name}: {p:?}"));
        let interface = HttpJsonInterface::of(&definition).unwrap();
        assert_eq!(interface.method, "POST");
        assert_eq!(interface.url_env, url_env);
        assert_eq!(interface.path, path);
        assert_eq!(interface.timeout_ms, 5000);
        assert_eq!(
            interface.url("http://127.0.0.1:9/"),
            format!("http://127.0.0.1:9{path}")
        );
    }
}

#[test]
fn the_future_mcp_source_parses_but_no_mcp_kind_runs_yet() {
    let value = seed("source_weather_mcp_future");
    let definition: ResponseSourceDefinition = round_trip("mcp", &value);
    assert_eq!(definition.kind(), "mcp_tool");
    let problems = SourceKinds::standard().check(&definition).unwrap_err();
    assert_eq!(problems[0].pointer, "/interface/name");
    assert!(
        problems[0]
            .message
            .contains("source kind \"mcp_tool\" is not available"),
        "{problems:?}"
    );
}

#[test]
fn the_seeds_source_results_are_json_objects_of_the_park_schemas() {
    use noema_world::domain::schema::CompiledSchema;
    let schema = |name: &str| CompiledSchema::compile(&common::park(name)).unwrap();
    let cases = [
        ("d9_weather_result", "weather_result.schema"),
        ("example4_weather_turn1", "weather_result.schema"),
        ("example4_weather_turn2", "weather_result.schema"),
        ("example4_weather_turn3", "weather_result.schema"),
        ("example5_pa_turn1", "pa_result.schema"),
        ("example5_pa_turn2", "pa_result.schema"),
        ("example5_pa_turn3", "pa_result.schema"),
        ("d3_empty_announcements", "pa_result.schema"),
        ("d19_pa_speaks", "pa_result.schema"),
        ("example6_phone_inbox", "phone_inbox_result.schema"),
        ("d3_empty_messages", "phone_inbox_result.schema"),
        ("example1_vending_result_dispensed", "vending_result.schema"),
        ("example2_vending_result_empty", "vending_result.schema"),
    ];
    for (example, schema_name) in cases {
        schema(schema_name)
            .check(&seed(example))
            .unwrap_or_else(|p| panic!("{example}: {p:?}"));
    }
    let arguments = seed("tool_loop_output_tool_call")["tool_call"]["arguments"].clone();
    schema("buy_candy_arguments.schema")
        .check(&arguments)
        .unwrap();
}

#[test]
fn the_seeds_workflow_parses_with_every_field_as_written() {
    let park = Park::new();
    let value = park.workflow();
    let workflow = CognitionWorkflow::from_json(&value).unwrap_or_else(|p| panic!("{p:?}"));
    assert_eq!(serde_json::to_value(&workflow).unwrap(), value);
    assert_eq!(workflow.version, 1);
    assert_eq!(workflow.execution, ExecutionMode::PerSubjectOrdered);
    let ambient: Vec<_> = workflow
        .ambient_sources
        .iter()
        .map(|b| {
            (
                b.id.as_str(),
                b.run,
                b.scope.clone(),
                b.visible_to.clone(),
                b.inject_as.as_str(),
            )
        })
        .collect();
    let park_env = || noema_world::domain::ids::HumanId::parse("park").unwrap();
    let entity = |id: &str| noema_world::domain::ids::EntityId::parse(id).unwrap();
    assert_eq!(
        ambient,
        vec![
            (
                "park_weather",
                AmbientRunMode::OncePerTurn,
                AmbientScope::Environment {
                    environment_label: park_env()
                },
                AmbientVisibility::Environment {
                    environment_label: park_env()
                },
                "/ambient/environments/park/weather"
            ),
            (
                "park_pa",
                AmbientRunMode::OncePerTurn,
                AmbientScope::Entity {
                    entity_id: entity("park_pa_speaker")
                },
                AmbientVisibility::Environment {
                    environment_label: park_env()
                },
                "/ambient/environments/park/pa"
            ),
            (
                "bob_phone_inbox",
                AmbientRunMode::BeforeSubjectWorkflow,
                AmbientScope::Entity {
                    entity_id: entity("bob_phone")
                },
                AmbientVisibility::Entity {
                    entity_id: entity("bob")
                },
                "/ambient/entities/bob/phone/inbox"
            ),
        ]
    );
    let WorkflowNode::LlmToolLoop(node) = &workflow.nodes[0];
    assert_eq!(node.id.as_str(), "act");
    assert_eq!(node.max_generation_attempts, 3);
    assert_eq!(node.max_tool_calls, 3);
    let tools: Vec<&str> = node
        .available_tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(tools, ["buy_candy", "use_drinking_fountain", "send_text"]);
    assert_eq!(workflow.apply.from, "act.final");
    assert_eq!(workflow.applied_node(), Some(node));
}

#[test]
fn the_workflow_example_with_its_placeholders_is_refused_at_each_placeholder() {
    let verbatim = seed("cognition_workflow");
    let problems = CognitionWorkflow::from_json(&verbatim).unwrap_err();
    let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/ambient_sources/0/result_schema_ref/hash",
            "/ambient_sources/0/source_ref/hash",
            "/ambient_sources/1/result_schema_ref/hash",
            "/ambient_sources/1/source_ref/hash",
            "/ambient_sources/2/result_schema_ref/hash",
            "/ambient_sources/2/source_ref/hash",
            "/nodes/0/available_tools/0/arguments_schema_ref/hash",
            "/nodes/0/available_tools/0/result_schema_ref/hash",
            "/nodes/0/available_tools/0/source_ref/hash",
            "/nodes/0/available_tools/1/arguments_schema_ref/hash",
            "/nodes/0/available_tools/1/result_schema_ref/hash",
            "/nodes/0/available_tools/1/source_ref/hash",
            "/nodes/0/available_tools/2/arguments_schema_ref/hash",
            "/nodes/0/available_tools/2/result_schema_ref/hash",
            "/nodes/0/available_tools/2/source_ref/hash",
            "/nodes/0/final_schema_ref/hash",
            "/nodes/0/llm_source_ref/hash",
        ]
    );
}

#[test]
fn the_prefixed_hash_form_is_accepted_and_hashing_is_jcs() {
    let park = Park::new();
    let mut names = BTreeMap::new();
    for (name, hash) in &park.names {
        names.insert(name.clone(), hash.content_id().to_string());
    }
    let prefixed = substitute_text(&seed("cognition_workflow"), &names);
    let workflow = CognitionWorkflow::from_json(&prefixed).unwrap_or_else(|p| panic!("{p:?}"));
    // The typed workflow writes the bare form the seed stores.
    assert_eq!(serde_json::to_value(&workflow).unwrap(), park.workflow());
    // The hash of the example is over its JCS bytes, whatever its whitespace.
    let reformatted: Value =
        serde_json::from_str(&serde_json::to_string_pretty(&park.workflow()).unwrap()).unwrap();
    assert_eq!(
        ContentHash::of_json(&reformatted).unwrap(),
        park.hash("park-workflow-hash")
    );
}

fn substitute_text(value: &Value, names: &BTreeMap<String, String>) -> Value {
    match value {
        Value::String(s) => match s.strip_prefix('<').and_then(|s| s.strip_suffix('>')) {
            Some(name) if names.contains_key(name) => Value::from(names[name].as_str()),
            _ => value.clone(),
        },
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| substitute_text(i, names)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute_text(v, names)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[tokio::test]
async fn the_example_tool_is_what_the_model_is_shown() {
    let mut park = Park::new();
    let workflow = park.workflow();
    let assembled = park.assemble_workflow(&workflow).await.unwrap();
    let (hash, _) = assembled
        .workflows
        .iter()
        .next()
        .map(|(h, w)| (h.clone(), w.clone()))
        .unwrap();
    let contract = assembled.node_contract(&hash).unwrap();
    let shown = contract.tools_available();
    let example = seed("example3_available_tool");
    assert_eq!(shown[0]["name"], example["name"]);
    assert!(shown[0]["description"].is_string());
    assert_eq!(
        shown[0]["arguments_schema"],
        common::park("buy_candy_arguments.schema")
    );
    // The example is a shown tool's name and description: both fields exist on every shown tool.
    for key in example.as_object().unwrap().keys() {
        assert!(shown[0].get(key).is_some(), "{key}");
    }
}

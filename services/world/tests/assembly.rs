//! Scenario assembly: the park assembles; every rule of the seed's "Scenario store / assembly
//! validation" list has a failing case here, and each names the offending component and path.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use common::{Park, remove, set};
use noema_core::ServiceError;
use noema_world::domain::assembly::{AssemblyError, AssemblyProblem};
use noema_world::domain::component::{ComponentKind, check_component};
use noema_world::domain::hash::ContentHash;
use noema_world::domain::source::SourceKinds;
use noema_world::domain::world::WorldState;
use noema_world::error::WorldError;
use serde_json::{Value, json};

fn problems(result: Result<impl std::fmt::Debug, AssemblyError>) -> Vec<AssemblyProblem> {
    match result {
        Err(AssemblyError::Rejected(problems)) => problems,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// The problem at `component` (hash `hash`, if given) and `pointer`, whose message holds
/// `needle`.
fn expect(
    problems: &[AssemblyProblem],
    component: ComponentKind,
    hash: Option<&ContentHash>,
    pointer: &str,
    needle: &str,
) {
    let found = problems.iter().any(|p| {
        p.component == component
            && (hash.is_none() || p.hash.as_ref() == hash)
            && p.pointer == pointer
            && p.message.contains(needle)
    });
    assert!(
        found,
        "no problem at {component} {pointer} containing {needle:?}; got:\n{}",
        problems
            .iter()
            .map(|p| format!("  {p}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Assembles the park with the seed's workflow changed by `edit`; returns the problems and
/// the edited workflow's hash.
async fn with_workflow(edit: impl FnOnce(&mut Value)) -> (Vec<AssemblyProblem>, ContentHash) {
    let mut park = Park::new();
    let mut workflow = park.workflow();
    edit(&mut workflow);
    let hash = ContentHash::of_json(&workflow).unwrap();
    (problems(park.assemble_workflow(&workflow).await), hash)
}

async fn workflow_rejected(edit: impl FnOnce(&mut Value), pointer: &str, needle: &str) {
    let (problems, hash) = with_workflow(edit).await;
    expect(
        &problems,
        ComponentKind::CognitionWorkflow,
        Some(&hash),
        pointer,
        needle,
    );
}

#[tokio::test]
async fn the_park_assembles_from_the_seeds_workflow() {
    let park = Park::new();
    let assembled = park.assemble(&park.scenario()).await.unwrap();
    assert_eq!(
        assembled.scenario_hash,
        ContentHash::of_json(&park.scenario()).unwrap()
    );
    assert_eq!(assembled.profiles.len(), 1);
    assert_eq!(assembled.workflows.len(), 1);
    assert_eq!(assembled.sources.len(), 7);
    // Eight distinct schemas plus the WorldPatch schema, each compiled.
    assert_eq!(assembled.schemas.len(), 10);
    let world: WorldState = assembled.initial_world();
    let subjects: Vec<&str> = world.subjects().map(|(id, _)| id.as_str()).collect();
    assert_eq!(subjects, ["ant", "bob"]);
    for (_, entity) in world.subjects() {
        let (hash, _) = assembled.workflow_of(entity).unwrap();
        assert_eq!(hash, &park.hash("park-workflow-hash"));
    }
    assert_eq!(world.entity("bob").unwrap().memory.as_deref(), Some(""));
    assert_eq!(world.entity("ant").unwrap().memory.as_deref(), Some(""));
    assert_eq!(world.entity("vending_machine").unwrap().memory, None);
}

#[tokio::test]
async fn assembly_reads_only_the_components_it_references() {
    let park = Park::new();
    park.assemble(&park.scenario()).await.unwrap();
    let asked = park.lookup.asked.lock().unwrap().clone();
    // One profile, one workflow, seven sources, ten schemas; each asked once.
    assert_eq!(asked.len(), 19, "{asked:?}");
    let mut distinct = asked.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), asked.len());
}

#[tokio::test]
async fn the_simple_llm_only_workflow_assembles() {
    let mut park = Park::new();
    let simple = common::substitute(&common::park("simple_workflow"), &park.names);
    let assembled = park.assemble_workflow(&simple).await.unwrap();
    assert_eq!(assembled.sources.len(), 1);
    let (hash, _) = assembled.workflows.iter().next().unwrap();
    let contract = assembled.node_contract(hash).unwrap();
    assert!(contract.tools.is_empty());
}

// --- A1: no scenario without an explicit workflow -----------------------------------------

#[tokio::test]
async fn an_agent_without_a_cognition_profile_is_refused() {
    let park = Park::new();
    let mut scenario = park.scenario();
    remove(&mut scenario, "/entities/1/cognition_profile_ref");
    let problems = problems(park.assemble(&scenario).await);
    expect(
        &problems,
        ComponentKind::Scenario,
        None,
        "/entities/1/cognition_profile_ref",
        "an agent must reference a cognition profile",
    );
}

#[tokio::test]
async fn a_scenario_with_no_agent_is_refused() {
    let park = Park::new();
    let mut scenario = park.scenario();
    scenario["entities"] =
        json!([{"id": "rock", "kind": "prop", "environment_label": "park", "state": "grey"}]);
    let problems = problems(park.assemble(&scenario).await);
    expect(
        &problems,
        ComponentKind::Scenario,
        None,
        "/entities",
        "at least one agent",
    );
}

#[tokio::test]
async fn a_prop_with_a_profile_or_memory_is_refused() {
    let park = Park::new();
    let mut scenario = park.scenario();
    let profile = park.hash("park-profile-hash");
    set(
        &mut scenario,
        "/entities/2",
        json!({"id": "bob_phone", "kind": "prop", "environment_label": "park",
        "state": "in Bob's pocket", "memory": "x", "cognition_profile_ref": {"hash": profile.as_str()}}),
    );
    let problems = problems(park.assemble(&scenario).await);
    expect(
        &problems,
        ComponentKind::Scenario,
        None,
        "/entities/2/cognition_profile_ref",
        "a prop has no cognition",
    );
    expect(
        &problems,
        ComponentKind::Scenario,
        None,
        "/entities/2/memory",
        "a prop has no memory",
    );
}

#[tokio::test]
async fn scenario_structure_is_checked() {
    let park = Park::new();
    let mut scenario = park.scenario();
    set(&mut scenario, "/entities/3/id", json!("bob"));
    set(
        &mut scenario,
        "/entities/4/environment_label",
        json!("moon"),
    );
    scenario["environments"]
        .as_array_mut()
        .unwrap()
        .push(json!({"label": "park", "content": "again"}));
    set(
        &mut scenario,
        "/simulation/start",
        json!("tomorrow morning"),
    );
    let found = problems(park.assemble(&scenario).await);
    expect(
        &found,
        ComponentKind::Scenario,
        None,
        "/simulation/start",
        "date-time",
    );
    let mut scenario = park.scenario();
    set(&mut scenario, "/entities/3/id", json!("bob"));
    set(
        &mut scenario,
        "/entities/4/environment_label",
        json!("moon"),
    );
    scenario["environments"]
        .as_array_mut()
        .unwrap()
        .push(json!({"label": "park", "content": "again"}));
    let found = problems(park.assemble(&scenario).await);
    expect(
        &found,
        ComponentKind::Scenario,
        None,
        "/entities/3/id",
        "duplicate entity id \"bob\"",
    );
    expect(
        &found,
        ComponentKind::Scenario,
        None,
        "/entities/4/environment_label",
        "environment \"moon\" is not in this scenario",
    );
    expect(
        &found,
        ComponentKind::Scenario,
        None,
        "/environments/1/label",
        "duplicate environment label",
    );
    let mut scenario = park.scenario();
    set(&mut scenario, "/entities/0/id", json!("Ant"));
    let found = problems(park.assemble(&scenario).await);
    expect(
        &found,
        ComponentKind::Scenario,
        None,
        "/entities/0/id",
        "does not match",
    );
}

#[tokio::test]
async fn every_cognition_profile_resolves_and_has_a_workflow_hash() {
    let mut park = Park::new();
    // The profile hash does not resolve.
    let mut scenario = park.scenario();
    let missing = ContentHash::of_json(&json!("no such profile")).unwrap();
    set(
        &mut scenario,
        "/entities/1/cognition_profile_ref/hash",
        json!(missing.as_str()),
    );
    let problems_found = problems(park.assemble(&scenario).await);
    expect(
        &problems_found,
        ComponentKind::Scenario,
        None,
        "/entities/1/cognition_profile_ref/hash",
        "does not exist",
    );

    // A profile without a workflow hash, and a profile carrying the old component fields.
    for (profile, pointer, needle) in [
        (json!({}), "/workflow_ref", "is required"),
        (
            json!({"workflow_ref": {"hash": park.hash("park-workflow-hash").as_str()}, "adjudication_retry_budget": 2}),
            "/adjudication_retry_budget",
            "is not allowed here",
        ),
    ] {
        let profile_hash = park.name("odd-profile", ComponentKind::CognitionProfile, &profile);
        let mut scenario = park.scenario();
        set(
            &mut scenario,
            "/entities/1/cognition_profile_ref/hash",
            json!(profile_hash.as_str()),
        );
        let found = problems(park.assemble(&scenario).await);
        expect(
            &found,
            ComponentKind::CognitionProfile,
            Some(&profile_hash),
            pointer,
            needle,
        );
    }
}

#[tokio::test]
async fn the_workflow_hash_resolves() {
    let mut park = Park::new();
    let missing = ContentHash::of_json(&json!("no such workflow")).unwrap();
    let profile = json!({"workflow_ref": {"hash": missing.as_str()}});
    let profile_hash = park.name(
        "dangling-profile",
        ComponentKind::CognitionProfile,
        &profile,
    );
    let mut scenario = park.scenario();
    set(
        &mut scenario,
        "/entities/0/cognition_profile_ref/hash",
        json!(profile_hash.as_str()),
    );
    let found = problems(park.assemble(&scenario).await);
    expect(
        &found,
        ComponentKind::CognitionProfile,
        Some(&profile_hash),
        "/workflow_ref/hash",
        "cognition_workflow",
    );
    expect(
        &found,
        ComponentKind::CognitionProfile,
        Some(&profile_hash),
        "/workflow_ref/hash",
        "does not exist",
    );
}

#[tokio::test]
async fn the_workflow_parses() {
    let mut park = Park::new();
    for (document, pointer, needle) in [
        (
            json!(["not", "an", "object"]),
            "",
            "is not of type \"object\"",
        ),
        (json!({}), "/nodes", "is required"),
    ] {
        let hash = ContentHash::of_json(&document).unwrap();
        let found = problems(park.assemble_workflow(&document).await);
        expect(
            &found,
            ComponentKind::CognitionWorkflow,
            Some(&hash),
            pointer,
            needle,
        );
    }
}

#[tokio::test]
async fn version_and_execution_are_supported_values() {
    workflow_rejected(|w| w["version"] = json!(2), "/version", "1 was expected").await;
    workflow_rejected(
        |w| w["execution"] = json!("all_at_once"),
        "/execution",
        "is not one of",
    )
    .await;
}

#[tokio::test]
async fn node_and_ambient_source_ids_are_unique() {
    workflow_rejected(
        |w| {
            let node = w["nodes"][0].clone();
            w["nodes"].as_array_mut().unwrap().push(node);
        },
        "/nodes/1/id",
        "duplicate node id \"act\"",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/ambient_sources/2/id", json!("park_weather")),
        "/ambient_sources/2/id",
        "duplicate ambient source id \"park_weather\" (also /ambient_sources/0/id)",
    )
    .await;
}

#[tokio::test]
async fn source_refs_resolve() {
    let nowhere = ContentHash::of_json(&json!("nowhere")).unwrap();
    for pointer in [
        "/ambient_sources/0/source_ref/hash",
        "/nodes/0/llm_source_ref/hash",
        "/nodes/0/available_tools/1/source_ref/hash",
    ] {
        workflow_rejected(
            |w| set(w, pointer, json!(nowhere.as_str())),
            pointer,
            "response_source",
        )
        .await;
        workflow_rejected(
            |w| set(w, pointer, json!(nowhere.as_str())),
            pointer,
            "does not exist",
        )
        .await;
    }
}

#[tokio::test]
async fn schema_refs_resolve() {
    let nowhere = ContentHash::of_json(&json!("no schema")).unwrap();
    for pointer in [
        "/ambient_sources/1/result_schema_ref/hash",
        "/nodes/0/available_tools/0/arguments_schema_ref/hash",
        "/nodes/0/available_tools/2/result_schema_ref/hash",
        "/nodes/0/final_schema_ref/hash",
    ] {
        workflow_rejected(
            |w| set(w, pointer, json!(nowhere.as_str())),
            pointer,
            "json_schema",
        )
        .await;
    }
}

#[tokio::test]
async fn every_ambient_source_field_is_required() {
    for field in [
        "id",
        "source_ref",
        "run",
        "scope",
        "visible_to",
        "request_template",
        "inject_as",
    ] {
        let pointer = format!("/ambient_sources/1/{field}");
        workflow_rejected(|w| remove(w, &pointer), &pointer, "is required").await;
    }
    // result_schema_ref is the one optional field.
    let mut park = Park::new();
    let mut workflow = park.workflow();
    remove(&mut workflow, "/ambient_sources/1/result_schema_ref");
    park.assemble_workflow(&workflow).await.unwrap();
}

#[tokio::test]
async fn ambient_run_modes_scopes_and_visibilities_are_valid() {
    workflow_rejected(
        |w| set(w, "/ambient_sources/0/run", json!("hourly")),
        "/ambient_sources/0/run",
        "is not one of",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/ambient_sources/0/scope", json!({"planet": "mars"})),
        "/ambient_sources/0/scope",
        "allowed forms",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/ambient_sources/0/visible_to", json!("everyone")),
        "/ambient_sources/0/visible_to",
        "allowed forms",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/ambient_sources/0/scope", json!("acting_subject")),
        "/ambient_sources/0/scope",
        "needs run before_subject_workflow",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/ambient_sources/1/visible_to", json!("acting_subject")),
        "/ambient_sources/1/visible_to",
        "needs run before_subject_workflow",
    )
    .await;
    // Scopes and visibilities name things of this scenario.
    workflow_rejected(
        |w| {
            set(
                w,
                "/ambient_sources/1/scope",
                json!({"entity_id": "church_bell"}),
            )
        },
        "/ambient_sources/1/scope/entity_id",
        "has no entity \"church_bell\"",
    )
    .await;
    workflow_rejected(
        |w| {
            set(
                w,
                "/ambient_sources/0/visible_to",
                json!({"environment_label": "beach"}),
            )
        },
        "/ambient_sources/0/visible_to/environment_label",
        "has no environment \"beach\"",
    )
    .await;
    // The word forms are accepted where they make sense.
    let mut park = Park::new();
    let mut workflow = park.workflow();
    set(&mut workflow, "/ambient_sources/0/scope", json!("world"));
    set(
        &mut workflow,
        "/ambient_sources/0/visible_to",
        json!("all_subjects"),
    );
    set(
        &mut workflow,
        "/ambient_sources/2/scope",
        json!("acting_subject"),
    );
    set(
        &mut workflow,
        "/ambient_sources/2/visible_to",
        json!("acting_subject"),
    );
    park.assemble_workflow(&workflow).await.unwrap();
}

#[tokio::test]
async fn templates_and_injection_points_are_checked() {
    workflow_rejected(
        |w| {
            set(
                w,
                "/ambient_sources/0/request_template/turn",
                json!({"$from": "/subject/entity_id"}),
            )
        },
        "/ambient_sources/0/request_template/turn/$from",
        "once_per_turn",
    )
    .await;
    workflow_rejected(
        |w| {
            set(
                w,
                "/ambient_sources/2/request_template/turn",
                json!({"$from": "/world/turn"}),
            )
        },
        "/ambient_sources/2/request_template/turn/$from",
        "has no field \"turn\"",
    )
    .await;
    workflow_rejected(
        |w| {
            set(
                w,
                "/ambient_sources/1/inject_as",
                json!("/ambient/environments/park"),
            )
        },
        "/ambient_sources/1/inject_as",
        "overlaps /ambient_sources/0/inject_as",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/ambient_sources/1/inject_as", json!("/context/pa")),
        "/ambient_sources/1/inject_as",
        "does not match",
    )
    .await;
}

#[tokio::test]
async fn llm_tool_loop_limits_are_required_and_bounded() {
    for field in ["max_generation_attempts", "max_tool_calls"] {
        let pointer = format!("/nodes/0/{field}");
        workflow_rejected(|w| remove(w, &pointer), &pointer, "is required").await;
    }
    workflow_rejected(
        |w| set(w, "/nodes/0/max_generation_attempts", json!(0)),
        "/nodes/0/max_generation_attempts",
        "minimum",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/nodes/0/max_tool_calls", json!(-1)),
        "/nodes/0/max_tool_calls",
        "minimum",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/nodes/0/max_tool_calls", json!(1.5)),
        "/nodes/0/max_tool_calls",
        "integer",
    )
    .await;
    // Zero tool calls is a valid limit.
    let mut park = Park::new();
    let mut workflow = park.workflow();
    set(&mut workflow, "/nodes/0/max_tool_calls", json!(0));
    park.assemble_workflow(&workflow).await.unwrap();
}

#[tokio::test]
async fn every_tool_has_its_fields_and_a_unique_name() {
    for field in ["name", "description", "source_ref", "arguments_schema_ref"] {
        let pointer = format!("/nodes/0/available_tools/1/{field}");
        workflow_rejected(|w| remove(w, &pointer), &pointer, "is required").await;
    }
    workflow_rejected(
        |w| set(w, "/nodes/0/available_tools/2/name", json!("buy_candy")),
        "/nodes/0/available_tools/2/name",
        "duplicate tool name \"buy_candy\"",
    )
    .await;
    // A tool's arguments are an object.
    let mut park = Park::new();
    let string_schema = json!({"type": "string"});
    let hash = park.name("string-schema", ComponentKind::JsonSchema, &string_schema);
    let mut workflow = park.workflow();
    set(
        &mut workflow,
        "/nodes/0/available_tools/0/arguments_schema_ref/hash",
        json!(hash.as_str()),
    );
    let workflow_hash = ContentHash::of_json(&workflow).unwrap();
    let found = problems(park.assemble_workflow(&workflow).await);
    expect(
        &found,
        ComponentKind::CognitionWorkflow,
        Some(&workflow_hash),
        "/nodes/0/available_tools/0/arguments_schema_ref/hash",
        "excludes objects",
    );
}

#[tokio::test]
async fn the_final_schema_is_the_world_patch_schema() {
    let mut park = Park::new();
    // The shape the old path used: a schema the kernel could not apply.
    let old_shape = json!({"type": "object", "required": ["narration", "agent_state_after"],
        "properties": {"narration": {"type": "string"}, "agent_state_after": {"type": "string"}}});
    let hash = park.name("old-shape", ComponentKind::JsonSchema, &old_shape);
    let mut workflow = park.workflow();
    set(
        &mut workflow,
        "/nodes/0/final_schema_ref/hash",
        json!(hash.as_str()),
    );
    let workflow_hash = ContentHash::of_json(&workflow).unwrap();
    let found = problems(park.assemble_workflow(&workflow).await);
    expect(
        &found,
        ComponentKind::CognitionWorkflow,
        Some(&workflow_hash),
        "/nodes/0/final_schema_ref/hash",
        "must be the WorldPatch schema",
    );

    // An annotated copy is structurally equivalent and accepted.
    let mut annotated = noema_world::domain::schema::Builtin::WorldPatch
        .schema()
        .unwrap()
        .document()
        .clone();
    annotated["title"] = json!("Our patch");
    annotated["properties"]["narration"]["description"] = json!("What happened, in prose.");
    let hash = park.name("annotated", ComponentKind::JsonSchema, &annotated);
    let mut workflow = park.workflow();
    set(
        &mut workflow,
        "/nodes/0/final_schema_ref/hash",
        json!(hash.as_str()),
    );
    park.assemble_workflow(&workflow).await.unwrap();
}

#[tokio::test]
async fn apply_from_references_a_nodes_final_output() {
    workflow_rejected(
        |w| set(w, "/apply/from", json!("think.final")),
        "/apply/from",
        "names node \"think\"",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/apply/from", json!("act")),
        "/apply/from",
        "does not match",
    )
    .await;
    workflow_rejected(
        |w| {
            let mut node = w["nodes"][0].clone();
            node["id"] = json!("plan");
            w["nodes"].as_array_mut().unwrap().push(node);
        },
        "/nodes/1",
        "never executed",
    )
    .await;
}

#[tokio::test]
async fn sources_are_bound_in_a_role_their_kind_plays() {
    let park = Park::new();
    let vending = park.hash("http-vending-source-hash");
    let llm = park.hash("llm-source-hash");
    workflow_rejected(
        |w| set(w, "/nodes/0/llm_source_ref/hash", json!(vending.as_str())),
        "/nodes/0/llm_source_ref/hash",
        "needs an LLM chat source",
    )
    .await;
    workflow_rejected(
        |w| set(w, "/ambient_sources/0/source_ref/hash", json!(llm.as_str())),
        "/ambient_sources/0/source_ref/hash",
        "needs a JSON source",
    )
    .await;
}

#[tokio::test]
async fn a_source_of_an_unavailable_kind_is_refused_inside_the_source() {
    let mut park = Park::new();
    let mcp = park.name(
        "mcp",
        ComponentKind::ResponseSource,
        &common::seed("source_weather_mcp_future"),
    );
    let mut workflow = park.workflow();
    set(
        &mut workflow,
        "/ambient_sources/0/source_ref/hash",
        json!(mcp.as_str()),
    );
    let found = problems(park.assemble_workflow(&workflow).await);
    expect(
        &found,
        ComponentKind::ResponseSource,
        Some(&mcp),
        "/interface/name",
        "\"mcp_tool\" is not available",
    );
}

#[tokio::test]
async fn a_stored_schema_that_is_no_json_schema_is_refused_inside_the_schema() {
    let mut park = Park::new();
    let broken = json!({"type": "objekt"});
    let hash = park.name("broken", ComponentKind::JsonSchema, &broken);
    let mut workflow = park.workflow();
    set(
        &mut workflow,
        "/ambient_sources/0/result_schema_ref/hash",
        json!(hash.as_str()),
    );
    let found = problems(park.assemble_workflow(&workflow).await);
    expect(
        &found,
        ComponentKind::JsonSchema,
        Some(&hash),
        "/type",
        "not a valid JSON Schema",
    );
}

#[tokio::test]
async fn a_problem_in_a_shared_component_is_reported_once() {
    let (found, hash) = with_workflow(|w| set(w, "/nodes/0/max_tool_calls", json!(-3))).await;
    // Two agents use the workflow; its problem is listed once.
    let count = found
        .iter()
        .filter(|p| p.hash.as_ref() == Some(&hash))
        .count();
    assert_eq!(count, 1, "{found:?}");
}

#[tokio::test]
async fn the_error_names_the_path_for_callers() {
    let (found, hash) = with_workflow(|w| remove(w, "/nodes/0/max_tool_calls")).await;
    let error = WorldError::from(AssemblyError::Rejected(found));
    assert_eq!(error.code(), noema_core::ErrorCode::FailedPrecondition);
    assert_eq!(
        error.metadata(),
        vec![(
            "path",
            format!("cognition_workflow:{hash}/nodes/0/max_tool_calls")
        )]
    );
    assert!(
        error
            .to_string()
            .contains("/nodes/0/max_tool_calls: is required"),
        "{error}"
    );
    let status = noema_core::to_status(&error);
    let failure = noema_core::Failure::from_status(&status);
    assert_eq!(
        failure.metadata.get("path"),
        Some(&format!("cognition_workflow:{hash}/nodes/0/max_tool_calls"))
    );
}

#[test]
fn the_component_kinds_are_the_new_ones_only() {
    let kinds: Vec<&str> = ComponentKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "json_schema",
            "response_source",
            "cognition_workflow",
            "cognition_profile",
            "scenario"
        ]
    );
}

#[test]
fn component_puts_check_each_kind_on_its_own() {
    let park = Park::new();
    let kinds = SourceKinds::standard();
    let ok = [
        (
            ComponentKind::JsonSchema,
            common::park("weather_result.schema"),
        ),
        (
            ComponentKind::ResponseSource,
            common::seed("source_toy_park_weather"),
        ),
        (ComponentKind::CognitionWorkflow, park.workflow()),
        (
            ComponentKind::CognitionProfile,
            json!({"workflow_ref": {"hash": park.hash("park-workflow-hash").as_str()}}),
        ),
        (ComponentKind::Scenario, park.scenario()),
    ];
    for (kind, document) in ok {
        let hash =
            check_component(kind, &document, &kinds).unwrap_or_else(|p| panic!("{kind}: {p:?}"));
        assert_eq!(hash, ContentHash::of_json(&document).unwrap());
    }
    let bad = [
        (ComponentKind::JsonSchema, json!({"type": 7}), "/type"),
        (
            ComponentKind::ResponseSource,
            json!({"version": 1, "label": "x", "interface": {"name": "http_json", "method": "GET", "url_env": "X", "path": "/", "timeout_ms": 5}}),
            "/interface/method",
        ),
        (
            ComponentKind::CognitionWorkflow,
            json!({"version": 1}),
            "/apply",
        ),
        (
            ComponentKind::CognitionProfile,
            json!({"workflow_ref": {"hash": "abc"}}),
            "/workflow_ref/hash",
        ),
        (
            ComponentKind::Scenario,
            json!({"label": "x", "environments": [], "entities": []}),
            "/entities",
        ),
    ];
    for (kind, document, pointer) in bad {
        let problems = check_component(kind, &document, &kinds).unwrap_err();
        assert!(
            problems.iter().any(|p| p.pointer == pointer),
            "{kind}: {problems:?}"
        );
        let error = WorldError::InvalidComponent { kind, problems };
        assert_eq!(error.code(), noema_core::ErrorCode::InvalidArgument);
    }
}

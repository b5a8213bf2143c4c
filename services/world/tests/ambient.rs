//! Ambient context: which bindings run when, the seed's request templates rendered over the
//! turn context, who sees which result, and where results land. Results are context only.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use common::{Park, seed, set};
use noema_world::domain::ambient::{AmbientResult, BindingKey, plan_turn, subject_ambient};
use noema_world::domain::assembly::AssembledScenario;
use noema_world::domain::ids::{EntityId, HumanId};
use noema_world::domain::workflow::template::{TurnFacts, render_template, template_context};
use serde_json::{Value, json};

fn id(text: &str) -> EntityId {
    EntityId::parse(text).unwrap()
}

async fn park() -> (Park, AssembledScenario) {
    let park = Park::new();
    let assembled = park.assemble(&park.scenario()).await.unwrap();
    (park, assembled)
}

fn facts(assembled: &AssembledScenario, turn: u64) -> TurnFacts {
    TurnFacts {
        world_slug: HumanId::parse("park-demo").unwrap(),
        attempted_turn: turn,
        simulation_time: assembled.scenario.clock().time_of_turn(turn),
    }
}

#[tokio::test]
async fn the_turn_plan_runs_per_turn_sources_once_and_the_phone_before_bob() {
    let (park, assembled) = park().await;
    let world = assembled.initial_world();
    let plan = plan_turn(&world, |_, entity| assembled.workflow_of(entity)).unwrap();
    let workflow_hash = park.hash("park-workflow-hash");
    let key = |i| BindingKey {
        workflow_hash: workflow_hash.clone(),
        binding_index: i,
    };
    assert_eq!(plan.once_per_turn, vec![key(0), key(1)]);
    let subjects: Vec<(&str, Vec<BindingKey>)> = plan
        .subjects
        .iter()
        .map(|s| (s.entity_id.as_str(), s.before_subject.clone()))
        .collect();
    // The ant runs first (entity-id order) and has no phone; Bob's inbox runs before Bob.
    assert_eq!(subjects, vec![("ant", vec![]), ("bob", vec![key(2)])]);
}

#[tokio::test]
async fn the_seeds_request_templates_render_from_the_turn_context() {
    let (_, assembled) = park().await;
    let workflow = assembled.workflows.values().next().unwrap();
    let world = assembled.initial_world();
    let context = template_context(&facts(&assembled, 2), None);
    let weather = render_template(&workflow.ambient_sources[0].request_template, &context).unwrap();
    assert_eq!(
        weather,
        json!({"environment_label": "park", "turn": 2, "simulation_time": "2026-01-01T08:10:00Z"})
    );
    let pa = render_template(&workflow.ambient_sources[1].request_template, &context).unwrap();
    assert_eq!(pa, json!({"speaker_id": "park_pa_speaker", "turn": 2}));
    let subject = world.subject_facts("bob").unwrap();
    let context = template_context(&facts(&assembled, 3), Some(&subject));
    let inbox = render_template(&workflow.ambient_sources[2].request_template, &context).unwrap();
    assert_eq!(
        inbox,
        json!({"owner_entity_id": "bob", "phone_entity_id": "bob_phone", "turn": 3})
    );
}

#[tokio::test]
async fn a_template_path_that_is_missing_at_run_time_fails_loudly() {
    let mut park = Park::new();
    let mut workflow = park.workflow();
    workflow["ambient_sources"][2]["request_template"]["owner_state"] =
        json!({"$from": "/subject/memory"});
    let assembled = park.assemble_workflow(&workflow).await.unwrap();
    let binding = &assembled.workflows.values().next().unwrap().ambient_sources[2];
    // A subject without a memory field (a prop's facts): the reference does not resolve.
    let world = assembled.initial_world();
    let prop_facts = world.subject_facts("bob_phone").unwrap();
    let context = template_context(&facts(&assembled, 1), Some(&prop_facts));
    let err = render_template(&binding.request_template, &context).unwrap_err();
    assert_eq!(err.template_pointer, "/owner_state");
    assert!(
        err.to_string()
            .contains("\"/subject/memory\" does not resolve"),
        "{err}"
    );
}

fn results(assembled: &AssembledScenario, turn: usize) -> (Vec<AmbientResult>, Vec<AmbientResult>) {
    let workflow_hash = assembled.workflows.keys().next().unwrap().clone();
    let key = |i| BindingKey {
        workflow_hash: workflow_hash.clone(),
        binding_index: i,
    };
    let weather = [
        "example4_weather_turn1",
        "example4_weather_turn2",
        "example4_weather_turn3",
    ];
    let pa = [
        "example5_pa_turn1",
        "example5_pa_turn2",
        "example5_pa_turn3",
    ];
    let turn_results = vec![
        AmbientResult {
            key: key(0),
            value: seed(weather[turn - 1]),
        },
        AmbientResult {
            key: key(1),
            value: seed(pa[turn - 1]),
        },
    ];
    let bob_results = vec![AmbientResult {
        key: key(2),
        value: seed("example6_phone_inbox"),
    }];
    (turn_results, bob_results)
}

#[tokio::test]
async fn subjects_see_what_is_visible_to_them_at_its_injection_point() {
    let (_, assembled) = park().await;
    let world = assembled.initial_world();
    let (hash, workflow) = assembled.workflows.iter().next().unwrap();
    let (turn_results, bob_results) = results(&assembled, 2);
    let bob = subject_ambient(
        hash,
        workflow,
        &id("bob"),
        world.entity("bob").unwrap(),
        &turn_results,
        &bob_results,
    )
    .unwrap();
    assert_eq!(
        bob,
        json!({
            "environments": {"park": {"weather": seed("example4_weather_turn2"), "pa": seed("example5_pa_turn2")}},
            "entities": {"bob": {"phone": {"inbox": seed("example6_phone_inbox")}}}
        })
    );
    let ant = subject_ambient(
        hash,
        workflow,
        &id("ant"),
        world.entity("ant").unwrap(),
        &turn_results,
        &[],
    )
    .unwrap();
    assert_eq!(ant["environments"]["park"]["pa"], seed("example5_pa_turn2"));
    assert!(
        ant.get("entities").is_none(),
        "the ant does not see Bob's phone: {ant}"
    );

    // A subject elsewhere sees nothing that is visible to the park.
    let mut elsewhere = world.entity("ant").unwrap().clone();
    elsewhere.environment_label = HumanId::parse("kitchen").unwrap();
    let none = subject_ambient(hash, workflow, &id("ant"), &elsewhere, &turn_results, &[]).unwrap();
    assert_eq!(none, json!({}));
}

#[tokio::test]
async fn weather_cools_and_the_pa_sometimes_speaks_in_the_context_over_turns() {
    let (_, assembled) = park().await;
    let world = assembled.initial_world();
    let (hash, workflow) = assembled.workflows.iter().next().unwrap();
    let mut temperatures = Vec::new();
    let mut announcements = Vec::new();
    for turn in 1..=3 {
        let (turn_results, _) = results(&assembled, turn);
        let seen = subject_ambient(
            hash,
            workflow,
            &id("bob"),
            world.entity("bob").unwrap(),
            &turn_results,
            &[],
        )
        .unwrap();
        temperatures.push(
            seen["environments"]["park"]["weather"]["temperature_f"]
                .as_i64()
                .unwrap(),
        );
        announcements.push(
            seen["environments"]["park"]["pa"]["announcements"]
                .as_array()
                .unwrap()
                .len(),
        );
    }
    assert_eq!(temperatures, [72, 64, 55]);
    // Empty announcements are injected too: an empty result is a result.
    assert_eq!(announcements, [0, 1, 0]);
    // The context is all that changed: the world is untouched by ambient results.
    assert_eq!(world, assembled.initial_world());
}

#[tokio::test]
async fn subjects_of_different_workflows_see_only_their_own_workflows_results() {
    let mut park = Park::new();
    let park_workflow = park.workflow();
    let mut other = park.workflow();
    set(&mut other, "/ambient_sources/0/id", json!("other_weather"));
    let other_hash = park.name(
        "other-workflow",
        noema_world::domain::component::ComponentKind::CognitionWorkflow,
        &other,
    );
    let other_profile = json!({"workflow_ref": {"hash": other_hash.as_str()}});
    let other_profile_hash = park.name(
        "other-profile",
        noema_world::domain::component::ComponentKind::CognitionProfile,
        &other_profile,
    );
    let mut scenario = park.scenario_with_workflow(&park_workflow);
    set(
        &mut scenario,
        "/entities/0/cognition_profile_ref/hash",
        json!(other_profile_hash.as_str()),
    );
    let assembled = park.assemble(&scenario).await.unwrap();
    assert_eq!(assembled.workflows.len(), 2);
    let world = assembled.initial_world();
    let plan = plan_turn(&world, |_, e| assembled.workflow_of(e)).unwrap();
    // Each workflow's per-turn bindings run once: two workflows, two bindings each.
    assert_eq!(plan.once_per_turn.len(), 4);
    assert_eq!(
        plan.once_per_turn[0].workflow_hash, other_hash,
        "the ant's workflow comes first"
    );
    let (ant_hash, ant_workflow) = assembled.workflow_of(world.entity("ant").unwrap()).unwrap();
    let bob_result = AmbientResult {
        key: plan.once_per_turn[2].clone(),
        value: seed("example4_weather_turn3"),
    };
    let seen = subject_ambient(
        ant_hash,
        ant_workflow,
        &id("ant"),
        world.entity("ant").unwrap(),
        &[bob_result],
        &[],
    )
    .unwrap();
    assert_eq!(seen, json!({}));
}

#[tokio::test]
async fn an_agent_without_a_workflow_cannot_be_planned() {
    let (_, assembled) = park().await;
    let mut world = assembled.initial_world();
    world.entities.get_mut("bob").unwrap().cognition_profile_ref = None;
    let problem = plan_turn(&world, |_, e| assembled.workflow_of(e)).unwrap_err();
    assert!(
        problem.message.contains("\"bob\" has no workflow"),
        "{problem}"
    );
}

#[test]
fn injection_builds_the_path_and_refuses_to_run_through_values() {
    use noema_world::domain::ambient::inject;
    let mut root = json!({});
    inject(
        &mut root,
        "/ambient/entities/bob/phone/inbox",
        json!({"messages": []}),
    )
    .unwrap();
    inject(&mut root, "/ambient/entities/bob/mood", json!("calm")).unwrap();
    assert_eq!(
        root,
        json!({"ambient": {"entities": {"bob": {"phone": {"inbox": {"messages": []}}, "mood": "calm"}}}})
    );
    assert!(inject(&mut root, "/ambient/entities/bob/mood/level", json!(1)).is_err());
    assert!(inject(&mut root, "ambient", Value::Null).is_err());
}

//! WorldPatch validation against the live working world, provisional application, several
//! patches per turn with `patch_seq` and per-patch `state_before`, the turn diff, and the
//! tamper-evident turn chain.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use common::{Park, seed};
use noema_world::domain::hash::ContentHash;
use noema_world::domain::ids::{EntityId, HumanId};
use noema_world::domain::patch::WorldPatch;
use noema_world::domain::scenario::{DEFAULT_SIMULATION_START, Scenario, SimulationClock};
use noema_world::domain::turn::{
    ChainBreak, EffectField, StoredTurn, TurnRecord, WorkingTurn, verify_chain,
};
use noema_world::domain::workflow::template::format_time;
use noema_world::domain::world::WorldState;
use serde_json::{Value, json};

fn id(text: &str) -> EntityId {
    EntityId::parse(text).unwrap()
}

fn patch(value: Value) -> WorldPatch {
    WorldPatch::from_json(&value).unwrap_or_else(|p| panic!("{p:?}"))
}

/// The park at turn 0.
fn park_world() -> WorldState {
    let scenario = Scenario::from_json(&Park::new().scenario()).unwrap();
    WorldState::from_scenario(&scenario)
}

/// Example 1's conceptual initial world as a scenario: Bob (who has a memory, so an agent)
/// and the vending machine.
fn example1_world() -> WorldState {
    let initial = seed("example1_initial_world");
    let profile = ContentHash::of_json(&json!("any profile")).unwrap();
    let entities: Vec<Value> = initial["entities"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, entity)| {
            let mut e = json!({"id": id, "environment_label": "park", "state": entity["state"]});
            if let Some(memory) = entity.get("memory") {
                e["kind"] = json!("agent");
                e["memory"] = memory.clone();
                e["cognition_profile_ref"] = json!({"hash": profile.as_str()});
            } else {
                e["kind"] = json!("prop");
            }
            e
        })
        .collect();
    let scenario = json!({"label": "example1", "environments": [{"label": "park", "content": "A park."}], "entities": entities});
    WorldState::from_scenario(&Scenario::from_json(&scenario).unwrap())
}

#[test]
fn example_1_the_patch_buys_the_candy_and_empties_the_machine() {
    let mut turn = WorkingTurn::begin(example1_world(), 1);
    let applied = turn
        .accept(&id("bob"), patch(seed("example1_world_patch")))
        .unwrap()
        .clone();
    assert_eq!(applied.patch_seq, 1);
    let world = turn.world();
    assert_eq!(world.entity("bob").unwrap().state, "holding a candy bar");
    assert_eq!(
        world.entity("bob").unwrap().memory.as_deref(),
        Some("I bought a candy bar from the vending machine.")
    );
    assert_eq!(world.entity("vending_machine").unwrap().state, "empty");
    type Transition<'a> = (
        usize,
        &'a str,
        Option<&'a str>,
        &'a EffectField,
        &'a str,
        &'a str,
    );
    let transitions: Vec<Transition> = applied
        .effects
        .iter()
        .map(|t| {
            (
                t.effect_index,
                t.op.as_str(),
                t.entity_id.as_ref().map(EntityId::as_str),
                &t.field,
                t.before.as_str(),
                t.after.as_str(),
            )
        })
        .collect();
    assert_eq!(
        transitions,
        vec![
            (
                0,
                "set_entity_state",
                Some("bob"),
                &EffectField::State,
                "standing near the vending machine",
                "holding a candy bar"
            ),
            (
                1,
                "append_entity_memory",
                Some("bob"),
                &EffectField::Memory,
                "",
                "I bought a candy bar from the vending machine."
            ),
            (
                2,
                "set_entity_state",
                Some("vending_machine"),
                &EffectField::State,
                "contains one candy bar",
                "empty"
            ),
        ]
    );
    let touched: Vec<&str> = applied
        .touched_entities
        .keys()
        .map(EntityId::as_str)
        .collect();
    assert_eq!(touched, ["bob", "vending_machine"]);
    assert_eq!(
        applied.touched_entities[&id("bob")].before.state,
        "standing near the vending machine"
    );
}

#[test]
fn example_2_memory_appends_as_a_new_line() {
    let mut turn = WorkingTurn::begin(example1_world(), 1);
    turn.accept(&id("bob"), patch(seed("example1_world_patch")))
        .unwrap();
    turn.accept(&id("bob"), patch(seed("example2_world_patch")))
        .unwrap();
    assert_eq!(
        turn.world().entity("bob").unwrap().memory.as_deref(),
        Some(
            "I bought a candy bar from the vending machine.\nI tried the vending machine, but it was empty."
        )
    );
}

#[test]
fn the_seeds_other_patches_apply_to_the_park() {
    for name in [
        "example3_world_patch",
        "example4_world_patch",
        "d9_world_patch_shivers",
        "d9_world_patch_cooler",
    ] {
        let mut turn = WorkingTurn::begin(park_world(), 1);
        turn.accept(&id("bob"), patch(seed(name)))
            .unwrap_or_else(|p| panic!("{name}: {p:?}"));
    }
}

#[test]
fn empty_effects_are_a_valid_patch_that_changes_nothing() {
    let start = park_world();
    let mut turn = WorkingTurn::begin(start.clone(), 1);
    let applied = turn
        .accept(&id("bob"), patch(seed("d9_world_patch_cooler")))
        .unwrap();
    assert!(applied.effects.is_empty());
    assert!(applied.touched_entities.is_empty());
    assert_eq!(turn.world(), &start);
    let diff = turn.diff();
    assert_eq!(diff.patches.len(), 1);
    assert_eq!(diff.patches[0].narration, "The park air is cooler now.");
    assert!(diff.entities.is_empty());
}

#[test]
fn invalid_patches_are_refused_naming_the_effect_and_change_nothing() {
    let cases = [
        (
            json!({"op": "set_entity_state", "entity_id": "Bob", "state": "x"}),
            "/effects/1/entity_id",
            "there is no entity \"Bob\"",
        ),
        (
            json!({"op": "set_entity_state", "entity_id": "bob ", "state": "x"}),
            "/effects/1/entity_id",
            "there is no entity \"bob \"",
        ),
        (
            json!({"op": "append_entity_memory", "entity_id": "vending_machine", "content": "x"}),
            "/effects/1/entity_id",
            "is a prop, and a prop has no memory",
        ),
        (
            json!({"op": "append_entity_memory", "entity_id": "mallory", "content": "x"}),
            "/effects/1/entity_id",
            "no entity \"mallory\"",
        ),
        (
            json!({"op": "set_environment_content", "environment_label": "beach", "content": "x"}),
            "/effects/1/environment_label",
            "there is no environment \"beach\"",
        ),
    ];
    for (effect, pointer, needle) in cases {
        let start = park_world();
        let mut turn = WorkingTurn::begin(start.clone(), 1);
        let document = json!({"narration": "n", "effects": [
            {"op": "set_entity_state", "entity_id": "bob", "state": "changed"}, effect]});
        let problems = turn.accept(&id("bob"), patch(document)).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].pointer, pointer);
        assert!(
            problems[0].message.contains(needle),
            "{}",
            problems[0].message
        );
        // Nothing of the patch was applied, not even its valid first effect.
        assert_eq!(turn.world(), &start);
        assert!(turn.patches().is_empty());
    }
}

#[test]
fn only_the_three_effects_exist() {
    let cases = [
        (
            json!({"narration": "n", "effects": [{"op": "delete_entity", "entity_id": "crumb"}]}),
            "/effects/0/op",
            "is not one of",
        ),
        (
            json!({"narration": "n", "effects": [{"op": "transfer_item", "from": "vending_machine", "to": "bob"}]}),
            "/effects/0/op",
            "is not one of",
        ),
        (
            json!({"narration": "n", "effects": [{"op": "set_entity_state", "entity_id": "bob", "state": "x", "inventory": ["candy"]}]}),
            "/effects/0/inventory",
            "is not allowed here",
        ),
        (
            json!({"narration": "n", "effects": [{"entity_id": "bob", "state": "x"}]}),
            "/effects/0/op",
            "is required",
        ),
        (json!({"effects": []}), "/narration", "is required"),
        (
            json!({"narration": "n", "effects": [], "agent_state_after": "x"}),
            "/agent_state_after",
            "is not allowed here",
        ),
        (
            json!({"narration": "n", "effects": [{"op": "set_entity_state", "entity_id": "bob"}]}),
            "/effects/0/state",
            "is required",
        ),
    ];
    for (document, pointer, needle) in cases {
        let problems = WorldPatch::from_json(&document).unwrap_err();
        assert!(
            problems
                .iter()
                .any(|p| p.pointer == pointer && p.message.contains(needle)),
            "{document}: {problems:?}"
        );
    }
}

#[test]
fn example_7_bob_and_the_ant_both_change_one_turn() {
    let start = park_world();
    let mut turn = WorkingTurn::begin(start.clone(), 1);
    // Subjects run in entity-id order: the ant first, then Bob.
    turn.accept(&id("ant"), patch(seed("example7_world_patch_ant")))
        .unwrap();
    turn.accept(&id("bob"), patch(seed("example7_world_patch_bob")))
        .unwrap();
    let seqs: Vec<(u32, &str)> = turn
        .patches()
        .iter()
        .map(|p| (p.patch_seq, p.subject_entity_id.as_str()))
        .collect();
    assert_eq!(seqs, [(1, "ant"), (2, "bob")]);
    let touched: Vec<Vec<&str>> = turn
        .patches()
        .iter()
        .map(|p| p.touched_entities.keys().map(EntityId::as_str).collect())
        .collect();
    assert_eq!(
        touched,
        [vec!["ant", "crumb"], vec!["bob", "vending_machine"]]
    );

    let world = turn.world();
    assert_eq!(world.entity("bob").unwrap().state, "holding a candy bar");
    assert_eq!(world.entity("vending_machine").unwrap().state, "empty");
    assert_eq!(
        world.entity("ant").unwrap().state,
        "fed, standing where the crumb was"
    );
    assert_eq!(world.entity("crumb").unwrap().state, "gone");
    // The turn started from T0 and T0 is untouched.
    assert_eq!(turn.turn_start(), &start);

    let diff = turn.diff();
    assert_eq!(diff.turn, 1);
    assert_eq!(diff.patches.len(), 2);
    assert_eq!(
        diff.patches[1].narration,
        "Bob buys a candy bar from the vending machine."
    );
    let changed: Vec<&str> = diff.entities.keys().map(EntityId::as_str).collect();
    assert_eq!(changed, ["ant", "bob", "crumb", "vending_machine"]);
    assert_eq!(diff.entities[&id("crumb")].before.state, "on the plate");
    assert_eq!(diff.entities[&id("crumb")].after.state, "gone");
    assert!(diff.environments.is_empty());
}

#[test]
fn state_before_is_the_state_right_before_each_patch_not_the_turn_start() {
    let mut turn = WorkingTurn::begin(park_world(), 1);
    turn.accept(
        &id("ant"),
        patch(
            json!({"narration": "The ant climbs the machine.", "effects": [
        {"op": "set_entity_state", "entity_id": "vending_machine", "state": "has an ant on it"}]}),
        ),
    )
    .unwrap();
    turn.accept(&id("bob"), patch(json!({"narration": "Bob buys the candy.", "effects": [
        {"op": "set_entity_state", "entity_id": "vending_machine", "state": "empty"},
        {"op": "set_entity_state", "entity_id": "vending_machine", "state": "empty, light blinking"},
        {"op": "set_environment_content", "environment_label": "park", "content": "A park with a blinking vending machine."}]}))).unwrap();
    let second = &turn.patches()[1];
    assert_eq!(second.patch_seq, 2);
    let machine = &second.touched_entities[&id("vending_machine")];
    assert_eq!(machine.before.state, "has an ant on it");
    assert_eq!(machine.after.state, "empty, light blinking");
    // Effect by effect: each before is the value right before that effect.
    assert_eq!(second.effects[0].before, "has an ant on it");
    assert_eq!(second.effects[1].before, "empty");
    assert_eq!(second.effects[2].field, EffectField::Content);
    assert_eq!(
        second.effects[2].environment_label,
        Some(HumanId::parse("park").unwrap())
    );
    assert!(
        second.touched_environments[&HumanId::parse("park").unwrap()]
            .before
            .content
            .starts_with("A city park")
    );
    // The whole-turn diff spans the turn.
    let diff = turn.diff();
    assert_eq!(
        diff.entities[&id("vending_machine")].before.state,
        "contains one candy bar"
    );
    assert_eq!(
        diff.entities[&id("vending_machine")].after.state,
        "empty, light blinking"
    );
    assert_eq!(diff.environments.len(), 1);
}

#[test]
fn a_later_patch_is_validated_against_the_world_earlier_patches_left() {
    // Validation is against the live working world: both patches see the same entities, and
    // a patch naming a thing that does not exist is refused whatever came before.
    let mut turn = WorkingTurn::begin(park_world(), 1);
    turn.accept(&id("ant"), patch(seed("example7_world_patch_ant")))
        .unwrap();
    let refused = turn.accept(
        &id("bob"),
        patch(json!({"narration": "n", "effects": [
        {"op": "append_entity_memory", "entity_id": "crumb", "content": "eaten"}]})),
    );
    assert!(refused.is_err());
    assert_eq!(turn.patches().len(), 1);
}

#[test]
fn only_an_agent_is_a_subject() {
    let mut turn = WorkingTurn::begin(park_world(), 1);
    for subject in ["vending_machine", "nobody"] {
        let problems = turn
            .accept(&id(subject), patch(seed("d9_world_patch_cooler")))
            .unwrap_err();
        assert!(
            problems[0].message.contains("is not an agent"),
            "{problems:?}"
        );
    }
}

#[test]
fn the_simulation_clock_defaults_and_advances_per_turn() {
    let default = SimulationClock::default();
    assert_eq!(format_time(default.start), "2026-01-01T00:00:00Z");
    assert_eq!(default.turn_seconds, 3600);
    assert_eq!(default.start, DEFAULT_SIMULATION_START);
    assert_eq!(format_time(default.time_of_turn(1)), "2026-01-01T00:00:00Z");
    assert_eq!(format_time(default.time_of_turn(3)), "2026-01-01T02:00:00Z");
    let park = Scenario::from_json(&Park::new().scenario())
        .unwrap()
        .clock();
    assert_eq!(format_time(park.time_of_turn(1)), "2026-01-01T08:00:00Z");
    assert_eq!(format_time(park.time_of_turn(4)), "2026-01-01T08:30:00Z");
    let mut scenario = Park::new().scenario();
    scenario.as_object_mut().unwrap().remove("simulation");
    assert_eq!(Scenario::from_json(&scenario).unwrap().clock(), default);
    scenario["simulation"] = json!({"turn_seconds": 60});
    let clock = Scenario::from_json(&scenario).unwrap().clock();
    assert_eq!((clock.start, clock.turn_seconds), (default.start, 60));
}

/// T0 → T1 (Example 7) → T2 (Example 2 on Bob), stored with their hashes.
fn history() -> Vec<StoredTurn> {
    let slug = HumanId::parse("park-demo").unwrap();
    let clock = SimulationClock::default();
    let t0 = TurnRecord {
        world_slug: slug.clone(),
        turn: 0,
        previous_turn_hash: None,
        simulation_time: format_time(clock.start),
        state: park_world(),
        patches: Vec::new(),
    };
    let mut stored = vec![StoredTurn {
        hash: t0.hash().unwrap(),
        record: t0,
    }];
    let turns = [
        vec![
            ("ant", "example7_world_patch_ant"),
            ("bob", "example7_world_patch_bob"),
        ],
        vec![("bob", "example2_world_patch")],
    ];
    for (n, patches) in (1u64..).zip(turns) {
        let previous = stored.last().unwrap();
        let mut turn = WorkingTurn::begin(previous.record.state.clone(), n);
        for (subject, name) in patches {
            turn.accept(&id(subject), patch(seed(name))).unwrap();
        }
        let (state, patches) = turn.finish();
        let record = TurnRecord {
            world_slug: slug.clone(),
            turn: n,
            previous_turn_hash: Some(previous.hash.clone()),
            simulation_time: format_time(clock.time_of_turn(n)),
            state,
            patches,
        };
        stored.push(StoredTurn {
            hash: record.hash().unwrap(),
            record,
        });
    }
    stored
}

#[test]
fn a_worlds_history_verifies() {
    let turns = history();
    assert_eq!(verify_chain(&turns), Ok(()));
    assert_ne!(turns[1].hash, turns[2].hash);
    assert_eq!(
        turns[2].record.previous_turn_hash.as_ref(),
        Some(&turns[1].hash)
    );
}

#[test]
fn tampering_with_a_stored_turn_is_detected() {
    // An edited state whose stored hash was left alone.
    let mut turns = history();
    turns[1]
        .record
        .state
        .entities
        .get_mut("crumb")
        .unwrap()
        .state = "on the plate".into();
    assert_eq!(
        verify_chain(&turns),
        Err(ChainBreak::HashMismatch { turn: 1 })
    );

    // An edited state re-hashed: its state is not its patches replayed.
    let mut turns = history();
    turns[1]
        .record
        .state
        .entities
        .get_mut("crumb")
        .unwrap()
        .state = "on the plate".into();
    turns[1].hash = turns[1].record.hash().unwrap();
    assert_eq!(
        verify_chain(&turns),
        Err(ChainBreak::StateMismatch { turn: 1 })
    );

    // A consistent edit re-hashed (another time): the next turn no longer links to it.
    let mut turns = history();
    turns[1].record.simulation_time = "2026-06-01T00:00:00Z".into();
    turns[1].hash = turns[1].record.hash().unwrap();
    assert_eq!(
        verify_chain(&turns),
        Err(ChainBreak::LinkMismatch { turn: 2 })
    );

    // The last turn edited and re-hashed: its state is not its patches replayed.
    let mut turns = history();
    turns[2].record.state.entities.get_mut("bob").unwrap().state = "asleep".into();
    turns[2].hash = turns[2].record.hash().unwrap();
    assert_eq!(
        verify_chain(&turns),
        Err(ChainBreak::StateMismatch { turn: 2 })
    );

    // A dropped turn.
    let mut turns = history();
    turns.remove(1);
    assert_eq!(
        verify_chain(&turns),
        Err(ChainBreak::Gap {
            expected: 1,
            found: 2
        })
    );

    // A patch removed from the record and the hashes redone: replay disagrees.
    let mut turns = history();
    turns[1].record.patches.pop();
    turns[1].hash = turns[1].record.hash().unwrap();
    assert!(verify_chain(&turns).is_err());
}

//! The world store conformance suite: the same cases against SQLite and Postgres (scripts/test
//! provides Postgres; a missing backend fails). Components are idempotent and immutable, an
//! attempt's lease is exclusive until it expires, committed turns chain and a commit checks
//! the lease and the head, and source invocations and LLM calls go `running` to one final
//! status — `interrupted` included, by a failing attempt or by the sweeper.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod rig;

use std::sync::Arc;

use noema_world::domain::attempt::AttemptStatus;
use noema_world::domain::chat::ChatMessage;
use noema_world::domain::component::ComponentKind;
use noema_world::domain::failure::{Failure, FailureClass};
use noema_world::domain::hash::ContentHash;
use noema_world::domain::ids::{EntityId, HumanId};
use noema_world::domain::invocation::{
    AttemptSourceSummary, InvocationKind, InvocationOutcome, InvocationStart, InvocationStatus,
    SourceInvocation,
};
use noema_world::domain::llm_call::{LlmCall, LlmCallStart};
use noema_world::domain::source::SchemaDelivery;
use noema_world::store::attempts::{
    AttemptFailure, BeginAttempt, Begun, INTERRUPTED_MESSAGE, STOPPED_MESSAGE, TurnCommit,
};
use noema_world::store::components::{ComponentRef, ComponentUse, NewComponent};
use noema_world::store::worlds::{NewWorld, TurnRow};
use noema_world::store::{TraceWrite, WorldStore};
use rig::Backend;
use serde_json::{Value, json};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

both_backends!(
    components_are_idempotent_and_immutable,
    a_lease_is_exclusive_until_it_expires,
    committed_turns_chain_and_a_commit_checks_lease_and_head,
    invocations_go_running_to_one_final_status,
    a_failed_attempt_stops_its_running_calls,
    the_sweeper_interrupts_an_attempt_whose_lease_expired,
);

const T0: OffsetDateTime = datetime!(2026-04-28 12:00:00 UTC);
const ACTOR: &str = "test:store";

fn at(seconds: i64) -> OffsetDateTime {
    T0 + Duration::seconds(seconds)
}

fn hash_of(document: &Value) -> ContentHash {
    ContentHash::of_json(document).unwrap()
}

fn component(kind: ComponentKind, document: &Value) -> NewComponent {
    NewComponent {
        kind,
        hash: hash_of(document),
        content: noema_core::jcs::canonical_string(document).unwrap(),
        label: None,
        source_kind: None,
        workflow_hash: None,
        builtin_name: None,
        references: Vec::new(),
    }
}

/// A store with a response source, a workflow, a scenario and the world `w` at turn 0
/// from it.
struct Fixture {
    store: WorldStore,
    source: ContentHash,
    workflow: ContentHash,
    turn0: ContentHash,
    _dir: rig::Scratch,
}

const SLUG: &str = "w";

async fn fixture(backend: Backend) -> Fixture {
    let (db, dir) = rig::database(backend).await;
    let store = WorldStore::new(db);
    let source_document = json!({"version": 1, "label": "toy", "interface": {"name": "http_json"}});
    let mut source = component(ComponentKind::ResponseSource, &source_document);
    source.label = Some("toy".into());
    source.source_kind = Some("http_json".into());
    assert!(store.put_component(&source, None, ACTOR, T0).await.unwrap());
    let workflow_document = json!({"version": 1, "nodes": []});
    let workflow = component(ComponentKind::CognitionWorkflow, &workflow_document);
    assert!(
        store
            .put_component(&workflow, None, ACTOR, T0)
            .await
            .unwrap()
    );
    let scenario_document = json!({"label": "s", "environments": [], "entities": []});
    let mut scenario = component(ComponentKind::Scenario, &scenario_document);
    scenario.label = Some("s".into());
    assert!(
        store
            .put_component(&scenario, None, ACTOR, T0)
            .await
            .unwrap()
    );
    let turn0 = hash_of(&json!({"turn": 0}));
    let world = NewWorld {
        slug: SLUG.into(),
        scenario_hash: scenario.hash.clone(),
        turn0_hash: turn0.clone(),
        turn0_record: json!({"turn": 0}).to_string(),
        simulation_time: "2026-01-01T00:00:00Z".into(),
    };
    assert!(store.create_world(&world, ACTOR, T0).await.unwrap());
    // A slug names one world.
    assert!(!store.create_world(&world, ACTOR, T0).await.unwrap());
    Fixture {
        store,
        source: source.hash,
        workflow: workflow.hash,
        turn0,
        _dir: dir,
    }
}

fn begin(attempt_id: Uuid, now: OffsetDateTime, ttl_seconds: i64) -> BeginAttempt {
    BeginAttempt {
        slug: SLUG.into(),
        attempt_id,
        lease_owner: format!("replica-{attempt_id}"),
        now,
        lease_expires_at: now + Duration::seconds(ttl_seconds),
    }
}

async fn started(store: &WorldStore, attempt_id: Uuid, now: OffsetDateTime) {
    let begun = store
        .begin_attempt(&begin(attempt_id, now, 30))
        .await
        .unwrap();
    assert!(matches!(begun, Begun::Started(_)), "{begun:?}");
}

fn turn_row(turn: u64, previous: &ContentHash, attempt_id: Uuid) -> TurnRow {
    TurnRow {
        world_slug: SLUG.into(),
        turn,
        turn_hash: hash_of(&json!({"turn": turn})).to_string(),
        previous_turn_hash: Some(previous.to_string()),
        simulation_time: "2026-01-01T01:00:00Z".into(),
        attempt_id: Some(attempt_id.to_string()),
        record: json!({"turn": turn}).to_string(),
        committed_at: at(10),
        anchor_id: None,
    }
}

fn commit(attempt_id: Uuid, turn: TurnRow) -> TurnCommit {
    TurnCommit {
        slug: SLUG.into(),
        attempt_id,
        turn,
        events: Vec::new(),
        summary: AttemptSourceSummary::of(&[]),
        ended_at: at(10),
        duration_ms: 10_000,
        actor: ACTOR.into(),
    }
}

fn ambient(fixture: &Fixture, attempt_id: Uuid, seq: u32) -> SourceInvocation {
    SourceInvocation::start(
        InvocationStart {
            source_invocation_id: Uuid::new_v4(),
            attempt_id,
            world_slug: HumanId::parse(SLUG).unwrap(),
            attempted_turn: 1,
            invocation_seq: seq,
            workflow_hash: Some(fixture.workflow.clone()),
            workflow_node_id: None,
            workflow_subject_entity_id: None,
            source_hash: fixture.source.clone(),
            invocation_kind: InvocationKind::AmbientContext,
            ambient_source_id: Some(HumanId::parse("weather").unwrap()),
            tool_name: None,
            parent_source_invocation_id: None,
            input_schema_hash: None,
            output_schema_hash: None,
            logical_generation_attempt: None,
            tool_loop_round: None,
            request_json: json!({"turn": 1}),
            metadata: json!({}),
        },
        at(1),
    )
    .unwrap()
}

/// A generation's running invocation and LLM call, linked.
fn generation(fixture: &Fixture, attempt_id: Uuid, seq: u32) -> (SourceInvocation, LlmCall) {
    let mut invocation = SourceInvocation::start(
        InvocationStart {
            source_invocation_id: Uuid::new_v4(),
            attempt_id,
            world_slug: HumanId::parse(SLUG).unwrap(),
            attempted_turn: 1,
            invocation_seq: seq,
            workflow_hash: Some(fixture.workflow.clone()),
            workflow_node_id: Some(HumanId::parse("act").unwrap()),
            workflow_subject_entity_id: Some(EntityId::parse("bob").unwrap()),
            source_hash: fixture.source.clone(),
            invocation_kind: InvocationKind::LlmGeneration,
            ambient_source_id: None,
            tool_name: None,
            parent_source_invocation_id: None,
            input_schema_hash: None,
            output_schema_hash: None,
            logical_generation_attempt: Some(1),
            tool_loop_round: Some(0),
            request_json: json!({"messages": 1}),
            metadata: json!({}),
        },
        at(2),
    )
    .unwrap();
    let call = LlmCall::start(
        LlmCallStart {
            llm_call_id: Uuid::new_v4(),
            source_invocation_id: invocation.source_invocation_id,
            attempt_id,
            world_slug: HumanId::parse(SLUG).unwrap(),
            attempted_turn: 1,
            workflow_hash: fixture.workflow.clone(),
            workflow_node_id: HumanId::parse("act").unwrap(),
            workflow_subject_entity_id: EntityId::parse("bob").unwrap(),
            logical_generation_attempt: 1,
            tool_loop_round: 0,
            requested_model: "@chat".into(),
            model: "toy".into(),
            schema_delivery: SchemaDelivery::ResponseFormat,
            stream: true,
            request_messages: vec![ChatMessage::system("act")],
            response_format: None,
        },
        at(2),
    );
    invocation.link_llm_call(call.llm_call_id).unwrap();
    (invocation, call)
}

async fn status_of(store: &WorldStore, invocation: &SourceInvocation) -> InvocationStatus {
    store
        .get_invocation(&invocation.source_invocation_id.to_string())
        .await
        .unwrap()
        .unwrap()
        .status
}

async fn attempt_status(store: &WorldStore, attempt_id: Uuid) -> AttemptStatus {
    store
        .get_attempt(&attempt_id.to_string())
        .await
        .unwrap()
        .unwrap()
        .status
}

async fn components_are_idempotent_and_immutable(backend: Backend) {
    let (db, _dir) = rig::database(backend).await;
    let store = WorldStore::new(db);
    let schema_document = json!({"type": "object", "properties": {"t": {"type": "integer"}}});
    let schema = component(ComponentKind::JsonSchema, &schema_document);
    assert!(store.put_component(&schema, None, ACTOR, T0).await.unwrap());
    // The same document again: nothing new, the first record stays.
    assert!(
        !store
            .put_component(&schema, None, ACTOR, at(60))
            .await
            .unwrap()
    );
    let stored = store
        .get_component(ComponentKind::JsonSchema, &schema.hash)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            &stored.kind,
            &stored.hash,
            &stored.content,
            stored.created_at
        ),
        (
            &ComponentKind::JsonSchema,
            &schema.hash,
            &schema.content,
            T0
        )
    );
    // A hash is found under its own kind only.
    assert!(
        store
            .get_component(ComponentKind::ResponseSource, &schema.hash)
            .await
            .unwrap()
            .is_none()
    );
    let listed = store
        .list_components(ComponentKind::JsonSchema, 0, 100)
        .await
        .unwrap();
    assert_eq!(
        listed.iter().filter(|c| c.hash == schema.hash).count(),
        1,
        "{listed:?}"
    );

    // What references it is recorded with the reference's pointer.
    let source_document = json!({"version": 1, "label": "toy", "result": schema.hash.as_str()});
    let mut source = component(ComponentKind::ResponseSource, &source_document);
    source.label = Some("toy".into());
    source.source_kind = Some("http_json".into());
    source.references = vec![ComponentRef {
        kind: ComponentKind::JsonSchema,
        hash: schema.hash.clone(),
        pointer: "/result".into(),
    }];
    assert!(store.put_component(&source, None, ACTOR, T0).await.unwrap());
    assert!(!store.put_component(&source, None, ACTOR, T0).await.unwrap());
    let uses = store
        .component_uses(ComponentKind::JsonSchema, &schema.hash)
        .await
        .unwrap();
    assert_eq!(
        uses,
        [ComponentUse::Component(ComponentRef {
            kind: ComponentKind::ResponseSource,
            hash: source.hash.clone(),
            pointer: "/result".into(),
        })]
    );

    // Stored components never change: the database refuses an update.
    let update = "UPDATE json_schemas SET content = '{}' WHERE hash = $1";
    let refused = match store.database() {
        noema_store::Database::Sqlite(pool) => sqlx::query(update)
            .bind(schema.hash.as_str())
            .execute(pool)
            .await
            .is_err(),
        noema_store::Database::Postgres(pool) => sqlx::query(update)
            .bind(schema.hash.as_str())
            .execute(pool)
            .await
            .is_err(),
    };
    assert!(refused, "a stored component was updated");
}

async fn a_lease_is_exclusive_until_it_expires(backend: Backend) {
    let f = fixture(backend).await;
    let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
    let begun = f
        .store
        .begin_attempt(&begin(first, at(0), 30))
        .await
        .unwrap();
    let Begun::Started(world) = begun else {
        panic!("{begun:?}")
    };
    assert_eq!((world.current_turn, &world.head_hash), (0, &f.turn0));
    assert_eq!(
        attempt_status(&f.store, first).await,
        AttemptStatus::Running
    );

    // While the lease holds, a second attempt is refused and nothing is recorded for it.
    let refused = f
        .store
        .begin_attempt(&begin(second, at(29), 30))
        .await
        .unwrap();
    assert_eq!(
        refused,
        Begun::LeaseHeld {
            attempt_id: first.to_string()
        }
    );
    assert!(
        f.store
            .get_attempt(&second.to_string())
            .await
            .unwrap()
            .is_none()
    );
    // Only the holder renews.
    assert!(f.store.renew_lease(SLUG, first, at(60)).await.unwrap());
    assert!(!f.store.renew_lease(SLUG, second, at(90)).await.unwrap());
    let refused = f
        .store
        .begin_attempt(&begin(second, at(59), 30))
        .await
        .unwrap();
    assert!(matches!(refused, Begun::LeaseHeld { .. }), "{refused:?}");

    // Expired: the next attempt takes the world and the dead holder is interrupted.
    let begun = f
        .store
        .begin_attempt(&begin(second, at(60), 30))
        .await
        .unwrap();
    assert!(matches!(begun, Begun::Started(_)), "{begun:?}");
    let dead = f
        .store
        .get_attempt(&first.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dead.status, AttemptStatus::Interrupted);
    assert_eq!(dead.failure_message.as_deref(), Some(INTERRUPTED_MESSAGE));
    assert_eq!(
        attempt_status(&f.store, second).await,
        AttemptStatus::Running
    );
    // The dead holder cannot renew or commit any more.
    assert!(!f.store.renew_lease(SLUG, first, at(120)).await.unwrap());
    assert!(
        !f.store
            .commit_turn(&commit(first, turn_row(1, &f.turn0, first)))
            .await
            .unwrap()
    );
    assert!(f.store.turn(SLUG, 1).await.unwrap().is_none());
    // A world that does not exist has no lease to take.
    let mut nowhere = begin(Uuid::new_v4(), at(0), 30);
    nowhere.slug = "nowhere".into();
    assert_eq!(
        f.store.begin_attempt(&nowhere).await.unwrap(),
        Begun::NoWorld
    );
}

async fn committed_turns_chain_and_a_commit_checks_lease_and_head(backend: Backend) {
    let f = fixture(backend).await;
    let first = Uuid::new_v4();
    started(&f.store, first, at(0)).await;
    let turn1 = turn_row(1, &f.turn0, first);
    assert!(
        f.store
            .commit_turn(&commit(first, turn1.clone()))
            .await
            .unwrap()
    );
    let world = f.store.get_world(SLUG).await.unwrap().unwrap();
    assert_eq!(world.current_turn, 1);
    assert_eq!(world.head_hash.as_str(), turn1.turn_hash);
    assert_eq!(world.lease_attempt_id, None, "a commit releases the lease");
    let attempt = f
        .store
        .get_attempt(&first.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(attempt.status, AttemptStatus::Committed);
    assert_eq!(
        attempt.committed_turn_hash.as_deref(),
        Some(turn1.turn_hash.as_str())
    );
    assert_eq!(attempt.attempted_turn, 1);

    // The chain: each turn names its predecessor's hash.
    let turns = f.store.turns(SLUG, 0, 10, true).await.unwrap();
    let chain: Vec<(u64, Option<&str>, &str)> = turns
        .iter()
        .map(|t| {
            (
                t.turn,
                t.previous_turn_hash.as_deref(),
                t.turn_hash.as_str(),
            )
        })
        .collect();
    assert_eq!(
        chain,
        [
            (0, None, f.turn0.as_str()),
            (1, Some(f.turn0.as_str()), turn1.turn_hash.as_str())
        ]
    );
    assert_eq!(turns[1], turn1);

    // A commit needs the lease: an attempt that never took it writes nothing.
    let stranger = Uuid::new_v4();
    assert!(
        !f.store
            .commit_turn(&commit(stranger, turn_row(2, &f.turn0, stranger)))
            .await
            .unwrap()
    );
    // A commit needs the head it started from: turn 1 again is refused.
    let second = Uuid::new_v4();
    started(&f.store, second, at(20)).await;
    let mut again = turn_row(1, &f.turn0, second);
    again.turn_hash = hash_of(&json!({"turn": 1, "again": true})).to_string();
    assert!(!f.store.commit_turn(&commit(second, again)).await.unwrap());
    assert_eq!(
        f.store.get_world(SLUG).await.unwrap().unwrap().current_turn,
        1
    );
    // The lease is still the second attempt's; it commits turn 2 on top of turn 1.
    let head = ContentHash::parse(&turn1.turn_hash).unwrap();
    assert!(
        f.store
            .commit_turn(&commit(second, turn_row(2, &head, second)))
            .await
            .unwrap()
    );
    assert_eq!(f.store.turns(SLUG, 0, 10, false).await.unwrap().len(), 3);
}

async fn invocations_go_running_to_one_final_status(backend: Backend) {
    let f = fixture(backend).await;
    let attempt = Uuid::new_v4();
    started(&f.store, attempt, at(0)).await;
    let mut weather = ambient(&f, attempt, 1);
    f.store
        .apply_trace(&[TraceWrite::StartInvocation(Arc::new(weather.clone()))])
        .await
        .unwrap();
    assert_eq!(
        status_of(&f.store, &weather).await,
        InvocationStatus::Running
    );
    weather
        .succeed(
            InvocationOutcome {
                response_json: Some(json!({"temperature_f": 72})),
                response_text: Some("{\"temperature_f\":72}".into()),
                http_status: Some(200),
                ..InvocationOutcome::default()
            },
            at(3),
        )
        .unwrap();
    f.store
        .apply_trace(&[TraceWrite::finish(&weather)])
        .await
        .unwrap();
    let stored = f
        .store
        .get_invocation(&weather.source_invocation_id.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, weather);

    // A generation: its invocation and its LLM call exist, running, before any byte is sent.
    let (mut invocation, mut call) = generation(&f, attempt, 2);
    f.store
        .apply_trace(&[TraceWrite::StartGeneration(
            Arc::new(invocation.clone()),
            Arc::new(call.clone()),
        )])
        .await
        .unwrap();
    assert_eq!(
        status_of(&f.store, &invocation).await,
        InvocationStatus::Running
    );
    let running = f
        .store
        .get_llm_call(&call.llm_call_id.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.status, InvocationStatus::Running);
    assert_eq!(
        running.source_invocation_id,
        invocation.source_invocation_id
    );
    let failure = Failure::new(FailureClass::LlmProviderError, "the provider answered 500");
    call.fail(failure.clone(), Some(500), at(4)).unwrap();
    invocation
        .fail(failure, InvocationOutcome::default(), at(4))
        .unwrap();
    f.store
        .apply_trace(&[
            TraceWrite::update_call(&call),
            TraceWrite::finish(&invocation),
        ])
        .await
        .unwrap();
    let failed = f
        .store
        .get_invocation(&invocation.source_invocation_id.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (failed.status, failed.failure_class),
        (
            InvocationStatus::Failed,
            Some(FailureClass::LlmProviderError)
        )
    );
    let failed_call = f
        .store
        .get_llm_call(&call.llm_call_id.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed_call.status, InvocationStatus::Failed);
    assert_eq!(
        failed_call.failure_class,
        Some(FailureClass::LlmProviderError)
    );

    // Listed for their attempt, in invocation_seq order.
    let of_attempt = f
        .store
        .attempt_invocations(&attempt.to_string())
        .await
        .unwrap();
    let seqs: Vec<(u32, InvocationStatus)> = of_attempt
        .iter()
        .map(|i| (i.invocation_seq, i.status))
        .collect();
    assert_eq!(
        seqs,
        [
            (1, InvocationStatus::Succeeded),
            (2, InvocationStatus::Failed)
        ]
    );
}

async fn a_failed_attempt_stops_its_running_calls(backend: Backend) {
    let f = fixture(backend).await;
    let attempt = Uuid::new_v4();
    started(&f.store, attempt, at(0)).await;
    let weather = ambient(&f, attempt, 1);
    let (invocation, call) = generation(&f, attempt, 2);
    f.store
        .apply_trace(&[
            TraceWrite::StartInvocation(Arc::new(weather.clone())),
            TraceWrite::StartGeneration(Arc::new(invocation.clone()), Arc::new(call.clone())),
        ])
        .await
        .unwrap();
    f.store
        .fail_attempt(&AttemptFailure {
            slug: SLUG.into(),
            attempt_id: attempt,
            failure: Some(Failure::new(
                FailureClass::SourceHttpError,
                "the inbox answered 500",
            )),
            message: "the inbox answered 500".into(),
            ended_at: at(5),
            duration_ms: 5000,
        })
        .await
        .unwrap();
    let record = f
        .store
        .get_attempt(&attempt.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.status, AttemptStatus::Failed);
    assert_eq!(record.failure_class, Some(FailureClass::SourceHttpError));
    assert_eq!(record.source_invocation_count, 2);
    for running in [&weather, &invocation] {
        let stopped = f
            .store
            .get_invocation(&running.source_invocation_id.to_string())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stopped.status, InvocationStatus::Interrupted);
        assert_eq!(stopped.failure_message.as_deref(), Some(STOPPED_MESSAGE));
        assert_eq!(stopped.ended_at, Some(at(5)));
    }
    let stopped = f
        .store
        .get_llm_call(&call.llm_call_id.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stopped.status, InvocationStatus::Interrupted);
    // The lease is free: the next attempt starts at once.
    started(&f.store, Uuid::new_v4(), at(6)).await;
}

async fn the_sweeper_interrupts_an_attempt_whose_lease_expired(backend: Backend) {
    let f = fixture(backend).await;
    let attempt = Uuid::new_v4();
    started(&f.store, attempt, at(0)).await;
    let (invocation, call) = generation(&f, attempt, 1);
    f.store
        .apply_trace(&[TraceWrite::StartGeneration(
            Arc::new(invocation.clone()),
            Arc::new(call.clone()),
        )])
        .await
        .unwrap();
    // While the lease holds, the sweeper leaves the attempt alone.
    assert!(
        f.store
            .interrupt_stale_attempts(at(29))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        status_of(&f.store, &invocation).await,
        InvocationStatus::Running
    );
    // Once it expired, the attempt and its running calls are interrupted, once.
    let swept = f.store.interrupt_stale_attempts(at(31)).await.unwrap();
    assert_eq!(swept, [attempt.to_string()]);
    assert!(
        f.store
            .interrupt_stale_attempts(at(32))
            .await
            .unwrap()
            .is_empty()
    );
    let record = f
        .store
        .get_attempt(&attempt.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.status, AttemptStatus::Interrupted);
    assert_eq!(record.source_invocation_count, 1);
    assert_eq!(
        record.last_source_invocation_id,
        Some(invocation.source_invocation_id)
    );
    let interrupted = f
        .store
        .get_invocation(&invocation.source_invocation_id.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(interrupted.status, InvocationStatus::Interrupted);
    assert_eq!(
        interrupted.failure_message.as_deref(),
        Some(INTERRUPTED_MESSAGE)
    );
    let call = f
        .store
        .get_llm_call(&call.llm_call_id.to_string())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(call.status, InvocationStatus::Interrupted);
    // The world is still at turn 0 and free for the next attempt.
    let world = f.store.get_world(SLUG).await.unwrap().unwrap();
    assert_eq!((world.current_turn, world.lease_attempt_id), (0, None));
    started(&f.store, Uuid::new_v4(), at(33)).await;
}

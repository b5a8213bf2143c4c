//! The source interface is additive (D20): a third kind, defined only in this test, is
//! registered beside llm_chat_completions and http_json and used as an ambient source through
//! the same trait, templates, judging and injection — no kernel code knows about it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use common::{Park, seed, set};
use noema_world::domain::ambient::{AmbientResult, BindingKey, subject_ambient};
use noema_world::domain::assembly::{AssemblyError, assemble_scenario};
use noema_world::domain::component::ComponentKind;
use noema_world::domain::hash::ContentHash;
use noema_world::domain::ids::{EntityId, HumanId};
use noema_world::domain::invocation::InvocationKind;
use noema_world::domain::problem::Problem;
use noema_world::domain::schema::CompiledSchema;
use noema_world::domain::source::invoke::{
    ATTEMPTED_TURN_HEADER, SOURCE_INVOCATION_HEADER, SUBJECT_HEADER, WORLD_HEADER, resolve_model,
};
use noema_world::domain::source::{
    ResponseSource, ResponseSourceDefinition, SourceError, SourceInvocationContext, SourceKind,
    SourceKinds, SourceOutput, SourceRequest, SourceRole, judge_json_response,
};
use noema_world::domain::workflow::template::{TurnFacts, render_template, template_context};
use serde_json::{Value, json};
use uuid::Uuid;

/// A kind that answers with a constant from its definition.
struct StaticJsonKind;

static STATIC_JSON_INTERFACE: LazyLock<CompiledSchema> = LazyLock::new(|| {
    CompiledSchema::compile(&json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "value"],
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

/// A request as the source saw it: provenance headers and body.
type SeenRequest = (Vec<(&'static str, String)>, Value);

/// Its implementation; records the requests it was given.
struct StaticJsonSource {
    value: Value,
    requests: Mutex<Vec<SeenRequest>>,
}

#[async_trait]
impl ResponseSource for StaticJsonSource {
    async fn invoke_json(
        &self,
        ctx: &SourceInvocationContext,
        request: SourceRequest,
    ) -> Result<SourceOutput, SourceError> {
        let SourceRequest::Json(body) = request else {
            return Err(SourceError::new(
                noema_world::domain::failure::Failure::new(
                    noema_world::domain::failure::FailureClass::SourceHttpError,
                    "a static source answers JSON requests only",
                ),
            ));
        };
        self.requests
            .lock()
            .unwrap()
            .push((ctx.provenance_headers(), body));
        Ok(SourceOutput {
            http_status: None,
            headers: BTreeMap::new(),
            text: self.value.to_string(),
            tokens: None,
        })
    }
}

fn constant_weather() -> Value {
    json!({"version": 1, "label": "constant_weather",
           "interface": {"name": "static_json", "value": seed("example4_weather_turn3")}})
}

#[test]
fn the_third_kind_is_unknown_until_registered() {
    let definition = ResponseSourceDefinition::from_json(&constant_weather()).unwrap();
    let problems = SourceKinds::standard().check(&definition).unwrap_err();
    assert_eq!(problems[0].pointer, "/interface/name");
    let kinds = SourceKinds::standard().with(Arc::new(StaticJsonKind));
    assert_eq!(
        kinds.names().collect::<Vec<_>>(),
        ["http_json", "llm_chat_completions", "static_json"]
    );
    assert_eq!(kinds.check(&definition).unwrap().role(), SourceRole::Json);
    let mut bad = constant_weather();
    bad["interface"]["extra"] = json!(1);
    let bad = ResponseSourceDefinition::from_json(&bad).unwrap();
    assert_eq!(
        kinds.check(&bad).unwrap_err()[0].pointer,
        "/interface/extra"
    );
}

#[tokio::test]
async fn a_workflow_may_bind_the_third_kind_once_it_is_registered() {
    let mut park = Park::new();
    let source_hash = park.name(
        "constant-weather",
        ComponentKind::ResponseSource,
        &constant_weather(),
    );
    let mut workflow = park.workflow();
    set(
        &mut workflow,
        "/ambient_sources/0/source_ref/hash",
        json!(source_hash.as_str()),
    );
    let scenario = park.scenario_with_workflow(&workflow);

    let standard = assemble_scenario(&scenario, &park.lookup, &SourceKinds::standard()).await;
    let Err(AssemblyError::Rejected(problems)) = standard else {
        panic!("{standard:?}")
    };
    assert_eq!(problems[0].component, ComponentKind::ResponseSource);
    assert_eq!(problems[0].pointer, "/interface/name");

    let kinds = SourceKinds::standard().with(Arc::new(StaticJsonKind));
    let assembled = assemble_scenario(&scenario, &park.lookup, &kinds)
        .await
        .unwrap();
    let definition = &assembled.sources[&source_hash];

    // Run the binding exactly as for any kind: render, invoke through the trait, judge, inject.
    let (workflow_hash, workflow) = assembled.workflows.iter().next().unwrap();
    let binding = &workflow.ambient_sources[0];
    let source: Arc<dyn ResponseSource> = Arc::new(StaticJsonSource {
        value: definition.interface.config["value"].clone(),
        requests: Mutex::new(Vec::new()),
    });
    let facts = TurnFacts {
        world_slug: HumanId::parse("park-demo").unwrap(),
        attempted_turn: 3,
        simulation_time: assembled.scenario.clock().time_of_turn(3),
    };
    let request =
        render_template(&binding.request_template, &template_context(&facts, None)).unwrap();
    let ctx = SourceInvocationContext {
        source_invocation_id: Uuid::from_u128(7),
        attempt_id: Uuid::from_u128(1),
        world_slug: facts.world_slug.clone(),
        attempted_turn: 3,
        invocation_kind: InvocationKind::AmbientContext,
        source_hash: source_hash.clone(),
        workflow_node_id: None,
        workflow_subject_entity_id: None,
    };
    let output = source
        .invoke_json(&ctx, SourceRequest::Json(request.clone()))
        .await
        .unwrap();
    let schema = binding
        .result_schema_ref
        .as_ref()
        .map(|r| assembled.schemas[&r.hash].as_ref());
    let value = judge_json_response(&output, schema).result.unwrap();
    let world = assembled.initial_world();
    let seen = subject_ambient(
        workflow_hash,
        workflow,
        &EntityId::parse("bob").unwrap(),
        world.entity("bob").unwrap(),
        &[AmbientResult {
            key: BindingKey {
                workflow_hash: workflow_hash.clone(),
                binding_index: 0,
            },
            value,
        }],
        &[],
    )
    .unwrap();
    assert_eq!(
        seen["environments"]["park"]["weather"],
        seed("example4_weather_turn3")
    );
    assert_eq!(request["turn"], json!(3));
}

#[test]
fn generations_carry_their_provenance_in_headers() {
    let ctx = SourceInvocationContext {
        source_invocation_id: Uuid::from_u128(42),
        attempt_id: Uuid::from_u128(1),
        world_slug: HumanId::parse("park-demo").unwrap(),
        attempted_turn: 2,
        invocation_kind: InvocationKind::LlmGeneration,
        source_hash: ContentHash::of_json(&json!("llm")).unwrap(),
        workflow_node_id: Some(HumanId::parse("act").unwrap()),
        workflow_subject_entity_id: Some(EntityId::parse("bob").unwrap()),
    };
    let headers: BTreeMap<&str, String> = ctx.provenance_headers().into_iter().collect();
    assert_eq!(headers[WORLD_HEADER], "park-demo");
    assert_eq!(headers[ATTEMPTED_TURN_HEADER], "2");
    assert_eq!(headers[SUBJECT_HEADER], "bob");
    assert_eq!(
        headers[SOURCE_INVOCATION_HEADER],
        Uuid::from_u128(42).to_string()
    );
    // The scripted toy LLM picks its script by these same headers.
    assert_eq!(SUBJECT_HEADER, noema_toys::llm::SUBJECT_HEADER);
    assert_eq!(ATTEMPTED_TURN_HEADER, noema_toys::llm::TURN_HEADER);
}

#[test]
fn model_aliases_resolve_from_configuration_only() {
    let aliases = BTreeMap::from([("@chat".to_owned(), "gpt-4.1-mini".to_owned())]);
    assert_eq!(resolve_model("@chat", &aliases).unwrap(), "gpt-4.1-mini");
    assert_eq!(resolve_model("llama3", &aliases).unwrap(), "llama3");
    assert!(
        resolve_model("@reasoning", &aliases)
            .unwrap_err()
            .contains("not configured")
    );
}

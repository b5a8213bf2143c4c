//! Source invocation and LLM call records: every field, kind rules, the running → succeeded |
//! failed | interrupted lifecycle, the attempt summary, and how a JSON source's answer is
//! judged and recorded.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod common;

use std::collections::BTreeMap;

use common::{park, seed};
use noema_world::domain::chat::ChatMessage;
use noema_world::domain::failure::{Failure, FailureClass};
use noema_world::domain::hash::ContentHash;
use noema_world::domain::ids::{EntityId, HumanId};
use noema_world::domain::invocation::{
    AttemptSourceSummary, InvocationKind, InvocationOutcome, InvocationStart, InvocationStatus,
    LifecycleError, ModelOutputKind, SourceInvocation, ValidationStatus,
};
use noema_world::domain::llm_call::{
    ArtifactKind, LlmCall, LlmCallStart, TokenUsage, normalize_assistant_text,
};
use noema_world::domain::schema::CompiledSchema;
use noema_world::domain::source::{SchemaDelivery, SourceOutput, judge_json_response};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::datetime;
use uuid::Uuid;

const T0: OffsetDateTime = datetime!(2026-04-28 12:00:00 UTC);

fn hash(label: &str) -> ContentHash {
    ContentHash::of_json(&json!(label)).unwrap()
}

fn uuid(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn start(kind: InvocationKind, seq: u32) -> InvocationStart {
    let mut start = InvocationStart {
        source_invocation_id: uuid(100 + u128::from(seq)),
        attempt_id: uuid(1),
        world_slug: HumanId::parse("park-demo").unwrap(),
        attempted_turn: 2,
        invocation_seq: seq,
        workflow_hash: Some(hash("workflow")),
        workflow_node_id: None,
        workflow_subject_entity_id: None,
        source_hash: hash("source"),
        invocation_kind: kind,
        ambient_source_id: None,
        tool_name: None,
        parent_source_invocation_id: None,
        input_schema_hash: None,
        output_schema_hash: None,
        logical_generation_attempt: None,
        tool_loop_round: None,
        request_json: json!({"turn": 2}),
        metadata: json!({}),
    };
    match kind {
        InvocationKind::LlmGeneration => {
            start.workflow_node_id = Some(HumanId::parse("act").unwrap());
            start.workflow_subject_entity_id = Some(EntityId::parse("bob").unwrap());
            start.logical_generation_attempt = Some(1);
            start.tool_loop_round = Some(0);
        }
        InvocationKind::AmbientContext => {
            start.ambient_source_id = Some(HumanId::parse("park_weather").unwrap());
        }
        InvocationKind::ModelElectedTool => {
            start.workflow_node_id = Some(HumanId::parse("act").unwrap());
            start.workflow_subject_entity_id = Some(EntityId::parse("bob").unwrap());
            start.tool_name = Some("buy_candy".into());
            start.parent_source_invocation_id = Some(uuid(101));
            start.tool_loop_round = Some(0);
            start.input_schema_hash = Some(hash("buy-candy-arguments"));
            start.output_schema_hash = Some(hash("vending-result"));
        }
    }
    start
}

#[test]
fn a_running_invocation_carries_every_field_of_the_seed() {
    let invocation =
        SourceInvocation::start(start(InvocationKind::ModelElectedTool, 2), T0).unwrap();
    let json = serde_json::to_value(&invocation).unwrap();
    let fields: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut seed_fields = vec![
        "source_invocation_id",
        "attempt_id",
        "world_slug",
        "attempted_turn",
        "invocation_seq",
        "workflow_hash",
        "workflow_node_id",
        "workflow_subject_entity_id",
        "source_hash",
        "invocation_kind",
        "ambient_source_id",
        "tool_name",
        "parent_source_invocation_id",
        "status",
        "failure_class",
        "failure_message",
        "started_at",
        "ended_at",
        "duration_ms",
        "request_json",
        "response_json",
        "response_text",
        "response_headers",
        "http_status",
        "llm_call_id",
        "input_schema_hash",
        "output_schema_hash",
        "validation_status",
        "logical_generation_attempt",
        "tool_loop_round",
        "model_output_kind",
        "metadata",
    ];
    seed_fields.sort_unstable();
    let mut fields = fields;
    fields.sort_unstable();
    assert_eq!(fields, seed_fields);
    assert_eq!(json["status"], json!("running"));
    assert_eq!(json["invocation_kind"], json!("model_elected_tool"));
    assert_eq!(json["started_at"], json!("2026-04-28T12:00:00Z"));
    assert_eq!(json["response_headers"], json!({}));
    let back: SourceInvocation = serde_json::from_value(json).unwrap();
    assert_eq!(back, invocation);
}

#[test]
fn each_kind_needs_its_own_fields() {
    for kind in [
        InvocationKind::LlmGeneration,
        InvocationKind::AmbientContext,
        InvocationKind::ModelElectedTool,
    ] {
        SourceInvocation::start(start(kind, 1), T0).unwrap_or_else(|p| panic!("{kind:?}: {p:?}"));
    }
    type Edit = fn(&mut InvocationStart);
    let cases: [(InvocationKind, Edit, &str); 8] = [
        (
            InvocationKind::LlmGeneration,
            |s| s.workflow_node_id = None,
            "/workflow_node_id",
        ),
        (
            InvocationKind::LlmGeneration,
            |s| s.logical_generation_attempt = Some(0),
            "/logical_generation_attempt",
        ),
        (
            InvocationKind::LlmGeneration,
            |s| s.tool_name = Some("x".into()),
            "/tool_name",
        ),
        (
            InvocationKind::AmbientContext,
            |s| s.ambient_source_id = None,
            "/ambient_source_id",
        ),
        (
            InvocationKind::ModelElectedTool,
            |s| s.parent_source_invocation_id = None,
            "/parent_source_invocation_id",
        ),
        (
            InvocationKind::ModelElectedTool,
            |s| s.tool_name = None,
            "/tool_name",
        ),
        (
            InvocationKind::AmbientContext,
            |s| s.attempted_turn = 0,
            "/attempted_turn",
        ),
        (
            InvocationKind::AmbientContext,
            |s| s.invocation_seq = 0,
            "/invocation_seq",
        ),
    ];
    for (kind, edit, pointer) in cases {
        let mut s = start(kind, 1);
        edit(&mut s);
        let problems = SourceInvocation::start(s, T0).unwrap_err();
        assert!(
            problems.iter().any(|p| p.pointer == pointer),
            "{kind:?} {pointer}: {problems:?}"
        );
    }
}

#[test]
fn the_lifecycle_is_running_then_one_final_status() {
    let mut ok = SourceInvocation::start(start(InvocationKind::AmbientContext, 1), T0).unwrap();
    let outcome = InvocationOutcome {
        response_json: Some(seed("example4_weather_turn2")),
        response_text: Some("{...}".into()),
        response_headers: BTreeMap::from([(
            "content-type".to_owned(),
            "application/json".to_owned(),
        )]),
        http_status: Some(200),
        validation_status: Some(ValidationStatus::Valid),
        model_output_kind: None,
    };
    ok.succeed(outcome, T0 + time::Duration::milliseconds(42))
        .unwrap();
    assert_eq!(ok.status, InvocationStatus::Succeeded);
    assert_eq!(ok.duration_ms, Some(42));
    assert_eq!(ok.http_status, Some(200));
    assert_eq!(
        ok.fail(
            Failure::new(FailureClass::SourceHttpError, "late"),
            InvocationOutcome::default(),
            T0
        ),
        Err(LifecycleError::AlreadyFinished("succeeded"))
    );
    assert!(ok.interrupt(T0).is_err());

    let mut failed = SourceInvocation::start(start(InvocationKind::AmbientContext, 2), T0).unwrap();
    failed
        .fail(
            Failure::new(
                FailureClass::SourceHttpError,
                "the source answered HTTP 500",
            ),
            InvocationOutcome {
                http_status: Some(500),
                response_text: Some("boom".into()),
                ..InvocationOutcome::default()
            },
            T0 + time::Duration::seconds(1),
        )
        .unwrap();
    assert_eq!(failed.status, InvocationStatus::Failed);
    assert_eq!(failed.failure_class, Some(FailureClass::SourceHttpError));
    assert_eq!(failed.response_text.as_deref(), Some("boom"));
    assert_eq!(failed.duration_ms, Some(1000));

    let mut crashed = SourceInvocation::start(start(InvocationKind::LlmGeneration, 3), T0).unwrap();
    crashed.link_llm_call(uuid(900)).unwrap();
    crashed.interrupt(T0 - time::Duration::seconds(5)).unwrap();
    assert_eq!(crashed.status, InvocationStatus::Interrupted);
    assert_eq!(crashed.llm_call_id, Some(uuid(900)));
    assert_eq!(
        crashed.duration_ms,
        Some(0),
        "a clock that stepped back gives 0, never a negative"
    );
    assert!(crashed.succeed(InvocationOutcome::default(), T0).is_err());

    let mut ambient =
        SourceInvocation::start(start(InvocationKind::AmbientContext, 4), T0).unwrap();
    assert_eq!(
        ambient.link_llm_call(uuid(1)),
        Err(LifecycleError::NotAnLlmGeneration)
    );
}

#[test]
fn the_attempt_summary_counts_kinds_statuses_and_failures() {
    let mut invocations = Vec::new();
    let mut llm = SourceInvocation::start(start(InvocationKind::LlmGeneration, 1), T0).unwrap();
    llm.fail(
        Failure::new(FailureClass::ModelOutputInvalid, "not JSON"),
        InvocationOutcome::default(),
        T0,
    )
    .unwrap();
    invocations.push(llm);
    let mut retry = SourceInvocation::start(start(InvocationKind::LlmGeneration, 2), T0).unwrap();
    retry
        .succeed(
            InvocationOutcome {
                model_output_kind: Some(ModelOutputKind::ToolCall),
                ..InvocationOutcome::default()
            },
            T0,
        )
        .unwrap();
    invocations.push(retry);
    invocations
        .push(SourceInvocation::start(start(InvocationKind::ModelElectedTool, 3), T0).unwrap());
    let mut weather =
        SourceInvocation::start(start(InvocationKind::AmbientContext, 4), T0).unwrap();
    weather.succeed(InvocationOutcome::default(), T0).unwrap();
    invocations.insert(0, weather);

    let summary = AttemptSourceSummary::of(&invocations);
    assert_eq!(summary.source_invocation_count, 4);
    assert_eq!(summary.last_source_invocation_id, Some(uuid(104)));
    let json = serde_json::to_value(&summary.source_trace_summary).unwrap();
    assert_eq!(
        json["by_kind"],
        json!({"llm_generation": 2, "ambient_context": 1, "model_elected_tool": 1})
    );
    assert_eq!(
        json["by_status"],
        json!({"running": 1, "succeeded": 2, "failed": 1})
    );
    assert_eq!(
        json["failures"][0]["failure_class"],
        json!("model_output_invalid")
    );
    assert_eq!(json["failures"].as_array().unwrap().len(), 1);
    assert_eq!(AttemptSourceSummary::of(&[]).source_invocation_count, 0);
}

fn llm_start() -> LlmCallStart {
    LlmCallStart {
        llm_call_id: uuid(900),
        source_invocation_id: uuid(101),
        attempt_id: uuid(1),
        world_slug: HumanId::parse("park-demo").unwrap(),
        attempted_turn: 2,
        workflow_hash: hash("workflow"),
        workflow_node_id: HumanId::parse("act").unwrap(),
        workflow_subject_entity_id: EntityId::parse("bob").unwrap(),
        logical_generation_attempt: 2,
        tool_loop_round: 1,
        requested_model: "@chat".into(),
        model: "gpt-test".into(),
        schema_delivery: SchemaDelivery::ResponseFormat,
        stream: true,
        request_messages: vec![ChatMessage::system("act"), ChatMessage::user("the park")],
        response_format: Some(json!({"type": "json_schema"})),
    }
}

#[test]
fn an_llm_call_keeps_chunks_text_tokens_errors_and_artifacts() {
    let mut call = LlmCall::start(llm_start(), T0);
    assert_eq!(call.status, InvocationStatus::Running);
    let text = seed("tool_loop_output_final_patch").to_string();
    let (a, b) = text.split_at(20);
    assert_eq!(call.push_chunk(a, T0).unwrap().seq, 0);
    assert_eq!(call.push_chunk(b, T0).unwrap().seq, 1);
    let tokens = TokenUsage {
        prompt_tokens: Some(120),
        completion_tokens: Some(30),
        total_tokens: Some(150),
    };
    call.succeed(
        format!("  {text}\n"),
        Some(tokens),
        Some(200),
        T0 + time::Duration::milliseconds(250),
    )
    .unwrap();
    assert_eq!(call.normalized_text.as_deref(), Some(text.as_str()));
    assert_eq!(call.duration_ms, Some(250));
    call.record_parse(
        ModelOutputKind::FinalPatch,
        vec![],
        vec![],
        Some(seed("tool_loop_output_final_patch")),
    );
    call.record_accepted_patch(seed("tool_loop_output_final_patch")["patch"].clone());
    let kinds: Vec<ArtifactKind> = call.artifacts.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [ArtifactKind::ToolLoopOutput, ArtifactKind::WorldPatch]
    );
    assert!(call.push_chunk("late", T0).is_err());
    let json = serde_json::to_value(&call).unwrap();
    for field in [
        "source_invocation_id",
        "workflow_hash",
        "workflow_node_id",
        "workflow_subject_entity_id",
        "logical_generation_attempt",
        "tool_loop_round",
        "model_output_kind",
        "request_messages",
        "chunks",
        "raw_text",
        "normalized_text",
        "tokens",
        "parse_errors",
        "validation_errors",
        "artifacts",
    ] {
        assert!(json.get(field).is_some(), "{field}");
    }
    assert!(json.get("phase").is_none());
    assert_eq!(serde_json::from_value::<LlmCall>(json).unwrap(), call);
}

#[test]
fn a_failed_llm_call_keeps_what_arrived() {
    let mut call = LlmCall::start(llm_start(), T0);
    call.push_chunk("{\"kind\": \"fin", T0).unwrap();
    call.fail(
        Failure::new(FailureClass::LlmProviderError, "stream broke"),
        Some(200),
        T0,
    )
    .unwrap();
    assert_eq!(call.status, InvocationStatus::Failed);
    assert_eq!(call.raw_text.as_deref(), Some("{\"kind\": \"fin"));
    assert_eq!(call.failure_class, Some(FailureClass::LlmProviderError));
    let mut crashed = LlmCall::start(llm_start(), T0);
    crashed.interrupt(T0).unwrap();
    assert_eq!(crashed.status, InvocationStatus::Interrupted);
    assert!(
        crashed
            .fail(Failure::new(FailureClass::LlmProviderError, "x"), None, T0)
            .is_err()
    );
}

#[test]
fn normalisation_trims_and_unwraps_one_fence_only() {
    assert_eq!(normalize_assistant_text("  {\"a\":1}\n"), "{\"a\":1}");
    assert_eq!(
        normalize_assistant_text("```json\n{\"a\":1}\n```"),
        "{\"a\":1}"
    );
    assert_eq!(normalize_assistant_text("```\n{\"a\":1}\n```"), "{\"a\":1}");
    let two = "```json\n{}\n```\ntext\n```json\n{}\n```";
    assert_eq!(normalize_assistant_text(two), two);
    assert_eq!(
        normalize_assistant_text("Sure! {\"a\":1}"),
        "Sure! {\"a\":1}"
    );
}

fn output(status: Option<u16>, body: &str) -> SourceOutput {
    SourceOutput {
        http_status: status,
        headers: BTreeMap::from([("content-type".to_owned(), "application/json".to_owned())]),
        text: body.to_owned(),
        tokens: None,
    }
}

#[test]
fn a_json_sources_answer_is_judged_and_classified() {
    let pa = CompiledSchema::compile(&park("pa_result.schema")).unwrap();
    // 200 JSON that matches: accepted, even when empty.
    for example in [
        "example5_pa_turn1",
        "example5_pa_turn2",
        "d3_empty_announcements",
    ] {
        let body = seed(example).to_string();
        let verdict = judge_json_response(&output(Some(200), &body), Some(&pa));
        assert_eq!(verdict.result, Ok(seed(example)));
        assert_eq!(
            verdict.outcome.validation_status,
            Some(ValidationStatus::Valid)
        );
        assert_eq!(verdict.outcome.response_json, Some(seed(example)));
        assert_eq!(
            verdict.outcome.response_text.as_deref(),
            Some(body.as_str())
        );
        assert_eq!(verdict.outcome.http_status, Some(200));
    }
    // 500: failed, the body kept.
    let verdict = judge_json_response(&output(Some(500), "{\"error\":\"boom\"}"), Some(&pa));
    let refused = verdict.result.unwrap_err();
    assert_eq!(refused.failure.class, FailureClass::SourceHttpError);
    assert!(refused.failure.message.contains("HTTP 500"));
    assert_eq!(
        verdict.outcome.response_text.as_deref(),
        Some("{\"error\":\"boom\"}")
    );
    assert_eq!(verdict.outcome.response_json, None);
    // Not JSON.
    let verdict = judge_json_response(&output(Some(200), "<html>maintenance</html>"), Some(&pa));
    assert_eq!(
        verdict.result.unwrap_err().failure.class,
        FailureClass::SourceInvalidJson
    );
    assert_eq!(
        verdict.outcome.validation_status,
        Some(ValidationStatus::Invalid)
    );
    // JSON of the wrong shape.
    let verdict = judge_json_response(
        &output(Some(200), "{\"announcements\": \"none\"}"),
        Some(&pa),
    );
    let refused = verdict.result.unwrap_err();
    assert_eq!(refused.failure.class, FailureClass::SourceSchemaInvalid);
    assert_eq!(refused.violations[0].pointer, "/announcements");
    assert_eq!(
        verdict.outcome.response_json,
        Some(json!({"announcements": "none"}))
    );
    // No declared schema: any JSON is accepted and says so.
    let verdict = judge_json_response(&output(Some(200), "[1,2]"), None);
    assert_eq!(verdict.result, Ok(json!([1, 2])));
    assert_eq!(
        verdict.outcome.validation_status,
        Some(ValidationStatus::NoSchema)
    );
    // A transport without statuses (a test kind) is judged on its body alone.
    let verdict = judge_json_response(&output(None, "{\"announcements\": []}"), Some(&pa));
    assert!(verdict.result.is_ok());
    let _: Value = verdict.result.unwrap();
}

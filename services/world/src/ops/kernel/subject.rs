//! One subject's workflow in an attempted turn: its `before_subject_workflow` ambient
//! sources, then its `llm_tool_loop` node. Each generation is a durable source invocation
//! and LLM call; each tool call the model elects (and only those) a durable invocation of
//! the tool's source, whose result goes back to the model as context; a model-content
//! failure goes through the node's one retry lane; the final patch goes to the sink, which
//! may send it back through the same lane when it no longer applies.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use uuid::Uuid;

use super::{AttemptError, JsonCall, PatchProvenance, PatchSink, TurnContext, Verdict};
use crate::domain::ambient::{AmbientResult, SubjectPlan, subject_ambient};
use crate::domain::failure::{Failure, FailureClass};
use crate::domain::invocation::{
    InvocationKind, InvocationOutcome, InvocationStart, ModelOutputKind, SourceInvocation,
    ValidationStatus,
};
use crate::domain::llm_call::{LlmCall, LlmCallStart};
use crate::domain::problem::Problems;
use crate::domain::source::invoke::{ChatRequest, GenerationObserver, resolve_model};
use crate::domain::source::{LlmChatInterface, SourceRequest};
use crate::domain::tool_loop::{Step, ToolLoop};
use crate::domain::workflow::prompt::{PromptValues, render_prompt, uses_placeholder};
use crate::domain::workflow::template::{format_time, render_template, template_context};
use crate::domain::world::WorldState;
use crate::ops::now;

fn internal(what: impl std::fmt::Display) -> AttemptError {
    AttemptError::Internal(what.to_string())
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// Runs `subject`'s workflow against `view` (the working world in an ordered turn, the
/// turn-start world in a concurrent one) and hands its final patch to `sink`.
pub(crate) async fn run(
    context: &TurnContext,
    subject: &SubjectPlan,
    view: Arc<WorldState>,
    sink: &mut dyn PatchSink,
) -> Result<(), AttemptError> {
    let assembled = &context.assembled;
    let workflow = assembled
        .workflows
        .get(&subject.workflow_hash)
        .ok_or_else(|| internal("the subject's workflow is not part of the assembly"))?;
    let entity = view
        .entity(subject.entity_id.as_str())
        .cloned()
        .ok_or_else(|| internal(format!("subject {} is not in the world", subject.entity_id)))?;
    let facts = view
        .subject_facts(subject.entity_id.as_str())
        .ok_or_else(|| internal(format!("subject {} has no facts", subject.entity_id)))?;

    // Ambient sources that run before this subject.
    let mut subject_results = Vec::new();
    for key in &subject.before_subject {
        let binding = workflow
            .ambient_sources
            .get(key.binding_index)
            .ok_or_else(|| internal("an ambient binding vanished"))?;
        let request = render_template(
            &binding.request_template,
            &template_context(&context.facts, Some(&facts)),
        )
        .map_err(|e| internal(format!("ambient source {:?}: {e}", binding.id.as_str())))?;
        let result_schema = binding
            .result_schema_ref
            .as_ref()
            .map(|r| context.schema(&r.hash))
            .transpose()?;
        let value = context
            .call_json(
                JsonCall {
                    kind: InvocationKind::AmbientContext,
                    workflow_hash: key.workflow_hash.clone(),
                    source_hash: binding.source_ref.hash.clone(),
                    subject: Some(subject.entity_id.clone()),
                    node: None,
                    ambient_source_id: Some(binding.id.clone()),
                    tool_name: None,
                    parent: None,
                    round: None,
                    input_schema: None,
                    result_schema,
                },
                request,
            )
            .await?;
        subject_results.push(AmbientResult {
            key: key.clone(),
            value,
        });
    }
    let ambient = subject_ambient(
        &subject.workflow_hash,
        workflow,
        &subject.entity_id,
        &entity,
        &context.turn_results,
        &subject_results,
    )
    .map_err(internal)?;

    let node = workflow
        .applied_node()
        .ok_or_else(|| internal("the workflow has no applied node"))?;
    let contract = context
        .contracts
        .get(&subject.workflow_hash)
        .cloned()
        .ok_or_else(|| internal("the node's contract was not compiled"))?;
    // The projection is the whole world, rendered per subject: only when the prompt shows it.
    let world_projection = if uses_placeholder(&node.prompt_template, "world.projection") {
        pretty(&view.projection())
    } else {
        String::new()
    };
    let values = PromptValues {
        world_projection,
        subject_rendered: pretty(&facts),
        ambient_visible: pretty(&ambient),
        tools_available: pretty(&contract.tools_available()),
        world_slug: context.facts.world_slug.to_string(),
        world_attempted_turn: context.facts.attempted_turn.to_string(),
        world_simulation_time: format_time(context.facts.simulation_time),
        subject_entity_id: subject.entity_id.to_string(),
    };
    let prompt = render_prompt(&node.prompt_template, &values).map_err(internal)?;
    let llm_hash = node.llm_source_ref.hash.clone();
    let llm = assembled
        .sources
        .get(&llm_hash)
        .ok_or_else(|| internal("the node's LLM source is not part of the assembly"))?;
    let interface = LlmChatInterface::of(llm).map_err(|p| internal(Problems(&p)))?;
    let source = context.source(&llm_hash)?;
    let mut tool_loop = ToolLoop::new(
        node,
        Arc::clone(&contract),
        prompt,
        interface.schema_delivery,
    );
    // The world final patches are judged against; a rejected patch brings a newer one.
    let mut judge_world = view;

    loop {
        let generation = tool_loop.generation().map_err(internal)?;
        let round = generation.tool_loop_round;
        let attempt = generation.logical_generation_attempt;
        let messages = generation.messages.to_vec();
        let response_schema = generation.response_schema.cloned();
        let resolved = resolve_model(&interface.model, &context.model_aliases);
        let model = resolved.clone().unwrap_or_default();
        let response_format = response_schema.as_ref().map(|s| s.response_format());
        let mut request_json = json!({"model": model, "messages": messages, "stream": true});
        if let Some(format) = &response_format {
            request_json["response_format"] = format.clone();
        }

        let tracer = &context.tracer;
        let invocation_id = Uuid::new_v4();
        let llm_call_id = Uuid::new_v4();
        let mut invocation = SourceInvocation::start(
            InvocationStart {
                source_invocation_id: invocation_id,
                attempt_id: tracer.attempt_id,
                world_slug: tracer.world_slug.clone(),
                attempted_turn: tracer.attempted_turn,
                invocation_seq: tracer.next_seq(),
                workflow_hash: Some(subject.workflow_hash.clone()),
                workflow_node_id: Some(node.id.clone()),
                workflow_subject_entity_id: Some(subject.entity_id.clone()),
                source_hash: llm_hash.clone(),
                invocation_kind: InvocationKind::LlmGeneration,
                ambient_source_id: None,
                tool_name: None,
                parent_source_invocation_id: None,
                input_schema_hash: None,
                output_schema_hash: Some(node.final_schema_ref.hash.clone()),
                logical_generation_attempt: Some(attempt),
                tool_loop_round: Some(round),
                request_json,
                metadata: json!({}),
            },
            now(),
        )
        .map_err(|p| internal(Problems(&p)))?;
        invocation.link_llm_call(llm_call_id).map_err(internal)?;
        let call = LlmCall::start(
            LlmCallStart {
                llm_call_id,
                source_invocation_id: invocation_id,
                attempt_id: tracer.attempt_id,
                world_slug: tracer.world_slug.clone(),
                attempted_turn: tracer.attempted_turn,
                workflow_hash: subject.workflow_hash.clone(),
                workflow_node_id: node.id.clone(),
                workflow_subject_entity_id: subject.entity_id.clone(),
                logical_generation_attempt: attempt,
                tool_loop_round: round,
                requested_model: interface.model.clone(),
                model: model.clone(),
                schema_delivery: interface.schema_delivery,
                stream: true,
                request_messages: messages.clone(),
                response_format,
            },
            invocation.started_at,
        );
        let (mut invocation, call) = tracer.start_generation(invocation, call).await?;
        let call = Arc::new(Mutex::new(call));

        // A model alias that is not configured fails this generation, traced like any other
        // provider failure.
        let answer = match resolved {
            Err(why) => Err(crate::domain::source::SourceError::new(Failure::new(
                FailureClass::LlmProviderError,
                why,
            ))),
            Ok(model) => {
                let observer: Arc<dyn GenerationObserver> =
                    Arc::new(tracer.chunk_recorder(Arc::clone(&call), llm_call_id));
                let chat = ChatRequest {
                    model,
                    messages,
                    response_schema,
                    stream: true,
                    observer: Some(observer),
                };
                source
                    .invoke_json(
                        &context.invocation_context(&invocation),
                        SourceRequest::Chat(chat),
                    )
                    .await
            }
        };
        let output = match answer {
            Err(error) => {
                let ended = now();
                if let Ok(mut call) = call.lock() {
                    let _ = call.fail(error.failure.clone(), error.http_status, ended);
                    tracer.update_call(&call);
                }
                let outcome = InvocationOutcome {
                    response_text: error.body.clone(),
                    response_headers: error.headers.clone(),
                    http_status: error.http_status,
                    ..InvocationOutcome::default()
                };
                let _ = invocation.fail(error.failure.clone(), outcome, ended);
                tracer.finish(&invocation);
                return Err(AttemptError::Failed(error.failure));
            }
            Ok(output) => output,
        };
        let ended = now();
        let judged = tool_loop
            .judge(&output.text, &judge_world)
            .map_err(internal)?;
        match call.lock() {
            Ok(mut call) => {
                let _ = call.succeed(
                    output.text.clone(),
                    output.tokens,
                    output.http_status,
                    ended,
                );
                call.record_parse(
                    judged.model_output_kind,
                    judged.parse_errors.clone(),
                    judged.validation_errors.clone(),
                    judged.parsed.clone(),
                );
                tracer.update_call(&call);
            }
            Err(_) => return Err(internal("an LLM call's lock was poisoned")),
        }
        // Refused: the retry lane takes it (or ends the attempt), whatever its kind.
        let invalid = judged.model_output_kind == ModelOutputKind::Invalid
            || matches!(judged.step, Step::Retry | Step::Failed(_));
        let outcome = InvocationOutcome {
            response_json: judged.parsed.clone(),
            response_text: Some(output.text.clone()),
            response_headers: output.headers.clone(),
            http_status: output.http_status,
            validation_status: Some(if invalid {
                ValidationStatus::Invalid
            } else {
                ValidationStatus::Valid
            }),
            model_output_kind: Some(judged.model_output_kind),
        };
        if invalid {
            let mut problems: Vec<String> = judged.parse_errors.clone();
            problems.extend(judged.validation_errors.iter().map(ToString::to_string));
            let _ = invocation.fail(
                Failure::new(
                    FailureClass::ModelOutputInvalid,
                    format!("the model's output was refused: {}", problems.join("; ")),
                ),
                outcome,
                ended,
            );
        } else {
            let _ = invocation.succeed(outcome, ended);
        }
        tracer.finish(&invocation);

        match judged.step {
            Step::CallTool {
                name,
                arguments,
                source_ref,
                arguments_schema_ref,
                result_schema_ref,
            } => {
                let result_schema = result_schema_ref
                    .as_ref()
                    .map(|r| context.schema(&r.hash))
                    .transpose()?;
                let result = context
                    .call_json(
                        JsonCall {
                            kind: InvocationKind::ModelElectedTool,
                            workflow_hash: subject.workflow_hash.clone(),
                            source_hash: source_ref.hash,
                            subject: Some(subject.entity_id.clone()),
                            node: Some(node.id.clone()),
                            ambient_source_id: None,
                            tool_name: Some(name),
                            parent: Some(invocation_id),
                            round: Some(round),
                            input_schema: Some(arguments_schema_ref.hash),
                            result_schema,
                        },
                        arguments,
                    )
                    .await?;
                tool_loop.tool_result(&result).map_err(internal)?;
            }
            Step::Final(patch) => {
                let provenance = PatchProvenance {
                    subject: subject.entity_id.clone(),
                    workflow_hash: subject.workflow_hash.clone(),
                    node_id: node.id.clone(),
                    llm_source_hash: llm_hash.clone(),
                    source_invocation_id: invocation_id,
                    llm_call_id,
                };
                match sink.submit(patch.clone(), provenance).await? {
                    Verdict::Accepted => {
                        let patch_json = serde_json::to_value(&patch).map_err(internal)?;
                        let mut accepted = call
                            .lock()
                            .map_err(|_| internal("an LLM call's lock was poisoned"))?;
                        accepted.record_accepted_patch(patch_json);
                        tracer.update_call(&accepted);
                        return Ok(());
                    }
                    Verdict::Rejected { problems, world } => {
                        judge_world = world;
                        match tool_loop.reject_final(&patch, problems).map_err(internal)? {
                            Step::Failed(failure) => return Err(AttemptError::Failed(failure)),
                            _ => continue,
                        }
                    }
                }
            }
            Step::Retry => continue,
            Step::Failed(failure) => return Err(AttemptError::Failed(failure)),
        }
    }
}

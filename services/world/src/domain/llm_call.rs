//! The rich LLM trace (D15): one `llm_calls` row per generation, linked to its source
//! invocation, with the request messages, every streamed chunk, raw and normalised assistant
//! text, token observations, parse and validation errors, and artifacts (the parsed
//! ToolLoopOutput, the accepted WorldPatch). Its provenance is the workflow node (D16), never
//! a phase.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::chat::ChatMessage;
use super::failure::{Failure, FailureClass};
use super::hash::ContentHash;
use super::ids::{EntityId, HumanId};
use super::invocation::{InvocationStatus, LifecycleError, ModelOutputKind, duration_ms};
use super::problem::Problem;
use super::source::SchemaDelivery;

/// Provenance and request of a generation, known before the call.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCallStart {
    pub llm_call_id: Uuid,
    pub source_invocation_id: Uuid,
    pub attempt_id: Uuid,
    pub world_slug: HumanId,
    pub attempted_turn: u64,
    pub workflow_hash: ContentHash,
    pub workflow_node_id: HumanId,
    pub workflow_subject_entity_id: EntityId,
    pub logical_generation_attempt: u32,
    pub tool_loop_round: u32,
    /// The model as the source names it (`@chat`).
    pub requested_model: String,
    /// The model sent to the provider after alias resolution.
    pub model: String,
    pub schema_delivery: SchemaDelivery,
    pub stream: bool,
    pub request_messages: Vec<ChatMessage>,
    /// The `response_format` sent, if any.
    pub response_format: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmChunk {
    /// 0, 1, 2, … in arrival order.
    pub seq: u32,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    pub text: String,
}

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenUsage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    /// The generation parsed as a ToolLoopOutput.
    ToolLoopOutput,
    /// The WorldPatch the kernel accepted from this generation.
    WorldPatch,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmArtifact {
    pub kind: ArtifactKind,
    pub content: Value,
}

/// The `llm_calls` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmCall {
    pub llm_call_id: Uuid,
    pub source_invocation_id: Uuid,
    pub attempt_id: Uuid,
    pub world_slug: HumanId,
    pub attempted_turn: u64,
    pub workflow_hash: ContentHash,
    pub workflow_node_id: HumanId,
    pub workflow_subject_entity_id: EntityId,
    pub logical_generation_attempt: u32,
    pub tool_loop_round: u32,
    pub model_output_kind: Option<ModelOutputKind>,
    pub requested_model: String,
    pub model: String,
    pub schema_delivery: SchemaDelivery,
    pub stream: bool,
    pub request_messages: Vec<ChatMessage>,
    pub response_format: Option<Value>,
    pub status: InvocationStatus,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub ended_at: Option<OffsetDateTime>,
    pub duration_ms: Option<u64>,
    pub http_status: Option<u16>,
    pub chunks: Vec<LlmChunk>,
    pub raw_text: Option<String>,
    pub normalized_text: Option<String>,
    pub tokens: Option<TokenUsage>,
    pub parse_errors: Vec<String>,
    pub validation_errors: Vec<Problem>,
    pub artifacts: Vec<LlmArtifact>,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
}

impl LlmCall {
    /// The `running` row, written (with its source invocation) before the provider is sent
    /// a byte.
    pub fn start(start: LlmCallStart, started_at: OffsetDateTime) -> LlmCall {
        LlmCall {
            llm_call_id: start.llm_call_id,
            source_invocation_id: start.source_invocation_id,
            attempt_id: start.attempt_id,
            world_slug: start.world_slug,
            attempted_turn: start.attempted_turn,
            workflow_hash: start.workflow_hash,
            workflow_node_id: start.workflow_node_id,
            workflow_subject_entity_id: start.workflow_subject_entity_id,
            logical_generation_attempt: start.logical_generation_attempt,
            tool_loop_round: start.tool_loop_round,
            model_output_kind: None,
            requested_model: start.requested_model,
            model: start.model,
            schema_delivery: start.schema_delivery,
            stream: start.stream,
            request_messages: start.request_messages,
            response_format: start.response_format,
            status: InvocationStatus::Running,
            started_at,
            ended_at: None,
            duration_ms: None,
            http_status: None,
            chunks: Vec::new(),
            raw_text: None,
            normalized_text: None,
            tokens: None,
            parse_errors: Vec::new(),
            validation_errors: Vec::new(),
            artifacts: Vec::new(),
            failure_class: None,
            failure_message: None,
        }
    }

    /// Records one streamed chunk; returns it for the store to append.
    pub fn push_chunk(
        &mut self,
        text: impl Into<String>,
        received_at: OffsetDateTime,
    ) -> Result<&LlmChunk, LifecycleError> {
        self.ensure_running()?;
        let seq = u32::try_from(self.chunks.len()).unwrap_or(u32::MAX);
        self.chunks.push(LlmChunk {
            seq,
            received_at,
            text: text.into(),
        });
        self.chunks
            .last()
            .ok_or(LifecycleError::AlreadyFinished("running"))
    }

    /// The provider answered: raw text (the concatenated chunks when streaming), its
    /// normalised form, and token counts. Whether the text is *valid* is recorded
    /// separately ([`LlmCall::record_parse`]).
    pub fn succeed(
        &mut self,
        raw_text: String,
        tokens: Option<TokenUsage>,
        http_status: Option<u16>,
        ended_at: OffsetDateTime,
    ) -> Result<(), LifecycleError> {
        self.ensure_running()?;
        self.normalized_text = Some(normalize_assistant_text(&raw_text));
        self.raw_text = Some(raw_text);
        self.tokens = tokens;
        self.http_status = http_status;
        self.finish(InvocationStatus::Succeeded, ended_at);
        Ok(())
    }

    /// The provider call failed (the text received so far, if any, is kept as raw text).
    pub fn fail(
        &mut self,
        failure: Failure,
        http_status: Option<u16>,
        ended_at: OffsetDateTime,
    ) -> Result<(), LifecycleError> {
        self.ensure_running()?;
        if !self.chunks.is_empty() {
            let partial: String = self.chunks.iter().map(|c| c.text.as_str()).collect();
            self.normalized_text = Some(normalize_assistant_text(&partial));
            self.raw_text = Some(partial);
        }
        self.http_status = http_status;
        self.failure_class = Some(failure.class);
        self.failure_message = Some(failure.message);
        self.finish(InvocationStatus::Failed, ended_at);
        Ok(())
    }

    pub fn interrupt(&mut self, at: OffsetDateTime) -> Result<(), LifecycleError> {
        self.ensure_running()?;
        self.failure_message = Some("the process stopped while this call was in flight".to_owned());
        self.finish(InvocationStatus::Interrupted, at);
        Ok(())
    }

    /// What the tool loop made of the text: its kind, parse and validation errors, and the
    /// parsed output as an artifact. Recorded after the call finished.
    pub fn record_parse(
        &mut self,
        kind: ModelOutputKind,
        parse_errors: Vec<String>,
        validation_errors: Vec<Problem>,
        parsed: Option<Value>,
    ) {
        self.model_output_kind = Some(kind);
        self.parse_errors = parse_errors;
        self.validation_errors = validation_errors;
        if let Some(parsed) = parsed {
            self.artifacts.push(LlmArtifact {
                kind: ArtifactKind::ToolLoopOutput,
                content: parsed,
            });
        }
    }

    /// The kernel accepted this generation's patch into the working world.
    pub fn record_accepted_patch(&mut self, patch: Value) {
        self.artifacts.push(LlmArtifact {
            kind: ArtifactKind::WorldPatch,
            content: patch,
        });
    }

    fn ensure_running(&self) -> Result<(), LifecycleError> {
        if self.status.is_final() {
            Err(LifecycleError::AlreadyFinished(self.status.as_str()))
        } else {
            Ok(())
        }
    }

    fn finish(&mut self, status: InvocationStatus, ended_at: OffsetDateTime) {
        self.status = status;
        self.ended_at = Some(ended_at);
        self.duration_ms = Some(duration_ms(self.started_at, ended_at));
    }
}

/// The assistant text the tool loop parses: surrounding whitespace removed, and a reply that
/// is one fenced code block (```json … ```) reduced to its contents. Nothing else changes;
/// the raw text is kept beside it.
pub fn normalize_assistant_text(raw: &str) -> String {
    let trimmed = raw.trim();
    if let Some(body) = trimmed.strip_prefix("```")
        && let Some(body) = body.strip_suffix("```")
        && !body.contains("```")
    {
        // Drop the info string (`json`) on the opening fence's line.
        let body = body.split_once('\n').map_or("", |(_, rest)| rest);
        return body.trim().to_owned();
    }
    trimmed.to_owned()
}

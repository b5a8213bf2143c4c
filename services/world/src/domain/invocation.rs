//! Source invocations (D15–D17): one durable record per source call — every LLM generation,
//! every ambient source call, every model-elected tool call. The record is written `running`
//! before the first byte leaves (the caller stores what [`SourceInvocation::start`] returns),
//! then finishes `succeeded` or `failed`; a process that dies mid-call leaves it `running`
//! until recovery marks it `interrupted`. LLM generations link to their rich `llm_calls` row.
//!
//! The record is a forensic trace, not a replay handle (D21).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use super::failure::{Failure, FailureClass};
use super::hash::ContentHash;
use super::ids::{EntityId, HumanId};
use super::problem::Problem;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvocationKind {
    LlmGeneration,
    AmbientContext,
    ModelElectedTool,
}

impl InvocationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InvocationKind::LlmGeneration => "llm_generation",
            InvocationKind::AmbientContext => "ambient_context",
            InvocationKind::ModelElectedTool => "model_elected_tool",
        }
    }
}

/// running → succeeded | failed | interrupted; the last three are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvocationStatus {
    Running,
    Succeeded,
    Failed,
    Interrupted,
}

impl InvocationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InvocationStatus::Running => "running",
            InvocationStatus::Succeeded => "succeeded",
            InvocationStatus::Failed => "failed",
            InvocationStatus::Interrupted => "interrupted",
        }
    }

    pub fn is_final(self) -> bool {
        self != InvocationStatus::Running
    }
}

/// How the response held up against its declared contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValidationStatus {
    /// Matched the declared schema.
    Valid,
    /// Did not match (or did not parse).
    Invalid,
    /// Parsed as JSON; no schema was declared to check it against.
    NoSchema,
}

/// What an LLM generation turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelOutputKind {
    ToolCall,
    FinalPatch,
    Invalid,
}

/// Everything known about a call before it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct InvocationStart {
    pub source_invocation_id: Uuid,
    pub attempt_id: Uuid,
    pub world_slug: HumanId,
    pub attempted_turn: u64,
    pub invocation_seq: u32,
    pub workflow_hash: Option<ContentHash>,
    pub workflow_node_id: Option<HumanId>,
    pub workflow_subject_entity_id: Option<EntityId>,
    pub source_hash: ContentHash,
    pub invocation_kind: InvocationKind,
    pub ambient_source_id: Option<HumanId>,
    pub tool_name: Option<String>,
    pub parent_source_invocation_id: Option<Uuid>,
    pub input_schema_hash: Option<ContentHash>,
    pub output_schema_hash: Option<ContentHash>,
    pub logical_generation_attempt: Option<u32>,
    pub tool_loop_round: Option<u32>,
    pub request_json: Value,
    pub metadata: Value,
}

/// What came back, as far as it got (a failed call may still have a status and a body).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InvocationOutcome {
    pub response_json: Option<Value>,
    pub response_text: Option<String>,
    pub response_headers: BTreeMap<String, String>,
    pub http_status: Option<u16>,
    pub validation_status: Option<ValidationStatus>,
    pub model_output_kind: Option<ModelOutputKind>,
}

/// The `source_invocations` row, every field of the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceInvocation {
    pub source_invocation_id: Uuid,
    pub attempt_id: Uuid,
    pub world_slug: HumanId,
    pub attempted_turn: u64,
    pub invocation_seq: u32,
    pub workflow_hash: Option<ContentHash>,
    pub workflow_node_id: Option<HumanId>,
    pub workflow_subject_entity_id: Option<EntityId>,
    pub source_hash: ContentHash,
    pub invocation_kind: InvocationKind,
    pub ambient_source_id: Option<HumanId>,
    pub tool_name: Option<String>,
    pub parent_source_invocation_id: Option<Uuid>,
    pub status: InvocationStatus,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub ended_at: Option<OffsetDateTime>,
    pub duration_ms: Option<u64>,
    pub request_json: Value,
    pub response_json: Option<Value>,
    pub response_text: Option<String>,
    pub response_headers: BTreeMap<String, String>,
    pub http_status: Option<u16>,
    pub llm_call_id: Option<Uuid>,
    pub input_schema_hash: Option<ContentHash>,
    pub output_schema_hash: Option<ContentHash>,
    pub validation_status: Option<ValidationStatus>,
    pub logical_generation_attempt: Option<u32>,
    pub tool_loop_round: Option<u32>,
    pub model_output_kind: Option<ModelOutputKind>,
    pub metadata: Value,
}

/// A lifecycle step the record's status does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    #[error("the invocation is already {0}; a finished invocation never changes")]
    AlreadyFinished(&'static str),
    #[error("only an llm_generation invocation links to an LLM call")]
    NotAnLlmGeneration,
}

impl SourceInvocation {
    /// The `running` record to store before the call starts. Refuses a start whose fields do
    /// not fit its kind (an LLM generation without its node and attempt numbers, an ambient
    /// call without its binding id, a tool call without its name and parent generation).
    pub fn start(
        start: InvocationStart,
        started_at: OffsetDateTime,
    ) -> Result<SourceInvocation, Vec<Problem>> {
        let problems = start_problems(&start);
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(SourceInvocation {
            source_invocation_id: start.source_invocation_id,
            attempt_id: start.attempt_id,
            world_slug: start.world_slug,
            attempted_turn: start.attempted_turn,
            invocation_seq: start.invocation_seq,
            workflow_hash: start.workflow_hash,
            workflow_node_id: start.workflow_node_id,
            workflow_subject_entity_id: start.workflow_subject_entity_id,
            source_hash: start.source_hash,
            invocation_kind: start.invocation_kind,
            ambient_source_id: start.ambient_source_id,
            tool_name: start.tool_name,
            parent_source_invocation_id: start.parent_source_invocation_id,
            status: InvocationStatus::Running,
            failure_class: None,
            failure_message: None,
            started_at,
            ended_at: None,
            duration_ms: None,
            request_json: start.request_json,
            response_json: None,
            response_text: None,
            response_headers: BTreeMap::new(),
            http_status: None,
            llm_call_id: None,
            input_schema_hash: start.input_schema_hash,
            output_schema_hash: start.output_schema_hash,
            validation_status: None,
            logical_generation_attempt: start.logical_generation_attempt,
            tool_loop_round: start.tool_loop_round,
            model_output_kind: None,
            metadata: start.metadata,
        })
    }

    /// Links the `llm_calls` row started for this generation (D17: both rows exist before
    /// the provider is sent a byte).
    pub fn link_llm_call(&mut self, llm_call_id: Uuid) -> Result<(), LifecycleError> {
        self.ensure_running()?;
        if self.invocation_kind != InvocationKind::LlmGeneration {
            return Err(LifecycleError::NotAnLlmGeneration);
        }
        self.llm_call_id = Some(llm_call_id);
        Ok(())
    }

    pub fn succeed(
        &mut self,
        outcome: InvocationOutcome,
        ended_at: OffsetDateTime,
    ) -> Result<(), LifecycleError> {
        self.ensure_running()?;
        self.record_outcome(outcome);
        self.finish(InvocationStatus::Succeeded, ended_at);
        Ok(())
    }

    pub fn fail(
        &mut self,
        failure: Failure,
        outcome: InvocationOutcome,
        ended_at: OffsetDateTime,
    ) -> Result<(), LifecycleError> {
        self.ensure_running()?;
        self.record_outcome(outcome);
        self.failure_class = Some(failure.class);
        self.failure_message = Some(failure.message);
        self.finish(InvocationStatus::Failed, ended_at);
        Ok(())
    }

    /// Recovery after a crash: the call's outcome is unknown.
    pub fn interrupt(&mut self, at: OffsetDateTime) -> Result<(), LifecycleError> {
        self.ensure_running()?;
        self.failure_message = Some("the process stopped while this call was in flight".to_owned());
        self.finish(InvocationStatus::Interrupted, at);
        Ok(())
    }

    fn ensure_running(&self) -> Result<(), LifecycleError> {
        if self.status.is_final() {
            Err(LifecycleError::AlreadyFinished(self.status.as_str()))
        } else {
            Ok(())
        }
    }

    fn record_outcome(&mut self, outcome: InvocationOutcome) {
        self.response_json = outcome.response_json;
        self.response_text = outcome.response_text;
        self.response_headers = outcome.response_headers;
        self.http_status = outcome.http_status;
        self.validation_status = outcome.validation_status;
        self.model_output_kind = outcome.model_output_kind;
    }

    fn finish(&mut self, status: InvocationStatus, ended_at: OffsetDateTime) {
        self.status = status;
        self.ended_at = Some(ended_at);
        self.duration_ms = Some(duration_ms(self.started_at, ended_at));
    }
}

/// Whole milliseconds from `start` to `end`, never negative (clocks step backwards).
pub fn duration_ms(start: OffsetDateTime, end: OffsetDateTime) -> u64 {
    u64::try_from((end - start).whole_milliseconds()).unwrap_or(0)
}

fn start_problems(start: &InvocationStart) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut need = |present: bool, field: &str, why: &str| {
        if !present {
            problems.push(Problem::new(format!("/{field}"), why.to_owned()));
        }
    };
    need(
        start.attempted_turn >= 1,
        "attempted_turn",
        "must be at least 1",
    );
    need(
        start.invocation_seq >= 1,
        "invocation_seq",
        "must be at least 1",
    );
    need(
        start.metadata.is_object(),
        "metadata",
        "must be a JSON object",
    );
    let kind = start.invocation_kind.as_str();
    let required = format!("is required for {kind}");
    let forbidden = format!("must be absent for {kind}");
    match start.invocation_kind {
        InvocationKind::LlmGeneration => {
            need(start.workflow_hash.is_some(), "workflow_hash", &required);
            need(
                start.workflow_node_id.is_some(),
                "workflow_node_id",
                &required,
            );
            need(
                start.workflow_subject_entity_id.is_some(),
                "workflow_subject_entity_id",
                &required,
            );
            need(
                start.logical_generation_attempt.is_some_and(|n| n >= 1),
                "logical_generation_attempt",
                "is required for llm_generation and starts at 1",
            );
            need(
                start.tool_loop_round.is_some(),
                "tool_loop_round",
                &required,
            );
            need(
                start.ambient_source_id.is_none(),
                "ambient_source_id",
                &forbidden,
            );
            need(start.tool_name.is_none(), "tool_name", &forbidden);
            need(
                start.parent_source_invocation_id.is_none(),
                "parent_source_invocation_id",
                &forbidden,
            );
        }
        InvocationKind::AmbientContext => {
            need(start.workflow_hash.is_some(), "workflow_hash", &required);
            need(
                start.ambient_source_id.is_some(),
                "ambient_source_id",
                &required,
            );
            need(start.tool_name.is_none(), "tool_name", &forbidden);
            need(
                start.parent_source_invocation_id.is_none(),
                "parent_source_invocation_id",
                &forbidden,
            );
            need(
                start.logical_generation_attempt.is_none(),
                "logical_generation_attempt",
                &forbidden,
            );
        }
        InvocationKind::ModelElectedTool => {
            need(start.workflow_hash.is_some(), "workflow_hash", &required);
            need(
                start.workflow_node_id.is_some(),
                "workflow_node_id",
                &required,
            );
            need(
                start.workflow_subject_entity_id.is_some(),
                "workflow_subject_entity_id",
                &required,
            );
            need(start.tool_name.is_some(), "tool_name", &required);
            need(
                start.parent_source_invocation_id.is_some(),
                "parent_source_invocation_id",
                "is required for model_elected_tool: the LLM generation that emitted the call",
            );
            need(
                start.tool_loop_round.is_some(),
                "tool_loop_round",
                &required,
            );
            need(
                start.ambient_source_id.is_none(),
                "ambient_source_id",
                &forbidden,
            );
        }
    }
    problems
}

/// `attempts.source_trace_summary`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourceTraceSummary {
    pub by_kind: BTreeMap<InvocationKind, u32>,
    pub by_status: BTreeMap<InvocationStatus, u32>,
    /// Failed and interrupted invocations, in `invocation_seq` order.
    pub failures: Vec<FailedInvocation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailedInvocation {
    pub source_invocation_id: Uuid,
    pub invocation_seq: u32,
    pub invocation_kind: InvocationKind,
    pub status: InvocationStatus,
    pub failure_class: Option<FailureClass>,
}

/// The attempt's summary fields: `source_invocation_count`, `last_source_invocation_id`,
/// `source_trace_summary`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptSourceSummary {
    pub source_invocation_count: u32,
    pub last_source_invocation_id: Option<Uuid>,
    pub source_trace_summary: SourceTraceSummary,
}

/// What an attempt's summary needs of one invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvocationMark {
    pub source_invocation_id: Uuid,
    pub invocation_seq: u32,
    pub invocation_kind: InvocationKind,
    pub status: InvocationStatus,
    pub failure_class: Option<FailureClass>,
}

impl InvocationMark {
    pub fn of(invocation: &SourceInvocation) -> InvocationMark {
        InvocationMark {
            source_invocation_id: invocation.source_invocation_id,
            invocation_seq: invocation.invocation_seq,
            invocation_kind: invocation.invocation_kind,
            status: invocation.status,
            failure_class: invocation.failure_class,
        }
    }
}

impl AttemptSourceSummary {
    /// The summary of an attempt's invocations (in any order).
    pub fn of(invocations: &[SourceInvocation]) -> AttemptSourceSummary {
        AttemptSourceSummary::of_marks(invocations.iter().map(InvocationMark::of).collect())
    }

    /// The summary of an attempt's invocations, from their marks (in any order).
    pub fn of_marks(mut marks: Vec<InvocationMark>) -> AttemptSourceSummary {
        marks.sort_by_key(|m| m.invocation_seq);
        let mut summary = SourceTraceSummary::default();
        for mark in &marks {
            *summary.by_kind.entry(mark.invocation_kind).or_default() += 1;
            *summary.by_status.entry(mark.status).or_default() += 1;
            if matches!(
                mark.status,
                InvocationStatus::Failed | InvocationStatus::Interrupted
            ) {
                summary.failures.push(FailedInvocation {
                    source_invocation_id: mark.source_invocation_id,
                    invocation_seq: mark.invocation_seq,
                    invocation_kind: mark.invocation_kind,
                    status: mark.status,
                    failure_class: mark.failure_class,
                });
            }
        }
        AttemptSourceSummary {
            source_invocation_count: u32::try_from(marks.len()).unwrap_or(u32::MAX),
            last_source_invocation_id: marks.last().map(|m| m.source_invocation_id),
            source_trace_summary: summary,
        }
    }
}

//! The six canonical objects of Cognitive OS v0.1 (seed §3), as Rust types.
//!
//! Each carries the four fields every object must have (`schema_version`, `id`, `ts`,
//! `source`) and exactly the properties its JSON Schema allows (`schemas/*.v0.1.json`,
//! all `additionalProperties: false`), so a validated JSON document and the value
//! serialized back from its type are the same JSON, and so have the same content id.
//! Optional fields are `Option`s skipped when absent, so "absent" and "empty" stay
//! distinct.

use std::fmt;

use noema_core::content_id::ContentId;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::schema::SchemaName;

/// The only object schema version this server knows.
pub const SCHEMA_VERSION: &str = "0.1";

/// Why an object has no content id: a number JSON cannot carry (NaN, infinity).
#[derive(Debug, thiserror::Error)]
#[error("object cannot be canonicalized: {0}")]
pub struct ContentError(String);

impl From<noema_core::jcs::JcsError> for ContentError {
    fn from(err: noema_core::jcs::JcsError) -> Self {
        ContentError(err.to_string())
    }
}

/// What every object type shares: its schema, its id, and its content address.
pub trait CanonicalObject: Serialize + DeserializeOwned {
    const SCHEMA: SchemaName;

    /// The object's own `id` field.
    fn id(&self) -> &str;

    /// The object as JSON.
    fn to_json(&self) -> Result<Value, ContentError> {
        serde_json::to_value(self).map_err(|e| ContentError(e.to_string()))
    }

    /// Content address: `sha256:` of the object's RFC 8785 (JCS) bytes.
    fn content_id(&self) -> Result<ContentId, ContentError> {
        let value = self.to_json()?;
        ContentId::of_json(&value).map_err(|e| ContentError(e.to_string()))
    }
}

/// Risk levels of the policy matrix (seed §4), ordered by severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RiskLevel {
    L0,
    L1,
    L2,
    L3,
}

impl RiskLevel {
    pub const ALL: [RiskLevel; 4] = [RiskLevel::L0, RiskLevel::L1, RiskLevel::L2, RiskLevel::L3];

    pub fn as_str(self) -> &'static str {
        match self {
            RiskLevel::L0 => "L0",
            RiskLevel::L1 => "L1",
            RiskLevel::L2 => "L2",
            RiskLevel::L3 => "L3",
        }
    }
}

impl fmt::Display for RiskLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a tool runs (issue 18 item 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// One of Noema's own operations, through its gRPC client.
    Noema,
    /// POST JSON to a configured URL.
    HttpJson,
    /// An allowlisted program without a shell.
    Command,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Noema => "noema",
            ToolKind::HttpJson => "http_json",
            ToolKind::Command => "command",
        }
    }
}

impl fmt::Display for ToolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Seed §3.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub schema_version: String,
    pub id: String,
    pub ts: String,
    /// The acting agent, whose reputation the request affects.
    pub source: String,
    pub goal: String,
    pub steps: Vec<Step>,
    pub assumptions: Vec<Value>,
    pub rollback_plan: String,
    /// Steps that undo the plan's effects, run when a step fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_steps: Option<Vec<Step>>,
}

impl Plan {
    /// The steps, then the rollback steps, each with whether it is a rollback step.
    pub fn all_steps(&self) -> impl Iterator<Item = (&Step, bool)> {
        self.steps
            .iter()
            .map(|s| (s, false))
            .chain(self.rollback_steps.iter().flatten().map(|s| (s, true)))
    }
}

/// A step of a plan (seed §3.1), with the two optional fields §6.2 implies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub step_id: String,
    /// Free text for people; never used to judge risk.
    pub action: String,
    pub tool: String,
    pub expected_output: String,
    /// The step's minimal scope (seed §6.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Vec<String>>,
    /// The tool's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
}

impl Step {
    /// The declared scope, empty when none is.
    pub fn scope(&self) -> &[String] {
        self.scope.as_deref().unwrap_or_default()
    }
}

/// Seed §3.2, with what the server adds to explain and bind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskReport {
    pub schema_version: String,
    pub id: String,
    pub ts: String,
    pub source: String,
    /// The assessed plan's `id`.
    pub plan_id: String,
    pub risk_level: RiskLevel,
    pub reasons: Vec<String>,
    /// The permissions of the plan's tools, sorted, space-separated.
    pub required_permission: String,
    pub requires_approval: bool,
    pub forbidden: bool,
    pub policy_version: String,
    /// Content id of the policy that decided this report.
    pub policy_hash: String,
    /// Distinct approvers needed before execution (0, 1, or 2 in dual mode).
    pub approvals_required: u8,
    /// Every scope the plan's steps declare, sorted: what an approval must cover.
    pub required_scope: Vec<String>,
    /// The decision for each step, rollback steps included.
    pub steps: Vec<StepRisk>,
}

/// One step's assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRisk {
    pub step_id: String,
    pub tool: String,
    /// Absent for a tool the policy does not list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    pub risk_level: RiskLevel,
    pub forbidden: bool,
    pub required_permission: String,
    pub rollback: bool,
    pub reasons: Vec<String>,
}

/// An approval's decision (seed §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Reject,
}

/// Seed §3.3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub schema_version: String,
    pub id: String,
    /// When the approval was given; its validity (the policy's TTL) starts here.
    pub ts: String,
    pub source: String,
    pub decision: Decision,
    pub approver: String,
    pub reason: String,
    pub scope: Vec<String>,
}

/// How an execution ended (seed §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceStatus {
    Success,
    Failed,
    Blocked,
    RolledBack,
}

/// How one tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Success,
    Failed,
}

/// Seed §3.4.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecTrace {
    pub schema_version: String,
    pub id: String,
    pub ts: String,
    pub source: String,
    pub trace_id: String,
    pub plan_id: String,
    pub risk_report_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The approvals the execution relied on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_ids: Option<Vec<String>>,
    /// Why a blocked execution was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_reasons: Option<Vec<String>>,
    pub tool_calls: Vec<ToolCall>,
    pub artifacts: Vec<Value>,
    pub status: TraceStatus,
}

/// One tool call of a trace (seed §3.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub tool: String,
    /// Content id of the JCS bytes of the call's arguments.
    pub args_hash: String,
    pub started_ts: String,
    pub ended_ts: String,
    /// Content id of the JCS bytes of the call's result (or its error).
    pub result_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CallStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Seed §3.5.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalResult {
    pub schema_version: String,
    pub id: String,
    pub ts: String,
    pub source: String,
    pub suite: String,
    pub score: f64,
    pub pass: bool,
    pub regression: bool,
    pub findings: Vec<Value>,
}

/// Seed §3.6.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardUpdate {
    pub schema_version: String,
    pub id: String,
    pub ts: String,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub actor_id: String,
    pub rep_before: f64,
    pub rep_after: f64,
    pub delta: f64,
    pub reason_codes: Vec<String>,
    pub inputs: RewardInputs,
}

/// The reward formula's inputs and parameters, recorded so an update can be recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardInputs {
    pub correct: f64,
    pub incorrect: f64,
    pub noise: f64,
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    pub rep_cap: f64,
}

macro_rules! canonical {
    ($($ty:ident => $schema:ident),* $(,)?) => {
        $(
            impl CanonicalObject for $ty {
                const SCHEMA: SchemaName = SchemaName::$schema;
                fn id(&self) -> &str {
                    &self.id
                }
            }
        )*
    };
}

canonical! {
    Plan => Plan,
    RiskReport => RiskReport,
    Approval => Approval,
    ExecTrace => ExecTrace,
    EvalResult => EvalResult,
    RewardUpdate => RewardUpdate,
}

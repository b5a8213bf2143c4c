//! The rows of the orchestrator's tables, as the store reads and writes them. Plain data:
//! the operations layer maps them to and from the domain's types.

/// A request's live state (`requests`): what its events rebuild.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RequestRow {
    pub request_id: String,
    pub state: String,
    pub actor: String,
    /// Events so far: the last event's seq.
    pub version: i64,
    /// The last event's hash.
    pub head_hash: String,
    pub plan_object: String,
    pub rollback_declared: bool,
    pub risk_object: Option<String>,
    pub risk_level: Option<String>,
    pub forbidden: Option<bool>,
    pub approvals_required: Option<i64>,
    pub trace_object: Option<String>,
    pub trace_id: Option<String>,
    pub trace_status: Option<String>,
    pub reward_object: Option<String>,
    pub approval_count: i64,
    pub evaluation_count: i64,
    /// Unix microseconds; set while APPROVAL_PENDING.
    pub waiting_since: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One chained event (`request_events`).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct EventRow {
    pub request_id: String,
    pub seq: i64,
    pub event_type: String,
    pub prev_state: Option<String>,
    pub next_state: String,
    /// JCS text of the meta object.
    pub meta: String,
    pub ts: String,
    pub prev_hash: String,
    pub hash: String,
}

/// One of the six objects (`objects`), by content id.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ObjectRow {
    pub content_id: String,
    /// The schema name (`plan`, `risk_report`, …).
    pub object_type: String,
    pub object_id: String,
    pub schema_version: String,
    /// JCS text.
    pub body: String,
    pub created_at: i64,
}

/// A recorded approval (`approvals`).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ApprovalRow {
    pub request_id: String,
    pub seq: i64,
    pub approval_object: String,
    pub approval_id: String,
    pub approver: String,
    pub decision: String,
    pub signature: String,
    pub public_key: String,
    pub submitted_by: String,
    pub recorded_at: i64,
}

/// One vote (`votes`): an evaluation of a request or a judgement of a gold task.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct VoteRow {
    pub vote_id: String,
    pub target_id: String,
    pub gold: bool,
    pub seq: Option<i64>,
    pub evaluator_id: String,
    pub eval_object: String,
    pub suite: String,
    pub score: f64,
    pub gate_passed: bool,
    pub regression: bool,
    pub suppressed: bool,
    /// JSON array of the anti-abuse rules that fired.
    pub reason_codes: String,
    pub gold_matched: Option<bool>,
    pub voted_at: i64,
}

/// A vote with its evaluator's gold record now (absent: the evaluator has no row).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct VoteStanding {
    #[sqlx(flatten)]
    pub vote: VoteRow,
    pub gold_attempts: Option<i64>,
    pub gold_matches: Option<i64>,
    pub consecutive_mismatches: Option<i64>,
}

/// An evaluator's counters and gold record (`evaluators`).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct EvaluatorRow {
    pub evaluator_id: String,
    pub version: i64,
    pub votes: i64,
    pub gold_attempts: i64,
    pub gold_matches: i64,
    pub consecutive_mismatches: i64,
    pub updated_at: i64,
}

/// An actor's reputation (`reputations`).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ReputationRow {
    pub actor_id: String,
    pub version: i64,
    pub rep: f64,
    pub last_reward_id: String,
    pub updated_at: i64,
}

/// A suite's baseline and latest evaluation (`suites`).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SuiteRow {
    pub suite: String,
    pub baseline: Option<f64>,
    pub latest_request_id: String,
    pub latest_eval_id: String,
    pub latest_gate_passed: bool,
    pub latest_passed_minimum: bool,
    pub latest_regression: bool,
    pub updated_at: i64,
}

/// A gold task (`gold_tasks`).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct GoldTaskRow {
    pub gold_id: String,
    pub plan_object: String,
    pub risk_object: Option<String>,
    pub trace_object: String,
    pub answer_pass: bool,
    pub min_score: f64,
    pub max_score: f64,
    pub created_by: String,
    pub created_at: i64,
}

/// An item served to an evaluator (`evaluation_items`).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ItemRow {
    pub item_id: String,
    pub evaluator_id: String,
    pub target_id: String,
    pub gold: bool,
    pub served_at: i64,
}

/// What an evaluator did before a vote, as anti-abuse screening counts it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct VoteCounts {
    /// Unix microseconds of its latest vote at or before the new one.
    pub last_vote_at: Option<i64>,
    /// Its votes within the burst window.
    pub in_window: i64,
    /// Its votes on the same target.
    pub on_target: i64,
    /// The suite's baseline (its best passing score so far), read with them.
    pub baseline: Option<f64>,
}

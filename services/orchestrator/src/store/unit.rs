//! A write unit: what one call changes, committed atomically after its expectations are
//! checked inside the same transaction.
//!
//! Every write transaction locks the audit chain's head first, so writers are serialised
//! across connections and replicas: a unit's expectations, checked inside the
//! transaction, see every write committed before it, and nothing can slip between the
//! check and the write. That is how two replicas racing `execute` on one request get
//! exactly one claim: both expect the request at the version they read, and the second
//! finds it moved.

use noema_core::audit::AuditDraft;
use time::OffsetDateTime;

use super::rows::{
    ApprovalRow, EvaluatorRow, EventRow, GoldTaskRow, ItemRow, ObjectRow, ReputationRow,
    RequestRow, VoteRow,
};

/// A fact a unit relies on, checked in its transaction before it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The request is at `version` events (0: it does not exist).
    Request { request_id: String, version: i64 },
    /// The evaluator's row is at `version` (0: it does not exist).
    Evaluator { evaluator_id: String, version: i64 },
    /// The actor's reputation is at `version` (0: it has none).
    Reputation { actor_id: String, version: i64 },
    /// No approval carries this signature (a signature is accepted once).
    SignatureUnused { signature: String },
    /// The target was not served to the evaluator before.
    NotServed {
        evaluator_id: String,
        target_id: String,
    },
}

/// Why a unit was not applied: an expectation did not hold. Nothing of it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The request, evaluator or reputation moved on since it was read: read again.
    #[error("the state moved on since it was read")]
    Moved,
    /// The approval's signature was accepted before.
    #[error("the signature was accepted before")]
    SignatureUsed,
    /// The item was already served to the evaluator.
    #[error("the item was already served")]
    AlreadyServed,
}

/// The change a suite's row takes from one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteUpdate {
    pub suite: String,
    /// The evaluation's score when it passed the gate (the baseline becomes the higher of
    /// this and the current one); `None` leaves the baseline.
    pub passing_score: Option<f64>,
    pub request_id: String,
    pub eval_id: String,
    pub gate_passed: bool,
    pub passed_minimum: bool,
    pub regression: bool,
}

/// The request row a unit writes: a new request, or the next state of an existing one.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestWrite {
    pub row: RequestRow,
    pub insert: bool,
}

/// Everything one call writes.
#[derive(Debug, Clone, Default)]
pub struct Unit {
    pub expect: Vec<Expect>,
    pub request: Option<RequestWrite>,
    pub events: Vec<EventRow>,
    pub objects: Vec<ObjectRow>,
    pub approval: Option<ApprovalRow>,
    pub votes: Vec<VoteRow>,
    pub evaluator: Option<EvaluatorRow>,
    pub reputation: Option<ReputationRow>,
    pub suite: Option<SuiteUpdate>,
    pub gold_task: Option<GoldTaskRow>,
    pub item: Option<ItemRow>,
    /// Its audit entries, chained in order when the transaction commits.
    pub audit: Vec<AuditDraft>,
    /// When it happened (the audit entries' time).
    pub at: Option<OffsetDateTime>,
}

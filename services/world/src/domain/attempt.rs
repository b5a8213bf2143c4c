//! Attempts: one per `run_turn`. An attempt commits exactly one turn or fails and commits
//! nothing (D11); a process that dies while holding one leaves it `running` until recovery
//! marks it `interrupted`. The outcome decides the answer of `POST /worlds/{slug}/turns`.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use super::failure::{Failure, FailureClass};
use super::invocation::SourceTraceSummary;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    Running,
    Committed,
    Failed,
    Interrupted,
}

impl AttemptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Running => "running",
            AttemptStatus::Committed => "committed",
            AttemptStatus::Failed => "failed",
            AttemptStatus::Interrupted => "interrupted",
        }
    }
}

impl AttemptStatus {
    pub fn parse(text: &str) -> Option<AttemptStatus> {
        [
            AttemptStatus::Running,
            AttemptStatus::Committed,
            AttemptStatus::Failed,
            AttemptStatus::Interrupted,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// An attempt as stored and served, with the seed's summary fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptRecord {
    pub attempt_id: Uuid,
    pub world_slug: String,
    pub attempted_turn: u64,
    pub status: AttemptStatus,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub ended_at: Option<OffsetDateTime>,
    pub duration_ms: Option<u64>,
    /// The hash of the turn this attempt committed.
    pub committed_turn_hash: Option<String>,
    /// The process that held the world's lease.
    pub lease_owner: String,
    pub source_invocation_count: u32,
    pub last_source_invocation_id: Option<Uuid>,
    pub source_trace_summary: SourceTraceSummary,
}

/// How a request to run a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// Turn `turn` was committed.
    Committed { turn: u64 },
    /// The attempt failed; the world stays at its previous turn.
    Failed(Failure),
    /// Another attempt holds the world's lease; this one never started.
    LeaseHeld,
}

impl AttemptOutcome {
    /// 201 for a committed turn, the failure class's status (502 or 422) for a failed
    /// attempt, 409 when another attempt holds the lease.
    pub fn http_status(&self) -> http::StatusCode {
        match self {
            AttemptOutcome::Committed { .. } => http::StatusCode::CREATED,
            AttemptOutcome::Failed(failure) => failure.class.http_status(),
            AttemptOutcome::LeaseHeld => http::StatusCode::CONFLICT,
        }
    }

    /// The attempt's status, if one was started.
    pub fn status(&self) -> Option<AttemptStatus> {
        match self {
            AttemptOutcome::Committed { .. } => Some(AttemptStatus::Committed),
            AttemptOutcome::Failed(_) => Some(AttemptStatus::Failed),
            AttemptOutcome::LeaseHeld => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::failure::FailureClass;

    #[test]
    fn outcomes_answer_with_the_issues_statuses() {
        assert_eq!(
            AttemptOutcome::Committed { turn: 3 }.http_status().as_u16(),
            201
        );
        assert_eq!(AttemptOutcome::LeaseHeld.http_status().as_u16(), 409);
        assert_eq!(AttemptOutcome::LeaseHeld.status(), None);
        for class in FailureClass::ALL {
            let outcome = AttemptOutcome::Failed(Failure::new(class, "x"));
            let expected = if class == FailureClass::ModelOutputInvalid {
                422
            } else {
                502
            };
            assert_eq!(outcome.http_status().as_u16(), expected, "{class}");
            assert_eq!(outcome.status(), Some(AttemptStatus::Failed));
        }
        assert_eq!(AttemptStatus::Interrupted.as_str(), "interrupted");
    }
}

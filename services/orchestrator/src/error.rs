//! The orchestrator's failures, each knowing its `ErrorCode` and stable `Reason`.
//!
//! Domain errors convert into [`OrchestratorError`] once; the operations layer and the
//! store add their own variants. The REST mapping the gateway applies for the Cognitive
//! OS routes: `WRONG_STATE` → 409 with the current state and the allowed next calls;
//! `SCHEMA_VIOLATION` / `UNKNOWN_SCHEMA_VERSION` → 422 naming the field; an unknown
//! request → 404.

use noema_core::{ErrorCode, Failure, Reason, ServiceError};

use crate::domain::approval::ApprovalError;
use crate::domain::eval::EvalError;
use crate::domain::events::EventError;
use crate::domain::objects::ContentError;
use crate::domain::policy::PolicyError;
use crate::domain::schema::ObjectError;
use crate::domain::state::WrongState;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum OrchestratorError {
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error(transparent)]
    WrongState(#[from] WrongState),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// A stored history the state machine does not allow: corrupt data.
    #[error("stored events do not replay: {0}")]
    Replay(#[from] EventError),
    #[error(transparent)]
    Content(#[from] ContentError),
    /// An unknown request, trace, gold task, schema or evaluator.
    #[error("{0}")]
    NotFound(String),
    /// A request field the server cannot use (besides schema violations).
    #[error("{0}")]
    Invalid(String),
    /// The caller may not do this (evaluate as another evaluator, its own request).
    #[error("{0}")]
    NotPermitted(String),
    #[error("storage failed")]
    Store(#[from] StoreError),
    /// Identity refused or failed the approver-key check; its failure is passed on.
    #[error("identity: {}", .0.message)]
    Identity(Failure),
    /// The ledger refused or failed a write (anchoring, `noema.put_canonical`).
    #[error("ledger: {}", .0.message)]
    Ledger(Failure),
    /// Stored data that does not read back: a bug or tampering (details stay in the logs).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// Concurrent calls kept moving the request (or the evaluator, or the actor's
    /// reputation) between read and write.
    #[error("{0} is being changed by concurrent calls; retry")]
    Contended(String),
}

impl ServiceError for OrchestratorError {
    fn code(&self) -> ErrorCode {
        match self {
            OrchestratorError::Object(ObjectError::SchemasUnavailable(_))
            | OrchestratorError::Replay(_)
            | OrchestratorError::Content(_) => ErrorCode::Internal,
            OrchestratorError::NotFound(_) => ErrorCode::NotFound,
            OrchestratorError::Corrupt(_) => ErrorCode::Internal,
            OrchestratorError::Invalid(_) => ErrorCode::InvalidArgument,
            OrchestratorError::NotPermitted(_) => ErrorCode::PermissionDenied,
            OrchestratorError::Store(err) if err.is_unavailable() => ErrorCode::Unavailable,
            OrchestratorError::Store(_) => ErrorCode::Internal,
            OrchestratorError::Identity(failure) | OrchestratorError::Ledger(failure) => {
                failure.code
            }
            OrchestratorError::Contended(_) => ErrorCode::Unavailable,
            OrchestratorError::Object(_)
            | OrchestratorError::Policy(_)
            | OrchestratorError::Eval(_) => ErrorCode::InvalidArgument,
            OrchestratorError::WrongState(_) => ErrorCode::FailedPrecondition,
            OrchestratorError::Approval(err) => match err {
                ApprovalError::MalformedPublicKey(_)
                | ApprovalError::MalformedSignature(_)
                | ApprovalError::BadTimestamp { .. } => ErrorCode::InvalidArgument,
                ApprovalError::BadSignature { .. }
                | ApprovalError::KeyNotRegistered { .. }
                | ApprovalError::Replayed { .. }
                | ApprovalError::SelfApproval { .. }
                | ApprovalError::SameApprover { .. } => ErrorCode::PermissionDenied,
                ApprovalError::NotRequired { .. }
                | ApprovalError::FromTheFuture { .. }
                | ApprovalError::Expired { .. }
                | ApprovalError::ScopeNotCovered { .. }
                | ApprovalError::Missing { .. }
                | ApprovalError::NotEnoughApprovers { .. }
                | ApprovalError::Rejected { .. } => ErrorCode::FailedPrecondition,
            },
        }
    }

    fn reason(&self) -> Reason {
        match self {
            OrchestratorError::Object(ObjectError::UnknownSchemaVersion { .. }) => {
                Reason::UnknownSchemaVersion
            }
            OrchestratorError::Object(
                ObjectError::Invalid { .. } | ObjectError::NotAnObject { .. },
            ) => Reason::SchemaViolation,
            OrchestratorError::WrongState(_) => Reason::WrongState,
            OrchestratorError::Policy(_) => Reason::PolicyNotLoaded,
            OrchestratorError::Approval(_) => Reason::ApprovalRefused,
            OrchestratorError::Eval(EvalError::UnknownSuite { .. }) => Reason::UnknownEvalSuite,
            OrchestratorError::Identity(failure) | OrchestratorError::Ledger(failure) => {
                failure.reason
            }
            _ => Reason::generic(self.code()),
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            OrchestratorError::Object(err) => {
                let schema = match err {
                    ObjectError::NotAnObject { schema }
                    | ObjectError::UnknownSchemaVersion { schema, .. }
                    | ObjectError::Invalid { schema, .. } => Some(*schema),
                    ObjectError::SchemasUnavailable(_) => None,
                };
                schema
                    .map(|s| ("schema", s.to_owned()))
                    .into_iter()
                    .chain(err.field().map(|f| ("field", f.to_owned())))
                    .collect()
            }
            OrchestratorError::WrongState(err) => vec![
                ("state", err.state.as_str().to_owned()),
                ("call", err.call.as_str().to_owned()),
                (
                    "allowed",
                    err.allowed()
                        .iter()
                        .map(|c| c.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
            ],
            OrchestratorError::Policy(err) => err
                .field()
                .map(|f| vec![("field", f.to_owned())])
                .unwrap_or_default(),
            OrchestratorError::Approval(err) => vec![("check", err.check().to_owned())],
            OrchestratorError::Eval(EvalError::UnknownSuite { suite, .. }) => {
                vec![("suite", suite.clone())]
            }
            OrchestratorError::Replay(_)
            | OrchestratorError::Content(_)
            | OrchestratorError::NotFound(_)
            | OrchestratorError::Invalid(_)
            | OrchestratorError::NotPermitted(_)
            | OrchestratorError::Store(_)
            | OrchestratorError::Identity(_)
            | OrchestratorError::Ledger(_)
            | OrchestratorError::Corrupt(_)
            | OrchestratorError::Contended(_) => Vec::new(),
        }
    }
}

impl From<OrchestratorError> for tonic::Status {
    fn from(err: OrchestratorError) -> Self {
        noema_core::to_status(&err)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::schema::parse_plan;
    use crate::domain::state::{Call, State};
    use noema_core::Failure;

    fn round_trip(err: OrchestratorError) -> Failure {
        Failure::from_status(&tonic::Status::from(err))
    }

    #[test]
    fn wrong_state_carries_the_state_and_the_allowed_calls() {
        let err = State::Traced.check_call(Call::Execute).unwrap_err();
        let failure = round_trip(err.into());
        assert_eq!(failure.code, ErrorCode::FailedPrecondition);
        assert_eq!(failure.reason, Reason::WrongState);
        assert_eq!(failure.metadata["state"], "TRACED");
        assert_eq!(failure.metadata["call"], "execute");
        assert_eq!(failure.metadata["allowed"], "evaluate");
        assert_eq!(
            failure.message,
            "POST /execute is not allowed for a request in state TRACED; allowed next: POST /evaluate"
        );
    }

    #[test]
    fn schema_failures_name_the_field() {
        let err = parse_plan(&serde_json::json!({"schema_version": "0.1", "id": 5})).unwrap_err();
        let failure = round_trip(err.into());
        assert_eq!(failure.code, ErrorCode::InvalidArgument);
        assert_eq!(failure.reason, Reason::SchemaViolation);
        assert_eq!(failure.metadata["schema"], "plan");
        assert!(!failure.metadata["field"].is_empty());

        let err = parse_plan(&serde_json::json!({"schema_version": "9"})).unwrap_err();
        let failure = round_trip(err.into());
        assert_eq!(failure.reason, Reason::UnknownSchemaVersion);
        assert_eq!(failure.metadata["field"], "schema_version");
        assert!(failure.message.contains("\"9\""), "{}", failure.message);
    }

    #[test]
    fn approval_failures_say_which_check_failed() {
        let failure = round_trip(
            ApprovalError::BadSignature {
                request_id: "r".into(),
            }
            .into(),
        );
        assert_eq!(failure.code, ErrorCode::PermissionDenied);
        assert_eq!(failure.reason, Reason::ApprovalRefused);
        assert_eq!(failure.metadata["check"], "bad_signature");
        let failure = round_trip(
            ApprovalError::Expired {
                approval_id: "a".into(),
                expired_at: "t".into(),
            }
            .into(),
        );
        assert_eq!(failure.code, ErrorCode::FailedPrecondition);
        assert_eq!(failure.metadata["check"], "expired");
    }

    #[test]
    fn policy_and_suite_failures() {
        let failure = round_trip(PolicyError::Missing("/p.json".into()).into());
        assert_eq!(failure.reason, Reason::PolicyNotLoaded);
        assert!(failure.message.starts_with("risk matrix not loaded"));
        let failure = round_trip(
            EvalError::UnknownSuite {
                suite: "x".into(),
                declared: vec!["default".into()],
            }
            .into(),
        );
        assert_eq!(failure.reason, Reason::UnknownEvalSuite);
        assert_eq!(failure.metadata["suite"], "x");
        // Corrupt histories are internal: the details stay in the logs.
        let failure = round_trip(EventError::Empty.into());
        assert_eq!(failure.code, ErrorCode::Internal);
        assert_eq!(failure.message, "internal error");
    }
}

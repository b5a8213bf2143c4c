//! The orchestrator's (Cognitive OS) error body: `{"code", "error", "reason"}` plus what the
//! caller acts on. A call the request's state does not allow is 409 with the current
//! `state` and the calls `allowed_next`; a malformed object (or an unknown schema version,
//! suite, or a policy that does not load) is 422 naming the `field`; a refused approval
//! says which `check` failed; an unknown request is 404.

use axum::http::StatusCode;
use noema_core::{Failure, Reason};
use schemars::JsonSchema;
use serde::Serialize;

/// The orchestrator's error body.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CognitiveOsError {
    /// The failure's category (as in Noema's own body).
    pub code: &'static str,
    /// What went wrong and what to fix.
    pub error: String,
    /// The stable reason to decide on (`WRONG_STATE`, `SCHEMA_VIOLATION`, …).
    pub reason: &'static str,
    /// WRONG_STATE: the request's current state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// WRONG_STATE: the calls the request accepts now (`risk`, `approve`, `execute`,
    /// `evaluate`, `reward_update`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_next: Option<Vec<String>>,
    /// A malformed document: the field at fault (`steps[0].tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// A malformed document: its schema (`plan`, `approval`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// APPROVAL_REFUSED: the check that failed (`bad_signature`, `expired`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// UNKNOWN_EVAL_SUITE: the suite named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
}

pub fn render(failure: &Failure) -> (StatusCode, CognitiveOsError) {
    let status = match failure.reason {
        Reason::WrongState => StatusCode::CONFLICT,
        Reason::SchemaViolation
        | Reason::UnknownSchemaVersion
        | Reason::UnknownEvalSuite
        | Reason::PolicyNotLoaded => StatusCode::UNPROCESSABLE_ENTITY,
        _ => failure.code.http_status(),
    };
    let meta = |key: &str| failure.metadata.get(key).cloned();
    (
        status,
        CognitiveOsError {
            code: failure.code.as_str(),
            error: failure.message.clone(),
            reason: failure.reason.as_str(),
            state: meta("state"),
            allowed_next: meta("allowed").map(|allowed| {
                allowed
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect()
            }),
            field: meta("field"),
            schema: meta("schema"),
            check: meta("check"),
            suite: meta("suite"),
        },
    )
}

#[cfg(test)]
mod tests {
    use noema_core::{ErrorCode, Failure, Reason};

    use crate::error::ErrorStyle;
    use crate::error::tests::rendered;

    #[test]
    fn wrong_state_is_409_with_the_state_and_the_calls_allowed() {
        let mut failure = Failure::new(
            ErrorCode::FailedPrecondition,
            "POST /execute is not allowed for a request in state TRACED; allowed next: POST /evaluate",
        )
        .with_reason(Reason::WrongState);
        failure.metadata.insert("state".into(), "TRACED".into());
        failure.metadata.insert("call".into(), "execute".into());
        failure.metadata.insert("allowed".into(), "evaluate".into());
        assert_eq!(
            rendered(ErrorStyle::CognitiveOs, &failure),
            (
                409,
                "{\"code\":\"failed_precondition\",\"error\":\"POST /execute is not allowed for a \
                 request in state TRACED; allowed next: POST /evaluate\",\"reason\":\"WRONG_STATE\",\
                 \"state\":\"TRACED\",\"allowed_next\":[\"evaluate\"]}\n"
                    .into()
            )
        );
        // A final state allows nothing.
        failure.metadata.insert("allowed".into(), String::new());
        let (_, body) = rendered(ErrorStyle::CognitiveOs, &failure);
        assert!(body.contains("\"allowed_next\":[]"), "{body}");
    }

    #[test]
    fn malformed_objects_are_422_naming_the_field_and_unknown_requests_404() {
        let mut failure = Failure::new(
            ErrorCode::InvalidArgument,
            "plan is invalid: field steps[0].tool: 5 is not of type \"string\"",
        )
        .with_reason(Reason::SchemaViolation);
        failure.metadata.insert("schema".into(), "plan".into());
        failure
            .metadata
            .insert("field".into(), "steps[0].tool".into());
        let (status, body) = rendered(ErrorStyle::CognitiveOs, &failure);
        assert_eq!(status, 422);
        assert!(
            body.contains("\"field\":\"steps[0].tool\",\"schema\":\"plan\""),
            "{body}"
        );
        let version = Failure::new(ErrorCode::InvalidArgument, "unknown schema_version \"9\"")
            .with_reason(Reason::UnknownSchemaVersion);
        assert_eq!(rendered(ErrorStyle::CognitiveOs, &version).0, 422);
        let missing = Failure::new(ErrorCode::NotFound, "request \"r\" not found");
        assert_eq!(
            rendered(ErrorStyle::CognitiveOs, &missing),
            (
                404,
                "{\"code\":\"not_found\",\"error\":\"request \\\"r\\\" not found\",\"reason\":\"NOT_FOUND\"}\n"
                    .into()
            )
        );
        let mut refused = Failure::new(
            ErrorCode::PermissionDenied,
            "the public key is not registered to approver human:bob",
        )
        .with_reason(Reason::ApprovalRefused);
        refused
            .metadata
            .insert("check".into(), "key_not_registered".into());
        let (status, body) = rendered(ErrorStyle::CognitiveOs, &refused);
        assert_eq!(status, 403);
        assert!(
            body.ends_with("\"check\":\"key_not_registered\"}\n"),
            "{body}"
        );
    }
}

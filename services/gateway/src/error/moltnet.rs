//! MoltNet's RFC 9457 problem details (plus `error`, the text Noema's other routes
//! carry). MoltNet answers state conflicts 409 and masks the detail of server errors;
//! the signing-request failures, a reused signature and the pending-request limit have
//! MoltNet's own problem types, chosen here by their reasons.

use axum::http::StatusCode;
use noema_core::error::{PENDING_SIGNING_REQUESTS, QUOTA_KEY};
use noema_core::{ErrorCode, Failure, Reason};
use schemars::JsonSchema;
use serde::Serialize;

/// A MoltNet problem.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MoltNetProblem {
    /// MoltNet's code for the status (`VALIDATION_FAILED`, `NOT_FOUND`, `CONFLICT`, …).
    pub code: &'static str,
    /// On 409: the constraint and resource in conflict, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflict: Option<Conflict>,
    /// What went wrong (masked for server errors).
    pub detail: String,
    /// The same text as `detail`.
    pub error: String,
    /// On 429: seconds until a retry can succeed.
    #[serde(rename = "retryAfter", skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The HTTP status.
    pub status: u16,
    /// The problem type's title.
    pub title: &'static str,
    /// The problem type: `https://themolt.net/problems/<slug>`.
    #[serde(rename = "type")]
    pub problem_type: String,
}

/// MoltNet's description of a conflict.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Conflict {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<ConflictTarget>,
}

/// The kind of resource in conflict.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConflictTarget {
    pub resource: &'static str,
}

/// MoltNet's problem slug, title and code for an HTTP status.
fn by_status(status: u16) -> (&'static str, &'static str, &'static str) {
    match status {
        400 => (
            "validation-failed",
            "Validation Failed",
            "VALIDATION_FAILED",
        ),
        401 => ("unauthorized", "Unauthorized", "UNAUTHORIZED"),
        403 => ("forbidden", "Forbidden", "FORBIDDEN"),
        404 => ("not-found", "Not Found", "NOT_FOUND"),
        409 => ("conflict", "Conflict", "CONFLICT"),
        422 => (
            "unprocessable-entity",
            "Unprocessable Entity",
            "UNPROCESSABLE_ENTITY",
        ),
        429 => (
            "rate-limit-exceeded",
            "Too Many Requests",
            "RATE_LIMIT_EXCEEDED",
        ),
        503 => (
            "service-unavailable",
            "Service Unavailable",
            "SERVICE_UNAVAILABLE",
        ),
        _ => (
            "internal-server-error",
            "Internal Server Error",
            "INTERNAL_SERVER_ERROR",
        ),
    }
}

/// MoltNet's own problem type (slug and title) for a failure that has one.
fn by_reason(failure: &Failure) -> Option<(&'static str, &'static str)> {
    match failure.reason {
        Reason::SigningRequestExpired => {
            Some(("signing-request-expired", "Signing Request Expired"))
        }
        Reason::SigningRequestCompleted => Some((
            "signing-request-already-completed",
            "Signing Request Already Completed",
        )),
        Reason::RateLimited
            if failure.metadata_value(QUOTA_KEY) == Some(PENDING_SIGNING_REQUESTS) =>
        {
            Some((
                "signing-request-limit-reached",
                "Signing Request Limit Reached",
            ))
        }
        _ => None,
    }
}

pub fn render(failure: &Failure) -> (StatusCode, MoltNetProblem) {
    let code = match failure.code {
        ErrorCode::FailedPrecondition => ErrorCode::AlreadyExists,
        code => code,
    };
    let status = code.http_status();
    let (slug, title, problem_code) = by_status(status.as_u16());
    let (slug, title) = by_reason(failure).unwrap_or((slug, title));
    let detail = if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
        "An unexpected error occurred".to_owned()
    } else {
        failure.message.clone()
    };
    let conflict = (status == StatusCode::CONFLICT).then(|| match failure.reason {
        Reason::SignatureReused => Conflict {
            constraint: Some("diary_entries_content_signature_unique_idx"),
            target: Some(ConflictTarget {
                resource: "diary-entry",
            }),
        },
        _ => Conflict::default(),
    });
    (
        status,
        MoltNetProblem {
            code: problem_code,
            conflict,
            error: detail.clone(),
            detail,
            retry_after: failure.retry_after.map(|delay| delay.as_secs()),
            status: status.as_u16(),
            title,
            problem_type: format!("https://themolt.net/problems/{slug}"),
        },
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use noema_core::error::{PENDING_SIGNING_REQUESTS, QUOTA_KEY, QUOTA_LIMIT_KEY};
    use noema_core::{ErrorCode, Failure, Reason};

    use crate::error::tests::rendered;
    use crate::error::{ApiError, ErrorStyle};

    fn moltnet(failure: &Failure) -> (u16, String) {
        rendered(ErrorStyle::MoltNet, failure)
    }

    #[test]
    fn signing_request_failures_get_moltnets_problem_types_by_reason() {
        let expired = Failure::new(
            ErrorCode::FailedPrecondition,
            "This signing request has expired",
        )
        .with_reason(Reason::SigningRequestExpired);
        assert_eq!(
            moltnet(&expired),
            (
                409,
                "{\"code\":\"CONFLICT\",\"conflict\":{},\
                 \"detail\":\"This signing request has expired\",\
                 \"error\":\"This signing request has expired\",\"status\":409,\
                 \"title\":\"Signing Request Expired\",\
                 \"type\":\"https://themolt.net/problems/signing-request-expired\"}\n"
                    .into()
            )
        );
        let completed = Failure::new(ErrorCode::FailedPrecondition, "any text at all")
            .with_reason(Reason::SigningRequestCompleted);
        let (status, body) = moltnet(&completed);
        assert_eq!(status, 409);
        assert!(body.contains(
            "\"type\":\"https://themolt.net/problems/signing-request-already-completed\""
        ));
        assert!(body.contains("\"title\":\"Signing Request Already Completed\""));
    }

    #[test]
    fn the_pending_limit_says_when_to_retry_from_retry_info() {
        let mut limit = Failure::new(
            ErrorCode::ResourceExhausted,
            "Signing request limit reached: at most 10 pending requests per agent; \
             retry after 42 seconds",
        )
        .with_reason(Reason::RateLimited)
        .with_metadata(QUOTA_KEY, PENDING_SIGNING_REQUESTS)
        .with_metadata(QUOTA_LIMIT_KEY, "10");
        limit.retry_after = Some(Duration::from_secs(42));
        assert_eq!(
            moltnet(&limit),
            (
                429,
                "{\"code\":\"RATE_LIMIT_EXCEEDED\",\
                 \"detail\":\"Signing request limit reached: at most 10 pending requests per agent; retry after 42 seconds\",\
                 \"error\":\"Signing request limit reached: at most 10 pending requests per agent; retry after 42 seconds\",\
                 \"retryAfter\":42,\"status\":429,\"title\":\"Signing Request Limit Reached\",\
                 \"type\":\"https://themolt.net/problems/signing-request-limit-reached\"}\n"
                    .into()
            )
        );
        // Another quota is a plain rate limit, whatever its text says.
        let mut other = Failure::new(
            ErrorCode::ResourceExhausted,
            "Signing request limit reached; retry after 5 seconds",
        )
        .with_reason(Reason::RateLimited)
        .with_metadata(QUOTA_KEY, "requests");
        other.retry_after = Some(Duration::from_secs(5));
        let (_, body) = moltnet(&other);
        assert!(body.contains("\"type\":\"https://themolt.net/problems/rate-limit-exceeded\""));
        assert!(body.contains("\"retryAfter\":5"));
    }

    #[test]
    fn a_reused_signature_names_the_constraint() {
        let reused =
            Failure::new(ErrorCode::AlreadyExists, "reused").with_reason(Reason::SignatureReused);
        let (status, body) = moltnet(&reused);
        assert_eq!(status, 409);
        assert!(
            body.contains(
                "\"conflict\":{\"constraint\":\"diary_entries_content_signature_unique_idx\",\
                 \"target\":{\"resource\":\"diary-entry\"}}"
            ),
            "{body}"
        );
        // The same text without the reason is an ordinary conflict.
        let plain = Failure::new(
            ErrorCode::AlreadyExists,
            "This signing request has already been used to create an entry",
        );
        assert!(moltnet(&plain).1.contains("\"conflict\":{}"));
    }

    #[test]
    fn validation_not_found_and_server_errors() {
        let (status, body) = moltnet(&ApiError::malformed_body("invalid JSON: EOF").0);
        assert_eq!(status, 400);
        assert_eq!(
            body,
            "{\"code\":\"VALIDATION_FAILED\",\"detail\":\"invalid JSON: EOF\",\
             \"error\":\"invalid JSON: EOF\",\"status\":400,\"title\":\"Validation Failed\",\
             \"type\":\"https://themolt.net/problems/validation-failed\"}\n"
        );
        let (status, body) = moltnet(&Failure::new(ErrorCode::NotFound, "no such diary"));
        assert_eq!(status, 404);
        assert!(body.contains("\"code\":\"NOT_FOUND\""));
        let (status, body) = moltnet(&Failure::new(ErrorCode::Internal, "secret cause"));
        assert_eq!(status, 500);
        assert!(!body.contains("secret cause"));
        assert!(body.contains("\"detail\":\"An unexpected error occurred\""));
        let (status, body) = moltnet(&Failure::new(ErrorCode::Unavailable, "retry later"));
        assert_eq!(status, 503);
        assert!(body.contains("\"detail\":\"retry later\""));
    }
}

//! CogniRelay's error body: FastAPI's `{"detail": …}` plus `error` and `code`. FastAPI
//! answers a body it cannot parse with 422 (its request validation error), which Noema
//! reports as a failed precondition.

use axum::http::StatusCode;
use noema_core::{ErrorCode, Failure, Reason};
use schemars::JsonSchema;
use serde::Serialize;

/// CogniRelay's error body.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CogniRelayError {
    /// The failure's category (as in Noema's own body).
    pub code: &'static str,
    /// What went wrong (FastAPI's field).
    pub detail: String,
    /// The same text, as Noema's other routes name it.
    pub error: String,
}

pub fn render(failure: &Failure) -> (StatusCode, CogniRelayError) {
    let code = match failure.reason {
        Reason::MalformedBody => ErrorCode::FailedPrecondition,
        _ => failure.code,
    };
    (
        code.http_status(),
        CogniRelayError {
            code: code.as_str(),
            detail: failure.message.clone(),
            error: failure.message.clone(),
        },
    )
}

#[cfg(test)]
mod tests {
    use noema_core::{ErrorCode, Failure};

    use crate::error::tests::rendered;
    use crate::error::{ApiError, ErrorStyle};

    #[test]
    fn detail_repeats_the_message_and_malformed_bodies_are_422() {
        let denied = Failure::new(ErrorCode::PermissionDenied, "missing scope: identity:admin");
        assert_eq!(
            rendered(ErrorStyle::CogniRelay, &denied),
            (
                403,
                "{\"code\":\"permission_denied\",\"detail\":\"missing scope: identity:admin\",\
                 \"error\":\"missing scope: identity:admin\"}\n"
                    .into()
            )
        );
        let malformed = ApiError::malformed_body("invalid JSON: EOF").0;
        assert_eq!(
            rendered(ErrorStyle::CogniRelay, &malformed),
            (
                422,
                "{\"code\":\"failed_precondition\",\"detail\":\"invalid JSON: EOF\",\
                 \"error\":\"invalid JSON: EOF\"}\n"
                    .into()
            )
        );
        let bad_time = ApiError::invalid("expires_at must be an RFC 3339 timestamp").0;
        assert_eq!(rendered(ErrorStyle::CogniRelay, &bad_time).0, 400);
    }
}

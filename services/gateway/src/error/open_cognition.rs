//! open-cognition's error body: `{"code", "error"}` plus `hint`. The original answers
//! every validation failure 422 (a query filter it cannot read included), except a
//! body it cannot decode (400).

use axum::http::StatusCode;
use noema_core::{ErrorCode, Failure, Reason};
use schemars::JsonSchema;
use serde::Serialize;

/// open-cognition's error body.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OpenCognitionError {
    /// The failure's category (as in Noema's own body).
    pub code: &'static str,
    /// open-cognition's message.
    pub error: String,
    /// How to fix the request, where there is a known fix (e.g. signature problems).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

pub fn render(failure: &Failure) -> (StatusCode, OpenCognitionError) {
    let status = match (failure.code, failure.reason) {
        (ErrorCode::InvalidArgument, Reason::MalformedBody) => StatusCode::BAD_REQUEST,
        (ErrorCode::InvalidArgument, _) => StatusCode::UNPROCESSABLE_ENTITY,
        (code, _) => code.http_status(),
    };
    (
        status,
        OpenCognitionError {
            code: failure.code.as_str(),
            error: failure.message.clone(),
            hint: failure.hint.clone(),
        },
    )
}

#[cfg(test)]
mod tests {
    use noema_core::{ErrorCode, Failure, Reason};

    use crate::error::tests::rendered;
    use crate::error::{ApiError, ErrorStyle};

    #[test]
    fn validation_is_422_with_its_hint_and_undecodable_input_is_400() {
        let mut mismatch = Failure::new(ErrorCode::InvalidArgument, "public key mismatch")
            .with_reason(Reason::PublicKeyMismatch);
        mismatch.hint = Some("resubmit with the original key".into());
        assert_eq!(
            rendered(ErrorStyle::OpenCognition, &mismatch),
            (
                422,
                "{\"code\":\"invalid_argument\",\"error\":\"public key mismatch\",\
                 \"hint\":\"resubmit with the original key\"}\n"
                    .into()
            )
        );
        let body = ApiError::malformed_body("invalid JSON: EOF").0;
        assert_eq!(
            rendered(ErrorStyle::OpenCognition, &body),
            (
                400,
                "{\"code\":\"invalid_argument\",\"error\":\"invalid JSON: EOF\"}\n".into()
            )
        );
        let query = ApiError::malformed_query("created_after must be RFC 3339").0;
        assert_eq!(rendered(ErrorStyle::OpenCognition, &query).0, 422);
    }

    #[test]
    fn stopped_and_duplicates_keep_their_codes_statuses() {
        assert_eq!(
            rendered(ErrorStyle::OpenCognition, &ApiError::stopped().0),
            (
                503,
                "{\"code\":\"unavailable\",\"error\":\"system is STOPPED; no writes accepted\"}\n"
                    .into()
            )
        );
        let duplicate = Failure::new(
            ErrorCode::AlreadyExists,
            "canonical object with this id already exists",
        );
        assert_eq!(rendered(ErrorStyle::OpenCognition, &duplicate).0, 409);
    }
}

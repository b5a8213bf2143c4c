//! CogniRelay's error body: FastAPI's `{"detail": …}` plus `error` and `code`. FastAPI
//! answers a body it cannot parse with 422 (its request validation error), which Noema
//! reports as a failed precondition.
//!
//! A service that reproduces CogniRelay's refusals exactly (continuity: pydantic's 422 lists
//! echoing the input in its key order, object details of lock timeouts) sends the original
//! status and body in the failure's metadata; those are answered byte for byte.

use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use noema_core::error::{ORIGINAL_BODY_KEY, ORIGINAL_STATUS_KEY, REQUIRED_SCOPE_KEY};
use noema_core::{ErrorCode, Failure, Reason, scopes};
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

/// Every error body CogniRelay's routes answer, as the OpenAPI document describes it:
/// [`CogniRelayError`], the original's bare `{"detail": "…"}` for a token's 401, and the
/// original's structured 422s that the continuity service reproduces byte for byte
/// (FastAPI's list of field errors, or an object naming the field and a code), so `detail`
/// may be any JSON value and `code` and `error` may be absent
/// (`shared/compat/cognirelay.md` fixes these shapes; the document follows them).
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "CogniRelayError")]
#[allow(dead_code)] // describes bodies for the document; never built
pub struct CogniRelayErrorShapes {
    /// The failure's category, on the bodies Noema writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<String>,
    /// What went wrong: a text, or the original's structured detail.
    detail: serde_json::Value,
    /// The detail's text, on the bodies Noema writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// CogniRelay's 401 detail for an unauthenticated request, by the failure's reason.
fn unauthenticated_detail(reason: Reason) -> &'static str {
    match reason {
        Reason::TokenMissing => "Missing Authorization header",
        Reason::TokenMalformed => "Invalid Authorization header",
        Reason::TokenRevoked => "Token revoked",
        Reason::TokenExpired => "Token expired",
        _ => "Invalid token",
    }
}

/// The response for `failure`: the original's own status and body when the service sent
/// them, its exact `{"detail"}` for a token's 401, else [`render`]'s body.
pub fn response(failure: &Failure) -> Response {
    // A service's own 401 (a signed envelope that does not verify) carries its body.
    let own_body = failure.metadata_value(ORIGINAL_BODY_KEY).is_some();
    if failure.code == ErrorCode::Unauthenticated && !own_body {
        return bare_detail(
            StatusCode::UNAUTHORIZED,
            unauthenticated_detail(failure.reason),
        );
    }
    // A token without the route's scope, refused before the service looked at the request:
    // the original's `Missing scope: <s>`, naming its own scope.
    if failure.reason == Reason::ScopeMissing && !own_body {
        let required = failure
            .metadata_value(REQUIRED_SCOPE_KEY)
            .unwrap_or_default();
        let detail = format!("Missing scope: {}", scopes::cognirelay_scope(required));
        return bare_detail(StatusCode::FORBIDDEN, &detail);
    }
    let original = failure.metadata_value(ORIGINAL_BODY_KEY).zip(
        failure
            .metadata_value(ORIGINAL_STATUS_KEY)
            .and_then(|s| s.parse::<u16>().ok())
            .and_then(|s| StatusCode::from_u16(s).ok()),
    );
    match original {
        Some((body, status)) => (
            status,
            [(CONTENT_TYPE, "application/json")],
            body.to_owned(),
        )
            .into_response(),
        None => {
            let (status, body) = render(failure);
            (status, crate::go_json::GoJson(body)).into_response()
        }
    }
}

/// FastAPI's `HTTPException` body: `{"detail": "…"}` alone.
fn bare_detail(status: StatusCode, detail: &str) -> Response {
    let body = serde_json::json!({ "detail": detail });
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
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
#[allow(clippy::unwrap_used)]
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

    #[tokio::test]
    async fn a_missing_scope_names_cognirelays_scope_in_its_bare_detail() {
        for (required, detail) in [
            (
                "continuity:write|write:projects",
                "Missing scope: write:projects",
            ),
            ("identity:admin", "Missing scope: admin:peers"),
        ] {
            let failure = Failure::new(ErrorCode::PermissionDenied, "missing scope")
                .with_reason(noema_core::Reason::ScopeMissing)
                .with_metadata(noema_core::error::REQUIRED_SCOPE_KEY, required);
            let response = ErrorStyle::CogniRelay.render(&failure);
            assert_eq!(response.status().as_u16(), 403);
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            assert_eq!(bytes, format!(r#"{{"detail":"{detail}"}}"#).as_bytes());
        }
    }

    #[tokio::test]
    async fn the_services_original_body_is_sent_as_it_is() {
        let body = r#"{"detail":[{"type":"missing","loc":["body","capsule"],"msg":"Field required","input":{"b":1,"a":2.0}}]}"#;
        let failure = Failure::new(ErrorCode::FailedPrecondition, "request validation failed")
            .with_metadata(noema_core::error::ORIGINAL_STATUS_KEY, "422")
            .with_metadata(noema_core::error::ORIGINAL_BODY_KEY, body);
        let response = ErrorStyle::CogniRelay.render(&failure);
        assert_eq!(response.status().as_u16(), 422);
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(bytes, body.as_bytes());
        // Without the original's body, the generic shape.
        let plain = Failure::new(ErrorCode::NotFound, "no such thing");
        let response = ErrorStyle::CogniRelay.render(&plain);
        assert_eq!(response.status().as_u16(), 404);
    }
}

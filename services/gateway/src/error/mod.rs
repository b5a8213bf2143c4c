//! REST errors: a failure (a downstream gRPC status read back with its reason, or the
//! gateway's own refusal) rendered in the body shape of the system whose route was
//! called. Each system's renderer is one module here and decides on the failure's code,
//! reason and metadata, never on its message text.
//!
//! A handler returns `Err(ApiError)` without knowing its route's conventions: the route
//! declaration (`crate::route`) names the [`ErrorStyle`] and re-renders the failure
//! on the way out.

mod cognirelay;
mod cognitive_os;
mod moltnet;
mod noema;
mod open_cognition;

use axum::extract::State;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use noema_core::{ErrorCode, Failure, Reason};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;

pub use cognirelay::CogniRelayError;
pub use cognitive_os::CognitiveOsError;
pub use moltnet::MoltNetProblem;
pub use noema::NoemaError;
pub use open_cognition::OpenCognitionError;

use crate::go_json::GoJson;

/// Whose error conventions a route follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStyle {
    /// `{"error", "code"}`.
    Noema,
    /// open-cognition: `{"error", "code"}` plus `hint` where it has one; validation
    /// failures are 422, as the original answers them.
    OpenCognition,
    /// RFC 9457 problem details as MoltNet writes them, plus `error`.
    MoltNet,
    /// FastAPI's `{"detail": …}` as CogniRelay writes it, plus `error` and `code`.
    CogniRelay,
    /// The orchestrator's (Cognitive OS): `{"code", "error", "reason"}`, 409 with the state
    /// and the calls allowed next, 422 naming the field.
    CognitiveOs,
}

impl ErrorStyle {
    /// The response for `failure` in this system's conventions; a failure that says when
    /// to retry (a rate limit) says it in `Retry-After` too, whatever the body's shape.
    pub fn render(self, failure: &Failure) -> Response {
        let mut response = match self {
            ErrorStyle::Noema => json(noema::render(failure)),
            ErrorStyle::OpenCognition => json(open_cognition::render(failure)),
            ErrorStyle::MoltNet => json(moltnet::render(failure)),
            ErrorStyle::CogniRelay => cognirelay::response(failure),
            ErrorStyle::CognitiveOs => json(cognitive_os::render(failure)),
        };
        if let Some(delay) = failure.retry_after {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(delay.as_secs()));
        }
        response
    }

    /// The JSON Schema of this system's error body, for the OpenAPI document.
    pub fn schema(self, generator: &mut SchemaGenerator) -> Schema {
        match self {
            ErrorStyle::Noema => generator.subschema_for::<NoemaError>(),
            ErrorStyle::OpenCognition => generator.subschema_for::<OpenCognitionError>(),
            ErrorStyle::MoltNet => generator.subschema_for::<MoltNetProblem>(),
            ErrorStyle::CogniRelay => {
                generator.subschema_for::<cognirelay::CogniRelayErrorShapes>()
            }
            ErrorStyle::CognitiveOs => generator.subschema_for::<CognitiveOsError>(),
        }
    }

    /// Error statuses every route of this system documents besides the common ones: the
    /// seed's own validation status.
    pub fn validation_status(self) -> Option<(u16, &'static str)> {
        match self {
            ErrorStyle::OpenCognition => Some((422, "Invalid object or reference")),
            ErrorStyle::CogniRelay => Some((422, "Malformed request body")),
            ErrorStyle::CognitiveOs => Some((422, "A malformed object, naming the field")),
            ErrorStyle::Noema | ErrorStyle::MoltNet => None,
        }
    }
}

fn json<T: Serialize + JsonSchema>((status, body): (StatusCode, T)) -> Response {
    (status, GoJson(body)).into_response()
}

/// A failed request: what went wrong, in transport-neutral terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError(pub Failure);

impl ApiError {
    /// A request body the gateway cannot decode into the route's request type (400,
    /// or 422 where the seed system says so).
    pub fn malformed_body(message: impl Into<String>) -> Self {
        ApiError(
            Failure::new(ErrorCode::InvalidArgument, message).with_reason(Reason::MalformedBody),
        )
    }

    /// A query parameter the gateway cannot read (400; open-cognition's validation 422).
    pub fn malformed_query(message: impl Into<String>) -> Self {
        ApiError(
            Failure::new(ErrorCode::InvalidArgument, message).with_reason(Reason::MalformedQuery),
        )
    }

    /// A value the gateway refuses before calling a service.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError(Failure::new(ErrorCode::InvalidArgument, message))
    }

    /// Writes are halted: the ledger's STOPPED failure, said by the gateway.
    pub fn stopped() -> Self {
        ApiError(
            Failure::new(ErrorCode::Unavailable, noema_core::STOPPED_MESSAGE)
                .with_reason(Reason::SystemStopped),
        )
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        let mut failure = Failure::from_status(&status);
        // A peer that cannot be reached says so in transport terms, or not at all.
        if failure.code == ErrorCode::Unavailable && failure.message.is_empty() {
            failure.message = "service unavailable".to_owned();
        }
        if failure.code == ErrorCode::Internal {
            tracing::error!(grpc_code = ?status.code(), message = %status.message(), "downstream call failed");
        }
        ApiError(failure)
    }
}

/// Carries the failure of a rendered error response to the route's style layer.
#[derive(Debug, Clone)]
struct Unstyled(Failure);

impl IntoResponse for ApiError {
    /// Noema's own shape; the route's layer ([`restyle`]) renders it again in the
    /// route's system's shape.
    fn into_response(self) -> Response {
        let mut response = ErrorStyle::Noema.render(&self.0);
        response.extensions_mut().insert(Unstyled(self.0));
        response
    }
}

/// Renders an error response in the route's style (a per-route response layer).
pub async fn restyle(State(style): State<ErrorStyle>, mut response: Response) -> Response {
    match response.extensions_mut().remove::<Unstyled>() {
        Some(Unstyled(failure)) if style != ErrorStyle::Noema => style.render(&failure),
        _ => response,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// The status and exact body text `style` renders for `failure`.
    pub fn rendered(style: ErrorStyle, failure: &Failure) -> (u16, String) {
        let (status, body) = match style {
            ErrorStyle::Noema => text(noema::render(failure)),
            ErrorStyle::OpenCognition => text(open_cognition::render(failure)),
            ErrorStyle::MoltNet => text(moltnet::render(failure)),
            ErrorStyle::CogniRelay => text(cognirelay::render(failure)),
            ErrorStyle::CognitiveOs => text(cognitive_os::render(failure)),
        };
        (status.as_u16(), body)
    }

    fn text<T: Serialize>((status, body): (StatusCode, T)) -> (StatusCode, String) {
        (status, crate::go_json::to_go_json(&body).unwrap())
    }

    #[test]
    fn noemas_own_shape_is_error_and_code() {
        let failure = Failure::new(ErrorCode::NotFound, "no agent \"a\"");
        assert_eq!(
            rendered(ErrorStyle::Noema, &failure),
            (
                404,
                "{\"code\":\"not_found\",\"error\":\"no agent \\\"a\\\"\"}\n".into()
            )
        );
        let mut hinted = ApiError::malformed_body("invalid JSON: EOF").0;
        hinted.hint = Some("never shown here".into());
        assert_eq!(
            rendered(ErrorStyle::Noema, &hinted),
            (
                400,
                "{\"code\":\"invalid_argument\",\"error\":\"invalid JSON: EOF\"}\n".into()
            )
        );
    }

    #[test]
    fn a_transport_failure_without_text_says_unavailable() {
        let error = ApiError::from(tonic::Status::unavailable(""));
        assert_eq!(error.0.message, "service unavailable");
        assert_eq!(error.0.reason, Reason::Unavailable);
    }
}

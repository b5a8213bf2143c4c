//! REST errors: a downstream gRPC status mapped back to HTTP, in the body shape of the
//! system whose route was called. Noema's own shape is `{"error", "code"}`; the seed
//! systems' shapes add their fields (open-cognition's `hint`, MoltNet's RFC 9457 problem
//! fields, CogniRelay's `detail`).

use axum::response::{IntoResponse, Response};
use noema_core::ErrorCode;
use serde_json::{Map, Value, json};

use crate::go_json::GoJson;

/// Whose error conventions a route follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStyle {
    /// `{"error", "code"}`.
    Noema,
    /// open-cognition: `{"error", "code"}` plus `hint` where it has one; validation
    /// failures (INVALID_ARGUMENT) are 422, as the original answers them.
    OpenCognition,
    /// RFC 9457 problem details as MoltNet writes them, plus `error`.
    MoltNet,
    /// FastAPI's `{"detail": …}` as CogniRelay writes it, plus `error` and `code`.
    CogniRelay,
}

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub style: ErrorStyle,
    /// Extra body fields (e.g. open-cognition's `hint`).
    pub extra: Map<String, Value>,
    /// A status the gateway itself decided (e.g. 400 for a body it could not decode),
    /// which the style must not remap.
    pub status: Option<axum::http::StatusCode>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            style: ErrorStyle::Noema,
            extra: Map::new(),
            status: None,
        }
    }

    /// A 400 for a request the gateway could not read, whatever the route's style.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            status: Some(axum::http::StatusCode::BAD_REQUEST),
            ..ApiError::new(ErrorCode::InvalidArgument, message)
        }
    }

    pub fn styled(mut self, style: ErrorStyle) -> Self {
        self.style = style;
        self
    }
}

/// `result.styled(ErrorStyle::MoltNet)?` in handlers of a seed system's routes.
pub trait Styled<T> {
    fn styled(self, style: ErrorStyle) -> Result<T, ApiError>;
}

impl<T, E: Into<ApiError>> Styled<T> for Result<T, E> {
    fn styled(self, style: ErrorStyle) -> Result<T, ApiError> {
        self.map_err(|e| e.into().styled(style))
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        let code = ErrorCode::from_grpc(status.code());
        let message = match code {
            // A peer that cannot be reached says so in transport terms; keep it short.
            ErrorCode::Unavailable if status.message().is_empty() => {
                "service unavailable".to_owned()
            }
            _ => status.message().to_owned(),
        };
        if code == ErrorCode::Internal {
            tracing::error!(grpc_code = ?status.code(), message = %status.message(), "downstream call failed");
        }
        let mut error = ApiError::new(code, message);
        if let Some(hint) = noema_core::status_hint(&status) {
            error.extra.insert("hint".into(), Value::String(hint));
        }
        error
    }
}

/// MoltNet's problem slug, title and code for an HTTP status.
fn moltnet_problem(status: u16) -> (&'static str, &'static str, &'static str) {
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut status = self.status.unwrap_or_else(|| self.code.http_status());
        let mut body = self.extra;
        if self.style != ErrorStyle::OpenCognition {
            body.remove("hint");
        }
        match self.style {
            ErrorStyle::OpenCognition => {
                if self.code == ErrorCode::InvalidArgument
                    && !self.message.starts_with("invalid JSON: ")
                {
                    status = axum::http::StatusCode::UNPROCESSABLE_ENTITY;
                }
                body.insert("error".into(), Value::String(self.message));
                body.insert("code".into(), Value::String(self.code.as_str().into()));
            }
            ErrorStyle::Noema => {
                body.insert("error".into(), Value::String(self.message));
                body.insert("code".into(), Value::String(self.code.as_str().into()));
            }
            ErrorStyle::CogniRelay => {
                body.insert("detail".into(), Value::String(self.message.clone()));
                body.insert("error".into(), Value::String(self.message));
                body.insert("code".into(), Value::String(self.code.as_str().into()));
            }
            ErrorStyle::MoltNet => {
                let (slug, title, code) = moltnet_problem(status.as_u16());
                // MoltNet masks 5xx details.
                let detail = if status.is_server_error() && status.as_u16() != 503 {
                    "An unexpected error occurred".to_owned()
                } else {
                    self.message
                };
                // A route may name a more specific problem (e.g. signing-request-expired).
                body.entry("type")
                    .or_insert_with(|| json!(format!("https://themolt.net/problems/{slug}")));
                body.entry("title").or_insert_with(|| json!(title));
                body.insert("status".into(), json!(status.as_u16()));
                body.entry("code").or_insert_with(|| json!(code));
                body.insert("detail".into(), json!(detail.clone()));
                body.insert("error".into(), json!(detail));
                if status.as_u16() == 409 {
                    body.entry("conflict").or_insert_with(|| json!({}));
                }
            }
        }
        (status, GoJson(Value::Object(body))).into_response()
    }
}

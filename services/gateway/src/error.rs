//! REST errors: a downstream gRPC status mapped back to HTTP with the seed systems' body
//! shape, `{"error": "...", "code": "..."}` plus the seed's extra fields where it has them.

use axum::response::{IntoResponse, Response};
use noema_core::ErrorCode;
use serde_json::{Map, Value};

use crate::go_json::GoJson;

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Extra body fields (e.g. open-cognition's `hint`).
    pub extra: Map<String, Value>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        let code = ErrorCode::from_grpc(status.code());
        let message = match (code, status.code()) {
            // A peer that cannot be reached says so in transport terms; keep it short.
            (ErrorCode::Unavailable, tonic::Code::Unavailable) if status.message().is_empty() => {
                "service unavailable".to_owned()
            }
            _ => status.message().to_owned(),
        };
        if code == ErrorCode::Internal {
            tracing::error!(grpc_code = ?status.code(), message = %status.message(), "downstream call failed");
        }
        ApiError::new(code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = self.extra;
        body.insert("error".into(), Value::String(self.message));
        body.insert("code".into(), Value::String(self.code.as_str().into()));
        (self.code.http_status(), GoJson(Value::Object(body))).into_response()
    }
}

//! Noema's own error body: `{"code", "error"}` with the code's HTTP status.

use axum::http::StatusCode;
use noema_core::Failure;
use schemars::JsonSchema;
use serde::Serialize;

/// Noema's error body.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NoemaError {
    /// The failure's category: `invalid_argument`, `not_found`, `already_exists`,
    /// `failed_precondition`, `unauthenticated`, `permission_denied`, `unavailable`,
    /// `resource_exhausted` or `internal`.
    pub code: &'static str,
    /// What went wrong and what to fix.
    pub error: String,
}

pub fn render(failure: &Failure) -> (StatusCode, NoemaError) {
    (
        failure.code.http_status(),
        NoemaError {
            code: failure.code.as_str(),
            error: failure.message.clone(),
        },
    )
}

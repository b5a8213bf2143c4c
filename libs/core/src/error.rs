//! The one small error vocabulary every service speaks.
//!
//! Each service's own error enum says which `ErrorCode` it is; this module knows how
//! each code travels on the wire (gRPC status code, HTTP status), so the mapping is
//! written exactly once.

use std::fmt;

/// The category of a failure, independent of transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Unauthenticated,
    PermissionDenied,
    Unavailable,
    ResourceExhausted,
    Internal,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::InvalidArgument,
        ErrorCode::NotFound,
        ErrorCode::AlreadyExists,
        ErrorCode::FailedPrecondition,
        ErrorCode::Unauthenticated,
        ErrorCode::PermissionDenied,
        ErrorCode::Unavailable,
        ErrorCode::ResourceExhausted,
        ErrorCode::Internal,
    ];

    pub fn grpc_code(self) -> tonic::Code {
        match self {
            ErrorCode::InvalidArgument => tonic::Code::InvalidArgument,
            ErrorCode::NotFound => tonic::Code::NotFound,
            ErrorCode::AlreadyExists => tonic::Code::AlreadyExists,
            ErrorCode::FailedPrecondition => tonic::Code::FailedPrecondition,
            ErrorCode::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorCode::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorCode::Unavailable => tonic::Code::Unavailable,
            ErrorCode::ResourceExhausted => tonic::Code::ResourceExhausted,
            ErrorCode::Internal => tonic::Code::Internal,
        }
    }

    /// HTTP status for this code. `FailedPrecondition` is 422 because the seed systems
    /// answer semantic validation failures (e.g. `public key mismatch`) with 422.
    pub fn http_status(self) -> http::StatusCode {
        use http::StatusCode as S;
        match self {
            ErrorCode::InvalidArgument => S::BAD_REQUEST,
            ErrorCode::NotFound => S::NOT_FOUND,
            ErrorCode::AlreadyExists => S::CONFLICT,
            ErrorCode::FailedPrecondition => S::UNPROCESSABLE_ENTITY,
            ErrorCode::Unauthenticated => S::UNAUTHORIZED,
            ErrorCode::PermissionDenied => S::FORBIDDEN,
            ErrorCode::Unavailable => S::SERVICE_UNAVAILABLE,
            ErrorCode::ResourceExhausted => S::TOO_MANY_REQUESTS,
            ErrorCode::Internal => S::INTERNAL_SERVER_ERROR,
        }
    }

    /// Inverse of [`ErrorCode::grpc_code`], used by the gateway on a status from a
    /// downstream service. Codes we never send map to the nearest category.
    pub fn from_grpc(code: tonic::Code) -> ErrorCode {
        use tonic::Code as C;
        match code {
            C::InvalidArgument | C::OutOfRange => ErrorCode::InvalidArgument,
            C::NotFound => ErrorCode::NotFound,
            C::AlreadyExists | C::Aborted => ErrorCode::AlreadyExists,
            C::FailedPrecondition => ErrorCode::FailedPrecondition,
            C::Unauthenticated => ErrorCode::Unauthenticated,
            C::PermissionDenied => ErrorCode::PermissionDenied,
            C::Unavailable | C::DeadlineExceeded | C::Cancelled => ErrorCode::Unavailable,
            C::ResourceExhausted => ErrorCode::ResourceExhausted,
            C::Ok | C::Unknown | C::Unimplemented | C::Internal | C::DataLoss => {
                ErrorCode::Internal
            }
        }
    }

    /// Stable snake_case name used in REST error bodies (`"code"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::NotFound => "not_found",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::FailedPrecondition => "failed_precondition",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::ResourceExhausted => "resource_exhausted",
            ErrorCode::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Implemented by every service error: which category it is, and the message that is
/// safe to send to a caller. Internal causes are logged by the conversion, never sent.
pub trait ServiceError: std::error::Error {
    fn code(&self) -> ErrorCode;

    /// The text a caller sees. Defaults to the `Display` text, except for `Internal`,
    /// whose cause stays in the logs.
    fn public_message(&self) -> String {
        match self.code() {
            ErrorCode::Internal => "internal error".to_owned(),
            _ => self.to_string(),
        }
    }

    /// A suggestion on how to fix the request, sent as a `google.rpc.Help` detail (the
    /// gateway shows it as the seed systems' `hint` field).
    fn hint(&self) -> Option<String> {
        None
    }
}

/// The single conversion from a service error to a `tonic::Status`. Internal causes are
/// logged here, once, with their full chain; only the public message is sent.
pub fn to_status<E: ServiceError + ?Sized>(err: &E) -> tonic::Status {
    use tonic_types::{ErrorDetails, StatusExt};
    let code = err.code();
    if code == ErrorCode::Internal {
        tracing::error!(code = %code, error = %ErrorChain(err), "request failed");
    }
    match err.hint() {
        Some(hint) => tonic::Status::with_error_details(
            code.grpc_code(),
            err.public_message(),
            ErrorDetails::with_help_link(hint, ""),
        ),
        None => tonic::Status::new(code.grpc_code(), err.public_message()),
    }
}

/// The hint carried by a status made by [`to_status`], if any.
pub fn status_hint(status: &tonic::Status) -> Option<String> {
    use tonic_types::StatusExt;
    status
        .get_error_details()
        .help()
        .and_then(|help| help.links.first())
        .map(|link| link.description.clone())
        .filter(|hint| !hint.is_empty())
}

/// Displays an error followed by its `source()` chain: `outer: inner: innermost`.
pub struct ErrorChain<'a, E: ?Sized>(pub &'a E);

impl<E: std::error::Error + ?Sized> fmt::Display for ErrorChain<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_round_trip_is_identity_for_every_code() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_grpc(code.grpc_code()), code);
        }
    }

    #[derive(Debug, thiserror::Error)]
    #[error("bad thing")]
    struct Hinted;

    impl ServiceError for Hinted {
        fn code(&self) -> ErrorCode {
            ErrorCode::InvalidArgument
        }
        fn hint(&self) -> Option<String> {
            Some("do it right".into())
        }
    }

    #[test]
    fn hints_travel_in_status_details() {
        let status = to_status(&Hinted);
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert_eq!(status.message(), "bad thing");
        assert_eq!(status_hint(&status).as_deref(), Some("do it right"));
        assert_eq!(status_hint(&tonic::Status::internal("x")), None);
    }

    #[test]
    fn http_statuses_match_the_seed_systems() {
        assert_eq!(ErrorCode::FailedPrecondition.http_status().as_u16(), 422);
        assert_eq!(ErrorCode::Unavailable.http_status().as_u16(), 503);
        assert_eq!(ErrorCode::AlreadyExists.http_status().as_u16(), 409);
        assert_eq!(ErrorCode::Unauthenticated.http_status().as_u16(), 401);
        assert_eq!(ErrorCode::PermissionDenied.http_status().as_u16(), 403);
    }
}

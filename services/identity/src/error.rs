//! The identity service's failures, each knowing its `ErrorCode`.

use std::time::Duration;

use noema_core::error::{PENDING_SIGNING_REQUESTS, QUOTA_KEY, QUOTA_LIMIT_KEY};
use noema_core::{ErrorCode, Reason, ServiceError};

use crate::domain::signing::{ALREADY_COMPLETED_MESSAGE, EXPIRED_MESSAGE};

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// TOFU: the agent is registered with another key. The text is open-cognition's.
    #[error("public key mismatch")]
    KeyMismatch { agent_id: String },
    #[error("{0}")]
    FailedPrecondition(String),
    /// A revoked token asked to be rotated (CogniRelay's 409 `Token is already revoked`).
    #[error("token {token_id:?} is revoked and cannot be rotated")]
    TokenRevoked { token_id: String },
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// A signature (hence a signing request) already used by another entry: MoltNet's 409.
    #[error("This signing request has already been used to create an entry")]
    SignatureReused,
    /// MoltNet's 409 for a signature submitted after the request's time ran out.
    #[error("{EXPIRED_MESSAGE}")]
    SigningRequestExpired,
    /// MoltNet's 409 for a second signature on one request.
    #[error("{ALREADY_COMPLETED_MESSAGE}")]
    SigningRequestCompleted,
    /// An agent holds as many pending signing requests as allowed (MoltNet's 429).
    #[error(
        "Signing request limit reached: at most {max_pending} pending requests per agent; \
         retry after {retry_after_secs} seconds"
    )]
    SigningRequestLimit {
        max_pending: u64,
        retry_after_secs: i64,
    },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("audit log: {0}")]
    Audit(#[from] noema_store::audit::AuditError),
    #[error("randomness unavailable: {0}")]
    Randomness(String),
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
}

impl ServiceError for IdentityError {
    fn code(&self) -> ErrorCode {
        match self {
            IdentityError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            IdentityError::NotFound(_) => ErrorCode::NotFound,
            IdentityError::AlreadyExists(_) | IdentityError::SignatureReused => {
                ErrorCode::AlreadyExists
            }
            IdentityError::KeyMismatch { .. }
            | IdentityError::FailedPrecondition(_)
            | IdentityError::TokenRevoked { .. }
            | IdentityError::SigningRequestExpired
            | IdentityError::SigningRequestCompleted => ErrorCode::FailedPrecondition,
            IdentityError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            IdentityError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            IdentityError::SigningRequestLimit { .. } => ErrorCode::ResourceExhausted,
            IdentityError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                ErrorCode::Unavailable
            }
            IdentityError::Database(_)
            | IdentityError::Audit(_)
            | IdentityError::Randomness(_)
            | IdentityError::Corrupt(_) => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            IdentityError::KeyMismatch { .. } => Reason::PublicKeyMismatch,
            IdentityError::SignatureReused => Reason::SignatureReused,
            IdentityError::SigningRequestExpired => Reason::SigningRequestExpired,
            IdentityError::SigningRequestCompleted => Reason::SigningRequestCompleted,
            IdentityError::SigningRequestLimit { .. } => Reason::RateLimited,
            IdentityError::TokenRevoked { .. } => Reason::TokenRevoked,
            _ => Reason::generic(self.code()),
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            IdentityError::KeyMismatch { agent_id } => vec![("agent_id", agent_id.clone())],
            IdentityError::SigningRequestLimit { max_pending, .. } => vec![
                (QUOTA_KEY, PENDING_SIGNING_REQUESTS.to_owned()),
                (QUOTA_LIMIT_KEY, max_pending.to_string()),
            ],
            _ => Vec::new(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            IdentityError::SigningRequestLimit {
                retry_after_secs, ..
            } => Some(Duration::from_secs(
                u64::try_from(*retry_after_secs).unwrap_or_default(),
            )),
            _ => None,
        }
    }
}

impl From<IdentityError> for tonic::Status {
    fn from(err: IdentityError) -> Self {
        noema_core::to_status(&err)
    }
}

#[cfg(test)]
mod tests {
    use noema_core::{Failure, Reason};

    use super::*;

    #[test]
    fn callers_can_tell_the_signing_failures_apart_without_reading_messages() {
        let limit =
            Failure::from_status(&tonic::Status::from(IdentityError::SigningRequestLimit {
                max_pending: 10,
                retry_after_secs: 42,
            }));
        assert_eq!(limit.reason, Reason::RateLimited);
        assert_eq!(limit.retry_after, Some(Duration::from_secs(42)));
        assert_eq!(
            limit.metadata_value(QUOTA_KEY),
            Some(PENDING_SIGNING_REQUESTS)
        );
        assert_eq!(limit.metadata_value(QUOTA_LIMIT_KEY), Some("10"));
        for (err, reason) in [
            (
                IdentityError::SigningRequestExpired,
                Reason::SigningRequestExpired,
            ),
            (
                IdentityError::SigningRequestCompleted,
                Reason::SigningRequestCompleted,
            ),
            (IdentityError::SignatureReused, Reason::SignatureReused),
            (
                IdentityError::KeyMismatch {
                    agent_id: "agent:a".into(),
                },
                Reason::PublicKeyMismatch,
            ),
            (IdentityError::NotFound("gone".into()), Reason::NotFound),
        ] {
            assert_eq!(
                Failure::from_status(&tonic::Status::from(err)).reason,
                reason
            );
        }
    }
}

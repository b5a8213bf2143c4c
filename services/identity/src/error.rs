//! The identity service's failures, each knowing its `ErrorCode`.

use noema_core::{ErrorCode, ServiceError};

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
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// A signature (hence a signing request) already used by another entry: MoltNet's 409.
    #[error("This signing request has already been used to create an entry")]
    SignatureReused,
    #[error("{0}")]
    ResourceExhausted(String),
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
            IdentityError::KeyMismatch { .. } | IdentityError::FailedPrecondition(_) => {
                ErrorCode::FailedPrecondition
            }
            IdentityError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            IdentityError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            IdentityError::ResourceExhausted(_) => ErrorCode::ResourceExhausted,
            IdentityError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                ErrorCode::Unavailable
            }
            IdentityError::Database(_)
            | IdentityError::Audit(_)
            | IdentityError::Randomness(_)
            | IdentityError::Corrupt(_) => ErrorCode::Internal,
        }
    }
}

impl From<IdentityError> for tonic::Status {
    fn from(err: IdentityError) -> Self {
        noema_core::to_status(&err)
    }
}

//! The ledger's failures, each knowing its `ErrorCode`.

use noema_core::{ErrorCode, ServiceError};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("audit log: {0}")]
    Audit(#[from] noema_store::audit::AuditError),
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
}

impl ServiceError for LedgerError {
    fn code(&self) -> ErrorCode {
        match self {
            LedgerError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            LedgerError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                ErrorCode::Unavailable
            }
            LedgerError::Database(_) | LedgerError::Audit(_) | LedgerError::Corrupt(_) => {
                ErrorCode::Internal
            }
        }
    }
}

impl From<LedgerError> for tonic::Status {
    fn from(err: LedgerError) -> Self {
        noema_core::to_status(&err)
    }
}

//! What can go wrong in a visit.

use noema_core::{ErrorCode, ServiceError};

#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    #[error("name must be 1 to 64 of a-z, 0-9 and -")]
    InvalidName,
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("object store: {0}")]
    Objects(#[from] noema_store::ObjectError),
    /// The ledger answered with an error; its code is passed on.
    #[error("ledger: {}", .0.message())]
    Ledger(tonic::Status),
}

impl ServiceError for ExampleError {
    fn code(&self) -> ErrorCode {
        match self {
            ExampleError::InvalidName => ErrorCode::InvalidArgument,
            ExampleError::Ledger(status) => ErrorCode::from_grpc(status.code()),
            ExampleError::Database(_) | ExampleError::Objects(_) => ErrorCode::Internal,
        }
    }
}

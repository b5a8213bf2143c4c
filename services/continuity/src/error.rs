//! The continuity service's failures: the original's refusals ([`ContinuityError`], with
//! their status and body) and what can go wrong underneath (database, object store).

use noema_core::{ErrorChain, ErrorCode, Reason, ServiceError};

use crate::domain::error::ContinuityError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A refusal in the original's terms.
    #[error(transparent)]
    Refused(#[from] ContinuityError),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("audited write: {0}")]
    Transaction(#[from] noema_store::audit::TxError),
    #[error("audit log: {0}")]
    Audit(#[from] noema_store::audit::AuditError),
    #[error("object store: {0}")]
    Objects(#[from] noema_store::ObjectError),
    /// The group-commit writer is gone: the server is shutting down.
    #[error("continuity is shutting down; retry against a running instance")]
    WriterGone,
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
    /// The search index's tokenizer could not be made or run.
    #[error("search tokenizer: {0}")]
    Tokenizer(#[from] noema_fts5::Fts5Error),
    /// A gRPC field that is not the original's (a page token, the tenant header) is malformed.
    #[error("{0}")]
    InvalidArgument(String),
}

impl Error {
    /// The original's refusal, if this is one.
    pub fn refusal(&self) -> Option<&ContinuityError> {
        match self {
            Error::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }
}

fn sqlx_code(err: &sqlx::Error) -> ErrorCode {
    match err {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
            ErrorCode::Unavailable
        }
        _ => ErrorCode::Internal,
    }
}

impl ServiceError for Error {
    fn code(&self) -> ErrorCode {
        match self {
            Error::Refused(refusal) => refusal.code(),
            Error::Database(err) => sqlx_code(err),
            Error::Transaction(noema_store::audit::TxError::Database(err)) => sqlx_code(err),
            Error::Transaction(noema_store::audit::TxError::Audit(err)) => err.code(),
            Error::Audit(err) => err.code(),
            Error::Objects(err) if err.is_retryable() => ErrorCode::Unavailable,
            Error::WriterGone => ErrorCode::Unavailable,
            Error::Objects(_) | Error::Corrupt(_) | Error::Tokenizer(_) => ErrorCode::Internal,
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            Error::Refused(refusal) => refusal.reason(),
            other => Reason::generic(other.code()),
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            Error::Refused(refusal) => refusal.metadata(),
            _ => Vec::new(),
        }
    }

    fn public_message(&self) -> String {
        match self {
            Error::Refused(refusal) => refusal.public_message(),
            Error::WriterGone | Error::InvalidArgument(_) => self.to_string(),
            _ if self.code() == ErrorCode::Unavailable => {
                "storage temporarily unavailable; retry".to_owned()
            }
            _ => "internal error".to_owned(),
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        if matches!(err, Error::Objects(_)) && err.code() == ErrorCode::Unavailable {
            tracing::warn!(error = %ErrorChain(&err), "object storage call failed");
        }
        noema_core::to_status(&err)
    }
}

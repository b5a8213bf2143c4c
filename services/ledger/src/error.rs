//! The ledger's failures, each knowing its `ErrorCode`. Public texts follow
//! open-cognition's messages where it has them.

use noema_core::{ErrorChain, ErrorCode, Failure, Reason, STOPPED_MESSAGE, ServiceError};

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Bad input; open-cognition answers these 422 (with a hint for signature problems).
    #[error("{message}")]
    Invalid {
        message: String,
        hint: Option<String>,
    },
    /// Trust on first use refused the reference's key; open-cognition answers this as
    /// a validation failure, in its own words, with a hint.
    #[error("public key mismatch")]
    KeyMismatch { agent_id: String },
    #[error("{STOPPED_MESSAGE}")]
    Stopped,
    #[error("canonical object with this id already exists")]
    DuplicateCanonical,
    #[error("reference with this id already exists")]
    DuplicateReference,
    #[error("object already exists in storage (orphaned write?); inspect and reconcile manually")]
    StorageConflict,
    #[error("{0}")]
    NotFound(String),
    #[error("failed to check object storage")]
    StorageCheck(#[source] noema_store::ObjectError),
    #[error("failed to write to object storage")]
    StorageWrite(#[source] noema_store::ObjectError),
    #[error("failed to read object storage")]
    StorageRead(#[source] noema_store::ObjectError),
    #[error("payload stored but ledger insert failed — object may need reconciliation")]
    LedgerInsertAfterStore(#[source] Box<LedgerError>),
    /// The identity service refused or failed (TOFU key registration): its failure,
    /// reason included, passes on to the caller.
    #[error("{0}")]
    Identity(Failure),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("audit log: {0}")]
    Audit(#[from] noema_store::audit::AuditError),
    /// The group-commit writer is gone: the server is shutting down.
    #[error("the ledger is shutting down; retry against a running instance")]
    WriterGone,
    #[error("stored data is malformed: {0}")]
    Corrupt(String),
}

impl LedgerError {
    pub fn invalid(message: impl Into<String>) -> Self {
        LedgerError::Invalid {
            message: message.into(),
            hint: None,
        }
    }
}

impl From<crate::domain::canonical::Invalid> for LedgerError {
    fn from(invalid: crate::domain::canonical::Invalid) -> Self {
        LedgerError::invalid(invalid.0)
    }
}

impl From<crate::domain::reference::Refusal> for LedgerError {
    fn from(refusal: crate::domain::reference::Refusal) -> Self {
        LedgerError::Invalid {
            message: refusal.message,
            hint: refusal.hint,
        }
    }
}

fn storage_code(err: &noema_store::ObjectError) -> ErrorCode {
    if err.is_retryable() {
        ErrorCode::Unavailable
    } else {
        ErrorCode::Internal
    }
}

impl ServiceError for LedgerError {
    fn code(&self) -> ErrorCode {
        match self {
            LedgerError::Invalid { .. } | LedgerError::KeyMismatch { .. } => {
                ErrorCode::InvalidArgument
            }
            LedgerError::Stopped | LedgerError::WriterGone => ErrorCode::Unavailable,
            LedgerError::DuplicateCanonical
            | LedgerError::DuplicateReference
            | LedgerError::StorageConflict => ErrorCode::AlreadyExists,
            LedgerError::NotFound(_) => ErrorCode::NotFound,
            LedgerError::StorageCheck(e)
            | LedgerError::StorageWrite(e)
            | LedgerError::StorageRead(e) => storage_code(e),
            LedgerError::Identity(failure) => failure.code,
            LedgerError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                ErrorCode::Unavailable
            }
            LedgerError::LedgerInsertAfterStore(_)
            | LedgerError::Database(_)
            | LedgerError::Audit(_)
            | LedgerError::Corrupt(_) => ErrorCode::Internal,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            LedgerError::Stopped => Reason::SystemStopped,
            LedgerError::KeyMismatch { .. } => Reason::PublicKeyMismatch,
            LedgerError::StorageConflict => Reason::StorageConflict,
            LedgerError::Identity(failure) => failure.reason,
            _ => Reason::generic(self.code()),
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            LedgerError::Identity(failure) => failure.retry_after,
            _ => None,
        }
    }

    fn public_message(&self) -> String {
        match self {
            // These internal failures have open-cognition's own public texts.
            LedgerError::StorageCheck(_)
            | LedgerError::StorageWrite(_)
            | LedgerError::StorageRead(_)
            | LedgerError::LedgerInsertAfterStore(_) => self.to_string(),
            LedgerError::Identity(failure) => failure.message.clone(),
            _ if self.code() == ErrorCode::Internal => "internal error".to_owned(),
            _ if self.code() == ErrorCode::Unavailable
                && !matches!(self, LedgerError::Stopped | LedgerError::WriterGone) =>
            {
                "storage temporarily unavailable; retry".to_owned()
            }
            _ => self.to_string(),
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            LedgerError::Invalid { hint, .. } => hint.clone(),
            LedgerError::KeyMismatch { agent_id } => {
                Some(crate::domain::reference::mismatch_hint(agent_id))
            }
            LedgerError::Identity(failure) => failure.hint.clone(),
            _ => None,
        }
    }
}

impl From<LedgerError> for tonic::Status {
    fn from(err: LedgerError) -> Self {
        if matches!(
            err,
            LedgerError::StorageCheck(_)
                | LedgerError::StorageWrite(_)
                | LedgerError::StorageRead(_)
        ) {
            // Internal causes are logged by to_status; retryable ones here.
            tracing::warn!(error = %ErrorChain(&err), "object storage call failed");
        }
        noema_core::to_status(&err)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use noema_core::{ErrorCode, Failure, Reason, STOPPED_MESSAGE};

    use super::LedgerError;

    fn sent(err: LedgerError) -> Failure {
        Failure::from_status(&tonic::Status::from(err))
    }

    #[test]
    fn callers_tell_stopped_mismatch_and_conflicts_apart_by_reason() {
        let stopped = sent(LedgerError::Stopped);
        assert_eq!(
            (stopped.code, stopped.reason, stopped.message.as_str()),
            (
                ErrorCode::Unavailable,
                Reason::SystemStopped,
                STOPPED_MESSAGE
            )
        );
        let mismatch = sent(LedgerError::KeyMismatch {
            agent_id: "agent:a".into(),
        });
        assert_eq!(mismatch.code, ErrorCode::InvalidArgument);
        assert_eq!(mismatch.reason, Reason::PublicKeyMismatch);
        assert_eq!(mismatch.message, "public key mismatch");
        assert!(mismatch.hint.is_some_and(|h| h.contains("agent:a")));
        assert_eq!(
            sent(LedgerError::StorageConflict).reason,
            Reason::StorageConflict
        );
        assert_eq!(
            sent(LedgerError::DuplicateCanonical).reason,
            Reason::AlreadyExists
        );
    }

    #[test]
    fn identitys_failures_pass_on_with_their_reason() {
        let mut limited = Failure::new(ErrorCode::ResourceExhausted, "slow down")
            .with_reason(Reason::RateLimited);
        limited.retry_after = Some(Duration::from_secs(3));
        let passed = sent(LedgerError::Identity(limited));
        assert_eq!(passed.reason, Reason::RateLimited);
        assert_eq!(passed.retry_after, Some(Duration::from_secs(3)));
        assert_eq!(passed.message, "slow down");
    }
}

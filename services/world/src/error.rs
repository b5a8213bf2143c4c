//! The world service's failures, each knowing its `ErrorCode` and, where a caller must tell
//! them apart, its `Reason`. A component that is not valid on its own is `InvalidArgument`
//! (`INVALID_COMPONENT`); a scenario whose references do not assemble into an executable
//! whole is `FailedPrecondition` (HTTP 422, `SCENARIO_NOT_EXECUTABLE`). Both carry the first
//! offending path as `ErrorInfo` metadata (`path`), and the message lists every problem.
//! A turn that fails is not an error: `RunTurn` answers it as the attempt's outcome.

use noema_core::{ErrorCode, Reason, ServiceError};

use crate::domain::assembly::{AssemblyError, AssemblyProblem};
use crate::domain::component::ComponentKind;
use crate::domain::problem::{Problem, Problems};
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("invalid {kind}: {}", Problems(.problems))]
    InvalidComponent {
        kind: ComponentKind,
        problems: Vec<Problem>,
    },
    #[error("the scenario does not assemble: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotExecutable(Vec<AssemblyProblem>),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("world {0:?} exists already")]
    WorldExists(String),
    #[error("another attempt holds world {slug:?}'s lease; try again when it has ended")]
    LeaseHeld { slug: String },
    /// The attempt's lease expired and another took the world over before it committed.
    #[error(
        "the attempt lost world {slug:?}'s lease before it could commit; nothing was committed"
    )]
    LeaseLost { slug: String },
    #[error("component lookup failed: {0}")]
    Lookup(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A bug or stored data the kernel cannot use.
    #[error("{0}")]
    Internal(String),
}

impl From<AssemblyError> for WorldError {
    fn from(err: AssemblyError) -> Self {
        match err {
            AssemblyError::Rejected(problems) => WorldError::NotExecutable(problems),
            AssemblyError::Lookup(e) => WorldError::Lookup(e.0),
        }
    }
}

impl ServiceError for WorldError {
    fn code(&self) -> ErrorCode {
        match self {
            WorldError::InvalidComponent { .. } | WorldError::InvalidArgument(_) => {
                ErrorCode::InvalidArgument
            }
            WorldError::NotExecutable(_) => ErrorCode::FailedPrecondition,
            WorldError::NotFound(_) => ErrorCode::NotFound,
            WorldError::WorldExists(_) | WorldError::LeaseHeld { .. } => ErrorCode::AlreadyExists,
            WorldError::LeaseLost { .. } => ErrorCode::Unavailable,
            WorldError::Store(err) if err.is_unavailable() => ErrorCode::Unavailable,
            WorldError::Lookup(_) | WorldError::Store(_) | WorldError::Internal(_) => {
                ErrorCode::Internal
            }
        }
    }

    fn reason(&self) -> Reason {
        match self {
            WorldError::InvalidComponent { .. } => Reason::InvalidComponent,
            WorldError::NotExecutable(_) => Reason::ScenarioNotExecutable,
            WorldError::LeaseHeld { .. } => Reason::LeaseHeld,
            other => Reason::generic(other.code()),
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            WorldError::InvalidComponent { kind, problems } => problems
                .first()
                .map(|p| vec![("path", format!("{kind}{}", p.pointer))])
                .unwrap_or_default(),
            WorldError::NotExecutable(problems) => problems
                .first()
                .map(|p| vec![("path", p.path())])
                .unwrap_or_default(),
            WorldError::LeaseHeld { slug } | WorldError::LeaseLost { slug } => {
                vec![("world", slug.clone())]
            }
            _ => Vec::new(),
        }
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            WorldError::LeaseHeld { .. } => Some(std::time::Duration::from_secs(1)),
            _ => None,
        }
    }
}

//! The world service's failures, each knowing its `ErrorCode`. A component that is not valid
//! on its own is `InvalidArgument`; a scenario whose references do not assemble into an
//! executable whole is `FailedPrecondition` (HTTP 422). Both carry the first offending path
//! as `ErrorInfo` metadata (`path`), and the message lists every problem.

use noema_core::{ErrorCode, ServiceError};

use crate::domain::assembly::{AssemblyError, AssemblyProblem};
use crate::domain::component::ComponentKind;
use crate::domain::problem::{Problem, Problems};

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
    #[error("component lookup failed: {0}")]
    Lookup(String),
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
            WorldError::InvalidComponent { .. } => ErrorCode::InvalidArgument,
            WorldError::NotExecutable(_) => ErrorCode::FailedPrecondition,
            WorldError::NotFound(_) => ErrorCode::NotFound,
            WorldError::Lookup(_) => ErrorCode::Internal,
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
            WorldError::NotFound(_) | WorldError::Lookup(_) => Vec::new(),
        }
    }
}

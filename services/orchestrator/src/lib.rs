//! The orchestrator: Cognitive OS's governed runtime. A request moves RECEIVED → PLANNED →
//! RISKED → (APPROVAL_PENDING) → EXECUTED | BLOCKED → TRACED → EVALUATED → REWARDED under a
//! machine-readable risk policy, with signed approvals, a trace for every execution, an
//! eval gate and a reputation loop.
//!
//! This crate holds the pure domain (`domain/`); the gRPC adapter, the operations layer
//! and the store follow once the service registry exists.

pub mod domain;
pub mod error;

pub use error::OrchestratorError;

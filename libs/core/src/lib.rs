//! Domain primitives shared by every Noema service.
//!
//! Nothing here does I/O: content ids, canonical JSON, CIDs, Ed25519 encodings, wire
//! timestamps and the error vocabulary are pure functions that both the services and the
//! client SDK use.

pub mod audit;
pub mod cid;
pub mod content_id;
pub mod error;
pub mod jcs;
pub mod keys;
pub mod scopes;
pub mod time;

pub use error::{
    ErrorChain, ErrorCode, Failure, Reason, STOPPED_MESSAGE, ServiceError, status_hint, to_status,
};

/// Property-test settings shared by the crate's parsers' tests: few enough cases to run
/// in every `scripts/test`, no regression files written into the source tree.
#[cfg(test)]
pub(crate) fn proptest_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: 96,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

//! noema-store: the storage plumbing every Noema service shares.
//!
//! - [`db`]: a [`Database`] pool chosen by URL (`sqlite://…`, `sqlite::memory:`,
//!   `postgres://…`) and per-service [`Migrations`].
//! - [`object`]: an [`ObjectStore`] chosen by URL (`pack://…`, `file://…`, `s3://…`), a
//!   fault-injecting wrapper for durability tests and the conformance suite every backend
//!   passes.
//! - [`sql`]: SQL written once for both engines, [`with_pool!`] to pick the engine, and
//!   [`audit::AuditedTx`], the audited write transaction every store uses.
//! - [`spawn_writer`]: where a store's group-commit writer task runs.
//! - [`testing`]: fresh Postgres databases for tests.
//!
//! This crate holds no service's SQL: services own their queries and migrations.

pub mod audit;
mod checkpointer;
pub mod db;
pub mod object;
mod redact;
pub mod sql;
pub mod testing;
mod writer_thread;

pub use db::{Backend, Database, DbError, DbOptions, Migrations};
pub use object::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore};
pub use writer_thread::{SQLITE_WRITER_CACHE, spawn_writer};

/// Property-test settings for this crate's parsers of outside input: few enough cases to
/// run in every `scripts/test`, no regression files written into the source tree.
#[cfg(test)]
pub(crate) fn proptest_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: 96,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

//! noema-store: the storage plumbing every Noema service shares.
//!
//! - [`db`]: a [`Database`] pool chosen by URL (`sqlite://…`, `sqlite::memory:`,
//!   `postgres://…`) and per-service [`Migrations`].
//! - [`object`]: an [`ObjectStore`] chosen by URL (`pack://…`, `file://…`, `s3://…`), a
//!   fault-injecting wrapper for durability tests and the conformance suite every backend
//!   passes.
//! - [`sql`]: SQL written once for both engines, [`with_pool!`] to pick the engine, and
//!   [`audit::AuditedTx`], the audited write transaction every store uses.
//! - [`testing`]: fresh Postgres databases for tests.
//!
//! This crate holds no service's SQL: services own their queries and migrations.

pub mod audit;
pub mod db;
pub mod object;
mod redact;
pub mod sql;
pub mod testing;

pub use db::{Backend, Database, DbError, DbOptions, Migrations};
pub use object::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore};

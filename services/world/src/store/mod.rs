//! The world service's only SQL, each statement written once for SQLite and Postgres
//! (`noema_store::sql`), one file per aggregate: components, worlds and turns, attempts and
//! their lease, source invocations and LLM calls (through the [`trace`] writer), events.
//! Every write is one `AuditedTx`; writes an operator would audit (components, scenarios,
//! worlds, committed turns) record an audit entry in it.

pub mod attempts;
pub mod components;
pub mod events;
pub mod invocations;
pub mod trace;
pub mod worlds;

use noema_store::Database;
use noema_store::audit::TxError;

pub use trace::{TraceWrite, TraceWriter};

/// Schema migrations of the world service, per engine.
pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "world",
    sqlite: sqlx::migrate!("../../migrations/world/sqlite"),
    postgres: sqlx::migrate!("../../migrations/world/postgres"),
};

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("write transaction: {0}")]
    Tx(#[from] TxError),
    /// A stored value the schema admits but the kernel cannot read.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    pub fn corrupt(what: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt(what.to_string())
    }

    /// A pool that timed out or a connection that broke: worth a retry elsewhere.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_))
                | StoreError::Tx(TxError::Database(
                    sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)
                ))
        )
    }
}

/// The world service's database.
#[derive(Debug, Clone)]
pub struct WorldStore {
    db: Database,
}

impl WorldStore {
    pub fn new(db: Database) -> WorldStore {
        WorldStore { db }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }
}

/// A `u64` counter (turn numbers) as the signed integer both engines store.
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored signed integer back as a `u64` (negative values are refused by CHECKs).
pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

pub(crate) fn to_u32(value: i64) -> u32 {
    u32::try_from(value).unwrap_or_default()
}

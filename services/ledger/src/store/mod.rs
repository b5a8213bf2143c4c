//! The only place with SQL. One body of queries, compiled once per backend.
//!
//! `backend_queries!` expands the same functions for SQLite and for Postgres so the SQL
//! is written once (both accept `$n` placeholders) while sqlx still sees concrete types.

use noema_store::Database;
use time::OffsetDateTime;

use crate::domain::mode::{SystemMode, SystemState};
use crate::error::LedgerError;
use noema_core::audit::{AuditDraft, AuditEntry};

mod queries;

/// Schema migrations for the ledger, per backend.
pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "ledger",
    sqlite: sqlx::migrate!("../../migrations/ledger/sqlite"),
    postgres: sqlx::migrate!("../../migrations/ledger/postgres"),
};

#[derive(Debug, Clone)]
pub struct LedgerStore {
    db: Database,
}

macro_rules! dispatch {
    ($self:ident, $func:ident ( $($arg:expr),* )) => {
        match &$self.db {
            Database::Sqlite(pool) => queries::sqlite::$func(pool, $($arg),*).await,
            Database::Postgres(pool) => queries::postgres::$func(pool, $($arg),*).await,
        }
    };
}

impl LedgerStore {
    pub fn new(db: Database) -> Self {
        LedgerStore { db }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Writes the chain's first entry (`init`) if the audit log is empty. Safe to race.
    #[tracing::instrument(skip_all)]
    pub async fn ensure_initialized(&self) -> Result<(), LedgerError> {
        let init = AuditDraft {
            actor: "system:init".into(),
            action: "init".into(),
            target_id: None,
            target_type: Some("system_state".into()),
            detail: Some(serde_json::json!({"mode": "RUNNING"})),
        };
        Ok(self.db.audit_init(init).await?)
    }

    #[tracing::instrument(skip_all)]
    pub async fn system_state(&self) -> Result<SystemState, LedgerError> {
        dispatch!(self, system_state())
    }

    /// Sets the mode and appends its audit entry in one transaction.
    #[tracing::instrument(skip_all, fields(mode = %mode))]
    pub async fn set_mode(
        &self,
        mode: SystemMode,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<SystemState, LedgerError> {
        dispatch!(self, set_mode(mode, actor, now))
    }

    /// Audit entries newest first, strictly older than `before_id` when given.
    #[tracing::instrument(skip_all)]
    pub async fn list_audit(
        &self,
        before_id: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, LedgerError> {
        Ok(self
            .db
            .audit_newest_first(before_id, i64::from(limit))
            .await?)
    }

    /// Audit entries oldest first, strictly newer than `after_id`: for chain verification.
    #[tracing::instrument(skip_all)]
    pub async fn audit_ascending(
        &self,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, LedgerError> {
        Ok(self
            .db
            .audit_oldest_first(after_id, i64::from(limit))
            .await?)
    }
}

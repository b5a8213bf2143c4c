//! The only place with SQL, one file per aggregate. Each query is written once for both
//! engines (`noema_store::sql`); each write is one `noema_store::audit::transaction`, which
//! locks the audit chain's head first, so writes are serialised on both backends and SQLite
//! never has to upgrade a read lock.

mod agents;
mod chain;
mod diaries;
mod entries;
mod feed;
mod relations;
mod signing_requests;
mod tokens;

use noema_core::audit::AuditDraft;
use noema_store::sql::{Record, query};
use noema_store::{Database, with_pool};
use serde_json::Value;

use crate::error::IdentityError;

pub use entries::{EntryFilter, SignatureInput};
pub use relations::RelationFilter;
pub use tokens::RevokeSelector;

pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "identity",
    sqlite: sqlx::migrate!("../../migrations/identity/sqlite"),
    postgres: sqlx::migrate!("../../migrations/identity/postgres"),
};

#[derive(Debug, Clone)]
pub struct IdentityStore {
    db: Database,
}

impl IdentityStore {
    pub fn new(db: Database) -> Self {
        IdentityStore { db }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// The first row `sql` selects with `$1` bound to `key`.
    async fn find<R: Record>(&self, sql: &str, key: &str) -> Result<Option<R>, IdentityError> {
        Ok(with_pool!(&self.db, |pool| {
            query(sql).bind(key).fetch_optional(pool).await?
        }))
    }
}

/// The audit entry of a write to one target.
fn draft(
    actor: &str,
    action: &str,
    target_type: &str,
    target_id: &str,
    detail: Value,
) -> AuditDraft {
    AuditDraft {
        actor: actor.to_owned(),
        action: action.to_owned(),
        target_id: Some(target_id.to_owned()),
        target_type: Some(target_type.to_owned()),
        detail: Some(detail),
    }
}

/// A stored count or sequence number as the domain's unsigned type.
fn unsigned(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The domain's unsigned count or sequence number as a column value.
fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl From<noema_store::audit::TxError> for IdentityError {
    fn from(err: noema_store::audit::TxError) -> Self {
        match err {
            noema_store::audit::TxError::Database(err) => IdentityError::Database(err),
            noema_store::audit::TxError::Audit(err) => IdentityError::Audit(err),
        }
    }
}

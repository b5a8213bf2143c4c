//! The only place with SQL. One body of queries, compiled once per backend.

use noema_core::audit::AuditEntry;
use noema_core::keys::{PublicKey, Signature};
use noema_store::Database;
use time::OffsetDateTime;

use crate::domain::agent::Agent;
use crate::domain::token::TokenRecord;
use crate::error::IdentityError;

mod queries;

pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "identity",
    sqlite: sqlx::migrate!("../../migrations/identity/sqlite"),
    postgres: sqlx::migrate!("../../migrations/identity/postgres"),
};

/// Which tokens a revoke call targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeSelector {
    TokenId(String),
    Sha256(String),
    Peer(String),
}

pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

#[derive(Debug, Clone)]
pub struct IdentityStore {
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

impl IdentityStore {
    pub fn new(db: Database) -> Self {
        IdentityStore { db }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    pub async fn get_agent(&self, agent_id: &str) -> Result<Option<Agent>, IdentityError> {
        dispatch!(self, get_agent(agent_id))
    }

    pub async fn get_agent_by_fingerprint(
        &self,
        fingerprint: &str,
    ) -> Result<Option<Agent>, IdentityError> {
        dispatch!(self, get_agent_by_fingerprint(fingerprint))
    }

    pub async fn list_agents(&self, after: &str, limit: u32) -> Result<Vec<Agent>, IdentityError> {
        dispatch!(self, list_agents(after, i64::from(limit)))
    }

    #[tracing::instrument(skip_all, fields(agent_id))]
    pub async fn register_agent(
        &self,
        agent_id: &str,
        key: &PublicKey,
        first_object_id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(Agent, bool), IdentityError> {
        dispatch!(
            self,
            register_agent(agent_id, key, first_object_id, actor, now)
        )
    }

    #[allow(clippy::too_many_arguments)]
    #[tracing::instrument(skip_all, fields(agent_id))]
    pub async fn rotate_key(
        &self,
        agent_id: &str,
        expected_version: u32,
        new_key: &PublicKey,
        proof: &Signature,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<Agent, IdentityError> {
        dispatch!(
            self,
            rotate_key(agent_id, expected_version, new_key, proof, actor, now)
        )
    }

    #[tracing::instrument(skip_all, fields(token_id = %token.token_id))]
    pub async fn insert_token(
        &self,
        token: &TokenRecord,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch!(self, insert_token(token, actor, now))
    }

    pub async fn token_by_sha256(
        &self,
        sha256: &str,
    ) -> Result<Option<TokenRecord>, IdentityError> {
        dispatch!(self, token_by_sha256(sha256))
    }

    pub async fn token_by_id(&self, token_id: &str) -> Result<Option<TokenRecord>, IdentityError> {
        dispatch!(self, token_by_id(token_id))
    }

    pub async fn list_tokens(
        &self,
        peer_id: Option<&str>,
    ) -> Result<Vec<TokenRecord>, IdentityError> {
        dispatch!(self, list_tokens(peer_id))
    }

    #[tracing::instrument(skip_all)]
    pub async fn revoke(
        &self,
        selector: &RevokeSelector,
        reason: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(Vec<TokenRecord>, Vec<String>), IdentityError> {
        dispatch!(self, revoke(selector, reason, actor, now))
    }

    #[tracing::instrument(skip_all, fields(from = %old.token_id, to = %new.token_id))]
    pub async fn rotate_token(
        &self,
        old: &TokenRecord,
        new: &TokenRecord,
        reason: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch!(self, rotate_token(old, new, reason, actor, now))
    }

    pub async fn ensure_owner(
        &self,
        owner: &TokenRecord,
        now: OffsetDateTime,
    ) -> Result<bool, IdentityError> {
        dispatch!(self, ensure_owner(owner, now))
    }

    pub async fn list_audit_oldest_first(
        &self,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, IdentityError> {
        Ok(self
            .db
            .audit_oldest_first(after_id, i64::from(limit))
            .await?)
    }

    pub async fn list_audit(
        &self,
        before_id: Option<i64>,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, IdentityError> {
        Ok(self
            .db
            .audit_newest_first(before_id, i64::from(limit))
            .await?)
    }
}

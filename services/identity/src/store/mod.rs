//! The only place with SQL. One body of queries, compiled once per backend.

use noema_core::keys::{PublicKey, Signature};
use noema_store::Database;
use time::OffsetDateTime;

use crate::domain::agent::Agent;
use crate::domain::chain::Link;
use crate::domain::diary::{Diary, Share};
use crate::domain::entry::Entry;
use crate::domain::relation::Relation;
use crate::domain::signing::SigningRequest;
use crate::domain::tag::{TagCount, TagQuery};
use crate::domain::token::TokenRecord;
use crate::error::IdentityError;

pub mod diary;
mod queries;

pub use diary::{EntryFilter, RelationFilter, SignatureInput};

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

macro_rules! dispatch_diary {
    ($self:ident, $func:ident ( $($arg:expr),* )) => {
        match &$self.db {
            Database::Sqlite(pool) => diary::sqlite::$func(pool, $($arg),*).await,
            Database::Postgres(pool) => diary::postgres::$func(pool, $($arg),*).await,
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
        dispatch!(self, insert_token(token, actor, now))?;
        crate::auth::token_written();
        Ok(())
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
        let written = dispatch!(self, revoke(selector, reason, actor, now))?;
        crate::auth::token_written();
        Ok(written)
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
        dispatch!(self, rotate_token(old, new, reason, actor, now))?;
        crate::auth::token_written();
        Ok(())
    }

    pub async fn ensure_owner(
        &self,
        owner: &TokenRecord,
        now: OffsetDateTime,
    ) -> Result<bool, IdentityError> {
        let written = dispatch!(self, ensure_owner(owner, now))?;
        crate::auth::token_written();
        Ok(written)
    }
}

/// Diaries, entries, signing requests, relations and the signature chain.
impl IdentityStore {
    pub async fn insert_diary(
        &self,
        d: &Diary,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, insert_diary(d, actor, now))
    }

    pub async fn get_diary(&self, id: &str) -> Result<Option<Diary>, IdentityError> {
        dispatch_diary!(self, get_diary(id))
    }

    pub async fn list_diaries(&self, caller: Option<&str>) -> Result<Vec<Diary>, IdentityError> {
        dispatch_diary!(self, list_diaries(caller))
    }

    pub async fn update_diary(
        &self,
        d: &Diary,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, update_diary(d, actor, now))
    }

    pub async fn delete_diary(
        &self,
        id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<u64, IdentityError> {
        dispatch_diary!(self, delete_diary(id, actor, now))
    }

    pub async fn get_share(
        &self,
        diary_id: &str,
        agent_id: &str,
    ) -> Result<Option<Share>, IdentityError> {
        dispatch_diary!(self, get_share(diary_id, agent_id))
    }

    pub async fn put_share(
        &self,
        share: &Share,
        action: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, put_share(share, action, actor, now))
    }

    pub async fn list_shares(
        &self,
        diary_id: &str,
        only_agent: Option<&str>,
    ) -> Result<Vec<Share>, IdentityError> {
        dispatch_diary!(self, list_shares(diary_id, only_agent))
    }

    pub async fn insert_entry(
        &self,
        entry: &Entry,
        signing: Option<&SignatureInput>,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, insert_entry(entry, signing, actor, now))
    }

    pub async fn get_entry(&self, id: &str) -> Result<Option<Entry>, IdentityError> {
        dispatch_diary!(self, get_entry(id))
    }

    pub async fn list_entries(
        &self,
        filter: &EntryFilter,
    ) -> Result<(Vec<Entry>, u64), IdentityError> {
        dispatch_diary!(self, list_entries(filter))
    }

    /// The diary's tags with their entry counts, unordered.
    pub async fn list_tags(
        &self,
        diary_id: &str,
        query: &TagQuery,
        entry_types: &[String],
    ) -> Result<Vec<TagCount>, IdentityError> {
        dispatch_diary!(self, list_tags(diary_id, query, entry_types))
    }

    pub async fn update_entry(
        &self,
        before: &Entry,
        after: &Entry,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, update_entry(before, after, actor, now))
    }

    pub async fn delete_entry(
        &self,
        id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, delete_entry(id, actor, now))
    }

    pub async fn record_access(
        &self,
        ids: &[String],
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, record_access(ids, now))
    }

    pub async fn insert_signing_request(
        &self,
        request: &SigningRequest,
        max_pending: u64,
        now: OffsetDateTime,
    ) -> Result<Result<(), i64>, IdentityError> {
        dispatch_diary!(self, insert_signing_request(request, max_pending, now))
    }

    pub async fn get_signing_request(
        &self,
        id: &str,
    ) -> Result<Option<SigningRequest>, IdentityError> {
        dispatch_diary!(self, get_signing_request(id))
    }

    pub async fn signing_request_by_signature(
        &self,
        signature: &str,
    ) -> Result<Option<SigningRequest>, IdentityError> {
        dispatch_diary!(self, signing_request_by_signature(signature))
    }

    pub async fn list_signing_requests(
        &self,
        agent_id: &str,
        statuses: &[String],
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<SigningRequest>, u64), IdentityError> {
        dispatch_diary!(
            self,
            list_signing_requests(agent_id, statuses, limit, offset)
        )
    }

    pub async fn complete_message_request(
        &self,
        request: &SigningRequest,
        signature: &str,
        valid: bool,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(
            self,
            complete_message_request(request, signature, valid, now)
        )
    }

    pub async fn sign_entry(
        &self,
        request: &SigningRequest,
        entry_id: &str,
        signing: &SignatureInput,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, sign_entry(request, entry_id, signing, now))
    }

    pub async fn historic_key(
        &self,
        agent_id: &str,
        fingerprint: &str,
    ) -> Result<Option<String>, IdentityError> {
        dispatch_diary!(self, historic_key(agent_id, fingerprint))
    }

    pub async fn chain_links(
        &self,
        agent_id: &str,
    ) -> Result<(Vec<Link>, Option<(u64, String)>), IdentityError> {
        dispatch_diary!(self, chain_links(agent_id))
    }

    pub async fn insert_relation(
        &self,
        relation: &Relation,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(Relation, bool), IdentityError> {
        dispatch_diary!(self, insert_relation(relation, actor, now))
    }

    pub async fn get_relation(&self, id: &str) -> Result<Option<Relation>, IdentityError> {
        dispatch_diary!(self, get_relation(id))
    }

    pub async fn list_relations(
        &self,
        filter: &RelationFilter,
    ) -> Result<(Vec<Relation>, u64), IdentityError> {
        dispatch_diary!(self, list_relations(filter))
    }

    /// Relations with either end in `ids` (one level of a relation walk).
    pub async fn relations_touching(
        &self,
        ids: &[String],
        status: Option<&str>,
    ) -> Result<Vec<Relation>, IdentityError> {
        dispatch_diary!(self, relations_touching(ids, status))
    }

    pub async fn update_relation_status(
        &self,
        id: &str,
        status: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, update_relation_status(id, status, actor, now))
    }

    pub async fn delete_relation(
        &self,
        id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        dispatch_diary!(self, delete_relation(id, actor, now))
    }
}

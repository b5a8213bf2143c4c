//! The identity service (seed `004` with seed `001`'s token model): agents and their
//! Ed25519 keys on trust-first-use, audited key rotation with proof of possession,
//! signature verification, scoped API tokens stored only as SHA-256, and signed diaries
//! (entries with MoltNet CIDs, signing requests, verification, relations, supersession
//! and a per-agent signature chain).
//!
//! `api` adapts gRPC (proto ⇄ domain), `ops` holds the use cases (load, check, write),
//! `domain` the rules (no I/O), `store` the SQL.

pub mod api;
pub mod auth;
pub mod domain;
pub mod error;
pub mod ops;
pub mod store;

use std::sync::Arc;

use noema_proto::identity::v1::diary_service_server::DiaryServiceServer;
use noema_proto::identity::v1::identity_service_server::IdentityServiceServer;
use noema_store::Database;
use time::OffsetDateTime;

pub use error::IdentityError;
pub use store::{IdentityStore, MIGRATIONS};

pub const SERVICE_NAME: &str = "noema.identity.v1.IdentityService";
pub const DIARY_SERVICE_NAME: &str = "noema.identity.v1.DiaryService";

/// Builds the identity gRPC service over an already-migrated database.
pub async fn service(
    db: Database,
) -> Result<IdentityServiceServer<api::IdentityApi>, IdentityError> {
    db.audit_init(noema_core::audit::AuditDraft {
        actor: "system:init".into(),
        action: "init".into(),
        target_id: None,
        target_type: Some("identity".into()),
        detail: None,
    })
    .await?;
    Ok(IdentityServiceServer::new(api::IdentityApi::new(
        ops::Identity::new(IdentityStore::new(db)),
    )))
}

/// Builds the diary gRPC service (signed diaries, seed 004) over the identity database,
/// already migrated and initialised by [`service`].
pub fn diary_service(db: Database) -> DiaryServiceServer<api::DiaryApi> {
    DiaryServiceServer::new(api::DiaryApi::new(ops::Identity::new(IdentityStore::new(
        db,
    ))))
}

/// The authenticator for the process that hosts identity. Token records are cached for at
/// most `ttl`; this process's own token writes take effect at once.
pub fn local_authenticator(
    db: Database,
    ttl: std::time::Duration,
) -> Arc<dyn noema_runtime::auth::Authenticator> {
    Arc::new(auth::LocalAuthenticator::new(IdentityStore::new(db), ttl))
}

/// Makes `token_sha256` the owner (superuser) token. Returns whether it changed anything.
pub async fn ensure_owner_token(db: Database, token_sha256: &str) -> Result<bool, IdentityError> {
    let owner = domain::token::TokenRecord {
        token_id: domain::token::OWNER_TOKEN_ID.into(),
        token_sha256: token_sha256.to_owned(),
        peer_id: domain::token::OWNER_PEER_ID.into(),
        scopes: vec![noema_core::scopes::SUPERUSER_SCOPE.into()],
        read_namespaces: vec!["*".into()],
        write_namespaces: vec!["*".into()],
        superuser: true,
        status: domain::token::TokenStatus::Active,
        issued_at: OffsetDateTime::now_utc(),
        expires_at: None,
        revoked_at: None,
        revoked_reason: None,
        rotated_at: None,
        rotated_to_token_id: None,
        rotated_from_token_id: None,
        description: "owner token".into(),
        tenant: domain::token::OWNER_PEER_ID.into(),
    };
    IdentityStore::new(db)
        .ensure_owner(&owner, OffsetDateTime::now_utc())
        .await
}

pub use domain::token::{generate_secret, token_sha256};

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

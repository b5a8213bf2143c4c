//! The ledger service (seed `000`, open-cognition): system mode and the hash-chained
//! audit log; canonical objects and signed references build on these.
//!
//! `api` adapts gRPC, `domain` holds the rules, `store` holds the SQL.

pub mod api;
pub mod domain;
pub mod error;
pub mod ledger;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_proto::ledger::v1::ledger_service_server::LedgerServiceServer;
use noema_runtime::client::TracedChannel;
use noema_store::{Database, ObjectStore};

pub use error::LedgerError;
pub use store::{LedgerStore, MIGRATIONS};

/// The gRPC service name, as registered for health and reflection.
pub const SERVICE_NAME: &str = "noema.ledger.v1.LedgerService";

/// Largest gRPC message the ledger accepts or sends: a 16 MiB payload plus its fields.
pub const MAX_MESSAGE_BYTES: usize = 20 * 1024 * 1024;

/// What the ledger needs besides its own database.
pub struct Dependencies {
    pub objects: Arc<dyn ObjectStore>,
    /// Channel to the identity service (key registration on trust-first-use).
    pub identity: TracedChannel,
    /// How long a confirmed agent key is trusted without asking identity again.
    pub key_cache_ttl: Duration,
}

/// Builds the ledger's gRPC service over an already-migrated database.
pub async fn service(
    db: Database,
    deps: Dependencies,
) -> Result<LedgerServiceServer<api::LedgerApi>, LedgerError> {
    let store = LedgerStore::new(db);
    store.ensure_initialized().await?;
    let ledger = ledger::Ledger::new(
        store,
        deps.objects,
        IdentityServiceClient::new(deps.identity),
        deps.key_cache_ttl,
    );
    Ok(
        LedgerServiceServer::new(api::LedgerApi::new(Arc::new(ledger)))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    )
}

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

//! Noema's continuity service: CogniRelay's continuity capsules (seed 001, digest
//! `compat/cognirelay.md`), wire-compatible, per tenant, safe with many agents and replicas.
//!
//! `api` adapts gRPC (JSON documents as bytes), `ops` holds the use cases (load, rule,
//! write, audit), `domain` the rules (no I/O), `store` the SQL.

pub mod api;
pub mod domain;
pub mod error;
pub mod ops;
pub mod store;

use std::sync::Arc;

use noema_proto::continuity::v1::continuity_service_server::ContinuityServiceServer;
use noema_runtime::client::TracedChannel;
use noema_store::{Database, ObjectStore};

pub use error::Error;
pub use ops::Options;
pub use store::{ContinuityStore, MIGRATIONS};

/// The gRPC service name, as registered for health and reflection.
pub const SERVICE_NAME: &str = "noema.continuity.v1.ContinuityService";

/// Builds the continuity gRPC service over an already-migrated database, its object store
/// (the cold tier's payloads) and a channel to identity (agent keys of signed coordination
/// writes).
pub async fn service(
    db: Database,
    objects: Arc<dyn ObjectStore>,
    options: Options,
    identity: TracedChannel,
) -> Result<ContinuityServiceServer<api::ContinuityApi>, Error> {
    let store = ContinuityStore::new(db);
    store.ensure_initialized().await?;
    let continuity = ops::Continuity::new(store, objects, options).with_identity(identity);
    Ok(ContinuityServiceServer::new(api::ContinuityApi::new(
        Arc::new(continuity),
    )))
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

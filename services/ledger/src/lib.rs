//! The ledger service (seed `000`, open-cognition): system mode and the hash-chained
//! audit log; canonical objects and signed references build on these.
//!
//! `api` adapts gRPC, `domain` holds the rules, `store` holds the SQL.

pub mod api;
pub mod domain;
pub mod error;
pub mod store;

use noema_proto::ledger::v1::ledger_service_server::LedgerServiceServer;
use noema_store::Database;

pub use error::LedgerError;
pub use store::{LedgerStore, MIGRATIONS};

/// The gRPC service name, as registered for health and reflection.
pub const SERVICE_NAME: &str = "noema.ledger.v1.LedgerService";

/// Builds the ledger's gRPC service over an already-migrated database.
pub async fn service(db: Database) -> Result<LedgerServiceServer<api::LedgerApi>, LedgerError> {
    let store = LedgerStore::new(db);
    store.ensure_initialized().await?;
    Ok(LedgerServiceServer::new(api::LedgerApi::new(store)))
}

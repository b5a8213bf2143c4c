//! The identity service's operations, one file per aggregate: each use case loads what it
//! needs through the store, checks it against the rules (`domain`), and writes (the store
//! appends the audit entry in the write's transaction). The gRPC adapter (`api`) calls them
//! with domain values; nothing here knows protobuf.
//!
//! Checks run in the order the served APIs (MoltNet, CogniRelay, open-cognition) make them,
//! so a request with several problems gets the same first error.

mod agents;
mod chain;
mod diaries;
mod entries;
mod feed;
mod grants;
mod relations;
mod signing_requests;
mod tokens;

use noema_store::Database;

pub use agents::Verification;
pub use chain::ChainReport;
pub use entries::{EntryChanges, EntryList, EntrySearch, EntryVerification, NewEntry};
pub use relations::RelationList;
pub use signing_requests::NewSigningRequest;
pub use tokens::{Revocation, RevokeToken, RotateToken};

use crate::store::IdentityStore;

#[derive(Debug, Clone)]
pub struct Identity {
    store: IdentityStore,
}

impl Identity {
    pub fn new(store: IdentityStore) -> Self {
        Identity { store }
    }

    /// The service's database, for the shared audit-log reader.
    pub fn database(&self) -> &Database {
        self.store.database()
    }
}

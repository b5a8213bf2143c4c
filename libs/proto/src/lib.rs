//! Generated protobuf messages and tonic services for every Noema contract.
//!
//! Code is generated at build time from `proto/` by protox (no system `protoc`), so a
//! fresh machine builds with cargo alone.

/// Encoded `FileDescriptorSet` of every Noema contract (and the well-known types they
/// import). Feeds gRPC reflection and the descriptor-driven tests.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/noema_descriptor.bin"));

pub mod json;

include!(concat!(env!("OUT_DIR"), "/method_scopes.rs"));

/// The scope an RPC requires, by its gRPC path (`/package.Service/Method`).
pub fn required_scope(path: &str) -> Option<&'static str> {
    METHOD_SCOPES
        .iter()
        .find(|(method, _)| *method == path)
        .map(|(_, scope)| *scope)
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod common {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/noema.common.v1.rs"));
    }
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod identity {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/noema.identity.v1.rs"));
    }
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod ledger {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/noema.ledger.v1.rs"));
    }
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod continuity {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/noema.continuity.v1.rs"));
    }
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod world {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/noema.world.v1.rs"));
    }
}

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod orchestrator {
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/noema.orchestrator.v1.rs"));
    }
}

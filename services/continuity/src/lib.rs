//! Noema's continuity service: CogniRelay's continuity capsules (seed 001, digest
//! `compat/cognirelay.md`), wire-compatible.
//!
//! Today this crate holds the pure rules ([`domain`]); the store, the operations layer and the
//! gRPC/REST adapters are built on them.

pub mod domain;

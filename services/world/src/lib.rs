//! The world kernel (issue 19, seed 003): explicitly authored cognition workflows, ambient
//! context sources, model-elected tools, source invocation traces, and WorldPatch as the only
//! way the world changes. This crate holds the pure rules ([`domain`]) and the service's
//! error vocabulary ([`error`]); the store, the gRPC/REST surfaces and the kernel's execution
//! loop over them come with the service wiring.

pub mod domain;
pub mod error;

pub use error::WorldError;

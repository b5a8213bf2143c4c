//! The `noema` binary's library half: the service registry, the roles a process can run,
//! the node that starts them and the command line. Tests start clusters through the same
//! [`node::Node`], and other binaries (an example service) run the same [`cli::run`].

pub mod backup;
pub mod cli;
pub mod commands;
pub mod instrumented;
pub mod node;
pub mod registry;
pub mod role;

pub use node::{Node, NodeError};
pub use registry::Registry;
pub use role::Role;

//! The `noema` binary's library half: the roles a process can run and the node that
//! starts them. Tests start clusters through the same [`node::Node`].

pub mod backup;
pub mod commands;
pub mod instrumented;
pub mod node;
pub mod role;

pub use node::{Node, NodeError};
pub use role::Role;

//! The identity service's rules: no I/O here.

pub mod agent;
pub mod token;

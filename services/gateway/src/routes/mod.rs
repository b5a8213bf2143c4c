//! REST routes, one module per fronted system.

pub mod ledger;
pub mod ops;

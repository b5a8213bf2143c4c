//! REST routes, one module per fronted system.

pub mod diary;
pub mod identity;
pub mod ledger;
pub mod ledger_objects;
pub mod ops;

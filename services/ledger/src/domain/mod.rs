//! The ledger's rules: no I/O here.

pub mod canonical;
pub mod mode;
pub mod reference;

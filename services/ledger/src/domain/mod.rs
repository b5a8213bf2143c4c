//! The ledger's rules: no I/O here.

pub mod mode;

//! Continuity's rules, with no I/O.
pub mod error;
pub mod json;
pub mod model;
pub mod schema;
pub mod text;
pub mod timestamp;
pub mod validation;

//! The identity service's rules: no I/O here.

pub mod agent;
pub mod bulk;
pub mod chain;
pub mod diary;
pub mod entry;
pub mod feed;
pub mod grant;
pub mod input;
pub mod relation;
pub mod search;
pub mod signing;
pub mod tag;
pub mod token;
pub mod walk;

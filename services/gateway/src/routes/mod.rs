//! REST routes, one module per fronted system or aggregate, each declaring its routes
//! once (`crate::route`).

pub mod backup;
pub mod chain;
pub mod continuity;
pub mod coordination;
pub mod diaries;
pub mod discovery;
pub mod entries;
pub mod feed;
pub mod grants;
pub mod help;
pub mod identity;
pub mod ledger;
pub mod ledger_objects;
pub mod memory;
pub mod moltnet;
pub mod ops;
pub mod orchestrator;
pub mod peers;
pub mod relations;
pub mod schedule;
pub mod signing;
pub mod tasks;
pub mod tokens;
pub mod world;
pub mod world_components;

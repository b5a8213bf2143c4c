//! Every end-to-end case of Noema, one module per area, linked as one test binary (a binary
//! per file linked the whole system once per file).

mod auth;
mod bad_input;
mod context;
mod continuity;
mod continuity_hooks;
mod continuity_rest;
mod coordination;
mod diaries;
mod foundation;
mod identity;
mod ledger;
mod mcp;
mod memory;
mod messages;
mod observability;
mod operations;
mod orchestrator;
mod orchestrator_release;
mod orchestrator_replicas;
mod orchestrator_reputation;
mod orchestrator_streams;
mod resilience;
mod source_rules;
mod world;

//! The world kernel's rules, pure: no I/O, no SQL, no clock, no randomness. The operations
//! layer loads what these functions need, calls them with ids and times it chose, and stores
//! what they return.
//!
//! Where each of the seed's decisions lives:
//! - contracts and content addressing: [`hash`], [`schema`], [`component`], [`workflow`],
//!   [`source`], [`scenario`], [`patch`];
//! - assembly validation (A1): [`assembly`];
//! - ambient sources (D3, D19): [`ambient`], [`workflow::template`];
//! - the tool loop and its one retry lane (D4–D6, D13): [`tool_loop`], [`failure`];
//! - attempts and what a turn request answers (D11): [`attempt`];
//! - WorldPatch application, many patches per turn, per-patch transitions (D8–D12): [`patch`],
//!   [`turn`];
//! - traces (D15–D17): [`invocation`], [`llm_call`];
//! - the source interface and its additive registry of kinds (D20, D22): [`source`].

pub mod ambient;
pub mod assembly;
pub mod attempt;
pub mod chat;
pub mod component;
pub mod failure;
pub mod hash;
pub mod ids;
pub mod invocation;
pub mod llm_call;
pub mod patch;
pub mod problem;
pub mod scenario;
pub mod schema;
pub mod source;
pub mod tool_loop;
pub mod turn;
pub mod workflow;
pub mod world;

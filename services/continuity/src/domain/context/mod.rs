//! Context retrieval (digest §10, issue 16): the token-budgeted continuation bundle of
//! `POST /v1/context/retrieve`, its derived graph and schedule sections (shared with the
//! startup view), and context snapshots.
//!
//! | concern | module |
//! |---|---|
//! | request bodies, 422s, defaults | [`request`] |
//! | §10.1 `render` and the token estimate (Python `str`/`repr`) | [`render`] |
//! | §10.1 phase-1/phase-2 trimming, string and list truncation | [`trimming`] |
//! | §10 step 5 budget split, trust form choice, `budget` block | [`budget`] |
//! | §10 step 1 selectors, dedup, cap, inference, warning suffixes | [`selection`] |
//! | §10 steps 2–7 loading policies, per-capsule blocks, aggregates | [`state`] |
//! | core memory, evidence packing, open questions, notes, the bundle | [`bundle`] |
//! | `graph_context` / `graph_summary` | [`graph`] |
//! | `schedule_context` | [`schedule`] |
//! | snapshots: content-addressed bundles | [`snapshot`] |

pub mod budget;
pub mod bundle;
#[cfg(test)]
mod golden;
pub mod graph;
pub mod render;
pub mod request;
pub mod schedule;
pub mod selection;
pub mod snapshot;
pub mod state;
pub mod trimming;

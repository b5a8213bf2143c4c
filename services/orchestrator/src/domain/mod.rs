//! The orchestrator's rules: no I/O here. A reader looking for a rule of the Cognitive OS
//! seed (`002_…`) finds it in the module named after it:
//!
//! | seed | module |
//! |---|---|
//! | §2 state machine | [`state`], [`events`] (§10 events and replay) |
//! | §3 canonical objects | [`objects`], [`schema`] |
//! | §4–§6 risk policy, safety rules, tool governance | [`policy`], [`risk`] |
//! | §3.3, §5.4 approvals | [`approval`] |
//! | §3.4, §5.5 execution trace | [`trace`] |
//! | §7 evaluation gate | [`eval`] |
//! | §8–§9 gold calibration, reward, anti-abuse | [`reputation`] |
//! | §12 release checklist | [`release`] |

pub mod approval;
pub mod eval;
pub mod events;
pub mod invoke;
pub mod objects;
pub mod policy;
pub mod release;
pub mod reputation;
pub mod risk;
pub mod schema;
pub mod state;
pub mod timestamp;
pub mod trace;

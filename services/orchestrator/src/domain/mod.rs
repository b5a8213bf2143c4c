//! The orchestrator's rules: no I/O here. A reader looking for a rule of the Cognitive OS
//! seed (`002_…`) finds it in the module named after its section.

pub mod approval;
pub mod events;
pub mod objects;
pub mod policy;
pub mod risk;
pub mod schema;
pub mod state;
pub mod timestamp;
pub mod trace;

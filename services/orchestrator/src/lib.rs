//! The orchestrator: Cognitive OS's governed runtime.

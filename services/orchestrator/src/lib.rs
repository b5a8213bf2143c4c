//! The orchestrator: Cognitive OS's governed runtime. A request moves RECEIVED → PLANNED →
//! RISKED → (APPROVAL_PENDING) → EXECUTED | BLOCKED → TRACED → EVALUATED → REWARDED under a
//! machine-readable risk policy, with signed approvals, a trace for every execution, an
//! eval gate and a reputation loop.
//!
//! `api` adapts gRPC, `ops` holds the use cases, `domain` the rules (no I/O), `store` the
//! SQL.

pub mod api;
pub mod domain;
pub mod error;
pub mod ops;
pub mod options;
pub mod store;

pub use error::OrchestratorError;
pub use options::Options;
pub use store::{MIGRATIONS, OrchestratorStore};

use std::sync::{Arc, Weak};

use noema_proto::orchestrator::v1::orchestrator_service_server::OrchestratorServiceServer;
use noema_store::Database;

pub use ops::{Caller, Dependencies, Orchestrator};

/// The gRPC service name, as registered for health and reflection.
pub const SERVICE_NAME: &str = "noema.orchestrator.v1.OrchestratorService";

/// Largest gRPC message accepted or sent: plans and traces with their arguments.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Builds the orchestrator over an already-migrated database: loads the policy (a missing
/// or invalid one fails here, "risk matrix not loaded: …"), records it in the audit log,
/// and reloads it on every SIGHUP.
pub async fn service(
    db: Database,
    options: &Options,
    deps: Dependencies,
) -> Result<OrchestratorServiceServer<api::OrchestratorApi>, OrchestratorError> {
    let orchestrator = Arc::new(Orchestrator::new(
        OrchestratorStore::new(db),
        options,
        deps,
    )?);
    orchestrator.record_start().await?;
    reload_on_sighup(Arc::downgrade(&orchestrator));
    Ok(
        OrchestratorServiceServer::new(api::OrchestratorApi::new(orchestrator))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
    )
}

/// Reloads the policy on each SIGHUP for as long as the orchestrator lives (the task holds
/// no strong reference, so a stopped service is not kept alive by it).
fn reload_on_sighup(orchestrator: Weak<Orchestrator>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for SIGHUP; reload the policy with ReloadPolicy");
            return;
        }
    };
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(orchestrator) = orchestrator.upgrade() else {
                break;
            };
            // The outcome is logged and audited by the reload itself.
            let _ = orchestrator.reload_policy("system:sighup").await;
        }
    });
}

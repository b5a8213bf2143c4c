//! One cancellation token per process, cancelled by SIGTERM or SIGINT.

use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Returns a token cancelled on the first SIGTERM or SIGINT. Servers watch it, report
/// NOT_SERVING, stop accepting and drain; the process then exits 0 from `main`.
pub fn on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    // Installed here, before returning, rather than in the task: a SIGTERM that arrives
    // before the task first runs (a busy machine, a fast supervisor) must start a drain,
    // not take the default action and kill the process.
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    tokio::spawn(async move {
        wait_for_signal(handlers).await;
        tracing::info!("shutdown signal received; draining");
        trigger.cancel();
    });
    token
}

async fn wait_for_signal(handlers: (io::Result<Signal>, io::Result<Signal>)) {
    match handlers {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            // Without signal handlers the process can still be stopped; keep Ctrl-C.
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

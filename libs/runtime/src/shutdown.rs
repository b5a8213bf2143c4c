//! One cancellation token per process, cancelled by SIGTERM or SIGINT.

use tokio_util::sync::CancellationToken;

/// Returns a token cancelled on the first SIGTERM or SIGINT. Servers watch it, report
/// NOT_SERVING, stop accepting and drain; the process then exits 0 from `main`.
pub fn on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown signal received; draining");
        trigger.cancel();
    });
    token
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
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

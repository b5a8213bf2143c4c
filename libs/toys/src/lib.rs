//! Toys for the world kernel, as real HTTP servers on loopback: a scripted OpenAI-compatible
//! LLM ([`llm`]) and the seed's toy sources ([`park`]) — weather that cools over turns, a PA
//! that sometimes speaks, a phone inbox with spam, a send-text service, a vending machine with
//! one candy bar and a drinking fountain — plus endpoints that fail on purpose.
//!
//! To the world kernel these are ordinary sources (D22): an `llm_chat_completions` source
//! pointed at the LLM toy, `http_json` sources whose `url_env` names the toys' base URL.
//! `noema toys serve` (with the service wiring) runs [`serve`] with a script file.

pub mod llm;
pub mod park;
pub mod scenario;
pub mod script;

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use llm::ScriptedLlm;
pub use park::Park;
pub use script::{LlmScript, ScriptError};

/// Every toy on one router: the LLM under `/v1`, the sources at the seed's paths.
pub fn router(llm: &ScriptedLlm, park: &Park) -> axum::Router {
    llm.router().merge(park.router())
}

/// A running toy server.
pub struct ToyServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl ToyServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`, the base URL for `url_env` variables and the LLM source.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets in-flight requests finish, and waits for the server to end.
    pub async fn shutdown(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(result) => result,
            Err(e) => Err(std::io::Error::other(e)),
        }
    }
}

impl Drop for ToyServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Serves `router` on `listener` until [`ToyServer::shutdown`] (or drop).
pub fn serve(listener: TcpListener, router: axum::Router) -> std::io::Result<ToyServer> {
    let addr = listener.local_addr()?;
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
    });
    tracing::info!(%addr, "toys listening");
    Ok(ToyServer {
        addr,
        shutdown: Some(tx),
        task,
    })
}

/// Binds `addr` and serves every toy.
pub async fn serve_all(
    addr: SocketAddr,
    llm: &ScriptedLlm,
    park: &Park,
) -> std::io::Result<ToyServer> {
    let listener = TcpListener::bind(addr).await?;
    serve(listener, router(llm, park))
}

//! Client and operator commands: they talk to a running Noema over gRPC, as any agent
//! runtime would, through noema-client.

pub mod bench;
pub mod bench_context;
pub mod bench_continuity;
pub mod bench_coordination;
mod bench_fill;
pub mod bench_orchestrator;
pub mod bench_world;
pub mod connect;
pub mod context;
pub mod continuity;
pub mod coordination;
pub mod diary;
pub mod ledger;
pub mod mcp;
pub mod memory;
pub mod message;
pub mod orchestrator;
pub mod toys;
pub mod world;

use std::io::Write;

/// Writes a line to stdout; a closed pipe (e.g. `| head`) is not worth a panic.
pub fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

/// Writes pretty JSON to stdout.
pub fn say_json(value: &serde_json::Value) {
    say(&serde_json::to_string_pretty(value).unwrap_or_default());
}

/// A command's failure: what to print and the exit code.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error(transparent)]
    Client(#[from] noema_client::ClientError),
    #[error(transparent)]
    Status(#[from] tonic::Status),
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    /// The command ran and found a problem (e.g. reconcile found missing objects).
    #[error("{0}")]
    Found(String),
}

impl CommandError {
    /// [`CommandError::Found`] saying what failed and why: `<what>: <why>`.
    pub fn found(what: impl std::fmt::Display, why: impl std::fmt::Display) -> CommandError {
        CommandError::Found(format!("{what}: {why}"))
    }
}

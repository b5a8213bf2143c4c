//! `noema context …`: CogniRelay's context retrieval and snapshots from the command line.
//! Answers are printed exactly as the service sends them (the original's JSON, its key order
//! kept), one document per line.

use clap::Subcommand;
use noema_client::pb::continuity::{GetSnapshotRequest, JsonRequest};
use serde_json::{Map, Value};

use super::continuity::ContinuityFlags;
use super::{CommandError, say};

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// A token-budgeted continuation bundle for a task (`POST /v1/context/retrieve`).
    Retrieve {
        /// The task text (`thread:<id>` or `task:<id>` names a capsule by itself).
        task: String,
        /// The primary subject's kind (user, peer, thread, task), with --subject-id.
        #[arg(long)]
        subject_kind: Option<String>,
        #[arg(long)]
        subject_id: Option<String>,
        /// More capsules, as `kind:id` (up to 4; repeat the flag).
        #[arg(long = "selector")]
        selectors: Vec<String>,
        /// How many capsules at most (1-4).
        #[arg(long)]
        max_capsules: Option<u8>,
        /// The token budget (256-100000).
        #[arg(long)]
        max_tokens: Option<u32>,
        /// `auto`, `required` or `off`.
        #[arg(long)]
        mode: Option<String>,
        /// `allow_degraded`, `prefer_healthy` or `require_healthy`.
        #[arg(long)]
        verification_policy: Option<String>,
        /// `allow_fallback`, `prefer_active` or `require_active`.
        #[arg(long)]
        resilience_policy: Option<String>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Store a context snapshot (`POST /v1/context/snapshot`).
    Snapshot {
        task: String,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// A stored snapshot, byte for byte (`GET /v1/context/snapshot/{id}`).
    SnapshotGet {
        id: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

fn print(bytes: &[u8]) {
    say(&String::from_utf8_lossy(bytes));
}

/// The retrieve body the flags describe (only what was given; the service fills defaults).
#[allow(clippy::too_many_arguments)]
fn retrieve_body(
    task: &str,
    subject_kind: Option<&str>,
    subject_id: Option<&str>,
    selectors: &[String],
    max_capsules: Option<u8>,
    max_tokens: Option<u32>,
    mode: Option<&str>,
    verification_policy: Option<&str>,
    resilience_policy: Option<&str>,
) -> Result<Vec<u8>, CommandError> {
    let mut body = Map::new();
    body.insert("task".into(), Value::from(task));
    let mut text = |key: &str, value: Option<&str>| {
        if let Some(value) = value {
            body.insert(key.into(), Value::from(value));
        }
    };
    text("subject_kind", subject_kind);
    text("subject_id", subject_id);
    text("continuity_mode", mode);
    text("continuity_verification_policy", verification_policy);
    text("continuity_resilience_policy", resilience_policy);
    if !selectors.is_empty() {
        let mut list = Vec::new();
        for selector in selectors {
            let (kind, id) = selector.split_once(':').ok_or_else(|| {
                CommandError::Usage(format!("--selector {selector:?} is not kind:id"))
            })?;
            let mut entry = Map::new();
            entry.insert("subject_kind".into(), Value::from(kind));
            entry.insert("subject_id".into(), Value::from(id));
            list.push(Value::Object(entry));
        }
        body.insert("continuity_selectors".into(), Value::Array(list));
    }
    if let Some(n) = max_capsules {
        body.insert("continuity_max_capsules".into(), Value::from(n));
    }
    if let Some(n) = max_tokens {
        body.insert("max_tokens_estimate".into(), Value::from(n));
    }
    serde_json::to_vec(&body).map_err(|e| CommandError::Usage(e.to_string()))
}

pub async fn context(command: &ContextCommand) -> Result<(), CommandError> {
    match command {
        ContextCommand::Retrieve {
            task,
            subject_kind,
            subject_id,
            selectors,
            max_capsules,
            max_tokens,
            mode,
            verification_policy,
            resilience_policy,
            flags,
        } => {
            let body = retrieve_body(
                task,
                subject_kind.as_deref(),
                subject_id.as_deref(),
                selectors,
                *max_capsules,
                *max_tokens,
                mode.as_deref(),
                verification_policy.as_deref(),
                resilience_policy.as_deref(),
            )?;
            let response = flags
                .connect()
                .await?
                .client()
                .retrieve(JsonRequest { body })
                .await?
                .into_inner();
            print(&response.body);
        }
        ContextCommand::Snapshot { task, limit, flags } => {
            let mut body = Map::new();
            body.insert("task".into(), Value::from(task.as_str()));
            if let Some(limit) = limit {
                body.insert("limit".into(), Value::from(*limit));
            }
            let body = serde_json::to_vec(&body).map_err(|e| CommandError::Usage(e.to_string()))?;
            let response = flags
                .connect()
                .await?
                .client()
                .create_snapshot(JsonRequest { body })
                .await?
                .into_inner();
            print(&response.body);
        }
        ContextCommand::SnapshotGet { id, flags } => {
            let response = flags
                .connect()
                .await?
                .client()
                .get_snapshot(GetSnapshotRequest {
                    snapshot_id: id.clone(),
                })
                .await?
                .into_inner();
            print(&response.body);
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_a_retrieve_body() {
        let body = retrieve_body(
            "what next?",
            Some("thread"),
            Some("t1"),
            &["user:alice".to_owned()],
            Some(2),
            Some(4000),
            None,
            None,
            None,
        )
        .unwrap();
        let value: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["continuity_selectors"][0]["subject_id"], "alice");
        assert_eq!(value["max_tokens_estimate"], 4000);
        assert!(value.get("continuity_mode").is_none());
        assert!(
            retrieve_body(
                "x",
                None,
                None,
                &["nocolon".into()],
                None,
                None,
                None,
                None,
                None
            )
            .is_err()
        );
    }
}

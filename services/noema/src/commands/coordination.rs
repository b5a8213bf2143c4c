//! `noema peers …`, `noema handoff …`, `noema shared …`, `noema reconcile …`: CogniRelay's
//! peer registry and coordination artifacts from the command line. Request bodies come from
//! a JSON file (the original's body) or from flags; answers are printed exactly as the
//! service sends them (the original's JSON, its key order kept).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use noema_client::pb::continuity::{ItemRequest, JsonRequest};
use noema_continuity::domain::coordination::signing;
use noema_continuity::domain::json::Json;
use serde_json::{Map, Value, json};

use super::CommandError;
use super::continuity::{ContinuityFlags, print, read_bytes};
use super::ledger::read_key;

#[derive(Debug, Subcommand)]
pub enum PeersCommand {
    /// The tenant's peer registry.
    List {
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Register or update a peer (admin).
    Register {
        peer_id: String,
        #[arg(long)]
        base_url: String,
        /// trusted, restricted (default) or untrusted
        #[arg(long)]
        trust_level: Option<String>,
        #[arg(long)]
        public_key: Option<String>,
        /// Why the trust level moves (required when it does)
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Move a peer's trust level (admin).
    Trust {
        peer_id: String,
        /// trusted, restricted or untrusted
        trust_level: String,
        #[arg(long)]
        reason: String,
        /// Bind the peer to this agent registered in identity (its writes may then be
        /// signed with the agent's key).
        #[arg(long, conflicts_with = "unbind")]
        agent_id: Option<String>,
        /// Remove the peer's agent binding.
        #[arg(long)]
        unbind: bool,
        /// Whether the bound peer's coordination writes must be signed.
        #[arg(long, value_name = "BOOL")]
        require_signed_writes: Option<bool>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum HandoffCommand {
    /// Hand a peer the shareable part of an active capsule.
    Create {
        recipient_peer: String,
        subject_kind: String,
        subject_id: String,
        #[arg(long)]
        task_id: Option<String>,
        #[arg(long)]
        thread_id: Option<String>,
        #[arg(long)]
        note: Option<String>,
        /// Sign the request with this agent seed file (`noema keygen --out`): the sender's
        /// peer must be bound to that agent.
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// One handoff.
    Get {
        handoff_id: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Handoffs by sender or recipient (one of them: the caller's own peer, unless admin).
    Query {
        #[arg(long)]
        sender_peer: Option<String>,
        #[arg(long)]
        recipient_peer: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        offset: Option<u32>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Accept, defer or reject a handoff addressed to the caller.
    Consume {
        handoff_id: String,
        /// accepted_advisory, deferred or rejected
        status: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum SharedCommand {
    /// Create a shared artifact. FILE holds the original's body.
    Create {
        /// A JSON file, or `-` for stdin.
        file: PathBuf,
        /// Sign the body with this agent seed file (`noema keygen --out`).
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// One shared artifact.
    Get {
        shared_id: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Its superseded versions, oldest first.
    History {
        shared_id: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Shared artifacts by owner, participant, task or thread.
    Query {
        #[arg(long)]
        owner_peer: Option<String>,
        #[arg(long)]
        participant_peer: Option<String>,
        #[arg(long)]
        task_id: Option<String>,
        #[arg(long)]
        thread_id: Option<String>,
        #[arg(long)]
        offset: Option<u32>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Replace the state (owner). FILE holds `{expected_version, title, …}`.
    Update {
        shared_id: String,
        file: PathBuf,
        /// Sign the body with this agent seed file (`noema keygen --out`).
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReconcileCommand {
    /// Open a reconciliation. FILE holds the original's body (`{title, trigger, claims, …}`).
    Open {
        file: PathBuf,
        /// Sign the body with this agent seed file (`noema keygen --out`).
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// One reconciliation.
    Get {
        reconciliation_id: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Reconciliations by owner, claimant, status, classification, task or thread.
    Query {
        #[arg(long)]
        owner_peer: Option<String>,
        #[arg(long)]
        claimant_peer: Option<String>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        classification: Option<String>,
        #[arg(long)]
        task_id: Option<String>,
        #[arg(long)]
        thread_id: Option<String>,
        #[arg(long)]
        offset: Option<u32>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Resolve it once (owner or admin) at the version read.
    Resolve {
        reconciliation_id: String,
        /// advisory_only, conflicted or rejected
        outcome: String,
        #[arg(long)]
        expected_version: i64,
        #[arg(long)]
        summary: String,
        /// Sign the body with this agent seed file (`noema keygen --out`).
        #[arg(long, value_name = "FILE")]
        sign_key: Option<PathBuf>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

fn encode(value: &Value) -> Result<Vec<u8>, CommandError> {
    serde_json::to_vec(value).map_err(|e| CommandError::Usage(e.to_string()))
}

/// A JSON body of the given fields, leaving out the absent ones.
fn object(fields: &[(&str, Option<Value>)]) -> Result<Vec<u8>, CommandError> {
    let mut map = Map::new();
    for (key, value) in fields {
        if let Some(value) = value {
            map.insert((*key).to_owned(), value.clone());
        }
    }
    encode(&Value::Object(map))
}

/// Query parameters as the service takes them: an object of strings.
fn params(fields: &[(&str, Option<String>)]) -> Result<JsonRequest, CommandError> {
    let fields: Vec<(&str, Option<Value>)> = fields
        .iter()
        .map(|(k, v)| (*k, v.clone().map(Value::String)))
        .collect();
    Ok(JsonRequest {
        body: object(&fields)?,
    })
}

/// `body` with Noema's `sender_signature`: the key's Ed25519 signature over the JCS bytes
/// of the object continuity verifies (`signing::signed_object`: the body without the
/// signature, plus the path's id for an update or resolve); unchanged without a key.
fn signed(
    body: Vec<u8>,
    key_file: Option<&Path>,
    target: Option<(&str, &str)>,
) -> Result<Vec<u8>, CommandError> {
    let Some(key_file) = key_file else {
        return Ok(body);
    };
    let key = read_key(key_file)?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| CommandError::Usage(format!("the body is not JSON: {e}")))?;
    let covered = signing::signed_object(Json::from_value(&value), target)
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let message =
        signing::signing_bytes(&covered).map_err(|e| CommandError::Usage(e.to_string()))?;
    let Value::Object(mut object) = value else {
        return Err(CommandError::Usage("the body is not a JSON object".into()));
    };
    object.insert(
        signing::FIELD.into(),
        json!({
            "public_key": key.public_key().to_prefixed(),
            "signature": key.sign(&message).to_base64(),
        }),
    );
    encode(&Value::Object(object))
}

fn text(value: &Option<String>) -> Option<Value> {
    value.clone().map(Value::String)
}

fn number(value: Option<u32>) -> Option<String> {
    value.map(|n| n.to_string())
}

fn item(id: &str, body: Vec<u8>) -> ItemRequest {
    ItemRequest {
        id: id.to_owned(),
        body,
    }
}

pub async fn peers(command: &PeersCommand) -> Result<(), CommandError> {
    let answer = match command {
        PeersCommand::List { flags } => {
            flags
                .connect()
                .await?
                .client()
                .list_peers(JsonRequest { body: Vec::new() })
                .await?
        }
        PeersCommand::Register {
            peer_id,
            base_url,
            trust_level,
            public_key,
            reason,
            flags,
        } => {
            let body = object(&[
                ("peer_id", Some(json!(peer_id))),
                ("base_url", Some(json!(base_url))),
                ("trust_level", text(trust_level)),
                ("public_key", text(public_key)),
                ("transition_reason", text(reason)),
            ])?;
            flags
                .connect()
                .await?
                .client()
                .register_peer(JsonRequest { body })
                .await?
        }
        PeersCommand::Trust {
            peer_id,
            trust_level,
            reason,
            agent_id,
            unbind,
            require_signed_writes,
            flags,
        } => {
            let mut body = json!({"trust_level": trust_level, "reason": reason});
            if let Some(agent_id) = agent_id {
                body["agent_id"] = json!(agent_id);
            } else if *unbind {
                body["agent_id"] = Value::Null;
            }
            if let Some(require) = require_signed_writes {
                body["require_signed_writes"] = json!(require);
            }
            let body = encode(&body)?;
            flags
                .connect()
                .await?
                .client()
                .transition_peer_trust(item(peer_id, body))
                .await?
        }
    };
    print(&answer.into_inner().body);
    Ok(())
}

pub async fn handoff(command: &HandoffCommand) -> Result<(), CommandError> {
    let answer = match command {
        HandoffCommand::Create {
            recipient_peer,
            subject_kind,
            subject_id,
            task_id,
            thread_id,
            note,
            sign_key,
            flags,
        } => {
            let body = object(&[
                ("recipient_peer", Some(json!(recipient_peer))),
                ("subject_kind", Some(json!(subject_kind))),
                ("subject_id", Some(json!(subject_id))),
                ("task_id", text(task_id)),
                ("thread_id", text(thread_id)),
                ("note", text(note)),
            ])?;
            let body = signed(body, sign_key.as_deref(), None)?;
            flags
                .connect()
                .await?
                .client()
                .create_handoff(JsonRequest { body })
                .await?
        }
        HandoffCommand::Get { handoff_id, flags } => {
            flags
                .connect()
                .await?
                .client()
                .get_handoff(item(handoff_id, Vec::new()))
                .await?
        }
        HandoffCommand::Query {
            sender_peer,
            recipient_peer,
            status,
            offset,
            limit,
            flags,
        } => {
            let request = params(&[
                ("sender_peer", sender_peer.clone()),
                ("recipient_peer", recipient_peer.clone()),
                ("status", status.clone()),
                ("offset", number(*offset)),
                ("limit", number(*limit)),
            ])?;
            flags
                .connect()
                .await?
                .client()
                .query_handoffs(request)
                .await?
        }
        HandoffCommand::Consume {
            handoff_id,
            status,
            reason,
            flags,
        } => {
            let body = object(&[("status", Some(json!(status))), ("reason", text(reason))])?;
            flags
                .connect()
                .await?
                .client()
                .consume_handoff(item(handoff_id, body))
                .await?
        }
    };
    print(&answer.into_inner().body);
    Ok(())
}

pub async fn shared(command: &SharedCommand) -> Result<(), CommandError> {
    let answer = match command {
        SharedCommand::Create {
            file,
            sign_key,
            flags,
        } => {
            let body = signed(read_bytes(file)?, sign_key.as_deref(), None)?;
            flags
                .connect()
                .await?
                .client()
                .create_shared(JsonRequest { body })
                .await?
        }
        SharedCommand::Get { shared_id, flags } => {
            flags
                .connect()
                .await?
                .client()
                .get_shared(item(shared_id, Vec::new()))
                .await?
        }
        SharedCommand::History { shared_id, flags } => {
            flags
                .connect()
                .await?
                .client()
                .get_shared_history(item(shared_id, Vec::new()))
                .await?
        }
        SharedCommand::Query {
            owner_peer,
            participant_peer,
            task_id,
            thread_id,
            offset,
            limit,
            flags,
        } => {
            let request = params(&[
                ("owner_peer", owner_peer.clone()),
                ("participant_peer", participant_peer.clone()),
                ("task_id", task_id.clone()),
                ("thread_id", thread_id.clone()),
                ("offset", number(*offset)),
                ("limit", number(*limit)),
            ])?;
            flags
                .connect()
                .await?
                .client()
                .query_shared(request)
                .await?
        }
        SharedCommand::Update {
            shared_id,
            file,
            sign_key,
            flags,
        } => {
            let target = Some((signing::SHARED_TARGET, shared_id.as_str()));
            let body = signed(read_bytes(file)?, sign_key.as_deref(), target)?;
            flags
                .connect()
                .await?
                .client()
                .update_shared(item(shared_id, body))
                .await?
        }
    };
    print(&answer.into_inner().body);
    Ok(())
}

pub async fn reconcile(command: &ReconcileCommand) -> Result<(), CommandError> {
    let answer = match command {
        ReconcileCommand::Open {
            file,
            sign_key,
            flags,
        } => {
            let body = signed(read_bytes(file)?, sign_key.as_deref(), None)?;
            flags
                .connect()
                .await?
                .client()
                .open_reconciliation(JsonRequest { body })
                .await?
        }
        ReconcileCommand::Get {
            reconciliation_id,
            flags,
        } => {
            flags
                .connect()
                .await?
                .client()
                .get_reconciliation(item(reconciliation_id, Vec::new()))
                .await?
        }
        ReconcileCommand::Query {
            owner_peer,
            claimant_peer,
            status,
            classification,
            task_id,
            thread_id,
            offset,
            limit,
            flags,
        } => {
            let request = params(&[
                ("owner_peer", owner_peer.clone()),
                ("claimant_peer", claimant_peer.clone()),
                ("status", status.clone()),
                ("classification", classification.clone()),
                ("task_id", task_id.clone()),
                ("thread_id", thread_id.clone()),
                ("offset", number(*offset)),
                ("limit", number(*limit)),
            ])?;
            flags
                .connect()
                .await?
                .client()
                .query_reconciliations(request)
                .await?
        }
        ReconcileCommand::Resolve {
            reconciliation_id,
            outcome,
            expected_version,
            summary,
            sign_key,
            flags,
        } => {
            let body = encode(
                &json!({"expected_version": expected_version, "outcome": outcome,
                                      "resolution_summary": summary}),
            )?;
            let target = Some((signing::RECONCILIATION_TARGET, reconciliation_id.as_str()));
            let body = signed(body, sign_key.as_deref(), target)?;
            flags
                .connect()
                .await?
                .client()
                .resolve_reconciliation(item(reconciliation_id, body))
                .await?
        }
    };
    print(&answer.into_inner().body);
    Ok(())
}

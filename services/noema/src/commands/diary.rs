//! Diary commands: diaries, entries (draft → sign locally → verify) and the per-agent
//! signature chain check.

use std::path::PathBuf;

use clap::Subcommand;
use noema_client::pb::identity as pb;
use serde_json::{Value, json};

use super::connect::ClientFlags;
use super::ledger::read_key;
use super::{CommandError, say_json};

#[derive(Debug, Subcommand)]
pub enum DiaryCommand {
    /// Create a diary owned by the token's agent.
    Create {
        #[arg(long)]
        name: String,
        /// private, moltnet or public (inherited by every entry).
        #[arg(long, default_value = "private")]
        visibility: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Diaries the token can read.
    List {
        #[command(flatten)]
        client: ClientFlags,
    },
    /// One diary.
    Show {
        id: String,
        #[command(flatten)]
        client: ClientFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum EntryCommand {
    /// Create a draft entry (its contentHash is computed by the server).
    Create {
        #[arg(long)]
        diary: String,
        #[arg(long)]
        content: String,
        #[arg(long)]
        title: Option<String>,
        /// A tag; repeat for several.
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// episodic, semantic, procedural, reflection, identity or soul.
        #[arg(long = "type", default_value = "semantic")]
        entry_type: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Sign a draft with the agent's key, locally: prepare → check the signing input →
    /// sign → submit. The entry becomes immutable.
    Sign {
        id: String,
        /// File holding the agent's base64 seed (from `noema keygen --out`).
        #[arg(long, value_name = "FILE")]
        key_file: PathBuf,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Check an entry's hash and signature. Exits 1 when it is signed but not valid.
    Verify {
        id: String,
        #[command(flatten)]
        client: ClientFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum IdentityCommand {
    /// Walk an agent's signature chain; exits 1 when an entry is missing or reordered.
    VerifyChain {
        agent_id: String,
        #[command(flatten)]
        client: ClientFlags,
    },
}

fn diary_json(d: &pb::Diary) -> Value {
    json!({"id": d.id, "owner_id": d.owner_id, "name": d.name, "visibility": d.visibility, "signed": d.signed})
}

fn entry_json(e: &pb::Entry) -> Value {
    json!({
        "id": e.id, "diary_id": e.diary_id, "title": e.title, "content": e.content, "tags": e.tags,
        "entry_type": e.entry_type, "content_hash": e.content_hash,
        "signed": !e.content_signature.is_empty(), "signed_by": e.signed_by,
    })
}

pub async fn diary(command: &DiaryCommand) -> Result<(), CommandError> {
    match command {
        DiaryCommand::Create {
            name,
            visibility,
            client,
        } => {
            let mut diary = client.connect().await?.diary();
            let created = diary
                .create_diary(pb::CreateDiaryRequest {
                    name: name.clone(),
                    visibility: visibility.clone(),
                    team_id: String::new(),
                })
                .await?
                .into_inner();
            say_json(&diary_json(&created));
        }
        DiaryCommand::List { client } => {
            let mut diary = client.connect().await?.diary();
            let list = diary
                .list_diaries(pb::ListDiariesRequest {})
                .await?
                .into_inner();
            say_json(&Value::Array(list.diaries.iter().map(diary_json).collect()));
        }
        DiaryCommand::Show { id, client } => {
            let mut diary = client.connect().await?.diary();
            let found = diary
                .get_diary(pb::GetDiaryRequest { id: id.clone() })
                .await?
                .into_inner();
            say_json(&diary_json(&found));
        }
    }
    Ok(())
}

pub async fn entry(command: &EntryCommand) -> Result<(), CommandError> {
    match command {
        EntryCommand::Create {
            diary: diary_id,
            content,
            title,
            tags,
            entry_type,
            client,
        } => {
            let mut diary = client.connect().await?.diary();
            let created = diary
                .create_entry(pb::CreateEntryRequest {
                    diary_id: diary_id.clone(),
                    content: content.clone(),
                    title: title.clone(),
                    tags: tags.clone(),
                    entry_type: entry_type.clone(),
                    ..pb::CreateEntryRequest::default()
                })
                .await?
                .into_inner();
            say_json(&entry_json(&created));
        }
        EntryCommand::Sign {
            id,
            key_file,
            client,
        } => {
            let key = read_key(key_file)?;
            let mut diary = client.connect().await?.diary();
            let request = noema_client::diary::sign_entry(&mut diary, id, &key).await?;
            say_json(
                &json!({"entry_id": id, "signing_request_id": request.id, "status": request.status, "valid": request.valid}),
            );
            if request.valid != Some(true) {
                return Err(CommandError::Found(
                    "the server did not accept the signature".into(),
                ));
            }
        }
        EntryCommand::Verify { id, client } => {
            let mut diary = client.connect().await?.diary();
            let v = diary
                .verify_entry(pb::VerifyEntryRequest { id: id.clone() })
                .await?
                .into_inner();
            say_json(&json!({
                "signed": v.signed, "hashMatches": v.hash_matches, "signatureValid": v.signature_valid,
                "valid": v.valid, "contentHash": v.content_hash, "agentFingerprint": v.agent_fingerprint,
                "reason": v.reason,
            }));
            if v.signed && !v.valid {
                return Err(CommandError::Found(format!(
                    "entry {id} is signed but not valid: {}",
                    v.reason
                )));
            }
        }
    }
    Ok(())
}

pub async fn identity(command: &IdentityCommand) -> Result<(), CommandError> {
    let IdentityCommand::VerifyChain { agent_id, client } = command;
    let mut diary = client.connect().await?.diary();
    let report = diary
        .verify_chain(pb::VerifyChainRequest {
            agent_id: agent_id.clone(),
        })
        .await?
        .into_inner();
    say_json(&json!({
        "agent_id": agent_id, "valid": report.valid, "length": report.length,
        "head_seq": report.head_seq, "head_hash": report.head_hash, "problems": report.problems,
    }));
    if report.valid {
        Ok(())
    } else {
        Err(CommandError::Found(format!(
            "the signature chain of {agent_id} is broken"
        )))
    }
}

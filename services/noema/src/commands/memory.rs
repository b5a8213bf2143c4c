//! `noema memory …`, `noema search`, `noema tasks …`: CogniRelay's memory files, search and
//! tasks from the command line. Answers are printed exactly as the service sends them (the
//! original's JSON, its key order kept), one document per line.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use noema_client::pb::continuity::{JsonRequest, TaskUpdateRequest};
use serde_json::{Map, Value, json};

use super::CommandError;
use super::continuity::{ContinuityFlags, print, read_bytes};

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Write a file's whole content (`memory/core/identity.md`, `journal/…`, …).
    Write {
        path: String,
        /// The content; without it, the content of --file.
        #[arg(long, conflicts_with = "file")]
        content: Option<String>,
        /// A file holding the content, or `-` for stdin.
        #[arg(long)]
        file: Option<PathBuf>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Read a file.
    Read {
        path: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Append one JSON object as a line (`memory/episodic/….jsonl`).
    Append {
        path: String,
        /// The record, a JSON object.
        record: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

/// `noema search QUERY`: term-based, best match first.
#[derive(Debug, Args)]
pub struct SearchArgs {
    pub query: String,
    #[arg(long)]
    pub limit: Option<u32>,
    /// Keep only these document types (repeatable).
    #[arg(long = "type")]
    pub types: Vec<String>,
    /// Newest first instead of best match first.
    #[arg(long)]
    pub recent: bool,
    #[command(flatten)]
    pub flags: ContinuityFlags,
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Create a task. FILE holds the original's body (`{task_id, title, owner_peer, …}`).
    Create {
        /// A JSON file, or `-` for stdin.
        file: PathBuf,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Update a task. FILE holds the fields to set (`{status, …}`).
    Update {
        task_id: String,
        file: PathBuf,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// The tenant's tasks, newest first.
    Query {
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        owner_peer: Option<String>,
        #[arg(long)]
        collaborator: Option<String>,
        #[arg(long)]
        thread_id: Option<String>,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

fn encode(value: &Value) -> Result<Vec<u8>, CommandError> {
    serde_json::to_vec(value).map_err(|e| CommandError::Usage(e.to_string()))
}

pub async fn memory(command: &MemoryCommand) -> Result<(), CommandError> {
    match command {
        MemoryCommand::Write {
            path,
            content,
            file,
            flags,
        } => {
            let content = match (content, file) {
                (Some(content), _) => content.clone(),
                (None, Some(file)) => String::from_utf8(read_bytes(file)?).map_err(|_| {
                    CommandError::Usage(format!("{}: not UTF-8 text", file.display()))
                })?,
                (None, None) => {
                    return Err(CommandError::Usage(
                        "give the content with --content or --file".into(),
                    ));
                }
            };
            let body = encode(&json!({"path": path, "content": content}))?;
            let answer = flags
                .connect()
                .await?
                .client()
                .write_file(JsonRequest { body })
                .await?
                .into_inner();
            print(&answer.body);
        }
        MemoryCommand::Read { path, flags } => {
            let body = encode(&json!({ "path": path }))?;
            let answer = flags
                .connect()
                .await?
                .client()
                .read_file(JsonRequest { body })
                .await?
                .into_inner();
            print(&answer.body);
        }
        MemoryCommand::Append {
            path,
            record,
            flags,
        } => {
            // The record's text goes on as written, so its key order is the one appended.
            let parsed: Value = serde_json::from_str(record)
                .map_err(|e| CommandError::Usage(format!("the record is not JSON: {e}")))?;
            if !parsed.is_object() {
                return Err(CommandError::Usage(
                    "the record must be a JSON object".into(),
                ));
            }
            let body = format!(
                "{{\"path\":{},\"record\":{record}}}",
                serde_json::to_string(path).map_err(|e| CommandError::Usage(e.to_string()))?
            )
            .into_bytes();
            let answer = flags
                .connect()
                .await?
                .client()
                .append_record(JsonRequest { body })
                .await?
                .into_inner();
            print(&answer.body);
        }
    }
    Ok(())
}

pub async fn search(args: &SearchArgs) -> Result<(), CommandError> {
    let mut body = Map::new();
    body.insert("query".into(), Value::from(args.query.as_str()));
    if let Some(limit) = args.limit {
        body.insert("limit".into(), Value::from(limit));
    }
    if !args.types.is_empty() {
        body.insert("include_types".into(), json!(args.types));
    }
    if args.recent {
        body.insert("sort_by".into(), Value::from("recent"));
    }
    let answer = args
        .flags
        .connect()
        .await?
        .client()
        .search(JsonRequest {
            body: encode(&Value::Object(body))?,
        })
        .await?
        .into_inner();
    print(&answer.body);
    Ok(())
}

pub async fn tasks(command: &TasksCommand) -> Result<(), CommandError> {
    match command {
        TasksCommand::Create { file, flags } => {
            let answer = flags
                .connect()
                .await?
                .client()
                .create_task(JsonRequest {
                    body: read_bytes(file)?,
                })
                .await?
                .into_inner();
            print(&answer.body);
        }
        TasksCommand::Update {
            task_id,
            file,
            flags,
        } => {
            let answer = flags
                .connect()
                .await?
                .client()
                .update_task(TaskUpdateRequest {
                    task_id: task_id.clone(),
                    body: read_bytes(file)?,
                })
                .await?
                .into_inner();
            print(&answer.body);
        }
        TasksCommand::Query {
            status,
            owner_peer,
            collaborator,
            thread_id,
            limit,
            flags,
        } => {
            let mut params = Map::new();
            for (key, value) in [
                ("status", status.clone()),
                ("owner_peer", owner_peer.clone()),
                ("collaborator", collaborator.clone()),
                ("thread_id", thread_id.clone()),
                ("limit", limit.map(|l| l.to_string())),
            ] {
                if let Some(value) = value {
                    params.insert(key.into(), Value::String(value));
                }
            }
            let answer = flags
                .connect()
                .await?
                .client()
                .query_tasks(JsonRequest {
                    body: encode(&Value::Object(params))?,
                })
                .await?
                .into_inner();
            print(&answer.body);
        }
    }
    Ok(())
}

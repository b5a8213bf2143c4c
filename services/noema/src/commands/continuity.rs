//! `noema continuity …`: capsules from the command line. Bodies are CogniRelay's JSON
//! documents (a file or `-` for stdin); answers are printed exactly as the service sends them
//! (the original's JSON, its key order kept), one document per line.

use std::io::Read as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use noema_client::continuity::{Continuity, ListRequest, ReadRequest};
use serde_json::{Map, Value, json};

use super::connect::ClientFlags;
use super::{CommandError, say, say_json};

#[derive(Debug, Args, Clone)]
pub struct ContinuityFlags {
    /// Act in another tenant (superuser tokens only; sent as `x-noema-tenant`).
    #[arg(long)]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub client: ClientFlags,
}

impl ContinuityFlags {
    pub(crate) async fn connect(&self) -> Result<Continuity, CommandError> {
        let noema = self.client.connect().await?;
        Ok(match &self.tenant {
            Some(tenant) => noema.in_tenant(tenant)?.continuity(),
            None => noema.continuity(),
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum ContinuityCommand {
    /// Create or replace a capsule. FILE holds an upsert body (`{subject_kind, subject_id,
    /// capsule, …}`), or with --capsule a bare capsule.
    Upsert {
        /// A JSON file, or `-` for stdin.
        file: PathBuf,
        /// FILE is a capsule: wrap it in an upsert of its own subject.
        #[arg(long)]
        capsule: bool,
        /// `replace` or `preserve` (with --capsule).
        #[arg(long)]
        merge_mode: Option<String>,
        /// Retrying with the same key and body answers the first result (with --capsule).
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Apply list operations atomically. FILE holds a patch body.
    Patch {
        file: PathBuf,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// A subject's active capsule with its trust signals.
    Read {
        kind: String,
        id: String,
        /// Answer the fallback snapshot when the active capsule is missing or invalid.
        #[arg(long)]
        allow_fallback: bool,
        /// The startup view (startup_summary, graph_summary, schedule_context).
        #[arg(long)]
        startup: bool,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Summary rows of the tenant's capsules.
    List {
        #[arg(long)]
        kind: Option<String>,
        #[arg(long)]
        limit: Option<i64>,
        #[arg(long)]
        include_fallback: bool,
        #[arg(long)]
        include_archived: bool,
        #[arg(long)]
        include_cold: bool,
        /// `default` or `salience`.
        #[arg(long)]
        sort: Option<String>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// A subject's revisions, newest first, and whether their hash chain is intact (exit 1
    /// when it is not).
    History {
        kind: String,
        id: String,
        #[arg(long, default_value_t = 50)]
        limit: u32,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Move the active capsule to the archive tier.
    Archive {
        kind: String,
        id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

fn read_json(file: &PathBuf) -> Result<Value, CommandError> {
    let io = |source| CommandError::File {
        path: file.display().to_string(),
        source,
    };
    let mut text = String::new();
    if file.as_os_str() == "-" {
        std::io::stdin().read_to_string(&mut text).map_err(io)?;
    } else {
        text = std::fs::read_to_string(file).map_err(io)?;
    }
    serde_json::from_str(&text)
        .map_err(|e| CommandError::Usage(format!("{}: not JSON: {e}", file.display())))
}

/// The file's bytes, unparsed: a body goes to the service exactly as written.
pub(crate) fn read_bytes(file: &PathBuf) -> Result<Vec<u8>, CommandError> {
    let io = |source| CommandError::File {
        path: file.display().to_string(),
        source,
    };
    if file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).map_err(io)?;
        Ok(bytes)
    } else {
        std::fs::read(file).map_err(io)
    }
}

pub(crate) fn print(bytes: &[u8]) {
    say(&String::from_utf8_lossy(bytes));
}

pub async fn continuity(command: &ContinuityCommand) -> Result<(), CommandError> {
    match command {
        ContinuityCommand::Upsert {
            file,
            capsule,
            merge_mode,
            idempotency_key,
            flags,
        } => {
            let body = if *capsule {
                let capsule = read_json(file)?;
                let field = |name: &str| capsule.get(name).cloned().unwrap_or(Value::Null);
                let mut body = Map::new();
                body.insert("subject_kind".into(), field("subject_kind"));
                body.insert("subject_id".into(), field("subject_id"));
                body.insert("capsule".into(), capsule);
                if let Some(mode) = merge_mode {
                    body.insert("merge_mode".into(), Value::from(mode.as_str()));
                }
                if let Some(key) = idempotency_key {
                    body.insert("idempotency_key".into(), Value::from(key.as_str()));
                }
                serde_json::to_vec(&body).map_err(|e| CommandError::Usage(e.to_string()))?
            } else {
                read_bytes(file)?
            };
            let response = flags
                .connect()
                .await?
                .client()
                .upsert(noema_client::pb::continuity::JsonRequest { body })
                .await?
                .into_inner();
            print(&response.body);
        }
        ContinuityCommand::Patch { file, flags } => {
            let response = flags
                .connect()
                .await?
                .client()
                .patch(noema_client::pb::continuity::JsonRequest {
                    body: read_bytes(file)?,
                })
                .await?
                .into_inner();
            print(&response.body);
        }
        ContinuityCommand::Read {
            kind,
            id,
            allow_fallback,
            startup,
            flags,
        } => {
            let mut request = ReadRequest::new(kind, id);
            request.allow_fallback = *allow_fallback;
            request.view = startup.then(|| "startup".to_owned());
            print(&flags.connect().await?.read(&request).await?.raw);
        }
        ContinuityCommand::List {
            kind,
            limit,
            include_fallback,
            include_archived,
            include_cold,
            sort,
            flags,
        } => {
            let request = ListRequest {
                subject_kind: kind.clone(),
                limit: *limit,
                include_fallback: *include_fallback,
                include_archived: *include_archived,
                include_cold: *include_cold,
                sort: sort.clone(),
                extra: Map::new(),
            };
            let body =
                serde_json::to_vec(&request).map_err(|e| CommandError::Usage(e.to_string()))?;
            let response = flags
                .connect()
                .await?
                .client()
                .list(noema_client::pb::continuity::JsonRequest { body })
                .await?
                .into_inner();
            print(&response.body);
        }
        ContinuityCommand::History {
            kind,
            id,
            limit,
            flags,
        } => {
            let history = flags.connect().await?.history(kind, id, *limit, "").await?;
            let revisions: Vec<Value> = history
                .revisions
                .iter()
                .map(|r| {
                    json!({
                        "revision_id": r.revision_id,
                        "previous_revision_id": r.previous_revision_id,
                        "sequence": r.sequence,
                        "operation": r.operation,
                        "actor": r.actor,
                        "capsule_sha256": r.capsule_sha256,
                        "recorded_at": r.recorded_at.as_ref().map(|t| t.seconds),
                    })
                })
                .collect();
            say_json(&json!({
                "revisions": revisions,
                "chain_intact": history.chain_intact,
                "next_page_token": history.page.map(|p| p.next_page_token).unwrap_or_default(),
            }));
            if !history.chain_intact {
                return Err(CommandError::Found(format!(
                    "the history of {kind}:{id} is not an intact chain"
                )));
            }
        }
        ContinuityCommand::Archive {
            kind,
            id,
            reason,
            flags,
        } => {
            let body = serde_json::to_vec(
                &json!({"subject_kind": kind, "subject_id": id, "reason": reason}),
            )
            .map_err(|e| CommandError::Usage(e.to_string()))?;
            let response = flags
                .connect()
                .await?
                .client()
                .archive(noema_client::pb::continuity::JsonRequest { body })
                .await?
                .into_inner();
            print(&response.body);
        }
    }
    Ok(())
}

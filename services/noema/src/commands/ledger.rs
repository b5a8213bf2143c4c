//! Ledger commands: keys, objects, references, mode, export/import, reconcile and the
//! audit chain check.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use futures::StreamExt;
use noema_client::ledger::{canonical_request, signed_reference};
use noema_client::pb::{common, ledger as pb};
use noema_client::{ClientError, Reason, SigningKeyPair};
use noema_core::audit::{AuditEntry, ChainBreak, verify_chain};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::connect::ClientFlags;
use super::{CommandError, say_json};

fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> CommandError + '_ {
    move |source| CommandError::File {
        path: path.display().to_string(),
        source,
    }
}

/// `noema keygen`: a new Ed25519 key for an agent.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Also write the private seed (base64) to this file, mode 0600.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub fn keygen(args: &KeygenArgs) -> Result<(), CommandError> {
    let pair = SigningKeyPair::generate().map_err(|e| CommandError::Usage(e.to_string()))?;
    if let Some(path) = &args.out {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(file_error(path))?;
        writeln!(file, "{}", pair.seed_base64()).map_err(file_error(path))?;
    }
    say_json(&json!({
        "public_key": pair.public_key().to_base64(),
        "public_key_prefixed": pair.public_key().to_prefixed(),
        "fingerprint": pair.public_key().fingerprint(),
        "seed_file": args.out.as_ref().map(|p| p.display().to_string()),
        "seed": if args.out.is_none() { Some(pair.seed_base64()) } else { None },
    }));
    Ok(())
}

fn state_json(state: &pb::SystemState) -> Value {
    json!({
        "mode": if state.mode == pb::SystemMode::Stopped as i32 { "STOPPED" } else { "RUNNING" },
        "changed_by": state.changed_by,
        "changed_at": state.changed_at.as_ref().map(|t| t.to_string()),
    })
}

pub async fn status(flags: &ClientFlags) -> Result<(), CommandError> {
    let noema = flags.connect().await?;
    let state = noema
        .ledger()
        .get_status(pb::GetStatusRequest {})
        .await?
        .into_inner();
    say_json(&state_json(&state));
    Ok(())
}

pub async fn set_mode(flags: &ClientFlags, actor: &str, stop: bool) -> Result<(), CommandError> {
    let noema = flags.connect().await?;
    let request = pb::SetModeRequest {
        actor: actor.to_owned(),
    };
    let state = if stop {
        noema.ledger().stop(request).await?
    } else {
        noema.ledger().resume(request).await?
    };
    say_json(&state_json(state.get_ref()));
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum CanonicalCommand {
    /// Store FILE as a canonical object (id, size and storage path computed here).
    Put {
        file: PathBuf,
        /// observation, document, tool_output or policy.
        #[arg(long = "type", default_value = "observation")]
        object_type: String,
        #[arg(long, default_value = "application/octet-stream")]
        content_type: String,
        /// Who created it (recorded as the audit actor).
        #[arg(long, default_value = "human:cli")]
        created_by: String,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Show a canonical object's metadata, or write its payload with --payload-out.
    Get {
        id: String,
        #[arg(long, value_name = "FILE")]
        payload_out: Option<PathBuf>,
        #[command(flatten)]
        client: ClientFlags,
    },
}

fn canonical_json(o: &pb::CanonicalObject) -> Value {
    json!({
        "schema_version": o.schema_version, "id": o.id, "object_type": o.object_type,
        "content_type": o.content_type, "size_bytes": o.size_bytes, "created_at": o.created_at,
        "created_by": o.created_by, "storage_path": o.storage_path,
        "metadata": o.metadata.as_ref().map(noema_proto::json::from_proto_struct),
    })
}

pub async fn canonical(command: &CanonicalCommand) -> Result<(), CommandError> {
    match command {
        CanonicalCommand::Put {
            file,
            object_type,
            content_type,
            created_by,
            client,
        } => {
            let payload = std::fs::read(file).map_err(file_error(file))?;
            let request = canonical_request(
                payload,
                object_type,
                content_type,
                created_by,
                OffsetDateTime::now_utc(),
            );
            let noema = client.connect().await?;
            let object = noema.put_canonical(request).await?;
            say_json(&canonical_json(&object));
        }
        CanonicalCommand::Get {
            id,
            payload_out,
            client,
        } => {
            let noema = client.connect().await?;
            let request = pb::GetCanonicalRequest { id: id.clone() };
            match payload_out {
                None => {
                    let object = noema.ledger().get_canonical(request).await?.into_inner();
                    say_json(&canonical_json(&object));
                }
                Some(path) => {
                    let mut stream = noema
                        .ledger()
                        .get_canonical_payload(request)
                        .await?
                        .into_inner();
                    let mut out =
                        BufWriter::new(std::fs::File::create(path).map_err(file_error(path))?);
                    while let Some(chunk) = stream.next().await {
                        out.write_all(&chunk?.data).map_err(file_error(path))?;
                    }
                    out.flush().map_err(file_error(path))?;
                }
            }
        }
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum ReferenceCommand {
    /// Sign and record a reference from an agent to a canonical object.
    Emit {
        /// The canonical object's id (sha256:…).
        #[arg(long)]
        canonical: String,
        #[arg(long)]
        agent: String,
        /// File holding the agent's base64 seed (from `noema keygen --out`).
        #[arg(long, value_name = "FILE")]
        key_file: PathBuf,
        #[arg(long)]
        context: String,
        #[arg(long)]
        relevance: Option<f64>,
        #[arg(long)]
        trust_weight: Option<f64>,
        /// ISO 8601 duration or RFC 3339 time; stored, never enforced.
        #[arg(long, default_value = "")]
        time_horizon: String,
        #[command(flatten)]
        client: ClientFlags,
    },
}

pub fn read_key(path: &Path) -> Result<SigningKeyPair, CommandError> {
    let text = std::fs::read_to_string(path).map_err(file_error(path))?;
    SigningKeyPair::from_seed_base64(text.trim())
        .map_err(|e| CommandError::Usage(format!("{}: {e}", path.display())))
}

pub async fn reference(command: &ReferenceCommand) -> Result<(), CommandError> {
    let ReferenceCommand::Emit {
        canonical,
        agent,
        key_file,
        context,
        relevance,
        trust_weight,
        time_horizon,
        client,
    } = command;
    let key = read_key(key_file)?;
    let mut request = signed_reference(&key, agent, canonical, context, OffsetDateTime::now_utc())?;
    request.relevance = *relevance;
    request.trust_weight = *trust_weight;
    request.time_horizon = time_horizon.clone();
    let noema = client.connect().await?;
    let reference = noema.put_reference(request).await?;
    say_json(&json!({
        "id": reference.id, "canonical_object_id": reference.canonical_object_id,
        "agent_id": reference.agent_id, "created_at": reference.created_at,
        "signature": reference.signature,
    }));
    Ok(())
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Write every canonical object with its payload as NDJSON (one POST /canonical body
    /// per line), oldest first.
    Export {
        /// Output file; default: canonicals_<UTC time>.ndjson.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Re-ingest an export through the normal validation path. Idempotent: objects already
    /// present are counted as duplicates.
    Import {
        file: PathBuf,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Check ledger and storage against each other. Exits 1 when bytes are missing or corrupt.
    Reconcile {
        /// Skip re-hashing every object (only check presence).
        #[arg(long)]
        fast: bool,
        #[command(flatten)]
        client: ClientFlags,
    },
    /// Walk the audit log's hash chain and report the first broken link (exit 1).
    VerifyAudit {
        /// Whose audit log: ledger or identity.
        #[arg(long, default_value = "ledger")]
        service: String,
        #[command(flatten)]
        client: ClientFlags,
    },
}

/// One export line: open-cognition's CanonicalObject fields in order, plus the payload.
#[derive(Debug, Serialize, Deserialize)]
pub struct ExportLine {
    pub schema_version: String,
    pub id: String,
    pub object_type: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub created_at: String,
    pub created_by: String,
    pub storage_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    pub payload: String,
}

fn progress(total_hint: Option<u64>, what: &str) -> indicatif::ProgressBar {
    let bar = match total_hint {
        Some(total) => indicatif::ProgressBar::new(total),
        None => indicatif::ProgressBar::new_spinner(),
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.set_message(what.to_owned());
    bar
}

pub async fn ledger(command: &LedgerCommand) -> Result<(), CommandError> {
    match command {
        LedgerCommand::Export { out, client } => export(out.as_deref(), client).await,
        LedgerCommand::Import { file, client } => import(file, client).await,
        LedgerCommand::Reconcile { fast, client } => reconcile(!fast, client).await,
        LedgerCommand::VerifyAudit { service, client } => verify_audit(service, client).await,
    }
}

async fn export(out: Option<&Path>, client: &ClientFlags) -> Result<(), CommandError> {
    let default_name = PathBuf::from(format!(
        "canonicals_{}.ndjson",
        noema_client::ledger::utc_seconds(OffsetDateTime::now_utc()).replace(':', "-")
    ));
    let path = out.unwrap_or(&default_name);
    let noema = client.connect().await?;
    let mut stream = noema
        .ledger()
        .export_canonicals(pb::ExportCanonicalsRequest {})
        .await?
        .into_inner();
    let mut writer = BufWriter::new(std::fs::File::create(path).map_err(file_error(path))?);
    let bar = progress(None, "exporting");
    let mut count = 0u64;
    while let Some(record) = stream.next().await {
        let record = record?;
        let object = record.object.unwrap_or_default();
        let line = ExportLine {
            metadata: object
                .metadata
                .as_ref()
                .map(noema_proto::json::from_proto_struct),
            schema_version: object.schema_version,
            id: object.id,
            object_type: object.object_type,
            content_type: object.content_type,
            size_bytes: object.size_bytes,
            created_at: object.created_at,
            created_by: object.created_by,
            storage_path: object.storage_path,
            payload: data_encoding::BASE64.encode(&record.payload),
        };
        let text = serde_json::to_string(&line).map_err(|e| CommandError::Usage(e.to_string()))?;
        writeln!(writer, "{text}").map_err(file_error(path))?;
        count += 1;
        bar.inc(1);
    }
    writer.flush().map_err(file_error(path))?;
    bar.finish_and_clear();
    say_json(&json!({"exported": count, "file": path.display().to_string()}));
    Ok(())
}

async fn import(file: &Path, client: &ClientFlags) -> Result<(), CommandError> {
    let reader = std::io::BufReader::new(std::fs::File::open(file).map_err(file_error(file))?);
    let noema = client.connect().await?;
    let (mut imported, mut duplicates, mut failed) = (0u64, 0u64, Vec::new());
    let bar = progress(None, "importing");
    for (number, line) in reader.lines().enumerate() {
        let line = line.map_err(file_error(file))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Result<ExportLine, String> =
            serde_json::from_str(&line).map_err(|e| e.to_string());
        let request = parsed.and_then(|l| {
            let payload = data_encoding::BASE64
                .decode(l.payload.as_bytes())
                .map_err(|e| e.to_string())?;
            Ok(pb::PutCanonicalRequest {
                schema_version: l.schema_version,
                id: l.id,
                object_type: l.object_type,
                content_type: l.content_type,
                size_bytes: l.size_bytes,
                created_at: l.created_at,
                created_by: l.created_by,
                storage_path: l.storage_path,
                payload,
                metadata: l
                    .metadata
                    .as_ref()
                    .and_then(noema_proto::json::to_proto_struct),
            })
        });
        match request {
            Err(reason) => failed.push(format!("line {}: {reason}", number + 1)),
            Ok(request) => match noema.put_canonical(request).await {
                Ok(_) => imported += 1,
                // Only the same object already stored; a storage conflict is a failure.
                Err(e) if e.reason() == Some(Reason::AlreadyExists) => duplicates += 1,
                Err(ClientError::Stopped) => return Err(ClientError::Stopped.into()),
                Err(e) => failed.push(format!("line {}: {e}", number + 1)),
            },
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    say_json(
        &json!({"imported": imported, "duplicates": duplicates, "failed": failed.len(), "errors": failed}),
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CommandError::Found(format!(
            "{} lines could not be imported",
            failed.len()
        )))
    }
}

async fn reconcile(verify_hashes: bool, client: &ClientFlags) -> Result<(), CommandError> {
    let noema = client.connect().await?;
    let report = noema
        .ledger()
        .reconcile(pb::ReconcileRequest { verify_hashes })
        .await?
        .into_inner();
    say_json(&json!({
        "checked": report.checked,
        "ok": report.ok,
        "hashes_verified": report.hashes_verified,
        "missing_in_storage": report.missing_in_storage.iter().map(|m| json!({"id": m.id, "storage_path": m.storage_path})).collect::<Vec<_>>(),
        "corrupt": report.corrupt.iter().map(|c| json!({"id": c.id, "storage_path": c.storage_path, "actual_hash": c.actual_hash})).collect::<Vec<_>>(),
        "orphans_in_storage": report.orphans_in_storage.iter().map(|o| json!({"storage_path": o.storage_path, "size_bytes": o.size_bytes})).collect::<Vec<_>>(),
    }));
    if report.missing_in_storage.is_empty() && report.corrupt.is_empty() {
        Ok(())
    } else {
        Err(CommandError::Found(format!(
            "{} objects missing from storage, {} corrupt",
            report.missing_in_storage.len(),
            report.corrupt.len()
        )))
    }
}

fn entry_from_proto(e: common::AuditEntry) -> Result<AuditEntry, CommandError> {
    let at = e.occurred_at.unwrap_or_default();
    Ok(AuditEntry {
        id: e.id,
        occurred_at: noema_core::time::proto::to_time(&at).ok_or_else(|| {
            CommandError::Found(format!("audit entry {} has an impossible time", e.id))
        })?,
        actor: e.actor,
        action: e.action,
        target_id: Some(e.target_id).filter(|t| !t.is_empty()),
        target_type: Some(e.target_type).filter(|t| !t.is_empty()),
        detail: e.detail.as_ref().map(noema_proto::json::from_proto_struct),
        prev_hash: e.prev_hash,
        hash: e.hash,
    })
}

async fn verify_audit(service: &str, client: &ClientFlags) -> Result<(), CommandError> {
    let noema = client.connect().await?;
    let (mut last_id, mut last_hash, mut checked) = (0i64, String::new(), 0u64);
    let mut token = String::new();
    loop {
        let request = common::ListAuditRequest {
            page: Some(common::PageRequest {
                page_size: 200,
                page_token: token.clone(),
            }),
            oldest_first: true,
        };
        let response = match service {
            "ledger" => noema.ledger().list_audit(request).await?,
            "identity" => noema.identity().list_audit(request).await?,
            other => {
                return Err(CommandError::Usage(format!(
                    "--service must be ledger or identity, not {other:?}"
                )));
            }
        }
        .into_inner();
        let entries = response
            .entries
            .into_iter()
            .map(entry_from_proto)
            .collect::<Result<Vec<_>, _>>()?;
        checked += u64::try_from(entries.len()).unwrap_or(0);
        match verify_chain(last_id, last_hash.clone(), &entries) {
            Ok((id, hash)) => (last_id, last_hash) = (id, hash),
            Err(broken) => {
                let reason = match broken {
                    ChainBreak::HashMismatch { id } => {
                        format!("entry {id} was altered: its hash does not match its fields")
                    }
                    ChainBreak::BrokenLink { id, .. } => format!(
                        "entry {id} does not link to the entry before it (removed or reordered)"
                    ),
                    ChainBreak::Gap { after_id, next_id } => {
                        format!("entries between {after_id} and {next_id} are missing")
                    }
                };
                say_json(
                    &json!({"service": service, "valid": false, "checked": checked, "first_broken_link": reason}),
                );
                return Err(CommandError::Found(reason));
            }
        }
        token = response.page.map(|p| p.next_page_token).unwrap_or_default();
        if token.is_empty() {
            break;
        }
    }
    say_json(&json!({"service": service, "valid": true, "checked": checked, "head": last_hash}));
    Ok(())
}

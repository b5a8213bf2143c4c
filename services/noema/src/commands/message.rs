//! `noema message …`: CogniRelay's direct messages from the command line (send, ack,
//! pending, inbox, thread, verify). Answers are printed exactly as the service sends them
//! (the original's JSON, its key order kept), one document per line.

use std::path::PathBuf;

use clap::Subcommand;
use noema_client::pb::continuity::JsonRequest;
use serde_json::{Map, Value};

use super::CommandError;
use super::continuity::{ContinuityFlags, print, read_bytes};

#[derive(Debug, Subcommand)]
pub enum MessageCommand {
    /// Send a message. With FILE, its JSON is the original's whole body (delivery policy,
    /// signed envelope, …); otherwise the flags make it.
    Send {
        /// A JSON file with the request body, or `-` for stdin.
        #[arg(long, conflicts_with_all = ["thread_id", "subject", "body"])]
        file: Option<PathBuf>,
        #[arg(long, default_value = "")]
        sender: String,
        #[arg(long, default_value = "")]
        recipient: String,
        #[arg(long)]
        thread_id: Option<String>,
        #[arg(long)]
        subject: Option<String>,
        /// The message text (Markdown).
        #[arg(long)]
        body: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Track delivery until the recipient acks it.
        #[arg(long)]
        requires_ack: bool,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Accept, reject or defer a tracked message.
    Ack {
        message_id: String,
        /// accepted, rejected or deferred
        status: String,
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Tracked deliveries and their summary by effective status.
    Pending {
        #[arg(long)]
        recipient: Option<String>,
        #[arg(long)]
        status: Option<String>,
        /// Also acked, dead-lettered and delivered records.
        #[arg(long)]
        include_terminal: bool,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// A recipient's latest messages, oldest first.
    Inbox {
        recipient: String,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// A thread's latest messages, oldest first.
    Thread {
        thread_id: String,
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
    /// Verify a signed envelope. FILE holds `{payload, key_id, nonce, signature, …}`.
    Verify {
        /// A JSON file, or `-` for stdin.
        file: PathBuf,
        #[command(flatten)]
        flags: ContinuityFlags,
    },
}

fn encode(object: Map<String, Value>) -> Result<Vec<u8>, CommandError> {
    serde_json::to_vec(&Value::Object(object)).map_err(|e| CommandError::Usage(e.to_string()))
}

/// The set entries as an object (query parameters travel as strings).
fn object(entries: Vec<(&str, Option<Value>)>) -> Map<String, Value> {
    entries
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
        .collect()
}

fn text(value: &Option<String>) -> Option<Value> {
    value.as_deref().map(Value::from)
}

fn number(value: Option<u32>) -> Option<Value> {
    value.map(|n| Value::from(n.to_string()))
}

pub async fn message(command: &MessageCommand) -> Result<(), CommandError> {
    let answer = match command {
        MessageCommand::Send {
            file,
            sender,
            recipient,
            thread_id,
            subject,
            body,
            idempotency_key,
            requires_ack,
            flags,
        } => {
            let body = match file {
                Some(file) => read_bytes(file)?,
                None => {
                    let mut fields = object(vec![
                        ("thread_id", text(thread_id)),
                        ("sender", Some(Value::from(sender.as_str()))),
                        ("recipient", Some(Value::from(recipient.as_str()))),
                        ("subject", text(subject)),
                        ("body_md", text(body)),
                        ("idempotency_key", text(idempotency_key)),
                    ]);
                    if *requires_ack {
                        fields.insert("delivery".into(), serde_json::json!({"requires_ack": true}));
                    }
                    encode(fields)?
                }
            };
            let mut client = flags.connect().await?.client();
            client.send_message(JsonRequest { body }).await?
        }
        MessageCommand::Ack {
            message_id,
            status,
            reason,
            flags,
        } => {
            let body = encode(object(vec![
                ("message_id", Some(Value::from(message_id.as_str()))),
                ("status", Some(Value::from(status.as_str()))),
                ("reason", text(reason)),
            ]))?;
            let mut client = flags.connect().await?.client();
            client.ack_message(JsonRequest { body }).await?
        }
        MessageCommand::Pending {
            recipient,
            status,
            include_terminal,
            limit,
            flags,
        } => {
            let body = encode(object(vec![
                ("recipient", text(recipient)),
                ("status", text(status)),
                (
                    "include_terminal",
                    include_terminal.then(|| Value::from("true")),
                ),
                ("limit", number(*limit)),
            ]))?;
            let mut client = flags.connect().await?.client();
            client.pending_messages(JsonRequest { body }).await?
        }
        MessageCommand::Inbox {
            recipient,
            limit,
            flags,
        } => {
            let body = encode(object(vec![
                ("recipient", Some(Value::from(recipient.as_str()))),
                ("limit", number(*limit)),
            ]))?;
            let mut client = flags.connect().await?.client();
            client.inbox_messages(JsonRequest { body }).await?
        }
        MessageCommand::Thread {
            thread_id,
            limit,
            flags,
        } => {
            let body = encode(object(vec![
                ("thread_id", Some(Value::from(thread_id.as_str()))),
                ("limit", number(*limit)),
            ]))?;
            let mut client = flags.connect().await?.client();
            client.thread_messages(JsonRequest { body }).await?
        }
        MessageCommand::Verify { file, flags } => {
            let body = read_bytes(file)?;
            let mut client = flags.connect().await?.client();
            client.verify_message(JsonRequest { body }).await?
        }
    };
    print(&answer.into_inner().body);
    Ok(())
}

//! CogniRelay's message routes (`/v1/messages/*`, `/v1/relay/forward`,
//! `/v1/replay/messages`) and its signing-key rotation (`/v1/security/keys/rotate`), served by
//! the continuity service per tenant. Bodies pass through as the caller's bytes; query
//! strings go on as JSON objects of their strings, which the service validates as FastAPI
//! validates query parameters.

use noema_proto::continuity::v1 as pb;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::continuity::{COGNIRELAY, Document, Original, Passed, body, call, request_models};
use crate::features;
use crate::forward::{Caller, LastQuery};
use crate::route::{Route, Verb};

request_models! {
    MessageSend => noema_continuity::domain::messages::MESSAGE_SEND_REQUEST;
    MessageAck => noema_continuity::domain::messages::MESSAGE_ACK_REQUEST;
    MessageVerify => noema_continuity::domain::envelope::MESSAGE_VERIFY_REQUEST;
    RelayForward => noema_continuity::domain::messages::RELAY_FORWARD_REQUEST;
    MessageReplay => noema_continuity::domain::messages::MESSAGE_REPLAY_REQUEST;
    KeysRotate => noema_continuity::domain::envelope::SECURITY_KEYS_ROTATE_REQUEST;
}

/// `GET /v1/messages/pending` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PendingParams {
    /// Only records addressed to this peer
    #[serde(default)]
    pub recipient: Option<String>,
    /// Only this effective status (pending_ack, acked, dead_letter, delivered, replayed)
    #[serde(default)]
    pub status: Option<String>,
    /// Also list acked, dead-lettered and delivered records (false)
    #[serde(default)]
    pub include_terminal: Option<String>,
    /// 1-500 (50)
    #[serde(default)]
    pub limit: Option<String>,
}

/// `GET /v1/messages/inbox` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct InboxParams {
    #[serde(default)]
    pub recipient: Option<String>,
    /// 1-200 (20)
    #[serde(default)]
    pub limit: Option<String>,
}

/// `GET /v1/messages/thread` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ThreadParams {
    #[serde(default)]
    pub thread_id: Option<String>,
    /// 1-1000 (100)
    #[serde(default)]
    pub limit: Option<String>,
}

/// The given parameters as a JSON object of strings.
fn params(pairs: Vec<(&str, Option<String>)>) -> pb::JsonRequest {
    let mut object = Map::new();
    for (key, value) in pairs {
        if let Some(value) = value {
            object.insert(key.to_owned(), Value::String(value));
        }
    }
    pb::JsonRequest {
        body: serde_json::to_vec(&Value::Object(object)).unwrap_or_else(|_| b"{}".to_vec()),
    }
}

async fn send(caller: Caller, document: Document<MessageSend>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.send_message(request).await?.into_inner().body,
    ))
}

async fn ack(caller: Caller, document: Document<MessageAck>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.ack_message(request).await?.into_inner().body,
    ))
}

async fn verify(caller: Caller, document: Document<MessageVerify>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.verify_message(request).await?.into_inner().body,
    ))
}

async fn relay_forward(caller: Caller, document: Document<RelayForward>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.relay_forward(request).await?.into_inner().body,
    ))
}

async fn replay(caller: Caller, document: Document<MessageReplay>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.replay_message(request).await?.into_inner().body,
    ))
}

async fn keys_rotate(caller: Caller, document: Document<KeysRotate>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.rotate_signing_key(request).await?.into_inner().body,
    ))
}

async fn pending(caller: Caller, LastQuery(p): LastQuery<PendingParams>) -> Passed {
    let message = params(vec![
        ("recipient", p.recipient),
        ("status", p.status),
        ("include_terminal", p.include_terminal),
        ("limit", p.limit),
    ]);
    let (mut client, request) = call(&caller, message);
    Ok(Original(
        client.pending_messages(request).await?.into_inner().body,
    ))
}

async fn inbox(caller: Caller, LastQuery(p): LastQuery<InboxParams>) -> Passed {
    let message = params(vec![("recipient", p.recipient), ("limit", p.limit)]);
    let (mut client, request) = call(&caller, message);
    Ok(Original(
        client.inbox_messages(request).await?.into_inner().body,
    ))
}

async fn thread(caller: Caller, LastQuery(p): LastQuery<ThreadParams>) -> Passed {
    let message = params(vec![("thread_id", p.thread_id), ("limit", p.limit)]);
    let (mut client, request) = call(&caller, message);
    Ok(Original(
        client.thread_messages(request).await?.into_inner().body,
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    vec![
        r.route(
            Verb::Post,
            "/v1/messages/send",
            "messagesSend",
            "CogniRelay: send a direct message (idempotency key, tracked delivery, signed envelope)",
            send,
        )
        .calls("SendMessage")
        .tool("messages.send", "Send a direct message to a peer")
        .feature(features::MESSAGING_DIRECT)
        .status(400, "Strict signed ingress and no envelope")
        .status(401, "Invalid signed envelope")
        .status(404, "Unknown signing key"),
        r.route(
            Verb::Post,
            "/v1/messages/ack",
            "messagesAck",
            "CogniRelay: accept, reject or defer a tracked message",
            ack,
        )
        .calls("AckMessage")
        .tool("messages.ack", "Acknowledge, defer or reject a tracked message")
        .feature(features::MESSAGING_DIRECT)
        .status(404, "Tracked message not found"),
        r.route(
            Verb::Get,
            "/v1/messages/pending",
            "messagesPending",
            "CogniRelay: tracked deliveries by effective status, with a summary",
            pending,
        )
        .query_model(&noema_continuity::domain::messages::PENDING_QUERY)
        .calls("PendingMessages")
        .tool("messages.pending", "Inspect pending and terminal delivery states")
        .feature(features::MESSAGING_DIRECT),
        r.route(
            Verb::Get,
            "/v1/messages/inbox",
            "messagesInbox",
            "CogniRelay: a recipient's latest messages, oldest first",
            inbox,
        )
        .query_model(&noema_continuity::domain::messages::INBOX_QUERY)
        .calls("InboxMessages")
        .tool("messages.inbox", "Read a recipient's inbox")
        .feature(features::MESSAGING_DIRECT),
        r.route(
            Verb::Get,
            "/v1/messages/thread",
            "messagesThread",
            "CogniRelay: a thread's latest messages, oldest first",
            thread,
        )
        .query_model(&noema_continuity::domain::messages::THREAD_QUERY)
        .calls("ThreadMessages")
        .tool("messages.thread", "Read a thread's messages")
        .feature(features::MESSAGING_DIRECT),
        r.route(
            Verb::Post,
            "/v1/messages/verify",
            "messagesVerify",
            "CogniRelay: verify a signed envelope and optionally consume its nonce",
            verify,
        )
        .calls("VerifyMessage")
        .tool("messages.verify", "Verify a signed message envelope")
        .status(404, "Unknown signing key"),
        r.route(
            Verb::Post,
            "/v1/relay/forward",
            "relayForward",
            "CogniRelay: forward a message through a relay to its target's inbox",
            relay_forward,
        )
        .calls("RelayForward")
        .tool("messages.relay_forward", "Forward a message through a relay")
        .status(401, "Invalid signed envelope")
        .status(404, "Unknown signing key"),
        r.route(
            Verb::Post,
            "/v1/replay/messages",
            "messagesReplay",
            "CogniRelay: send a dead-lettered tracked message again under a new id",
            replay,
        )
        .calls("ReplayMessage")
        .tool("messages.replay", "Replay a dead-letter message")
        .status(404, "Tracked message not found")
        .status(409, "Not dead-lettered, or no retries left"),
        r.route(
            Verb::Post,
            "/v1/security/keys/rotate",
            "securityKeysRotate",
            "CogniRelay: rotate the tenant's HMAC key for signed message envelopes",
            keys_rotate,
        )
        .calls("RotateSigningKey")
        .tool("security.keys_rotate", "Rotate message signing key material"),
    ]
}

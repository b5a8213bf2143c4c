//! Messages (digest §12): direct messages with tracked delivery, their request models, the
//! documents the original writes (message record, delivery record, ack row) in its key order,
//! delivery-state rules (acks, effective status past the deadline, replay) and the answers.
//! No I/O.
//!
//! The original appends each message to JSONL files and keeps delivery state in one JSON
//! index; Noema keeps the same documents as rows. Paths are still computed: namespaces are
//! checked on them and `committed_files` names them.

use time::{Duration, OffsetDateTime};

use super::envelope::{Envelope, SIGNED_ENVELOPE, Verification};
use super::error::{ContinuityError, Loc, LocPart};
use super::json::{Json, JsonObject, to_py_json};
use super::schema::{Field, Model, Ty, validate_at, validate_body};
use super::text::posix_normpath;
use super::timestamp::{format_iso, parse_iso};

/// The original's delivery index (namespace-checked on sends, acks, pending and replays).
pub const DELIVERY_STATE_PATH: &str = "messages/state/delivery_index.json";
/// The inbox path sends check write access to (the original checks `x`, not the recipient).
pub const ANY_INBOX_PATH: &str = "messages/inbox/x.jsonl";
/// Delivery statuses pending hides unless `include_terminal`.
pub const TERMINAL: &[&str] = &["acked", "dead_letter", "delivered"];
pub const ACK_STATUSES: &[&str] = &["accepted", "rejected", "deferred"];

const ANY_STR: Ty = Ty::Str { min: 0, max: None };
const STRINGS: Ty = Ty::List {
    item: &ANY_STR,
    min: None,
    max: None,
};

/// A name a message path is made of (`box_path`).
const BOX_NAME: Ty = Ty::Documented(&ANY_STR, super::rules::box_name);

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

const fn int(ge: i64, le: i64) -> Ty {
    Ty::Int {
        ge: Some(ge),
        le: Some(le),
    }
}

pub static DELIVERY_POLICY: Model = Model {
    name: "DeliveryPolicy",
    fields: &[
        field("requires_ack", Ty::Bool, false),
        field("ack_timeout_seconds", int(1, 86400), false),
        field("max_retries", int(0, 100), false),
    ],
    forbid_extra: false,
    after: None,
};

pub static MESSAGE_SEND_REQUEST: Model = Model {
    name: "MessageSendRequest",
    fields: &[
        field("thread_id", BOX_NAME, true),
        field("sender", BOX_NAME, true),
        field("recipient", BOX_NAME, true),
        field("subject", ANY_STR, true),
        field("body_md", ANY_STR, true),
        field("priority", ANY_STR, false),
        field("attachments", STRINGS, false),
        field("idempotency_key", Ty::Nullable(&ANY_STR), false),
        field("delivery", Ty::Model(&DELIVERY_POLICY), false),
        field(
            "signed_envelope",
            Ty::Nullable(&Ty::Model(&SIGNED_ENVELOPE)),
            false,
        ),
    ],
    forbid_extra: false,
    after: None,
};

pub static RELAY_FORWARD_REQUEST: Model = Model {
    name: "RelayForwardRequest",
    fields: &[
        field("relay_id", BOX_NAME, false),
        field("target_recipient", BOX_NAME, true),
        field("thread_id", BOX_NAME, true),
        field("sender", ANY_STR, true),
        field("subject", ANY_STR, true),
        field("body_md", ANY_STR, true),
        field("priority", ANY_STR, false),
        field("attachments", STRINGS, false),
        field("envelope", Ty::Dict, false),
        field(
            "signed_envelope",
            Ty::Nullable(&Ty::Model(&SIGNED_ENVELOPE)),
            false,
        ),
    ],
    forbid_extra: false,
    after: None,
};

pub static MESSAGE_ACK_REQUEST: Model = Model {
    name: "MessageAckRequest",
    fields: &[
        field("message_id", BOX_NAME, true),
        field("status", Ty::Literal(ACK_STATUSES), true),
        field("reason", Ty::Nullable(&ANY_STR), false),
        field("ack_id", Ty::Nullable(&ANY_STR), false),
    ],
    forbid_extra: false,
    after: None,
};

pub static MESSAGE_REPLAY_REQUEST: Model = Model {
    name: "MessageReplayRequest",
    fields: &[
        field("message_id", ANY_STR, true),
        field("reason", Ty::Nullable(&ANY_STR), false),
        field("force", Ty::Bool, false),
        field("ack_timeout_seconds", int(1, 86400), false),
        field("requires_ack", Ty::Bool, false),
    ],
    forbid_extra: false,
    after: None,
};

pub static PENDING_QUERY: Model = Model {
    name: "MessagesPendingQuery",
    fields: &[
        field("recipient", Ty::Nullable(&ANY_STR), false),
        field("status", Ty::Nullable(&ANY_STR), false),
        field("include_terminal", Ty::Bool, false),
        field("limit", int(1, 500), false),
    ],
    forbid_extra: false,
    after: None,
};

pub static INBOX_QUERY: Model = Model {
    name: "MessagesInboxQuery",
    fields: &[
        field("recipient", BOX_NAME, true),
        field("limit", int(1, 200), false),
    ],
    forbid_extra: false,
    after: None,
};

pub static THREAD_QUERY: Model = Model {
    name: "MessagesThreadQuery",
    fields: &[
        field("thread_id", BOX_NAME, true),
        field("limit", int(1, 1000), false),
    ],
    forbid_extra: false,
    after: None,
};

fn text_of(value: &Json, key: &str) -> String {
    value
        .get(key)
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn opt_text(value: &Json, key: &str) -> Option<String> {
    value.get(key).and_then(Json::as_str).map(str::to_owned)
}

fn int_of(value: &Json, key: &str, default: i64) -> i64 {
    value
        .get(key)
        .and_then(|v| v.to_value().as_i64())
        .unwrap_or(default)
}

fn flag(value: &Json, key: &str, default: bool) -> bool {
    match value.get(key) {
        Some(Json::Bool(b)) => *b,
        _ => default,
    }
}

fn strings(value: &Json, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Json::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn json_strings(items: &[String]) -> Json {
    Json::Array(items.iter().map(|s| Json::from(s.as_str())).collect())
}

fn nullable(value: Option<&str>) -> Json {
    value.map_or(Json::Null, Json::from)
}

fn envelope_of(coerced: &Json) -> Option<Envelope> {
    coerced
        .get("signed_envelope")
        .filter(|e| !e.is_null())
        .map(Envelope::from_coerced)
}

/// A message's repository path (`messages/<box>/<name>.jsonl`): 400 when the name would put
/// it outside its box (the original lets `../` escape, then fails with a 500). An empty name
/// is a box like any other (`messages/inbox/.jsonl`), as in the original.
pub fn box_path(folder: &str, name: &str) -> Result<String, ContinuityError> {
    let path = format!("messages/{folder}/{name}.jsonl");
    let prefix = format!("messages/{folder}/");
    if !posix_normpath(&path).starts_with(&prefix) || name.contains('\0') {
        return Err(ContinuityError::invalid(format!("Invalid path: {path}")));
    }
    Ok(path)
}

/// `DeliveryPolicy`, coerced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub requires_ack: bool,
    pub ack_timeout_seconds: i64,
    pub max_retries: i64,
}

impl Delivery {
    fn from_coerced(value: Option<&Json>) -> Delivery {
        let empty = Json::Object(JsonObject::new());
        let value = value.unwrap_or(&empty);
        Delivery {
            requires_ack: flag(value, "requires_ack", false),
            ack_timeout_seconds: int_of(value, "ack_timeout_seconds", 300),
            max_retries: int_of(value, "max_retries", 5),
        }
    }

    /// `model_dump()`.
    pub fn to_json(&self) -> Json {
        let mut o = JsonObject::new();
        o.insert("requires_ack", Json::Bool(self.requires_ack));
        o.insert("ack_timeout_seconds", Json::from(self.ack_timeout_seconds));
        o.insert("max_retries", Json::from(self.max_retries));
        Json::Object(o)
    }
}

/// `POST /v1/messages/send`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub thread_id: String,
    pub sender: String,
    pub recipient: String,
    pub subject: String,
    pub body_md: String,
    pub priority: String,
    pub attachments: Vec<String>,
    pub idempotency_key: Option<String>,
    pub delivery: Delivery,
    pub envelope: Option<Envelope>,
}

impl SendRequest {
    pub fn from_json(body: &Json) -> Result<SendRequest, ContinuityError> {
        let c = validate_body(&MESSAGE_SEND_REQUEST, body).map_err(ContinuityError::Validation)?;
        Ok(SendRequest {
            thread_id: text_of(&c, "thread_id"),
            sender: text_of(&c, "sender"),
            recipient: text_of(&c, "recipient"),
            subject: text_of(&c, "subject"),
            body_md: text_of(&c, "body_md"),
            priority: opt_text(&c, "priority").unwrap_or_else(|| "normal".to_owned()),
            attachments: strings(&c, "attachments"),
            idempotency_key: opt_text(&c, "idempotency_key"),
            delivery: Delivery::from_coerced(c.get("delivery")),
            envelope: envelope_of(&c),
        })
    }

    /// The idempotency scope `<sender>|<recipient>|<key>` (a falsy key is none, as in Python).
    pub fn idempotency_scope(&self) -> Option<String> {
        self.idempotency_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .map(|k| format!("{}|{}|{k}", self.sender, self.recipient))
    }

    /// Delivery is tracked for an idempotency key or a required ack.
    pub fn tracked(&self) -> bool {
        self.idempotency_scope().is_some() || self.delivery.requires_ack
    }

    /// What a signed envelope on this send signs.
    pub fn signed_payload(&self) -> Json {
        let mut o = JsonObject::new();
        o.insert("thread_id", Json::from(self.thread_id.as_str()));
        o.insert("sender", Json::from(self.sender.as_str()));
        o.insert("recipient", Json::from(self.recipient.as_str()));
        o.insert("subject", Json::from(self.subject.as_str()));
        o.insert("body_md", Json::from(self.body_md.as_str()));
        o.insert("priority", Json::from(self.priority.as_str()));
        o.insert("attachments", json_strings(&self.attachments));
        o.insert("idempotency_key", nullable(self.idempotency_key.as_deref()));
        o.insert("delivery", self.delivery.to_json());
        Json::Object(o)
    }

    /// The message record (the line the original appends to inbox, outbox and thread).
    pub fn message(&self, message_id: &str, sent_at: &str) -> JsonObject {
        let mut o = JsonObject::new();
        o.insert("id", Json::from(message_id));
        o.insert("thread_id", Json::from(self.thread_id.as_str()));
        o.insert("from", Json::from(self.sender.as_str()));
        o.insert("to", Json::from(self.recipient.as_str()));
        o.insert("sent_at", Json::from(sent_at));
        o.insert("subject", Json::from(self.subject.as_str()));
        o.insert("body_md", Json::from(self.body_md.as_str()));
        o.insert("priority", Json::from(self.priority.as_str()));
        o.insert("attachments", json_strings(&self.attachments));
        o.insert("idempotency_key", nullable(self.idempotency_key.as_deref()));
        o.insert("delivery", self.delivery.to_json());
        o
    }

    /// The delivery record of `message` sent at `now` (only for tracked sends).
    pub fn delivery_record(&self, message: &JsonObject, now: OffsetDateTime) -> DeliveryRecord {
        let sent_at = format_iso(now);
        let ack_deadline = self
            .delivery
            .requires_ack
            .then(|| format_iso(now + Duration::seconds(self.delivery.ack_timeout_seconds)));
        let status = if self.delivery.requires_ack {
            "pending_ack"
        } else {
            "delivered"
        };
        let mut o = JsonObject::new();
        o.insert(
            "message_id",
            message.get("id").cloned().unwrap_or(Json::Null),
        );
        o.insert("thread_id", Json::from(self.thread_id.as_str()));
        o.insert("from", Json::from(self.sender.as_str()));
        o.insert("to", Json::from(self.recipient.as_str()));
        o.insert("subject", Json::from(self.subject.as_str()));
        o.insert("idempotency_key", nullable(self.idempotency_key.as_deref()));
        o.insert("status", Json::from(status));
        o.insert("requires_ack", Json::Bool(self.delivery.requires_ack));
        o.insert(
            "ack_timeout_seconds",
            Json::from(self.delivery.ack_timeout_seconds),
        );
        o.insert("max_retries", Json::from(self.delivery.max_retries));
        o.insert("retry_count", Json::from(0_i64));
        o.insert("sent_at", Json::from(sent_at.as_str()));
        o.insert("ack_deadline", nullable(ack_deadline.as_deref()));
        o.insert("acks", Json::Array(Vec::new()));
        o.insert("last_error", Json::Null);
        o.insert("message", Json::Object(message.clone()));
        DeliveryRecord::new(o)
    }
}

/// `POST /v1/relay/forward`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayRequest {
    pub relay_id: String,
    pub target_recipient: String,
    pub thread_id: String,
    pub sender: String,
    pub subject: String,
    pub body_md: String,
    pub priority: String,
    pub attachments: Vec<String>,
    pub envelope: Json,
    pub signed_envelope: Option<Envelope>,
}

impl RelayRequest {
    pub fn from_json(body: &Json) -> Result<RelayRequest, ContinuityError> {
        let c = validate_body(&RELAY_FORWARD_REQUEST, body).map_err(ContinuityError::Validation)?;
        Ok(RelayRequest {
            relay_id: opt_text(&c, "relay_id").unwrap_or_else(|| "relay-local".to_owned()),
            target_recipient: text_of(&c, "target_recipient"),
            thread_id: text_of(&c, "thread_id"),
            sender: text_of(&c, "sender"),
            subject: text_of(&c, "subject"),
            body_md: text_of(&c, "body_md"),
            priority: opt_text(&c, "priority").unwrap_or_else(|| "normal".to_owned()),
            attachments: strings(&c, "attachments"),
            envelope: c
                .get("envelope")
                .cloned()
                .unwrap_or(Json::Object(JsonObject::new())),
            signed_envelope: envelope_of(&c),
        })
    }

    pub fn signed_payload(&self) -> Json {
        let mut o = JsonObject::new();
        o.insert("relay_id", Json::from(self.relay_id.as_str()));
        o.insert(
            "target_recipient",
            Json::from(self.target_recipient.as_str()),
        );
        o.insert("thread_id", Json::from(self.thread_id.as_str()));
        o.insert("sender", Json::from(self.sender.as_str()));
        o.insert("subject", Json::from(self.subject.as_str()));
        o.insert("body_md", Json::from(self.body_md.as_str()));
        o.insert("priority", Json::from(self.priority.as_str()));
        o.insert("attachments", json_strings(&self.attachments));
        o.insert("envelope", self.envelope.clone());
        Json::Object(o)
    }

    /// The relayed message record (relay log, recipient's inbox, thread).
    pub fn message(&self, message_id: &str, sent_at: &str) -> JsonObject {
        let mut o = JsonObject::new();
        o.insert("id", Json::from(message_id));
        o.insert("thread_id", Json::from(self.thread_id.as_str()));
        o.insert("from", Json::from(self.sender.as_str()));
        o.insert("to", Json::from(self.target_recipient.as_str()));
        o.insert("via", Json::from(self.relay_id.as_str()));
        o.insert("sent_at", Json::from(sent_at));
        o.insert("subject", Json::from(self.subject.as_str()));
        o.insert("body_md", Json::from(self.body_md.as_str()));
        o.insert("priority", Json::from(self.priority.as_str()));
        o.insert("attachments", json_strings(&self.attachments));
        o.insert("envelope", self.envelope.clone());
        o
    }
}

/// A delivery record: the original's document and the columns the store keeps beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    pub document: JsonObject,
}

impl DeliveryRecord {
    pub fn new(document: JsonObject) -> DeliveryRecord {
        DeliveryRecord { document }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.document.get(key).and_then(Json::as_str)
    }

    pub fn message_id(&self) -> &str {
        self.text("message_id").unwrap_or_default()
    }

    pub fn recipient(&self) -> &str {
        self.text("to").unwrap_or_default()
    }

    pub fn status(&self) -> &str {
        self.text("status")
            .filter(|s| !s.is_empty())
            .unwrap_or("pending_ack")
    }

    pub fn ack_deadline(&self) -> Option<&str> {
        self.text("ack_deadline")
    }

    pub fn sent_at(&self) -> &str {
        self.text("sent_at").unwrap_or_default()
    }

    /// The record as stored (compact, its key order).
    pub fn to_text(&self) -> String {
        to_py_json(&Json::Object(self.document.clone()))
    }

    /// The record with `effective_status` at `now`.
    pub fn view(&self, now: OffsetDateTime) -> Json {
        let mut o = self.document.clone();
        o.insert(
            "effective_status",
            Json::from(effective_status(self.status(), self.ack_deadline(), now)),
        );
        Json::Object(o)
    }
}

/// `pending_ack` past its deadline reads as `dead_letter`; anything else as stored.
pub fn effective_status<'a>(
    status: &'a str,
    ack_deadline: Option<&str>,
    now: OffsetDateTime,
) -> &'a str {
    if status != "pending_ack" {
        return status;
    }
    match ack_deadline.and_then(parse_iso) {
        Some(deadline) if now > deadline => "dead_letter",
        _ => status,
    }
}

/// The greatest stored deadline text (`YYYY-MM-DDTHH:MM:SSZ`) that `now` is past: deadlines
/// are whole seconds, so `now > deadline` holds for every deadline `<=` this one. Lets the
/// store apply [`effective_status`] in SQL.
pub fn passed_deadline(now: OffsetDateTime) -> String {
    let whole = super::timestamp::whole_seconds(now);
    let last = if whole == now {
        whole - Duration::seconds(1)
    } else {
        whole
    };
    format_iso(last)
}

/// `POST /v1/messages/ack`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckRequest {
    pub message_id: String,
    pub status: String,
    pub reason: Option<String>,
    pub ack_id: Option<String>,
}

impl AckRequest {
    pub fn from_json(body: &Json) -> Result<AckRequest, ContinuityError> {
        let c = validate_body(&MESSAGE_ACK_REQUEST, body).map_err(ContinuityError::Validation)?;
        Ok(AckRequest {
            message_id: text_of(&c, "message_id"),
            status: text_of(&c, "status"),
            reason: opt_text(&c, "reason"),
            ack_id: opt_text(&c, "ack_id").filter(|a| !a.is_empty()),
        })
    }
}

/// 404 for an untracked message.
pub fn not_tracked() -> ContinuityError {
    ContinuityError::not_found("Tracked message not found")
}

/// Applies `ack` (by `peer`, at `now`, row id `ack_id`) to `record`: accepted → `acked`,
/// rejected → `dead_letter` with `last_error`, deferred → `pending_ack` with a fresh
/// deadline. Returns the ack row.
pub fn apply_ack(
    record: &mut DeliveryRecord,
    ack: &AckRequest,
    ack_id: &str,
    peer: &str,
    now: OffsetDateTime,
) -> JsonObject {
    let mut row = JsonObject::new();
    row.insert("ack_id", Json::from(ack_id));
    row.insert("message_id", Json::from(ack.message_id.as_str()));
    row.insert("status", Json::from(ack.status.as_str()));
    row.insert("reason", nullable(ack.reason.as_deref()));
    row.insert("ack_at", Json::from(format_iso(now)));
    row.insert("by", Json::from(peer));
    let doc = &mut record.document;
    let mut acks = match doc.get("acks") {
        Some(Json::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    acks.push(Json::Object(row.clone()));
    doc.insert("acks", Json::Array(acks));
    match ack.status.as_str() {
        "accepted" => doc.insert("status", Json::from("acked")),
        "rejected" => {
            doc.insert("status", Json::from("dead_letter"));
            let error = ack
                .reason
                .clone()
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "rejected".to_owned());
            doc.insert("last_error", Json::from(error));
        }
        _ => {
            doc.insert("status", Json::from("pending_ack"));
            let timeout = doc
                .get("ack_timeout_seconds")
                .and_then(|v| v.to_value().as_i64())
                .filter(|t| *t != 0)
                .unwrap_or(300);
            doc.insert(
                "ack_deadline",
                Json::from(format_iso(now + Duration::seconds(timeout))),
            );
        }
    }
    row
}

/// `POST /v1/replay/messages`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRequest {
    pub message_id: String,
    pub reason: Option<String>,
    pub force: bool,
    pub ack_timeout_seconds: i64,
    pub requires_ack: bool,
}

impl ReplayRequest {
    pub fn from_json(body: &Json) -> Result<ReplayRequest, ContinuityError> {
        let c =
            validate_body(&MESSAGE_REPLAY_REQUEST, body).map_err(ContinuityError::Validation)?;
        Ok(ReplayRequest {
            message_id: text_of(&c, "message_id"),
            reason: opt_text(&c, "reason"),
            force: flag(&c, "force", false),
            ack_timeout_seconds: int_of(&c, "ack_timeout_seconds", 300),
            requires_ack: flag(&c, "requires_ack", true),
        })
    }
}

/// What a replay writes: the new message and its record, and the original record marked
/// `replayed`.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub message: JsonObject,
    pub record: DeliveryRecord,
    pub original: DeliveryRecord,
}

/// Replays `record` as message `new_id` at `now` (409 unless dead-lettered with retries
/// left, or forced).
pub fn replay(
    record: &DeliveryRecord,
    req: &ReplayRequest,
    new_id: &str,
    now: OffsetDateTime,
) -> Result<Replayed, ContinuityError> {
    let conflict = |detail: String| ContinuityError::Conflict {
        kind: super::error::ConflictKind::State,
        detail,
    };
    let effective = effective_status(record.status(), record.ack_deadline(), now);
    if !req.force && effective != "dead_letter" {
        return Err(conflict(format!(
            "Replay requires dead_letter status; got {effective}"
        )));
    }
    let doc = &record.document;
    let number = |key: &str| {
        doc.get(key)
            .and_then(|v| v.to_value().as_i64())
            .unwrap_or(0)
    };
    let retry_count = number("retry_count");
    let max_retries = number("max_retries");
    if !req.force && retry_count >= max_retries {
        return Err(conflict(format!(
            "Replay retry limit reached ({retry_count}/{max_retries})"
        )));
    }
    let text = |key: &str| doc.get(key).and_then(Json::as_str).map(str::to_owned);
    let original = match doc.get("message") {
        Some(Json::Object(message)) => message.clone(),
        _ => {
            let mut m = JsonObject::new();
            m.insert("id", Json::from(req.message_id.as_str()));
            m.insert("thread_id", nullable(text("thread_id").as_deref()));
            m.insert("from", nullable(text("from").as_deref()));
            m.insert("to", nullable(text("to").as_deref()));
            m.insert("subject", nullable(text("subject").as_deref()));
            m.insert("body_md", Json::from(""));
            m.insert("attachments", Json::Array(Vec::new()));
            m.insert("priority", Json::from("normal"));
            let timeout = Some(number("ack_timeout_seconds"))
                .filter(|t| *t != 0)
                .unwrap_or(req.ack_timeout_seconds);
            let mut delivery = JsonObject::new();
            delivery.insert(
                "requires_ack",
                Json::Bool(matches!(doc.get("requires_ack"), Some(Json::Bool(true)))),
            );
            delivery.insert("ack_timeout_seconds", Json::from(timeout));
            delivery.insert("max_retries", Json::from(max_retries));
            m.insert("delivery", Json::Object(delivery));
            m
        }
    };
    let sent_at = format_iso(now);
    let mut message = original.clone();
    message.insert("id", Json::from(new_id));
    message.insert("replay_of", Json::from(req.message_id.as_str()));
    message.insert("sent_at", Json::from(sent_at.as_str()));
    let pick = |key: &str, fallback: &str| {
        message
            .get(key)
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| text(key).filter(|s| !s.is_empty()))
            .unwrap_or_else(|| fallback.to_owned())
    };
    let sender = pick("from", "unknown");
    let recipient = pick("to", "unknown");
    let thread_id = pick("thread_id", "thread_unknown");
    let (ack_deadline, status) = if req.requires_ack {
        (
            Json::from(format_iso(now + Duration::seconds(req.ack_timeout_seconds))),
            "pending_ack",
        )
    } else {
        (Json::Null, "delivered")
    };
    let mut new_doc = doc.clone();
    new_doc.insert("message_id", Json::from(new_id));
    new_doc.insert("thread_id", Json::from(thread_id));
    new_doc.insert("from", Json::from(sender));
    new_doc.insert("to", Json::from(recipient));
    new_doc.insert("status", Json::from(status));
    new_doc.insert("requires_ack", Json::Bool(req.requires_ack));
    new_doc.insert("ack_timeout_seconds", Json::from(req.ack_timeout_seconds));
    new_doc.insert("retry_count", Json::from(retry_count + 1));
    new_doc.insert("sent_at", Json::from(sent_at.as_str()));
    new_doc.insert("ack_deadline", ack_deadline);
    new_doc.insert("acks", Json::Array(Vec::new()));
    new_doc.insert("last_error", Json::Null);
    new_doc.insert("replay_of", Json::from(req.message_id.as_str()));
    new_doc.insert("message", Json::Object(message.clone()));
    let mut old = doc.clone();
    old.insert("status", Json::from("replayed"));
    old.insert("replayed_to", Json::from(new_id));
    old.insert("updated_at", Json::from(sent_at));
    if let Some(reason) = req.reason.as_deref().filter(|r| !r.is_empty()) {
        old.insert("replay_reason", Json::from(reason));
    }
    Ok(Replayed {
        message,
        record: DeliveryRecord::new(new_doc),
        original: DeliveryRecord::new(old),
    })
}

fn query_loc() -> Loc {
    Loc(vec![LocPart::Key("query".to_owned())])
}

/// Query parameters validated as FastAPI does: a missing one echoes `null`, not the query.
fn validate_query(model: &'static Model, params: &Json) -> Result<Json, ContinuityError> {
    validate_at(model, params, &query_loc()).map_err(|mut errors| {
        for error in &mut errors {
            if error.kind == "missing" {
                error.input = Json::Null;
            }
        }
        ContinuityError::Validation(errors)
    })
}

/// `GET /v1/messages/pending` parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingQuery {
    pub recipient: Option<String>,
    pub status: Option<String>,
    pub include_terminal: bool,
    pub limit: i64,
}

impl PendingQuery {
    pub fn from_json(params: &Json) -> Result<PendingQuery, ContinuityError> {
        let c = validate_query(&PENDING_QUERY, params)?;
        Ok(PendingQuery {
            recipient: opt_text(&c, "recipient").filter(|s| !s.is_empty()),
            status: opt_text(&c, "status").filter(|s| !s.is_empty()),
            include_terminal: flag(&c, "include_terminal", false),
            limit: int_of(&c, "limit", 50),
        })
    }
}

/// `GET /v1/messages/inbox` (`recipient`) or `/thread` (`thread_id`) parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub name: String,
    pub limit: i64,
}

impl ListQuery {
    pub fn inbox(params: &Json) -> Result<ListQuery, ContinuityError> {
        let c = validate_query(&INBOX_QUERY, params)?;
        Ok(ListQuery {
            name: text_of(&c, "recipient"),
            limit: int_of(&c, "limit", 20),
        })
    }

    pub fn thread(params: &Json) -> Result<ListQuery, ContinuityError> {
        let c = validate_query(&THREAD_QUERY, params)?;
        Ok(ListQuery {
            name: text_of(&c, "thread_id"),
            limit: int_of(&c, "limit", 100),
        })
    }
}

fn files(paths: &[String]) -> Json {
    json_strings(paths)
}

/// The send answer (`idempotent_replay` true: the first send's message and record).
pub fn send_body(
    idempotent_replay: bool,
    message: Json,
    delivery_state: Option<Json>,
    verification: Option<&Verification>,
    committed_files: &[String],
    latest_commit: Option<&str>,
) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("idempotent_replay", Json::Bool(idempotent_replay));
    o.insert("message", message);
    o.insert("delivery_state", delivery_state.unwrap_or(Json::Null));
    o.insert(
        "signature_verification",
        verification.map_or(Json::Null, |v| Json::Object(v.to_json())),
    );
    o.insert("committed_files", files(committed_files));
    o.insert("latest_commit", nullable(latest_commit));
    Json::Object(o)
}

/// `{ok, message_id, ack, delivery_state, committed_files, latest_commit}`.
pub fn ack_body(
    message_id: &str,
    ack: JsonObject,
    delivery_state: Json,
    committed_files: &[String],
    latest_commit: &str,
) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("message_id", Json::from(message_id));
    o.insert("ack", Json::Object(ack));
    o.insert("delivery_state", delivery_state);
    o.insert("committed_files", files(committed_files));
    o.insert("latest_commit", Json::from(latest_commit));
    Json::Object(o)
}

/// `{ok, message, signature_verification, committed_files, latest_commit}`.
pub fn relay_body(
    message: JsonObject,
    verification: Option<&Verification>,
    committed_files: &[String],
    latest_commit: &str,
) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("message", Json::Object(message));
    o.insert(
        "signature_verification",
        verification.map_or(Json::Null, |v| Json::Object(v.to_json())),
    );
    o.insert("committed_files", files(committed_files));
    o.insert("latest_commit", Json::from(latest_commit));
    Json::Object(o)
}

/// `{ok, message_id, replayed_message_id, delivery_state, committed_files, latest_commit}`.
pub fn replay_body(
    message_id: &str,
    replayed: &Replayed,
    now: OffsetDateTime,
    committed_files: &[String],
    latest_commit: &str,
) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("message_id", Json::from(message_id));
    o.insert(
        "replayed_message_id",
        Json::from(replayed.record.message_id()),
    );
    o.insert("delivery_state", replayed.record.view(now));
    o.insert("committed_files", files(committed_files));
    o.insert("latest_commit", Json::from(latest_commit));
    Json::Object(o)
}

/// `{"ok":true,"<key>":<name>,"count":n,"messages":[…]}` from the stored message documents
/// (already compact JSON), oldest first, without parsing them again.
pub fn list_body(key: &str, name: &str, documents: &[String]) -> Vec<u8> {
    let size = documents.iter().map(String::len).sum::<usize>() + documents.len() + 64;
    let mut out = String::with_capacity(size + name.len());
    out.push_str("{\"ok\":true,\"");
    out.push_str(key);
    out.push_str("\":");
    out.push_str(&to_py_json(name));
    out.push_str(",\"count\":");
    out.push_str(&documents.len().to_string());
    out.push_str(",\"messages\":[");
    for (i, doc) in documents.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(doc);
    }
    out.push_str("]}");
    out.into_bytes()
}

/// `{ok, count, summary:{<effective status>: n}, messages}` from stored records with their
/// effective status (records already compact JSON ending in `}`).
pub fn pending_body(summary: &[(String, i64)], rows: &[(String, String)]) -> Vec<u8> {
    let mut out = String::from("{\"ok\":true,\"count\":");
    out.push_str(&rows.len().to_string());
    out.push_str(",\"summary\":{");
    for (i, (status, n)) in summary.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&to_py_json(status.as_str()));
        out.push(':');
        out.push_str(&n.to_string());
    }
    out.push_str("},\"messages\":[");
    for (i, (record, effective)) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&with_effective_status(record, effective));
    }
    out.push_str("]}");
    out.into_bytes()
}

/// A stored record (compact JSON object) with `effective_status` appended as its last key.
pub fn with_effective_status(record: &str, effective: &str) -> String {
    let body = record.strip_suffix('}').unwrap_or(record);
    let sep = if body.ends_with('{') { "" } else { "," };
    format!(
        "{body}{sep}\"effective_status\":{}}}",
        to_py_json(effective)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-11-26 02:00:00 UTC);

    #[test]
    fn a_tracked_send_makes_the_originals_message_and_record() {
        let req = SendRequest::from_json(
            &Json::parse(br#"{"thread_id":"t","sender":"a","recipient":"b","subject":"s","body_md":"hi","idempotency_key":"k1","delivery":{"requires_ack":true,"ack_timeout_seconds":"60"}}"#)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(req.idempotency_scope().as_deref(), Some("a|b|k1"));
        let message = req.message("msg_000000000001", &format_iso(NOW));
        let record = req.delivery_record(&message, NOW);
        assert_eq!(
            to_py_json(&Json::Object(message)),
            r#"{"id":"msg_000000000001","thread_id":"t","from":"a","to":"b","sent_at":"2026-11-26T02:00:00Z","subject":"s","body_md":"hi","priority":"normal","attachments":[],"idempotency_key":"k1","delivery":{"requires_ack":true,"ack_timeout_seconds":60,"max_retries":5}}"#
        );
        assert_eq!(record.ack_deadline(), Some("2026-11-26T02:01:00Z"));
        assert_eq!(
            with_effective_status(&record.to_text(), "pending_ack"),
            to_py_json(&record.view(NOW))
        );
        let late = NOW + Duration::seconds(61);
        assert_eq!(
            effective_status(record.status(), record.ack_deadline(), late),
            "dead_letter"
        );
        // Exactly at the deadline it is not past yet; a microsecond later it is.
        let at = NOW + Duration::seconds(60);
        assert_eq!(
            effective_status("pending_ack", record.ack_deadline(), at),
            "pending_ack"
        );
        assert!(passed_deadline(at).as_str() < "2026-11-26T02:01:00Z");
        let just_after = at + Duration::microseconds(1);
        assert_eq!(
            effective_status("pending_ack", record.ack_deadline(), just_after),
            "dead_letter"
        );
        assert_eq!(passed_deadline(just_after), "2026-11-26T02:01:00Z");
    }

    #[test]
    fn acks_move_the_record() {
        let req = SendRequest::from_json(
            &Json::parse(br#"{"thread_id":"t","sender":"a","recipient":"b","subject":"s","body_md":"hi","delivery":{"requires_ack":true}}"#)
                .unwrap(),
        )
        .unwrap();
        let message = req.message("m", "x");
        let mut record = req.delivery_record(&message, NOW);
        let ack = |status: &str| AckRequest {
            message_id: "m".into(),
            status: status.into(),
            reason: None,
            ack_id: None,
        };
        let later = NOW + Duration::seconds(100);
        apply_ack(&mut record, &ack("deferred"), "ack_1", "peer-b", later);
        assert_eq!(record.status(), "pending_ack");
        assert_eq!(record.ack_deadline(), Some("2026-11-26T02:06:40Z"));
        apply_ack(&mut record, &ack("rejected"), "ack_2", "peer-b", later);
        assert_eq!(record.status(), "dead_letter");
        assert_eq!(
            record.document.get("last_error").and_then(Json::as_str),
            Some("rejected")
        );
        assert_eq!(
            record
                .document
                .get("acks")
                .and_then(Json::as_array)
                .map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn invalid_limits_are_fastapis_422() {
        let err = ListQuery::inbox(&Json::parse(br#"{"recipient":"b","limit":"201"}"#).unwrap())
            .unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"less_than_equal","loc":["query","limit"],"msg":"Input should be less than or equal to 200","input":"201","ctx":{"le":200}}]}"#
        );
        assert!(box_path("inbox", "../../x").is_err());
        assert_eq!(box_path("inbox", "b").unwrap(), "messages/inbox/b.jsonl");
        assert_eq!(box_path("inbox", "").unwrap(), "messages/inbox/.jsonl");
    }
}

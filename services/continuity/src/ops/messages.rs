//! Messages (CogniRelay's `/v1/messages/*`, `/v1/relay/forward`, `/v1/replay/messages`,
//! `/v1/security/keys/rotate`), in the caller's tenant, with the original's scopes and
//! namespace checks. A send is answered only after its message, delivery record and nonce
//! committed together; a nonce or idempotency key taken by a concurrent send is found by the
//! store's unique keys inside that transaction.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::json;
use time::{Duration, OffsetDateTime};

use super::{Continuity, WRITE_ATTEMPTS, audit, bytes_of, now};
use crate::domain::access::{ADMIN, Caller, Need, READ};
use crate::domain::envelope::{
    self, ALGORITHM, Envelope, MESSAGE_VERIFY_REQUEST, NONCE_INDEX_PATH, Rotation,
    SECURITY_KEYS_PATH, SECURITY_KEYS_ROTATE_REQUEST, Verification,
};
use crate::domain::error::ContinuityError;
use crate::domain::json::{Json, JsonObject, to_py_json};
use crate::domain::memory::revision_id;
use crate::domain::messages::{
    self, ANY_INBOX_PATH, AckRequest, DELIVERY_STATE_PATH, DeliveryRecord, ListQuery, PendingQuery,
    RelayRequest, ReplayRequest, SendRequest, box_path,
};
use crate::domain::request::parse_body;
use crate::domain::schema::validate_body;
use crate::domain::timestamp::{format_compact, format_iso, parse_iso, whole_seconds};
use crate::error::Error;
use crate::store::{
    DeliveryRead, DeliveryRow, DeliveryUpdate, DeliveryWrite, KeyWrite, MessageWrite, NonceRow,
    NonceWrite, PendingFilter, Refusal, Write,
};

/// Sending, acking, relaying, replaying and verifying need `write:messages`.
pub const MESSAGES: Need = Need {
    noema: "continuity:write",
    cognirelay: "write:messages",
};

/// Recent signed-envelope verification failures per caller (tenant and token), for the
/// original's throttle: a caller with `limit` failures in the window is refused unchecked.
#[derive(Debug, Default)]
pub struct VerifyFailures {
    seen: Mutex<HashMap<(String, String), VecDeque<OffsetDateTime>>>,
}

impl VerifyFailures {
    fn key(caller: &Caller) -> (String, String) {
        (caller.tenant.clone(), caller.principal.token_id.clone())
    }

    /// Failures of `caller` within `window` before `now`.
    fn count(&self, caller: &Caller, now: OffsetDateTime, window: Duration) -> u64 {
        let Ok(mut seen) = self.seen.lock() else {
            return 0;
        };
        let Some(times) = seen.get_mut(&Self::key(caller)) else {
            return 0;
        };
        while times.front().is_some_and(|t| *t < now - window) {
            times.pop_front();
        }
        times.len() as u64
    }

    /// Failures of every token of `tenant` within `window` before `now`.
    pub(super) fn count_tenant(&self, tenant: &str, now: OffsetDateTime, window: Duration) -> u64 {
        let Ok(seen) = self.seen.lock() else {
            return 0;
        };
        let recent = seen
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .flat_map(|(_, times)| times.iter())
            .filter(|t| **t >= now - window)
            .count();
        recent as u64
    }

    fn record(&self, caller: &Caller, now: OffsetDateTime) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.entry(Self::key(caller)).or_default().push_back(now);
        }
    }
}

/// A verification before its nonce is written: the answer so far and the nonce to consume.
struct Checked {
    verification: Verification,
    nonce: Option<NonceRow>,
}

fn random_hex(len: usize) -> String {
    let mut text = uuid::Uuid::new_v4().simple().to_string();
    text.truncate(len);
    text
}

fn micros(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000).unwrap_or(i64::MAX)
}

fn invalid_envelope(reason: &str) -> ContinuityError {
    ContinuityError::Unauthorized(format!("Invalid signed envelope: {reason}"))
}

fn record_of(read: &DeliveryRead) -> Result<DeliveryRecord, Error> {
    match Json::parse(read.record.as_bytes()) {
        Ok(Json::Object(document)) => Ok(DeliveryRecord::new(document)),
        _ => Err(Error::Corrupt(
            "a delivery record is not a JSON object".into(),
        )),
    }
}

fn strict_ingress() -> ContinuityError {
    ContinuityError::invalid("signed_envelope is required when strict signed ingress is enabled")
}

impl Continuity {
    pub(super) fn failure_window(&self) -> Duration {
        Duration::seconds(self.options.verify_failure_window_seconds.max(60))
    }

    /// Checks `envelope` over `payload` (throttle, key, expiry, signature); a passing
    /// envelope that consumes its nonce carries the nonce row for the write.
    async fn check_envelope(
        &self,
        caller: &Caller,
        payload: &Json,
        envelope: &Envelope,
        consume_nonce: bool,
        at: OffsetDateTime,
    ) -> Result<Checked, Error> {
        if consume_nonce {
            caller.require_write_path(NONCE_INDEX_PATH)?;
        }
        let mut envelope = envelope.clone();
        envelope.consume_nonce = consume_nonce;
        let window = self.failure_window();
        let prior = self.failures.count(caller, at, window);
        if prior >= self.options.verify_failure_limit {
            return Ok(Checked {
                verification: Verification::throttled(envelope, prior),
                nonce: None,
            });
        }
        let key = self
            .store()
            .signing_key(&caller.tenant, &envelope.key_id)
            .await?
            .ok_or_else(|| {
                ContinuityError::not_found(format!("Unknown key_id: {}", envelope.key_id))
            })?;
        if key.algorithm != envelope.algorithm {
            return Err(ContinuityError::invalid(format!(
                "Algorithm mismatch for key {}",
                envelope.key_id
            ))
            .into());
        }
        let checked = envelope::check(&key.secret, payload, &envelope, at);
        let reason = checked.reason();
        if reason.is_some() {
            self.failures.record(caller, at);
        }
        let nonce = (reason.is_none() && consume_nonce).then(|| {
            let expires = envelope.expires_at.as_deref().and_then(parse_iso);
            NonceRow {
                nonce_key: envelope.nonce_key(),
                key_id: envelope.key_id.clone(),
                nonce: envelope.nonce.clone(),
                first_seen_at: format_iso(whole_seconds(at)),
                expires_at: envelope.expires_at.clone(),
                expires_micros: expires.map(micros),
                now_micros: micros(at),
            }
        });
        let consumed = nonce.is_some();
        Ok(Checked {
            verification: Verification {
                reason: reason.unwrap_or("ok").to_owned(),
                signature_valid: checked.signature_valid,
                expired: checked.expired,
                replay_detected: false,
                nonce_consumed: consumed,
                failure_count: self.failures.count(caller, at, window),
                committed_files: if consumed {
                    vec![NONCE_INDEX_PATH.to_owned()]
                } else {
                    Vec::new()
                },
                throttled: false,
                envelope,
            },
            nonce,
        })
    }

    /// A verification whose nonce turned out to be consumed already.
    fn replayed(&self, caller: &Caller, mut v: Verification, at: OffsetDateTime) -> Verification {
        self.failures.record(caller, at);
        v.reason = "replay_detected".to_owned();
        v.replay_detected = true;
        v.nonce_consumed = false;
        v.committed_files.clear();
        v.failure_count = self.failures.count(caller, at, self.failure_window());
        v
    }

    /// `POST /v1/messages/send`.
    pub async fn send_message(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = SendRequest::from_json(&parse_body(body)?)?;
        caller.require(MESSAGES)?;
        caller.require_write_path(ANY_INBOX_PATH)?;
        caller.require_write_path(DELIVERY_STATE_PATH)?;
        if self.options.require_signed_ingress && req.envelope.is_none() {
            return Err(strict_ingress().into());
        }
        let inbox = box_path("inbox", &req.recipient)?;
        let outbox = box_path("outbox", &req.sender)?;
        let thread = box_path("threads", &req.thread_id)?;
        let scope = req.idempotency_scope();
        for _ in 0..WRITE_ATTEMPTS {
            let at = now();
            if let Some(scope) = &scope
                && let Some(found) = self
                    .store()
                    .delivery_by_idempotency(&caller.tenant, scope)
                    .await?
            {
                return self.idempotent_replay(caller, &req, &found, at).await;
            }
            let mut checked = None;
            if let Some(envelope) = &req.envelope {
                let c = self
                    .check_envelope(
                        caller,
                        &req.signed_payload(),
                        envelope,
                        envelope.consume_nonce,
                        at,
                    )
                    .await?;
                if !c.verification.valid() {
                    return Err(invalid_envelope(&c.verification.reason).into());
                }
                checked = Some(c);
            }
            let sent = whole_seconds(at);
            let message_id = format!("msg_{}", random_hex(12));
            let message = req.message(&message_id, &format_iso(sent));
            let document = to_py_json(&Json::Object(message.clone()));
            let revision = revision_id(None, &inbox, &document);
            let record = req.tracked().then(|| req.delivery_record(&message, sent));
            let delivery = record.as_ref().map(|r| DeliveryRow {
                message_id: message_id.clone(),
                recipient: req.recipient.clone(),
                status: r.status().to_owned(),
                ack_deadline: r.ack_deadline().map(str::to_owned),
                sent_at: r.sent_at().to_owned(),
                idempotency_scope: scope.clone(),
                record: r.to_text(),
                revision_id: revision.clone(),
            });
            let write = MessageWrite {
                tenant: caller.tenant.clone(),
                message_id: message_id.clone(),
                thread_id: req.thread_id.clone(),
                sender: req.sender.clone(),
                recipient: req.recipient.clone(),
                outbox: true,
                relay_id: None,
                document,
                revision_id: revision.clone(),
                delivery,
                nonce: checked.as_ref().and_then(|c| c.nonce.clone()),
                replaces: None,
                at,
                audit: audit(
                    caller,
                    "messages.send",
                    &inbox,
                    json!({"message_id": message_id, "thread_id": req.thread_id, "to": req.recipient}),
                ),
            };
            match self.store().write(Write::Message(Box::new(write))).await? {
                Ok(()) => {
                    let mut files: Vec<String> = checked
                        .as_ref()
                        .map(|c| c.verification.committed_files.clone())
                        .unwrap_or_default();
                    files.extend([inbox.clone(), outbox.clone(), thread.clone()]);
                    if record.is_some() {
                        files.push(DELIVERY_STATE_PATH.to_owned());
                    }
                    let body = messages::send_body(
                        false,
                        Json::Object(message),
                        record.map(|r| r.view(sent)),
                        checked.as_ref().map(|c| &c.verification),
                        &files,
                        Some(&revision),
                    );
                    return Ok(bytes_of(&body));
                }
                Err(Refusal::NonceUsed) => {
                    if let Some(c) = checked {
                        let v = self.replayed(caller, c.verification, at);
                        return Err(invalid_envelope(&v.reason).into());
                    }
                }
                // Another send took the idempotency key first: answer as its replay.
                Err(_) => {}
            }
        }
        Err(ContinuityError::lock_timeout("registry:delivery_index", WRITE_ATTEMPTS).into())
    }

    /// A send whose idempotency key was used before: the first send's message and record
    /// (a signed envelope is still checked, without consuming its nonce).
    async fn idempotent_replay(
        &self,
        caller: &Caller,
        req: &SendRequest,
        found: &DeliveryRead,
        at: OffsetDateTime,
    ) -> Result<Vec<u8>, Error> {
        let mut verification = None;
        if let Some(envelope) = &req.envelope {
            let c = self
                .check_envelope(caller, &req.signed_payload(), envelope, false, at)
                .await?;
            if !c.verification.valid() {
                return Err(invalid_envelope(&c.verification.reason).into());
            }
            verification = Some(c.verification);
        }
        let record = record_of(found)?;
        let message = record
            .document
            .get("message")
            .cloned()
            .unwrap_or(Json::Null);
        let body = messages::send_body(
            true,
            message,
            Some(record.view(at)),
            verification.as_ref(),
            &[],
            Some(&found.revision_id),
        );
        Ok(bytes_of(&body))
    }

    /// `POST /v1/messages/ack`.
    pub async fn ack_message(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = AckRequest::from_json(&parse_body(body)?)?;
        caller.require(MESSAGES)?;
        caller.require_write_path(DELIVERY_STATE_PATH)?;
        let ack_path = box_path("acks", &req.message_id)?;
        let ack_id = req
            .ack_id
            .clone()
            .unwrap_or_else(|| format!("ack_{}", random_hex(12)));
        for _ in 0..WRITE_ATTEMPTS {
            let found = self
                .store()
                .delivery(&caller.tenant, &req.message_id)
                .await?
                .ok_or_else(messages::not_tracked)?;
            let mut record = record_of(&found)?;
            let at = now();
            let row = messages::apply_ack(
                &mut record,
                &req,
                &ack_id,
                caller.peer_id(),
                whole_seconds(at),
            );
            let text = record.to_text();
            let revision = revision_id(Some(&found.revision_id), &ack_path, &text);
            let write = DeliveryWrite {
                tenant: caller.tenant.clone(),
                update: DeliveryUpdate {
                    message_id: req.message_id.clone(),
                    status: record.status().to_owned(),
                    ack_deadline: record.ack_deadline().map(str::to_owned),
                    record: text,
                    revision_id: revision.clone(),
                    version: found.version,
                },
                at,
                audit: audit(
                    caller,
                    "messages.ack",
                    &ack_path,
                    json!({"message_id": req.message_id, "status": req.status}),
                ),
            };
            if self
                .store()
                .write(Write::Delivery(Box::new(write)))
                .await?
                .is_ok()
            {
                let files = [DELIVERY_STATE_PATH.to_owned(), ack_path.clone()];
                let body = messages::ack_body(
                    &req.message_id,
                    row,
                    record.view(whole_seconds(at)),
                    &files,
                    &revision,
                );
                return Ok(bytes_of(&body));
            }
        }
        Err(ContinuityError::lock_timeout("registry:delivery_index", WRITE_ATTEMPTS).into())
    }

    /// `GET /v1/messages/pending` (the query string as an object of strings).
    pub async fn pending_messages(&self, caller: &Caller, params: &[u8]) -> Result<Vec<u8>, Error> {
        let q = PendingQuery::from_json(&parse_body(params)?)?;
        caller.require(READ)?;
        caller.require_read_path(DELIVERY_STATE_PATH)?;
        let filter = PendingFilter {
            cutoff: messages::passed_deadline(now()),
            recipient: q.recipient,
            status: q.status,
            include_terminal: q.include_terminal,
            limit: q.limit,
        };
        let found = self.store().pending(&caller.tenant, &filter).await?;
        Ok(messages::pending_body(&found.summary, &found.rows))
    }

    /// `GET /v1/messages/inbox`.
    pub async fn inbox_messages(&self, caller: &Caller, params: &[u8]) -> Result<Vec<u8>, Error> {
        let q = ListQuery::inbox(&parse_body(params)?)?;
        caller.require(READ)?;
        caller.require_read_path(&format!("messages/inbox/{}.jsonl", q.name))?;
        box_path("inbox", &q.name)?;
        let documents = self.store().inbox(&caller.tenant, &q.name, q.limit).await?;
        Ok(messages::list_body("recipient", &q.name, &documents))
    }

    /// `GET /v1/messages/thread`.
    pub async fn thread_messages(&self, caller: &Caller, params: &[u8]) -> Result<Vec<u8>, Error> {
        let q = ListQuery::thread(&parse_body(params)?)?;
        caller.require(READ)?;
        caller.require_read_path(&format!("messages/threads/{}.jsonl", q.name))?;
        box_path("threads", &q.name)?;
        let documents = self
            .store()
            .thread(&caller.tenant, &q.name, q.limit)
            .await?;
        Ok(messages::list_body("thread_id", &q.name, &documents))
    }

    /// `POST /v1/messages/verify`: `{ok, <verification>, latest_commit}` (200 whatever the
    /// verdict; unknown keys are 404).
    pub async fn verify_message(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let coerced = validate_body(&MESSAGE_VERIFY_REQUEST, &parse_body(body)?)
            .map_err(ContinuityError::Validation)?;
        caller.require(MESSAGES)?;
        let envelope = Envelope::from_coerced(&coerced);
        let payload = coerced
            .get("payload")
            .cloned()
            .unwrap_or(Json::Object(JsonObject::new()));
        let at = now();
        let checked = self
            .check_envelope(caller, &payload, &envelope, envelope.consume_nonce, at)
            .await?;
        let mut verification = checked.verification;
        let mut latest = None;
        if let Some(nonce) = checked.nonce {
            let revision = revision_id(None, NONCE_INDEX_PATH, &nonce.nonce_key);
            let write = NonceWrite {
                tenant: caller.tenant.clone(),
                nonce,
                at,
                audit: audit(
                    caller,
                    "messages.verify",
                    NONCE_INDEX_PATH,
                    json!({"key_id": verification.envelope.key_id, "nonce_consumed": true}),
                ),
            };
            match self.store().write(Write::Nonce(Box::new(write))).await? {
                Ok(()) => latest = Some(revision),
                Err(_) => verification = self.replayed(caller, verification, at),
            }
        }
        if latest.is_none() {
            latest = self.store().latest_message_revision(&caller.tenant).await?;
        }
        let mut o = JsonObject::new();
        o.insert("ok", Json::Bool(true));
        for (key, value) in verification.to_json().iter() {
            o.insert(key.clone(), value.clone());
        }
        o.insert("latest_commit", latest.map_or(Json::Null, Json::from));
        Ok(bytes_of(&Json::Object(o)))
    }

    /// `POST /v1/relay/forward`: the message lands in the relay log, the target's inbox and
    /// the thread (not in an outbox).
    pub async fn relay_forward(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = RelayRequest::from_json(&parse_body(body)?)?;
        caller.require(MESSAGES)?;
        if self.options.require_signed_ingress && req.signed_envelope.is_none() {
            return Err(strict_ingress().into());
        }
        let relay = box_path("relay", &req.relay_id)?;
        let inbox = box_path("inbox", &req.target_recipient)?;
        let thread = box_path("threads", &req.thread_id)?;
        let at = now();
        let mut checked = None;
        if let Some(envelope) = &req.signed_envelope {
            let c = self
                .check_envelope(
                    caller,
                    &req.signed_payload(),
                    envelope,
                    envelope.consume_nonce,
                    at,
                )
                .await?;
            if !c.verification.valid() {
                return Err(invalid_envelope(&c.verification.reason).into());
            }
            checked = Some(c);
        }
        let message_id = format!("msg_{}", random_hex(12));
        let message = req.message(&message_id, &format_iso(whole_seconds(at)));
        let document = to_py_json(&Json::Object(message.clone()));
        let revision = revision_id(None, &relay, &document);
        let write = MessageWrite {
            tenant: caller.tenant.clone(),
            message_id: message_id.clone(),
            thread_id: req.thread_id.clone(),
            sender: req.sender.clone(),
            recipient: req.target_recipient.clone(),
            outbox: false,
            relay_id: Some(req.relay_id.clone()),
            document,
            revision_id: revision.clone(),
            delivery: None,
            nonce: checked.as_ref().and_then(|c| c.nonce.clone()),
            replaces: None,
            at,
            audit: audit(
                caller,
                "relay.forward",
                &relay,
                json!({"message_id": message_id, "relay_id": req.relay_id, "to": req.target_recipient}),
            ),
        };
        if self
            .store()
            .write(Write::Message(Box::new(write)))
            .await?
            .is_err()
        {
            // Only a consumed nonce refuses a relayed message.
            let reason = match checked {
                Some(c) => self.replayed(caller, c.verification, at).reason,
                None => "replay_detected".to_owned(),
            };
            return Err(invalid_envelope(&reason).into());
        }
        let mut files: Vec<String> = checked
            .as_ref()
            .map(|c| c.verification.committed_files.clone())
            .unwrap_or_default();
        files.extend([relay, inbox, thread]);
        let body = messages::relay_body(
            message,
            checked.as_ref().map(|c| &c.verification),
            &files,
            &revision,
        );
        Ok(bytes_of(&body))
    }

    /// `POST /v1/replay/messages`: a dead-lettered tracked message sent again under a new id.
    pub async fn replay_message(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let req = ReplayRequest::from_json(&parse_body(body)?)?;
        caller.require(MESSAGES)?;
        caller.require_write_path(ANY_INBOX_PATH)?;
        caller.require_write_path(DELIVERY_STATE_PATH)?;
        for _ in 0..WRITE_ATTEMPTS {
            let found = self
                .store()
                .delivery(&caller.tenant, &req.message_id)
                .await?
                .ok_or_else(messages::not_tracked)?;
            let record = record_of(&found)?;
            let at = now();
            let sent = whole_seconds(at);
            let new_id = format!("msg_{}", random_hex(12));
            let replayed = messages::replay(&record, &req, &new_id, sent)?;
            let (sender, recipient, thread_id) = (
                replayed
                    .record
                    .document
                    .get("from")
                    .and_then(Json::as_str)
                    .unwrap_or("unknown")
                    .to_owned(),
                replayed.record.recipient().to_owned(),
                replayed
                    .record
                    .document
                    .get("thread_id")
                    .and_then(Json::as_str)
                    .unwrap_or("thread_unknown")
                    .to_owned(),
            );
            let paths = [
                box_path("inbox", &recipient)?,
                box_path("outbox", &sender)?,
                box_path("threads", &thread_id)?,
            ];
            for path in &paths {
                caller.require_write_path(path)?;
            }
            let document = to_py_json(&Json::Object(replayed.message.clone()));
            let revision = revision_id(Some(&found.revision_id), &paths[0], &document);
            let original = &replayed.original;
            let write = MessageWrite {
                tenant: caller.tenant.clone(),
                message_id: new_id.clone(),
                thread_id: thread_id.clone(),
                sender: sender.clone(),
                recipient: recipient.clone(),
                outbox: true,
                relay_id: None,
                document,
                revision_id: revision.clone(),
                delivery: Some(DeliveryRow {
                    message_id: new_id.clone(),
                    recipient: recipient.clone(),
                    status: replayed.record.status().to_owned(),
                    ack_deadline: replayed.record.ack_deadline().map(str::to_owned),
                    sent_at: replayed.record.sent_at().to_owned(),
                    idempotency_scope: None,
                    record: replayed.record.to_text(),
                    revision_id: revision.clone(),
                }),
                nonce: None,
                replaces: Some(DeliveryUpdate {
                    message_id: req.message_id.clone(),
                    status: original.status().to_owned(),
                    ack_deadline: original.ack_deadline().map(str::to_owned),
                    record: original.to_text(),
                    revision_id: revision.clone(),
                    version: found.version,
                }),
                at,
                audit: audit(
                    caller,
                    "messages.replay",
                    &paths[0],
                    json!({"message_id": req.message_id, "new_message_id": new_id, "force": req.force}),
                ),
            };
            if self
                .store()
                .write(Write::Message(Box::new(write)))
                .await?
                .is_ok()
            {
                let mut files = paths.to_vec();
                files.push(DELIVERY_STATE_PATH.to_owned());
                let body =
                    messages::replay_body(&req.message_id, &replayed, sent, &files, &revision);
                return Ok(bytes_of(&body));
            }
        }
        Err(ContinuityError::lock_timeout("registry:delivery_index", WRITE_ATTEMPTS).into())
    }

    /// `POST /v1/security/keys/rotate`: a new (or re-keyed) HMAC signing key for the
    /// caller's tenant; its secret is answered only here, and only when asked for.
    pub async fn rotate_signing_key(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let coerced = validate_body(&SECURITY_KEYS_ROTATE_REQUEST, &parse_body(body)?)
            .map_err(ContinuityError::Validation)?;
        let rotation = Rotation::from_coerced(&coerced);
        caller.require(ADMIN)?;
        caller.require_write_path(SECURITY_KEYS_PATH)?;
        let at = now();
        let stamp = whole_seconds(at);
        let key_id = rotation
            .key_id
            .clone()
            .unwrap_or_else(|| format!("key_{}_{}", format_compact(stamp), random_hex(8)));
        let secret = rotation
            .secret
            .clone()
            .unwrap_or_else(|| format!("{}{}", random_hex(32), random_hex(32)));
        let previous = self.store().signing_key(&caller.tenant, &key_id).await?;
        let now_text = format_iso(stamp);
        let key = envelope::rotated_key(&rotation, &key_id, &secret, previous.as_ref(), &now_text);
        let active_before = self.store().active_key_id(&caller.tenant).await?;
        let revision = revision_id(None, SECURITY_KEYS_PATH, &format!("{key_id}\n{now_text}"));
        let write = KeyWrite {
            tenant: caller.tenant.clone(),
            key: key.clone(),
            retire_previous: rotation.retire_previous,
            now: now_text,
            at,
            audit: audit(
                caller,
                "security.keys_rotate",
                SECURITY_KEYS_PATH,
                json!({"key_id": key_id, "activate": rotation.activate, "retire_previous": rotation.retire_previous, "algorithm": ALGORITHM}),
            ),
        };
        // A key write is never refused (it replaces a key of the same id).
        let _landed = self.store().write(Write::Key(Box::new(write))).await?;
        let active = if rotation.activate {
            Some(key_id.clone())
        } else {
            active_before
        };
        let body =
            envelope::rotated_body(&key, active.as_deref(), rotation.return_secret, &revision);
        Ok(bytes_of(&body))
    }
}

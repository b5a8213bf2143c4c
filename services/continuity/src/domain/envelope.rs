//! Signed envelopes (digest §12): CogniRelay's HMAC-SHA256 over canonical JSON, the checks a
//! verification makes and the answer it gives, and signing-key rotation. No I/O: the
//! operations layer loads the key, counts the caller's recent failures and records the nonce.
//!
//! The signed bytes are `{"payload", "key_id", "nonce", "expires_at"}` as
//! `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)` writes them
//! ([`canonical_json`]); the signature is the lowercase hex HMAC of those bytes under the
//! key's secret, compared exactly (after trimming whitespace) as the original compares them.

use hmac::{Hmac, Mac};
use noema_core::content_id::ContentId;
use sha2::Sha256;
use time::OffsetDateTime;

use super::json::{Json, JsonObject, canonical_json};
use super::schema::{Field, Model, Ty};
use super::timestamp::parse_iso;

pub const ALGORITHM: &str = "hmac-sha256";
const ALGORITHMS: &[&str] = &[ALGORITHM];
/// The original's nonce index path (namespace-checked when a verification consumes a nonce).
pub const NONCE_INDEX_PATH: &str = "messages/security/nonce_index.json";
/// The original's signing-key file (namespace-checked on rotation).
pub const SECURITY_KEYS_PATH: &str = "config/security_keys.json";

const ANY_STR: Ty = Ty::Str { min: 0, max: None };

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

/// `SignedEnvelope` (on sends and relay forwards).
pub static SIGNED_ENVELOPE: Model = Model {
    name: "SignedEnvelope",
    fields: &[
        field("key_id", ANY_STR, true),
        field("nonce", ANY_STR, true),
        field("expires_at", Ty::Nullable(&ANY_STR), false),
        field("signature", ANY_STR, true),
        field("algorithm", Ty::Literal(ALGORITHMS), false),
        field("consume_nonce", Ty::Bool, false),
    ],
    forbid_extra: false,
    after: None,
};

/// `MessageVerifyRequest` (`POST /v1/messages/verify`).
pub static MESSAGE_VERIFY_REQUEST: Model = Model {
    name: "MessageVerifyRequest",
    fields: &[
        field("payload", Ty::Dict, true),
        field("key_id", ANY_STR, true),
        field("nonce", ANY_STR, true),
        field("expires_at", Ty::Nullable(&ANY_STR), false),
        field("signature", ANY_STR, true),
        field("algorithm", Ty::Literal(ALGORITHMS), false),
        field("consume_nonce", Ty::Bool, false),
    ],
    forbid_extra: false,
    after: None,
};

/// `SecurityKeysRotateRequest` (`POST /v1/security/keys/rotate`).
pub static SECURITY_KEYS_ROTATE_REQUEST: Model = Model {
    name: "SecurityKeysRotateRequest",
    fields: &[
        field("key_id", Ty::Nullable(&ANY_STR), false),
        field("secret", Ty::Nullable(&ANY_STR), false),
        field("activate", Ty::Bool, false),
        field("retire_previous", Ty::Bool, false),
        field("return_secret", Ty::Bool, false),
    ],
    forbid_extra: false,
    after: None,
};

/// A signed envelope's fields, coerced.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub key_id: String,
    pub nonce: String,
    pub expires_at: Option<String>,
    pub signature: String,
    pub algorithm: String,
    pub consume_nonce: bool,
}

impl Envelope {
    /// The envelope of a validated (coerced) `SignedEnvelope` or verify request.
    pub fn from_coerced(value: &Json) -> Envelope {
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Envelope {
            key_id: text("key_id"),
            nonce: text("nonce"),
            expires_at: value
                .get("expires_at")
                .and_then(Json::as_str)
                .map(str::to_owned),
            signature: text("signature"),
            algorithm: value
                .get("algorithm")
                .and_then(Json::as_str)
                .unwrap_or(ALGORITHM)
                .to_owned(),
            consume_nonce: !matches!(value.get("consume_nonce"), Some(Json::Bool(false))),
        }
    }

    /// `<key_id>|<nonce>`: what replay protection keys on.
    pub fn nonce_key(&self) -> String {
        format!("{}|{}", self.key_id, self.nonce)
    }
}

/// The bytes an envelope signs.
pub fn signing_blob(
    payload: &Json,
    key_id: &str,
    nonce: &str,
    expires_at: Option<&str>,
) -> Vec<u8> {
    let mut o = JsonObject::new();
    o.insert("payload", payload.clone());
    o.insert("key_id", Json::from(key_id));
    o.insert("nonce", Json::from(nonce));
    o.insert("expires_at", expires_at.map_or(Json::Null, Json::from));
    canonical_json(&Json::Object(o).to_value()).into_bytes()
}

/// The HMAC of `blob` under `secret` (HMAC accepts a key of any length, so `None` never
/// happens in practice).
fn mac(secret: &str, blob: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).ok()?;
    mac.update(blob);
    Some(mac)
}

/// The lowercase hex signature of `blob` under `secret` (what a client sends).
pub fn sign(secret: &str, blob: &[u8]) -> String {
    mac(secret, blob)
        .and_then(|m| <[u8; 32]>::try_from(m.finalize().into_bytes().as_slice()).ok())
        .map(|digest| ContentId::from_digest(&digest).hex().to_owned())
        .unwrap_or_default()
}

/// Whether `signature` (whitespace trimmed) is exactly the lowercase hex signature of `blob`,
/// compared in constant time.
pub fn signature_matches(secret: &str, blob: &[u8], signature: &str) -> bool {
    // An HMAC-SHA256 is a 32-byte digest, so the one check of a lowercase hex digest reads it.
    let Ok(digest) = ContentId::from_lowercase_hex(signature.trim()) else {
        return false;
    };
    mac(secret, blob).is_some_and(|m| m.verify_slice(&digest.digest()).is_ok())
}

/// The checks of one verification, in the original's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub signature_valid: bool,
    pub expired: bool,
}

impl Checked {
    /// `expired` and a bad signature refuse; otherwise the nonce decides.
    pub fn reason(&self) -> Option<&'static str> {
        if self.expired {
            Some("expired")
        } else if !self.signature_valid {
            Some("invalid_signature")
        } else {
            None
        }
    }
}

/// Expiry and signature of `envelope` over `payload` under `secret` at `now`.
pub fn check(secret: &str, payload: &Json, envelope: &Envelope, now: OffsetDateTime) -> Checked {
    let expired = envelope
        .expires_at
        .as_deref()
        .and_then(parse_iso)
        .is_some_and(|at| now > at);
    let blob = signing_blob(
        payload,
        &envelope.key_id,
        &envelope.nonce,
        envelope.expires_at.as_deref(),
    );
    Checked {
        signature_valid: signature_matches(secret, &blob, &envelope.signature),
        expired,
    }
}

/// A verification's answer (the original's `verify_signed_payload` dict).
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    pub envelope: Envelope,
    pub reason: String,
    pub signature_valid: bool,
    pub expired: bool,
    pub replay_detected: bool,
    pub nonce_consumed: bool,
    pub failure_count: u64,
    pub committed_files: Vec<String>,
    /// Refused before any check: the caller failed too often lately.
    pub throttled: bool,
}

impl Verification {
    pub fn valid(&self) -> bool {
        self.reason == "ok"
    }

    /// The dict in the original's key order (a throttled answer has no `consume_nonce`).
    pub fn to_json(&self) -> JsonObject {
        let e = &self.envelope;
        let mut o = JsonObject::new();
        o.insert("valid", Json::Bool(self.valid()));
        o.insert("reason", Json::from(self.reason.as_str()));
        o.insert("algorithm", Json::from(e.algorithm.as_str()));
        o.insert("key_id", Json::from(e.key_id.as_str()));
        o.insert("nonce", Json::from(e.nonce.as_str()));
        o.insert(
            "expires_at",
            e.expires_at.as_deref().map_or(Json::Null, Json::from),
        );
        o.insert("signature_valid", Json::Bool(self.signature_valid));
        o.insert("expired", Json::Bool(self.expired));
        o.insert("replay_detected", Json::Bool(self.replay_detected));
        if !self.throttled {
            o.insert("consume_nonce", Json::Bool(e.consume_nonce));
        }
        o.insert("nonce_consumed", Json::Bool(self.nonce_consumed));
        o.insert("failure_count", Json::from(self.failure_count));
        o.insert(
            "committed_files",
            Json::Array(
                self.committed_files
                    .iter()
                    .map(|f| Json::from(f.as_str()))
                    .collect(),
            ),
        );
        o
    }

    /// The answer given to a caller over its failure limit.
    pub fn throttled(envelope: Envelope, failure_count: u64) -> Verification {
        Verification {
            envelope,
            reason: "verification_throttled".to_owned(),
            signature_valid: false,
            expired: false,
            replay_detected: false,
            nonce_consumed: false,
            failure_count,
            committed_files: Vec::new(),
            throttled: true,
        }
    }
}

/// A signing key as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKey {
    pub key_id: String,
    pub algorithm: String,
    pub status: String,
    pub created_at: String,
    pub rotated_at: String,
    pub retired_at: Option<String>,
    pub secret: String,
    pub secret_sha256: String,
    pub active: bool,
}

/// A validated rotation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    pub key_id: Option<String>,
    pub secret: Option<String>,
    pub activate: bool,
    pub retire_previous: bool,
    pub return_secret: bool,
}

impl Rotation {
    pub fn from_coerced(value: &Json) -> Rotation {
        let text = |key: &str| value.get(key).and_then(Json::as_str).map(str::to_owned);
        let flag = |key: &str, default: bool| match value.get(key) {
            Some(Json::Bool(b)) => *b,
            _ => default,
        };
        Rotation {
            key_id: text("key_id").filter(|k| !k.is_empty()),
            secret: text("secret").filter(|s| !s.is_empty()),
            activate: flag("activate", true),
            retire_previous: flag("retire_previous", false),
            return_secret: flag("return_secret", false),
        }
    }
}

/// The key a rotation stores: `previous` is the row with the same id, if any (its
/// `created_at` stays).
pub fn rotated_key(
    rotation: &Rotation,
    key_id: &str,
    secret: &str,
    previous: Option<&SigningKey>,
    now: &str,
) -> SigningKey {
    SigningKey {
        key_id: key_id.to_owned(),
        algorithm: ALGORITHM.to_owned(),
        status: if rotation.activate {
            "active"
        } else {
            "staged"
        }
        .to_owned(),
        created_at: previous.map_or_else(|| now.to_owned(), |p| p.created_at.clone()),
        rotated_at: now.to_owned(),
        retired_at: None,
        secret: secret.to_owned(),
        secret_sha256: super::json::sha256_hex(secret.as_bytes()),
        active: rotation.activate,
    }
}

/// `{ok, active_key_id, key:{key_id, algorithm, status, created_at, rotated_at, storage_mode
/// [, secret]}, committed, latest_commit}`. Noema keeps secrets in its database, which the
/// original calls the `external` storage mode (outside the repository).
pub fn rotated_body(
    key: &SigningKey,
    active_key_id: Option<&str>,
    return_secret: bool,
    latest_commit: &str,
) -> Json {
    let mut view = JsonObject::new();
    view.insert("key_id", Json::from(key.key_id.as_str()));
    view.insert("algorithm", Json::from(key.algorithm.as_str()));
    view.insert("status", Json::from(key.status.as_str()));
    view.insert("created_at", Json::from(key.created_at.as_str()));
    view.insert("rotated_at", Json::from(key.rotated_at.as_str()));
    view.insert("storage_mode", Json::from("external"));
    if return_secret {
        view.insert("secret", Json::from(key.secret.as_str()));
    }
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert(
        "active_key_id",
        active_key_id.map_or(Json::Null, Json::from),
    );
    o.insert("key", Json::Object(view));
    o.insert("committed", Json::Bool(true));
    o.insert("latest_commit", Json::from(latest_commit));
    Json::Object(o)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Signatures computed by the original (`_hmac_sha256(secret, _message_signing_blob(…))`,
    /// CogniRelay 1.4.15) for the same inputs, non-ASCII text included.
    #[test]
    fn the_signed_bytes_and_signature_are_the_originals() {
        let payload = Json::parse(
            r#"{"thread_id":"t-1","sender":"peer-1","recipient":"peer-2","subject":"Grüße ✓","body_md":"naïve — 日本","priority":"normal","attachments":[],"idempotency_key":null,"delivery":{"requires_ack":true,"ack_timeout_seconds":300,"max_retries":5},"score":1.0}"#.as_bytes(),
        )
        .unwrap();
        let blob = signing_blob(&payload, "key-1", "n-1", Some("2030-01-01T00:00:00Z"));
        assert_eq!(
            String::from_utf8(blob.clone()).unwrap(),
            r#"{"expires_at":"2030-01-01T00:00:00Z","key_id":"key-1","nonce":"n-1","payload":{"attachments":[],"body_md":"naïve — 日本","delivery":{"ack_timeout_seconds":300,"max_retries":5,"requires_ack":true},"idempotency_key":null,"priority":"normal","recipient":"peer-2","score":1.0,"sender":"peer-1","subject":"Grüße ✓","thread_id":"t-1"}}"#
        );
        assert_eq!(sign("s3cret", &blob), ORACLE_SIGNATURE);
        assert!(signature_matches(
            "s3cret",
            &blob,
            &format!(" {ORACLE_SIGNATURE}\n")
        ));
        assert!(!signature_matches(
            "s3cret",
            &blob,
            &ORACLE_SIGNATURE.to_uppercase()
        ));
        assert!(!signature_matches("other", &blob, ORACLE_SIGNATURE));
    }

    const ORACLE_SIGNATURE: &str =
        "2bbb64b4064815ce6abfab5160e831614a09599facf591d8ffc3840dacfe5a78";

    #[test]
    fn expiry_is_checked_before_the_signature() {
        let payload = Json::parse(br#"{"a":1}"#).unwrap();
        let envelope = |expires: Option<&str>, signature: &str| Envelope {
            key_id: "k".into(),
            nonce: "n".into(),
            expires_at: expires.map(str::to_owned),
            signature: signature.into(),
            algorithm: ALGORITHM.into(),
            consume_nonce: true,
        };
        let now = time::macros::datetime!(2026-11-26 02:00:00 UTC);
        let good = sign(
            "s",
            &signing_blob(&payload, "k", "n", Some("2026-11-26T02:00:01Z")),
        );
        let fresh = check(
            "s",
            &payload,
            &envelope(Some("2026-11-26T02:00:01Z"), &good),
            now,
        );
        assert_eq!(fresh.reason(), None);
        let late = check(
            "s",
            &payload,
            &envelope(Some("2026-11-26T01:59:59Z"), "x"),
            now,
        );
        assert_eq!(late.reason(), Some("expired"));
        let forged = check("s", &payload, &envelope(None, &good), now);
        assert_eq!(forged.reason(), Some("invalid_signature"));
    }
}

//! Agent references: signed, immutable pointers from an agent to a canonical object,
//! validated as open-cognition does (`shared/compat/open-cognition.md` §5).

use noema_core::content_id::ContentId;
use noema_core::keys::{PublicKey, Signature, reference_signing_message, verify};
use noema_core::time::{parse_go_rfc3339, utc_whole_seconds};
use serde_json::Value;
use time::OffsetDateTime;

use super::canonical::{Invalid, SCHEMA_VERSION};

/// Hint attached to missing or malformed signatures and keys (open-cognition's text).
pub const SIGNING_HINT: &str = "sign the string '{id}:{canonical_object_id}:{agent_id}:{created_at}' \
     with your Ed25519 key and include 'signature' (base64 64-byte sig) and 'public_key' \
     (base64 raw 32-byte key) in the request";

pub fn mismatch_hint(agent_id: &str) -> String {
    format!(
        "agent {agent_id:?} is already registered with a different public key; resubmit with \
         the original key or ask the operator to update agent_keys"
    )
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceSubmission {
    pub schema_version: String,
    pub id: String,
    pub canonical_object_id: String,
    pub agent_id: String,
    pub created_at: String,
    pub context: String,
    pub relevance: Option<f64>,
    pub trust_weight: Option<f64>,
    pub time_horizon: String,
    pub signature: String,
    pub public_key: String,
    pub metadata: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentReference {
    pub id: String,
    pub canonical_object_id: String,
    pub agent_id: String,
    pub created_at: OffsetDateTime,
    /// The created_at text exactly as signed.
    pub signed_created_at: String,
    pub context: String,
    pub relevance: Option<f64>,
    pub trust_weight: Option<f64>,
    pub time_horizon: String,
    pub signature: String,
    pub metadata: Option<Value>,
    pub recorded_at: OffsetDateTime,
}

/// A validation failure, with open-cognition's hint where it gives one.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub message: String,
    pub hint: Option<String>,
}

impl From<Invalid> for Refusal {
    fn from(invalid: Invalid) -> Self {
        Refusal {
            message: invalid.0,
            hint: None,
        }
    }
}

fn refuse(message: &str) -> Refusal {
    Refusal {
        message: message.to_owned(),
        hint: None,
    }
}

fn refuse_with_hint(message: &str) -> Refusal {
    Refusal {
        message: message.to_owned(),
        hint: Some(SIGNING_HINT.to_owned()),
    }
}

/// `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`
pub fn is_uuid_v4(text: &str) -> bool {
    let b = text.as_bytes();
    let hex = |c: &u8| matches!(c, b'0'..=b'9' | b'a'..=b'f');
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            14 => *c == b'4',
            19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
            _ => hex(c),
        })
}

/// Relevance and trust weight are stored with three decimals (open-cognition's NUMERIC(4,3)).
fn three_decimals(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// Checks 2–9 of open-cognition's order (decode is the caller's; the canonical object's
/// existence is checked next by the caller, then [`check_signature`]).
pub fn validate_fields(s: &ReferenceSubmission) -> Result<OffsetDateTime, Refusal> {
    if s.schema_version != SCHEMA_VERSION {
        return Err(refuse("schema_version must be '0.1.0'"));
    }
    if !is_uuid_v4(&s.id) {
        return Err(refuse("id must be a valid UUID v4"));
    }
    if !ContentId::is_valid(&s.canonical_object_id) {
        return Err(refuse("canonical_object_id must match sha256:[0-9a-f]{64}"));
    }
    if s.agent_id.is_empty() {
        return Err(refuse("agent_id is required"));
    }
    if s.context.is_empty() {
        return Err(refuse("context is required"));
    }
    let created_at = parse_go_rfc3339(&s.created_at)
        .ok_or_else(|| refuse("created_at must be a valid RFC3339 timestamp"))?;
    if s.relevance.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
        return Err(refuse("relevance must be between 0.0 and 1.0"));
    }
    if s.trust_weight.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
        return Err(refuse("trust_weight must be between 0.0 and 1.0"));
    }
    if let Some(metadata) = &s.metadata
        && !metadata.is_object()
    {
        return Err(refuse("metadata must be a JSON object"));
    }
    Ok(created_at)
}

/// Checks 11–15: signature and key present, well-formed, and the signature valid over
/// `{id}:{canonical_object_id}:{agent_id}:{created_at}` (the strings as submitted).
pub fn check_signature(s: &ReferenceSubmission) -> Result<PublicKey, Refusal> {
    if s.signature.is_empty() {
        return Err(refuse_with_hint("signature is required"));
    }
    if s.public_key.is_empty() {
        return Err(refuse_with_hint("public_key is required"));
    }
    let key = PublicKey::from_base64(&s.public_key).map_err(|_| {
        refuse_with_hint("public_key must be a base64-encoded 32-byte Ed25519 public key")
    })?;
    let signature = Signature::from_base64(&s.signature).map_err(|_| {
        refuse_with_hint("signature must be a base64-encoded 64-byte Ed25519 signature")
    })?;
    let message =
        reference_signing_message(&s.id, &s.canonical_object_id, &s.agent_id, &s.created_at);
    if !verify(&key, message.as_bytes(), &signature) {
        return Err(refuse("signature verification failed"));
    }
    Ok(key)
}

/// The reference to store, from a submission that passed every check.
pub fn accepted(
    s: ReferenceSubmission,
    created_at: OffsetDateTime,
    recorded_at: OffsetDateTime,
) -> AgentReference {
    AgentReference {
        id: s.id,
        canonical_object_id: s.canonical_object_id,
        agent_id: s.agent_id,
        created_at: utc_whole_seconds(created_at),
        signed_created_at: s.created_at,
        context: s.context,
        relevance: s.relevance.map(three_decimals),
        trust_weight: s.trust_weight.map(three_decimals),
        time_horizon: s.time_horizon,
        signature: s.signature,
        metadata: s
            .metadata
            .filter(|m| m.as_object().is_some_and(|o| !o.is_empty())),
        recorded_at,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use noema_core::keys::SigningKeyPair;

    fn signed() -> ReferenceSubmission {
        let pair = SigningKeyPair::from_seed(&[9; 32]);
        let mut s = ReferenceSubmission {
            schema_version: "0.1.0".into(),
            id: "0b0f5a8e-8d4c-4d2a-9b7e-3f1c2a4b5c6d".into(),
            canonical_object_id: ContentId::from_digest(&[0xaa; 32]).into_string(),
            agent_id: "agent:with:colons".into(),
            created_at: "2026-04-14T18:20:43Z".into(),
            context: "seen".into(),
            relevance: Some(1.0),
            trust_weight: Some(0.12345),
            time_horizon: "P7D".into(),
            signature: String::new(),
            public_key: pair.public_key().to_base64(),
            metadata: None,
        };
        let message =
            reference_signing_message(&s.id, &s.canonical_object_id, &s.agent_id, &s.created_at);
        s.signature = pair.sign(message.as_bytes()).to_base64();
        s
    }

    #[test]
    fn a_signed_reference_passes_and_rounds_weights() {
        let s = signed();
        let at = validate_fields(&s).unwrap();
        check_signature(&s).unwrap();
        let r = accepted(s, at, OffsetDateTime::UNIX_EPOCH);
        assert_eq!(r.trust_weight, Some(0.123));
        assert_eq!(r.signed_created_at, "2026-04-14T18:20:43Z");
    }

    #[test]
    fn field_checks_use_open_cognitions_messages() {
        type Case = (fn(&mut ReferenceSubmission), &'static str);
        let cases: Vec<Case> = vec![
            (
                |s| s.schema_version = "x".into(),
                "schema_version must be '0.1.0'",
            ),
            (|s| s.id = s.id.to_uppercase(), "id must be a valid UUID v4"),
            (
                |s| s.id = "0b0f5a8e-8d4c-1d2a-9b7e-3f1c2a4b5c6d".into(),
                "id must be a valid UUID v4",
            ),
            (
                |s| s.canonical_object_id = "sha256:x".into(),
                "canonical_object_id must match sha256:[0-9a-f]{64}",
            ),
            (|s| s.agent_id.clear(), "agent_id is required"),
            (|s| s.context.clear(), "context is required"),
            (
                |s| s.created_at = "now".into(),
                "created_at must be a valid RFC3339 timestamp",
            ),
            (
                |s| s.relevance = Some(1.01),
                "relevance must be between 0.0 and 1.0",
            ),
            (
                |s| s.trust_weight = Some(-0.1),
                "trust_weight must be between 0.0 and 1.0",
            ),
        ];
        for (mutate, message) in cases {
            let mut s = signed();
            mutate(&mut s);
            assert_eq!(validate_fields(&s).unwrap_err().message, message);
        }
    }

    #[test]
    fn signature_checks_carry_the_hint_except_verification() {
        let mut s = signed();
        s.signature.clear();
        let r = check_signature(&s).unwrap_err();
        assert_eq!(r.message, "signature is required");
        assert_eq!(r.hint.as_deref(), Some(SIGNING_HINT));

        let mut s = signed();
        s.public_key = "ed25519:".to_owned() + &s.public_key;
        assert_eq!(
            check_signature(&s).unwrap_err().message,
            "public_key must be a base64-encoded 32-byte Ed25519 public key"
        );

        let mut s = signed();
        s.context = "changed context is not signed".into();
        assert!(
            check_signature(&s).is_ok(),
            "context is not covered by the signature"
        );
        s.created_at = "2026-04-14T18:20:44Z".into();
        let r = check_signature(&s).unwrap_err();
        assert_eq!(r.message, "signature verification failed");
        assert_eq!(r.hint, None);
    }
}

//! Signing requests: one-time UUID nonces, the exact bytes an agent signs (MoltNet's
//! framing), expiry, and what a submitted signature does (compat/moltnet.md §4–5, §7).

use noema_core::keys::{self, PublicKey, Signature};
use time::{Duration, OffsetDateTime};

use crate::error::IdentityError;

/// How long a request waits for its signature (MoltNet's default).
pub const REQUEST_TTL: Duration = Duration::seconds(300);
/// Active pending requests an agent may hold at once (MoltNet's default).
pub const MAX_PENDING_PER_AGENT: u64 = 10;
pub const MAX_MESSAGE_CHARS: usize = 100_000;
pub const MAX_PURPOSE_CHARS: usize = 1_000;
pub const AGENT_ED25519: &str = "agent-ed25519";

/// MoltNet's texts for the two 409 problems of `POST …/sign`.
pub const EXPIRED_MESSAGE: &str = "This signing request has expired";
pub const ALREADY_COMPLETED_MESSAGE: &str =
    "A signature has already been submitted for this request";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    Pending,
    Completed,
    Expired,
}

impl RequestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Completed => "completed",
            RequestStatus::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Result<RequestStatus, IdentityError> {
        match text {
            "pending" => Ok(RequestStatus::Pending),
            "completed" => Ok(RequestStatus::Completed),
            "expired" => Ok(RequestStatus::Expired),
            other => Err(IdentityError::InvalidArgument(format!(
                "status {other:?} is not one of pending, completed, expired"
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningRequest {
    pub id: String,
    pub agent_id: String,
    pub message: String,
    pub nonce: String,
    /// The draft this request signs (the seed's prepare step), if any.
    pub entry_id: Option<String>,
    pub purpose: String,
    pub team_id: String,
    pub verification_method: String,
    pub status: RequestStatus,
    pub signature: Option<String>,
    pub valid: Option<bool>,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub completed_at: Option<OffsetDateTime>,
}

impl SigningRequest {
    /// The status as of `now`: a pending request past its expiry is expired.
    pub fn effective_status(&self, now: OffsetDateTime) -> RequestStatus {
        match self.status {
            RequestStatus::Pending if self.expires_at <= now => RequestStatus::Expired,
            other => other,
        }
    }

    /// The bytes the agent signs.
    pub fn signing_input(&self) -> Vec<u8> {
        keys::moltnet_signing_bytes(&self.message, &self.nonce)
    }
}

/// A fresh lowercase canonical UUID (v4).
pub fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub fn validate_message(message: &str) -> Result<(), IdentityError> {
    let chars = message.chars().count();
    if chars == 0 || chars > MAX_MESSAGE_CHARS {
        return Err(IdentityError::InvalidArgument(format!(
            "message must be 1-{MAX_MESSAGE_CHARS} characters (for an entry, its contentHash CID)"
        )));
    }
    Ok(())
}

pub fn validate_purpose(purpose: &str) -> Result<(), IdentityError> {
    if purpose.chars().count() > MAX_PURPOSE_CHARS {
        return Err(IdentityError::InvalidArgument(format!(
            "purpose must be at most {MAX_PURPOSE_CHARS} characters"
        )));
    }
    Ok(())
}

pub fn validate_method(method: &str) -> Result<String, IdentityError> {
    match method {
        "" | AGENT_ED25519 => Ok(AGENT_ED25519.to_owned()),
        "human-hardware-previewsign" => Err(IdentityError::InvalidArgument(
            "the delegated human-hardware-previewsign flow is not offered; use agent-ed25519"
                .into(),
        )),
        other => Err(IdentityError::InvalidArgument(format!(
            "verificationMethod {other:?} is not agent-ed25519"
        ))),
    }
}

/// A new pending request for `agent_id` over `message`.
pub fn new_request(
    agent_id: &str,
    message: String,
    entry_id: Option<String>,
    purpose: String,
    team_id: String,
    now: OffsetDateTime,
) -> SigningRequest {
    SigningRequest {
        id: new_uuid(),
        agent_id: agent_id.to_owned(),
        message,
        nonce: new_uuid(),
        entry_id,
        purpose,
        team_id,
        verification_method: AGENT_ED25519.to_owned(),
        status: RequestStatus::Pending,
        signature: None,
        valid: None,
        created_at: now,
        expires_at: now + REQUEST_TTL,
        completed_at: None,
    }
}

/// MoltNet's preconditions for a submission, in MoltNet's order (after ownership, which
/// the caller checks first as NOT_FOUND).
pub fn check_submittable(
    request: &SigningRequest,
    now: OffsetDateTime,
) -> Result<(), IdentityError> {
    if request.verification_method != AGENT_ED25519 {
        return Err(IdentityError::InvalidArgument(
            "This request requires the delegated claim/complete flow; sign only supports agent-ed25519"
                .into(),
        ));
    }
    match request.effective_status(now) {
        RequestStatus::Expired => Err(IdentityError::SigningRequestExpired),
        RequestStatus::Completed => Err(IdentityError::SigningRequestCompleted),
        RequestStatus::Pending => Ok(()),
    }
}

/// Parses a submitted signature strictly: 88 characters of standard padded base64.
pub fn parse_signature(text: &str) -> Result<Signature, IdentityError> {
    if text.is_empty() || text.len() > 88 {
        return Err(IdentityError::InvalidArgument(
            "signature must be the 64-byte Ed25519 signature in standard base64 (88 characters)"
                .into(),
        ));
    }
    Signature::from_base64(text)
        .map_err(|e| IdentityError::InvalidArgument(format!("signature: {e}")))
}

/// Whether `signature` (text as submitted) is valid for `request` under `key`. Never an
/// error: malformed signatures are simply invalid (MoltNet's verification rule).
pub fn verifies(request: &SigningRequest, key: &PublicKey, signature: &str) -> bool {
    match Signature::from_base64(signature) {
        Ok(sig) => keys::verify(key, &request.signing_input(), &sig),
        Err(_) => false,
    }
}

/// The error for a signature over an entry request that does not verify.
pub fn refused_signature(agent_id: &str, key: &PublicKey) -> IdentityError {
    IdentityError::FailedPrecondition(format!(
        "signature refused: it does not verify against agent {agent_id:?}'s registered key \
         (fingerprint {}) over this request's signingInput; sign the exact signingInput bytes \
         of this request (its nonce is single-use) with the agent's registered key",
        key.fingerprint()
    ))
}

/// Whether `request` can sign a new entry of `caller` whose CID is `content_hash`
/// (MoltNet's create-signed flow), in MoltNet's order.
pub fn check_usable_for_entry(
    request: &SigningRequest,
    caller: &str,
    content_hash: &str,
    now: OffsetDateTime,
) -> Result<(), IdentityError> {
    if request.agent_id != caller {
        return Err(IdentityError::PermissionDenied(
            "Signing request belongs to a different agent".into(),
        ));
    }
    let status = request.effective_status(now);
    if status != RequestStatus::Completed {
        return Err(IdentityError::InvalidArgument(format!(
            "Signing request is {}, expected completed",
            status.as_str()
        )));
    }
    if request.valid != Some(true) {
        return Err(IdentityError::InvalidArgument(
            "Signing request signature was not verified as valid".into(),
        ));
    }
    if request.message != content_hash {
        return Err(IdentityError::InvalidArgument(
            "Signing request message does not match content hash".into(),
        ));
    }
    Ok(())
}

/// A signature submitted for a request: at most the 88 characters of standard base64.
pub fn check_submitted_length(signature: &str) -> Result<(), IdentityError> {
    if signature.is_empty() || signature.chars().count() > 88 {
        return Err(IdentityError::InvalidArgument(
            "signature must be 1-88 characters: the 64-byte Ed25519 signature in standard base64"
                .into(),
        ));
    }
    Ok(())
}

/// A signature presented for verification: at most 88 characters of standard base64
/// (characters, as MoltNet's schema counts them, not bytes).
pub fn check_presented_length(signature: &str) -> Result<(), IdentityError> {
    if signature.is_empty() || signature.chars().count() > 88 {
        return Err(IdentityError::InvalidArgument(
            "signature must be 1-88 characters of standard base64".into(),
        ));
    }
    Ok(())
}

/// The refusal of a new request while the agent already holds the most pending ones;
/// `wait` is the seconds until the earliest of them expires.
pub fn limit_reached(wait: i64) -> IdentityError {
    IdentityError::SigningRequestLimit {
        max_pending: MAX_PENDING_PER_AGENT,
        retry_after_secs: wait,
    }
}

/// A draft can be signed only with the CID it had when the request was prepared.
pub fn check_entry_unchanged(
    request: &SigningRequest,
    entry: &crate::domain::entry::Entry,
) -> Result<(), IdentityError> {
    if entry.is_signed() || entry.content_hash != request.message {
        return Err(IdentityError::FailedPrecondition(
            "the entry changed since the signing request was prepared (edited or signed); \
             prepare a new signing request for its current contentHash"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use noema_core::keys::SigningKeyPair;

    #[test]
    fn requests_carry_uuid_nonces_and_expire() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let r = new_request("a", "m".into(), None, String::new(), String::new(), now);
        assert_eq!(r.nonce.len(), 36);
        assert_eq!(r.signing_input().len(), 86);
        assert_ne!(
            r.nonce,
            new_request("a", "m".into(), None, String::new(), String::new(), now).nonce
        );
        assert_eq!(r.effective_status(now), RequestStatus::Pending);
        assert_eq!(
            r.effective_status(now + REQUEST_TTL),
            RequestStatus::Expired
        );
        assert!(check_submittable(&r, now).is_ok());
        let err = check_submittable(&r, now + REQUEST_TTL).unwrap_err();
        assert_eq!(err.to_string(), EXPIRED_MESSAGE);
        let mut done = r.clone();
        done.status = RequestStatus::Completed;
        assert_eq!(
            check_submittable(&done, now).unwrap_err().to_string(),
            ALREADY_COMPLETED_MESSAGE
        );
    }

    #[test]
    fn only_the_right_key_over_the_right_bytes_verifies() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let pair = SigningKeyPair::from_seed(&[1; 32]);
        let other = SigningKeyPair::from_seed(&[2; 32]);
        let r = new_request("a", "bafk".into(), None, String::new(), String::new(), now);
        let good = pair.sign(&r.signing_input()).to_base64();
        assert!(verifies(&r, &pair.public_key(), &good));
        assert!(!verifies(&r, &other.public_key(), &good));
        let by_other = other.sign(&r.signing_input()).to_base64();
        assert!(!verifies(&r, &pair.public_key(), &by_other));
        // Signing the raw message instead of the framed bytes is not enough.
        let raw = pair.sign(b"bafk").to_base64();
        assert!(!verifies(&r, &pair.public_key(), &raw));
        assert!(!verifies(&r, &pair.public_key(), "not base64"));
        assert!(parse_signature("short").is_err());
        assert!(parse_signature(&good).is_ok());
    }

    #[test]
    fn a_request_signs_an_entry_only_when_completed_valid_and_over_its_hash() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let mut r = new_request("a", "bafk".into(), None, String::new(), String::new(), now);
        let err = |r: &SigningRequest, caller: &str| {
            check_usable_for_entry(r, caller, "bafk", now)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err(&r, "b"), "Signing request belongs to a different agent");
        assert_eq!(
            err(&r, "a"),
            "Signing request is pending, expected completed"
        );
        r.status = RequestStatus::Completed;
        assert_eq!(
            err(&r, "a"),
            "Signing request signature was not verified as valid"
        );
        r.valid = Some(true);
        assert!(check_usable_for_entry(&r, "a", "bafk", now).is_ok());
        assert_eq!(
            check_usable_for_entry(&r, "a", "bafx", now)
                .unwrap_err()
                .to_string(),
            "Signing request message does not match content hash"
        );
        assert!(
            limit_reached(7)
                .to_string()
                .ends_with("retry after 7 seconds")
        );
    }
}

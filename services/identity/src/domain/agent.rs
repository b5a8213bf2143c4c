//! Agents and keys: trust on first use, and rotation with proof of possession.

use noema_core::keys::{self, PublicKey, Signature};
use time::OffsetDateTime;

use crate::error::IdentityError;

/// An agent and its current key, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub agent_id: String,
    pub public_key: PublicKey,
    pub first_object_id: String,
    pub registered_at: OffsetDateTime,
    pub key_version: u32,
    pub key_rotated_at: Option<OffsetDateTime>,
}

impl Agent {
    pub fn fingerprint(&self) -> String {
        self.public_key.fingerprint()
    }
}

/// Longest agent id accepted; ids are free text (they may contain `:`).
pub const MAX_AGENT_ID_LEN: usize = 256;

pub fn validate_agent_id(agent_id: &str) -> Result<(), IdentityError> {
    if agent_id.trim().is_empty() {
        return Err(IdentityError::InvalidArgument(
            "agent_id is required".into(),
        ));
    }
    if agent_id.len() > MAX_AGENT_ID_LEN {
        return Err(IdentityError::InvalidArgument(format!(
            "agent_id must be at most {MAX_AGENT_ID_LEN} bytes"
        )));
    }
    if agent_id.contains('\0') {
        return Err(IdentityError::InvalidArgument(
            "agent_id must not contain NUL characters".into(),
        ));
    }
    Ok(())
}

pub fn parse_public_key(field: &str, text: &str) -> Result<PublicKey, IdentityError> {
    if text.is_empty() {
        return Err(IdentityError::InvalidArgument(format!(
            "{field} is required"
        )));
    }
    PublicKey::parse(text).map_err(|e| IdentityError::InvalidArgument(format!("{field}: {e}")))
}

pub fn parse_signature(field: &str, text: &str) -> Result<Signature, IdentityError> {
    if text.is_empty() {
        return Err(IdentityError::InvalidArgument(format!(
            "{field} is required"
        )));
    }
    Signature::from_base64(text)
        .map_err(|e| IdentityError::InvalidArgument(format!("{field}: {e}")))
}

/// What registering `presented` for an agent that currently has `existing` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// First key seen for the agent.
    Create,
    /// The same key again: accepted, nothing changes.
    AlreadyRegistered,
    /// A different key: refused.
    Mismatch,
}

pub fn registration(existing: Option<&PublicKey>, presented: &PublicKey) -> Registration {
    match existing {
        None => Registration::Create,
        Some(key) if key == presented => Registration::AlreadyRegistered,
        Some(_) => Registration::Mismatch,
    }
}

/// Checks the proof for rotating `agent` to `new_key`: a signature by the current key
/// over [`keys::key_rotation_message`].
pub fn check_rotation_proof(
    agent: &Agent,
    new_key: &PublicKey,
    proof: &Signature,
) -> Result<(), IdentityError> {
    if &agent.public_key == new_key {
        return Err(IdentityError::FailedPrecondition(
            "new_public_key is already the agent's current key".into(),
        ));
    }
    let message = keys::key_rotation_message(&agent.agent_id, &agent.public_key, new_key)
        .map_err(|e| IdentityError::Corrupt(e.to_string()))?;
    if keys::verify(&agent.public_key, &message, proof) {
        Ok(())
    } else {
        Err(IdentityError::FailedPrecondition(
            "proof_signature is not a valid signature by the agent's current key over the \
             key-rotation message"
                .into(),
        ))
    }
}

/// How a presented key relates to the agent's registered one, for `Verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStatus {
    Unregistered,
    Registered,
    Mismatch,
}

/// The key to verify a signature of `agent_id` against: the presented one when given (and
/// how it relates to the registered one), else the registered one.
pub fn verification_key(
    agent_id: &str,
    presented: Option<PublicKey>,
    registered: Option<PublicKey>,
) -> Result<(PublicKey, KeyStatus), IdentityError> {
    match (presented, registered) {
        (Some(p), None) => Ok((p, KeyStatus::Unregistered)),
        (Some(p), Some(r)) if p == r => Ok((p, KeyStatus::Registered)),
        (Some(p), Some(_)) => Ok((p, KeyStatus::Mismatch)),
        (None, Some(r)) => Ok((r, KeyStatus::Registered)),
        (None, None) => Err(IdentityError::NotFound(format!(
            "agent {agent_id:?} has no registered key; pass public_key to verify against a presented key"
        ))),
    }
}

/// The error for an agent id that is not registered.
pub fn not_registered(agent_id: &str) -> IdentityError {
    IdentityError::NotFound(format!("agent {agent_id:?} is not registered"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use noema_core::keys::SigningKeyPair;

    fn agent(pair: &SigningKeyPair) -> Agent {
        Agent {
            agent_id: "agent:a".into(),
            public_key: pair.public_key(),
            first_object_id: String::new(),
            registered_at: OffsetDateTime::UNIX_EPOCH,
            key_version: 1,
            key_rotated_at: None,
        }
    }

    #[test]
    fn tofu_decisions() {
        let a = PublicKey::from_bytes([1; 32]);
        let b = PublicKey::from_bytes([2; 32]);
        assert_eq!(registration(None, &a), Registration::Create);
        assert_eq!(registration(Some(&a), &a), Registration::AlreadyRegistered);
        assert_eq!(registration(Some(&a), &b), Registration::Mismatch);
    }

    #[test]
    fn rotation_needs_a_signature_by_the_current_key() {
        let current = SigningKeyPair::from_seed(&[7; 32]);
        let next = SigningKeyPair::from_seed(&[8; 32]);
        let agent = agent(&current);
        let message =
            keys::key_rotation_message("agent:a", &current.public_key(), &next.public_key())
                .unwrap();
        assert!(check_rotation_proof(&agent, &next.public_key(), &current.sign(&message)).is_ok());
        // Signed by the new key instead: refused.
        assert!(check_rotation_proof(&agent, &next.public_key(), &next.sign(&message)).is_err());
        // A proof for another target key: refused.
        let other = SigningKeyPair::from_seed(&[9; 32]);
        assert!(
            check_rotation_proof(&agent, &other.public_key(), &current.sign(&message)).is_err()
        );
    }

    #[test]
    fn agent_ids_are_validated() {
        assert!(validate_agent_id("").is_err());
        assert!(validate_agent_id(&"x".repeat(300)).is_err());
        assert!(validate_agent_id("agent:with:colons").is_ok());
    }
}

//! Agents: trust-first-use registration, lookups, key rotation with proof of possession,
//! signature verification for other services.

use noema_core::keys::{self, PublicKey};
use time::OffsetDateTime;

use super::Identity;
use crate::domain::agent::{self, Agent, KeyStatus};
use crate::error::IdentityError;

/// The answer to a signature check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub valid: bool,
    pub key_status: KeyStatus,
    pub fingerprint: String,
}

impl Identity {
    /// Registers `public_key` for `agent_id` on first use; the same key again is a no-op
    /// (`created` false), another key a mismatch.
    pub async fn register_agent(
        &self,
        actor: &str,
        agent_id: &str,
        public_key: &str,
        first_object_id: &str,
    ) -> Result<(Agent, bool), IdentityError> {
        agent::validate_agent_id(agent_id)?;
        let key = agent::parse_public_key("public_key", public_key)?;
        self.store
            .register_agent(
                agent_id,
                &key,
                first_object_id,
                actor,
                OffsetDateTime::now_utc(),
            )
            .await
    }

    pub async fn get_agent(&self, agent_id: &str) -> Result<Agent, IdentityError> {
        agent::validate_agent_id(agent_id)?;
        self.store
            .get_agent(agent_id)
            .await?
            .ok_or_else(|| agent::not_registered(agent_id))
    }

    pub async fn get_agent_by_fingerprint(
        &self,
        fingerprint: &str,
    ) -> Result<Agent, IdentityError> {
        let fingerprint = keys::parse_fingerprint(fingerprint)
            .map_err(|e| IdentityError::InvalidArgument(format!("fingerprint: {e}")))?;
        self.store
            .get_agent_by_fingerprint(&fingerprint)
            .await?
            .ok_or_else(|| {
                IdentityError::NotFound(format!("no agent has fingerprint {fingerprint}"))
            })
    }

    /// Agents by id, after `after`.
    pub async fn list_agents(&self, after: &str, limit: u32) -> Result<Vec<Agent>, IdentityError> {
        self.store.list_agents(after, limit).await
    }

    /// Replaces the agent's key with `new_public_key`, proven by `proof_signature` (the
    /// current key's signature over the new one).
    pub async fn rotate_key(
        &self,
        actor: &str,
        agent_id: &str,
        new_public_key: &str,
        proof_signature: &str,
    ) -> Result<Agent, IdentityError> {
        agent::validate_agent_id(agent_id)?;
        let new_key = agent::parse_public_key("new_public_key", new_public_key)?;
        let proof = agent::parse_signature("proof_signature", proof_signature)?;
        let current = self
            .store
            .get_agent(agent_id)
            .await?
            .ok_or_else(|| agent::not_registered(agent_id))?;
        agent::check_rotation_proof(&current, &new_key, &proof)?;
        self.store
            .rotate_key(
                agent_id,
                current.key_version,
                &new_key,
                &proof,
                actor,
                OffsetDateTime::now_utc(),
            )
            .await
    }

    /// Checks `signature` of `message` by `agent_id`, against the presented key when given
    /// (reporting how it relates to the registered one), else the registered key.
    pub async fn verify(
        &self,
        agent_id: &str,
        public_key: &str,
        message: &[u8],
        signature: &str,
    ) -> Result<Verification, IdentityError> {
        agent::validate_agent_id(agent_id)?;
        let signature = agent::parse_signature("signature", signature)?;
        let registered = self.store.get_agent(agent_id).await?.map(|a| a.public_key);
        let presented: Option<PublicKey> = if public_key.is_empty() {
            None
        } else {
            Some(agent::parse_public_key("public_key", public_key)?)
        };
        let (key, key_status) = agent::verification_key(agent_id, presented, registered)?;
        Ok(Verification {
            valid: keys::verify(&key, message, &signature),
            key_status,
            fingerprint: key.fingerprint(),
        })
    }

    /// The agent a token acts as.
    pub async fn caller_agent(&self, peer_id: &str) -> Result<Agent, IdentityError> {
        self.store.get_agent(peer_id).await?.ok_or_else(|| {
            IdentityError::NotFound(format!(
                "the token acts as {peer_id:?}, which is not a registered agent; issue a token \
                 whose peer_id is a registered agent id"
            ))
        })
    }

    /// The registered key of `agent_id`, which signing needs.
    pub(super) async fn signer_key(&self, agent_id: &str) -> Result<PublicKey, IdentityError> {
        self.store
            .get_agent(agent_id)
            .await?
            .map(|a| a.public_key)
            .ok_or_else(|| {
                IdentityError::FailedPrecondition(format!(
                    "the token acts as {agent_id:?}, which is not a registered agent; register its \
                     Ed25519 key (RegisterAgent / POST /v1/agents) and use a token whose peer_id is \
                     that agent id"
                ))
            })
    }

    /// The key `agent_id` held with `fingerprint` (it may have rotated since).
    pub(super) async fn key_with_fingerprint(
        &self,
        agent_id: &str,
        fingerprint: &str,
    ) -> Result<Option<PublicKey>, IdentityError> {
        if let Some(agent) = self.store.get_agent(agent_id).await?
            && (fingerprint.is_empty() || agent.public_key.fingerprint() == fingerprint)
        {
            return Ok(Some(agent.public_key));
        }
        Ok(self
            .store
            .historic_key(agent_id, fingerprint)
            .await?
            .and_then(|k| PublicKey::parse(&k).ok()))
    }
}

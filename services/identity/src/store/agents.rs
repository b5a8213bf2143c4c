//! Agents, their current key and the history of their keys.

use noema_core::keys::{PublicKey, Signature};
use noema_store::audit::AuditedTx;
use noema_store::sql::query;
use noema_store::with_pool;
use serde_json::json;
use time::OffsetDateTime;

use super::{IdentityStore, draft};
use crate::domain::agent::{Agent, Registration, registration};
use crate::error::IdentityError;

const AGENT_COLUMNS: &str =
    "agent_id, public_key, first_object_id, registered_at, key_version, key_rotated_at";

#[derive(sqlx::FromRow)]
struct AgentRow {
    agent_id: String,
    public_key: String,
    first_object_id: String,
    registered_at: OffsetDateTime,
    key_version: i32,
    key_rotated_at: Option<OffsetDateTime>,
}

impl TryFrom<AgentRow> for Agent {
    type Error = IdentityError;

    fn try_from(row: AgentRow) -> Result<Agent, IdentityError> {
        Ok(Agent {
            agent_id: row.agent_id,
            public_key: PublicKey::parse(&row.public_key)
                .map_err(|e| IdentityError::Corrupt(format!("stored key: {e}")))?,
            first_object_id: row.first_object_id,
            registered_at: row.registered_at,
            key_version: u32::try_from(row.key_version).unwrap_or(0),
            key_rotated_at: row.key_rotated_at,
        })
    }
}

impl IdentityStore {
    pub async fn get_agent(&self, agent_id: &str) -> Result<Option<Agent>, IdentityError> {
        let sql = format!("SELECT {AGENT_COLUMNS} FROM agents WHERE agent_id = $1");
        self.find::<AgentRow>(&sql, agent_id)
            .await?
            .map(Agent::try_from)
            .transpose()
    }

    pub async fn get_agent_by_fingerprint(
        &self,
        fingerprint: &str,
    ) -> Result<Option<Agent>, IdentityError> {
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE fingerprint = $1 \
             ORDER BY registered_at, agent_id LIMIT 1"
        );
        self.find::<AgentRow>(&sql, fingerprint)
            .await?
            .map(Agent::try_from)
            .transpose()
    }

    pub async fn list_agents(&self, after: &str, limit: u32) -> Result<Vec<Agent>, IdentityError> {
        let sql = format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE agent_id > $1 ORDER BY agent_id LIMIT $2"
        );
        let rows: Vec<AgentRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(Agent::try_from).collect()
    }

    /// The key `agent_id` held with `fingerprint` (current or rotated away).
    pub async fn historic_key(
        &self,
        agent_id: &str,
        fingerprint: &str,
    ) -> Result<Option<String>, IdentityError> {
        let sql = "SELECT public_key FROM agent_key_history WHERE agent_id = $1 \
                   AND fingerprint = $2 ORDER BY key_version DESC LIMIT 1";
        let row: Option<(String,)> = with_pool!(&self.db, |pool| {
            query(sql)
                .bind(agent_id)
                .bind(fingerprint)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(key,)| key))
    }

    /// Trust on first use. The INSERT decides the race: of two concurrent first
    /// registrations exactly one inserts; the other sees its row and compares.
    #[tracing::instrument(skip_all, fields(agent_id))]
    pub async fn register_agent(
        &self,
        agent_id: &str,
        key: &PublicKey,
        first_object_id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(Agent, bool), IdentityError> {
        let sql = format!(
            "INSERT INTO agents (agent_id, public_key, fingerprint, first_object_id, \
             registered_at, key_version) VALUES ($1, $2, $3, $4, $5, 1) \
             ON CONFLICT (agent_id) DO NOTHING RETURNING {AGENT_COLUMNS}"
        );
        let inserted: Option<AgentRow> = with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let inserted: Option<AgentRow> = query(&sql)
                .bind(agent_id)
                .bind(key.to_prefixed())
                .bind(key.fingerprint())
                .bind(first_object_id)
                .bind(now)
                .fetch_optional(tx.conn())
                .await?;
            if inserted.is_some() {
                query(
                    "INSERT INTO agent_key_history \
                     (agent_id, key_version, public_key, fingerprint, valid_from) \
                     VALUES ($1, 1, $2, $3, $4)",
                )
                .bind(agent_id)
                .bind(key.to_prefixed())
                .bind(key.fingerprint())
                .bind(now)
                .execute(tx.conn())
                .await?;
                let detail = json!({
                    "public_key": key.to_prefixed(),
                    "fingerprint": key.fingerprint(),
                    "first_object_id": first_object_id,
                });
                tx.record(draft(actor, "register_key", "agent", agent_id, detail), now);
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            inserted
        });
        if let Some(row) = inserted {
            return Ok((Agent::try_from(row)?, true));
        }
        let existing = self.get_agent(agent_id).await?.ok_or_else(|| {
            IdentityError::Corrupt(format!("agent {agent_id:?} vanished during registration"))
        })?;
        match registration(Some(&existing.public_key), key) {
            Registration::AlreadyRegistered => Ok((existing, false)),
            _ => Err(IdentityError::KeyMismatch {
                agent_id: agent_id.to_owned(),
            }),
        }
    }

    /// Replaces the key if it is still at `expected_version` (a concurrent rotation makes
    /// this fail rather than silently win).
    #[allow(clippy::too_many_arguments)]
    #[tracing::instrument(skip_all, fields(agent_id))]
    pub async fn rotate_key(
        &self,
        agent_id: &str,
        expected_version: u32,
        new_key: &PublicKey,
        proof: &Signature,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<Agent, IdentityError> {
        let sql = format!(
            "UPDATE agents SET public_key = $1, fingerprint = $2, key_version = key_version + 1, \
             key_rotated_at = $3 WHERE agent_id = $4 AND key_version = $5 RETURNING {AGENT_COLUMNS}"
        );
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let row: AgentRow = query(&sql)
                .bind(new_key.to_prefixed())
                .bind(new_key.fingerprint())
                .bind(now)
                .bind(agent_id)
                .bind(i32::try_from(expected_version).unwrap_or(i32::MAX))
                .fetch_optional(tx.conn())
                .await?
                .ok_or_else(|| {
                    IdentityError::FailedPrecondition(
                        "the agent's key changed while rotating; fetch it and sign a new proof"
                            .into(),
                    )
                })?;
            let agent = Agent::try_from(row)?;
            query(
                "INSERT INTO agent_key_history \
                 (agent_id, key_version, public_key, fingerprint, valid_from, proof_signature) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(agent_id)
            .bind(i32::try_from(agent.key_version).unwrap_or(i32::MAX))
            .bind(new_key.to_prefixed())
            .bind(new_key.fingerprint())
            .bind(now)
            .bind(proof.to_base64())
            .execute(tx.conn())
            .await?;
            let detail = json!({
                "new_public_key": new_key.to_prefixed(),
                "key_version": agent.key_version,
                "proof_signature": proof.to_base64(),
            });
            tx.record(draft(actor, "rotate_key", "agent", agent_id, detail), now);
            tx.commit().await?;
            Ok(agent)
        })
    }
}

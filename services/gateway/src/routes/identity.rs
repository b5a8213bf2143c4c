//! Agents over REST: Noema's agent routes and MoltNet's agent and caller-identity routes
//! (`shared/compat/moltnet.md`). CogniRelay's token routes are in `tokens`.

use axum::extract::Path;
use noema_core::time::proto::rfc3339_seconds;
use noema_proto::identity::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorStyle};
use crate::features;
use crate::forward::{Caller, JsonBody};
use crate::go_json::GoJson;
use crate::reply::{Answer, CreatedOrFound};
use crate::route::{Route, Routes, Verb};

const SERVICE: &str = "noema.identity.v1.IdentityService";
const NOEMA: Routes = Routes::new("identity", ErrorStyle::Noema, SERVICE);
const MOLTNET: Routes = Routes::new("identity", ErrorStyle::MoltNet, SERVICE);

/// An agent and its current key.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentBody {
    pub agent_id: String,
    pub fingerprint: String,
    /// The first canonical object the agent referenced, if registered by the ledger.
    pub first_object_id: String,
    pub key_rotated_at: Option<String>,
    pub key_version: u32,
    /// `ed25519:<base64>`.
    pub public_key: String,
    pub registered_at: Option<String>,
}

impl From<pb::Agent> for AgentBody {
    fn from(agent: pb::Agent) -> Self {
        AgentBody {
            key_rotated_at: agent.key_rotated_at.as_ref().map(rfc3339_seconds),
            registered_at: agent.registered_at.as_ref().map(rfc3339_seconds),
            agent_id: agent.agent_id,
            first_object_id: agent.first_object_id,
            fingerprint: agent.fingerprint,
            key_version: agent.key_version,
            public_key: agent.public_key,
        }
    }
}

/// An agent to register.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["agent_id", "public_key"]))]
pub struct AgentInput {
    #[serde(default)]
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^[^\x00]*[^\s\x00][^\x00]*$")
    )]
    pub agent_id: String,
    /// `ed25519:<base64>` of the 32-byte key.
    #[serde(default)]
    #[schemars(regex(pattern = r"^(ed25519:)?[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"))]
    pub public_key: String,
}

/// `POST /v1/agents`: 201 when registered now, 200 when already registered with this key,
/// 422 `public key mismatch` for another key.
async fn register_agent(
    caller: Caller,
    JsonBody(body): JsonBody<AgentInput>,
) -> Result<CreatedOrFound<AgentBody>, ApiError> {
    let request = pb::RegisterAgentRequest {
        agent_id: body.agent_id,
        public_key: body.public_key,
        first_object_id: String::new(),
    };
    let response = caller
        .identity()
        .register_agent(caller.request(request))
        .await?
        .into_inner();
    Ok(CreatedOrFound {
        created: response.created,
        body: response.agent.unwrap_or_default().into(),
    })
}

async fn get_agent(caller: Caller, Path(agent_id): Path<String>) -> Answer<AgentBody> {
    let agent = caller
        .identity()
        .get_agent(caller.request(pb::GetAgentRequest { agent_id }))
        .await?;
    Ok(GoJson(agent.into_inner().into()))
}

/// A new key, signed by the current one.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["new_public_key", "proof_signature"]))]
pub struct KeyRotationInput {
    #[serde(default)]
    #[schemars(regex(pattern = r"^(ed25519:)?[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"))]
    pub new_public_key: String,
    /// The current key's signature over the rotation message.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub proof_signature: String,
}

/// `POST /v1/agents/{agent_id}/rotate-key`: needs a signature by the current key.
async fn rotate_key(
    caller: Caller,
    Path(agent_id): Path<String>,
    JsonBody(body): JsonBody<KeyRotationInput>,
) -> Answer<AgentBody> {
    let request = pb::RotateKeyRequest {
        agent_id,
        new_public_key: body.new_public_key,
        proof_signature: body.proof_signature,
    };
    let agent = caller
        .identity()
        .rotate_key(caller.request(request))
        .await?;
    Ok(GoJson(agent.into_inner().into()))
}

/// MoltNet's public key lookup.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentKey {
    pub fingerprint: String,
    pub public_key: String,
}

/// MoltNet's `GET /agents/{fingerprint}` → `{fingerprint, publicKey}`.
async fn agent_by_fingerprint(caller: Caller, Path(fingerprint): Path<String>) -> Answer<AgentKey> {
    let request = pb::GetAgentByFingerprintRequest { fingerprint };
    let agent = caller
        .identity()
        .get_agent_by_fingerprint(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(AgentKey {
        fingerprint: agent.fingerprint,
        public_key: agent.public_key,
    }))
}

/// MoltNet's caller identity.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallerIdentity {
    pub fingerprint: String,
    pub identity_id: String,
    pub public_key: String,
}

/// MoltNet's `GET /crypto/identity` → `{fingerprint, identityId, publicKey}`.
async fn caller_identity(caller: Caller) -> Answer<CallerIdentity> {
    let agent = caller
        .identity()
        .get_caller_identity(caller.request(pb::GetCallerIdentityRequest {}))
        .await?
        .into_inner();
    Ok(GoJson(CallerIdentity {
        fingerprint: agent.fingerprint,
        identity_id: agent.agent_id,
        public_key: agent.public_key,
    }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    vec![
        NOEMA
            .route(
                Verb::Post,
                "/v1/agents",
                "registerAgent",
                "Register an agent's Ed25519 key (trust on first use): 201 new, 200 same key, 422 public key mismatch",
                register_agent,
            )
            .calls("RegisterAgent")
            .status(422, "public key mismatch: the agent has another key")
            .tool("agents_register", "Register an agent's Ed25519 key (trust on first use)")
            .feature(features::IDENTITY_AGENTS),
        NOEMA
            .route(
                Verb::Get,
                "/v1/agents/{agent_id}",
                "getAgent",
                "An agent and its current key",
                get_agent,
            )
            .calls("GetAgent")
            .status(404, "No such agent")
            .tool("agents_get", "An agent and its current key"),
        NOEMA
            .route(
                Verb::Post,
                "/v1/agents/{agent_id}/rotate-key",
                "rotateKey",
                "Replace an agent's key; needs a signature by the current key",
                rotate_key,
            )
            .calls("RotateKey")
            .status(400, "The proof is not a valid signature by the current key")
            .tool("agents_rotate_key", "Replace an agent's key; signed by the current key"),
        MOLTNET
            .route(
                Verb::Get,
                "/agents/{fingerprint}",
                "getAgentByFingerprint",
                "MoltNet: an agent's public key by fingerprint (public)",
                agent_by_fingerprint,
            )
            .public()
            .status(404, "No agent has this fingerprint")
            .tool("agent_lookup", "An agent's public key by its fingerprint")
            .param(
                "fingerprint",
                serde_json::json!({"type": "string", "pattern": "^[0-9A-Fa-f]{4}(-[0-9A-Fa-f]{4}){3}$"}),
            ),
        MOLTNET
            .route(
                Verb::Get,
                "/crypto/identity",
                "getCallerIdentity",
                "MoltNet: the caller's own identity and key",
                caller_identity,
            )
            .calls("GetCallerIdentity")
            .status(404, "The token's peer is not a registered agent")
            .tool("moltnet_whoami", "Your identity: agent id, public key, fingerprint"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;

    #[test]
    fn bodies_keep_their_field_order() {
        assert_sorted(&AgentBody::from(pb::Agent {
            registered_at: Some(prost_types::Timestamp::default()),
            ..Default::default()
        }));
        assert_sorted(&AgentKey {
            fingerprint: "f".into(),
            public_key: "k".into(),
        });
        assert_sorted(&CallerIdentity {
            fingerprint: "f".into(),
            identity_id: "i".into(),
            public_key: "k".into(),
        });
    }
}

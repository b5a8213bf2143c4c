//! `IdentityService`'s agent RPCs.

use noema_proto::common::v1::PageResponse;
use noema_proto::identity::v1 as pb;
use noema_runtime::convert::{page_size, timestamp};
use tonic::Request;

use super::principal;
use crate::domain::agent::{Agent, KeyStatus};
use crate::error::IdentityError;
use crate::ops::Identity;

pub(super) fn agent_to_proto(agent: Agent) -> pb::Agent {
    pb::Agent {
        fingerprint: agent.fingerprint(),
        public_key: agent.public_key.to_prefixed(),
        agent_id: agent.agent_id,
        first_object_id: agent.first_object_id,
        registered_at: Some(timestamp(agent.registered_at)),
        key_version: agent.key_version,
        key_rotated_at: agent.key_rotated_at.map(timestamp),
    }
}

fn key_status_to_proto(status: KeyStatus) -> pb::KeyStatus {
    match status {
        KeyStatus::Unregistered => pb::KeyStatus::Unregistered,
        KeyStatus::Registered => pb::KeyStatus::Registered,
        KeyStatus::Mismatch => pb::KeyStatus::Mismatch,
    }
}

/// A `ListAgents` page token: the last agent id of the previous page, base64url.
fn decode_page_token(token: &str) -> Result<String, IdentityError> {
    if token.is_empty() {
        return Ok(String::new());
    }
    data_encoding::BASE64URL_NOPAD
        .decode(token.as_bytes())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            IdentityError::InvalidArgument(
                "page_token is not a token returned by a previous ListAgents call".into(),
            )
        })
}

pub(super) async fn register_agent(
    ops: &Identity,
    request: Request<pb::RegisterAgentRequest>,
) -> Result<pb::RegisterAgentResponse, IdentityError> {
    let actor = principal(&request)?.peer_id.clone();
    let req = request.into_inner();
    let (agent, created) = ops
        .register_agent(&actor, &req.agent_id, &req.public_key, &req.first_object_id)
        .await?;
    Ok(pb::RegisterAgentResponse {
        agent: Some(agent_to_proto(agent)),
        created,
    })
}

pub(super) async fn get_agent(
    ops: &Identity,
    request: Request<pb::GetAgentRequest>,
) -> Result<pb::Agent, IdentityError> {
    let agent = ops.get_agent(&request.into_inner().agent_id).await?;
    Ok(agent_to_proto(agent))
}

pub(super) async fn get_agent_by_fingerprint(
    ops: &Identity,
    request: Request<pb::GetAgentByFingerprintRequest>,
) -> Result<pb::Agent, IdentityError> {
    let anonymous = principal(&request).is_err();
    let agent = ops
        .get_agent_by_fingerprint(&request.into_inner().fingerprint)
        .await?;
    let agent = agent_to_proto(agent);
    // A public RPC: a caller without a token learns what MoltNet's public route says.
    Ok(if anonymous {
        pb::Agent {
            fingerprint: agent.fingerprint,
            public_key: agent.public_key,
            ..pb::Agent::default()
        }
    } else {
        agent
    })
}

pub(super) async fn list_agents(
    ops: &Identity,
    request: Request<pb::ListAgentsRequest>,
) -> Result<pb::ListAgentsResponse, IdentityError> {
    let page = request.into_inner().page.unwrap_or_default();
    let after = decode_page_token(&page.page_token)?;
    let limit = page_size(page.page_size);
    let agents = ops.list_agents(&after, limit).await?;
    let next_page_token = match agents.last() {
        Some(last) if agents.len() == limit as usize => {
            data_encoding::BASE64URL_NOPAD.encode(last.agent_id.as_bytes())
        }
        _ => String::new(),
    };
    Ok(pb::ListAgentsResponse {
        agents: agents.into_iter().map(agent_to_proto).collect(),
        page: Some(PageResponse { next_page_token }),
    })
}

pub(super) async fn rotate_key(
    ops: &Identity,
    request: Request<pb::RotateKeyRequest>,
) -> Result<pb::Agent, IdentityError> {
    let actor = principal(&request)?.peer_id.clone();
    let req = request.into_inner();
    let agent = ops
        .rotate_key(
            &actor,
            &req.agent_id,
            &req.new_public_key,
            &req.proof_signature,
        )
        .await?;
    Ok(agent_to_proto(agent))
}

pub(super) async fn verify(
    ops: &Identity,
    request: Request<pb::VerifyRequest>,
) -> Result<pb::VerifyResponse, IdentityError> {
    let req = request.into_inner();
    let verification = ops
        .verify(&req.agent_id, &req.public_key, &req.message, &req.signature)
        .await?;
    Ok(pb::VerifyResponse {
        valid: verification.valid,
        key_status: key_status_to_proto(verification.key_status) as i32,
        fingerprint: verification.fingerprint,
    })
}

pub(super) async fn get_caller_identity(
    ops: &Identity,
    request: Request<pb::GetCallerIdentityRequest>,
) -> Result<pb::Agent, IdentityError> {
    let peer_id = principal(&request)?.peer_id.clone();
    Ok(agent_to_proto(ops.caller_agent(&peer_id).await?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod properties {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_page_token_is_read_or_invalid(token in proptest::prelude::any::<String>()) {
            if let Err(err) = decode_page_token(&token) {
                proptest::prop_assert!(matches!(err, IdentityError::InvalidArgument(_)));
            }
        }

        #[test]
        fn a_page_token_round_trips(after in proptest::prelude::any::<String>()) {
            let token = data_encoding::BASE64URL_NOPAD.encode(after.as_bytes());
            proptest::prop_assert_eq!(decode_page_token(&token).unwrap(), after);
        }
    }
}

//! Signed coordination writes (see `domain::coordination::signing`): the writing peer's
//! binding decides whether a signature is needed or allowed, the signature is verified
//! locally over the body's JCS bytes, and identity confirms the key is the bound agent's
//! registered key. Every doubt refuses the write.

use noema_core::{ErrorCode, Failure};
use noema_proto::identity::v1::{GetAgentRequest, KeyStatus, VerifyRequest};

use super::Continuity;
use crate::domain::access::Caller;
use crate::domain::coordination::forbidden;
use crate::domain::coordination::signing::{self, Need, Presented};
use crate::domain::error::ContinuityError;
use crate::domain::json::Json;
use crate::error::Error;

/// A request to identity, carrying the caller's own token.
fn on_behalf<T>(caller: &Caller, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = caller.authorization.as_deref().and_then(|v| v.parse().ok()) {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Identity's refusal to answer, as this write's refusal: unreachable is 503; a token
/// identity does not let ask is 403; anything else is 403 too (nothing is trusted unasked).
fn identity_failure(status: &tonic::Status, asking: &str) -> ContinuityError {
    let failure = Failure::from_status(status);
    match failure.code {
        ErrorCode::Unavailable | ErrorCode::Internal | ErrorCode::ResourceExhausted => {
            ContinuityError::Unavailable(format!(
                "identity is unavailable to {asking}; nothing was written: {}",
                failure.message
            ))
        }
        ErrorCode::PermissionDenied | ErrorCode::Unauthenticated => forbidden(&format!(
            "identity refused to {asking} for this token (it needs identity:read): {}",
            failure.message
        )),
        _ => forbidden(&format!("identity could not {asking}: {}", failure.message)),
    }
}

impl Continuity {
    /// The `sender_signature` to store for a coordination write by the caller of `body` (as
    /// signed, without it), checked against the caller's peer binding and identity; `None`
    /// for an unsigned write the binding allows.
    pub(super) async fn signature_of(
        &self,
        caller: &Caller,
        body: &Json,
        presented: Option<Presented>,
    ) -> Result<Option<Json>, Error> {
        let peer = self
            .registered_peer(&caller.tenant, caller.peer_id())
            .await?;
        let binding = peer.as_ref().and_then(|p| signing::binding_of(&p.record));
        let need = signing::need(caller.peer_id(), binding.as_ref(), presented.is_some())?;
        let (Need::AgentKey(agent_id), Some(presented)) = (need, presented) else {
            return Ok(None);
        };
        let verified = signing::verify(&presented, body.clone())?;
        let Some(identity) = &self.identity else {
            return Err(ContinuityError::Unavailable(
                "identity is not connected to continuity: signed coordination writes are refused"
                    .to_owned(),
            )
            .into());
        };
        let answer = identity
            .clone()
            .verify(on_behalf(
                caller,
                VerifyRequest {
                    agent_id: agent_id.clone(),
                    message: verified.message.clone(),
                    signature: verified.signature.to_base64(),
                    public_key: verified.public_key.to_prefixed(),
                },
            ))
            .await
            .map_err(|status| identity_failure(&status, "verify sender_signature"))?
            .into_inner();
        let status = match KeyStatus::try_from(answer.key_status) {
            Ok(KeyStatus::Registered) => signing::KeyStatus::Registered,
            Ok(KeyStatus::Mismatch) => signing::KeyStatus::Mismatch,
            _ => signing::KeyStatus::Unregistered,
        };
        signing::check_identity(&agent_id, answer.valid, status)?;
        Ok(Some(signing::record(&verified, &agent_id, super::now())))
    }

    /// 400 unless identity knows `agent_id` with a registered key (503 when it cannot be
    /// asked, 403 when it refuses the caller's token).
    pub(super) async fn check_agent(&self, caller: &Caller, agent_id: &str) -> Result<(), Error> {
        let Some(identity) = &self.identity else {
            return Err(ContinuityError::Unavailable(
                "identity is not connected to continuity: a peer cannot be bound to an agent"
                    .to_owned(),
            )
            .into());
        };
        let answer = identity
            .clone()
            .get_agent(on_behalf(
                caller,
                GetAgentRequest {
                    agent_id: agent_id.to_owned(),
                },
            ))
            .await;
        match answer {
            Ok(agent) if !agent.get_ref().public_key.is_empty() => Ok(()),
            Ok(_) => Err(ContinuityError::invalid(format!(
                "agent_id {agent_id} has no key registered in identity"
            ))
            .into()),
            Err(status)
                if matches!(
                    Failure::from_status(&status).code,
                    ErrorCode::NotFound | ErrorCode::InvalidArgument
                ) =>
            {
                Err(ContinuityError::invalid(format!(
                    "agent_id {agent_id} is not an agent registered in identity"
                ))
                .into())
            }
            Err(status) => Err(identity_failure(&status, "look up agent_id").into()),
        }
    }
}

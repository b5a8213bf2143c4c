//! Ledger helpers: build canonical objects and signed references locally (ids, storage
//! paths and signatures computed on the agent's side), and handle STOPPED politely — a
//! write refused because the system is halted returns [`ClientError::Stopped`] at once,
//! and [`Noema::wait_until_running`] polls status at a steady pace (no retry storm).

use std::time::Duration;

use noema_core::content_id::ContentId;
use noema_core::keys::{SigningKeyPair, reference_signing_message};
use noema_core::time::utc_date_path;
use noema_proto::ledger::v1 as pb;
use time::OffsetDateTime;

use crate::{ClientError, Noema};

/// `YYYY-MM-DDTHH:MM:SSZ` (what open-cognition's clients send).
pub use noema_core::time::rfc3339_seconds as utc_seconds;

/// A canonical object ready to submit: id, size and storage path derived from the bytes.
pub fn canonical_request(
    payload: Vec<u8>,
    object_type: &str,
    content_type: &str,
    created_by: &str,
    created_at: OffsetDateTime,
) -> pb::PutCanonicalRequest {
    let id = ContentId::of_bytes(&payload).into_string();
    let date = utc_date_path(created_at);
    pb::PutCanonicalRequest {
        schema_version: "0.1.0".into(),
        storage_path: format!("canonical/{object_type}/{date}/{id}.json"),
        id,
        object_type: object_type.into(),
        content_type: content_type.into(),
        size_bytes: i64::try_from(payload.len()).unwrap_or(i64::MAX),
        created_at: utc_seconds(created_at),
        created_by: created_by.into(),
        payload,
        metadata: None,
    }
}

/// A reference to `canonical_object_id`, signed locally with `key`.
pub fn signed_reference(
    key: &SigningKeyPair,
    agent_id: &str,
    canonical_object_id: &str,
    context: &str,
    created_at: OffsetDateTime,
) -> Result<pb::PutReferenceRequest, ClientError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| ClientError::Invalid(format!("randomness: {e}")))?;
    let id = uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string();
    let created_at = utc_seconds(created_at);
    let message = reference_signing_message(&id, canonical_object_id, agent_id, &created_at);
    Ok(pb::PutReferenceRequest {
        schema_version: "0.1.0".into(),
        signature: key.sign(message.as_bytes()).to_base64(),
        public_key: key.public_key().to_base64(),
        id,
        canonical_object_id: canonical_object_id.into(),
        agent_id: agent_id.into(),
        created_at,
        context: context.into(),
        relevance: None,
        trust_weight: None,
        time_horizon: String::new(),
        metadata: None,
    })
}

fn refused_because_stopped(status: &tonic::Status) -> bool {
    noema_core::Failure::from_status(status).reason == noema_core::Reason::SystemStopped
}

impl Noema {
    /// Submits a canonical object. The reason `ALREADY_EXISTS` ([`ClientError::reason`])
    /// means the same bytes are already in the ledger (content addressing makes that a
    /// success for most callers); `STORAGE_CONFLICT` is not that: an operator must
    /// reconcile.
    pub async fn put_canonical(
        &self,
        request: pb::PutCanonicalRequest,
    ) -> Result<pb::CanonicalObject, ClientError> {
        match self.ledger().put_canonical(request).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) if refused_because_stopped(&status) => Err(ClientError::Stopped),
            Err(status) => Err(status.into()),
        }
    }

    /// Submits a signed reference.
    pub async fn put_reference(
        &self,
        request: pb::PutReferenceRequest,
    ) -> Result<pb::AgentReference, ClientError> {
        match self.ledger().put_reference(request).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) if refused_because_stopped(&status) => Err(ClientError::Stopped),
            Err(status) => Err(status.into()),
        }
    }

    /// Whether the ledger accepts writes now.
    pub async fn is_running(&self) -> Result<bool, ClientError> {
        let state = self
            .ledger()
            .get_status(pb::GetStatusRequest {})
            .await?
            .into_inner();
        Ok(state.mode == pb::SystemMode::Running as i32)
    }

    /// Polls status every `every` until RUNNING or `patience` has passed. Returns
    /// whether the ledger is running. One status call per interval, never a burst.
    pub async fn wait_until_running(
        &self,
        every: Duration,
        patience: Duration,
    ) -> Result<bool, ClientError> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            if self.is_running().await? {
                return Ok(true);
            }
            if tokio::time::Instant::now() + every > deadline {
                return Ok(false);
            }
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_requests_are_self_consistent() {
        let at = OffsetDateTime::from_unix_timestamp(1_776_190_843)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let r = canonical_request(
            b"{\"smoke\":\"test\"}".to_vec(),
            "observation",
            "application/json",
            "me",
            at,
        );
        assert_eq!(r.created_at, "2026-04-14T18:20:43Z");
        assert_eq!(r.size_bytes, 16);
        assert_eq!(
            r.storage_path,
            format!("canonical/observation/2026/04/14/{}.json", r.id)
        );
    }

    #[test]
    fn stopped_is_told_by_its_reason_not_its_text() {
        use noema_core::{ErrorCode, Failure, Reason};
        let stopped = Failure::new(ErrorCode::Unavailable, "any words at all")
            .with_reason(Reason::SystemStopped)
            .to_status();
        assert!(refused_because_stopped(&stopped));
        assert_eq!(
            ClientError::Status(stopped).reason(),
            Some(Reason::SystemStopped)
        );
        let text_only = tonic::Status::unavailable(noema_core::STOPPED_MESSAGE);
        assert!(!refused_because_stopped(&text_only));
        assert_eq!(
            ClientError::Status(text_only).reason(),
            Some(Reason::Unavailable)
        );
        assert_eq!(ClientError::Stopped.reason(), Some(Reason::SystemStopped));
        assert_eq!(ClientError::Token.reason(), None);
        let conflict = ClientError::Status(
            Failure::new(ErrorCode::AlreadyExists, "orphaned write")
                .with_reason(Reason::StorageConflict)
                .to_status(),
        );
        assert_ne!(conflict.reason(), Some(Reason::AlreadyExists));
    }

    #[test]
    fn references_are_signed_over_the_four_fields() {
        let key = SigningKeyPair::from_seed(&[1; 32]);
        let r = signed_reference(
            &key,
            "agent:a",
            "sha256:x",
            "ctx",
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap_or_default();
        let message =
            reference_signing_message(&r.id, &r.canonical_object_id, &r.agent_id, &r.created_at);
        let signature = noema_core::keys::Signature::from_base64(&r.signature);
        assert!(signature.is_ok_and(|s| noema_core::keys::verify(
            &key.public_key(),
            message.as_bytes(),
            &s
        )));
        assert_eq!(r.id.len(), 36);
        assert_eq!(&r.id[14..15], "4");
    }
}

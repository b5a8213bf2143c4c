//! Builders shared by the ledger's integration tests.

#![allow(dead_code, clippy::unwrap_used)]

use noema_ledger::domain::canonical::CanonicalSubmission;
use noema_ledger::domain::reference::AgentReference;
use time::OffsetDateTime;

/// A valid canonical submission of `payload` (JSON, an observation) by `created_by`.
pub fn submission(payload: Vec<u8>, created_by: &str) -> CanonicalSubmission {
    let request = noema_client::ledger::canonical_request(
        payload,
        "observation",
        "application/json",
        created_by,
        OffsetDateTime::now_utc(),
    );
    CanonicalSubmission {
        schema_version: request.schema_version,
        id: request.id,
        object_type: request.object_type,
        content_type: request.content_type,
        size_bytes: request.size_bytes,
        created_at: request.created_at,
        created_by: request.created_by,
        storage_path: request.storage_path,
        payload: request.payload,
        metadata: None,
    }
}

/// A reference with id `id` to an object that does not exist: its insert breaks the
/// foreign key, so a batch holding it fails.
pub fn orphan_reference(id: &str) -> AgentReference {
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    AgentReference {
        id: id.into(),
        canonical_object_id: noema_core::content_id::ContentId::from_digest(&[0; 32]).into_string(),
        agent_id: "agent-x".into(),
        created_at: now,
        signed_created_at: "2026-01-01T00:00:00Z".into(),
        context: "c".into(),
        relevance: None,
        trust_weight: None,
        time_horizon: "short".into(),
        signature: "AAAA".into(),
        metadata: None,
        recorded_at: now,
    }
}

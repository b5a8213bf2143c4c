//! The ledger, through its gRPC client with the caller's token: anchoring (every object
//! also stored as a canonical object when `ledger_anchor = true`) and the
//! `noema.put_canonical` tool.

use noema_core::content_id::ContentId;
use noema_proto::ledger::v1::PutCanonicalRequest;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::{Caller, Orchestrator};
use crate::error::OrchestratorError;
use crate::store::ObjectRow;

/// The ledger's canonical object schema version.
const LEDGER_SCHEMA_VERSION: &str = "0.1.0";

/// A canonical object for the ledger: id, size and storage path derived from the bytes.
fn canonical(
    payload: Vec<u8>,
    object_type: &str,
    content_type: &str,
    created_by: &str,
    metadata: Option<Value>,
    at: OffsetDateTime,
) -> PutCanonicalRequest {
    let id = ContentId::of_bytes(&payload).into_string();
    let date = noema_core::time::utc_date_path(at);
    let created_at = noema_core::time::rfc3339_seconds(at);
    PutCanonicalRequest {
        schema_version: LEDGER_SCHEMA_VERSION.into(),
        storage_path: format!("canonical/{object_type}/{date}/{id}.json"),
        id,
        object_type: object_type.into(),
        content_type: content_type.into(),
        size_bytes: i64::try_from(payload.len()).unwrap_or(i64::MAX),
        created_at,
        created_by: created_by.into(),
        payload,
        metadata: metadata
            .as_ref()
            .and_then(noema_proto::json::to_proto_struct),
    }
}

impl Orchestrator {
    /// Puts `request` into the ledger with the caller's token; the same bytes already
    /// there count as written.
    async fn put_in_ledger(
        &self,
        caller: &Caller,
        request: PutCanonicalRequest,
    ) -> Result<(String, String), tonic::Status> {
        let (id, path) = (request.id.clone(), request.storage_path.clone());
        let mut request = tonic::Request::new(request);
        if let Some(value) = &caller.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        match self.ledger.clone().put_canonical(request).await {
            Ok(_) => Ok((id, path)),
            Err(status) if status.code() == tonic::Code::AlreadyExists => Ok((id, path)),
            Err(status) => Err(status),
        }
    }

    /// With `ledger_anchor = true`, writes each object to the ledger (its JCS bytes, so the
    /// ledger's id is the object's content id) before the orchestrator commits it.
    pub(super) async fn anchor_objects(
        &self,
        caller: &Caller,
        request_id: &str,
        objects: &[ObjectRow],
    ) -> Result<(), OrchestratorError> {
        if !self.anchor {
            return Ok(());
        }
        for object in objects {
            let request = canonical(
                object.body.clone().into_bytes(),
                "document",
                "application/json",
                "orchestrator",
                Some(json!({"orchestrator_object_type": object.object_type,
                            "object_id": object.object_id,
                            "request_id": request_id})),
                OffsetDateTime::now_utc(),
            );
            self.put_in_ledger(caller, request)
                .await
                .map_err(|status| {
                    OrchestratorError::Ledger(noema_core::Failure::from_status(&status))
                })?;
        }
        Ok(())
    }

    /// The `noema.put_canonical` tool: `args.payload` (standard base64) or `args.content`
    /// (any JSON, stored as its JCS bytes), `object_type` (default `tool_output`),
    /// `content_type` (default `application/json`), created by the plan's actor.
    pub(super) async fn put_canonical_tool(
        &self,
        caller: &Caller,
        actor: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, String> {
        let payload = match (args.get("payload"), args.get("content")) {
            (Some(Value::String(b64)), None) => data_encoding::BASE64
                .decode(b64.as_bytes())
                .map_err(|e| format!("payload is not standard base64: {e}"))?,
            (None, Some(content)) => noema_core::jcs::canonicalize(content)
                .map_err(|e| format!("content cannot be canonicalized: {e}"))?,
            _ => return Err("give exactly one of payload (base64) and content (JSON)".into()),
        };
        let text = |key: &str, default: &str| -> Result<String, String> {
            match args.get(key) {
                None => Ok(default.to_owned()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(format!("{key} must be a string")),
            }
        };
        let request = canonical(
            payload,
            &text("object_type", "tool_output")?,
            &text("content_type", "application/json")?,
            actor,
            None,
            OffsetDateTime::now_utc(),
        );
        let (id, path) = self
            .put_in_ledger(caller, request)
            .await
            .map_err(|status| format!("the ledger refused the object: {}", status.message()))?;
        Ok(json!({"canonical_object_id": id, "storage_path": path}))
    }
}

//! Anchoring committed turns in the ledger (`world.anchor = true`): each turn's hash becomes
//! a canonical object there, `{"kind": "noema.world.turn", "world_slug", "turn", "turn_hash",
//! "previous_turn_hash"}` as JCS bytes, so rewriting a world's history would also need the
//! ledger rewritten. The object's id is SHA-256 of those bytes, so verification recomputes
//! it from the stored turn and asks the ledger for it.

use noema_core::content_id::ContentId;
use noema_core::{ErrorCode, Failure as CallFailure};
use noema_proto::ledger::v1 as ledger;
use serde_json::json;
use time::OffsetDateTime;

use super::{Caller, World, now};
use crate::store::worlds::TurnRow;

/// How many turns one run anchors (later runs catch up the rest).
const ANCHOR_BATCH: u32 = 50;

/// The anchor object's bytes for a turn.
pub fn anchor_payload(row: &TurnRow) -> Vec<u8> {
    let document = json!({
        "kind": "noema.world.turn",
        "world_slug": row.world_slug,
        "turn": row.turn,
        "turn_hash": row.turn_hash,
        "previous_turn_hash": row.previous_turn_hash,
    });
    noema_core::jcs::canonicalize(&document).unwrap_or_default()
}

/// The ledger id of a turn's anchor.
pub fn anchor_id(row: &TurnRow) -> String {
    ContentId::of_bytes(&anchor_payload(row)).to_string()
}

fn request<T>(message: T, caller: &Caller) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = &caller.authorization {
        request
            .metadata_mut()
            .insert("authorization", value.clone());
    }
    request
}

fn put_request(row: &TurnRow, at: OffsetDateTime) -> ledger::PutCanonicalRequest {
    let payload = anchor_payload(row);
    let id = ContentId::of_bytes(&payload).to_string();
    let date = noema_core::time::utc_date_path(at);
    let created_at = noema_core::time::rfc3339_seconds(at);
    ledger::PutCanonicalRequest {
        schema_version: "0.1.0".into(),
        storage_path: format!("canonical/document/{date}/{id}.json"),
        id,
        object_type: "document".into(),
        content_type: "application/json".into(),
        size_bytes: i64::try_from(payload.len()).unwrap_or(i64::MAX),
        created_at,
        created_by: format!("world:{}", row.world_slug),
        payload,
        metadata: None,
    }
}

impl World {
    /// Anchors the world's committed turns that have no anchor yet, oldest first; returns
    /// the anchor id of `turn` if it got one, or why anchoring stopped.
    pub(crate) async fn anchor_turns(
        &self,
        slug: &str,
        turn: u64,
        caller: &Caller,
    ) -> Result<Option<String>, String> {
        let Some(client) = &self.ledger else {
            return Err("no ledger endpoint: anchoring needs the ledger service".into());
        };
        let pending = self
            .store
            .unanchored_turns(slug, ANCHOR_BATCH)
            .await
            .map_err(|e| e.to_string())?;
        let mut anchored = None;
        for row in pending {
            let put = put_request(&row, now());
            let id = put.id.clone();
            match client.clone().put_canonical(request(put, caller)).await {
                Ok(_) => {}
                // The same turn anchored before (by an attempt that died before recording it).
                Err(status)
                    if CallFailure::from_status(&status).code == ErrorCode::AlreadyExists => {}
                Err(status) => {
                    let failure = CallFailure::from_status(&status);
                    return Err(format!(
                        "the ledger refused turn {}'s anchor ({}): {}",
                        row.turn, failure.reason, failure.message
                    ));
                }
            }
            self.store
                .put_anchor(slug, row.turn, &id, now())
                .await
                .map_err(|e| e.to_string())?;
            if row.turn == turn {
                anchored = Some(id);
            }
        }
        Ok(anchored)
    }

    /// Checks one anchored turn: its anchor id is the one its stored row implies, and the
    /// ledger holds that object.
    pub(crate) async fn check_anchor(&self, row: &TurnRow, caller: &Caller) -> Result<(), String> {
        let expected = anchor_id(row);
        let stored = row.anchor_id.as_deref().unwrap_or_default();
        if stored != expected {
            return Err(format!(
                "turn {}'s anchor {stored} is not the anchor of its stored hash ({expected})",
                row.turn
            ));
        }
        let Some(client) = &self.ledger else {
            return Err("no ledger endpoint: anchors cannot be checked".into());
        };
        let get = ledger::GetCanonicalRequest {
            id: expected.clone(),
        };
        match client.clone().get_canonical(request(get, caller)).await {
            Ok(_) => Ok(()),
            Err(status) => {
                let failure = CallFailure::from_status(&status);
                Err(format!(
                    "the ledger does not confirm turn {}'s anchor {expected} ({}): {}",
                    row.turn, failure.reason, failure.message
                ))
            }
        }
    }
}

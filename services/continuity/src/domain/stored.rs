//! A stored capsule as the rules see it: the exact bytes last written, read back the ways the
//! original reads them (raw JSON for merge decisions, legacy-upgraded, or as a model).

use serde_json::Value;

use super::error::ContinuityError;
use super::json::Json;
use super::model::{Capsule, SubjectKind};
use super::subject::normalize_subject_id;
use super::timestamp::{parse_iso, require_utc};
use super::validation::{sanitize_related_documents_on_read, upgrade_legacy};

/// The active capsule's stored bytes (canonical JSON as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCapsule {
    bytes: Vec<u8>,
}

impl StoredCapsule {
    pub fn new(bytes: impl Into<Vec<u8>>) -> StoredCapsule {
        StoredCapsule {
            bytes: bytes.into(),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `json.loads(old_bytes)`; `None` when the bytes are not JSON.
    pub fn raw(&self) -> Option<Value> {
        serde_json::from_slice(&self.bytes).ok()
    }

    /// The raw JSON after the legacy upgrade (§1.6), as merge and stamping read it.
    pub fn upgraded(&self) -> Option<Value> {
        self.raw().map(|raw| upgrade_legacy(&raw))
    }

    /// The model the patch and lifecycle paths load (400 `stored capsule is invalid: …`).
    pub fn model_or_invalid(&self) -> Result<Capsule, ContinuityError> {
        let raw = self
            .raw()
            .ok_or_else(|| ContinuityError::invalid("stored capsule is invalid: not JSON"))?;
        Capsule::from_stored(&raw)
            .map_err(|err| ContinuityError::invalid(format!("stored capsule is invalid: {err}")))
    }

    /// The model if the stored bytes are a valid capsule (`None` otherwise, as the original's
    /// late stale-write check silently skips an unreadable capsule).
    pub fn model(&self) -> Option<Capsule> {
        self.raw().and_then(|raw| Capsule::from_stored(&raw).ok())
    }

    /// The read path's load (`_load_capsule_with_warnings`): JSON, legacy upgrade, malformed
    /// `related_documents` dropped with a recovery warning, model validation, and (when a
    /// subject is expected) the subject check.
    pub fn load_for_read(
        &self,
        expected: Option<(SubjectKind, &str)>,
    ) -> Result<(Capsule, Vec<String>), ContinuityError> {
        let raw: Json = Json::parse(&self.bytes).map_err(|e| {
            ContinuityError::invalid(format!("Invalid continuity capsule JSON: {e}"))
        })?;
        load_capsule_value(
            &raw.to_value(),
            expected,
            "Continuity capsule subject does not match requested subject",
        )
    }
}

/// Loads a capsule object read from storage (an active file or an envelope's `capsule`).
pub fn load_capsule_value(
    raw: &Value,
    expected: Option<(SubjectKind, &str)>,
    mismatch_detail: &str,
) -> Result<(Capsule, Vec<String>), ContinuityError> {
    let upgraded = upgrade_legacy(raw);
    let (sanitized, warnings) = sanitize_related_documents_on_read(&upgraded);
    let capsule = Capsule::from_json_at(&Json::from_value(&sanitized), &Default::default())
        .map_err(|err| match err {
            ContinuityError::Validation(errors) => ContinuityError::invalid(format!(
                "Invalid continuity capsule: {} validation error{} for ContinuityCapsule",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" }
            )),
            other => other,
        })?;
    if let Some((kind, subject_id)) = expected
        && !names_subject(&capsule, kind, subject_id)
    {
        return Err(ContinuityError::SubjectMismatch(mismatch_detail.to_owned()));
    }
    Ok((capsule, warnings))
}

/// Whether `capsule` is the subject a caller asked for (ids compared normalised).
pub fn names_subject(capsule: &Capsule, kind: SubjectKind, subject_id: &str) -> bool {
    capsule.subject_kind == kind
        && normalize_subject_id(&capsule.subject_id).ok() == normalize_subject_id(subject_id).ok()
}

/// Patch and lifecycle writes must be strictly newer than the stored capsule.
pub fn reject_stale_timestamp(incoming: &str, stored: &str) -> Result<(), ContinuityError> {
    let incoming = require_utc(incoming, "updated_at")?;
    let stored = require_utc(stored, "updated_at")?;
    if incoming < stored {
        return Err(ContinuityError::stale_write());
    }
    if incoming == stored {
        return Err(ContinuityError::timestamp_conflict());
    }
    Ok(())
}

/// The upsert's early guard: only strictly older writes are refused before any work.
pub fn reject_older_than_stored(
    incoming: &str,
    stored: &StoredCapsule,
) -> Result<(), ContinuityError> {
    let Some(raw) = stored.raw() else {
        return Ok(());
    };
    let stored_ts = match raw.get("updated_at") {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    if let (Some(incoming), Some(stored)) = (parse_iso(incoming), parse_iso(&stored_ts))
        && incoming < stored
    {
        return Err(ContinuityError::stale_write());
    }
    Ok(())
}

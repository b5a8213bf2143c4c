//! What every capsule write produces and the envelopes the original keeps beside it (§2).

use time::OffsetDateTime;

use super::json::{Json, JsonObject, canonical_json, sha256_hex};
use super::model::{Capsule, HealthStatus, VerificationStatus};
use super::subject::SubjectKey;
use super::timestamp::format_iso;

/// A capsule ready to store: its canonical bytes and what changed against the stored bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteResult {
    pub subject: SubjectKey,
    pub capsule: Capsule,
    /// The bytes to store (canonical JSON).
    pub canonical: String,
    /// `capsule_sha256`: hex SHA-256 of `canonical`.
    pub sha256: String,
    /// No capsule was stored before.
    pub created: bool,
    /// The bytes differ from the stored ones (identical bytes are a no-op: nothing written,
    /// fallback untouched).
    pub changed: bool,
}

impl WriteResult {
    pub fn new(
        subject: SubjectKey,
        capsule: Capsule,
        canonical: String,
        stored: Option<&[u8]>,
    ) -> WriteResult {
        let sha256 = sha256_hex(canonical.as_bytes());
        WriteResult {
            subject,
            created: stored.is_none(),
            changed: stored != Some(canonical.as_bytes()),
            capsule,
            canonical,
            sha256,
        }
    }

    /// The response's `path`.
    pub fn path(&self) -> String {
        self.subject.active_path()
    }

    /// The response's `updated`: changed and not created.
    pub fn updated(&self) -> bool {
        self.changed && !self.created
    }

    /// The last-known-good snapshot to store with this write (canonical JSON).
    pub fn fallback_envelope(&self, now: OffsetDateTime) -> String {
        canonical_json(&fallback_envelope(&self.capsule, &self.path(), now))
    }
}

/// The persisted or implicit verification status.
pub fn verification_status(capsule: &Capsule) -> VerificationStatus {
    capsule
        .verification_state
        .as_ref()
        .map_or(VerificationStatus::Unverified, |s| s.status)
}

/// The persisted or implicit health: `healthy` with no reasons when absent.
pub fn health_summary(capsule: &Capsule) -> (HealthStatus, Vec<String>) {
    capsule
        .capsule_health
        .as_ref()
        .map_or((HealthStatus::Healthy, Vec::new()), |h| {
            (h.status, h.reasons.clone())
        })
}

/// `{schema_type, schema_version, captured_at, source_path, verification_status, health_status,
/// capsule}`; `captured_at` is the capsule's `updated_at` (else `verified_at`, else now).
pub fn fallback_envelope(capsule: &Capsule, active_path: &str, now: OffsetDateTime) -> Json {
    let captured_at = [&capsule.updated_at, &capsule.verified_at]
        .into_iter()
        .find(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| format_iso(super::timestamp::whole_seconds(now)));
    let mut envelope = JsonObject::new();
    envelope.insert("schema_type", Json::from("continuity_fallback_snapshot"));
    envelope.insert("schema_version", Json::from("1.1"));
    envelope.insert("captured_at", Json::String(captured_at));
    envelope.insert("source_path", Json::from(active_path));
    envelope.insert(
        "verification_status",
        Json::from(verification_status(capsule).as_str()),
    );
    envelope.insert(
        "health_status",
        Json::from(health_summary(capsule).0.as_str()),
    );
    envelope.insert("capsule", capsule.to_json());
    Json::Object(envelope)
}

/// `{schema_type, schema_version, archived_at, archived_by, reason, active_path, capsule}`
/// and its path, for `POST /v1/continuity/archive` at `now`.
pub fn archive_envelope(
    subject: &SubjectKey,
    capsule: &Capsule,
    archived_by: &str,
    reason: &str,
    now: OffsetDateTime,
) -> (String, Json) {
    // `archived_at` keeps the request's microseconds, as the original's; the name does not.
    let path = subject.archive_path(&super::timestamp::format_compact(now));
    let mut envelope = JsonObject::new();
    envelope.insert("schema_type", Json::from("continuity_archive_envelope"));
    envelope.insert("schema_version", Json::from("1.1"));
    envelope.insert("archived_at", Json::String(format_iso(now)));
    envelope.insert("archived_by", Json::from(archived_by));
    envelope.insert("reason", Json::from(reason));
    envelope.insert("active_path", Json::String(subject.active_path()));
    envelope.insert("capsule", capsule.to_json());
    (path, Json::Object(envelope))
}

/// A structured write warning (`make_warning`): `{code, detail, path, segment_id: null}`.
pub fn write_warning(code: &str, detail: &str, path: &str) -> Json {
    let mut warning = JsonObject::new();
    warning.insert("code", Json::from(code));
    warning.insert("detail", Json::from(detail));
    warning.insert("path", Json::from(path));
    warning.insert("segment_id", Json::Null);
    Json::Object(warning)
}

/// The recovery warning when the fallback refresh fails after the active write committed.
pub const FALLBACK_WRITE_FAILED: &str = "continuity_fallback_write_failed";

/// `warnings`, `recovery_warnings` and `fallback_warning_detail` for a write whose fallback
/// refresh failed with `detail` (or succeeded: `None`).
pub fn fallback_failure_fields(path: &str, detail: Option<&str>) -> (Json, Json, Json) {
    match detail {
        None => (Json::Array(vec![]), Json::Array(vec![]), Json::Null),
        Some(detail) => (
            Json::Array(vec![write_warning(FALLBACK_WRITE_FAILED, detail, path)]),
            Json::Array(vec![Json::from(FALLBACK_WRITE_FAILED)]),
            Json::from(detail),
        ),
    }
}

/// The `latest_commit` value: Noema's revision id where the original gives a git sha.
pub fn revision_json(revision: Option<&str>) -> Json {
    revision.map_or(Json::Null, Json::from)
}

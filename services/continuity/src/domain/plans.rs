//! The pure parts of the tiers (digest §2, §9): envelope loading, the retention plan window
//! and the refresh plan.

use serde_json::Value;
use time::OffsetDateTime;

use super::error::ContinuityError;
use super::json::{Json, JsonObject};
use super::listing::is_archive_stale;
use super::model::{Capsule, HealthStatus, SubjectKind, VerificationStatus};
use super::request::{RefreshPlanRequest, RetentionPlanRequest};
use super::stored::load_capsule_value;
use super::subject::{
    CONTINUITY_DIR, RETENTION_STATE_PATH, SubjectKey, cold_storage_path, cold_stub_path,
    normalize_subject_id,
};
use super::timestamp::{format_compact, format_iso, parse_iso, require_utc, total_seconds};
use super::write::{health_summary, revision_json, verification_status};

/// A loaded envelope: its top-level JSON (capsule replaced by the validated dump) and capsule.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub json: Value,
    pub capsule: Capsule,
    /// Recovery warnings from a dropped malformed `related_documents`.
    pub warnings: Vec<String>,
}

fn load_envelope(
    bytes: &[u8],
    schema_type: &str,
    label: &str,
) -> Result<Envelope, ContinuityError> {
    let mut payload: Value = serde_json::from_slice(bytes)
        .map_err(|e| ContinuityError::invalid(format!("Invalid continuity {label} JSON: {e}")))?;
    if payload.get("schema_type").and_then(Value::as_str) != Some(schema_type) {
        return Err(ContinuityError::invalid(format!(
            "Invalid continuity {label} schema_type"
        )));
    }
    if !matches!(
        payload.get("schema_version").and_then(Value::as_str),
        Some("1.0" | "1.1")
    ) {
        return Err(ContinuityError::invalid(format!(
            "Invalid continuity {label} schema_version"
        )));
    }
    let Some(raw_capsule) = payload.get("capsule").filter(|c| c.is_object()).cloned() else {
        return Err(ContinuityError::invalid(format!(
            "Invalid continuity {label} capsule"
        )));
    };
    let (capsule, warnings) = load_capsule_value(&raw_capsule, None, "").map_err(|err| {
        ContinuityError::invalid(format!("Invalid continuity {label} capsule: {err}"))
    })?;
    payload["capsule"] = capsule.to_value();
    Ok(Envelope {
        json: payload,
        capsule,
        warnings,
    })
}

/// A fallback snapshot's bytes, loaded as the read path does.
pub fn load_fallback_envelope(bytes: &[u8]) -> Result<Envelope, ContinuityError> {
    load_envelope(bytes, "continuity_fallback_snapshot", "fallback snapshot")
}

/// An archive envelope's bytes, loaded as list and retention do.
pub fn load_archive_envelope(bytes: &[u8]) -> Result<Envelope, ContinuityError> {
    load_envelope(bytes, "continuity_archive_envelope", "archive envelope")
}

/// The path an archive envelope must live at (`archive/<kind>-<key>-<archived_at compact>.json`).
pub fn archive_path_from_envelope(envelope: &Envelope) -> Result<String, ContinuityError> {
    let archived_at = envelope
        .json
        .get("archived_at")
        .and_then(Value::as_str)
        .unwrap_or("");
    let at = require_utc(archived_at, "archived_at")?;
    let key = normalize_subject_id(&envelope.capsule.subject_id)?;
    Ok(format!(
        "{CONTINUITY_DIR}/archive/{}-{key}-{}.json",
        envelope.capsule.subject_kind,
        format_compact(at)
    ))
}

/// Whether cold files exist for an archive (as the store sees them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColdState {
    /// Neither payload nor stub.
    None,
    /// Only one of them.
    Partial,
    /// Both, but the stub names another archive or is unreadable.
    Conflict,
    /// Both, consistent.
    Full,
}

/// One archive the retention scan looked at.
#[derive(Debug, Clone)]
pub struct RetentionArchive {
    pub path: String,
    /// The loaded envelope, or the error loading it gave (400 → skipped with a warning, 404 →
    /// skipped silently).
    pub envelope: Result<Envelope, ContinuityError>,
    pub cold_state: ColdState,
}

/// The retention plan: the next window of stale archives to cold-store.
#[derive(Debug, Clone, PartialEq)]
pub struct RetentionPlan {
    pub generated_at: OffsetDateTime,
    pub subject_kind: Option<SubjectKind>,
    pub limit: i64,
    pub candidates: Vec<Json>,
    pub total_candidates: usize,
    pub warnings: Vec<String>,
}

fn warning_rank(warning: &str) -> (u8, &str) {
    for (prefix, rank) in [
        ("continuity_retention_partial_cold_conflict:", 0),
        ("continuity_retention_skipped_invalid_archive:", 1),
        ("duplicate_source_archive_path:", 3),
    ] {
        if let Some(rest) = warning.strip_prefix(prefix) {
            return (rank, rest);
        }
    }
    (99, warning)
}

/// Builds the retention plan over the archives the caller may read (any order).
pub fn retention_plan(
    request: &RetentionPlanRequest,
    archives: Vec<RetentionArchive>,
    now: OffsetDateTime,
    retention_days: i64,
) -> Result<RetentionPlan, ContinuityError> {
    let mut archives = archives;
    archives.sort_by(|a, b| a.path.rsplit('/').next().cmp(&b.path.rsplit('/').next()));
    let mut candidates: Vec<((String, String, String, String), Json)> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for archive in archives {
        let envelope = match archive.envelope {
            Ok(envelope) => match archive_path_from_envelope(&envelope) {
                Ok(path) if path == archive.path => envelope,
                Ok(_) | Err(ContinuityError::Invalid(_)) => {
                    warnings.push(format!(
                        "continuity_retention_skipped_invalid_archive:{}",
                        archive.path
                    ));
                    continue;
                }
                Err(other) => return Err(other),
            },
            Err(ContinuityError::Invalid(_)) => {
                warnings.push(format!(
                    "continuity_retention_skipped_invalid_archive:{}",
                    archive.path
                ));
                continue;
            }
            Err(ContinuityError::NotFound(_)) => continue,
            Err(other) => return Err(other),
        };
        let capsule = &envelope.capsule;
        if request
            .subject_kind
            .is_some_and(|k| k != capsule.subject_kind)
        {
            continue;
        }
        let archived_at_text = envelope
            .json
            .get("archived_at")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !is_archive_stale(parse_iso(archived_at_text), now, retention_days) {
            continue;
        }
        match archive.cold_state {
            ColdState::None => {}
            ColdState::Partial | ColdState::Conflict => {
                warnings.push(format!(
                    "continuity_retention_partial_cold_conflict:{}",
                    archive.path
                ));
                continue;
            }
            ColdState::Full => continue,
        }
        let archived_at = require_utc(archived_at_text, "archived_at")?;
        let age_days = (total_seconds(now, archived_at) / 86_400.0)
            .floor()
            .max(0.0) as i64;
        let mut row = JsonObject::new();
        row.insert("subject_kind", Json::from(capsule.subject_kind.as_str()));
        row.insert("subject_id", Json::from(capsule.subject_id.as_str()));
        row.insert("source_archive_path", Json::from(archive.path.as_str()));
        row.insert("artifact_state", Json::from("archived"));
        row.insert("retention_class", Json::from("archive_stale"));
        row.insert("policy_action", Json::from("cold_store"));
        row.insert("archived_at", Json::String(format_iso(archived_at)));
        row.insert("age_days", Json::from(age_days));
        row.insert(
            "cold_storage_path",
            Json::String(cold_storage_path(&archive.path)?),
        );
        row.insert(
            "cold_stub_path",
            Json::String(cold_stub_path(&archive.path)?),
        );
        row.insert(
            "reason_codes",
            Json::Array(vec![Json::from("archive_stale")]),
        );
        let key = (
            format_iso(archived_at),
            capsule.subject_kind.as_str().to_owned(),
            normalize_subject_id(&capsule.subject_id)?,
            archive.path.clone(),
        );
        candidates.push((key, Json::Object(row)));
    }
    candidates.sort_by(|a, b| a.0.cmp(&b.0));
    warnings.sort_by(|a, b| warning_rank(a).cmp(&warning_rank(b)));
    let total_candidates = candidates.len();
    let window = usize::try_from(request.limit).unwrap_or(0);
    Ok(RetentionPlan {
        generated_at: now,
        subject_kind: request.subject_kind,
        limit: request.limit,
        candidates: candidates
            .into_iter()
            .take(window)
            .map(|(_, c)| c)
            .collect(),
        total_candidates,
        warnings,
    })
}

impl RetentionPlan {
    pub fn has_more(&self) -> bool {
        self.total_candidates > self.candidates.len()
    }

    fn warnings_json(&self) -> Json {
        Json::Array(
            self.warnings
                .iter()
                .map(|w| Json::from(w.as_str()))
                .collect(),
        )
    }

    /// The operator-visible plan the original persists (`retention_state.json`).
    pub fn persisted(&self) -> Json {
        let mut filters = JsonObject::new();
        filters.insert(
            "subject_kind",
            self.subject_kind
                .map_or(Json::Null, |k| Json::from(k.as_str())),
        );
        filters.insert("limit", Json::from(self.limit));
        let mut body = JsonObject::new();
        body.insert("schema_type", Json::from("continuity_retention_plan"));
        body.insert("schema_version", Json::from("1.0"));
        body.insert("generated_at", Json::String(format_iso(self.generated_at)));
        body.insert("path", Json::from(RETENTION_STATE_PATH));
        body.insert("filters", Json::Object(filters));
        body.insert("count", Json::from(self.candidates.len()));
        body.insert("total_candidates", Json::from(self.total_candidates));
        body.insert("has_more", Json::Bool(self.has_more()));
        body.insert("warnings", self.warnings_json());
        body.insert("candidates", Json::Array(self.candidates.clone()));
        Json::Object(body)
    }

    /// The response: `ok, count, generated_at, path, durable, latest_commit, warnings,
    /// candidates, total_candidates, has_more`.
    pub fn response(&self, revision: Option<&str>) -> Json {
        let mut body = JsonObject::new();
        body.insert("ok", Json::Bool(true));
        body.insert("count", Json::from(self.candidates.len()));
        body.insert("generated_at", Json::String(format_iso(self.generated_at)));
        body.insert("path", Json::from(RETENTION_STATE_PATH));
        body.insert("durable", Json::Bool(true));
        body.insert("latest_commit", revision_json(revision));
        body.insert("warnings", self.warnings_json());
        body.insert("candidates", Json::Array(self.candidates.clone()));
        body.insert("total_candidates", Json::from(self.total_candidates));
        body.insert("has_more", Json::Bool(self.has_more()));
        Json::Object(body)
    }
}

/// The refresh-plan reason codes of one capsule, in the original's order.
pub fn refresh_reason_codes(
    capsule: &Capsule,
    fallback_only: bool,
    recently_used: bool,
    now: OffsetDateTime,
) -> Vec<&'static str> {
    let mut codes = Vec::new();
    match health_summary(capsule).0 {
        HealthStatus::Degraded => codes.push("health_degraded"),
        HealthStatus::Conflicted => codes.push("health_conflicted"),
        HealthStatus::Healthy => {}
    }
    match verification_status(capsule) {
        VerificationStatus::Unverified => codes.push("verification_unverified"),
        VerificationStatus::SelfAttested => codes.push("verification_self_attested"),
        _ => {}
    }
    if parse_iso(&capsule.verified_at)
        .is_some_and(|at| total_seconds(now, at) > (30 * 86_400) as f64)
    {
        codes.push("stale_verified_at");
    }
    if recently_used {
        codes.push("recently_used");
    }
    if fallback_only {
        codes.push("fallback_only");
    }
    codes
}

/// One capsule the refresh scan found.
#[derive(Debug, Clone)]
pub struct RefreshSource {
    pub capsule: Capsule,
    /// Only a fallback snapshot exists for the subject.
    pub fallback_only: bool,
    /// Read or retrieved in the last 7 days.
    pub recently_used: bool,
}

/// The refresh plan (§9): candidates sorted by (priority, kind, id), cut to `limit`.
pub fn refresh_plan(
    request: &RefreshPlanRequest,
    sources: &[RefreshSource],
    now: OffsetDateTime,
) -> Vec<Json> {
    let mut rows: Vec<((u8, String, String), Json)> = Vec::new();
    let mut seen: Vec<SubjectKey> = Vec::new();
    // Active capsules first; a fallback-only subject already seen as active is skipped.
    let ordered = sources
        .iter()
        .filter(|s| !s.fallback_only)
        .chain(sources.iter().filter(|s| s.fallback_only));
    for source in ordered {
        let capsule = &source.capsule;
        if request
            .subject_kind
            .is_some_and(|k| k != capsule.subject_kind)
        {
            continue;
        }
        let Ok(key) = SubjectKey::new(capsule.subject_kind, &capsule.subject_id) else {
            continue;
        };
        if source.fallback_only && seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        let codes = refresh_reason_codes(capsule, source.fallback_only, source.recently_used, now);
        if !request.include_healthy && (codes.is_empty() || codes == ["recently_used"]) {
            continue;
        }
        let (health, _) = health_summary(capsule);
        let verification = verification_status(capsule);
        let priority = if matches!(health, HealthStatus::Degraded | HealthStatus::Conflicted)
            || codes.contains(&"fallback_only")
        {
            "high"
        } else if matches!(
            verification,
            VerificationStatus::Unverified | VerificationStatus::SelfAttested
        ) || codes.contains(&"stale_verified_at")
        {
            "medium"
        } else {
            "low"
        };
        let mut row = JsonObject::new();
        row.insert("subject_kind", Json::from(capsule.subject_kind.as_str()));
        row.insert("subject_id", Json::from(capsule.subject_id.as_str()));
        row.insert("path", Json::String(key.active_path()));
        row.insert("health_status", Json::from(health.as_str()));
        row.insert("verification_status", Json::from(verification.as_str()));
        row.insert(
            "last_revalidated_at",
            capsule
                .verification_state
                .as_ref()
                .map(|s| s.last_revalidated_at.as_str())
                .filter(|s| !s.is_empty())
                .map_or(Json::Null, Json::from),
        );
        row.insert("updated_at", Json::from(capsule.updated_at.as_str()));
        row.insert(
            "reason_codes",
            Json::Array(codes.iter().map(|c| Json::from(*c)).collect()),
        );
        row.insert("recommended_priority", Json::from(priority));
        let rank = match priority {
            "high" => 0,
            "medium" => 1,
            _ => 2,
        };
        rows.push((
            (
                rank,
                capsule.subject_kind.as_str().to_owned(),
                capsule.subject_id.clone(),
            ),
            Json::Object(row),
        ));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows.into_iter()
        .take(usize::try_from(request.limit).unwrap_or(0))
        .map(|(_, row)| row)
        .collect()
}

/// The persisted refresh state: `{schema_version, last_planned_at, last_run_at, last_run_count,
/// entries}`.
pub fn refresh_state(now: OffsetDateTime, candidates: &[Json]) -> Json {
    let mut body = JsonObject::new();
    body.insert("schema_version", Json::from("1.0"));
    body.insert("last_planned_at", Json::String(format_iso(now)));
    body.insert("last_run_at", Json::Null);
    body.insert("last_run_count", Json::from(0i64));
    body.insert("entries", Json::Array(candidates.to_vec()));
    Json::Object(body)
}

/// The refresh-plan response: `ok, count, generated_at, candidates, durable, latest_commit,
/// warnings`.
pub fn refresh_response(now: OffsetDateTime, candidates: &[Json], revision: Option<&str>) -> Json {
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("count", Json::from(candidates.len()));
    body.insert("generated_at", Json::String(format_iso(now)));
    body.insert("candidates", Json::Array(candidates.to_vec()));
    body.insert("durable", Json::Bool(true));
    body.insert("latest_commit", revision_json(revision));
    body.insert("warnings", Json::Array(vec![]));
    Json::Object(body)
}

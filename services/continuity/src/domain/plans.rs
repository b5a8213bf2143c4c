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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::domain::json::canonical_json;
    use crate::domain::write::archive_envelope;
    use time::Duration;

    fn capsule(id: &str) -> Capsule {
        let body = format!(
            r#"{{"subject_kind":"user","subject_id":"{id}","updated_at":"2025-01-01T00:00:00Z",
            "verified_at":"2025-01-01T00:00:00Z","source":{{"producer":"p","update_reason":"manual"}},
            "continuity":{{"top_priorities":[],"active_concerns":[],"active_constraints":[],
            "open_loops":[],"stance_summary":"s","drift_signals":[]}},
            "confidence":{{"continuity":0.5,"relationship_model":0.5}}}}"#
        );
        Capsule::from_json_at(&Json::parse(body.as_bytes()).unwrap(), &Default::default()).unwrap()
    }

    fn archive(id: &str, archived: OffsetDateTime, cold_state: ColdState) -> RetentionArchive {
        let subject = SubjectKey::new(SubjectKind::User, id).unwrap();
        let (path, envelope) = archive_envelope(&subject, &capsule(id), "owner", "done", archived);
        RetentionArchive {
            path,
            envelope: load_archive_envelope(canonical_json(&envelope).as_bytes()),
            cold_state,
        }
    }

    /// Digest §9: stale = older than `days·86400` s with no cold files; candidates sorted by
    /// (archived_at, kind, key, path); the window is `limit`, `total_candidates` counts all,
    /// `has_more` says the backlog is not drained; partial cold files and invalid envelopes
    /// become sorted warnings.
    #[test]
    fn retention_plan_windows_the_stale_backlog() {
        let now = parse_iso("2026-06-01T12:00:00Z").unwrap();
        let day = Duration::days(1);
        let mut invalid = archive("broken", now - day * 200, ColdState::None);
        invalid.envelope = load_archive_envelope(b"{\"schema_type\":\"other\"}");
        let archives = vec![
            archive("carol", now - day * 91, ColdState::None),
            archive("alice", now - day * 100, ColdState::None),
            archive("bob", now - day * 95, ColdState::None),
            archive("recent", now - day * 10, ColdState::None),
            archive("exactly", now - day * 90, ColdState::None),
            archive("frozen", now - day * 120, ColdState::Full),
            archive("half", now - day * 150, ColdState::Partial),
            invalid,
        ];
        let request = RetentionPlanRequest {
            subject_kind: None,
            limit: 2,
        };
        let plan = retention_plan(&request, archives, now, 90).unwrap();
        let ids: Vec<&str> = plan
            .candidates
            .iter()
            .map(|c| c.get("subject_id").unwrap().as_str().unwrap())
            .collect();
        assert_eq!(ids, ["alice", "bob"]);
        assert_eq!(plan.total_candidates, 3);
        assert!(plan.has_more());
        let half = SubjectKey::new(SubjectKind::User, "half").unwrap();
        let broken = SubjectKey::new(SubjectKind::User, "broken").unwrap();
        assert_eq!(
            plan.warnings,
            [
                format!(
                    "continuity_retention_partial_cold_conflict:{}",
                    half.archive_path(&format_compact(now - day * 150))
                ),
                format!(
                    "continuity_retention_skipped_invalid_archive:{}",
                    broken.archive_path(&format_compact(now - day * 200))
                ),
            ]
        );
        let archive_path = "memory/continuity/archive/user-alice-20260221T120000Z.json";
        let want = format!(
            concat!(
                r#"{{"subject_kind":"user","subject_id":"alice","source_archive_path":"{0}","#,
                r#""artifact_state":"archived","retention_class":"archive_stale","#,
                r#""policy_action":"cold_store","archived_at":"2026-02-21T12:00:00Z","age_days":100,"#,
                r#""cold_storage_path":"memory/continuity/cold/user-alice-20260221T120000Z.json.gz","#,
                r#""cold_stub_path":"memory/continuity/cold/index/user-alice-20260221T120000Z.md","#,
                r#""reason_codes":["archive_stale"]}}"#
            ),
            archive_path
        );
        assert_eq!(crate::domain::json::to_py_json(&plan.candidates[0]), want);
        let response = plan.response(Some("rev-1"));
        assert_eq!(response.get("count"), Some(&Json::from(2usize)));
        assert_eq!(response.get("has_more"), Some(&Json::Bool(true)));
        let persisted = plan.persisted();
        assert_eq!(
            persisted.get("schema_type").and_then(Json::as_str),
            Some("continuity_retention_plan")
        );

        // Draining: the same scan with a window as large as the backlog has nothing more.
        let drained = retention_plan(
            &RetentionPlanRequest {
                subject_kind: None,
                limit: 100,
            },
            vec![archive("alice", now - day * 100, ColdState::None)],
            now,
            90,
        )
        .unwrap();
        assert_eq!((drained.candidates.len(), drained.has_more()), (1, false));
    }

    /// Digest §9 refresh plan: reason codes in order, priorities, healthy rows dropped unless
    /// asked for, sorted by (priority, kind, id).
    #[test]
    fn refresh_plan_orders_by_priority() {
        let now = parse_iso("2026-06-01T00:00:00Z").unwrap();
        let mut verified = capsule("zed");
        verified.verified_at = "2026-05-30T00:00:00Z".into();
        verified.verification_state = Some(crate::domain::model::VerificationState {
            status: VerificationStatus::UserConfirmed,
            last_revalidated_at: "2026-05-30T00:00:00Z".into(),
            strongest_signal: crate::domain::model::SignalKind::UserConfirmation,
            evidence_refs: vec![],
            conflict_summary: None,
        });
        let sources = vec![
            RefreshSource {
                capsule: verified.clone(),
                fallback_only: false,
                recently_used: true,
            },
            RefreshSource {
                capsule: capsule("amy"),
                fallback_only: false,
                recently_used: false,
            },
            RefreshSource {
                capsule: capsule("bea"),
                fallback_only: true,
                recently_used: false,
            },
        ];
        let request = RefreshPlanRequest {
            subject_kind: None,
            limit: 25,
            include_healthy: false,
        };
        let rows = refresh_plan(&request, &sources, now);
        let summary: Vec<(String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.get("subject_id").unwrap().as_str().unwrap().to_owned(),
                    crate::domain::json::to_py_json(r.get("reason_codes").unwrap()),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "bea".to_owned(),
                    r#"["verification_unverified","stale_verified_at","fallback_only"]"#.to_owned()
                ),
                (
                    "amy".to_owned(),
                    r#"["verification_unverified","stale_verified_at"]"#.to_owned()
                ),
            ]
        );
        assert_eq!(
            rows[0].get("recommended_priority").and_then(Json::as_str),
            Some("high")
        );
        assert_eq!(
            rows[1].get("recommended_priority").and_then(Json::as_str),
            Some("medium")
        );
        let all = refresh_plan(
            &RefreshPlanRequest {
                include_healthy: true,
                ..request
            },
            &sources,
            now,
        );
        assert_eq!(all.len(), 3);
        assert_eq!(
            all[2].get("recommended_priority").and_then(Json::as_str),
            Some("low")
        );
    }
}

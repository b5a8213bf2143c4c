//! `POST /v1/continuity/upsert` (digest §4): the checks before the subject lock
//! ([`prepare_upsert`]) and the rules against the stored capsule under it ([`apply_upsert`]).

use serde_json::Value;

use super::error::ContinuityError;
use super::json::{Json, JsonObject};
use super::lifecycle::transition;
use super::model::{
    AttentionPolicy, Capsule, Freshness, IdentityAnchor, Lifecycle, NegativeDecision,
    RationaleEntry, RelationshipModel, RetrievalHints, StablePreference, ThreadDescriptor,
};
use super::normalize::{normalize_capsule, stamp_structured_entries, string_list_mut};
use super::request::{MergeMode, SessionEndSnapshot, Transition, UpsertRequest};
use super::stored::{StoredCapsule, reject_older_than_stored, reject_stale_timestamp};
use super::subject::SubjectKey;
use super::validation::{
    CAPSULE_SIZE_LIMIT_BYTES, CAPSULE_SIZE_LIMIT_DETAIL, RELATED_DOCUMENTS_TYPE_DETAIL,
    validate_capsule,
};
use super::write::{WriteResult, fallback_failure_fields, revision_json};

/// Minimum `stance_summary` length for resume adequacy.
pub const RESUME_STANCE_MIN_LEN: usize = 30;

/// An upsert that passed the checks made before the lock.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedUpsert {
    pub subject: SubjectKey,
    request: UpsertRequest,
    capsule: Capsule,
    snapshot_applied: bool,
}

impl PreparedUpsert {
    pub fn request(&self) -> &UpsertRequest {
        &self.request
    }
}

/// The result of an upsert: the write and the response facts.
#[derive(Debug, Clone, PartialEq)]
pub struct UpsertOutcome {
    pub write: WriteResult,
    pub normalizations_applied: Vec<String>,
    pub session_end_snapshot_applied: bool,
    /// `resume_quality.adequate`, when a snapshot was sent.
    pub resume_adequate: Option<bool>,
    pub lifecycle: Option<Lifecycle>,
}

/// open_loops, top_priorities and active_constraints non-empty, stance ≥ 30 characters.
pub fn resume_adequate(capsule: &Capsule) -> bool {
    let c = &capsule.continuity;
    !c.open_loops.is_empty()
        && !c.top_priorities.is_empty()
        && !c.active_constraints.is_empty()
        && c.stance_summary.chars().count() >= RESUME_STANCE_MIN_LEN
}

fn apply_session_end_snapshot(capsule: &mut Capsule, snapshot: &SessionEndSnapshot) {
    let c = &mut capsule.continuity;
    c.open_loops = snapshot.open_loops.clone();
    c.top_priorities = snapshot.top_priorities.clone();
    c.active_constraints = snapshot.active_constraints.clone();
    c.stance_summary = snapshot.stance_summary.clone();
    if let Some(v) = &snapshot.negative_decisions {
        c.negative_decisions = v.clone();
    }
    if let Some(v) = &snapshot.session_trajectory {
        c.session_trajectory = v.clone();
    }
    if let Some(v) = &snapshot.rationale_entries {
        c.rationale_entries = v.clone();
    }
}

fn snapshot_touched(snapshot: Option<&SessionEndSnapshot>) -> Vec<&'static str> {
    let Some(snapshot) = snapshot else {
        return Vec::new();
    };
    let mut touched = vec![
        "open_loops",
        "top_priorities",
        "active_constraints",
        "stance_summary",
    ];
    if snapshot.negative_decisions.is_some() {
        touched.push("negative_decisions");
    }
    if snapshot.session_trajectory.is_some() {
        touched.push("session_trajectory");
    }
    if snapshot.rationale_entries.is_some() {
        touched.push("rationale_entries");
    }
    touched
}

/// Steps 1–6 of §4: explicit `related_documents: null`, verification fields dropped, exact
/// subject match, the session-end snapshot merged, the lifecycle request checks, descriptor
/// lifecycle discarded, and the first (pre-normalisation) validation pass.
pub fn prepare_upsert(request: UpsertRequest) -> Result<PreparedUpsert, ContinuityError> {
    if matches!(
        request.capsule.continuity.related_documents,
        Some(Value::Null)
    ) {
        return Err(ContinuityError::invalid(RELATED_DOCUMENTS_TYPE_DETAIL));
    }
    let mut capsule = request.capsule.clone();
    capsule.verification_state = None;
    capsule.capsule_health = None;
    if capsule.subject_kind != request.subject_kind || capsule.subject_id != request.subject_id {
        return Err(ContinuityError::invalid(
            "Capsule subject does not match request subject",
        ));
    }
    let snapshot_applied = match &request.session_end_snapshot {
        Some(snapshot) => {
            apply_session_end_snapshot(&mut capsule, snapshot);
            true
        }
        None => false,
    };
    let subject = SubjectKey::new(request.subject_kind, &request.subject_id)?;
    check_lifecycle_fields(&request)?;
    if let Some(td) = capsule.thread_descriptor.as_mut() {
        td.lifecycle = None;
        td.superseded_by = None;
    }
    validate_capsule(&mut capsule)?;
    Ok(PreparedUpsert {
        subject,
        request,
        capsule,
        snapshot_applied,
    })
}

fn check_lifecycle_fields(request: &UpsertRequest) -> Result<(), ContinuityError> {
    if request.lifecycle_transition.is_none() && request.superseded_by.is_none() {
        return Ok(());
    }
    if request.superseded_by.is_some()
        && request.lifecycle_transition != Some(Transition::Supersede)
    {
        return Err(ContinuityError::invalid(
            "superseded_by is only allowed when lifecycle_transition is 'supersede'",
        ));
    }
    if !request.subject_kind.is_thread_like() {
        return Err(ContinuityError::invalid(
            if request.lifecycle_transition.is_some() {
                "lifecycle_transition is only allowed for thread and task capsules"
            } else {
                "superseded_by is only allowed for thread and task capsules"
            },
        ));
    }
    if request.lifecycle_transition == Some(Transition::Supersede)
        && request.superseded_by.is_none()
    {
        return Err(ContinuityError::invalid(
            "superseded_by is required when lifecycle_transition is 'supersede'",
        ));
    }
    Ok(())
}

/// Steps 7–11 of §4 against the stored active capsule (`None` when there is none).
pub fn apply_upsert(
    prepared: PreparedUpsert,
    stored: Option<&StoredCapsule>,
) -> Result<UpsertOutcome, ContinuityError> {
    let PreparedUpsert {
        subject,
        request,
        mut capsule,
        snapshot_applied,
    } = prepared;
    if let Some(stored) = stored {
        reject_older_than_stored(&request.capsule.updated_at, stored)?;
    }
    let stored_upgraded = stored.and_then(StoredCapsule::upgraded);
    if request.merge_mode == MergeMode::Preserve
        && let (Some(raw_body), Some(stored_value)) = (&request.raw_body, &stored_upgraded)
    {
        let touched = snapshot_touched(request.session_end_snapshot.as_ref());
        preserve_merge(&mut capsule, stored_value, raw_body, &touched)?;
    }
    let normalizations_applied = normalize_capsule(&mut capsule);
    let at = capsule.updated_at.clone();
    stamp_structured_entries(&mut capsule, stored_upgraded.as_ref(), &at);
    validate_capsule(&mut capsule)?;

    let stored_descriptor = stored_upgraded
        .as_ref()
        .and_then(|s| s.get("thread_descriptor"))
        .filter(|td| !td.is_null());
    match capsule.thread_descriptor.as_mut() {
        Some(td) => match stored_descriptor {
            None => {
                if request.lifecycle_transition.is_some() {
                    return Err(no_descriptor_to_transition());
                }
                td.lifecycle = Some(Lifecycle::Active);
                td.superseded_by = None;
            }
            Some(stored_td) => {
                let stored_lifecycle = stored_td
                    .get("lifecycle")
                    .and_then(Value::as_str)
                    .and_then(Lifecycle::parse)
                    .unwrap_or(Lifecycle::Active);
                match request.lifecycle_transition {
                    None => {
                        td.lifecycle = Some(stored_lifecycle);
                        td.superseded_by = stored_td
                            .get("superseded_by")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                    }
                    Some(t) => {
                        td.lifecycle = Some(transition(stored_lifecycle, t)?);
                        td.superseded_by = if t == Transition::Supersede {
                            request.superseded_by.clone()
                        } else {
                            None
                        };
                    }
                }
            }
        },
        None if request.lifecycle_transition.is_some() => {
            return Err(no_descriptor_to_transition());
        }
        None => {}
    }

    let canonical = capsule.canonical_json();
    if canonical.len() > CAPSULE_SIZE_LIMIT_BYTES {
        return Err(ContinuityError::invalid(CAPSULE_SIZE_LIMIT_DETAIL));
    }
    let stored_bytes = stored.map(StoredCapsule::bytes);
    if stored_bytes != Some(canonical.as_bytes())
        && let Some(current) = stored.and_then(StoredCapsule::model)
    {
        reject_stale_timestamp(&capsule.updated_at, &current.updated_at)?;
    }
    let lifecycle = capsule
        .thread_descriptor
        .as_ref()
        .and_then(|td| td.lifecycle);
    let resume = snapshot_applied.then(|| resume_adequate(&capsule));
    Ok(UpsertOutcome {
        write: WriteResult::new(subject, capsule, canonical, stored_bytes),
        normalizations_applied,
        session_end_snapshot_applied: snapshot_applied,
        resume_adequate: resume,
        lifecycle,
    })
}

fn no_descriptor_to_transition() -> ContinuityError {
    ContinuityError::invalid("no thread_descriptor to transition; create one first")
}

fn typed<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, ContinuityError> {
    serde_json::from_value(value.clone()).map_err(|err| ContinuityError::Unhandled {
        code: "ValidationError".to_owned(),
        detail: err.to_string(),
    })
}

/// §4.1: field intent judged on the raw body (absent → keep stored, `null` → clear, `[]` on a
/// required list → keep stored), fields set by the session-end snapshot counting as sent.
fn preserve_merge(
    capsule: &mut Capsule,
    stored: &Value,
    raw_body: &Json,
    touched: &[&str],
) -> Result<(), ContinuityError> {
    let empty = JsonObject::new();
    let raw_capsule = raw_body
        .get("capsule")
        .and_then(Json::as_object)
        .unwrap_or(&empty);
    let raw_continuity = raw_capsule
        .get("continuity")
        .and_then(Json::as_object)
        .unwrap_or(&empty);
    let stored_continuity = stored.get("continuity").cloned().unwrap_or(Value::Null);
    let stored_field = |name: &str| stored_continuity.get(name).filter(|v| !v.is_null());

    for field in [
        "top_priorities",
        "active_concerns",
        "active_constraints",
        "open_loops",
        "drift_signals",
    ] {
        if touched.contains(&field) {
            continue;
        }
        let sent_empty =
            matches!(raw_continuity.get(field), Some(Json::Array(items)) if items.is_empty());
        if sent_empty && let Some(value) = stored_field(field) {
            let list: Vec<String> = typed(value)?;
            if let Some(slot) = string_list_mut(capsule, field) {
                *slot = list;
            }
        }
    }

    for field in [
        "working_hypotheses",
        "long_horizon_commitments",
        "session_trajectory",
        "trailing_notes",
        "curiosity_queue",
        "negative_decisions",
        "rationale_entries",
        "related_documents",
    ] {
        if touched.contains(&field) {
            continue;
        }
        let c = &mut capsule.continuity;
        match raw_continuity.get(field) {
            None => {
                if let Some(value) = stored_field(field) {
                    match field {
                        "negative_decisions" => {
                            c.negative_decisions = typed::<Vec<NegativeDecision>>(value)?
                        }
                        "rationale_entries" => {
                            c.rationale_entries = typed::<Vec<RationaleEntry>>(value)?
                        }
                        "related_documents" => c.related_documents = Some(value.clone()),
                        _ => {
                            let list: Vec<String> = typed(value)?;
                            if let Some(slot) = string_list_mut(capsule, field) {
                                *slot = list;
                            }
                        }
                    }
                }
            }
            // Unreachable through pydantic (these lists are not nullable) except
            // related_documents, which the request check refused already.
            Some(Json::Null) => match field {
                "negative_decisions" => c.negative_decisions.clear(),
                "rationale_entries" => c.rationale_entries.clear(),
                "related_documents" => c.related_documents = Some(Value::Array(vec![])),
                _ => {
                    if let Some(slot) = string_list_mut(capsule, field) {
                        slot.clear();
                    }
                }
            },
            Some(_) => {}
        }
    }

    let c = &mut capsule.continuity;
    match raw_continuity.get("relationship_model") {
        None => {
            if let Some(value) = stored_field("relationship_model") {
                c.relationship_model = Some(typed::<RelationshipModel>(value)?);
            }
        }
        Some(Json::Null) => c.relationship_model = None,
        Some(_) => {}
    }
    match raw_continuity.get("retrieval_hints") {
        None => {
            if let Some(value) = stored_field("retrieval_hints") {
                c.retrieval_hints = Some(typed::<RetrievalHints>(value)?);
            }
        }
        Some(Json::Null) => c.retrieval_hints = None,
        Some(_) => {}
    }

    let stored_top = |name: &str| stored.get(name).filter(|v| !v.is_null());
    match raw_capsule.get("canonical_sources") {
        None => {
            if let Some(value) = stored_top("canonical_sources") {
                capsule.canonical_sources = typed(value)?;
            }
        }
        Some(Json::Null) => capsule.canonical_sources.clear(),
        Some(_) => {}
    }
    match raw_capsule.get("stable_preferences") {
        None => {
            if let Some(value) = stored_top("stable_preferences") {
                capsule.stable_preferences = typed::<Vec<StablePreference>>(value)?;
            }
        }
        Some(Json::Null) => capsule.stable_preferences.clear(),
        Some(_) => {}
    }
    match raw_capsule.get("attention_policy") {
        None => {
            if let Some(value) = stored_top("attention_policy") {
                capsule.attention_policy = Some(typed::<AttentionPolicy>(value)?);
            }
        }
        Some(Json::Null) => capsule.attention_policy = None,
        Some(_) => {}
    }
    match raw_capsule.get("freshness") {
        None => {
            if let Some(value) = stored_top("freshness") {
                capsule.freshness = Some(typed::<Freshness>(value)?);
            }
        }
        Some(Json::Null) => capsule.freshness = None,
        Some(_) => {}
    }
    match raw_capsule.get("metadata") {
        None => {
            if let Some(Value::Object(value)) = stored_top("metadata") {
                capsule.metadata = value.clone();
            }
        }
        Some(Json::Null) => capsule.metadata.clear(),
        Some(_) => {}
    }
    match raw_capsule.get("thread_descriptor") {
        None => {
            if let Some(value) = stored_top("thread_descriptor") {
                capsule.thread_descriptor = Some(typed::<ThreadDescriptor>(value)?);
            }
        }
        Some(Json::Null) => capsule.thread_descriptor = None,
        Some(raw_td) => {
            if let Some(td) = capsule.thread_descriptor.as_mut() {
                let stored_td = stored_top("thread_descriptor");
                let stored_sub =
                    |name: &str| stored_td.and_then(|t| t.get(name)).filter(|v| !v.is_null());
                for field in ["keywords", "scope_anchors", "identity_anchors"] {
                    match raw_td.get(field) {
                        None => {
                            if let Some(value) = stored_sub(field) {
                                match field {
                                    "keywords" => td.keywords = typed(value)?,
                                    "scope_anchors" => td.scope_anchors = typed(value)?,
                                    _ => td.identity_anchors = typed::<Vec<IdentityAnchor>>(value)?,
                                }
                            }
                        }
                        Some(Json::Null) => match field {
                            "keywords" => td.keywords.clear(),
                            "scope_anchors" => td.scope_anchors.clear(),
                            _ => td.identity_anchors.clear(),
                        },
                        Some(_) => {}
                    }
                }
            }
        }
    }
    Ok(())
}

impl UpsertOutcome {
    /// The original's response body (key order as it builds it). `revision` stands where it
    /// gives `latest_commit`; `fallback_failure` is the detail when the fallback refresh failed
    /// after the active write committed.
    pub fn response(&self, revision: Option<&str>, fallback_failure: Option<&str>) -> Json {
        let path = self.write.path();
        let (warnings, recovery, detail) = fallback_failure_fields(&path, fallback_failure);
        let mut body = JsonObject::new();
        body.insert("ok", Json::Bool(true));
        body.insert("path", Json::String(path));
        body.insert("created", Json::Bool(self.write.created));
        body.insert("updated", Json::Bool(self.write.updated()));
        body.insert("durable", Json::Bool(true));
        body.insert("latest_commit", revision_json(revision));
        body.insert("capsule_sha256", Json::String(self.write.sha256.clone()));
        body.insert(
            "normalizations_applied",
            Json::Array(
                self.normalizations_applied
                    .iter()
                    .map(|s| Json::from(s.as_str()))
                    .collect(),
            ),
        );
        body.insert("warnings", warnings);
        body.insert("recovery_warnings", recovery);
        body.insert("fallback_warning_detail", detail);
        if self.session_end_snapshot_applied {
            body.insert("session_end_snapshot_applied", Json::Bool(true));
            let mut quality = JsonObject::new();
            quality.insert(
                "adequate",
                Json::Bool(self.resume_adequate.unwrap_or(false)),
            );
            body.insert("resume_quality", Json::Object(quality));
        }
        if let Some(lifecycle) = self.lifecycle {
            body.insert("lifecycle", Json::from(lifecycle.as_str()));
        }
        Json::Object(body)
    }
}

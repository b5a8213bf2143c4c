//! Compare and revalidate (digest §9): the diff, the strongest signal, the recommended
//! outcome, and revalidation as the only writer of `verification_state` and `capsule_health`.

use serde_json::Value;
use time::OffsetDateTime;

use super::error::ContinuityError;
use super::json::{Json, JsonObject, py_eq};
use super::model::{
    Capsule, CapsuleHealth, HealthStatus, SignalKind, VerificationState, VerificationStatus,
};
use super::request::{CompareRequest, Outcome, RevalidateRequest, VerificationSignal};
use super::stored::StoredCapsule;
use super::subject::SubjectKey;
use super::timestamp::{format_iso, require_utc, whole_seconds};
use super::validation::{validate_candidate_subject, validate_final_capsule};
use super::write::{WriteResult, fallback_failure_fields, revision_json};

const TOP_LEVEL_ORDER: [&str; 12] = [
    "subject_kind",
    "subject_id",
    "schema_version",
    "updated_at",
    "source",
    "continuity",
    "confidence",
    "attention_policy",
    "freshness",
    "canonical_sources",
    "metadata",
    "thread_descriptor",
];
const IGNORED: [&str; 4] = [
    "verified_at",
    "verification_kind",
    "verification_state",
    "capsule_health",
];

fn nested_order(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "source" => &["producer", "update_reason", "inputs"],
        "confidence" => &["continuity", "relationship_model"],
        "freshness" => &["freshness_class", "expires_at", "stale_after_seconds"],
        "attention_policy" => &["early_load", "presence_bias_overrides"],
        "continuity" => &[
            "top_priorities",
            "active_concerns",
            "active_constraints",
            "open_loops",
            "stance_summary",
            "drift_signals",
            "working_hypotheses",
            "long_horizon_commitments",
            "session_trajectory",
            "negative_decisions",
            "trailing_notes",
            "curiosity_queue",
            "rationale_entries",
            "related_documents",
            "relationship_model",
            "retrieval_hints",
        ],
        "relationship_model" => &["trust_level", "preferred_style", "sensitivity_notes"],
        "retrieval_hints" => &["must_include", "avoid", "load_next"],
        "thread_descriptor" => &[
            "label",
            "keywords",
            "scope_anchors",
            "identity_anchors",
            "lifecycle",
            "superseded_by",
        ],
        _ => return None,
    })
}

fn child_order(key: &str) -> Option<&str> {
    if nested_order(key).is_some() || key == "metadata" {
        Some(key)
    } else {
        None
    }
}

fn compare_values(left: &Value, right: &Value, path: &str, order: Option<&str>) -> Vec<String> {
    if py_eq(left, right) {
        return Vec::new();
    }
    match (left, right) {
        (Value::Array(_), Value::Array(_)) => vec![path.to_owned()],
        (Value::Object(l), Value::Object(r)) => {
            let mut union: Vec<&String> = l.keys().chain(r.keys()).collect();
            union.sort();
            union.dedup();
            let keys: Vec<String> = if order == Some("metadata") {
                union.into_iter().cloned().collect()
            } else {
                let mut keys: Vec<String> = nested_order(order.unwrap_or(""))
                    .unwrap_or(&[])
                    .iter()
                    .map(|k| (*k).to_owned())
                    .collect();
                for key in union {
                    if !keys.contains(key) && !IGNORED.contains(&key.as_str()) {
                        keys.push(key.clone());
                    }
                }
                keys
            };
            let mut changes = Vec::new();
            for key in keys {
                if IGNORED.contains(&key.as_str()) {
                    continue;
                }
                let (lv, rv) = (l.get(&key), r.get(&key));
                let l_val = lv.unwrap_or(&Value::Null);
                let r_val = rv.unwrap_or(&Value::Null);
                if l_val.is_null() && r_val.is_null() && (lv.is_some() || rv.is_some()) {
                    continue;
                }
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                changes.extend(compare_values(l_val, r_val, &child, child_order(&key)));
            }
            changes
        }
        _ => vec![path.to_owned()],
    }
}

/// `changed_fields`: the shallowest differing paths in the original's traversal order.
pub fn compare_capsules(active: &Value, candidate: &Value) -> Vec<String> {
    let mut changes = Vec::new();
    for key in TOP_LEVEL_ORDER {
        let (a, c) = (active.get(key), candidate.get(key));
        let a_val = a.unwrap_or(&Value::Null);
        let c_val = c.unwrap_or(&Value::Null);
        if a_val.is_null() && c_val.is_null() && (a.is_some() || c.is_some()) {
            continue;
        }
        changes.extend(compare_values(a_val, c_val, key, child_order(key)));
    }
    changes
}

/// The highest-ranked signal kind, the first one on ties.
pub fn strongest_signal(signals: &[VerificationSignal]) -> Option<SignalKind> {
    let mut strongest = signals.first()?.kind;
    for signal in &signals[1..] {
        if signal.kind.rank() > strongest.rank() {
            strongest = signal.kind;
        }
    }
    Some(strongest)
}

fn check_signals(signals: &[VerificationSignal]) -> Result<SignalKind, ContinuityError> {
    for signal in signals {
        require_utc(&signal.observed_at, "signals.observed_at")?;
    }
    // The request model requires at least one signal.
    strongest_signal(signals).ok_or_else(|| ContinuityError::invalid("signals must not be empty"))
}

/// A capsule validated like a write (including the revalidation-owned fields) and dumped.
fn normalized_payload(capsule: &mut Capsule) -> Result<Value, ContinuityError> {
    validate_final_capsule(capsule)?;
    Ok(capsule.to_value())
}

/// What compare answers.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOutcome {
    pub path: String,
    pub changed_fields: Vec<String>,
    pub strongest_signal: SignalKind,
    pub recommended_outcome: Outcome,
}

impl CompareOutcome {
    pub fn identical(&self) -> bool {
        self.changed_fields.is_empty()
    }

    /// `ok, path, identical, changed_fields, strongest_signal, recommended_outcome`.
    pub fn response(&self) -> Json {
        let mut body = JsonObject::new();
        body.insert("ok", Json::Bool(true));
        body.insert("path", Json::from(self.path.as_str()));
        body.insert("identical", Json::Bool(self.identical()));
        body.insert(
            "changed_fields",
            Json::Array(
                self.changed_fields
                    .iter()
                    .map(|f| Json::from(f.as_str()))
                    .collect(),
            ),
        );
        body.insert(
            "strongest_signal",
            Json::from(self.strongest_signal.as_str()),
        );
        body.insert(
            "recommended_outcome",
            Json::from(self.recommended_outcome.as_str()),
        );
        Json::Object(body)
    }
}

/// The checks compare makes before loading the active capsule: signals, candidate subject,
/// candidate validity. Returns the subject and the candidate's normalised payload.
pub fn check_compare(request: &CompareRequest) -> Result<(SubjectKey, Value), ContinuityError> {
    check_signals(&request.signals)?;
    validate_candidate_subject(
        request.subject_kind,
        &request.subject_id,
        &request.candidate_capsule,
    )?;
    let mut candidate = request.candidate_capsule.clone();
    let payload = normalized_payload(&mut candidate)?;
    let subject = SubjectKey::new(request.subject_kind, &request.subject_id)?;
    Ok((subject, payload))
}

/// `POST /v1/continuity/compare` against the stored active capsule (`None`: 404).
pub fn compare(
    request: &CompareRequest,
    active: Option<&StoredCapsule>,
) -> Result<CompareOutcome, ContinuityError> {
    let (subject, candidate) = check_compare(request)?;
    let active =
        active.ok_or_else(|| ContinuityError::not_found("Continuity capsule not found"))?;
    let (active, _) = active.load_for_read(Some((request.subject_kind, &request.subject_id)))?;
    let changed_fields = compare_capsules(&active.to_value(), &candidate);
    let strongest = check_signals(&request.signals)?;
    let recommended = if changed_fields.is_empty() {
        Outcome::Confirm
    } else if strongest != SignalKind::SelfReview {
        Outcome::Correct
    } else {
        Outcome::Conflict
    };
    Ok(CompareOutcome {
        path: subject.active_path(),
        changed_fields,
        strongest_signal: strongest,
        recommended_outcome: recommended,
    })
}

/// The checks revalidate makes before the lock.
pub fn check_revalidate(request: &RevalidateRequest) -> Result<SubjectKey, ContinuityError> {
    check_signals(&request.signals)?;
    match (&request.outcome, &request.candidate_capsule) {
        (Outcome::Correct, None) => {
            return Err(ContinuityError::invalid(
                "candidate_capsule is required for outcome=correct",
            ));
        }
        (Outcome::Correct, Some(candidate)) => {
            validate_candidate_subject(request.subject_kind, &request.subject_id, candidate)?;
            normalized_payload(&mut candidate.clone())?;
        }
        (outcome, Some(_)) => {
            return Err(ContinuityError::invalid(format!(
                "candidate_capsule is not allowed for outcome={}",
                outcome.as_str()
            )));
        }
        (_, None) => {}
    }
    if request.outcome == Outcome::Confirm && request.reason.is_some() {
        return Err(ContinuityError::invalid(
            "reason is not allowed for outcome=confirm",
        ));
    }
    if matches!(request.outcome, Outcome::Degrade | Outcome::Conflict)
        && request.reason.as_deref().is_none_or(str::is_empty)
    {
        return Err(ContinuityError::invalid(format!(
            "reason is required for outcome={}",
            request.outcome.as_str()
        )));
    }
    SubjectKey::new(request.subject_kind, &request.subject_id)
}

/// What revalidation wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RevalidateOutcome {
    pub write: WriteResult,
    /// `correct` with no difference becomes `confirm`.
    pub outcome: Outcome,
    /// The candidate replaced the active capsule.
    pub updated: bool,
    pub changed_fields: Vec<String>,
    pub strongest_signal: SignalKind,
}

/// `POST /v1/continuity/revalidate` against the stored active capsule at `now` (UTC seconds).
/// `correct` replaces the capsule without the stale-timestamp guard, as the original does.
pub fn revalidate(
    request: &RevalidateRequest,
    active: Option<&StoredCapsule>,
    now: OffsetDateTime,
) -> Result<RevalidateOutcome, ContinuityError> {
    let subject = check_revalidate(request)?;
    let stored =
        active.ok_or_else(|| ContinuityError::not_found("Continuity capsule not found"))?;
    let (mut active, _) =
        stored.load_for_read(Some((request.subject_kind, &request.subject_id)))?;
    let now_iso = format_iso(whole_seconds(now));
    let strongest = check_signals(&request.signals)?;
    let evidence_refs: Vec<String> = request
        .signals
        .iter()
        .take(4)
        .map(|s| s.source_ref.clone())
        .collect();

    let (mut capsule, outcome, updated, changed_fields) =
        match (request.outcome, &request.candidate_capsule) {
            (Outcome::Correct, Some(candidate)) => {
                let mut candidate = candidate.clone();
                let active_payload = normalized_payload(&mut active)?;
                let candidate_payload = normalized_payload(&mut candidate)?;
                let changes = compare_capsules(&active_payload, &candidate_payload);
                if changes.is_empty() {
                    (active, Outcome::Confirm, false, Vec::new())
                } else {
                    (candidate, Outcome::Correct, true, changes)
                }
            }
            (outcome, _) => (active, outcome, false, Vec::new()),
        };

    capsule.verified_at = now_iso.clone();
    capsule.verification_kind = Some(strongest);
    let reason = request.reason.clone();
    let (status, conflict_summary, health, reasons) = match outcome {
        Outcome::Conflict => (
            VerificationStatus::Conflicted,
            reason.clone(),
            HealthStatus::Conflicted,
            reason.into_iter().collect(),
        ),
        Outcome::Degrade => (
            strongest.status(),
            None,
            HealthStatus::Degraded,
            reason.into_iter().collect(),
        ),
        _ => (strongest.status(), None, HealthStatus::Healthy, Vec::new()),
    };
    capsule.verification_state = Some(VerificationState {
        status,
        last_revalidated_at: now_iso.clone(),
        strongest_signal: strongest,
        evidence_refs,
        conflict_summary,
    });
    capsule.capsule_health = Some(CapsuleHealth {
        status: health,
        reasons,
        last_checked_at: now_iso,
    });
    let canonical = validate_final_capsule(&mut capsule)?;
    Ok(RevalidateOutcome {
        write: WriteResult::new(subject, capsule, canonical, Some(stored.bytes())),
        outcome,
        updated,
        changed_fields,
        strongest_signal: strongest,
    })
}

impl RevalidateOutcome {
    /// `ok, path, outcome, updated, verification_state, capsule_health, durable, latest_commit,
    /// warnings, recovery_warnings, fallback_warning_detail`.
    pub fn response(&self, revision: Option<&str>, fallback_failure: Option<&str>) -> Json {
        let path = self.write.path();
        let (warnings, recovery, detail) = fallback_failure_fields(&path, fallback_failure);
        let dumped = self.write.capsule.to_json();
        let mut body = JsonObject::new();
        body.insert("ok", Json::Bool(true));
        body.insert("path", Json::String(path));
        body.insert("outcome", Json::from(self.outcome.as_str()));
        body.insert("updated", Json::Bool(self.updated));
        body.insert(
            "verification_state",
            dumped
                .get("verification_state")
                .cloned()
                .unwrap_or(Json::Null),
        );
        body.insert(
            "capsule_health",
            dumped.get("capsule_health").cloned().unwrap_or(Json::Null),
        );
        body.insert("durable", Json::Bool(true));
        body.insert("latest_commit", revision_json(revision));
        body.insert("warnings", warnings);
        body.insert("recovery_warnings", recovery);
        body.insert("fallback_warning_detail", detail);
        Json::Object(body)
    }
}

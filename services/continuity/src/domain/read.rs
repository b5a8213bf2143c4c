//! `POST /v1/continuity/read` (digest §7): active capsule, fallback degradation, trust signals,
//! the superseded warning and the startup view.

use std::sync::Arc;

use time::OffsetDateTime;

use super::error::ContinuityError;
use super::json::{Json, JsonObject, to_py_json};
use super::model::{Capsule, Lifecycle, SubjectKind};
use super::request::ReadRequest;
use super::stored::{StoredCapsule, names_subject};
use super::subject::SubjectKey;
use super::trust::{SourceState, startup_summary, trust_signals};

/// The capsule a read resolved to.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadOutcome {
    pub path: String,
    /// Shared with the service's cache of loaded revisions: a read does not copy it.
    pub capsule: Option<Arc<Capsule>>,
    pub source_state: SourceState,
    pub recovery_warnings: Vec<String>,
}

/// A capsule as loaded for a read, with its recovery warnings, or why it could not be.
pub type Loaded = Result<(Arc<Capsule>, Vec<String>), ContinuityError>;

/// A stored capsule loaded for reading, shared so that a cached load is never copied.
pub fn load_stored(bytes: &[u8]) -> Loaded {
    StoredCapsule::new(bytes)
        .load_for_read(None)
        .map(|(capsule, warnings)| (Arc::new(capsule), warnings))
}

/// `loaded` for a read of (`kind`, `subject_id`): refused with `mismatch` when the capsule
/// names another subject.
pub fn loaded_as(loaded: &Loaded, kind: SubjectKind, subject_id: &str, mismatch: &str) -> Loaded {
    match loaded {
        Ok((capsule, warnings)) if names_subject(capsule, kind, subject_id) => {
            Ok((Arc::clone(capsule), warnings.clone()))
        }
        Ok(_) => Err(ContinuityError::SubjectMismatch(mismatch.to_owned())),
        Err(err) => Err(err.clone()),
    }
}

/// The read's resolution over capsules already loaded (`None`: the artifact does not
/// exist); `fallback` is asked only when the active capsule cannot be used.
pub fn resolve_loaded(
    request: &ReadRequest,
    active: Option<Loaded>,
    fallback: impl FnOnce() -> Option<Loaded>,
) -> Result<ReadOutcome, ContinuityError> {
    let subject = SubjectKey::new(request.subject_kind, &request.subject_id)?;
    let path = subject.active_path();
    let mut warnings = Vec::new();
    let active_result =
        active.unwrap_or_else(|| Err(ContinuityError::not_found("Continuity capsule not found")));
    let error = match active_result {
        Ok((capsule, rd_warnings)) => {
            warnings.extend(rd_warnings);
            return Ok(ReadOutcome {
                path,
                capsule: Some(capsule),
                source_state: SourceState::Active,
                recovery_warnings: warnings,
            });
        }
        Err(error) => error,
    };
    match &error {
        ContinuityError::NotFound(_) => warnings.push("continuity_active_missing".to_owned()),
        ContinuityError::Invalid(_) => warnings.push("continuity_active_invalid".to_owned()),
        // A capsule of another subject (`SubjectMismatch`) is refused, not fallen back from.
        _ => return Err(error),
    }
    if !request.allow_fallback {
        return Err(error);
    }
    let loaded = fallback().unwrap_or_else(|| {
        Err(ContinuityError::not_found(
            "Continuity fallback snapshot not found",
        ))
    });
    match loaded {
        Ok((capsule, rd_warnings)) => {
            warnings.push("continuity_fallback_used".to_owned());
            warnings.extend(rd_warnings);
            Ok(ReadOutcome {
                path,
                capsule: Some(capsule),
                source_state: SourceState::Fallback,
                recovery_warnings: warnings,
            })
        }
        Err(
            ContinuityError::Invalid(_)
            | ContinuityError::SubjectMismatch(_)
            | ContinuityError::NotFound(_),
        ) => {
            warnings.push("continuity_fallback_missing".to_owned());
            Ok(ReadOutcome {
                path,
                capsule: None,
                source_state: SourceState::Missing,
                recovery_warnings: warnings,
            })
        }
        Err(other) => Err(other),
    }
}

/// What the startup view adds besides `startup_summary`, supplied by the graph and schedule
/// derivations (issue 16).
#[derive(Debug, Clone, PartialEq)]
pub struct StartupExtras {
    pub graph_summary: Json,
    pub schedule_context: Json,
}

/// The read response in the original's key order: `ok, path, capsule, archived, source_state,
/// recovery_warnings, trust_signals` and, for the startup view, `startup_summary,
/// graph_summary, schedule_context`.
pub fn read_response(
    outcome: &ReadOutcome,
    now: OffsetDateTime,
    startup: Option<StartupExtras>,
) -> Json {
    let capsule = outcome
        .capsule
        .as_ref()
        .map_or(Json::Null, |capsule| capsule.to_json());
    Json::Object(response_members(outcome, now, startup, capsule))
}

/// [`read_response`] as the compact bytes the original sends, with the capsule given as its
/// JSON already serialised (`capsule_json`, the same revision's, kept by the caller: a
/// revision never changes, so its JSON is built once rather than on every read).
pub fn read_body(
    outcome: &ReadOutcome,
    now: OffsetDateTime,
    startup: Option<StartupExtras>,
    capsule_json: Option<&str>,
) -> Vec<u8> {
    let Some(capsule_json) = capsule_json.filter(|_| outcome.capsule.is_some()) else {
        return to_py_json(&read_response(outcome, now, startup)).into_bytes();
    };
    let members = response_members(outcome, now, startup, Json::Null);
    let mut out = String::with_capacity(capsule_json.len() + 1024);
    out.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&to_py_json(key));
        out.push(':');
        if key == "capsule" {
            out.push_str(capsule_json);
        } else {
            out.push_str(&to_py_json(value));
        }
    }
    out.push('}');
    out.into_bytes()
}

fn response_members(
    outcome: &ReadOutcome,
    now: OffsetDateTime,
    startup: Option<StartupExtras>,
    capsule: Json,
) -> JsonObject {
    let signals = outcome.capsule.as_ref().map_or(Json::Null, |c| {
        trust_signals(c, now, outcome.source_state, &[])
    });
    let mut warnings = outcome.recovery_warnings.clone();
    if let Some(td) = outcome.capsule.as_ref().and_then(|c| {
        c.thread_descriptor
            .as_ref()
            .filter(|td| td.lifecycle == Some(Lifecycle::Superseded))
            .map(|td| (c, td))
    }) {
        let (capsule, td) = td;
        warnings.push(format!(
            "continuity_capsule_superseded:thread:{}\u{2192}{}",
            capsule.subject_id,
            td.superseded_by.as_deref().unwrap_or("unknown")
        ));
    }
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("path", Json::from(outcome.path.as_str()));
    body.insert("capsule", capsule);
    body.insert("archived", Json::Bool(false));
    body.insert("source_state", Json::from(outcome.source_state.as_str()));
    body.insert(
        "recovery_warnings",
        Json::Array(warnings.iter().map(|w| Json::from(w.as_str())).collect()),
    );
    body.insert("trust_signals", signals.clone());
    if let Some(extras) = startup {
        body.insert(
            "startup_summary",
            startup_summary(
                outcome.capsule.as_deref(),
                outcome.source_state,
                &warnings,
                &signals,
            ),
        );
        body.insert("graph_summary", extras.graph_summary);
        body.insert("schedule_context", extras.schedule_context);
    }
    body
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::json::canonical_json;

    const ACTIVE_MISMATCH: &str = "Continuity capsule subject does not match requested subject";
    const FALLBACK_MISMATCH: &str =
        "Continuity fallback snapshot subject does not match requested subject";

    /// A stored revision's capsule of thread `subject_id`, loaded as the service loads it
    /// for a read of thread `release-42`, with `mismatch` as the refusal's detail.
    fn loaded_for_release_42(subject_id: &str, mismatch: &str) -> Loaded {
        let body = format!(
            r#"{{"subject_kind":"thread","subject_id":"{subject_id}",
            "updated_at":"2026-01-01T00:00:00Z","verified_at":"2026-01-01T00:00:00Z",
            "verification_kind":"self_review","source":{{"producer":"p","update_reason":"manual"}},
            "continuity":{{"top_priorities":["ship"],"active_concerns":[],"active_constraints":[],
            "open_loops":[],"stance_summary":"calm","drift_signals":[]}},
            "confidence":{{"continuity":0.5,"relationship_model":0.25}}}}"#
        );
        let capsule =
            Capsule::from_json_at(&Json::parse(body.as_bytes()).unwrap(), &Default::default())
                .unwrap();
        let stored = load_stored(canonical_json(&capsule.to_json()).as_bytes());
        loaded_as(&stored, SubjectKind::Thread, "release-42", mismatch)
    }

    fn request() -> ReadRequest {
        ReadRequest {
            subject_kind: SubjectKind::Thread,
            subject_id: "release-42".to_owned(),
            allow_fallback: true,
            view: None,
        }
    }

    /// An active capsule of another subject is refused with the original's 400, even when
    /// the read allows a fallback.
    #[test]
    fn an_active_capsule_of_another_subject_is_refused() {
        let active = loaded_for_release_42("other", ACTIVE_MISMATCH);
        let fallback = || Some(loaded_for_release_42("release-42", FALLBACK_MISMATCH));
        let err = resolve_loaded(&request(), Some(active), fallback).unwrap_err();
        assert_eq!(
            err,
            ContinuityError::SubjectMismatch(
                "Continuity capsule subject does not match requested subject".into()
            )
        );
        assert_eq!(err.http_status(), 400);
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":"Continuity capsule subject does not match requested subject"}"#
        );
    }

    /// A fallback snapshot of another subject counts as missing (a read without a capsule),
    /// and one of the subject is used.
    #[test]
    fn a_fallback_of_another_subject_counts_as_missing() {
        let fallback = |id: &str| Some(loaded_for_release_42(id, FALLBACK_MISMATCH));
        let outcome = resolve_loaded(&request(), None, || fallback("other")).unwrap();
        assert_eq!(outcome.source_state, SourceState::Missing);
        assert!(outcome.capsule.is_none());
        assert_eq!(
            outcome.recovery_warnings,
            ["continuity_active_missing", "continuity_fallback_missing"]
        );
        let outcome = resolve_loaded(&request(), None, || fallback("release-42")).unwrap();
        assert_eq!(outcome.source_state, SourceState::Fallback);
        assert_eq!(outcome.capsule.unwrap().subject_id, "release-42");
    }
}

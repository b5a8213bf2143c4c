//! The thread/task lifecycle state machine (digest §5) and `POST /v1/continuity/lifecycle`.

use super::error::ContinuityError;
use super::json::{Json, JsonObject};
use super::model::{Capsule, Lifecycle};
use super::request::{LifecycleRequest, Transition};
use super::stored::{StoredCapsule, reject_stale_timestamp};
use super::subject::SubjectKey;
use super::timestamp::require_utc;
use super::validation::CAPSULE_SIZE_LIMIT_BYTES;
use super::validation::CAPSULE_SIZE_LIMIT_DETAIL;
use super::write::{WriteResult, fallback_failure_fields, revision_json};

/// The transitions allowed from a state; `None` for the terminal states.
pub fn allowed_transitions(from: Lifecycle) -> Option<&'static [Transition]> {
    match from {
        Lifecycle::Active => Some(&[
            Transition::Suspend,
            Transition::Conclude,
            Transition::Supersede,
        ]),
        Lifecycle::Suspended => Some(&[
            Transition::Resume,
            Transition::Conclude,
            Transition::Supersede,
        ]),
        Lifecycle::Concluded | Lifecycle::Superseded => None,
    }
}

/// Applies `transition` from `from`, or the original's 400.
pub fn transition(from: Lifecycle, transition: Transition) -> Result<Lifecycle, ContinuityError> {
    let allowed = allowed_transitions(from).ok_or_else(|| {
        ContinuityError::invalid(format!(
            "lifecycle transition not allowed from terminal state '{from}'"
        ))
    })?;
    if !allowed.contains(&transition) {
        return Err(ContinuityError::invalid(format!(
            "lifecycle transition '{transition}' not allowed from '{from}'"
        )));
    }
    Ok(transition.target())
}

/// The checks the original makes before taking the subject lock.
pub fn check_lifecycle_request(request: &LifecycleRequest) -> Result<SubjectKey, ContinuityError> {
    require_utc(&request.updated_at, "updated_at")?;
    let subject = SubjectKey::new(request.subject_kind, &request.subject_id)?;
    if request.transition == Transition::Supersede && request.superseded_by.is_none() {
        return Err(ContinuityError::invalid(
            "superseded_by is required when transition is 'supersede'",
        ));
    }
    if request.transition != Transition::Supersede && request.superseded_by.is_some() {
        return Err(ContinuityError::invalid(
            "superseded_by is only allowed when transition is 'supersede'",
        ));
    }
    Ok(subject)
}

/// What a standalone transition produced.
#[derive(Debug, Clone, PartialEq)]
pub struct LifecycleOutcome {
    pub write: WriteResult,
    pub lifecycle: Lifecycle,
    pub previous_lifecycle: Lifecycle,
    pub transition: Transition,
}

/// `POST /v1/continuity/lifecycle` against the stored active capsule (`None`: not found). Only
/// lifecycle, superseded_by and updated_at change; no normalisation or validation pass runs.
pub fn apply_lifecycle(
    request: &LifecycleRequest,
    stored: Option<&StoredCapsule>,
) -> Result<LifecycleOutcome, ContinuityError> {
    let subject = check_lifecycle_request(request)?;
    let stored =
        stored.ok_or_else(|| ContinuityError::not_found("continuity capsule not found"))?;
    let mut capsule: Capsule = stored.model_or_invalid()?;
    reject_stale_timestamp(&request.updated_at, &capsule.updated_at)?;
    let td = capsule
        .thread_descriptor
        .as_mut()
        .ok_or_else(|| ContinuityError::invalid("no thread_descriptor to transition"))?;
    let previous = td.lifecycle.unwrap_or(Lifecycle::Active);
    let next = transition(previous, request.transition)?;
    td.lifecycle = Some(next);
    td.superseded_by = if request.transition == Transition::Supersede {
        request.superseded_by.clone()
    } else {
        None
    };
    capsule.updated_at = request.updated_at.clone();
    let canonical = capsule.canonical_json();
    if canonical.len() > CAPSULE_SIZE_LIMIT_BYTES {
        return Err(ContinuityError::invalid(CAPSULE_SIZE_LIMIT_DETAIL));
    }
    Ok(LifecycleOutcome {
        write: WriteResult::new(subject, capsule, canonical, Some(stored.bytes())),
        lifecycle: next,
        previous_lifecycle: previous,
        transition: request.transition,
    })
}

impl LifecycleOutcome {
    /// `ok, path, lifecycle, previous_lifecycle, durable, latest_commit, capsule_sha256,
    /// warnings, recovery_warnings`.
    pub fn response(&self, revision: Option<&str>, fallback_failure: Option<&str>) -> Json {
        let path = self.write.path();
        let (warnings, recovery, _) = fallback_failure_fields(&path, fallback_failure);
        let mut body = JsonObject::new();
        body.insert("ok", Json::Bool(true));
        body.insert("path", Json::String(path));
        body.insert("lifecycle", Json::from(self.lifecycle.as_str()));
        body.insert(
            "previous_lifecycle",
            Json::from(self.previous_lifecycle.as_str()),
        );
        body.insert("durable", Json::Bool(true));
        body.insert("latest_commit", revision_json(revision));
        body.insert("capsule_sha256", Json::String(self.write.sha256.clone()));
        body.insert("warnings", warnings);
        body.insert("recovery_warnings", recovery);
        Json::Object(body)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Digest §5's table, every (state, transition) pair.
    #[test]
    fn the_state_machine_matches_the_digest() {
        use Lifecycle::*;
        use Transition::*;
        let cases: &[(Lifecycle, Transition, Result<Lifecycle, &str>)] = &[
            (Active, Suspend, Ok(Suspended)),
            (Active, Conclude, Ok(Concluded)),
            (Active, Supersede, Ok(Superseded)),
            (
                Active,
                Resume,
                Err("lifecycle transition 'resume' not allowed from 'active'"),
            ),
            (Suspended, Resume, Ok(Active)),
            (Suspended, Conclude, Ok(Concluded)),
            (Suspended, Supersede, Ok(Superseded)),
            (
                Suspended,
                Suspend,
                Err("lifecycle transition 'suspend' not allowed from 'suspended'"),
            ),
            (
                Concluded,
                Resume,
                Err("lifecycle transition not allowed from terminal state 'concluded'"),
            ),
            (
                Concluded,
                Suspend,
                Err("lifecycle transition not allowed from terminal state 'concluded'"),
            ),
            (
                Concluded,
                Conclude,
                Err("lifecycle transition not allowed from terminal state 'concluded'"),
            ),
            (
                Concluded,
                Supersede,
                Err("lifecycle transition not allowed from terminal state 'concluded'"),
            ),
            (
                Superseded,
                Resume,
                Err("lifecycle transition not allowed from terminal state 'superseded'"),
            ),
            (
                Superseded,
                Suspend,
                Err("lifecycle transition not allowed from terminal state 'superseded'"),
            ),
            (
                Superseded,
                Conclude,
                Err("lifecycle transition not allowed from terminal state 'superseded'"),
            ),
            (
                Superseded,
                Supersede,
                Err("lifecycle transition not allowed from terminal state 'superseded'"),
            ),
        ];
        for (from, t, want) in cases {
            let got = transition(*from, *t);
            match want {
                Ok(to) => assert_eq!(got, Ok(*to), "{from} --{t}-->"),
                Err(detail) => {
                    let err = got.unwrap_err();
                    assert_eq!(err.http_status(), 400);
                    assert_eq!(err.to_string(), *detail);
                }
            }
        }
    }
}

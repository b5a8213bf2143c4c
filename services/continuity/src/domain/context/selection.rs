//! Which capsules a retrieve asks for (digest §10 step 1): the explicit subject first, then
//! `continuity_selectors`, deduplicated by kind and normalised id, capped at
//! `continuity_max_capsules` (the rest are `omitted_selectors`); with none given, a task text
//! `task:<id>` / `thread:<id>` is inferred. Also the warning qualification every later step
//! uses.

use crate::domain::error::ContinuityError;
use crate::domain::model::SubjectKind;
use crate::domain::subject::normalize_subject_id;

use super::request::RetrieveRequest;

/// `continuity_capsule_truncated_to_zero`, which single mode renames.
pub const TRUNCATED_MULTI: &str = "continuity_capsule_truncated_to_zero";
/// Its single-mode name.
pub const TRUNCATED_SINGLE: &str = "continuity_truncated_to_zero";

/// How a selector was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Explicit,
    Inferred,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Explicit => "explicit",
            Resolution::Inferred => "inferred",
        }
    }
}

/// One capsule the retrieve will try to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub kind: SubjectKind,
    /// The id as the caller wrote it (warnings and selection_order show it so).
    pub subject_id: String,
    pub resolution: Resolution,
}

impl Selector {
    /// `kind:id`, as `requested_selectors` and `omitted_selectors` list it.
    pub fn label(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.subject_id)
    }
}

/// The selectors to load, every one requested, and those over the cap.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    pub selectors: Vec<Selector>,
    pub requested: Vec<String>,
    pub omitted: Vec<String>,
}

/// `_qualify_warning`: bare in single mode (the truncation warning renamed), suffixed
/// `:<kind>:<id>` in multi mode.
pub fn qualify(warning: &str, kind: SubjectKind, subject_id: &str, multi: bool) -> String {
    if !multi {
        if warning == TRUNCATED_MULTI {
            return TRUNCATED_SINGLE.to_owned();
        }
        return warning.to_owned();
    }
    format!("{warning}:{}:{subject_id}", kind.as_str())
}

/// `_effective_selectors` (with `_resolve_selector` for inference). Fails with the original's
/// 400s: a subject id that normalises to nothing, or only one of subject_kind/subject_id when
/// no selector was given.
pub fn effective_selectors(request: &RetrieveRequest) -> Result<Selection, ContinuityError> {
    let mut selectors: Vec<Selector> = Vec::new();
    let mut seen: Vec<(SubjectKind, String)> = Vec::new();
    let mut add = |kind: SubjectKind, subject_id: &str| -> Result<(), ContinuityError> {
        let key = (kind, normalize_subject_id(subject_id)?);
        if !seen.contains(&key) {
            seen.push(key);
            selectors.push(Selector {
                kind,
                subject_id: subject_id.to_owned(),
                resolution: Resolution::Explicit,
            });
        }
        Ok(())
    };
    if let Some((kind, id)) = request.primary_subject() {
        add(kind, id)?;
    }
    for selector in &request.continuity_selectors {
        add(selector.subject_kind, &selector.subject_id)?;
    }
    if !selectors.is_empty() {
        let requested = selectors.iter().map(Selector::label).collect();
        let cap = request.continuity_max_capsules;
        let omitted = selectors.iter().skip(cap).map(Selector::label).collect();
        selectors.truncate(cap);
        return Ok(Selection {
            selectors,
            requested,
            omitted,
        });
    }
    match inferred_selector(request)? {
        Some(selector) => Ok(Selection {
            requested: vec![selector.label()],
            selectors: vec![selector],
            omitted: Vec::new(),
        }),
        None => Ok(Selection::default()),
    }
}

/// `_resolve_selector` once no explicit selector exists: the half-given subject is a 400;
/// a task text `^(task|thread):(.+)$` (after strip) names a capsule, its value stripped.
fn inferred_selector(request: &RetrieveRequest) -> Result<Option<Selector>, ContinuityError> {
    let kind_given = request.subject_kind.is_some();
    let id_given = request.subject_id.as_deref().is_some_and(|s| !s.is_empty());
    if kind_given != id_given {
        return Err(ContinuityError::invalid(
            "subject_kind and subject_id must be provided together",
        ));
    }
    let task = crate::domain::text::py_strip(&request.task);
    let Some((prefix, value)) = task.split_once(':') else {
        return Ok(None);
    };
    let kind = match prefix {
        "task" => SubjectKind::Task,
        "thread" => SubjectKind::Thread,
        _ => return Ok(None),
    };
    // `(.+)$`: at least one character, none of them a newline (`.`), an optional final
    // newline allowed by `$`.
    let body = value.strip_suffix('\n').unwrap_or(value);
    if body.is_empty() || body.contains('\n') {
        return Ok(None);
    }
    let value = crate::domain::text::py_strip(body);
    if value.is_empty() {
        return Ok(None);
    }
    Ok(Some(Selector {
        kind,
        subject_id: value.to_owned(),
        resolution: Resolution::Inferred,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::domain::json::Json;

    fn request(body: &str) -> RetrieveRequest {
        RetrieveRequest::from_json(&Json::parse(body.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn explicit_subject_leads_then_selectors_deduplicated_and_capped() {
        let r = request(
            r#"{"task":"t","subject_kind":"thread","subject_id":"Alpha",
                "continuity_selectors":[{"subject_kind":"thread","subject_id":"alpha"},
                {"subject_kind":"user","subject_id":"u1"},{"subject_kind":"task","subject_id":"t9"}],
                "continuity_max_capsules":2}"#,
        );
        let s = effective_selectors(&r).unwrap();
        assert_eq!(s.requested, ["thread:Alpha", "user:u1", "task:t9"]);
        assert_eq!(s.omitted, ["task:t9"]);
        assert_eq!(s.selectors.len(), 2);
        assert!(r.multi_warning_mode());
    }

    #[test]
    fn task_text_infers_a_selector() {
        let s = effective_selectors(&request(r#"{"task":"  thread: Release 2 "}"#)).unwrap();
        assert_eq!(s.requested, ["thread:Release 2"]);
        assert_eq!(s.selectors[0].resolution, Resolution::Inferred);
        assert!(
            effective_selectors(&request(r#"{"task":"user:me"}"#))
                .unwrap()
                .selectors
                .is_empty()
        );
    }

    #[test]
    fn half_a_subject_is_refused_only_without_selectors() {
        let err =
            effective_selectors(&request(r#"{"task":"x","subject_kind":"thread"}"#)).unwrap_err();
        assert_eq!(
            err,
            ContinuityError::invalid("subject_kind and subject_id must be provided together")
        );
        let ok = effective_selectors(&request(
            r#"{"task":"x","subject_kind":"thread","continuity_selectors":[{"subject_kind":"user","subject_id":"u"}]}"#,
        ))
        .unwrap();
        assert_eq!(ok.requested, ["user:u"]);
    }

    #[test]
    fn warnings_are_bare_in_single_mode_and_suffixed_in_multi_mode() {
        assert_eq!(
            qualify("continuity_fallback_used", SubjectKind::Thread, "a", false),
            "continuity_fallback_used"
        );
        assert_eq!(
            qualify("continuity_fallback_used", SubjectKind::Thread, "a", true),
            "continuity_fallback_used:thread:a"
        );
        assert_eq!(
            qualify(TRUNCATED_MULTI, SubjectKind::Task, "b", false),
            "continuity_truncated_to_zero"
        );
        assert_eq!(
            qualify(TRUNCATED_MULTI, SubjectKind::Task, "b", true),
            "continuity_capsule_truncated_to_zero:task:b"
        );
    }
}

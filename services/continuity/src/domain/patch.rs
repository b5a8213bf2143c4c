//! `POST /v1/continuity/patch` (digest §6): list edits applied atomically to the stored capsule.

use serde_json::Value;

use super::coordination::report::{Failure, py_type, validation_error};
use super::error::ContinuityError;
use super::json::{Json, JsonObject};
use super::model::{
    Capsule, IDENTITY_ANCHOR, IdentityAnchor, NEGATIVE_DECISION, NegativeDecision, RATIONALE_ENTRY,
    RationaleEntry, STABLE_PREFERENCE, StablePreference, from_coerced,
};
use super::normalize::{normalize_capsule, stamp_structured_entries, string_list_mut};
use super::request::{PatchAction, PatchOperation, PatchRequest};
use super::schema::{Model, validate_at};
use super::stored::{StoredCapsule, reject_stale_timestamp};
use super::subject::SubjectKey;
use super::validation::{CAPSULE_SIZE_LIMIT_BYTES, CAPSULE_SIZE_LIMIT_DETAIL, validate_capsule};
use super::write::{WriteResult, fallback_failure_fields, revision_json};

/// At most this many operations per request.
pub const PATCH_MAX_OPERATIONS: usize = 10;

/// How a target's items are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TargetClass {
    Strings,
    Structured,
}

fn class(target: &str) -> TargetClass {
    match target {
        "continuity.negative_decisions"
        | "continuity.rationale_entries"
        | "stable_preferences"
        | "thread_descriptor.identity_anchors" => TargetClass::Structured,
        _ => TargetClass::Strings,
    }
}

/// The maximum length of each target list (mirrors the model bounds).
pub fn target_max_length(target: &str) -> Option<usize> {
    Some(match target {
        "continuity.top_priorities" => 8,
        "continuity.active_concerns" => 5,
        "continuity.active_constraints" => 8,
        "continuity.open_loops" => 8,
        "continuity.drift_signals" => 5,
        "continuity.working_hypotheses" => 5,
        "continuity.long_horizon_commitments" => 5,
        "continuity.session_trajectory" => 5,
        "continuity.trailing_notes" => 3,
        "continuity.curiosity_queue" => 5,
        "continuity.negative_decisions" => 4,
        "continuity.rationale_entries" => 6,
        "stable_preferences" => 12,
        "thread_descriptor.keywords" => 6,
        "thread_descriptor.scope_anchors" => 4,
        "thread_descriptor.identity_anchors" => 4,
        _ => return None,
    })
}

fn bad(reason: &str, target: &str) -> ContinuityError {
    ContinuityError::invalid(format!("invalid operation: {reason} {target}"))
}

/// The per-operation parameter checks, made for every operation before the lock.
pub fn check_operation(op: &PatchOperation) -> Result<(), ContinuityError> {
    let target = op.target.as_str();
    let structured = class(target) == TargetClass::Structured;
    let string = !structured;
    match op.action {
        PatchAction::Append => {
            if op.match_.is_some() || op.index.is_some() {
                return Err(bad("append must not specify match or index on", target));
            }
            if op.value.is_none() {
                return Err(bad("append requires value on", target));
            }
            if string && !op.value.as_ref().is_some_and(Value::is_string) {
                return Err(bad("value must be a string for string-list target", target));
            }
        }
        PatchAction::Remove => {
            if op.value.is_some() {
                return Err(bad("remove must not specify value on", target));
            }
            if op.match_.is_none() {
                let which = if string {
                    "string-list"
                } else {
                    "structured-list"
                };
                return Err(bad(
                    &format!("remove requires match on {which} target"),
                    target,
                ));
            }
            if op.index.is_some() {
                return Err(bad("remove must not specify index on", target));
            }
        }
        PatchAction::ReplaceAt => {
            if op.value.is_none() {
                return Err(bad("replace_at requires value on", target));
            }
            if string {
                if !op.value.as_ref().is_some_and(Value::is_string) {
                    return Err(bad("value must be a string for string-list target", target));
                }
                if op.index.is_none() {
                    return Err(bad(
                        "replace_at requires index on string-list target",
                        target,
                    ));
                }
                if op.match_.is_some() {
                    return Err(bad(
                        "replace_at must not specify match on string-list target",
                        target,
                    ));
                }
            } else {
                if op.match_.is_none() {
                    return Err(bad(
                        "replace_at requires match on structured-list target",
                        target,
                    ));
                }
                if op.index.is_some() {
                    return Err(bad(
                        "replace_at must not specify index on structured-list target",
                        target,
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The checks before the lock: the subject key and every operation's parameters.
pub fn check_patch_request(request: &PatchRequest) -> Result<SubjectKey, ContinuityError> {
    let subject = SubjectKey::new(request.subject_kind, &request.subject_id)?;
    for op in &request.operations {
        check_operation(op)?;
    }
    Ok(subject)
}

/// A structured value validated the way the original's `Model.model_validate(value)` does; its
/// failure escapes there as an unhandled `ValidationError` (500).
fn structured_item<T: serde::de::DeserializeOwned>(
    model: &'static Model,
    value: &Value,
) -> Result<T, ContinuityError> {
    if !value.is_object() {
        // The original keeps a non-object as is and then fails reading its key field.
        let attribute = match model.name {
            "NegativeDecision" => "decision",
            "IdentityAnchor" => "kind",
            _ => "tag",
        };
        return Err(ContinuityError::Unhandled {
            code: "AttributeError".to_owned(),
            detail: format!(
                "'{}' object has no attribute '{attribute}'",
                py_type(&Json::from_value(value))
            ),
        });
    }
    let coerced =
        validate_at(model, &Json::from_value(value), &Default::default()).map_err(|errors| {
            let failures: Vec<Failure> = errors.iter().map(Failure::of).collect();
            ContinuityError::Unhandled {
                code: "ValidationError".to_owned(),
                detail: validation_error(model.name, &failures),
            }
        })?;
    from_coerced(&coerced)
}

fn no_match(action: &str, target: &str) -> ContinuityError {
    ContinuityError::not_found(format!("no matching item for {action} on {target}"))
}

/// Applies one operation to a list whose items are identified by `key`.
fn edit_structured<T: Clone>(
    items: &mut Vec<T>,
    op: &PatchOperation,
    key: impl Fn(&T) -> String,
    parse: impl Fn(&Value) -> Result<T, ContinuityError>,
) -> Result<(), ContinuityError> {
    let target = op.target.as_str();
    match op.action {
        PatchAction::Append => {
            if let Some(max) = target_max_length(target)
                && items.len() >= max
            {
                return Err(ContinuityError::invalid(format!(
                    "append would exceed max length ({max}) for {target}"
                )));
            }
            let value = op.value.as_ref().unwrap_or(&Value::Null);
            items.push(parse(value)?);
        }
        PatchAction::Remove => {
            let wanted = op.match_.clone().unwrap_or_default();
            let at = items
                .iter()
                .position(|i| key(i) == wanted)
                .ok_or_else(|| no_match("remove", target))?;
            items.remove(at);
        }
        PatchAction::ReplaceAt => {
            let wanted = op.match_.clone().unwrap_or_default();
            let at = items
                .iter()
                .position(|i| key(i) == wanted)
                .ok_or_else(|| no_match("replace_at", target))?;
            let value = op.value.as_ref().unwrap_or(&Value::Null);
            items[at] = parse(value)?;
        }
    }
    Ok(())
}

fn edit_strings(items: &mut Vec<String>, op: &PatchOperation) -> Result<(), ContinuityError> {
    let target = op.target.as_str();
    let text = || {
        op.value
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    match op.action {
        PatchAction::Append => {
            if let Some(max) = target_max_length(target)
                && items.len() >= max
            {
                return Err(ContinuityError::invalid(format!(
                    "append would exceed max length ({max}) for {target}"
                )));
            }
            items.push(text());
        }
        PatchAction::Remove => {
            let wanted = op.match_.as_deref().unwrap_or("");
            let at = items
                .iter()
                .position(|i| i == wanted)
                .ok_or_else(|| no_match("remove", target))?;
            items.remove(at);
        }
        PatchAction::ReplaceAt => {
            let index = op.index.unwrap_or(-1);
            if index < 0 || index as usize >= items.len() {
                let shown = op.index.map_or("None".to_owned(), |i| i.to_string());
                return Err(ContinuityError::not_found(format!(
                    "index {shown} out of bounds for {target} (length {})",
                    items.len()
                )));
            }
            items[index as usize] = text();
        }
    }
    Ok(())
}

/// Applies every operation in order to `capsule`; the first failure aborts (the caller works
/// on a copy, so nothing is applied).
pub fn apply_operations(
    capsule: &mut Capsule,
    ops: &[PatchOperation],
) -> Result<usize, ContinuityError> {
    for op in ops {
        let target = op.target.as_str();
        if let Some(field) = target.strip_prefix("thread_descriptor.") {
            let td = capsule.thread_descriptor.as_mut().ok_or_else(|| {
                ContinuityError::invalid(format!(
                    "capsule has no thread_descriptor for target '{target}'"
                ))
            })?;
            match field {
                "keywords" => edit_strings(&mut td.keywords, op)?,
                "scope_anchors" => edit_strings(&mut td.scope_anchors, op)?,
                _ => edit_structured(
                    &mut td.identity_anchors,
                    op,
                    |a: &IdentityAnchor| format!("{}:{}", a.kind, a.value),
                    |v| structured_item(&IDENTITY_ANCHOR, v),
                )?,
            }
            continue;
        }
        match target {
            "continuity.negative_decisions" => edit_structured(
                &mut capsule.continuity.negative_decisions,
                op,
                |n: &NegativeDecision| n.decision.clone(),
                |v| structured_item(&NEGATIVE_DECISION, v),
            )?,
            "continuity.rationale_entries" => edit_structured(
                &mut capsule.continuity.rationale_entries,
                op,
                |e: &RationaleEntry| e.tag.clone(),
                |v| structured_item(&RATIONALE_ENTRY, v),
            )?,
            "stable_preferences" => edit_structured(
                &mut capsule.stable_preferences,
                op,
                |p: &StablePreference| p.tag.clone(),
                |v| structured_item(&STABLE_PREFERENCE, v),
            )?,
            _ => {
                let field = target.strip_prefix("continuity.").unwrap_or(target);
                let items = string_list_mut(capsule, field).ok_or_else(|| {
                    ContinuityError::invalid(format!("invalid operation: unknown target {target}"))
                })?;
                edit_strings(items, op)?;
            }
        }
    }
    Ok(ops.len())
}

/// What a patch produced.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchOutcome {
    pub write: WriteResult,
    pub operations_applied: usize,
    pub normalizations_applied: Vec<String>,
}

/// `POST /v1/continuity/patch` against the stored active capsule (`None`: 404).
pub fn apply_patch(
    request: &PatchRequest,
    stored: Option<&StoredCapsule>,
) -> Result<PatchOutcome, ContinuityError> {
    let subject = check_patch_request(request)?;
    let stored =
        stored.ok_or_else(|| ContinuityError::not_found("continuity capsule not found"))?;
    let current = stored.model_or_invalid()?;
    reject_stale_timestamp(&request.updated_at, &current.updated_at)?;
    let mut capsule = current;
    let operations_applied = apply_operations(&mut capsule, &request.operations)?;
    capsule.updated_at = request.updated_at.clone();
    let normalizations_applied = normalize_capsule(&mut capsule);
    stamp_structured_entries(
        &mut capsule,
        stored.upgraded().as_ref(),
        &request.updated_at,
    );
    let canonical = validate_capsule(&mut capsule)?;
    if canonical.len() > CAPSULE_SIZE_LIMIT_BYTES {
        return Err(ContinuityError::invalid(CAPSULE_SIZE_LIMIT_DETAIL));
    }
    Ok(PatchOutcome {
        write: WriteResult::new(subject, capsule, canonical, Some(stored.bytes())),
        operations_applied,
        normalizations_applied,
    })
}

impl PatchOutcome {
    /// `ok, path, updated, durable, latest_commit, capsule_sha256, operations_applied,
    /// normalizations_applied, warnings, recovery_warnings`.
    pub fn response(&self, revision: Option<&str>, fallback_failure: Option<&str>) -> Json {
        let path = self.write.path();
        let (warnings, recovery, _) = fallback_failure_fields(&path, fallback_failure);
        let mut body = JsonObject::new();
        body.insert("ok", Json::Bool(true));
        body.insert("path", Json::String(path));
        body.insert("updated", Json::Bool(self.write.changed));
        body.insert("durable", Json::Bool(true));
        body.insert("latest_commit", revision_json(revision));
        body.insert("capsule_sha256", Json::String(self.write.sha256.clone()));
        body.insert("operations_applied", Json::from(self.operations_applied));
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
        Json::Object(body)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A structured value the model refuses: the original's 500 carries pydantic's whole
    /// `str(exc)` (recorded from CogniRelay 1.4.15).
    #[test]
    fn a_refused_structured_value_reports_every_error() {
        let err =
            structured_item::<IdentityAnchor>(&IDENTITY_ANCHOR, &serde_json::json!({"kind": 1}))
                .unwrap_err();
        assert_eq!(
            err,
            ContinuityError::Unhandled {
                code: "ValidationError".to_owned(),
                detail: "2 validation errors for IdentityAnchor\nkind\n  Input should be a valid string [type=string_type, input_value=1, input_type=int]\n    For further information visit https://errors.pydantic.dev/2.14/v/string_type\nvalue\n  Field required [type=missing, input_value={'kind': 1}, input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.14/v/missing".to_owned(),
            }
        );
    }
}

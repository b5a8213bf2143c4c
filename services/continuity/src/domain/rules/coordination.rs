//! Coordination, messages and the schedule: what their rules require, in JSON Schema.

use serde_json::{Value, json};

use crate::domain::schema::Model;

/// A name `messages::box_path` keeps inside its box (`messages/<box>/<name>.jsonl`): no NUL
/// and no `..` segment before the last (the last gains `.jsonl`); empty is a name. A `..`
/// that a deeper segment makes up for is also kept there; the document leaves that out.
pub const BOX_NAME_PATTERN: &str =
    r"^(?:(?:[^/\x00]{3,}|[^/.\x00][^/\x00]|\.[^/.\x00]|[^/\x00]?)/)*[^/\x00]*$";

/// A schedule id `schedule::schedule_id` accepts, as written.
pub const SCHEDULE_ID_PATTERN: &str = r"^sched_[a-z0-9][a-z0-9_-]{0,57}$";

/// `schedule::due_at`'s form, `YYYY-MM-DDTHH:MM:SSZ`, on a calendar date (29 February left
/// out); whether it is still ahead is checked against the clock.
pub const DUE_AT_PATTERN: &str = concat!(
    r"^[1-9][0-9]{3}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)",
    r"|(?:0[13578]|1[02])-31)T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$"
);

/// The booleans `schedule::query_bool` reads (in any case, stripped).
pub const SCHEDULE_QUERY_BOOLEANS: [&str; 8] =
    ["true", "false", "1", "0", "yes", "no", "on", "off"];

pub fn box_name() -> Value {
    json!({ "pattern": BOX_NAME_PATTERN })
}

/// At most `MAX` characters (a service-level bound the model does not declare).
pub fn at_most<const MAX: usize>() -> Value {
    json!({ "maxLength": MAX })
}

/// `MIN` to `MAX` characters (the coordination services' `Value too short/long` bounds).
pub fn chars<const MIN: usize, const MAX: usize>() -> Value {
    json!({"minLength": MIN, "maxLength": MAX})
}

/// 1 to `MAX` characters once stripped (the schedule's `_trim_*_string`): something other
/// than white space, and no more than `MAX` characters as written.
pub fn stripped<const MAX: usize>() -> Value {
    json!({"maxLength": MAX, "pattern": r"\S"})
}

/// An integer from `MIN` to `MAX` as JSON writes it, for the hand-written checks that take no
/// other form (the schedule's: no `true`, no numeric text).
pub fn integer<const MIN: i64, const MAX: i64>() -> Value {
    json!({"type": "integer", "minimum": MIN, "maximum": MAX})
}

pub fn schedule_id() -> Value {
    json!({ "pattern": SCHEDULE_ID_PATTERN })
}

pub fn due_at() -> Value {
    json!({ "pattern": DUE_AT_PATTERN })
}

pub fn schedule_query_bool() -> Value {
    json!({ "enum": SCHEDULE_QUERY_BOOLEANS })
}

/// `schedule::metadata`: a flat object (no arrays or objects as values).
pub fn flat_object() -> Value {
    json!({"additionalProperties": {"type": ["string", "number", "boolean", "null"]}})
}

/// `name` given as a string (not absent, not null).
fn given(names: &[&str]) -> Value {
    let properties: serde_json::Map<String, Value> = names
        .iter()
        .map(|name| ((*name).to_owned(), json!({"type": "string"})))
        .collect();
    json!({"required": names, "properties": properties})
}

/// `schedule::subject`: `subject_kind` and `subject_id` given together or neither.
fn subject_pair() -> Value {
    json!({"anyOf": [
        given(&["subject_kind", "subject_id"]),
        {"properties": {"subject_kind": {"type": "null"}, "subject_id": {"type": "null"}}}
    ]})
}

/// `shared::check_state`: at least one item among the three lists.
fn one_shared_item() -> Value {
    let list = |name: &str| json!({"required": [name], "properties": {name: {"minItems": 1}}});
    json!({"anyOf": [list("constraints"), list("drift_signals"), list("coordination_alerts")]})
}

/// Every claim from `kind` (`const`) or the given kinds.
fn claims_from(kind: &str) -> Value {
    json!({"properties": {"claims": {"items": {"properties": {"source_kind": {"const": kind}}}}}})
}

fn claims_contain(kind: &str) -> Value {
    json!({"contains": {"properties": {"source_kind": {"const": kind}}}})
}

/// The rules across the fields of a coordination or schedule model.
pub(super) fn coordination_rules(model: &Model) -> Vec<Value> {
    match model.name {
        "CoordinationSharedCreateRequest" => vec![
            one_shared_item(),
            // `shared::check_participant`: no participant named twice.
            json!({"properties": {"participant_peers": {"uniqueItems": true}}}),
        ],
        "CoordinationSharedUpdateRequest" => vec![one_shared_item()],
        // `reconciliation::check_open`: two claims at least, a task or a thread, and a
        // trigger that matches the claims' source kinds.
        "CoordinationReconciliationOpenRequest" => vec![
            json!({"required": ["claims"]}),
            json!({"anyOf": [given(&["task_id"]), given(&["thread_id"])]}),
            json!({
                "if": {"properties": {"trigger": {"const": "handoff_vs_handoff"}}},
                "then": claims_from("handoff")
            }),
            json!({
                "if": {"properties": {"trigger": {"enum": ["shared_vs_shared", "concurrent_mutation_race"]}}},
                "then": claims_from("shared")
            }),
            json!({
                "if": {"properties": {"trigger": {"const": "handoff_vs_shared"}}},
                "then": {"properties": {"claims": {"allOf": [claims_contain("handoff"), claims_contain("shared")]}}}
            }),
        ],
        // `reconciliation::check_open` and `check_source_id`: a shared claim names the
        // version it saw, a handoff claim none; the id is its kind's.
        "CoordinationReconciliationClaim" => vec![json!({
            "if": {"properties": {"source_kind": {"const": "shared"}}},
            "then": {
                "required": ["observed_version"],
                "properties": {
                    "observed_version": {"type": "integer"},
                    "source_id": {"pattern": "^shared_[0-9a-f]{32}$"}
                }
            },
            "else": {"properties": {
                "observed_version": {"type": "null"},
                "source_id": {"pattern": "^handoff_[0-9a-f]{32}$"}
            }}
        })],
        // `reconciliation::resolve`: a summary is required.
        "CoordinationReconciliationResolveRequest" => vec![given(&["resolution_summary"])],
        // `schedule::create`: the subject pair, and a nudge's link.
        "ScheduleCreateRequest" => vec![
            subject_pair(),
            json!({
                "if": {"properties": {"kind": {"const": "task_nudge"}}},
                "then": {"anyOf": [
                    given(&["task_id"]),
                    given(&["thread_id"]),
                    given(&["subject_kind", "subject_id"])
                ]}
            }),
        ],
        // `schedule::patch`: a field to change besides the version, and the subject pair.
        "ScheduleUpdateRequest" => vec![json!({"minProperties": 2}), subject_pair()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn matcher(pattern: &str) -> impl Fn(&str) -> bool {
        let regex = regex::Regex::new(pattern).unwrap();
        move |text: &str| regex.is_match(text)
    }

    /// The box-name pattern keeps only names `box_path` keeps, and every plain one.
    #[test]
    fn box_names_follow_box_path() {
        let pattern = matcher(BOX_NAME_PATTERN);
        for name in [
            "b", "a/b", "..", "...", "a/", "/x", ".x/y", "x../y", "é", "a/./b", ".", "",
        ] {
            assert!(
                crate::domain::messages::box_path("inbox", name).is_ok(),
                "{name}"
            );
            assert!(pattern(name), "{name}");
        }
        for name in ["../x", "a/../../x", "../", "x\0y", "/../a"] {
            assert!(
                crate::domain::messages::box_path("inbox", name).is_err(),
                "{name}"
            );
            assert!(!pattern(name), "{name}");
        }
    }

    /// The due-at pattern keeps only times `schedule::due_at` reads.
    #[test]
    fn due_at_follows_the_schedule() {
        let pattern = matcher(DUE_AT_PATTERN);
        for due in [
            "2030-01-31T23:59:59Z",
            "2030-04-30T00:00:00Z",
            "1999-12-31T23:59:59Z",
        ] {
            assert!(pattern(due), "{due}");
            assert!(
                crate::domain::schedule::due_at(Some(&due.into())).is_ok(),
                "{due}"
            );
        }
        for due in [
            "2030-02-30T00:00:00Z",
            "2030-04-31T00:00:00Z",
            "2030-01-01T24:00:00Z",
            "2030-01-01 00:00:00Z",
        ] {
            assert!(!pattern(due), "{due}");
        }
        assert!(matcher(SCHEDULE_ID_PATTERN)("sched_a-b_c"));
    }
}

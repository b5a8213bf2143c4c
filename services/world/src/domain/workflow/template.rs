//! Request templates: JSON sent to an ambient source, in which every `{"$from": "/pointer"}`
//! object is replaced by the value at that JSON Pointer of the turn context:
//!
//! ```json
//! {"world": {"slug": "park-demo", "attempted_turn": 2, "simulation_time": "2026-01-01T01:00:00Z"},
//!  "subject": {"entity_id": "bob", "kind": "agent", "environment_label": "park",
//!              "state": "…", "memory": "…"}}
//! ```
//!
//! `subject` exists only for `before_subject_workflow` sources. A pointer that does not
//! resolve fails loudly — the source is not called with a hole in its request.

use std::fmt;

use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::domain::ids::HumanId;
use crate::domain::problem::{Problem, pointer_push, pointer_tokens};

/// The key of a template reference object.
pub const FROM_KEY: &str = "$from";

/// Fields of `/world` in the turn context.
pub const WORLD_FIELDS: [&str; 3] = ["slug", "attempted_turn", "simulation_time"];

/// Fields of `/subject` in the turn context.
pub const SUBJECT_FIELDS: [&str; 5] = ["entity_id", "kind", "environment_label", "state", "memory"];

/// What the kernel knows about the attempted turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFacts {
    pub world_slug: HumanId,
    pub attempted_turn: u64,
    pub simulation_time: OffsetDateTime,
}

impl TurnFacts {
    /// `/world` of the turn context.
    pub fn to_json(&self) -> Value {
        let mut world = Map::new();
        world.insert("slug".into(), Value::from(self.world_slug.as_str()));
        world.insert("attempted_turn".into(), Value::from(self.attempted_turn));
        world.insert(
            "simulation_time".into(),
            Value::from(format_time(self.simulation_time)),
        );
        Value::Object(world)
    }
}

/// RFC 3339 text of a simulation time (`2026-01-01T00:00:00Z`).
pub fn format_time(at: OffsetDateTime) -> String {
    // A time RFC 3339 cannot write (a year beyond 9999) prints as Unix seconds.
    Some(noema_core::time::rfc3339(at))
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| at.unix_timestamp().to_string())
}

/// The context a template is rendered against: `/world`, and `/subject` when a subject's
/// facts are given (see `WorldState::subject_facts`).
pub fn template_context(turn: &TurnFacts, subject: Option<&Value>) -> Value {
    let mut context = Map::new();
    context.insert("world".into(), turn.to_json());
    if let Some(subject) = subject {
        context.insert("subject".into(), subject.clone());
    }
    Value::Object(context)
}

/// A template that could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TemplateError {
    /// Where in the template the failing reference sits.
    pub template_pointer: String,
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.template_pointer.is_empty() {
            "(template)"
        } else {
            &self.template_pointer
        };
        write!(f, "request_template {at}: {}", self.message)
    }
}

/// Replaces every `$from` reference in `template` with its value in `context`.
pub fn render_template(template: &Value, context: &Value) -> Result<Value, TemplateError> {
    render_at(template, context, "")
}

fn render_at(template: &Value, context: &Value, at: &str) -> Result<Value, TemplateError> {
    match template {
        Value::Object(map) if map.contains_key(FROM_KEY) => {
            let pointer = reference_pointer(map).map_err(|message| TemplateError {
                template_pointer: at.to_owned(),
                message,
            })?;
            context
                .pointer(pointer)
                .cloned()
                .ok_or_else(|| TemplateError {
                    template_pointer: at.to_owned(),
                    message: format!("$from {pointer:?} does not resolve in the turn context"),
                })
        }
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| {
                render_at(value, context, &pointer_push(at, key)).map(|v| (key.clone(), v))
            })
            .collect::<Result<Map<_, _>, _>>()
            .map(Value::Object),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| render_at(item, context, &pointer_push(at, &i.to_string())))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// The pointer of a `{"$from": …}` object: exactly one key, a string value.
fn reference_pointer(map: &Map<String, Value>) -> Result<&str, String> {
    if map.len() != 1 {
        return Err(format!(
            "an object with {FROM_KEY:?} is a reference and must have no other keys"
        ));
    }
    match map.get(FROM_KEY) {
        Some(Value::String(pointer)) => Ok(pointer),
        _ => Err(format!("{FROM_KEY:?} must be a JSON Pointer string")),
    }
}

/// Static checks of a template, as problems relative to the template: every reference is
/// well formed and names a field the turn context has; `/subject` only where a subject exists.
pub fn check_template(template: &Value, subject_available: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    check_at(template, subject_available, "", &mut problems);
    problems
}

fn check_at(template: &Value, subject_available: bool, at: &str, out: &mut Vec<Problem>) {
    match template {
        Value::Object(map) if map.contains_key(FROM_KEY) => match reference_pointer(map) {
            Err(message) => out.push(Problem::new(at, message)),
            Ok(pointer) => {
                if let Some(message) = pointer_problem(pointer, subject_available) {
                    out.push(Problem::new(pointer_push(at, FROM_KEY), message));
                }
            }
        },
        Value::Object(map) => {
            for (key, value) in map {
                check_at(value, subject_available, &pointer_push(at, key), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_at(
                    item,
                    subject_available,
                    &pointer_push(at, &i.to_string()),
                    out,
                );
            }
        }
        _ => {}
    }
}

fn pointer_problem(pointer: &str, subject_available: bool) -> Option<String> {
    let Some(tokens) = pointer_tokens(pointer) else {
        return Some(format!("{pointer:?} is not a JSON Pointer"));
    };
    let (root, fields): (&str, &[&str]) = match tokens.first().map(String::as_str) {
        Some("world") => ("world", &WORLD_FIELDS),
        Some("subject") if subject_available => ("subject", &SUBJECT_FIELDS),
        Some("subject") => {
            return Some(format!(
                "{pointer:?} refers to the subject, but a once_per_turn source runs before any subject"
            ));
        }
        _ => {
            return Some(format!(
                "{pointer:?} must start with /world or /subject (the turn context has nothing else)"
            ));
        }
    };
    match tokens.get(1..).unwrap_or_default() {
        [] => None,
        [field] if fields.contains(&field.as_str()) => None,
        [field] => Some(format!(
            "{pointer:?}: /{root} has no field {field:?} (it has {})",
            fields.join(", ")
        )),
        _ => Some(format!(
            "{pointer:?}: the fields of /{root} are plain values with nothing below them"
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use serde_json::json;
    use time::macros::datetime;

    fn turn(n: u64) -> TurnFacts {
        TurnFacts {
            world_slug: HumanId::parse("park-demo").unwrap(),
            attempted_turn: n,
            simulation_time: datetime!(2026-01-01 01:00 UTC),
        }
    }

    fn bob() -> Value {
        json!({"entity_id": "bob", "kind": "agent", "environment_label": "park",
               "state": "hungry", "memory": ""})
    }

    #[test]
    fn the_seeds_weather_template_renders() {
        let template = json!({
            "environment_label": "park",
            "turn": {"$from": "/world/attempted_turn"},
            "simulation_time": {"$from": "/world/simulation_time"}
        });
        let rendered = render_template(&template, &template_context(&turn(2), None)).unwrap();
        assert_eq!(
            rendered,
            json!({"environment_label": "park", "turn": 2,
                   "simulation_time": "2026-01-01T01:00:00Z"})
        );
        assert!(check_template(&template, false).is_empty());
    }

    #[test]
    fn subject_references_render_inside_arrays_and_objects() {
        let template = json!({"who": [{"$from": "/subject/entity_id"}, "x"],
                              "world": {"$from": "/world"}, "n": 3, "ok": true});
        let context = template_context(&turn(1), Some(&bob()));
        let rendered = render_template(&template, &context).unwrap();
        assert_eq!(rendered["who"], json!(["bob", "x"]));
        assert_eq!(rendered["world"]["slug"], json!("park-demo"));
        assert_eq!(rendered["n"], json!(3));
        assert!(check_template(&template, true).is_empty());
    }

    #[test]
    fn a_missing_path_fails_loudly_naming_both_places() {
        let template = json!({"a": [1, {"owner": {"$from": "/subject/entity_id"}}]});
        let err = render_template(&template, &template_context(&turn(1), None)).unwrap_err();
        assert_eq!(err.template_pointer, "/a/1/owner");
        assert!(
            err.message
                .contains("\"/subject/entity_id\" does not resolve"),
            "{err}"
        );
        let err = render_template(
            &json!({"t": {"$from": "/world/attempted_turnx"}}),
            &template_context(&turn(1), None),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "request_template /t: $from \"/world/attempted_turnx\" does not resolve in the turn context"
        );
    }

    #[test]
    fn malformed_references_are_refused() {
        let context = template_context(&turn(1), None);
        let extra = json!({"x": {"$from": "/world/slug", "default": 1}});
        assert!(render_template(&extra, &context).is_err());
        let not_string = json!({"x": {"$from": 3}});
        assert!(render_template(&not_string, &context).is_err());
        let problems = check_template(&extra, false);
        assert_eq!(problems[0].pointer, "/x");
    }

    #[test]
    fn static_checks_name_the_reference() {
        let cases = [
            (
                json!({"t": {"$from": "world/slug"}}),
                false,
                "not a JSON Pointer",
            ),
            (
                json!({"t": {"$from": "/weather"}}),
                false,
                "must start with /world or /subject",
            ),
            (
                json!({"t": {"$from": "/subject/state"}}),
                false,
                "once_per_turn",
            ),
            (
                json!({"t": {"$from": "/world/turn"}}),
                false,
                "has no field \"turn\"",
            ),
            (
                json!({"t": {"$from": "/subject/mood"}}),
                true,
                "has no field \"mood\"",
            ),
            (
                json!({"t": {"$from": "/world/slug/0"}}),
                false,
                "nothing below them",
            ),
        ];
        for (template, subject, needle) in cases {
            let problems = check_template(&template, subject);
            assert_eq!(problems.len(), 1, "{template}");
            assert_eq!(problems[0].pointer, "/t/$from");
            assert!(
                problems[0].message.contains(needle),
                "{}",
                problems[0].message
            );
        }
        assert!(check_template(&json!({"t": {"$from": "/subject/memory"}}), true).is_empty());
    }
}

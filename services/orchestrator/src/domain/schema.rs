//! The JSON Schemas of the objects and of the risk policy: embedded from `schemas/`,
//! compiled once, served by name, and used to refuse a malformed document with the
//! field at fault.
//!
//! Validation order: the document must be an object; its `schema_version` must be one
//! this server knows (else [`ObjectError::UnknownSchemaVersion`] naming it); then the
//! schema (JSON Schema 2020-12, formats asserted, so `ts` must be an RFC 3339
//! date-time); then the few rules a schema cannot say (unique step ids).

use std::collections::HashSet;
use std::sync::LazyLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::objects::{CanonicalObject, Plan, SCHEMA_VERSION};

/// Most field errors reported for one document.
const MAX_FIELD_ERRORS: usize = 20;
/// Longest message kept for one field error (schema messages can quote whole values).
const MAX_MESSAGE_CHARS: usize = 300;

/// Every schema the server has, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SchemaName {
    Plan,
    RiskReport,
    Approval,
    ExecTrace,
    EvalResult,
    RewardUpdate,
    RiskPolicy,
}

impl SchemaName {
    pub const ALL: [SchemaName; 7] = [
        SchemaName::Plan,
        SchemaName::RiskReport,
        SchemaName::Approval,
        SchemaName::ExecTrace,
        SchemaName::EvalResult,
        SchemaName::RewardUpdate,
        SchemaName::RiskPolicy,
    ];

    /// The name used in paths and messages (`plan`, `risk_report`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaName::Plan => "plan",
            SchemaName::RiskReport => "risk_report",
            SchemaName::Approval => "approval",
            SchemaName::ExecTrace => "exec_trace",
            SchemaName::EvalResult => "eval_result",
            SchemaName::RewardUpdate => "reward_update",
            SchemaName::RiskPolicy => "risk_policy",
        }
    }

    /// The versioned file name (`plan.v0.1.json`).
    pub fn file_name(self) -> String {
        format!("{}.v{SCHEMA_VERSION}.json", self.as_str())
    }

    /// The schema document as shipped.
    pub fn text(self) -> &'static str {
        match self {
            SchemaName::Plan => include_str!("../../schemas/plan.v0.1.json"),
            SchemaName::RiskReport => include_str!("../../schemas/risk_report.v0.1.json"),
            SchemaName::Approval => include_str!("../../schemas/approval.v0.1.json"),
            SchemaName::ExecTrace => include_str!("../../schemas/exec_trace.v0.1.json"),
            SchemaName::EvalResult => include_str!("../../schemas/eval_result.v0.1.json"),
            SchemaName::RewardUpdate => include_str!("../../schemas/reward_update.v0.1.json"),
            SchemaName::RiskPolicy => include_str!("../../schemas/risk_policy.v0.1.json"),
        }
    }

    /// Looks a schema up as `GET /schemas/{name}` names it: `plan`, `plan.v0.1` or
    /// `plan.v0.1.json`.
    pub fn parse(name: &str) -> Option<SchemaName> {
        let base = name.strip_suffix(".json").unwrap_or(name);
        let versioned = format!(".v{SCHEMA_VERSION}");
        let base = base.strip_suffix(versioned.as_str()).unwrap_or(base);
        SchemaName::ALL.into_iter().find(|s| s.as_str() == base)
    }
}

/// One field a document got wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `steps[0].tool`; `(object)` for the document as a whole.
    pub field: String,
    pub message: String,
}

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("{schema} must be a JSON object")]
    NotAnObject { schema: &'static str },
    #[error(
        "unknown schema_version {version:?} for {schema}: this server knows {known:?}",
        known = SCHEMA_VERSION
    )]
    UnknownSchemaVersion {
        schema: &'static str,
        version: String,
    },
    #[error("{schema} is invalid: field {}: {}{}", .errors[0].field, .errors[0].message, more(.errors.len()))]
    Invalid {
        schema: &'static str,
        /// At least one.
        errors: Vec<FieldError>,
    },
    /// A bug: a shipped schema does not compile.
    #[error("schemas unavailable: {0}")]
    SchemasUnavailable(String),
}

fn more(count: usize) -> String {
    match count {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    }
}

impl ObjectError {
    pub fn invalid(
        schema: SchemaName,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ObjectError::Invalid {
            schema: schema.as_str(),
            errors: vec![FieldError {
                field: field.into(),
                message: message.into(),
            }],
        }
    }

    /// The first field at fault, for the error's metadata.
    pub fn field(&self) -> Option<&str> {
        match self {
            ObjectError::Invalid { errors, .. } => errors.first().map(|e| e.field.as_str()),
            ObjectError::UnknownSchemaVersion { .. } => Some("schema_version"),
            _ => None,
        }
    }
}

struct Compiled {
    validators: Vec<(SchemaName, jsonschema::Validator)>,
}

static COMPILED: LazyLock<Result<Compiled, String>> = LazyLock::new(|| {
    let mut validators = Vec::new();
    for name in SchemaName::ALL {
        let schema: Value = serde_json::from_str(name.text())
            .map_err(|e| format!("{} is not JSON: {e}", name.file_name()))?;
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| format!("{} does not compile: {e}", name.file_name()))?;
        validators.push((name, validator));
    }
    Ok(Compiled { validators })
});

/// Compiles every schema now (the service calls this at start so a broken build fails
/// there, not on the first request).
pub fn ensure_compiled() -> Result<(), ObjectError> {
    COMPILED
        .as_ref()
        .map(|_| ())
        .map_err(|e| ObjectError::SchemasUnavailable(e.clone()))
}

/// Checks `value` against the schema `name`, version first.
pub fn validate(name: SchemaName, value: &Value) -> Result<(), ObjectError> {
    let object = value.as_object().ok_or(ObjectError::NotAnObject {
        schema: name.as_str(),
    })?;
    match object.get("schema_version") {
        None => {
            return Err(ObjectError::invalid(
                name,
                "schema_version",
                "\"schema_version\" is a required property",
            ));
        }
        Some(Value::String(version)) if version != SCHEMA_VERSION => {
            return Err(ObjectError::UnknownSchemaVersion {
                schema: name.as_str(),
                version: version.clone(),
            });
        }
        Some(Value::String(_)) => {}
        Some(_) => {
            return Err(ObjectError::invalid(
                name,
                "schema_version",
                "must be a string",
            ));
        }
    }
    let compiled = COMPILED
        .as_ref()
        .map_err(|e| ObjectError::SchemasUnavailable(e.clone()))?;
    let validator = compiled
        .validators
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .ok_or_else(|| ObjectError::SchemasUnavailable(format!("no schema {}", name.as_str())))?;
    let errors: Vec<FieldError> = validator
        .iter_errors(value)
        .take(MAX_FIELD_ERRORS)
        .map(|error| field_error(&error))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ObjectError::Invalid {
            schema: name.as_str(),
            errors,
        })
    }
}

/// Validates `value` and reads it as `T`, with the rules beyond the schema.
pub fn parse_object<T: CanonicalObject>(value: &Value) -> Result<T, ObjectError> {
    validate(T::SCHEMA, value)?;
    let object: T = serde_json::from_value(value.clone())
        .map_err(|e| ObjectError::invalid(T::SCHEMA, "(object)", e.to_string()))?;
    Ok(object)
}

/// A plan, validated, with step ids unique across its steps and rollback steps (traces
/// and risk reports name steps by id).
pub fn parse_plan(value: &Value) -> Result<Plan, ObjectError> {
    let plan: Plan = parse_object(value)?;
    let mut seen = HashSet::new();
    for (index, (step, rollback)) in plan.all_steps().enumerate() {
        if !seen.insert(step.step_id.as_str()) {
            let field = if rollback {
                format!("rollback_steps[{}].step_id", index - plan.steps.len())
            } else {
                format!("steps[{index}].step_id")
            };
            return Err(ObjectError::invalid(
                SchemaName::Plan,
                field,
                format!("step_id {:?} is used by another step", step.step_id),
            ));
        }
    }
    Ok(plan)
}

fn field_error(error: &jsonschema::ValidationError<'_>) -> FieldError {
    let mut field = pointer_to_field(error.instance_path().as_str());
    let named = match error.kind() {
        ValidationErrorKind::Required { property } => property.as_str().map(str::to_owned),
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected.first().cloned(),
        _ => None,
    };
    if let Some(name) = named {
        field = if field == "(object)" {
            name
        } else {
            format!("{field}.{name}")
        };
    }
    let mut message = error.to_string();
    if message.chars().count() > MAX_MESSAGE_CHARS {
        message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
    }
    FieldError { field, message }
}

/// `/steps/0/tool` → `steps[0].tool`; the empty pointer → `(object)`.
fn pointer_to_field(pointer: &str) -> String {
    if pointer.is_empty() {
        return "(object)".to_owned();
    }
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push('[');
            out.push_str(&segment);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::objects::{Approval, EvalResult};
    use serde_json::json;

    pub(crate) fn plan_json() -> Value {
        json!({
            "schema_version": "0.1",
            "id": "plan-1",
            "ts": "2026-02-14T10:00:00Z",
            "source": "agent:alice",
            "goal": "say hello",
            "steps": [
                {"step_id": "s1", "action": "nothing", "tool": "noema.noop", "expected_output": "ok"},
                {"step_id": "s2", "action": "store", "tool": "noema.put_canonical",
                 "expected_output": "an id", "scope": ["ledger:write"], "args": {"payload": "aGk="}}
            ],
            "assumptions": ["the ledger is up", {"any": "json"}],
            "rollback_plan": "nothing to undo"
        })
    }

    #[test]
    fn every_schema_compiles_and_is_served_by_name() {
        ensure_compiled().unwrap();
        for name in SchemaName::ALL {
            let doc: Value = serde_json::from_str(name.text()).unwrap();
            assert_eq!(
                doc["$schema"],
                "https://json-schema.org/draft/2020-12/schema"
            );
            assert!(
                doc["$id"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!(":{}:0.1", name.as_str())),
                "{}",
                doc["$id"]
            );
            assert_eq!(SchemaName::parse(name.as_str()), Some(name));
            assert_eq!(SchemaName::parse(&name.file_name()), Some(name));
            assert_eq!(
                SchemaName::parse(&format!("{}.v0.1", name.as_str())),
                Some(name)
            );
        }
        assert_eq!(SchemaName::parse("plan.v0.2.json"), None);
        assert_eq!(SchemaName::parse("nope"), None);
    }

    #[test]
    fn a_valid_plan_round_trips_with_its_content_id() {
        let value = plan_json();
        let plan = parse_plan(&value).unwrap();
        assert_eq!(plan.steps.len(), 2);
        assert_eq!(plan.steps[1].scope(), ["ledger:write"]);
        assert_eq!(plan.steps[0].scope(), Vec::<String>::new().as_slice());
        // The typed object serializes back to the same JSON, hence the same address.
        assert_eq!(plan.to_json().unwrap(), value);
        assert_eq!(
            plan.content_id().unwrap(),
            noema_core::content_id::ContentId::of_json(&value).unwrap()
        );
        // Key order and number spelling do not change the address.
        let respelled: Value = serde_json::from_str(
            &serde_json::to_string_pretty(&value)
                .unwrap()
                .replace("\n", " "),
        )
        .unwrap();
        assert_eq!(
            parse_plan(&respelled).unwrap().content_id().unwrap(),
            plan.content_id().unwrap()
        );
    }

    fn invalid_field(result: Result<impl std::fmt::Debug, ObjectError>) -> String {
        match result {
            Err(ObjectError::Invalid { errors, .. }) => errors[0].field.clone(),
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_field() {
        for (edit, field) in [
            (json!({"goal": null}), "goal"),
            (json!({"ts": "yesterday"}), "ts"),
            (json!({"ts": "2026-02-14 10:00:00"}), "ts"),
            (json!({"steps": []}), "steps"),
            (json!({"extra": 1}), "extra"),
            (
                json!({"rollback_steps": [{"step_id": "r"}]}),
                "rollback_steps[0].action",
            ),
        ] {
            let mut value = plan_json();
            for (k, v) in edit.as_object().unwrap() {
                value[k] = v.clone();
            }
            assert_eq!(invalid_field(parse_plan(&value)), field, "{edit}");
        }
        let mut value = plan_json();
        value.as_object_mut().unwrap().remove("rollback_plan");
        assert_eq!(invalid_field(parse_plan(&value)), "rollback_plan");
        let mut value = plan_json();
        value["steps"][1].as_object_mut().unwrap().remove("tool");
        assert_eq!(invalid_field(parse_plan(&value)), "steps[1].tool");
        value = plan_json();
        value["steps"][0]["scopes"] = json!(["typo"]);
        assert_eq!(invalid_field(parse_plan(&value)), "steps[0].scopes");
        value = plan_json();
        value["steps"][1]["scope"] = json!(["a", "a"]);
        assert_eq!(invalid_field(parse_plan(&value)), "steps[1].scope");

        let err = parse_plan(&json!({"schema_version": "0.1"})).unwrap_err();
        assert!(
            err.to_string().starts_with("plan is invalid: field "),
            "{err}"
        );
        assert!(err.to_string().contains("more)"), "{err}");
    }

    #[test]
    fn duplicate_step_ids_are_refused() {
        let mut value = plan_json();
        value["steps"][1]["step_id"] = json!("s1");
        assert_eq!(invalid_field(parse_plan(&value)), "steps[1].step_id");
        let mut value = plan_json();
        value["rollback_steps"] = json!([
            {"step_id": "s2", "action": "undo", "tool": "noema.noop", "expected_output": ""}
        ]);
        assert_eq!(
            invalid_field(parse_plan(&value)),
            "rollback_steps[0].step_id"
        );
    }

    #[test]
    fn unknown_schema_versions_are_refused_by_name() {
        let mut value = plan_json();
        value["schema_version"] = json!("0.2");
        let err = parse_plan(&value).unwrap_err();
        assert_eq!(
            err,
            ObjectError::UnknownSchemaVersion {
                schema: "plan",
                version: "0.2".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "unknown schema_version \"0.2\" for plan: this server knows \"0.1\""
        );
        assert_eq!(err.field(), Some("schema_version"));
        value["schema_version"] = json!(0.1);
        assert_eq!(invalid_field(parse_plan(&value)), "schema_version");
        value.as_object_mut().unwrap().remove("schema_version");
        assert_eq!(invalid_field(parse_plan(&value)), "schema_version");
        assert_eq!(
            parse_plan(&json!([1])).unwrap_err(),
            ObjectError::NotAnObject { schema: "plan" }
        );
    }

    #[test]
    fn every_object_requires_the_four_common_fields() {
        let samples: [(SchemaName, Value); 6] = [
            (SchemaName::Plan, plan_json()),
            (
                SchemaName::Approval,
                json!({"schema_version": "0.1", "id": "a1", "ts": "2026-02-14T10:00:00Z",
                       "source": "human:bob", "decision": "approve", "approver": "human:bob",
                       "reason": "fine", "scope": ["ledger:write"]}),
            ),
            (
                SchemaName::EvalResult,
                json!({"schema_version": "0.1", "id": "e1", "ts": "2026-02-14T10:00:00Z",
                       "source": "agent:eve", "suite": "default", "score": 0.9, "pass": true,
                       "regression": false, "findings": []}),
            ),
            (
                SchemaName::ExecTrace,
                json!({"schema_version": "0.1", "id": "t1", "ts": "2026-02-14T10:00:00Z",
                       "source": "orchestrator", "trace_id": "t1", "plan_id": "plan-1",
                       "risk_report_id": "r1", "tool_calls": [], "artifacts": [],
                       "status": "blocked"}),
            ),
            (
                SchemaName::RiskReport,
                json!({"schema_version": "0.1", "id": "r1", "ts": "2026-02-14T10:00:00Z",
                       "source": "orchestrator", "plan_id": "plan-1", "risk_level": "L0",
                       "reasons": [], "required_permission": "", "requires_approval": false,
                       "forbidden": false, "policy_version": "p", "approvals_required": 0,
                       "policy_hash": noema_core::content_id::ContentId::from_digest(&[0; 32]).into_string(),
                       "required_scope": [], "steps": []}),
            ),
            (
                SchemaName::RewardUpdate,
                json!({"schema_version": "0.1", "id": "w1", "ts": "2026-02-14T10:00:00Z",
                       "source": "orchestrator", "actor_id": "agent:alice", "rep_before": 0,
                       "rep_after": 1, "delta": 1, "reason_codes": [],
                       "inputs": {"correct": 1, "incorrect": 0, "noise": 0, "alpha": 1,
                                  "beta": 1.2, "gamma": 0.5, "rep_cap": 100}}),
            ),
        ];
        for (name, value) in samples {
            validate(name, &value).unwrap_or_else(|e| panic!("{e}"));
            for field in ["id", "ts", "source"] {
                let mut broken = value.clone();
                broken.as_object_mut().unwrap().remove(field);
                let err = validate(name, &broken).unwrap_err();
                assert_eq!(err.field(), Some(field), "{name:?}");
            }
        }
        // Typed parsing of each.
        let approval: Approval = parse_object(&json!({"schema_version": "0.1", "id": "a1",
            "ts": "2026-02-14T10:00:00Z", "source": "human:bob", "decision": "reject",
            "approver": "human:bob", "reason": "no", "scope": []}))
        .unwrap();
        assert_eq!(approval.decision, crate::domain::objects::Decision::Reject);
        let eval = parse_object::<EvalResult>(&json!({"schema_version": "0.1", "id": "e1",
            "ts": "2026-02-14T10:00:00+02:00", "source": "agent:eve", "suite": "default",
            "score": 1.5, "pass": true, "regression": false, "findings": []}));
        assert_eq!(invalid_field(eval), "score");
    }
}

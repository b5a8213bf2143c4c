//! JSON Schema, validated inside the kernel with the `jsonschema` crate (D18): tool-loop
//! outputs, WorldPatches, tool arguments, source results, and the kernel's own component
//! contracts. A schema is compiled once (which also checks it against its meta-schema — a
//! schema that is merely "object-shaped" is not accepted), and every violation comes back as
//! a [`Problem`] naming the offending value's JSON Pointer.

use std::sync::LazyLock;

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

use super::hash::ContentHash;
use super::problem::{Problem, pointer_push};

/// Longest message kept from a validator, so one huge instance cannot flood an error.
const MAX_MESSAGE_CHARS: usize = 300;

/// A compiled JSON Schema and the hash of the document it came from.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    document: Value,
    hash: ContentHash,
    validator: jsonschema::Validator,
}

impl CompiledSchema {
    /// Compiles `schema` (draft 2020-12 unless its `$schema` says otherwise, formats
    /// asserted). References must resolve inside the document: nothing is fetched.
    pub fn compile(schema: &Value) -> Result<CompiledSchema, Vec<Problem>> {
        let hash = ContentHash::of_json(schema)
            .map_err(|e| vec![Problem::new("", format!("not canonicalizable JSON: {e}"))])?;
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|error| {
                vec![Problem::new(
                    error.instance_path().as_str(),
                    format!("not a valid JSON Schema: {}", clip(&error.to_string())),
                )]
            })?;
        Ok(CompiledSchema {
            document: schema.clone(),
            hash,
            validator,
        })
    }

    pub fn hash(&self) -> &ContentHash {
        &self.hash
    }

    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Every way `instance` breaks the schema, sorted by pointer; empty when it conforms.
    pub fn violations(&self, instance: &Value) -> Vec<Problem> {
        let mut problems: Vec<Problem> = self
            .validator
            .iter_errors(instance)
            .flat_map(|error| problems_of(&error))
            .collect();
        problems.sort();
        problems.dedup();
        problems
    }

    pub fn check(&self, instance: &Value) -> Result<(), Vec<Problem>> {
        let problems = self.violations(instance);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

/// One validator error as problems: a missing or unexpected property is named by its own
/// pointer (`/nodes/0/max_tool_calls`), not its parent's.
fn problems_of(error: &jsonschema::ValidationError<'_>) -> Vec<Problem> {
    let at = error.instance_path().as_str();
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            vec![Problem::new(pointer_push(at, &name), "is required")]
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|name| Problem::new(pointer_push(at, name), "is not allowed here"))
            .collect(),
        ValidationErrorKind::OneOfNotValid { .. } | ValidationErrorKind::AnyOf { .. } => {
            vec![Problem::new(at, "does not match any of the allowed forms")]
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => {
            vec![Problem::new(
                at,
                "matches more than one of the allowed forms",
            )]
        }
        _ => vec![Problem::new(at, clip(&error.to_string()))],
    }
}

fn clip(text: &str) -> String {
    if text.chars().count() <= MAX_MESSAGE_CHARS {
        text.to_owned()
    } else {
        let mut out: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
        out.push('…');
        out
    }
}

/// The schemas that ship with the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Builtin {
    /// The WorldPatch contract; a built-in `json_schema` component (`GET /json-schemas/world-patch`).
    WorldPatch,
    /// The `tool_call` | `final_patch` envelope every llm_tool_loop generation must match.
    ToolLoopOutput,
    CognitionWorkflow,
    ResponseSource,
    CognitionProfile,
    Scenario,
    /// The interface of the `llm_chat_completions` source kind.
    LlmChatInterface,
    /// The interface of the `http_json` source kind.
    HttpJsonInterface,
}

impl Builtin {
    pub const ALL: [Builtin; 8] = [
        Builtin::WorldPatch,
        Builtin::ToolLoopOutput,
        Builtin::CognitionWorkflow,
        Builtin::ResponseSource,
        Builtin::CognitionProfile,
        Builtin::Scenario,
        Builtin::LlmChatInterface,
        Builtin::HttpJsonInterface,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::WorldPatch => "world_patch",
            Builtin::ToolLoopOutput => "tool_loop_output",
            Builtin::CognitionWorkflow => "cognition_workflow",
            Builtin::ResponseSource => "response_source",
            Builtin::CognitionProfile => "cognition_profile",
            Builtin::Scenario => "scenario",
            Builtin::LlmChatInterface => "llm_chat_completions.interface",
            Builtin::HttpJsonInterface => "http_json.interface",
        }
    }

    /// The schema document as shipped (the gateway documents bodies with it).
    pub fn text(self) -> &'static str {
        match self {
            Builtin::WorldPatch => include_str!("../../schemas/world_patch.schema.json"),
            Builtin::ToolLoopOutput => include_str!("../../schemas/tool_loop_output.schema.json"),
            Builtin::CognitionWorkflow => {
                include_str!("../../schemas/cognition_workflow.schema.json")
            }
            Builtin::ResponseSource => include_str!("../../schemas/response_source.schema.json"),
            Builtin::CognitionProfile => {
                include_str!("../../schemas/cognition_profile.schema.json")
            }
            Builtin::Scenario => include_str!("../../schemas/scenario.schema.json"),
            Builtin::LlmChatInterface => {
                include_str!("../../schemas/llm_chat_completions.interface.schema.json")
            }
            Builtin::HttpJsonInterface => {
                include_str!("../../schemas/http_json.interface.schema.json")
            }
        }
    }

    /// The compiled schema. Built-ins are checked by the tests, so the error arm is a broken
    /// build, reported as a problem rather than a panic.
    pub fn schema(self) -> Result<&'static CompiledSchema, Problem> {
        static COMPILED: LazyLock<Vec<Result<CompiledSchema, String>>> = LazyLock::new(|| {
            Builtin::ALL
                .iter()
                .map(|builtin| {
                    let document: Value = serde_json::from_str(builtin.text())
                        .map_err(|e| format!("not JSON: {e}"))?;
                    CompiledSchema::compile(&document).map_err(|problems| {
                        problems
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                })
                .collect()
        });
        let index = Builtin::ALL
            .iter()
            .position(|b| *b == self)
            .unwrap_or_default();
        match COMPILED.get(index) {
            Some(Ok(schema)) => Ok(schema),
            Some(Err(why)) => Err(Problem::new(
                "",
                format!("built-in schema {} is broken: {why}", self.name()),
            )),
            None => Err(Problem::new(
                "",
                format!("built-in schema {} is missing", self.name()),
            )),
        }
    }

    /// Validates `instance` against this built-in.
    pub fn check(self, instance: &Value) -> Result<(), Vec<Problem>> {
        self.schema().map_err(|p| vec![p])?.check(instance)
    }
}

/// Annotation keywords: they describe a schema without changing what it accepts.
const ANNOTATIONS: [&str; 8] = [
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "examples",
    "default",
    "deprecated",
];

/// `schema` with every annotation keyword removed at every depth (property names inside
/// `properties` are data, not keywords, and are kept).
pub fn without_annotations(schema: &Value) -> Value {
    fn strip(value: &Value, keys_are_keywords: bool) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(key, _)| !(keys_are_keywords && ANNOTATIONS.contains(&key.as_str())))
                    .map(|(key, inner)| {
                        // Under these keywords the keys are names, not keywords.
                        let names_follow = keys_are_keywords
                            && matches!(
                                key.as_str(),
                                "properties"
                                    | "$defs"
                                    | "definitions"
                                    | "patternProperties"
                                    | "dependentSchemas"
                            );
                        let inner = if names_follow {
                            match inner {
                                Value::Object(names) => Value::Object(
                                    names
                                        .iter()
                                        .map(|(name, sub)| (name.clone(), strip(sub, true)))
                                        .collect(),
                                ),
                                other => other.clone(),
                            }
                        } else if keys_are_keywords && matches!(key.as_str(), "const" | "enum") {
                            inner.clone()
                        } else {
                            strip(inner, keys_are_keywords)
                        };
                        (key.clone(), inner)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| strip(item, keys_are_keywords))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    strip(schema, true)
}

/// Whether `schema` is the WorldPatch contract: the built-in itself, or the same document
/// once annotations (`title`, `description`, `$schema`, …) are set aside.
pub fn is_world_patch_schema(schema: &Value) -> bool {
    match Builtin::WorldPatch.schema() {
        Ok(builtin) => without_annotations(schema) == without_annotations(builtin.document()),
        Err(_) => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_builtin_compiles() {
        for builtin in Builtin::ALL {
            let schema = builtin.schema().unwrap_or_else(|p| panic!("{p}"));
            assert_eq!(
                schema.hash(),
                &ContentHash::of_json(schema.document()).unwrap()
            );
        }
    }

    #[test]
    fn builtin_id_patterns_are_the_rust_grammar() {
        let workflow = Builtin::CognitionWorkflow.schema().unwrap().document();
        assert_eq!(
            workflow["$defs"]["human_id"]["pattern"],
            json!(crate::domain::ids::ID_PATTERN)
        );
        let scenario = Builtin::Scenario.schema().unwrap().document();
        assert_eq!(
            scenario["$defs"]["human_id"]["pattern"],
            json!(crate::domain::ids::ID_PATTERN)
        );
    }

    #[test]
    fn a_schema_must_be_a_schema_not_just_an_object() {
        assert!(CompiledSchema::compile(&json!({"type": "object"})).is_ok());
        assert!(CompiledSchema::compile(&json!(true)).is_ok());
        let bad = CompiledSchema::compile(&json!({"type": "objekt"})).unwrap_err();
        assert!(
            bad[0].message.contains("not a valid JSON Schema"),
            "{bad:?}"
        );
        let bad =
            CompiledSchema::compile(&json!({"properties": {"a": {"minimum": "x"}}})).unwrap_err();
        assert!(
            bad[0].message.contains("not a valid JSON Schema"),
            "{bad:?}"
        );
        assert!(CompiledSchema::compile(&json!("a string")).is_err());
    }

    #[test]
    fn remote_references_are_not_fetched() {
        let remote = json!({"$ref": "https://example.invalid/schema.json"});
        assert!(CompiledSchema::compile(&remote).is_err());
        let local = json!({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"});
        let schema = CompiledSchema::compile(&local).unwrap();
        assert!(schema.check(&json!(3)).is_ok());
        assert!(schema.check(&json!("3")).is_err());
    }

    #[test]
    fn violations_name_the_offending_pointer() {
        let schema = CompiledSchema::compile(&json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["a", "b"],
            "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}}
        }))
        .unwrap();
        let problems = schema.violations(&json!({"a": "x", "b": ["ok", 3], "c": 1}));
        let pointers: Vec<&str> = problems.iter().map(|p| p.pointer.as_str()).collect();
        assert_eq!(pointers, ["/a", "/b/1", "/c"]);
        assert_eq!(problems[2].message, "is not allowed here");
        let missing = schema.violations(&json!({}));
        assert_eq!(
            missing,
            vec![
                Problem::new("/a", "is required"),
                Problem::new("/b", "is required")
            ]
        );
    }

    #[test]
    fn formats_are_asserted() {
        let schema =
            CompiledSchema::compile(&json!({"type": "string", "format": "date-time"})).unwrap();
        assert!(schema.check(&json!("2026-01-01T00:00:00Z")).is_ok());
        assert!(schema.check(&json!("next tuesday")).is_err());
    }

    #[test]
    fn world_patch_equivalence_ignores_annotations_only() {
        let builtin = Builtin::WorldPatch.schema().unwrap().document().clone();
        assert!(is_world_patch_schema(&builtin));
        let mut annotated = builtin.clone();
        annotated["title"] = json!("My patch");
        annotated["properties"]["narration"]["description"] = json!("what happened");
        annotated["$comment"] = json!("authored");
        assert!(is_world_patch_schema(&annotated));
        let mut weaker = builtin.clone();
        weaker["additionalProperties"] = json!(true);
        assert!(!is_world_patch_schema(&weaker));
        let mut renamed = builtin;
        renamed["required"] = json!(["narration"]);
        assert!(!is_world_patch_schema(&renamed));
        assert!(!is_world_patch_schema(&json!({"type": "object"})));
    }

    #[test]
    fn annotation_names_inside_properties_are_data() {
        let schema = json!({"properties": {"title": {"type": "string", "title": "T"}}});
        assert_eq!(
            without_annotations(&schema),
            json!({"properties": {"title": {"type": "string"}}})
        );
        let enumerated = json!({"enum": [{"title": 1}]});
        assert_eq!(without_annotations(&enumerated), enumerated);
    }
}

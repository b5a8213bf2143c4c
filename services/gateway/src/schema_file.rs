//! The JSON Schema files the services validate documents with (the orchestrator's
//! objects, the world's components), as schemars types: a body or a field declared as
//! [`Checked<F>`] is documented by the file `F` names, the one its service compiles, so
//! a document the OpenAPI description allows is one the service's schema accepts.
//!
//! The file becomes a named definition (`Plan`, `Scenario`, …); its own `$defs` become
//! definitions beside it (`Plan.step`), with its `#/$defs/…` references pointing there,
//! and its `$schema` and `$id` go (a component is not a schema resource of its own).
//!
//! An MCP tool's input schema says nothing of the document (any JSON, as for a
//! `serde_json::Value`): every token's `tools/list` carries the tool schemas (under 48 KiB
//! for the owner), and the service checks the document when the tool is called, as for a
//! REST call.

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

/// A JSON Schema file of a service, by the definition name it gets.
pub trait SchemaFile {
    /// The definition's name: a component name (`[A-Za-z0-9._-]`).
    const NAME: &'static str;
    /// The file's text, as the service embeds it.
    fn text() -> &'static str;
}

/// A JSON document that must match the schema file `F`: read as any JSON value (the
/// service checks it), documented by the file.
pub struct Checked<F> {
    pub document: Value,
    file: PhantomData<F>,
}

impl<'de, F> Deserialize<'de> for Checked<F> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|document| Checked {
            document,
            file: PhantomData,
        })
    }
}

// Inlined as far as schemars knows: the definition is added here, and only for the
// document (a tool schema is `true`, as a `Value`'s is, with no definition).
impl<F: SchemaFile> JsonSchema for Checked<F> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        F::NAME.into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        if for_tools(generator) {
            return Schema::from(true);
        }
        let definitions = generator
            .settings()
            .definitions_path
            .trim_end_matches('/')
            .to_owned();
        if !generator.definitions().contains_key(F::NAME) {
            let (root, defs) = file_schema(F::NAME, F::text(), &definitions);
            generator.definitions_mut().extend(defs);
            generator.definitions_mut().insert(F::NAME.to_owned(), root);
        }
        Schema::try_from(json!({"$ref": format!("#{definitions}/{}", F::NAME)})).unwrap_or_default()
    }
}

/// Whether `generator` makes MCP tool schemas, where a document is any JSON.
pub fn for_tools(generator: &SchemaGenerator) -> bool {
    generator.settings().definitions_path == crate::route::TOOL_DEFINITIONS
}

/// The file `text` as the definition `name` whose definitions live at the pointer
/// `definitions` (`/components/schemas`): the root schema and its own definitions,
/// renamed `name.def`. A file that is not a JSON object (a broken build, which the
/// services' tests catch) allows any JSON object.
fn file_schema(name: &str, text: &str, definitions: &str) -> (Value, Map<String, Value>) {
    let Ok(Value::Object(mut root)) = serde_json::from_str::<Value>(text) else {
        return (json!({"type": "object"}), Map::new());
    };
    root.remove("$schema");
    root.remove("$id");
    let defs = match root.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    let target = |def: &str| format!("#{definitions}/{name}.{def}");
    let mut root = Value::Object(root);
    relink(&mut root, &target);
    let defs = defs
        .into_iter()
        .map(|(def, mut schema)| {
            relink(&mut schema, &target);
            (format!("{name}.{def}"), schema)
        })
        .collect();
    (root, defs)
}

/// Points every `{"$ref": "#/$defs/x"}` in `schema` at `target(x)`.
fn relink(schema: &mut Value, target: &impl Fn(&str) -> String) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get_mut("$ref")
                && let Some(def) = reference.strip_prefix("#/$defs/")
            {
                *reference = target(def);
            }
            map.values_mut().for_each(|v| relink(v, target));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| relink(v, target)),
        _ => {}
    }
}

/// Declares marker types naming schema files: `Marker => "Name", text;`.
macro_rules! schema_files {
    ($($(#[$doc:meta])* $marker:ident => $name:literal, $text:expr;)*) => {
        $(
            $(#[$doc])*
            pub enum $marker {}
            impl $crate::schema_file::SchemaFile for $marker {
                const NAME: &'static str = $name;
                fn text() -> &'static str {
                    $text
                }
            }
        )*
    };
}
pub(crate) use schema_files;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    enum Pair {}
    impl SchemaFile for Pair {
        const NAME: &'static str = "Pair";
        fn text() -> &'static str {
            r##"{"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x",
                "type": "object", "required": ["a"],
                "properties": {"a": {"$ref": "#/$defs/id"}, "b": {"$ref": "#/$defs/ids"}},
                "$defs": {"id": {"type": "string", "minLength": 1},
                          "ids": {"type": "array", "items": {"$ref": "#/$defs/id"}}}}"##
        }
    }

    #[test]
    fn a_file_becomes_a_definition_with_its_own_definitions_beside_it() {
        let mut schemas = crate::route::Schemas::for_openapi();
        let reference = schemas.requests.subschema_for::<Checked<Pair>>().to_value();
        assert_eq!(reference, json!({"$ref": "#/components/schemas/Pair"}));
        let definitions = schemas.definitions();
        assert_eq!(
            definitions["Pair"],
            json!({"type": "object", "required": ["a"], "properties": {
                "a": {"$ref": "#/components/schemas/Pair.id"},
                "b": {"$ref": "#/components/schemas/Pair.ids"}}})
        );
        assert_eq!(
            definitions["Pair.ids"],
            json!({"type": "array", "items": {"$ref": "#/components/schemas/Pair.id"}})
        );
        assert_eq!(
            definitions["Pair.id"],
            json!({"type": "string", "minLength": 1})
        );
    }
}

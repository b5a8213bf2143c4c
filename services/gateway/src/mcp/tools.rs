//! The tool table: every route declared with [`Route::tool`](crate::route::Route::tool),
//! with its input schema derived from the route's own handler types (path parameters,
//! query parameters, JSON body), built once from [`crate::route_table`].
//!
//! A tool's arguments are one flat object: each path parameter (a string), each query
//! parameter, and the fields of the JSON body. The body is nested under `body` instead
//! when it is not an object with named fields or when a field's name is also a
//! parameter's, so an argument always has one meaning.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, LazyLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::route::{Access, OperationDoc, Route, Schemas, Verb};

/// The argument that carries a body which cannot be spread into fields.
pub const BODY_ARGUMENT: &str = "body";

/// One tool: the route it calls and what `tools/list` shows of it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub verb: Verb,
    pub path: &'static str,
    /// The scope a token needs (alternatives separated by `|`); `None` for a public route.
    pub scope: Option<&'static str>,
    /// Every scope the route's RPCs need (the first is `scope`): a route that may call
    /// several RPCs is a tool only for tokens that may call all of them.
    pub scopes: Vec<&'static str>,
    pub path_params: Vec<&'static str>,
    /// Query parameter names; `true` when the parameter repeats (an array).
    pub query_params: BTreeMap<String, bool>,
    /// How the route reads a body, if it reads one.
    pub body: Option<BodyArgs>,
    /// The tool as `tools/list` shows it.
    pub tool: Tool,
}

/// Where a body's content comes from among the arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyArgs {
    /// Every argument that is not a parameter is a body field.
    Fields,
    /// The body is the `body` argument.
    Nested,
}

impl ToolSpec {
    pub fn name(&self) -> &str {
        &self.tool.name
    }

    pub fn description(&self) -> &str {
        self.tool.description.as_deref().unwrap_or_default()
    }

    /// Whether a caller holding `principal` may call this tool (the route's scope check,
    /// as the services make it).
    pub fn allowed(&self, principal: &noema_core::scopes::Principal) -> bool {
        self.scopes.iter().all(|scope| principal.allows(scope))
    }
}

/// Every tool, in route table order, and an index by name.
#[derive(Debug)]
pub struct ToolTable {
    pub tools: Vec<ToolSpec>,
    by_name: HashMap<String, usize>,
}

impl ToolTable {
    /// The tools declared on `routes`.
    pub fn from_routes(routes: &[Route]) -> ToolTable {
        let mut schemas = Schemas::for_tools();
        let documented: Vec<(&Route, OperationDoc)> = routes
            .iter()
            .filter(|route| route.tool.is_some())
            .map(|route| (route, route.operation(&mut schemas)))
            .collect();
        let definitions = schemas.requests.take_definitions(true);
        let mut tools = Vec::new();
        for (route, doc) in documented {
            if let Some(spec) = tool_spec(route, &doc, &definitions) {
                tools.push(spec);
            }
        }
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, spec)| (spec.name().to_owned(), i))
            .collect();
        ToolTable { tools, by_name }
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }
}

/// The tools of the gateway's route table.
pub fn table() -> &'static ToolTable {
    static TABLE: LazyLock<ToolTable> =
        LazyLock::new(|| ToolTable::from_routes(&crate::route_table()));
    &TABLE
}

fn tool_spec(
    route: &Route,
    doc: &OperationDoc,
    definitions: &Map<String, Value>,
) -> Option<ToolSpec> {
    let decl = route.tool?;
    let mut properties = Map::new();
    let mut required = Vec::new();
    let path_params = route.path_params();
    for name in &path_params {
        properties.insert((*name).to_owned(), json!({"type": "string"}));
        required.push(Value::from(*name));
    }
    let mut query_params = BTreeMap::new();
    for param in &doc.query {
        let mut schema = param.schema.clone();
        if let (Some(object), Some(description)) = (schema.as_object_mut(), &param.description) {
            object.insert("description".into(), Value::from(description.clone()));
        }
        query_params.insert(param.name.clone(), param.schema["type"] == "array");
        properties.insert(param.name.clone(), schema);
        if param.required {
            required.push(Value::from(param.name.clone()));
        }
    }
    let body = doc.tool_body.as_ref().or(doc.body.as_ref()).map(|body| {
        let fields = resolve(body, definitions)
            .filter(|schema| schema.get("type") == Some(&Value::from("object")))
            .and_then(|schema| {
                let fields = schema.get("properties")?.as_object()?;
                let clash = fields.keys().any(|field| properties.contains_key(field));
                (!clash && !fields.is_empty()).then_some(schema)
            });
        match fields {
            Some(schema) => {
                if let Some(fields) = schema.get("properties").and_then(Value::as_object) {
                    properties.extend(fields.clone());
                }
                if let Some(Value::Array(names)) = schema.get("required") {
                    required.extend(names.iter().cloned());
                }
                BodyArgs::Fields
            }
            None => {
                properties.insert(BODY_ARGUMENT.into(), body.clone());
                required.push(Value::from(BODY_ARGUMENT));
                BodyArgs::Nested
            }
        }
    });
    let mut schema = JsonObject::new();
    schema.insert("type".into(), Value::from("object"));
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    let defs = referenced(&Value::Object(schema.clone()), definitions);
    if !defs.is_empty() {
        schema.insert("$defs".into(), Value::Object(defs));
    }
    let schema = match without_grammar(compact(Value::Object(schema))) {
        Value::Object(schema) => schema,
        _ => JsonObject::new(),
    };
    let mut tool = Tool::new(decl.name, decl.description, Arc::new(schema));
    if route.verb == Verb::Get {
        tool = tool.annotate(ToolAnnotations::new().read_only(true));
    }
    let mut scopes: Vec<&'static str> = Vec::new();
    for rpc in route.rpcs() {
        let scope = noema_proto::required_scope(rpc).unwrap_or(noema_core::scopes::AUTHENTICATED);
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    Some(ToolSpec {
        verb: route.verb,
        path: route.path,
        scope: match route.access {
            Access::Public => None,
            Access::Rpcs(_) => Some(
                scopes
                    .first()
                    .copied()
                    .unwrap_or(noema_core::scopes::AUTHENTICATED),
            ),
        },
        scopes,
        path_params,
        query_params,
        body,
        tool,
    })
}

/// `schema` without what tells an MCP client nothing, since every token's `tools/list` carries
/// it (the 48 KB budget): defaults equal to leaving the argument out (`null`, `[]`,
/// `""`), `"additionalProperties": true` (the default), a `u64`'s `"maximum"` (the type's
/// own bound), and `null` as an alternative for an optional property (leaving it out says
/// the same). A client following the compact schema sends what the full one allows.
/// (Formats, schemars' Rust number widths among them, go with the grammar:
/// [`without_grammar`].)
fn compact(schema: Value) -> Value {
    match schema {
        Value::Object(mut map) => {
            if matches!(map.get("default"), Some(Value::Null))
                || matches!(map.get("default"), Some(Value::Array(a)) if a.is_empty())
                || matches!(map.get("default"), Some(Value::String(s)) if s.is_empty())
            {
                map.remove("default");
            }
            // The default: any other property is allowed.
            if map.get("additionalProperties") == Some(&Value::Bool(true)) {
                map.remove("additionalProperties");
            }
            if map.get("maximum").and_then(Value::as_u64) == Some(u64::MAX) {
                map.remove("maximum");
            }
            let required: BTreeSet<String> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if let Some(Value::Object(properties)) = map.get_mut("properties") {
                for (name, property) in properties.iter_mut() {
                    if !required.contains(name) {
                        *property = without_null(compact(std::mem::take(property)));
                    }
                }
            }
            Value::Object(map.into_iter().map(|(k, v)| (k, compact(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(compact).collect()),
        other => other,
    }
}

/// `schema` without the grammar of its strings and arrays (patterns, formats, lengths, item
/// counts, uniqueness, the allowed texts of a string, which the descriptions name): like the routes'
/// path and query grammars, it is for the OpenAPI document only, since every token's
/// `tools/list` carries the tool schemas (the 48 KB budget); the services refuse what it
/// describes as they always do. A keyword is recognised by its value's type, so a property
/// that happens to be named `pattern` stays; an `anyOf` left with an arm that allows
/// anything allows anything, and goes too.
fn without_grammar(schema: Value) -> Value {
    match schema {
        Value::Object(map) => {
            let map: Map<String, Value> = map
                .into_iter()
                .filter(|(key, value)| !is_grammar(key, value))
                .map(|(key, value)| (key, without_grammar(value)))
                .collect();
            let allows_anything = |arms: &Value| {
                arms.as_array()
                    .is_some_and(|arms| arms.iter().any(|arm| arm == &json!({})))
            };
            Value::Object(
                map.into_iter()
                    .filter(|(key, value)| !(key == "anyOf" && allows_anything(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(without_grammar).collect()),
        other => other,
    }
}

/// Whether `key: value` in a schema is a grammar keyword [`without_grammar`] leaves out.
fn is_grammar(key: &str, value: &Value) -> bool {
    match key {
        "pattern" | "format" => value.is_string(),
        "minLength" | "maxLength" | "minItems" | "maxItems" => value.is_number(),
        "uniqueItems" => value.is_boolean(),
        "enum" => value
            .as_array()
            .is_some_and(|texts| texts.iter().all(|t| t.is_string() || t.is_null())),
        _ => false,
    }
}

/// An optional property's schema without its `null` alternative: `{"type": [T, "null"]}`
/// becomes `{"type": T}`, `{"anyOf": [S, {"type": "null"}]}` becomes `S`.
fn without_null(property: Value) -> Value {
    let Value::Object(mut map) = property else {
        return property;
    };
    if let Some(Value::Array(types)) = map.get("type")
        && types.len() == 2
        && types.contains(&Value::from("null"))
        && let Some(other) = types.iter().find(|t| *t != &Value::from("null")).cloned()
    {
        map.insert("type".into(), other);
    }
    if let Some(Value::Array(options)) = map.get("anyOf")
        && options.len() == 2
        && map.len() <= 2
        && let Some(position) = options.iter().position(|o| o == &json!({"type": "null"}))
    {
        let kept = options[1 - position].clone();
        let description = map.remove("description");
        let mut kept = kept;
        if let (Value::Object(kept), Some(description)) = (&mut kept, description) {
            kept.entry("description").or_insert(description);
        }
        return kept;
    }
    Value::Object(map)
}

/// The definition a `{"$ref": "#/$defs/X"}` schema points to, or the schema itself.
fn resolve<'a>(schema: &'a Value, definitions: &'a Map<String, Value>) -> Option<&'a Value> {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(target) => definitions.get(target.strip_prefix("#/$defs/")?),
        None => Some(schema),
    }
}

/// The definitions `schema` refers to, directly or through other definitions.
fn referenced(schema: &Value, definitions: &Map<String, Value>) -> Map<String, Value> {
    fn refs(value: &Value, found: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref")
                    && let Some(name) = target.strip_prefix("#/$defs/")
                {
                    found.insert(name.to_owned());
                }
                map.values().for_each(|v| refs(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
            _ => {}
        }
    }
    let mut wanted = BTreeSet::new();
    refs(schema, &mut wanted);
    let mut out = Map::new();
    let mut pending: Vec<String> = wanted.into_iter().collect();
    while let Some(name) = pending.pop() {
        if out.contains_key(&name) {
            continue;
        }
        if let Some(definition) = definitions.get(&name) {
            let mut more = BTreeSet::new();
            refs(definition, &mut more);
            pending.extend(more.into_iter().filter(|n| !out.contains_key(n)));
            out.insert(name, definition.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_schemas_drop_only_what_leaving_an_argument_out_says() {
        let schema = json!({
            "type": "object",
            "properties": {
                "limit": {"type": ["integer", "null"], "minimum": 0, "default": null},
                "turn": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                "meta": {"type": "object", "additionalProperties": true},
                "strict": {"type": "object", "additionalProperties": false},
                "mode": {"type": "string", "default": "fast"},
                "when": {"anyOf": [{"$ref": "#/$defs/When"}, {"type": "null"}], "description": "d"},
                "must": {"type": ["string", "null"]}
            },
            "required": ["must"]
        });
        assert_eq!(
            compact(schema),
            json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "minimum": 0},
                    "turn": {"type": "integer", "minimum": 0},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "meta": {"type": "object"},
                    "strict": {"type": "object", "additionalProperties": false},
                    "mode": {"type": "string", "default": "fast"},
                    "when": {"$ref": "#/$defs/When", "description": "d"},
                    "must": {"type": ["string", "null"]}
                },
                "required": ["must"]
            })
        );
    }

    #[test]
    fn tool_schemas_leave_string_and_array_grammars_to_the_document() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "\\S"},
                "ids": {"type": "array", "minItems": 1, "maxItems": 100, "uniqueItems": true,
                        "items": {"type": "string", "pattern": "^[0-9a-f]+$"}},
                "pattern": {"type": "string", "enum": ["a", "b"]},
                "importance": {"type": "integer", "minimum": 0, "maximum": 10, "enum": [1, 2]},
                "after": {"type": "string", "anyOf": [{"format": "date-time"}, {"maxLength": 0}]},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "at": {"type": "string", "format": "date-time"},
                "count": {"type": "integer", "format": "uint32"}
            },
            "required": ["name", "pattern"]
        });
        assert_eq!(
            without_grammar(schema),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "ids": {"type": "array", "items": {"type": "string"}},
                    "pattern": {"type": "string"},
                    "importance": {"type": "integer", "minimum": 0, "maximum": 10, "enum": [1, 2]},
                    "after": {"type": "string"},
                    "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "at": {"type": "string"},
                    "count": {"type": "integer"}
                },
                "required": ["name", "pattern"]
            })
        );
    }

    #[test]
    fn tool_names_are_unique_and_valid() {
        let table = table();
        assert!(!table.tools.is_empty());
        let mut seen = BTreeSet::new();
        for spec in &table.tools {
            let name = spec.name();
            assert!(seen.insert(name), "{name} declared twice");
            assert!(
                (1..=128).contains(&name.len())
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')),
                "{name} is not a valid MCP tool name"
            );
            assert!(table.get(name).is_some_and(|s| s.path == spec.path));
        }
    }

    #[test]
    fn input_schemas_are_objects_whose_references_resolve() {
        for spec in &table().tools {
            let schema = Value::Object(spec.tool.input_schema.as_ref().clone());
            assert_eq!(schema["type"], "object", "{}", spec.name());
            let properties = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap_or_default();
                assert!(properties.contains_key(name), "{}: {name}", spec.name());
            }
            for name in &spec.path_params {
                assert!(properties.contains_key(*name), "{}: {name}", spec.name());
            }
            let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
            let mut wanted = BTreeSet::new();
            fn refs(value: &Value, found: &mut BTreeSet<String>) {
                match value {
                    Value::Object(map) => {
                        if let Some(Value::String(target)) = map.get("$ref") {
                            found.insert(target.clone());
                        }
                        map.values().for_each(|v| refs(v, found));
                    }
                    Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
                    _ => {}
                }
            }
            refs(&schema, &mut wanted);
            for target in wanted {
                let name = target.strip_prefix("#/$defs/").unwrap_or_default();
                assert!(defs.contains_key(name), "{}: {target}", spec.name());
            }
        }
    }

    #[test]
    fn a_tool_is_allowed_only_with_every_scope_its_route_needs() {
        let principal = |scopes: &[&str]| noema_core::scopes::Principal {
            token_id: "t".into(),
            peer_id: "p".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            read_namespaces: Vec::new(),
            write_namespaces: Vec::new(),
            superuser: false,
            tenant: "p".into(),
        };
        let table = table();
        let status = table
            .get("ledger_status")
            .map(|s| s.allowed(&principal(&["ledger:read"])));
        assert_eq!(status, Some(true));
        let stop = table
            .get("ledger_stop")
            .map(|s| s.allowed(&principal(&["ledger:read"])));
        assert_eq!(stop, Some(false));
        let health = table
            .get("system.health")
            .map(|s| s.allowed(&principal(&[])));
        assert_eq!(health, Some(true));
        for spec in &table.tools {
            assert_eq!(
                spec.scope,
                spec.scopes
                    .first()
                    .copied()
                    .filter(|_| spec.scope.is_some())
            );
        }
    }
}

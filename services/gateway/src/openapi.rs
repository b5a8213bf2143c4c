//! The OpenAPI 3.1 document, generated from the same route declarations that build the
//! router, so every served route is documented and nothing undocumented is served.
//! Request and response schemas are the handlers' own serde types (`schemars`); error
//! responses carry the schema of the route's system's error body.

use serde_json::{Map, Value, json};

use noema_continuity::domain::schema::Ty;

use crate::route::{Access, Route, Schemas};

/// Error statuses every protected route may answer, besides its own.
const PROTECTED_ERRORS: [(u16, &str); 5] = [
    (400, "Invalid input"),
    (401, "Missing or invalid token"),
    (403, "The token lacks the required scope"),
    (500, "Internal error"),
    (503, "Unavailable"),
];

pub fn document() -> Value {
    let mut schemas = Schemas::for_openapi();
    let mut paths = Map::new();
    for route in crate::route_table() {
        let operation = operation(&route, &mut schemas);
        if let Value::Object(ops) = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()))
        {
            ops.insert(route.verb.as_str().to_ascii_lowercase(), operation);
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Noema REST gateway",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "REST for every Noema service, on the original systems' own paths. \
                            Errors are JSON {\"error\", \"code\"} with the seed system's extra fields."
        },
        "paths": paths,
        "security": [{"bearerAuth": []}],
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer",
                               "description": "A Noema token (noema_…); the owner token is in <data_dir>/owner.token"}
            },
            "schemas": schemas.definitions(),
        }
    })
}

fn operation(route: &Route, schemas: &mut Schemas) -> Value {
    let doc = route.operation(schemas);
    let mut responses = Map::new();
    for response in &doc.responses {
        let mut entry = json!({"description": response.description});
        if let Some((media, schema)) = &response.content {
            entry["content"] = json!({ *media: {"schema": schema} });
        }
        responses.insert(response.status.to_string(), entry);
    }
    let public = route.access == Access::Public;
    let mut errors: Vec<(u16, &str)> = if public {
        vec![(503, "Unavailable")]
    } else {
        PROTECTED_ERRORS.to_vec()
    };
    errors.extend(route.errors.validation_status());
    // What a route reads from its caller may be refused, and what a path names may not
    // exist: every route answers these, public or not.
    let takes_input =
        !route.path_params().is_empty() || !doc.query.is_empty() || doc.body.is_some();
    if public && takes_input {
        errors.push((400, "Invalid input"));
    }
    if !route.path_params().is_empty() {
        errors.push((404, "Nothing by that name, or not visible to the caller"));
    }
    // A route's own description of a status says more than the common one.
    errors.retain(|(status, _)| !route.statuses.iter().any(|(own, _)| own == status));
    errors.extend(route.statuses.iter().copied());
    let error_schema = route.errors.schema(&mut schemas.responses).to_value();
    for (status, description) in errors {
        responses.entry(status.to_string()).or_insert_with(|| {
            json!({
                "description": description,
                "content": {"application/json": {"schema": error_schema}},
            })
        });
    }

    let mut op = json!({
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
        "responses": responses,
    });
    if let Some(description) = route.description {
        op["description"] = json!(description);
    }
    if public {
        op["security"] = json!([]);
    } else if let Some(scope) = route.scope() {
        op["security"] = security(scope);
        op["x-required-scope"] = json!(scope);
        op["x-rpcs"] = json!(route.rpcs());
    }

    let mut parameters: Vec<Value> = route
        .path_params()
        .into_iter()
        .map(|name| {
            let schema = grammar(route, name).unwrap_or_else(|| json!({"type": "string"}));
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect();
    parameters.extend(doc.query.iter().map(|param| {
        let (schema, required) = match route.query_model.and_then(|m| m.field(&param.name)) {
            Some(field) => (query_schema(&field.ty), field.required),
            None => (
                grammar(route, &param.name).unwrap_or_else(|| param.schema.clone()),
                param.required,
            ),
        };
        let mut value = json!({
            "name": param.name,
            "in": "query",
            "required": required,
            "schema": schema,
        });
        if let Some(description) = &param.description {
            value["description"] = json!(description);
        }
        if param.schema["type"] == "array" {
            // Repeated names: `tags=a&tags=b`.
            value["explode"] = json!(true);
        }
        value
    }));
    if !parameters.is_empty() {
        op["parameters"] = Value::Array(parameters);
    }
    if let Some(body) = doc.body {
        op["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": body}},
        });
    }
    op
}

/// The grammar the route declares for its parameter `name`, if any. The help route's tool
/// `name` is one of the MCP tools, whose table is built from the routes (so the route
/// cannot declare it itself).
fn grammar(route: &Route, name: &str) -> Option<Value> {
    if route.path == crate::routes::help::TOOL_PATH && name == "name" {
        let tools: Vec<&str> = crate::mcp::tools::table()
            .tools
            .iter()
            .map(|t| t.name())
            .collect();
        return Some(json!({"type": "string", "enum": tools}));
    }
    route
        .param_schemas
        .iter()
        .find(|(param, _)| *param == name)
        .map(|(_, schema)| schema.clone())
}

/// A query parameter's schema from its model field: a query value is present or absent,
/// never null, and holds no nested model.
fn query_schema(ty: &Ty) -> Value {
    let ty = match ty {
        Ty::Nullable(inner) => inner,
        other => other,
    };
    match ty {
        // A body's lax `true`/`false` are JSON booleans: in a query they are text the
        // service does not read as integers.
        Ty::Int { ge, le } => noema_continuity::domain::schema::integer_schema(*ge, *le),
        _ => noema_continuity::domain::schema::json_schema(ty, &mut |_| json!({"type": "object"})),
    }
}

/// A scope's alternatives (`a|b`) as OpenAPI's alternative security requirements; the
/// pseudo-scope `authenticated` is any valid token.
fn security(scope: &str) -> Value {
    if scope == noema_core::scopes::AUTHENTICATED {
        return json!([{"bearerAuth": []}]);
    }
    Value::Array(
        scope
            .split('|')
            .map(|alternative| json!({"bearerAuth": [alternative]}))
            .collect(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

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

    #[test]
    fn every_reference_resolves_and_every_operation_is_described() {
        let doc = document();
        let mut found = BTreeSet::new();
        refs(&doc, &mut found);
        assert!(!found.is_empty());
        for target in found {
            let pointer = target.trim_start_matches('#');
            assert!(doc.pointer(pointer).is_some(), "{target} does not resolve");
        }
        let mut ids = BTreeSet::new();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                let id = op["operationId"].as_str().unwrap();
                assert!(ids.insert(id.to_owned()), "{id} twice");
                let responses = op["responses"].as_object().unwrap();
                assert!(
                    responses.keys().any(|status| status.starts_with('2')),
                    "{method} {path} documents no success"
                );
            }
        }
    }

    #[test]
    fn every_protected_route_names_rpcs_the_contracts_have() {
        for route in crate::route_table() {
            if route.access == Access::Public {
                continue;
            }
            assert!(
                !route.rpcs().is_empty(),
                "{} {} is neither public nor calls an RPC",
                route.verb.as_str(),
                route.path
            );
            for rpc in route.rpcs() {
                assert!(
                    noema_proto::required_scope(rpc).is_some(),
                    "{} {} calls {rpc}, which no contract has",
                    route.verb.as_str(),
                    route.path
                );
            }
        }
    }

    #[test]
    fn request_and_response_schemas_do_not_share_a_name() {
        let mut schemas = Schemas::for_openapi();
        for route in crate::route_table() {
            operation(&route, &mut schemas);
        }
        let responses = schemas.responses.definitions();
        for (name, schema) in schemas.requests.definitions() {
            if let Some(other) = responses.get(name) {
                assert_eq!(schema, other, "{name} is described twice, differently");
            }
        }
    }

    #[test]
    fn object_bodies_are_the_services_own_schema_files() {
        use noema_orchestrator::domain::schema::SchemaName;
        use noema_world::domain::schema::Builtin;

        let doc = document();
        let body = |path: &str| {
            let schema =
                &doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"];
            schema["$ref"].as_str().unwrap().to_owned()
        };
        let component = |reference: &str| {
            let name = reference.trim_start_matches("#/components/schemas/");
            doc["components"]["schemas"][name].clone()
        };
        let file = |text: &str| -> Value { serde_json::from_str(text).unwrap() };
        for (path, text) in [
            ("/plan", SchemaName::Plan.text()),
            ("/cognition-profiles", Builtin::CognitionProfile.text()),
            ("/cognition-workflows", Builtin::CognitionWorkflow.text()),
            ("/scenarios", Builtin::Scenario.text()),
        ] {
            let documented = component(&body(path));
            let file = file(text);
            for keyword in ["required", "additionalProperties", "title"] {
                assert_eq!(documented[keyword], file[keyword], "{path} {keyword}");
            }
            assert!(documented.get("$defs").is_none(), "{path}");
        }
        let approve = component(&body("/approve"));
        assert_eq!(
            approve["properties"]["approval"]["$ref"],
            "#/components/schemas/Approval"
        );
        assert!(approve.pointer("/properties/approval/default").is_none());
        assert_eq!(
            component("#/components/schemas/Plan")["properties"]["steps"]["items"]["$ref"],
            "#/components/schemas/Plan.step"
        );
        // MCP tools take these documents as any JSON, as before (the tools/list budget).
        let tool = crate::mcp::tools::table().get("orchestrator.plan").unwrap();
        let schema = serde_json::to_value(&tool.tool.input_schema).unwrap();
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"body": true}, "required": ["body"]})
        );
    }

    #[test]
    fn bodies_errors_and_scopes_come_from_the_declarations() {
        let doc = document();
        let create = &doc["paths"]["/diaries/{id}/entries"]["post"];
        assert_eq!(
            create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/EntryInput"
        );
        assert_eq!(
            create["responses"]["201"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/EntryBody"
        );
        assert_eq!(
            create["responses"]["403"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/MoltNetProblem"
        );
        assert_eq!(
            create["security"],
            json!([{"bearerAuth": ["identity:write"]}, {"bearerAuth": ["diary:write"]}])
        );
        let canonical = &doc["paths"]["/canonical"]["post"];
        assert_eq!(
            canonical["responses"]["422"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/OpenCognitionError"
        );
        assert!(canonical["responses"].get("409").is_some());
        let entries = doc["paths"]["/diaries/{id}/entries"]["get"]["parameters"]
            .as_array()
            .unwrap();
        let tags = entries.iter().find(|p| p["name"] == "tags").unwrap();
        assert_eq!(tags["schema"]["type"], "array");
        assert_eq!(
            tags["description"],
            "Entries with all these tags (repeatable)"
        );
        assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));
        let schema = &doc["components"]["schemas"]["EntryBody"];
        assert!(schema["properties"]["contentHash"].is_object(), "{schema}");
    }

    /// CogniRelay's rules beyond its request models reach the document: patterns and bounds
    /// the service checks after pydantic, rules across fields, query integers without the
    /// lax booleans, and a rule across query parameters as the operation's description.
    #[test]
    fn cognirelay_service_rules_are_in_the_document() {
        let doc = document();
        let param = |path: &str, name: &str| {
            doc["paths"][path]["get"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap()["schema"]
                .clone()
        };
        let recipient = param("/v1/messages/inbox", "recipient");
        assert_eq!(
            recipient["pattern"],
            noema_continuity::domain::rules::BOX_NAME_PATTERN
        );
        assert_eq!(recipient.get("minLength"), None, "an empty name is a box");
        assert_eq!(
            param("/v1/coordination/handoffs/query", "limit"),
            json!({"type": "integer", "minimum": 1, "maximum": 100})
        );
        assert_eq!(
            param("/v1/schedule/items", "offset"),
            json!({"type": "integer", "minimum": 0, "maximum": 10_000})
        );
        let query = &doc["paths"]["/v1/coordination/handoffs/query"]["get"];
        assert!(
            query["description"]
                .as_str()
                .unwrap()
                .contains("sender_peer")
        );
        let schemas = &doc["components"]["schemas"];
        let handoff = &schemas["CoordinationHandoffCreateRequest"];
        assert_eq!(
            handoff["properties"]["sender_signature"]["$ref"],
            "#/components/schemas/SenderSignature"
        );
        assert_eq!(
            handoff["properties"]["commit_message"]["anyOf"][0]["maxLength"],
            120
        );
        let resolve = &schemas["CoordinationReconciliationResolveRequest"];
        assert_eq!(
            resolve["properties"]["expected_version"],
            json!({"anyOf": [
                {"type": "integer", "minimum": 1, "maximum": i64::MAX},
                {"enum": [true]}
            ]})
        );
        assert_eq!(resolve["additionalProperties"], false);
        assert!(schemas["CoordinationReconciliationOpenRequest"]["allOf"].is_array());
        let create = &schemas["ScheduleCreateRequest"];
        assert_eq!(create["additionalProperties"], false);
        assert_eq!(
            create["properties"]["due_at"]["pattern"],
            noema_continuity::domain::rules::DUE_AT_PATTERN
        );
    }
}

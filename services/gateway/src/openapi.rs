//! The OpenAPI 3.1 document, generated from the same route table that builds the router,
//! so every served route is documented and nothing undocumented is served.

use serde_json::{Map, Value, json};

use crate::RouteDoc;

pub fn document() -> Value {
    let mut paths = Map::new();
    for (doc, _) in crate::route_table() {
        let path = paths
            .entry(doc.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(ops) = path {
            ops.insert(doc.method.to_ascii_lowercase(), operation(&doc));
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
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "code"],
                    "properties": {
                        "error": {"type": "string", "description": "What went wrong and what to fix."},
                        "code": {"type": "string", "enum": [
                            "invalid_argument", "not_found", "already_exists", "failed_precondition",
                            "unauthenticated", "permission_denied", "unavailable",
                            "resource_exhausted", "internal"
                        ]},
                        "hint": {"type": "string"}
                    }
                }
            }
        }
    })
}

fn operation(doc: &RouteDoc) -> Value {
    let mut responses = Map::new();
    for (status, description) in doc.responses {
        let mut response = json!({"description": description});
        if *status >= 400 {
            response["content"] =
                json!({"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}});
        }
        responses.insert(status.to_string(), response);
    }
    let mut op = json!({
        "operationId": doc.operation_id,
        "summary": doc.summary,
        "tags": [doc.tag],
        "responses": responses,
    });
    if doc.public {
        op["security"] = json!([]);
    }
    let path_params: Vec<Value> = doc
        .path
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    if !path_params.is_empty() {
        op["parameters"] = Value::Array(path_params);
    }
    if !doc.query.is_empty() {
        let query = doc.query.iter().map(|(name, description)| {
            json!({"name": name, "in": "query", "required": false,
                   "description": description, "schema": {"type": "string"}})
        });
        let mut parameters = op["parameters"].as_array().cloned().unwrap_or_default();
        parameters.extend(query);
        op["parameters"] = Value::Array(parameters);
    }
    op
}

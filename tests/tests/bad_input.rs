//! Input the routes must refuse, each with its seed system's own validation error. A
//! route whose body is a JSON object refuses any other JSON value (an array, a string, a
//! number, `null`), never a 2xx: serde would read an array into a struct field by field,
//! and the originals validate objects. Fields are refused item by item as the original's
//! model types them, and a bad list filter is refused whatever the limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_e2e::{TestCluster, cluster_cases, concrete_path, owner};
use serde_json::Value;

cluster_cases!(
    every_object_body_route_refuses_a_body_that_is_not_an_object,
    each_system_refuses_an_array_body_in_its_own_shape,
    backup_prefixes_are_strings,
    ledger_list_filters_are_checked_before_the_limit,
);

/// JSON values that are not objects, the first as schemathesis sent it.
const NOT_OBJECTS: [&str; 5] = ["[null,null]", "[]", "\"text\"", "7", "null"];

/// Sends `body` to `method path` as the owner: (status, body as JSON or `null`).
async fn send(cluster: &TestCluster, method: &str, path: &str, body: &str) -> (u16, Value) {
    let url = format!("{}{path}", cluster.rest_url);
    let client = owner(cluster);
    let request = match method {
        "post" => client.post(&url),
        "patch" => client.patch(&url),
        "put" => client.put(&url),
        "delete" => client.delete(&url),
        other => panic!("untested method {other}"),
    };
    let response = request
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The schema `schema` names, following one `$ref` into the document's components.
fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => reference
            .trim_start_matches("#/")
            .split('/')
            .fold(doc, |node, key| &node[key]),
        None => schema,
    }
}

async fn every_object_body_route_refuses_a_body_that_is_not_an_object(cluster: &TestCluster) {
    let doc: Value = owner(cluster)
        .get(format!("{}/openapi.json", cluster.rest_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut checked = 0;
    for (path, ops) in doc["paths"].as_object().unwrap() {
        // The JSON-RPC endpoint answers its own errors inside a 200 (tests/tests/mcp.rs).
        if path == "/v1/mcp" {
            continue;
        }
        let concrete = concrete_path(path);
        for (method, op) in ops.as_object().unwrap() {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            if resolved(&doc, schema)["type"] != "object" {
                continue;
            }
            for body in NOT_OBJECTS {
                let (status, answer) = send(cluster, method, &concrete, body).await;
                assert!(
                    (400..500).contains(&status) && status != 401 && status != 403,
                    "{method} {path} answered {status} to the body {body}: {answer}"
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 40,
        "only {checked} routes with an object body found"
    );
}

async fn each_system_refuses_an_array_body_in_its_own_shape(cluster: &TestCluster) {
    // MoltNet: its RFC 9457 validation problem, as for a body that is not JSON.
    for body in NOT_OBJECTS {
        let (status, problem) = send(cluster, "post", "/diaries/search", body).await;
        assert_eq!(status, 400, "{body}: {problem}");
        assert_eq!(
            problem["type"], "https://themolt.net/problems/validation-failed",
            "{body}: {problem}"
        );
        assert_eq!(problem["code"], "VALIDATION_FAILED", "{body}: {problem}");
        assert_eq!(problem["status"], 400, "{body}: {problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .starts_with("invalid JSON: invalid type: "),
            "{body}: {problem}"
        );
    }
    let (_, problem) = send(cluster, "post", "/diaries/search", "[null,null]").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: invalid type: sequence, expected struct"),
        "{problem}"
    );

    // CogniRelay, a route the gateway decodes: FastAPI's 422 in the gateway's shape.
    let (status, error) = send(cluster, "post", "/v1/security/tokens/issue", "[]").await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["code"], "failed_precondition", "{error}");
    assert!(
        error["detail"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: invalid type: sequence"),
        "{error}"
    );
    // CogniRelay, a continuity model: pydantic's own 422 for the whole body.
    let (status, error) = send(cluster, "post", "/v1/messages/send", "[null,null]").await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(
        error["detail"][0]["type"], "model_attributes_type",
        "{error}"
    );
    assert_eq!(
        error["detail"][0]["loc"],
        serde_json::json!(["body"]),
        "{error}"
    );

    // open-cognition: Go's decoder error, 400.
    let (status, error) = send(cluster, "post", "/canonical", "[null,null]").await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(
        error["error"],
        "invalid JSON: json: cannot unmarshal array into Go value of type main.Request",
        "{error}"
    );

    // The orchestrator (Cognitive OS): its error object, 400 for a malformed body.
    let (status, error) = send(cluster, "post", "/risk", "[null]").await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["reason"], "MALFORMED_BODY", "{error}");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: invalid type: sequence"),
        "{error}"
    );

    // The world: Noema's own error body, 400.
    let (status, error) = send(cluster, "post", "/worlds", "[null,null]").await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["code"], "invalid_argument", "{error}");
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: invalid type: sequence"),
        "{error}"
    );
}

async fn backup_prefixes_are_strings(cluster: &TestCluster) {
    // pydantic's `list[str]`: one error per item that is not a string, in order.
    let body = r#"{"include_prefixes":["memory",7,null,{"a":1},"messages"]}"#;
    let url = format!("{}/v1/backup/create", cluster.rest_url);
    let response = owner(cluster)
        .post(&url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 422);
    assert_eq!(
        response.text().await.unwrap(),
        "{\"detail\":[\
         {\"type\":\"string_type\",\"loc\":[\"body\",\"include_prefixes\",1],\
         \"msg\":\"Input should be a valid string\",\"input\":7},\
         {\"type\":\"string_type\",\"loc\":[\"body\",\"include_prefixes\",2],\
         \"msg\":\"Input should be a valid string\",\"input\":null},\
         {\"type\":\"string_type\",\"loc\":[\"body\",\"include_prefixes\",3],\
         \"msg\":\"Input should be a valid string\",\"input\":{\"a\":1}}]}"
    );
    // Strings only: the backup is made.
    let (status, created) = send(
        cluster,
        "post",
        "/v1/backup/create",
        r#"{"include_prefixes":["memory","messages"]}"#,
    )
    .await;
    assert_eq!(status, 200, "{created}");
    assert!(
        created["backup_id"]
            .as_str()
            .unwrap()
            .starts_with("backup_"),
        "{created}"
    );
}

async fn ledger_list_filters_are_checked_before_the_limit(cluster: &TestCluster) {
    for list in ["/canonicals", "/references"] {
        for filter in ["created_after", "created_before"] {
            for limit in ["0", "5", ""] {
                let url = format!(
                    "{}{list}?limit={limit}&{filter}=yesterday",
                    cluster.rest_url
                );
                let response = owner(cluster).get(&url).send().await.unwrap();
                let status = response.status().as_u16();
                let error: Value = response.json().await.unwrap();
                assert_eq!(status, 422, "{url}: {error}");
                assert_eq!(
                    error["error"],
                    format!("{filter} must be an RFC 3339 timestamp like 2026-01-31T12:00:00Z"),
                    "{url}: {error}"
                );
            }
        }
        // A valid filter with limit=0 is still the empty page.
        let url = format!(
            "{}{list}?limit=0&created_after=2026-01-31T12:00:00Z",
            cluster.rest_url
        );
        let response = owner(cluster).get(&url).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{url}");
        assert_eq!(response.text().await.unwrap().trim(), "[]", "{url}");
    }
}

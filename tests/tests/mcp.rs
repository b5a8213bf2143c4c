//! The MCP endpoint (`POST /v1/mcp`) and the discovery surfaces from outside: a session
//! driven by the official MCP Python SDK with a scoped token on every shape and backend
//! (tools of every service with routes, and a tool the token may not call neither listed
//! nor callable), the protocol's edge cases over plain HTTP, the owner's `tools/list`
//! size, and `/v1/capabilities` and `/.well-known/mcp.json` against the route and tool
//! tables the gateway serves from.
//!
//! The SDK runs from the pinned virtualenv of scripts/lib/mcp_sdk.sh: `NOEMA_MCP_PYTHON`
//! (set by scripts/test), or else the test builds it; it fails when it cannot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use noema_e2e::{Backend, Shape, TestCluster, anonymous, client_as, cluster, cluster_cases};
use noema_gateway::mcp::tools;
use serde_json::{Value, json};

cluster_cases!(official_sdk_session_with_a_scoped_token);

/// What the scoped token may do: read the ledger, read and write diaries.
const SCOPES: &[&str] = &["ledger:read", "diary:read", "diary:write"];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The pinned SDK's interpreter: `NOEMA_MCP_PYTHON`, or the one scripts/lib/mcp_sdk.sh
/// builds. Panics (never skips) when there is none.
fn sdk_python() -> String {
    if let Ok(python) = std::env::var("NOEMA_MCP_PYTHON")
        && !python.is_empty()
    {
        return python;
    }
    let script = workspace_root().join("scripts/lib/mcp_sdk.sh");
    let output = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "the MCP Python SDK cannot be installed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .expect("mcp_sdk.sh prints the interpreter")
        .to_owned()
}

/// Runs tests/mcp/sdk_session.py: one SDK session in `mode` making `calls`.
async fn sdk_session(cluster: &TestCluster, token: &str, mode: &str, calls: &Value) -> Value {
    let python = sdk_python();
    let script = workspace_root().join("tests/mcp/sdk_session.py");
    let url = format!("{}/v1/mcp", cluster.rest_url);
    let output = tokio::process::Command::new(&python)
        .arg(&script)
        .args([url.as_str(), token, mode, &calls.to_string()])
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        output.status.success(),
        "the SDK session ({mode}) failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "the SDK session printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// The principal the gateway sees for a token with `scopes`.
fn principal(scopes: &[&str]) -> noema_core::scopes::Principal {
    noema_core::scopes::Principal {
        token_id: "t".into(),
        peer_id: "mcp-peer".into(),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        read_namespaces: Vec::new(),
        write_namespaces: Vec::new(),
        superuser: false,
        tenant: "mcp-peer".into(),
    }
}

async fn official_sdk_session_with_a_scoped_token(cluster: &TestCluster) {
    let token = cluster.issue_token("mcp-peer", SCOPES).await.unwrap();
    let allowed = principal(SCOPES);
    let expected: Vec<&str> = tools::table()
        .tools
        .iter()
        .filter(|spec| spec.allowed(&allowed))
        .map(|spec| spec.name())
        .collect();
    let rest = client_as(&token);

    for (mode, version) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let name = format!("mcp {mode} diary");
        let missing = "00000000-0000-4000-8000-000000000000";
        let calls = json!([
            {"name": "ledger_status"},
            {"name": "diaries_create", "arguments": {"name": name, "visibility": "private"}},
            {"name": "diaries_list"},
            {"name": "diaries_get", "arguments": {"id": missing}},
            {"name": "system.health"},
            {"name": "ledger_stop"},
            {"name": "security.tokens_issue", "arguments": {"peer_id": "x"}},
            {"name": "no_such_tool"},
        ]);
        let report = sdk_session(cluster, &token, mode, &calls).await;
        assert_eq!(report["protocol_version"], version, "{mode}: {report}");
        assert_eq!(report["server"], "noema", "{mode}");

        // Listed: exactly what the token may call, from every service with routes.
        let listed: Vec<&str> = report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(listed, expected, "{mode}");
        for name in [
            "ledger_status",
            "diaries_create",
            "entries_create",
            "system.health",
        ] {
            assert!(listed.contains(&name), "{mode}: {name} not listed");
        }
        for name in ["ledger_stop", "security.tokens_issue", "entries_delete"] {
            assert!(!listed.contains(&name), "{mode}: {name} listed");
        }

        let results = report["results"].as_array().unwrap();
        // The ledger: its status, as REST answers it.
        assert_eq!(results[0]["is_error"], false, "{mode}: {}", results[0]);
        let (_, status) = get(&rest, cluster, "/status").await;
        assert_eq!(results[0]["structured"], status, "{mode}");
        assert_eq!(
            serde_json::from_str::<Value>(results[0]["text"].as_str().unwrap()).unwrap(),
            status
        );
        // Identity's diaries: created over MCP, read back over REST, listed over MCP.
        assert_eq!(results[1]["is_error"], false, "{mode}: {}", results[1]);
        let created = &results[1]["structured"];
        assert_eq!(created["name"], name.as_str());
        let (code, fetched) = get(
            &rest,
            cluster,
            &format!("/diaries/{}", created["id"].as_str().unwrap()),
        )
        .await;
        assert_eq!((code, &fetched), (200, created), "{mode}");
        let items = results[2]["structured"]["items"].as_array().unwrap();
        assert!(
            items.iter().any(|d| d["id"] == created["id"]),
            "{mode}: {}",
            results[2]
        );
        // A route's failure is a tool result with isError and the route's error body.
        let (code, not_found) = get(&rest, cluster, &format!("/diaries/{missing}")).await;
        assert_eq!(code, 404);
        assert_eq!(results[3]["is_error"], true, "{mode}: {}", results[3]);
        assert_eq!(results[3]["structured"], not_found, "{mode}");
        // Public tools need no scope.
        assert_eq!(results[4]["structured"]["service"], "cognirelay", "{mode}");
        // Forbidden tools fail exactly as an unknown one does.
        let unknown = &results[7]["error"];
        assert_eq!(unknown["code"], -32602, "{mode}: {}", results[7]);
        for (result, tool) in [
            (&results[5], "ledger_stop"),
            (&results[6], "security.tokens_issue"),
        ] {
            assert_eq!(result["error"]["code"], unknown["code"], "{mode}: {result}");
            assert_eq!(
                result["error"]["message"],
                unknown["message"]
                    .as_str()
                    .unwrap()
                    .replace("no_such_tool", tool),
                "{mode}"
            );
        }
    }
    // The forbidden call changed nothing.
    let (_, status) = get(&rest, cluster, "/status").await;
    assert_eq!(status["mode"], "RUNNING");
}

async fn get(client: &reqwest::Client, cluster: &TestCluster, path: &str) -> (u16, Value) {
    let response = client
        .get(format!("{}{path}", cluster.rest_url))
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.json().await.unwrap_or(Value::Null),
    )
}

/// A raw MCP POST: status, headers and the JSON body (Null when empty).
async fn rpc(
    cluster: &TestCluster,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, reqwest::header::HeaderMap, Value, usize) {
    let client = token.map_or_else(anonymous, client_as);
    let mut request = client
        .post(format!("{}/v1/mcp", cluster.rest_url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (status, headers, value, bytes.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_edge_cases() {
    let cluster = cluster(Backend::Sqlite, Shape::AllInOne).await;
    let owner = cluster.owner_token.clone();
    let owner = Some(owner.as_str());

    // Negotiation: a known revision is kept; an unknown one gets the newest handshake one.
    for (asked, answered) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let (status, _, answer, _) = rpc(&cluster, owner, &[], &body.to_string()).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["protocolVersion"], answered, "{asked}");
        assert_eq!(answer["result"]["serverInfo"]["name"], "noema");
        assert!(answer["result"]["capabilities"]["tools"].is_object());
    }
    // ping; a notification is accepted with no body.
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
    )
    .await;
    assert_eq!(
        (status, answer),
        (200, json!({"jsonrpc": "2.0", "id": "p", "result": {}}))
    );
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!((status, answer), (202, Value::Null));

    // Bad JSON-RPC: parse error, invalid request, unknown method, invalid params.
    let (status, _, answer, _) = rpc(&cluster, owner, &[], "{not json").await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["code"], -32700);
    assert_eq!(answer["id"], Value::Null);
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#,
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["code"], &answer["id"]),
        (400, &json!(-32600), &json!(4))
    );
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        r#"{"jsonrpc":"2.0","id":5,"method":"no/such"}"#,
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["code"], &answer["id"]),
        (200, &json!(-32601), &json!(5))
    );
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}"#,
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (400, &json!(-32602)),
        "{answer}"
    );

    // Batches: a 2025-03-26 client's is answered message by message (none for a
    // notification); later revisions may not batch; an empty batch is invalid.
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},
                    {"jsonrpc":"2.0","method":"notifications/initialized"},
                    {"jsonrpc":"2.0","id":2,"method":"no/such"}]"#;
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[("mcp-protocol-version", "2025-03-26")],
        batch,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let answers = answer.as_array().unwrap();
    assert_eq!(answers.len(), 2, "{answer}");
    assert_eq!(answers[0], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(
        (&answers[1]["id"], &answers[1]["error"]["code"]),
        (&json!(2), &json!(-32601))
    );
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[("mcp-protocol-version", "2025-11-25")],
        batch,
    )
    .await;
    assert_eq!((status, &answer["error"]["code"]), (400, &json!(-32600)));
    let (status, _, answer, _) = rpc(&cluster, owner, &[], "[]").await;
    assert_eq!((status, &answer["error"]["code"]), (400, &json!(-32600)));
    // A batch with nothing in it to process is not accepted: 400, each message's error.
    let (status, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        r#"[null, {"jsonrpc":"1.0","id":3,"method":"ping"}]"#,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["id"].clone(), a["error"]["code"].clone()))
            .collect::<Vec<_>>(),
        vec![(json!(null), json!(-32600)), (json!(3), json!(-32600))],
        "{answer}"
    );

    // No server-initiated stream and no sessions: GET and DELETE are 405, Allow: POST.
    let http = anonymous();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = http
            .request(method.clone(), format!("{}/v1/mcp", cluster.rest_url))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 405, "{method}");
        assert_eq!(response.headers()["allow"], "POST", "{method}");
    }
    // Without a token: 401 with a Bearer challenge.
    let (status, headers, _, _) = rpc(
        &cluster,
        None,
        &[],
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(headers["www-authenticate"], "Bearer");

    // tools/list for the owner: every tool, paged by nextCursor, under 48 KB in total.
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    let mut bytes = 0;
    loop {
        let params = cursor
            .as_ref()
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let body = json!({"jsonrpc": "2.0", "id": pages, "method": "tools/list", "params": params});
        let (status, _, answer, size) = rpc(&cluster, owner, &[], &body.to_string()).await;
        assert_eq!(status, 200, "{answer}");
        bytes += size;
        pages += 1;
        for tool in answer["result"]["tools"].as_array().unwrap() {
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
            names.push(tool["name"].as_str().unwrap().to_owned());
        }
        match answer["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let all: Vec<String> = tools::table()
        .tools
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(names, all);
    assert_eq!(pages, all.len().div_ceil(noema_gateway::mcp::PAGE_SIZE));
    assert!(
        pages > 1,
        "paging untested: {} tools fit one page",
        all.len()
    );
    assert!(
        bytes < 48 * 1024,
        "tools/list for the owner is {bytes} bytes"
    );
    eprintln!(
        "tools/list for the owner: {} tools, {pages} pages, {bytes} bytes",
        all.len()
    );
    for cursor in ["x", "0", "-1", "100000"] {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"cursor": cursor}});
        let (status, _, answer, _) = rpc(&cluster, owner, &[], &body.to_string()).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (200, &json!(-32602)),
            "{cursor}: {answer}"
        );
    }

    // tools/call: bad arguments and a failing route are results with isError.
    let call = |name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
        .to_string()
    };
    let (_, _, answer, _) = rpc(&cluster, owner, &[], &call("diaries_get", json!({}))).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let (_, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        &call("ledger_status", json!({"bogus": 1})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let (_, _, answer, _) = rpc(
        &cluster,
        owner,
        &[],
        &call("ledger_get_canonical", json!({"id": "sha256:00"})),
    )
    .await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"]["structuredContent"].is_object(),
        "{answer}"
    );
    let (_, _, answer, _) = rpc(&cluster, owner, &[], &call("ledger_status", json!({}))).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(answer["result"]["structuredContent"]["mode"], "RUNNING");
    assert_eq!(answer["result"]["content"][0]["type"], "text");

    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_surfaces_come_from_the_live_tables() {
    let cluster = cluster(Backend::Sqlite, Shape::AllInOne).await;
    let table = noema_gateway::route_table();

    // /v1/capabilities: the features of the routes served, byte-stable, without a token.
    let declared: BTreeSet<&str> = table
        .iter()
        .flat_map(|r| r.features.iter().map(|f| f.key))
        .collect();
    let fetch = || async {
        let response = anonymous()
            .get(format!("{}/v1/capabilities", cluster.rest_url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.bytes().await.unwrap()
    };
    let first = fetch().await;
    assert_eq!(fetch().await, first, "/v1/capabilities is not byte-stable");
    let second: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(second["version"], "1");
    let served: BTreeSet<&str> = second["features"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(served, declared);
    assert!(served.contains("discovery.tools"));
    // CogniRelay's keys first, in the original's order (§14), then Noema's by key.
    let text = std::str::from_utf8(&first).unwrap();
    assert!(
        text.starts_with(r#"{"version":"1","features":{"continuity.read.startup_view":"#),
        "{text}"
    );
    let positions: Vec<usize> = noema_gateway::features::COGNIRELAY_ORDER
        .iter()
        .map(|key| text.find(&format!("\"{key}\":")).unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    let first_own = text.find("\"noema.").unwrap();
    assert!(positions.iter().all(|p| *p < first_own), "{text}");
    for feature in table.iter().flat_map(|r| r.features.iter()) {
        assert_eq!(second["features"][feature.key]["summary"], feature.summary);
    }
    let (_, legacy) = get(&anonymous(), &cluster, "/capabilities").await;
    let legacy: BTreeSet<&str> = legacy["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(legacy, declared);

    // /.well-known/mcp.json: the endpoint, the versions negotiated and every tool.
    let (status, mcp) = get(&anonymous(), &cluster, "/.well-known/mcp.json").await;
    assert_eq!(status, 200);
    assert_eq!(mcp["endpoint"], noema_gateway::mcp::PATH);
    let names: Vec<&str> = mcp["tools"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let tool_routes: Vec<&str> = table
        .iter()
        .filter_map(|r| r.tool.map(|t| t.name))
        .collect();
    assert_eq!(names, tool_routes);
    assert_eq!(mcp["tools"]["count"], tool_routes.len());
    assert_eq!(
        mcp["supported_mcp_protocol_versions"],
        json!(noema_gateway::mcp::protocol_versions())
    );

    // The manifest names every route served, with its scope and tool.
    let (_, manifest) = get(&anonymous(), &cluster, "/v1/manifest").await;
    let endpoints = manifest["endpoints"].as_object().unwrap();
    assert_eq!(endpoints.len(), table.len());
    for route in &table {
        let entry = &endpoints[&format!("{} {}", route.verb.as_str(), route.path)];
        assert_eq!(
            entry["mcp_tool"].as_str(),
            route.tool.map(|t| t.name),
            "{}",
            route.path
        );
    }
    // The tool catalog: the same tools with their input schemas.
    let (_, catalog) = get(&anonymous(), &cluster, "/v1/discovery/tools").await;
    let catalog_names: Vec<&str> = catalog["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(catalog_names, tool_routes);
    // Token templates as identity applies them.
    let (_, policy) = get(&anonymous(), &cluster, "/v1/governance/policy").await;
    for template in noema_core::scopes::TOKEN_TEMPLATES {
        assert_eq!(
            policy["policy"]["scope_templates"][template.name]["scopes"],
            json!(template.scopes)
        );
    }
    // Help: its tool topics are the tool table, each tool's help names its route.
    let (_, help) = get(&anonymous(), &cluster, "/v1/help").await;
    let topics: Vec<&str> = help["tool_topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(topics, tool_routes);
    for route in table.iter().filter(|r| r.tool.is_some()) {
        let name = route.tool.unwrap().name;
        let (status, usage) = get(&anonymous(), &cluster, &format!("/v1/help/tools/{name}")).await;
        assert_eq!(status, 200, "{name}: {usage}");
        assert_eq!(
            usage["http"],
            format!("{} {}", route.verb.as_str(), route.path)
        );
    }
    let (status, unknown) = get(&anonymous(), &cluster, "/v1/help/tools/no_such_tool").await;
    assert_eq!(status, 400, "{unknown}");
    // Unknown ids are refused in the original's validation shape, naming the known ones.
    let hint = &unknown["error"]["validation_hints"][0];
    assert_eq!(unknown["error"]["code"], "validation", "{unknown}");
    assert_eq!(unknown["error"]["detail"], "Unsupported tool name.");
    assert_eq!(
        (
            hint["field"].as_str(),
            hint["area"].as_str(),
            hint["reason"].as_str()
        ),
        (
            Some("name"),
            Some("request.path"),
            Some("unsupported_value")
        )
    );
    assert_eq!(
        hint["allowed_values"].as_array().unwrap().len(),
        tool_routes.len()
    );
    for (path, field, detail) in [
        (
            "/v1/help/onboarding/sections/nope",
            "id",
            "Unsupported onboarding section id.",
        ),
        (
            "/v1/help/limits/no.such.path",
            "field_path",
            "Unsupported validation limit field path.",
        ),
    ] {
        let (status, unknown) = get(&anonymous(), &cluster, path).await;
        assert_eq!(status, 400, "{unknown}");
        assert_eq!(unknown["error"]["detail"], detail, "{unknown}");
        assert_eq!(unknown["error"]["validation_hints"][0]["field"], field);
    }
    let (_, limit) = get(
        &anonymous(),
        &cluster,
        "/v1/help/limits/mcp.tools_list.page_size",
    )
    .await;
    assert_eq!(limit["limit"]["maximum"], noema_gateway::mcp::PAGE_SIZE);
    // Health in CogniRelay's shape, and the other surfaces answer without a token.
    let (_, health) = get(&anonymous(), &cluster, "/health").await;
    assert_eq!(
        (&health["ok"], &health["service"]),
        (&json!(true), &json!("cognirelay"))
    );
    for path in [
        "/v1/discovery",
        "/.well-known/cognirelay.json",
        "/v1/contracts",
        "/v1/help",
    ] {
        let (status, body) = get(&anonymous(), &cluster, path).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.is_object(), "{path}");
    }
    cluster.shutdown().await.unwrap();
}

/// `"VERB /path"` and tool pairs, as the help guides list operations.
fn operation_pairs(ops: &Value) -> Vec<(String, String)> {
    ops.as_array()
        .unwrap()
        .chunks(2)
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_owned(),
                pair[1].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_and_help_guides_name_what_is_served() {
    let cluster = cluster(Backend::Sqlite, Shape::AllInOne).await;
    let table = noema_gateway::route_table();
    let tools: BTreeSet<&str> = table
        .iter()
        .filter_map(|r| r.tool.map(|t| t.name))
        .collect();
    let route_of = |tool: &str| {
        let route = table
            .iter()
            .find(|r| r.tool.map(|t| t.name) == Some(tool))
            .unwrap_or_else(|| panic!("no tool {tool}"));
        format!("{} {}", route.verb.as_str(), route.path)
    };

    // Workflows: every step a served tool, numbered from 1; listed and counted by discovery.
    let (status, workflows) = get(&anonymous(), &cluster, "/v1/discovery/workflows").await;
    assert_eq!(status, 200, "{workflows}");
    let list = workflows["workflows"].as_array().unwrap();
    assert_eq!(workflows["count"], list.len());
    assert!(!list.is_empty());
    for workflow in list {
        for (i, step) in workflow["steps"].as_array().unwrap().iter().enumerate() {
            assert_eq!(step["order"], i + 1, "{workflow}");
            assert!(tools.contains(step["tool"].as_str().unwrap()), "{step}");
        }
    }
    let (_, discovery) = get(&anonymous(), &cluster, "/v1/discovery").await;
    assert_eq!(
        discovery["entrypoints"]["workflows"],
        "/v1/discovery/workflows"
    );
    assert_eq!(discovery["counts"]["workflows"], list.len());

    // The help index lists the guides, and each id it lists answers.
    let (_, help) = get(&anonymous(), &cluster, "/v1/help").await;
    for endpoint in [
        "GET /v1/help/topics/{id}",
        "GET /v1/help/hooks",
        "GET /v1/help/errors/{code}",
    ] {
        assert!(
            help["http_endpoints"]
                .as_array()
                .unwrap()
                .contains(&json!(endpoint)),
            "{help}"
        );
    }
    let (_, hooks) = get(&anonymous(), &cluster, "/v1/help/hooks").await;
    let hook_ids: Vec<&Value> = hooks["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["id"])
        .collect();
    assert_eq!(
        help["hook_ids"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
        hook_ids
    );
    for topic in help["non_tool_topics"].as_array().unwrap() {
        let path = format!("/v1/help/topics/{}", topic.as_str().unwrap());
        let (status, guide) = get(&anonymous(), &cluster, &path).await;
        assert_eq!(
            (status, &guide["kind"], &guide["id"]),
            (200, &json!("topic"), topic)
        );
        for (route, tool) in operation_pairs(&guide["read_operations"])
            .into_iter()
            .chain(operation_pairs(&guide["write_operations"]))
        {
            assert_eq!(route, route_of(&tool), "{path}");
        }
    }
    for code in help["errors"].as_array().unwrap() {
        let path = format!("/v1/help/errors/{}", code.as_str().unwrap());
        let (status, guide) = get(&anonymous(), &cluster, &path).await;
        assert_eq!(
            (status, &guide["kind"], &guide["id"]),
            (200, &json!("error"), code)
        );
    }

    // Each hook's operations are served routes, and its example body is accepted there as
    // it is, in the loop's order (the post_prompt upsert makes the capsule the others use).
    let owner = client_as(&cluster.owner_token);
    let hook = |id: &str| {
        hooks["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["id"] == id)
            .unwrap()
            .clone()
    };
    for id in [
        "post_prompt",
        "startup",
        "pre_prompt",
        "pre_compaction_or_handoff",
    ] {
        let guide = hook(id);
        let mut pairs = operation_pairs(&guide["write_operations"]);
        pairs.extend(operation_pairs(&guide["read_operations"]));
        if let Some(handoff) = guide.get("additional_operations_for_real_handoff") {
            assert_eq!(
                operation_pairs(handoff),
                [(
                    "POST /v1/coordination/handoff/create".to_owned(),
                    "coordination.handoff_create".to_owned()
                )]
            );
        }
        for (route, tool) in &pairs {
            assert_eq!(*route, route_of(tool), "{id}");
        }
        let (route, _) = &pairs[0];
        let path = route.strip_prefix("POST ").unwrap();
        let response = owner
            .post(format!("{}{path}", cluster.rest_url))
            .json(&guide["minimal_payload"])
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 200, "{id}: {text}");
    }

    // An id the guides lack: the original's 400, byte for byte (its topic ids are Noema's).
    let response = anonymous()
        .get(format!("{}/v1/help/topics/nope", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(
        response.text().await.unwrap(),
        r#"{"error":{"code":"validation","detail":"Unsupported topic id.","validation_hints":[{"field":"id","area":"request.path","reason":"unsupported_value","limit":null,"allowed_values":["continuity.read.startup_view","continuity.read.trust_signals","continuity.upsert.session_end_snapshot","last-mile-adapter"],"correction_hint":"Use one of: continuity.read.startup_view, continuity.read.trust_signals, continuity.upsert.session_end_snapshot, last-mile-adapter."}]}}"#
    );
    let (status, unknown) = get(&anonymous(), &cluster, "/v1/help/errors/nope").await;
    assert_eq!(status, 400);
    assert_eq!(unknown["error"]["validation_hints"][0]["field"], "code");
    assert_eq!(
        unknown["error"]["validation_hints"][0]["allowed_values"],
        help["errors"]
    );

    // The original's MCP names for the hook and error guides are tools (the topic guide and
    // the workflows are not: every token's tools/list must stay under its 48 KB budget).
    let owner_token = cluster.owner_token.clone();
    let call = |name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
        .to_string()
    };
    for (name, arguments, key) in [
        ("system.hook_guide", json!({}), "hooks"),
        ("system.error_guide", json!({"code": "not_found"}), "kind"),
    ] {
        let (_, _, answer, _) =
            rpc(&cluster, Some(&owner_token), &[], &call(name, arguments)).await;
        assert_eq!(answer["result"]["isError"], false, "{name}: {answer}");
        assert!(
            !answer["result"]["structuredContent"][key].is_null(),
            "{name}: {answer}"
        );
    }
    cluster.shutdown().await.unwrap();
}

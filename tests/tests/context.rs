//! Context retrieval and snapshots over REST on CogniRelay's paths (issue 16), in every shape
//! and on both backends: the bundle's shape and continuity state, the graph and schedule
//! sections, the startup view's graph, refusals (422, 400, 404), snapshots read back byte for
//! byte under their content id, and another tenant seeing none of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_core::content_id::ContentId;
use noema_e2e::{TestCluster, client_as, cluster_cases};
use noema_proto::identity::v1::IssueTokenRequest;
use serde_json::{Value, json};

cluster_cases!(
    retrieves_bundles_and_keeps_snapshots_per_tenant,
    answers_as_cognirelay_does,
    the_bundle_reads_memory_files_tasks_and_the_schedule,
);

const FACTS: &str = include_str!("../facts/cognirelay_context_rest.json");

/// Each masked field's value (a string, a number or null) → `"<masked>"`: times and ages
/// differ by nature between two runs.
fn masked(body: &str, fields: &[String]) -> String {
    let mut body = body.to_owned();
    for field in fields {
        let key = format!("\"{field}\":");
        let mut out = String::new();
        let mut rest = body.as_str();
        while let Some(at) = rest.find(&key) {
            let value = &rest[at + key.len()..];
            let end = if let Some(text) = value.strip_prefix('"') {
                text.find('"').map(|e| e + 2).unwrap()
            } else {
                value.find([',', '}', ']']).unwrap()
            };
            out.push_str(&rest[..at]);
            out.push_str(&key);
            out.push_str("\"<masked>\"");
            rest = &value[end..];
        }
        out.push_str(rest);
        body = out;
    }
    body
}

/// Every case of tests/facts/cognirelay_context_rest.json (recorded from CogniRelay 1.4.15 by
/// scripts/record-context-facts) in order: setup cases must succeed, the others must get the
/// original's status and body bytes (after masking times and ages).
async fn answers_as_cognirelay_does(cluster: &TestCluster) {
    let facts: Value = serde_json::from_str(FACTS).unwrap();
    let client = client_as(&cluster.owner_token);
    let mut compared = 0;
    for case in facts["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let response = client
            .post(format!(
                "{}{}",
                cluster.rest_url,
                case["path"].as_str().unwrap()
            ))
            .header("content-type", "application/json")
            .body(case["body"].as_str().unwrap().to_owned())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let expected = u16::try_from(case["status"].as_u64().unwrap()).unwrap();
        if case["compare"] != true {
            assert_eq!(status, expected, "setup {name}: {text}");
            continue;
        }
        let mask: Vec<String> = case["mask"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            (status, masked(&text, &mask).as_str()),
            (expected, case["response"].as_str().unwrap()),
            "case {name}"
        );
        compared += 1;
    }
    assert!(compared >= 15, "only {compared} cases");
}

fn capsule(kind: &str, id: &str, extra: Value) -> Value {
    let mut continuity = json!({
        "top_priorities": ["ship release 2"], "active_concerns": ["flaky test"],
        "active_constraints": ["no schema change"], "open_loops": ["pick a date"],
        "stance_summary": "Release 2 is close; the last blocker is the flaky test.",
        "drift_signals": []
    });
    if let (Some(c), Some(e)) = (continuity.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    json!({
        "subject_kind": kind, "subject_id": id,
        "updated_at": "2026-01-01T00:00:00Z", "verified_at": "2026-01-01T00:00:00Z",
        "source": {"producer": "e2e", "update_reason": "manual"},
        "continuity": continuity,
        "confidence": {"continuity": 0.8, "relationship_model": 0.5},
        "freshness": {"freshness_class": "persistent"}
    })
}

async fn post(
    client: &reqwest::Client,
    cluster: &TestCluster,
    path: &str,
    body: Value,
) -> (u16, Value, String) {
    let response = client
        .post(format!("{}{path}", cluster.rest_url))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, value, text)
}

async fn get(client: &reqwest::Client, cluster: &TestCluster, path: &str) -> (u16, String) {
    let response = client
        .get(format!("{}{path}", cluster.rest_url))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// `keys` appear in `text` in this order (the answer keeps the original's key order, which
/// serde_json's `Value` would sort).
fn in_order(text: &str, keys: &[&str]) {
    let mut from = 0;
    for key in keys {
        let at = text[from..]
            .find(&format!("\"{key}\":"))
            .unwrap_or_else(|| panic!("{key} missing or out of order in {text}"));
        from += at + key.len();
    }
}

async fn retrieves_bundles_and_keeps_snapshots_per_tenant(cluster: &TestCluster) {
    let owner = client_as(&cluster.owner_token);
    let related =
        json!({"related_documents": [{"path": "memory/plan.md", "kind": "doc", "label": "Plan"}]});
    for (kind, id, extra) in [
        ("thread", "release-2", related),
        ("user", "alice", json!({})),
    ] {
        let (status, body, _) = post(
            &owner,
            cluster,
            "/v1/continuity/upsert",
            json!({"subject_kind": kind, "subject_id": id, "capsule": capsule(kind, id, extra)}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }

    // Task-text inference: the thread's capsule, in full; no graph anchor (only explicit
    // subjects anchor it) and no schedule section (no subject was named).
    let (status, body, text) = post(
        &owner,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "thread:release-2"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    in_order(
        &text,
        &[
            "ok",
            "bundle",
            "task",
            "generated_at",
            "core_memory",
            "recent_relevant",
            "open_questions",
            "token_budget_hint",
            "time_window_days",
            "notes",
            "continuity_state",
            "present",
            "requested_selectors",
            "omitted_selectors",
            "capsules",
            "selection_order",
            "budget",
            "warnings",
            "fallback_used",
            "recovery_warnings",
            "trust_signals",
            "salience_metadata",
            "graph_context",
        ],
    );
    let bundle = &body["bundle"];
    assert!(bundle.get("schedule_context").is_none());
    assert_eq!(bundle["token_budget_hint"], 12000);
    assert_eq!(bundle["notes"].as_array().unwrap().len(), 3);
    let state = &bundle["continuity_state"];
    assert_eq!(state["present"], true);
    assert_eq!(
        state["selection_order"],
        json!(["inferred:thread:release-2"])
    );
    let returned = &state["capsules"][0];
    assert_eq!(returned["subject_id"], "release-2");
    assert_eq!(returned["source_state"], "active");
    assert_eq!(returned["trust_signals"]["completeness"]["trimmed"], false);
    assert_eq!(returned["salience"]["rank"], 1);
    assert!(state["budget"]["continuity_tokens_used"].as_u64().unwrap() > 0);
    assert_eq!(
        bundle["graph_context"]["warnings"][0]["code"],
        "graph_anchor_not_provided"
    );

    // An explicit thread anchors the graph (its related document) and brings the schedule
    // section; a missing selector in multi mode names itself in every warning.
    let (status, body, text) = post(
        &owner,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "what next?", "subject_kind": "thread", "subject_id": "release-2",
               "continuity_selectors": [{"subject_kind": "user", "subject_id": "alice"},
                                        {"subject_kind": "thread", "subject_id": "nowhere"}],
               "continuity_max_capsules": 3, "max_tokens_estimate": 4000}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let bundle = &body["bundle"];
    let state = &bundle["continuity_state"];
    assert_eq!(
        state["requested_selectors"],
        json!(["thread:release-2", "user:alice", "thread:nowhere"])
    );
    assert_eq!(
        state["recovery_warnings"],
        json!([
            "continuity_active_missing:thread:nowhere",
            "continuity_fallback_missing:thread:nowhere"
        ])
    );
    assert_eq!(state["omitted_selectors"], json!(["thread:nowhere"]));
    assert_eq!(state["capsules"].as_array().unwrap().len(), 2);
    assert_eq!(
        state["trust_signals"]["scope_match"]["selectors_requested"],
        3
    );
    assert_eq!(state["trust_signals"]["scope_match"]["all_returned"], false);
    let graph = &bundle["graph_context"];
    assert_eq!(graph["anchor"]["id"], "thread:release-2");
    assert_eq!(
        graph["nodes"],
        json!([{"id": "document:memory/plan.md", "kind": "document", "subject_id": "memory/plan.md"}])
    );
    assert_eq!(graph["related_documents"][0]["path"], "memory/plan.md");
    assert_eq!(graph["truncation"]["nodes"]["limit"], 24);
    assert_eq!(bundle["schedule_context"]["upcoming"]["window_hours"], 72);

    // Continuity off: an empty state and a suppressed graph.
    let (_, body, _) = post(
        &owner,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "x", "continuity_mode": "off"}),
    )
    .await;
    assert_eq!(body["bundle"]["continuity_state"]["present"], false);
    assert_eq!(
        body["bundle"]["graph_context"]["warnings"][0]["code"],
        "graph_suppressed_by_continuity_mode"
    );

    // Refusals as the original words them.
    let (status, _, text) = post(
        &owner,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "nothing", "continuity_mode": "required"}),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (404, r#"{"detail":"Continuity capsule not found"}"#)
    );
    let (status, _, text) = post(
        &owner,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "x", "subject_kind": "thread"}),
    )
    .await;
    assert_eq!(
        (status, text.as_str()),
        (
            400,
            r#"{"detail":"subject_kind and subject_id must be provided together"}"#
        )
    );
    let (status, body, _) = post(
        &owner,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "x", "max_tokens_estimate": 10}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "max_tokens_estimate"])
    );
    assert_eq!(body["detail"][0]["type"], "greater_than_equal");

    // The startup view's graph comes from the same derivation (startup caps).
    let (status, body, text) = post(
        &owner,
        cluster,
        "/v1/continuity/read",
        json!({"subject_kind": "thread", "subject_id": "release-2", "view": "startup"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(body["graph_summary"]["anchor"]["id"], "thread:release-2");
    assert_eq!(body["graph_summary"]["truncation"]["nodes"]["limit"], 12);
    assert_eq!(
        body["graph_summary"]["nodes"][0]["id"],
        "document:memory/plan.md"
    );
    assert_eq!(body["schedule_context"]["due"]["count"], 0);

    // A snapshot: stored under its content id, read back exactly.
    let (status, created, text) = post(
        &owner,
        cluster,
        "/v1/context/snapshot",
        json!({"task": "why?"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let id = created["snapshot_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("snap_"), "{id}");
    assert_eq!(created["path"], format!("snapshots/context/{id}.json"));
    let (status, read) = get(&owner, cluster, &format!("/v1/context/snapshot/{id}")).await;
    assert_eq!(status, 200, "{read}");
    let stored = read
        .strip_prefix(r#"{"ok":true,"snapshot":"#)
        .and_then(|r| r.strip_suffix('}'))
        .unwrap();
    // In the original's key order; addressed by its canonical (RFC 8785) bytes.
    assert!(
        stored.starts_with(&format!(
            r#"{{"schema_version":"1.0","snapshot_id":"{id}","task":"why?","created_at":"#
        )),
        "{stored}"
    );
    let snapshot: Value = serde_json::from_str(stored).unwrap();
    assert_eq!(
        ContentId::of_bytes(&noema_core::jcs::canonicalize(&snapshot).unwrap()).as_str(),
        created["content_id"].as_str().unwrap()
    );
    assert_eq!(snapshot["snapshot_id"], id.as_str());
    assert_eq!(snapshot["task"], "why?");
    let (status, again) = get(&owner, cluster, &format!("/v1/context/snapshot/{id}")).await;
    assert_eq!((status, again.as_str()), (200, read.as_str()));

    // Another tenant: none of the capsules, the graph or the snapshot.
    let mut identity = cluster.identity().await.unwrap();
    let other = identity
        .issue_token(IssueTokenRequest {
            peer_id: "agent:other".into(),
            scopes: vec![
                "search".into(),
                "read:files".into(),
                "write:projects".into(),
            ],
            ..IssueTokenRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    let other = client_as(&other);
    let (status, body, text) = post(
        &other,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "x", "subject_kind": "thread", "subject_id": "release-2"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let state = &body["bundle"]["continuity_state"];
    assert_eq!(state["present"], false);
    assert_eq!(
        state["recovery_warnings"],
        json!(["continuity_active_missing", "continuity_fallback_missing"])
    );
    assert_eq!(
        body["bundle"]["graph_context"]["warnings"][0]["code"],
        "graph_anchor_not_found"
    );
    assert!(!text.contains("memory/plan.md"), "{text}");
    let (status, text) = get(&other, cluster, &format!("/v1/context/snapshot/{id}")).await;
    assert_eq!(
        (status, text),
        (404, format!(r#"{{"detail":"Snapshot not found: {id}"}}"#))
    );
    // A token without `search` may not retrieve.
    let reader = identity
        .issue_token(IssueTokenRequest {
            peer_id: "agent:reader".into(),
            scopes: vec!["read:files".into()],
            ..IssueTokenRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    let (status, _, text) = post(
        &client_as(&reader),
        cluster,
        "/v1/context/retrieve",
        json!({"task": "x"}),
    )
    .await;
    assert_eq!(status, 403, "{text}");
}

/// The bundle's evidence comes from the tenant's memory files, search index, tasks and
/// schedule as the memory routes wrote them: core memory, search hits for the task text, the
/// questions among them, a thread's tasks and blockers in the graph and its reminders in the
/// schedule section. Another tenant's bundle shows none of it.
async fn the_bundle_reads_memory_files_tasks_and_the_schedule(cluster: &TestCluster) {
    let owner = client_as(&cluster.owner_token);
    for (path, content) in [
        (
            "memory/core/identity.md",
            "# Identity\nI am agent alpha, keeper of whales.",
        ),
        (
            "memory/summaries/whales.md",
            "Humpback whales migrate north in spring. When do the whales return south?",
        ),
        ("memory/summaries/ships.md", "Ships dock at noon."),
    ] {
        let (status, body, _) = post(
            &owner,
            cluster,
            "/v1/write",
            json!({"path": path, "content": content}),
        )
        .await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, body, _) = post(
        &owner,
        cluster,
        "/v1/tasks",
        json!({"task_id": "t-9", "title": "Count whales", "owner_peer": "agent:alpha",
               "thread_id": "release-2", "blocked_by": ["t-8"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let due = (time::OffsetDateTime::now_utc() + time::Duration::hours(2))
        .replace_nanosecond(0)
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let (status, body, _) = post(
        &owner,
        cluster,
        "/v1/schedule/items",
        json!({"kind": "reminder", "title": "Recount", "due_at": due,
               "subject_kind": "thread", "subject_id": "release-2"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body, _) = post(
        &owner,
        cluster,
        "/v1/continuity/upsert",
        json!({"subject_kind": "thread", "subject_id": "release-2",
               "capsule": capsule("thread", "release-2", json!({}))}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The task text finds the evidence: core memory, search hits and their questions.
    let by_text = json!({"task": "when do whales migrate"});
    let (status, body, text) = post(&owner, cluster, "/v1/context/retrieve", by_text.clone()).await;
    assert_eq!(status, 200, "{text}");
    let bundle = &body["bundle"];
    assert_eq!(
        bundle["core_memory"],
        json!([{"path": "memory/core/identity.md",
                "snippet": "# Identity\nI am agent alpha, keeper of whales."}])
    );
    let relevant: Vec<&str> = bundle["recent_relevant"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["path"].as_str().unwrap())
        .collect();
    assert!(relevant.contains(&"memory/summaries/whales.md"), "{text}");
    assert!(!relevant.contains(&"memory/summaries/ships.md"), "{text}");
    let questions = bundle["open_questions"].as_array().unwrap();
    assert!(
        !questions.is_empty() && questions.iter().all(|q| q.as_str().unwrap().contains('?')),
        "{text}"
    );

    // A thread anchors the graph on its tasks and scopes the schedule to its reminders.
    let by_thread = json!({"task": "status", "subject_kind": "thread", "subject_id": "release-2"});
    let (status, body, text) =
        post(&owner, cluster, "/v1/context/retrieve", by_thread.clone()).await;
    assert_eq!(status, 200, "{text}");
    let bundle = &body["bundle"];
    assert_eq!(
        bundle["graph_context"]["nodes"],
        json!([{"id": "task:t-9", "kind": "task", "subject_id": "t-9"}]),
        "{text}"
    );
    let upcoming = &bundle["schedule_context"]["upcoming"];
    assert_eq!(upcoming["count"], 1, "{text}");
    assert_eq!(upcoming["items"][0]["title"], "Recount", "{text}");

    // A task anchors it on its thread and what blocks it.
    let (status, body, text) = post(
        &owner,
        cluster,
        "/v1/context/retrieve",
        json!({"task": "status", "subject_kind": "task", "subject_id": "t-9"}),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let graph = &body["bundle"]["graph_context"];
    let nodes: Vec<&str> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["task:t-8", "thread:release-2"], "{text}");
    assert_eq!(graph["blockers"][0]["task_id"], "t-9", "{text}");
    assert_eq!(graph["blockers"][0]["blocked_by_task_id"], "t-8", "{text}");

    // Another tenant asking the same finds none of it.
    let stranger = client_as(
        &cluster
            .issue_token(
                "agent:stranger",
                &["search", "read:files", "write:projects"],
            )
            .await
            .unwrap(),
    );
    for request in [by_text, by_thread] {
        let (status, body, text) = post(&stranger, cluster, "/v1/context/retrieve", request).await;
        assert_eq!(status, 200, "{text}");
        let bundle = &body["bundle"];
        assert_eq!(bundle["core_memory"], json!([]), "{text}");
        assert_eq!(bundle["recent_relevant"], json!([]), "{text}");
        assert_eq!(bundle["open_questions"], json!([]), "{text}");
        assert!(!text.contains("t-9") && !text.contains("Recount"), "{text}");
    }
}

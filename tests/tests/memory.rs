//! CogniRelay's memory files, search, recency and index routes over REST on every shape and
//! both backends: the original's bodies, statuses and messages (recorded from CogniRelay
//! 1.4.15 where the answer is the original's), search that sees a write at once, recovery of
//! the index, and isolation between tenants and namespaces.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_e2e::{TestCluster, client_as, cluster_cases};
use noema_proto::identity::v1::IssueTokenRequest;
use serde_json::{Value, json};

cluster_cases!(memory_files_search_and_isolation);

struct Rest {
    client: reqwest::Client,
    base: String,
}

impl Rest {
    fn new(cluster: &TestCluster, token: &str) -> Rest {
        Rest {
            client: client_as(token),
            base: cluster.rest_url.clone(),
        }
    }

    async fn post(&self, path: &str, body: &str) -> (u16, String) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn get(&self, path_and_query: &str) -> (u16, String) {
        let response = self
            .client
            .get(format!("{}{path_and_query}", self.base))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn json(&self, path: &str, body: Value) -> Value {
        let (status, text) = self.post(path, &body.to_string()).await;
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }
}

fn paths(answer: &Value) -> Vec<&str> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect()
}

/// `"latest_commit":"sha256:<hex>"` → `"latest_commit":"<masked>"`.
fn masked(body: &str) -> String {
    match body.find("\"latest_commit\":\"sha256:") {
        Some(at) => {
            let start = at + "\"latest_commit\":\"".len();
            let end = start + body[start..].find('"').unwrap();
            format!("{}<masked>{}", &body[..start], &body[end..])
        }
        None => body.to_owned(),
    }
}

/// `GET /v1/read`'s answer, in the original's key order.
fn read_answer(path: &str, content: &str) -> String {
    format!(
        r#"{{"ok":true,"path":{},"content":{}}}"#,
        serde_json::to_string(path).unwrap(),
        serde_json::to_string(content).unwrap()
    )
}

async fn memory_files_search_and_isolation(cluster: &TestCluster) {
    let writer_token = cluster
        .issue_token("agent:writer", &["continuity:write"])
        .await
        .unwrap();
    let writer = Rest::new(cluster, &writer_token);

    // Write, unchanged rewrite, read: the original's shapes, `latest_commit` our revision.
    let (status, body) = writer
        .post(
            "/v1/write",
            r##"{"path":"memory/core/identity.md","content":"# Identity\nI am agent #alpha. Blue whales."}"##,
        )
        .await;
    assert_eq!(
        (status, masked(&body).as_str()),
        (
            200,
            r#"{"ok":true,"path":"memory/core/identity.md","committed":true,"latest_commit":"<masked>","durable":true}"#
        )
    );
    let (_, again) = writer
        .post(
            "/v1/write",
            r##"{"path":"memory/core/identity.md","content":"# Identity\nI am agent #alpha. Blue whales."}"##,
        )
        .await;
    assert!(again.contains(r#""committed":false"#), "{again}");
    let revision = |b: &str| serde_json::from_str::<Value>(b).unwrap()["latest_commit"].clone();
    assert_eq!(revision(&body), revision(&again));
    assert_eq!(
        writer.get("/v1/read?path=memory/core/identity.md").await,
        (
            200,
            r##"{"ok":true,"path":"memory/core/identity.md","content":"# Identity\nI am agent #alpha. Blue whales."}"##.to_owned()
        )
    );

    // Appends: one line per record in Python's json.dumps form.
    for record in [r#"{"b":1,"a":"héllo","c":[1,2.5]}"#, r#"{"b":2}"#] {
        let (status, body) = writer
            .post(
                "/v1/append",
                &format!(r#"{{"path":"memory/episodic/2026.jsonl","record":{record}}}"#),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        writer.get("/v1/read?path=memory/episodic/2026.jsonl").await,
        (
            200,
            r#"{"ok":true,"path":"memory/episodic/2026.jsonl","content":"{\"b\": 1, \"a\": \"héllo\", \"c\": [1, 2.5]}\n{\"b\": 2}\n"}"#.to_owned()
        )
    );

    // Path rules and request models, with the original's statuses and messages.
    let refusals: &[(&str, &str, &str, u16, &str)] = &[
        (
            "GET",
            "/v1/read?path=memory/core/nope.md",
            "",
            404,
            r#"{"detail":"File not found"}"#,
        ),
        // A directory is no file (the original checks `is_file()`).
        (
            "GET",
            "/v1/read?path=memory",
            "",
            404,
            r#"{"detail":"File not found"}"#,
        ),
        (
            "GET",
            "/v1/read?path=../etc/passwd",
            "",
            403,
            r#"{"detail":"Invalid path for namespace check: ../etc/passwd"}"#,
        ),
        (
            "GET",
            "/v1/read?path=/etc/passwd",
            "",
            403,
            r#"{"detail":"Invalid path for namespace check: /etc/passwd"}"#,
        ),
        (
            "GET",
            "/v1/read?path=foo/bar.md",
            "",
            400,
            r#"{"detail":"Top-level path not allowed: foo"}"#,
        ),
        (
            "GET",
            "/v1/read",
            "",
            422,
            r#"{"detail":[{"type":"missing","loc":["query","path"],"msg":"Field required","input":null}]}"#,
        ),
        (
            "POST",
            "/v1/write",
            r#"{"path":"foo/x.md","content":"a"}"#,
            400,
            r#"{"detail":"Top-level path not allowed: foo"}"#,
        ),
        (
            "POST",
            "/v1/write",
            r#"{"path":"memory/../../x.md","content":"a"}"#,
            403,
            r#"{"detail":"Invalid path for namespace check: memory/../../x.md"}"#,
        ),
        (
            "POST",
            "/v1/write",
            r#"{"path":"","content":"a"}"#,
            403,
            r#"{"detail":"Invalid path for namespace check: "}"#,
        ),
        (
            "POST",
            "/v1/write",
            r#"{"path":"memory/a.md"}"#,
            422,
            r#"{"detail":[{"type":"missing","loc":["body","content"],"msg":"Field required","input":{"path":"memory/a.md"}}]}"#,
        ),
        (
            "POST",
            "/v1/write",
            r#"{"path":"memory/core/x.md","content":5}"#,
            422,
            r#"{"detail":[{"type":"string_type","loc":["body","content"],"msg":"Input should be a valid string","input":5}]}"#,
        ),
        (
            "POST",
            "/v1/append",
            r#"{"path":"memory/episodic/2026.jsonl","record":[1]}"#,
            422,
            r#"{"detail":[{"type":"dict_type","loc":["body","record"],"msg":"Input should be a valid dictionary","input":[1]}]}"#,
        ),
        (
            "POST",
            "/v1/search",
            r#"{"query":"","limit":0}"#,
            422,
            r#"{"detail":[{"type":"greater_than_equal","loc":["body","limit"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}]}"#,
        ),
        // Noema keeps capsules in their own store: no file write reaches them.
        (
            "POST",
            "/v1/write",
            r#"{"path":"memory/continuity/user-a.json","content":"{}"}"#,
            400,
            r#"{"detail":"Path is managed by its own API: memory/continuity"}"#,
        ),
    ];
    for (method, path, body, status, expected) in refusals {
        let answer = match *method {
            "GET" => writer.get(path).await,
            _ => writer.post(path, body).await,
        };
        assert_eq!(
            answer,
            (*status, (*expected).to_owned()),
            "{method} {path} {body}"
        );
    }
    let (status, body) = writer
        .post(
            "/v1/append",
            r#"{"path":"journal/2020-01-01.md","record":{"x":1}}"#,
        )
        .await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.starts_with(r#"{"detail":"Append failed: Journal append rejected: file day 2020-01-01 != current UTC day "#),
        "{body}"
    );

    // Search sees every write at once: term-based, best match first.
    writer
        .json(
            "/v1/write",
            json!({"path": "journal/2026/notes.md", "content": "Whale migration notes. The blue whale sings."}),
        )
        .await;
    writer
        .json(
            "/v1/write",
            json!({"path": "memory/summaries/week1.md",
                   "content": "---\ntype: summary\nimportance: 0.5\n---\nSummary of whales and dolphins #ocean"}),
        )
        .await;
    writer
        .json(
            "/v1/write",
            json!({"path": "memory/coordination/shared.md", "content": "Shared plan: tag the whales."}),
        )
        .await;
    let found = writer
        .json("/v1/search", json!({"query": "blue whales"}))
        .await;
    assert_eq!(found["query"], "blue whales");
    assert_eq!(found["sort_by"], "relevance");
    assert_eq!(found["count"], 4, "{found}");
    // Ranked by the engine's relevance plus importance: the file with both terms above the
    // one with a single term (the summary's importance 0.5 counts as the original adds it).
    let ranked = paths(&found);
    let at = |p: &str| ranked.iter().position(|x| *x == p).unwrap();
    assert!(
        at("memory/core/identity.md") < at("journal/2026/notes.md"),
        "{found}"
    );
    let scores: Vec<f64> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{found}");
    let summary = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "memory/summaries/week1.md")
        .unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["importance"], 0.5);
    assert_eq!(summary["tags"], json!(["ocean"]));
    assert_eq!(
        summary["snippet"],
        "--- type: summary importance: 0.5 --- Summary of whales and dolphins #ocean"
    );
    assert_eq!(summary["size"], 75);
    let recent = writer.json("/v1/recent", json!({"limit": 2})).await;
    assert_eq!(
        paths(&recent),
        ["memory/coordination/shared.md", "memory/summaries/week1.md"]
    );

    // Index status and recovery (nothing to repair: the index is written with the files).
    let (status, text) = writer.get("/v1/index/status").await;
    assert_eq!(status, 200, "{text}");
    let index: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(index["file_count"], 5);
    assert_eq!(
        (index["sqlite_fts"].clone(), index["state_file"].clone()),
        (json!(true), json!(true))
    );
    let rebuilt = writer
        .json("/v1/index/rebuild-incremental", json!({}))
        .await;
    assert_eq!(
        rebuilt["incremental"],
        json!({"changed_count": 0, "removed_count": 0, "unchanged_count": 5})
    );
    // The full rebuild answers the original's keys, without the incremental counts.
    let rebuilt = writer.json("/v1/index/rebuild", json!({})).await;
    let keys: Vec<&str> = rebuilt
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["committed_files", "file_count", "latest_commit", "ok"]
    );
    assert_eq!(rebuilt["file_count"], 5);

    // Another tenant sees none of it.
    let stranger_token = cluster
        .issue_token("agent:stranger", &["continuity:write"])
        .await
        .unwrap();
    let stranger = Rest::new(cluster, &stranger_token);
    assert_eq!(
        stranger
            .get("/v1/read?path=memory/core/identity.md")
            .await
            .0,
        404
    );
    assert_eq!(
        stranger
            .json("/v1/search", json!({"query": "whales"}))
            .await["count"],
        0
    );
    assert_eq!(stranger.json("/v1/recent", json!({})).await["count"], 0);

    // The writer's collaboration_peer token: only its namespaces' hits, reads elsewhere
    // refused as the original refuses.
    let mut identity = cluster.identity().await.unwrap();
    let collaborator_token = identity
        .issue_token(IssueTokenRequest {
            peer_id: "agent:writer".into(),
            template: "collaboration_peer".into(),
            ..IssueTokenRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    let collaborator = Rest::new(cluster, &collaborator_token);

    // A capsule's files read as the original keeps them (byte for byte from CogniRelay
    // 1.4.15 for this capsule): the active file is the canonical JSON capsule_sha256 hashes,
    // the fallback its snapshot envelope; only by the tenant, only within its namespaces.
    let capsule = r#"{"subject_kind":"thread","subject_id":"pm","capsule":{"schema_version":"1.1","subject_kind":"thread","subject_id":"pm","updated_at":"2026-11-27T10:00:00Z","verified_at":"2026-11-27T10:00:00Z","verification_kind":"self_review","source":{"producer":"agent","update_reason":"manual","inputs":[]},"continuity":{"top_priorities":["a"],"active_concerns":[],"active_constraints":[],"open_loops":[],"stance_summary":"Working on it carefully.","drift_signals":[]},"confidence":{"continuity":0.8,"relationship_model":0.5},"attention_policy":{"early_load":[],"presence_bias_overrides":[]}}}"#;
    let (status, upserted) = writer.post("/v1/continuity/upsert", capsule).await;
    assert_eq!(status, 200, "{upserted}");
    let upserted: Value = serde_json::from_str(&upserted).unwrap();
    let active = r#"{"attention_policy":{"early_load":[],"presence_bias_overrides":[]},"canonical_sources":[],"confidence":{"continuity":0.8,"relationship_model":0.5},"continuity":{"active_concerns":[],"active_constraints":[],"curiosity_queue":[],"drift_signals":[],"long_horizon_commitments":[],"negative_decisions":[],"open_loops":[],"rationale_entries":[],"session_trajectory":[],"stance_summary":"Working on it carefully.","top_priorities":["a"],"trailing_notes":[],"working_hypotheses":[]},"metadata":{},"schema_version":"1.1","source":{"inputs":[],"producer":"agent","update_reason":"manual"},"stable_preferences":[],"subject_id":"pm","subject_kind":"thread","updated_at":"2026-11-27T10:00:00Z","verification_kind":"self_review","verified_at":"2026-11-27T10:00:00Z"}"#;
    assert_eq!(
        upserted["capsule_sha256"],
        noema_core::content_id::sha256_hex(active.as_bytes())
    );
    assert_eq!(
        writer
            .get("/v1/read?path=memory/continuity/thread-pm.json")
            .await,
        (200, read_answer("memory/continuity/thread-pm.json", active))
    );
    let fallback = format!(
        r#"{{"capsule":{active},"captured_at":"2026-11-27T10:00:00Z","health_status":"healthy","schema_type":"continuity_fallback_snapshot","schema_version":"1.1","source_path":"memory/continuity/thread-pm.json","verification_status":"unverified"}}"#
    );
    assert_eq!(
        writer
            .get("/v1/read?path=memory/continuity/fallback/thread-pm.json")
            .await,
        (
            200,
            read_answer("memory/continuity/fallback/thread-pm.json", &fallback)
        )
    );
    for path in [
        "memory/continuity/thread-nope.json",
        "memory/continuity/THREAD-pm.json",
    ] {
        assert_eq!(
            writer.get(&format!("/v1/read?path={path}")).await,
            (404, r#"{"detail":"File not found"}"#.to_owned()),
            "{path}"
        );
    }
    assert_eq!(
        stranger
            .get("/v1/read?path=memory/continuity/thread-pm.json")
            .await
            .0,
        404
    );
    assert_eq!(
        collaborator
            .get("/v1/read?path=memory/continuity/thread-pm.json")
            .await,
        (
            403,
            r#"{"detail":"Read path namespace not allowed: memory/continuity/thread-pm.json"}"#
                .to_owned()
        )
    );
    assert_eq!(
        paths(
            &collaborator
                .json("/v1/search", json!({"query": "whales"}))
                .await
        ),
        ["memory/coordination/shared.md"]
    );
    assert_eq!(
        collaborator
            .get("/v1/read?path=memory/core/identity.md")
            .await,
        (
            403,
            r#"{"detail":"Read path namespace not allowed: memory/core/identity.md"}"#.to_owned()
        )
    );
    let (status, _) = collaborator.get("/v1/index/status").await;
    assert_eq!(status, 403);

    // Tasks: shared planning state the collaborator may write (its namespaces include tasks).
    let (status, body) = collaborator
        .post(
            "/v1/tasks",
            r#"{"task_id":"t-1","title":"Tag whales","owner_peer":"agent:writer","blocked_by":["t-0"],"metadata":{"b":1,"a":2}}"#,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""task":{"task_id":"t-1","title":"Tag whales","description":"","status":"open","owner_peer":"agent:writer","collaborators":[],"thread_id":null,"blocked_by":["t-0"],"due_at":null,"metadata":{"b":1,"a":2},"created_at":""#),
        "{body}"
    );
    let response = writer
        .client
        .patch(format!("{}/v1/tasks/t-1", writer.base))
        .header("content-type", "application/json")
        .body(r#"{"status":"done"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (status, body) = writer.get("/v1/tasks/query?status=done&limit=5").await;
    assert_eq!(status, 200, "{body}");
    let found: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(found["count"], 1);
    assert_eq!(found["tasks"][0]["task_id"], "t-1");
    // Stamped in whole seconds, as the original's `iso_now`; an update that changes no byte
    // (nothing set, within the second) commits nothing and answers the head as it was.
    let created: Value = serde_json::from_str(&body).unwrap();
    let stamp = created["tasks"][0]["updated_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(stamp.len() == 20 && stamp.ends_with('Z'), "{stamp}");
    let empty_update = || async {
        let response = writer
            .client
            .patch(format!("{}/v1/tasks/t-1", writer.base))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response.json::<Value>().await.unwrap()
    };
    let mut same_second = false;
    for _ in 0..5 {
        let first = empty_update().await;
        let second = empty_update().await;
        if first["task"]["updated_at"] == second["task"]["updated_at"] {
            assert_eq!(second["committed_files"], json!([]), "{second}");
            assert_eq!(second["latest_commit"], first["latest_commit"]);
            assert_eq!(second["task"], first["task"]);
            same_second = true;
            break;
        }
    }
    assert!(same_second, "no two updates fell within one second");
    assert_eq!(
        writer.get("/v1/tasks/query?limit=0").await,
        (
            422,
            r#"{"detail":[{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}"#.to_owned()
        )
    );
    assert_eq!(
        stranger.get("/v1/tasks/query").await.1,
        r#"{"ok":true,"count":0,"tasks":[]}"#
    );

    // Schedule: 201 for a new item, 200 for its exact replay, the original's object details.
    let reminder = r#"{"kind":"reminder","title":"Check whales","due_at":"2099-11-26T09:00:00Z","note":"n","subject_kind":"thread","subject_id":"th-1","metadata":{"b":1}}"#;
    let (status, created) = writer.post("/v1/schedule/items", reminder).await;
    assert_eq!(status, 201, "{created}");
    let (status, replayed) = writer.post("/v1/schedule/items", reminder).await;
    assert_eq!(status, 200, "{replayed}");
    let created: Value = serde_json::from_str(&created).unwrap();
    let replayed: Value = serde_json::from_str(&replayed).unwrap();
    assert_eq!(created["created"], true);
    assert_eq!(replayed["created"], false);
    assert_eq!(created["item"], replayed["item"]);
    let id = created["item"]["schedule_id"].as_str().unwrap().to_owned();
    assert_eq!(
        writer
            .post(
                "/v1/schedule/items",
                r#"{"kind":"reminder","title":"x","due_at":"2026-11-20T09:00:00","extra":1}"#
            )
            .await,
        (
            422,
            r#"{"detail":{"code":"invalid_schedule_payload","field":"extra","message":"unexpected field: extra"}}"#.to_owned()
        )
    );
    let (status, got) = writer.get(&format!("/v1/schedule/items/{id}")).await;
    assert_eq!(status, 200, "{got}");
    let (status, _) = stranger.get(&format!("/v1/schedule/items/{id}")).await;
    assert_eq!(status, 404);
    let (status, acked) = writer
        .post(
            &format!("/v1/schedule/items/{id}/acknowledge"),
            r#"{"expected_version":1}"#,
        )
        .await;
    assert_eq!(status, 200, "{acked}");
    assert!(
        acked.contains(r#""status":"acknowledged","derived_state":"terminal""#),
        "{acked}"
    );
    let (status, listed) = writer.get("/v1/schedule/items?status=acknowledged").await;
    assert_eq!(status, 200, "{listed}");
    assert!(
        listed.starts_with(
            r#"{"ok":true,"count":1,"total":1,"limit":50,"offset":0,"items":[{"schedule_id":""#
        ),
        "{listed}"
    );
    assert_eq!(
        stranger.get("/v1/schedule/items").await.1,
        r#"{"ok":true,"count":0,"total":0,"limit":50,"offset":0,"items":[],"warnings":[]}"#
    );
}

//! Continuity over REST on CogniRelay's own paths, compared with the original: every case of
//! tests/facts/cognirelay_continuity_rest.json (recorded from CogniRelay 1.4.15 by
//! scripts/record-continuity-facts) is sent in order and must get the same status and the
//! same body bytes; then Noema's history route shows the chain the cases wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_e2e::{TestCluster, anonymous, client_as, cluster_cases};
use serde_json::{Value, json};

cluster_cases!(
    answers_as_cognirelay_does,
    tokens_of_one_tenant_share_its_capsules,
    ops_run_is_local_only,
    the_backup_drill_reports_a_corrupted_archive,
);

const FACTS: &str = include_str!("../facts/cognirelay_continuity_rest.json");

/// `"field":"…"` → `"field":"<masked>"` for each masked field (a git commit there, a
/// revision id here, null for a subject that never had one: docs/continuity.md).
fn masked(body: &str, fields: &[String]) -> String {
    let mut body = body.to_owned();
    for field in fields {
        body = body.replace(
            &format!("\"{field}\":null"),
            &format!("\"{field}\":\"<masked>\""),
        );
        let key = format!("\"{field}\":\"");
        let mut out = String::new();
        let mut rest = body.as_str();
        while let Some(at) = rest.find(&key) {
            let value = &rest[at + key.len()..];
            let end = value.find('"').expect("a closed string");
            out.push_str(&rest[..at]);
            out.push_str(&key);
            out.push_str("<masked>\"");
            rest = &value[end + 1..];
        }
        out.push_str(rest);
        body = out;
    }
    body
}

async fn answers_as_cognirelay_does(cluster: &TestCluster) {
    let facts: Value = serde_json::from_str(FACTS).unwrap();
    let client = anonymous();
    let mut compared = 0;
    for case in facts["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let url = format!("{}{}", cluster.rest_url, case["path"].as_str().unwrap());
        let mut request = match case["method"].as_str().unwrap() {
            "POST" => client.post(&url),
            "GET" => client.get(&url),
            other => panic!("{name}: method {other}"),
        };
        // The owner's token unless the case sends another header, or none.
        let bearer = format!("Bearer {}", cluster.owner_token);
        let authorization = match case.get("authorization") {
            None => Some(bearer.as_str()),
            Some(Value::Null) => None,
            Some(value) => Some(value.as_str().unwrap()),
        };
        if let Some(authorization) = authorization {
            request = request.header("authorization", authorization);
        }
        if let Some(headers) = case.get("headers").and_then(Value::as_object) {
            for (header, value) in headers {
                request = request.header(header.as_str(), value.as_str().unwrap());
            }
        }
        if let Some(body) = case["body"].as_str() {
            request = request
                .header("content-type", "application/json")
                .body(body.to_owned());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        // CogniRelay's 401 names no scheme.
        assert!(
            !response.headers().contains_key("www-authenticate"),
            "case {name}"
        );
        let mask: Vec<String> = case["mask"]
            .as_array()
            .map(|m| m.iter().map(|f| f.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        let body = masked(&response.text().await.unwrap(), &mask);
        assert_eq!(
            (status, body.as_str()),
            (
                u16::try_from(case["status"].as_u64().unwrap()).unwrap(),
                case["response"].as_str().unwrap()
            ),
            "case {name}"
        );
        compared += 1;
    }
    assert!(compared >= 50, "only {compared} cases");

    // The capsule the cases wrote (created, then patched) has a two-revision chain.
    let history: Value = client_as(&cluster.owner_token)
        .get(format!(
            "{}/v1/continuity/history?subject_kind=user&subject_id=alice&include_capsules=true",
            cluster.rest_url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history["ok"], true, "{history}");
    assert_eq!(history["chain_intact"], true, "{history}");
    let revisions = history["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 2, "{history}");
    assert_eq!(revisions[0]["operation"], "patch");
    assert_eq!(revisions[1]["operation"], "upsert");
    assert_eq!(
        revisions[0]["previous_revision_id"],
        revisions[1]["revision_id"]
    );
    assert_eq!(
        revisions[0]["capsule"]["continuity"]["open_loops"],
        serde_json::json!(["o", "x"])
    );
}

/// The first upsert of the recorded cases that CogniRelay accepted: a whole capsule of
/// `user`/`alice`.
fn alice_upsert() -> String {
    let facts: Value = serde_json::from_str(FACTS).unwrap();
    facts["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "/v1/continuity/upsert" && c["status"] == 200)
        .unwrap()["body"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn post(cluster: &TestCluster, token: &str, path: &str, body: &str) -> (u16, String) {
    let response = client_as(token)
        .post(format!("{}{path}", cluster.rest_url))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Issues a token as `issuer` over REST; answers the status and body.
async fn issue(cluster: &TestCluster, issuer: &str, body: Value) -> (u16, Value) {
    let (status, text) = post(
        cluster,
        issuer,
        "/v1/security/tokens/issue",
        &body.to_string(),
    )
    .await;
    (status, json_of(&text))
}

const READ_ALICE: &str = r#"{"subject_kind":"user","subject_id":"alice"}"#;

/// Two tokens issued with one tenant write and read the same capsules; a token of another
/// tenant sees none of them; only a superuser names a tenant other than its own.
async fn tokens_of_one_tenant_share_its_capsules(cluster: &TestCluster) {
    let owner = &cluster.owner_token;
    let scopes = json!(["read:files", "write:projects"]);
    let mut team = Vec::new();
    for peer in ["agent:writer", "agent:reader"] {
        let (status, issued) = issue(
            cluster,
            owner,
            json!({"peer_id": peer, "tenant": "team:blue", "scopes": scopes}),
        )
        .await;
        assert_eq!(status, 200, "{issued}");
        assert_eq!(issued["token_meta"]["tenant"], "team:blue");
        assert_eq!(issued["token_meta"]["peer_id"], peer);
        team.push(issued["token"].as_str().unwrap().to_owned());
    }
    let (status, outsider) = issue(
        cluster,
        owner,
        json!({"peer_id": "agent:outsider", "scopes": scopes}),
    )
    .await;
    assert_eq!(status, 200, "{outsider}");
    assert_eq!(outsider["token_meta"]["tenant"], "agent:outsider");
    let outsider_meta = outsider["token_meta"].clone();
    let outsider = outsider["token"].as_str().unwrap().to_owned();

    let (status, written) = post(cluster, &team[0], "/v1/continuity/upsert", &alice_upsert()).await;
    assert_eq!(status, 200, "{written}");
    let (status, read) = post(cluster, &team[1], "/v1/continuity/read", READ_ALICE).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(
        json_of(&read)["capsule"]["subject_id"],
        json_of(&alice_upsert())["capsule"]["subject_id"]
    );
    let (_, listed) = post(cluster, &team[1], "/v1/continuity/list", "{}").await;
    assert_eq!(json_of(&listed)["count"], 1, "{listed}");

    // The outsider's answers are those of an empty tenant.
    let (status, missing) = post(cluster, &outsider, "/v1/continuity/read", READ_ALICE).await;
    let (never, never_body) = post(
        cluster,
        &outsider,
        "/v1/continuity/read",
        r#"{"subject_kind":"user","subject_id":"nobody-ever"}"#,
    )
    .await;
    assert_eq!(status, 404, "{missing}");
    assert_eq!(
        (status, missing.replace("alice", "X")),
        (never, never_body.replace("nobody-ever", "X"))
    );
    let (_, listed) = post(cluster, &outsider, "/v1/continuity/list", "{}").await;
    assert_eq!(json_of(&listed)["count"], 0, "{listed}");

    // A token that may issue tokens (identity:admin) but is no superuser issues them only
    // for its own tenant: naming another, or a peer that would default to another, is 403.
    let (_, admin) = issue(
        cluster,
        owner,
        json!({"peer_id": "agent:lead", "scopes": ["identity:admin"]}),
    )
    .await;
    let lead = admin["token"].as_str().unwrap().to_owned();
    for body in [
        json!({"peer_id": "agent:lead", "tenant": "team:blue"}),
        json!({"peer_id": "agent:someone-else"}),
    ] {
        let (status, refused) = issue(cluster, &lead, body.clone()).await;
        assert_eq!(status, 403, "{body}: {refused}");
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .starts_with("Tenant not allowed"),
            "{refused}"
        );
    }
    let (status, own) = issue(
        cluster,
        &lead,
        json!({"peer_id": "agent:helper", "tenant": "agent:lead", "scopes": scopes}),
    )
    .await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["token_meta"]["tenant"], "agent:lead");

    // Nor does it see or revoke another tenant's tokens: the list holds its tenant's only,
    // one foreign token is "no token matched", a peer with foreign tokens is refused whole.
    let listed = client_as(&lead)
        .get(format!("{}/v1/security/tokens", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status().as_u16(), 200);
    let listed: Value = listed.json().await.unwrap();
    let tenants: Vec<&str> = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tenant"].as_str().unwrap())
        .collect();
    assert!(
        tenants.len() >= 2 && tenants.iter().all(|t| *t == "agent:lead"),
        "{listed}"
    );
    let blue_writer = json!({"peer_id": "agent:writer", "revoke_all_for_peer": true}).to_string();
    let (status, refused) = post(cluster, &lead, "/v1/security/tokens/revoke", &blue_writer).await;
    assert_eq!(status, 403, "{refused}");
    let foreign_id = outsider_meta["token_id"].as_str().unwrap();
    let (status, refused) = post(
        cluster,
        &lead,
        "/v1/security/tokens/revoke",
        &json!({ "token_id": foreign_id }).to_string(),
    )
    .await;
    assert_eq!(status, 404, "{refused}");
    let (status, still) = post(cluster, &outsider, "/v1/continuity/list", "{}").await;
    assert_eq!(status, 200, "the outsider's token still works: {still}");
}

/// `POST /v1/ops/run` runs for a caller on this host, and answers CogniRelay's 403 to a
/// request a local proxy forwards for a remote client. (A remote peer is never local,
/// whatever it claims: `forward::is_local_client`'s unit test, which has one.)
async fn ops_run_is_local_only(cluster: &TestCluster) {
    let owner = &cluster.owner_token;
    let (status, body) = post(cluster, owner, "/v1/continuity/upsert", &alice_upsert()).await;
    assert_eq!(status, 200, "{body}");
    let (status, archived) = post(
        cluster,
        owner,
        "/v1/continuity/archive",
        r#"{"subject_kind":"user","subject_id":"alice","reason":"wrapped up"}"#,
    )
    .await;
    assert_eq!(status, 200, "{archived}");
    let path = json_of(&archived)["archived_path"].clone();
    let job =
        |job: &str| json!({"job_id": job, "arguments": {"source_archive_path": path}}).to_string();
    let run = |job: String, header: Option<(&'static str, &'static str)>| {
        let mut request = client_as(owner)
            .post(format!("{}/v1/ops/run", cluster.rest_url))
            .header("content-type", "application/json")
            .body(job);
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, stored) = run(job("continuity_cold_store"), None).await;
    assert_eq!(status, 200, "{stored}");
    let stored = json_of(&stored);
    assert_eq!(stored["local_only"], true);
    assert_eq!(stored["job_id"], "continuity_cold_store");

    // A local proxy forwarding a remote client: CogniRelay's 403, and nothing moves.
    for header in ["x-forwarded-for", "x-real-ip"] {
        let (status, refused) = run(
            job("continuity_cold_rehydrate"),
            Some((header, "192.0.2.10")),
        )
        .await;
        assert_eq!(
            (status, refused.as_str()),
            (403, r#"{"detail":"Host ops endpoints are local-only"}"#),
            "{header}"
        );
    }
    // A proxy naming a loopback client keeps the call local: the archive is still cold.
    let (status, rehydrated) = run(
        job("continuity_cold_rehydrate"),
        Some(("x-forwarded-for", "127.0.0.1")),
    )
    .await;
    assert_eq!(status, 200, "{rehydrated}");
    assert_eq!(
        json_of(&rehydrated)["job_result"]["restored_archive_path"],
        path
    );

    // Without the scope, the scope is what a remote caller hears first.
    let reader = cluster
        .issue_token("agent:ops-reader", &["read:files"])
        .await
        .unwrap();
    let response = client_as(&reader)
        .post(format!("{}/v1/ops/run", cluster.rest_url))
        .header("content-type", "application/json")
        .header("x-forwarded-for", "192.0.2.10")
        .body(job("continuity_cold_store"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let text = response.text().await.unwrap();
    assert!(!text.contains("local-only"), "{text}");
}

/// The backup drill counts and validates every continuity artifact; a corrupted archive is
/// listed and makes the drill's `ok` false, and the call still answers 200.
async fn the_backup_drill_reports_a_corrupted_archive(cluster: &TestCluster) {
    let owner = &cluster.owner_token;
    let (status, body) = post(cluster, owner, "/v1/continuity/upsert", &alice_upsert()).await;
    assert_eq!(status, 200, "{body}");
    let other = alice_upsert().replace("alice", "bob");
    let (status, body) = post(cluster, owner, "/v1/continuity/upsert", &other).await;
    assert_eq!(status, 200, "{body}");
    let (status, archived) = post(
        cluster,
        owner,
        "/v1/continuity/archive",
        r#"{"subject_kind":"user","subject_id":"bob","reason":"wrapped up"}"#,
    )
    .await;
    assert_eq!(status, 200, "{archived}");
    let archive_path = json_of(&archived)["archived_path"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, created) = post(cluster, owner, "/v1/backup/create", "{}").await;
    assert_eq!(status, 200, "{created}");
    // The original's key order.
    let at: Vec<usize> = [
        "ok",
        "backup_id",
        "backup_path",
        "manifest_path",
        "committed_files",
        "latest_commit",
        "continuity_counts",
    ]
    .iter()
    .map(|key| created.find(&format!("\"{key}\":")).unwrap())
    .collect();
    assert!(at.is_sorted(), "{created}");
    assert!(
        created.contains(r#""committed_files":[],"latest_commit":null,"#),
        "{created}"
    );
    let created = json_of(&created);
    assert!(
        created["backup_id"]
            .as_str()
            .unwrap()
            .starts_with("backup_")
    );
    assert_eq!(
        created["continuity_counts"],
        json!({"active_capsules": 1, "fallback_snapshots": 2, "archive_envelopes": 1,
               "cold_payloads": 0, "cold_stubs": 0})
    );
    let restore = json!({"backup_path": created["backup_path"]}).to_string();
    let (status, drill) = post(cluster, owner, "/v1/backup/restore-test", &restore).await;
    assert_eq!(status, 200, "{drill}");
    let drill = json_of(&drill);
    assert_eq!(drill["ok"], true, "{drill}");
    assert_eq!(drill["continuity_validation"]["ok"], true, "{drill}");
    assert_eq!(drill["extracted_files"], 4, "{drill}");

    // Damage the archive envelope under the service.
    let spec = cluster.registry.get("continuity").unwrap();
    let url = cluster.config().database_url(spec);
    let damage = "UPDATE continuity_archives SET envelope = $1 WHERE archive_path = $2";
    let damaged = match noema_store::Database::connect(&url).await.unwrap() {
        noema_store::Database::Sqlite(pool) => sqlx::query(damage)
            .bind(b"{\"not\": \"an envelope\"".to_vec())
            .bind(&archive_path)
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected(),
        noema_store::Database::Postgres(pool) => sqlx::query(damage)
            .bind(b"{\"not\": \"an envelope\"".to_vec())
            .bind(&archive_path)
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected(),
    };
    assert_eq!(damaged, 1);
    let (status, drill) = post(cluster, owner, "/v1/backup/restore-test", &restore).await;
    assert_eq!(status, 200, "{drill}");
    let drill = json_of(&drill);
    assert_eq!(drill["ok"], false, "{drill}");
    let validation = &drill["continuity_validation"];
    assert_eq!(validation["ok"], false, "{drill}");
    assert_eq!(
        validation["invalid_archives"],
        json!([archive_path]),
        "{drill}"
    );
    assert_eq!(validation["active_capsules"], 1, "{drill}");
    // With the validation turned off, the drill has nothing to fail on.
    let unchecked = json!({"backup_path": created["backup_path"], "verify_continuity": false});
    let (_, drill) = post(
        cluster,
        owner,
        "/v1/backup/restore-test",
        &unchecked.to_string(),
    )
    .await;
    let drill = json_of(&drill);
    assert_eq!(drill["continuity_validation"], Value::Null, "{drill}");
    assert_eq!(drill["ok"], true, "{drill}");

    // Admin only, as the original: a token with continuity's ordinary scopes is refused.
    let writer = cluster
        .issue_token("agent:backup-writer", &["read:files", "write:projects"])
        .await
        .unwrap();
    let (status, refused) = post(cluster, &writer, "/v1/backup/create", "{}").await;
    assert_eq!(status, 403, "{refused}");
}

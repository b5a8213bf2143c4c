//! CogniRelay's messages over REST on every shape and both backends: send, ack, pending,
//! inbox, thread, verify, relay forward, replay and key rotation with the original's bodies,
//! statuses and messages (shapes recorded from CogniRelay 1.4.15, ids, times and commits
//! masked), signed envelopes (valid, expired, wrong key, replayed nonce, throttled), a
//! collaborator of the owner's tenant, another tenant that sees nothing, and a token without
//! `write:messages` refused; and `GET /v1/metrics` counting one tenant's deliveries and audit
//! entries in the original's body.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_continuity::domain::envelope::{sign, signing_blob};
use noema_continuity::domain::json::Json;
use noema_e2e::{TestCluster, client_as, cluster_cases};
use noema_proto::identity::v1::IssueTokenRequest;
use serde_json::{Value, json};

cluster_cases!(messages_over_rest, metrics_over_rest);

struct Rest {
    client: reqwest::Client,
    base: String,
    tenant: Option<String>,
}

impl Rest {
    fn new(cluster: &TestCluster, token: &str) -> Rest {
        Rest {
            client: client_as(token),
            base: cluster.rest_url.clone(),
            tenant: None,
        }
    }

    async fn post(&self, path: &str, body: &str) -> (u16, String) {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(tenant) = &self.tenant {
            request = request.header("x-noema-tenant", tenant);
        }
        let response = request.send().await.unwrap();
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

    async fn json(&self, path: &str, body: &Value) -> Value {
        let (status, text) = self.post(path, &body.to_string()).await;
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    async fn read(&self, path_and_query: &str) -> Value {
        let (status, text) = self.get(path_and_query).await;
        assert_eq!(status, 200, "{path_and_query}: {text}");
        serde_json::from_str(&text).unwrap()
    }
}

/// Message ids, ack ids, second-precision times and commit ids replaced by placeholders, so
/// a body compares byte for byte with the original's.
fn masked(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix("msg_")
            && tail.len() >= 12
            && tail.as_bytes()[..12].iter().all(u8::is_ascii_hexdigit)
        {
            out.push_str("msg_<id>");
            rest = &tail[12..];
        } else if let Some(tail) = rest.strip_prefix("\"latest_commit\":\"") {
            let end = tail.find('"').unwrap();
            out.push_str("\"latest_commit\":\"<commit>");
            rest = &tail[end..];
        } else if rest.len() >= 20
            && rest.as_bytes()[4] == b'-'
            && rest.as_bytes()[10] == b'T'
            && rest.as_bytes()[19] == b'Z'
            && rest.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        {
            out.push_str("<time>");
            rest = &rest[20..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// What a send signs, from its request.
fn signed_payload(m: &Value) -> Value {
    json!({
        "thread_id": m["thread_id"], "sender": m["sender"], "recipient": m["recipient"],
        "subject": m["subject"], "body_md": m["body_md"], "priority": "normal",
        "attachments": [], "idempotency_key": m.get("idempotency_key").cloned().unwrap_or(Value::Null),
        "delivery": {"requires_ack": false, "ack_timeout_seconds": 300, "max_retries": 5},
    })
}

fn envelope(payload: &Value, secret: &str, nonce: &str, expires: Option<&str>) -> Value {
    let payload = Json::parse(payload.to_string().as_bytes()).unwrap();
    let blob = signing_blob(&payload, "key-1", nonce, expires);
    json!({"key_id": "key-1", "nonce": nonce, "expires_at": expires, "signature": sign(secret, &blob)})
}

async fn messages_over_rest(cluster: &TestCluster) {
    let token = cluster
        .issue_token("agent:a", &["write:messages", "read:files"])
        .await
        .unwrap();
    let a = Rest::new(cluster, &token);

    // The original's shapes (recorded from CogniRelay 1.4.15), byte for byte once masked.
    let (status, body) = a
        .post(
            "/v1/messages/send",
            r#"{"thread_id":"t-1","sender":"peer-a","recipient":"peer-b","subject":"Grüße","body_md":"hi ✓"}"#,
        )
        .await;
    assert_eq!(
        (status, masked(&body)),
        (
            200,
            masked(
                r#"{"ok":true,"idempotent_replay":false,"message":{"id":"msg_05a2f13992f7","thread_id":"t-1","from":"peer-a","to":"peer-b","sent_at":"2026-11-26T02:04:56Z","subject":"Grüße","body_md":"hi ✓","priority":"normal","attachments":[],"idempotency_key":null,"delivery":{"requires_ack":false,"ack_timeout_seconds":300,"max_retries":5}},"delivery_state":null,"signature_verification":null,"committed_files":["messages/inbox/peer-b.jsonl","messages/outbox/peer-a.jsonl","messages/threads/t-1.jsonl"],"latest_commit":"7fff31021a405ae4faa4c4824edc4fa86ccdb916"}"#
            )
        )
    );
    let tracked = r#"{"thread_id":"t-1","sender":"peer-a","recipient":"peer-b","subject":"s2","body_md":"b","idempotency_key":"k1","delivery":{"requires_ack":true,"ack_timeout_seconds":60}}"#;
    let (status, first) = a.post("/v1/messages/send", tracked).await;
    assert_eq!(
        (status, masked(&first)),
        (
            200,
            masked(
                r#"{"ok":true,"idempotent_replay":false,"message":{"id":"msg_6357f0980ed4","thread_id":"t-1","from":"peer-a","to":"peer-b","sent_at":"2026-11-26T02:04:56Z","subject":"s2","body_md":"b","priority":"normal","attachments":[],"idempotency_key":"k1","delivery":{"requires_ack":true,"ack_timeout_seconds":60,"max_retries":5}},"delivery_state":{"message_id":"msg_6357f0980ed4","thread_id":"t-1","from":"peer-a","to":"peer-b","subject":"s2","idempotency_key":"k1","status":"pending_ack","requires_ack":true,"ack_timeout_seconds":60,"max_retries":5,"retry_count":0,"sent_at":"2026-11-26T02:04:56Z","ack_deadline":"2026-11-26T02:05:56Z","acks":[],"last_error":null,"message":{"id":"msg_6357f0980ed4","thread_id":"t-1","from":"peer-a","to":"peer-b","sent_at":"2026-11-26T02:04:56Z","subject":"s2","body_md":"b","priority":"normal","attachments":[],"idempotency_key":"k1","delivery":{"requires_ack":true,"ack_timeout_seconds":60,"max_retries":5}},"effective_status":"pending_ack"},"signature_verification":null,"committed_files":["messages/inbox/peer-b.jsonl","messages/outbox/peer-a.jsonl","messages/threads/t-1.jsonl","messages/state/delivery_index.json"],"latest_commit":"16967dfb979d2549e149b26e89a037ba85fdacd4"}"#
            )
        )
    );
    // The same key again (another subject): the first send, nothing committed.
    let (_, replay) = a
        .post("/v1/messages/send", &tracked.replace("\"s2\"", "\"s2x\""))
        .await;
    let first: Value = serde_json::from_str(&first).unwrap();
    let replay: Value = serde_json::from_str(&replay).unwrap();
    assert_eq!(replay["idempotent_replay"], true);
    assert_eq!(replay["message"], first["message"]);
    assert_eq!(replay["committed_files"], json!([]));
    assert_eq!(replay["latest_commit"], first["latest_commit"]);
    let id = first["message"]["id"].as_str().unwrap().to_owned();

    let (status, pending) = a.get("/v1/messages/pending").await;
    assert_eq!(status, 200);
    assert!(
        masked(&pending).starts_with(r#"{"ok":true,"count":1,"summary":{"pending_ack":1},"messages":[{"message_id":"msg_<id>","thread_id":"t-1""#),
        "{pending}"
    );
    assert_eq!(
        masked(&a.get("/v1/messages/inbox?recipient=peer-b&limit=1").await.1),
        masked(
            r#"{"ok":true,"recipient":"peer-b","count":1,"messages":[{"id":"msg_6357f0980ed4","thread_id":"t-1","from":"peer-a","to":"peer-b","sent_at":"2026-11-26T02:04:56Z","subject":"s2","body_md":"b","priority":"normal","attachments":[],"idempotency_key":"k1","delivery":{"requires_ack":true,"ack_timeout_seconds":60,"max_retries":5}}]}"#
        )
    );
    let thread = a.read("/v1/messages/thread?thread_id=t-1").await;
    assert_eq!(thread["count"], 2);
    assert_eq!(thread["messages"][0]["subject"], "Grüße");

    // Refusals with the original's statuses and bodies.
    let refusals: &[(&str, &str, &str, u16, &str)] = &[
        (
            "GET",
            "/v1/messages/thread?thread_id=t-1&limit=0",
            "",
            422,
            r#"{"detail":[{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}"#,
        ),
        (
            "GET",
            "/v1/messages/inbox",
            "",
            422,
            r#"{"detail":[{"type":"missing","loc":["query","recipient"],"msg":"Field required","input":null}]}"#,
        ),
        (
            "GET",
            "/v1/messages/pending?limit=501",
            "",
            422,
            r#"{"detail":[{"type":"less_than_equal","loc":["query","limit"],"msg":"Input should be less than or equal to 500","input":"501","ctx":{"le":500}}]}"#,
        ),
        (
            "POST",
            "/v1/messages/ack",
            r#"{"message_id":"msg_nope","status":"accepted"}"#,
            404,
            r#"{"detail":"Tracked message not found"}"#,
        ),
        (
            "POST",
            "/v1/messages/ack",
            r#"{"message_id":"x","status":"maybe"}"#,
            422,
            r#"{"detail":[{"type":"literal_error","loc":["body","status"],"msg":"Input should be 'accepted', 'rejected' or 'deferred'","input":"maybe","ctx":{"expected":"'accepted', 'rejected' or 'deferred'"}}]}"#,
        ),
        (
            "POST",
            "/v1/messages/send",
            r#"{"thread_id":"t","sender":"a","recipient":"b","subject":"s","body_md":"x","delivery":{"ack_timeout_seconds":0}}"#,
            422,
            r#"{"detail":[{"type":"greater_than_equal","loc":["body","delivery","ack_timeout_seconds"],"msg":"Input should be greater than or equal to 1","input":0,"ctx":{"ge":1}}]}"#,
        ),
        (
            "POST",
            "/v1/messages/verify",
            r#"{"payload":{"a":1},"key_id":"key-9","nonce":"n1","signature":"00"}"#,
            404,
            r#"{"detail":"Unknown key_id: key-9"}"#,
        ),
        (
            "POST",
            "/v1/replay/messages",
            r#"{"message_id":"msg_nope"}"#,
            404,
            r#"{"detail":"Tracked message not found"}"#,
        ),
    ];
    for (verb, path, body, status, expected) in refusals {
        let got = if *verb == "GET" {
            a.get(path).await
        } else {
            a.post(path, body).await
        };
        assert_eq!(got, (*status, (*expected).to_owned()), "{verb} {path}");
    }

    // Empty names are boxes like any other, as in the original (recorded from CogniRelay
    // 1.4.15): `messages/inbox/.jsonl` is written and read back.
    let (status, body) = a
        .post(
            "/v1/messages/send",
            r#"{"thread_id":"","sender":"peer-a","recipient":"","subject":"s","body_md":"b"}"#,
        )
        .await;
    assert_eq!(
        (status, masked(&body)),
        (
            200,
            masked(
                r#"{"ok":true,"idempotent_replay":false,"message":{"id":"msg_d91688ee2d15","thread_id":"","from":"peer-a","to":"","sent_at":"2026-11-27T10:56:18Z","subject":"s","body_md":"b","priority":"normal","attachments":[],"idempotency_key":null,"delivery":{"requires_ack":false,"ack_timeout_seconds":300,"max_retries":5}},"delivery_state":null,"signature_verification":null,"committed_files":["messages/inbox/.jsonl","messages/outbox/peer-a.jsonl","messages/threads/.jsonl"],"latest_commit":"887bf92d98496c7011df1675ccb10f08835c43e6"}"#
            )
        )
    );
    for (path, name) in [
        ("/v1/messages/inbox?recipient=", "recipient"),
        ("/v1/messages/thread?thread_id=", "thread_id"),
    ] {
        let found = a.read(path).await;
        assert_eq!(
            (found[name].clone(), found["count"].clone()),
            (json!(""), json!(1)),
            "{path}"
        );
        assert_eq!(found["messages"][0]["subject"], "s", "{path}");
    }

    // Acks: deferred, then accepted; the record closes.
    let ack = a
        .json(
            "/v1/messages/ack",
            &json!({"message_id": id, "status": "deferred", "ack_id": "ack-1"}),
        )
        .await;
    assert_eq!(ack["ack"]["by"], "agent:a");
    assert_eq!(ack["delivery_state"]["effective_status"], "pending_ack");
    assert_eq!(
        ack["committed_files"],
        json!([
            "messages/state/delivery_index.json",
            format!("messages/acks/{id}.jsonl")
        ])
    );
    let ack = a
        .json(
            "/v1/messages/ack",
            &json!({"message_id": id, "status": "accepted"}),
        )
        .await;
    assert_eq!(ack["delivery_state"]["status"], "acked");
    let open = a.read("/v1/messages/pending").await;
    assert_eq!(
        (open["count"].clone(), open["summary"].clone()),
        (json!(0), json!({"acked": 1}))
    );
    let all = a.read("/v1/messages/pending?include_terminal=true").await;
    assert_eq!(all["count"], 1);

    // Relay forward: the original's shape.
    let (status, relayed) = a
        .post(
            "/v1/relay/forward",
            r#"{"target_recipient":"peer-c","thread_id":"t-9","sender":"peer-a","subject":"via","body_md":"x","envelope":{"hop":1}}"#,
        )
        .await;
    assert_eq!(
        (status, masked(&relayed)),
        (
            200,
            masked(
                r#"{"ok":true,"message":{"id":"msg_966473237397","thread_id":"t-9","from":"peer-a","to":"peer-c","via":"relay-local","sent_at":"2026-11-26T02:04:57Z","subject":"via","body_md":"x","priority":"normal","attachments":[],"envelope":{"hop":1}},"signature_verification":null,"committed_files":["messages/relay/relay-local.jsonl","messages/inbox/peer-c.jsonl","messages/threads/t-9.jsonl"],"latest_commit":"f2ea2f48b2261091f8a60732460161d6354638c4"}"#
            )
        )
    );

    // Signing keys: admin only; the owner rotates agent:a's key (naming the tenant).
    let (status, _) = a
        .post("/v1/security/keys/rotate", r#"{"key_id":"key-1"}"#)
        .await;
    assert_eq!(status, 403);
    let mut owner = Rest::new(cluster, &cluster.owner_token);
    owner.tenant = Some("agent:a".to_owned());
    let (status, rotated) = owner
        .post(
            "/v1/security/keys/rotate",
            r#"{"key_id":"key-1","secret":"s3cret"}"#,
        )
        .await;
    assert_eq!(
        (status, masked(&rotated)),
        (
            200,
            masked(
                r#"{"ok":true,"active_key_id":"key-1","key":{"key_id":"key-1","algorithm":"hmac-sha256","status":"active","created_at":"2026-11-26T02:04:56Z","rotated_at":"2026-11-26T02:04:56Z","storage_mode":"external"},"committed":true,"latest_commit":"cb056a64b8e230a968dfc3cd3bd7f6b490e30be0"}"#
            )
        )
    );

    // Signed envelopes: valid, replayed nonce, expired, wrong key.
    let mut signed = json!({"thread_id": "t-2", "sender": "peer-a", "recipient": "peer-b", "subject": "signed", "body_md": "naïve — 日本"});
    signed["signed_envelope"] = envelope(
        &signed_payload(&signed),
        "s3cret",
        "n1",
        Some("2099-01-01T00:00:00Z"),
    );
    let ok = a.json("/v1/messages/send", &signed).await;
    assert_eq!(ok["signature_verification"]["valid"], true);
    assert_eq!(ok["signature_verification"]["nonce_consumed"], true);
    let invalid = |reason: &str| {
        (
            401,
            format!(r#"{{"detail":"Invalid signed envelope: {reason}"}}"#),
        )
    };
    assert_eq!(
        a.post("/v1/messages/send", &signed.to_string()).await,
        invalid("replay_detected")
    );
    signed["signed_envelope"] = envelope(
        &signed_payload(&signed),
        "s3cret",
        "n2",
        Some("2020-01-01T00:00:00Z"),
    );
    assert_eq!(
        a.post("/v1/messages/send", &signed.to_string()).await,
        invalid("expired")
    );
    signed["signed_envelope"] = envelope(&signed_payload(&signed), "wrong", "n3", None);
    assert_eq!(
        a.post("/v1/messages/send", &signed.to_string()).await,
        invalid("invalid_signature")
    );

    // Verify: the original's verdict shape; a consumed nonce is a replay.
    let payload = json!({"a": 1});
    let mut verify = envelope(&payload, "s3cret", "v1", None);
    verify["payload"] = payload;
    let first = a.json("/v1/messages/verify", &verify).await;
    assert_eq!(
        (first["valid"].clone(), first["nonce_consumed"].clone()),
        (json!(true), json!(true))
    );
    let (status, again) = a.post("/v1/messages/verify", &verify.to_string()).await;
    assert_eq!(status, 200);
    assert_eq!(
        masked(&again),
        r#"{"ok":true,"valid":false,"reason":"replay_detected","algorithm":"hmac-sha256","key_id":"key-1","nonce":"v1","expires_at":null,"signature_valid":true,"expired":false,"replay_detected":true,"consume_nonce":true,"nonce_consumed":false,"failure_count":4,"committed_files":[],"latest_commit":"<commit>"}"#
    );

    // Throttled: 20 failures in the window, then verification is refused unchecked.
    verify["signature"] = json!("00");
    for _ in 4..20 {
        let v = a.json("/v1/messages/verify", &verify).await;
        assert_eq!(v["reason"], "invalid_signature");
    }
    let throttled = a.json("/v1/messages/verify", &verify).await;
    assert_eq!(throttled["reason"], "verification_throttled");
    assert!(throttled.get("consume_nonce").is_none(), "{throttled}");
    signed["signed_envelope"] = envelope(&signed_payload(&signed), "s3cret", "n4", None);
    assert_eq!(
        a.post("/v1/messages/send", &signed.to_string()).await,
        invalid("verification_throttled")
    );

    // A collaborator of agent:a's tenant (its own peer id) reads and acks there.
    let mut identity = cluster.identity().await.unwrap();
    let collaborator = identity
        .issue_token(IssueTokenRequest {
            peer_id: "peer-b".into(),
            template: "collaboration_peer".into(),
            tenant: "agent:a".into(),
            ..IssueTokenRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    let b = Rest::new(cluster, &collaborator);
    let inbox = b.read("/v1/messages/inbox?recipient=peer-b").await;
    assert_eq!(inbox["count"], 3);
    let sent = b
        .json(
            "/v1/messages/send",
            &json!({"thread_id": "t-1", "sender": "peer-b", "recipient": "peer-a", "subject": "re", "body_md": "ok", "delivery": {"requires_ack": true}}),
        )
        .await;
    let reply = sent["message"]["id"].as_str().unwrap();
    let acked = a
        .json(
            "/v1/messages/ack",
            &json!({"message_id": reply, "status": "rejected", "reason": "busy"}),
        )
        .await;
    assert_eq!(acked["delivery_state"]["last_error"], "busy");
    let replayed = b
        .json("/v1/replay/messages", &json!({"message_id": reply}))
        .await;
    assert_eq!(replayed["delivery_state"]["replay_of"], reply);
    assert_eq!(
        a.read("/v1/messages/inbox?recipient=peer-a").await["count"],
        2
    );

    // Another tenant sees nothing; a token without write:messages cannot send.
    let stranger_token = cluster
        .issue_token("agent:z", &["write:messages", "read:files"])
        .await
        .unwrap();
    let z = Rest::new(cluster, &stranger_token);
    assert_eq!(
        z.read("/v1/messages/inbox?recipient=peer-b").await["count"],
        0
    );
    assert_eq!(
        z.read("/v1/messages/thread?thread_id=t-1").await["count"],
        0
    );
    assert_eq!(
        z.read("/v1/messages/pending?include_terminal=true").await["summary"],
        json!({})
    );
    assert_eq!(
        z.post(
            "/v1/messages/ack",
            &json!({"message_id": id, "status": "accepted"}).to_string()
        )
        .await
        .0,
        404
    );
    let reader_token = cluster
        .issue_token("agent:a", &["read:files"])
        .await
        .unwrap();
    let reader = Rest::new(cluster, &reader_token);
    let (status, body) = reader
        .post(
            "/v1/messages/send",
            r#"{"thread_id":"t","sender":"a","recipient":"b","subject":"s","body_md":"x"}"#,
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        reader.read("/v1/messages/inbox?recipient=peer-b").await["count"],
        3
    );
}

/// `generated_at` (microseconds) replaced by a placeholder.
fn without_generated_at(body: &str) -> String {
    const KEY: &str = "\"generated_at\":\"";
    let Some(start) = body.find(KEY).map(|i| i + KEY.len()) else {
        return body.to_owned();
    };
    let end = start + body[start..].find('"').unwrap();
    format!("{}<time>{}", &body[..start], &body[end..])
}

async fn metrics_over_rest(cluster: &TestCluster) {
    let scopes = ["write:messages", "read:files", "read:index"];
    let token = cluster.issue_token("agent:m", &scopes).await.unwrap();
    let a = Rest::new(cluster, &token);
    // Nothing yet: the original's body on an empty repository (CogniRelay 1.4.15).
    const EMPTY: &str = r#"{"ok":true,"generated_at":"<time>","delivery":{"summary":{},"backlog_depth":0,"ack_success_ratio":1.0,"by_recipient":{}},"checks":{"summary":{},"artifact_count":0},"audit":{"event_counts":{},"peer_counts":{}},"security":{"verification_failures_recent":0,"verification_failure_window_seconds":600},"replication":{"last_push":null,"last_pull_by_source":{}},"alarms":[]}"#;
    let (status, body) = a.get("/v1/metrics").await;
    assert_eq!(
        (status, without_generated_at(&body)),
        (200, EMPTY.to_owned())
    );
    let generated_at = a.read("/v1/metrics").await["generated_at"].clone();
    let generated_at = generated_at.as_str().unwrap();
    assert!(
        generated_at.ends_with('Z') && noema_core::time::parse_rfc3339(generated_at).is_some(),
        "{generated_at}"
    );

    // Three tracked messages: one acked, one past its one-second deadline, one awaiting.
    let tracked = |n: u32, to: &str, timeout: u32| {
        json!({"thread_id": "t-m", "sender": "peer-a", "recipient": to, "subject": format!("s{n}"), "body_md": "b",
               "delivery": {"requires_ack": true, "ack_timeout_seconds": timeout}})
    };
    let first = a
        .json("/v1/messages/send", &tracked(1, "peer-b", 300))
        .await;
    a.json("/v1/messages/send", &tracked(2, "peer-c", 1)).await;
    a.json("/v1/messages/send", &tracked(3, "peer-b", 300))
        .await;
    a.json(
        "/v1/messages/ack",
        &json!({"message_id": first["message"]["id"], "status": "accepted"}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, body) = a.get("/v1/metrics").await;
    assert_eq!(
        (status, without_generated_at(&body)),
        (
            200,
            r#"{"ok":true,"generated_at":"<time>","delivery":{"summary":{"acked":1,"dead_letter":1,"pending_ack":1},"backlog_depth":1,"ack_success_ratio":0.5,"by_recipient":{"peer-b":{"total":2,"pending":1,"acked":1,"dead_letter":0},"peer-c":{"total":1,"pending":0,"acked":0,"dead_letter":1}}},"checks":{"summary":{},"artifact_count":0},"audit":{"event_counts":{"continuity.messages.send":3,"continuity.messages.ack":1},"peer_counts":{"agent:m":4}},"security":{"verification_failures_recent":0,"verification_failure_window_seconds":600},"replication":{"last_push":null,"last_pull_by_source":{}},"alarms":[]}"#
                .to_owned()
        )
    );
    // The pending view agrees on the backlog.
    assert_eq!(
        a.read("/v1/messages/pending?include_terminal=true").await["summary"],
        json!({"acked": 1, "dead_letter": 1, "pending_ack": 1})
    );

    // Another tenant sees none of it; a token without read:index is refused.
    let other = cluster.issue_token("agent:n", &scopes).await.unwrap();
    let (status, body) = Rest::new(cluster, &other).get("/v1/metrics").await;
    assert_eq!(
        (status, without_generated_at(&body)),
        (200, EMPTY.to_owned())
    );
    let reader = cluster
        .issue_token("agent:m", &["read:files"])
        .await
        .unwrap();
    let (status, body) = Rest::new(cluster, &reader).get("/v1/metrics").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("read:index"), "{body}");
}

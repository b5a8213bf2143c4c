//! Messages, store conformance through the operations layer on SQLite and Postgres: tracked
//! delivery and its states, idempotency and nonces under concurrent senders (the unique keys
//! inside the send's transaction decide), signed envelopes (valid, expired, wrong key,
//! replayed nonce, throttled), strict signed ingress, relay and replay, tenants, and the
//! metrics counted from them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use noema_continuity::domain::envelope::{sign, signing_blob};
use noema_continuity::domain::json::Json;
use noema_continuity::ops::Options;
use serde_json::{Value, json};
use support::*;

conformance!(
    tracked_delivery_moves_by_acks_and_deadlines,
    concurrent_sends_with_one_key_make_one_message,
    signed_envelopes_verify_expire_and_never_replay,
    strict_ingress_and_the_failure_throttle,
    relay_and_replay_write_where_the_original_does,
    metrics_count_the_tenants_own_deliveries_audit_and_failures,
);

fn sender() -> noema_continuity::domain::access::Caller {
    caller_with(
        "agent:a",
        &["write:messages", "read:files"],
        &["messages"],
        &["messages"],
    )
}

async fn send(h: &Harness, caller: &noema_continuity::domain::access::Caller, req: Value) -> Value {
    parse(&h.continuity.send_message(caller, &body(req)).await.unwrap())
}

fn message(n: u32, extra: Value) -> Value {
    let mut m = json!({
        "thread_id": "t-1",
        "sender": "peer-a",
        "recipient": "peer-b",
        "subject": format!("s{n}"),
        "body_md": format!("body {n}"),
    });
    if let (Value::Object(m), Value::Object(extra)) = (&mut m, extra) {
        m.extend(extra);
    }
    m
}

/// The signed envelope for `payload` under `secret`.
fn envelope(
    payload: &Value,
    key_id: &str,
    secret: &str,
    nonce: &str,
    expires: Option<&str>,
) -> Value {
    let payload = Json::parse(payload.to_string().as_bytes()).unwrap();
    let blob = signing_blob(&payload, key_id, nonce, expires);
    json!({"key_id": key_id, "nonce": nonce, "expires_at": expires, "signature": sign(secret, &blob)})
}

/// What a send signs.
fn signed_payload(m: &Value) -> Value {
    json!({
        "thread_id": m["thread_id"], "sender": m["sender"], "recipient": m["recipient"],
        "subject": m["subject"], "body_md": m["body_md"],
        "priority": m.get("priority").cloned().unwrap_or(json!("normal")),
        "attachments": m.get("attachments").cloned().unwrap_or(json!([])),
        "idempotency_key": m.get("idempotency_key").cloned().unwrap_or(Value::Null),
        "delivery": {
            "requires_ack": m.pointer("/delivery/requires_ack").cloned().unwrap_or(json!(false)),
            "ack_timeout_seconds": m.pointer("/delivery/ack_timeout_seconds").cloned().unwrap_or(json!(300)),
            "max_retries": m.pointer("/delivery/max_retries").cloned().unwrap_or(json!(5)),
        },
    })
}

async fn rotate(h: &Harness, tenant: &str, key_id: &str, secret: &str) {
    let answer = parse(
        &h.continuity
            .rotate_signing_key(
                &owner(tenant),
                &body(json!({"key_id": key_id, "secret": secret})),
            )
            .await
            .unwrap(),
    );
    assert_eq!(answer["active_key_id"], key_id);
    assert!(answer["key"].get("secret").is_none(), "{answer}");
}

async fn tracked_delivery_moves_by_acks_and_deadlines(backend: Backend) {
    let h = harness(backend).await;
    let a = sender();
    // Untracked: no record; tracked by an ack requirement or an idempotency key.
    let plain = send(&h, &a, message(1, json!({}))).await;
    assert_eq!(plain["delivery_state"], Value::Null);
    assert_eq!(
        plain["committed_files"],
        json!([
            "messages/inbox/peer-b.jsonl",
            "messages/outbox/peer-a.jsonl",
            "messages/threads/t-1.jsonl"
        ])
    );
    let acked = send(
        &h,
        &a,
        message(2, json!({"delivery": {"requires_ack": true}})),
    )
    .await;
    assert_eq!(acked["delivery_state"]["status"], "pending_ack");
    assert_eq!(acked["delivery_state"]["effective_status"], "pending_ack");
    let keyed = send(&h, &a, message(3, json!({"idempotency_key": "k"}))).await;
    assert_eq!(keyed["delivery_state"]["status"], "delivered");
    let again = send(&h, &a, message(99, json!({"idempotency_key": "k"}))).await;
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["message"], keyed["message"]);
    assert_eq!(again["committed_files"], json!([]));

    // One second of ack timeout: past it the record reads as dead_letter, stored unchanged.
    let short = send(
        &h,
        &a,
        message(
            4,
            json!({"delivery": {"requires_ack": true, "ack_timeout_seconds": 1}}),
        ),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let pending = |q: Value| {
        let h = &h;
        let a = &a;
        async move { parse(&h.continuity.pending_messages(a, &body(q)).await.unwrap()) }
    };
    let all = pending(json!({"include_terminal": "true"})).await;
    assert_eq!(
        all["summary"],
        json!({"delivered": 1, "pending_ack": 1, "dead_letter": 1}),
        "{all}"
    );
    let open = pending(json!({})).await;
    assert_eq!(open["count"], 1);
    assert_eq!(open["messages"][0]["message_id"], acked["message"]["id"]);
    let dead = pending(json!({"status": "dead_letter", "include_terminal": "1"})).await;
    assert_eq!(dead["messages"][0]["status"], "pending_ack");
    assert_eq!(dead["messages"][0]["message_id"], short["message"]["id"]);

    // Acks: deferred keeps it pending with a fresh deadline, accepted closes it.
    let id = acked["message"]["id"].as_str().unwrap();
    let ack = |status: &str| {
        let h = &h;
        let a = &a;
        let req = json!({"message_id": id, "status": status});
        async move { h.continuity.ack_message(a, &body(req)).await }
    };
    let deferred = parse(&ack("deferred").await.unwrap());
    assert_eq!(deferred["delivery_state"]["status"], "pending_ack");
    assert_eq!(deferred["ack"]["by"], "agent:a");
    assert!(
        deferred["ack"]["ack_id"]
            .as_str()
            .unwrap()
            .starts_with("ack_")
    );
    let accepted = parse(&ack("accepted").await.unwrap());
    assert_eq!(accepted["delivery_state"]["effective_status"], "acked");
    assert_eq!(
        accepted["delivery_state"]["acks"].as_array().unwrap().len(),
        2
    );
    let missing = h
        .continuity
        .ack_message(
            &a,
            &body(json!({"message_id": "msg_nope", "status": "accepted"})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&missing),
        (404, r#"{"detail":"Tracked message not found"}"#.to_owned())
    );

    // Inbox and thread: the last `limit` rows, oldest first; another tenant sees nothing.
    let inbox = parse(
        &h.continuity
            .inbox_messages(&a, &body(json!({"recipient": "peer-b", "limit": "2"})))
            .await
            .unwrap(),
    );
    let subjects: Vec<_> = inbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["subject"].clone())
        .collect();
    assert_eq!(subjects, vec![json!("s3"), json!("s4")]);
    let thread = parse(
        &h.continuity
            .thread_messages(&a, &body(json!({"thread_id": "t-1"})))
            .await
            .unwrap(),
    );
    assert_eq!(thread["count"], 4);
    let b = sender_of("agent:b");
    let other = parse(
        &h.continuity
            .inbox_messages(&b, &body(json!({"recipient": "peer-b"})))
            .await
            .unwrap(),
    );
    assert_eq!(other["count"], 0);
    let none = parse(
        &h.continuity
            .pending_messages(&b, &body(json!({"include_terminal": "true"})))
            .await
            .unwrap(),
    );
    assert_eq!(none["summary"], json!({}));
    let err = h
        .continuity
        .ack_message(&b, &body(json!({"message_id": id, "status": "accepted"})))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 404);
}

fn sender_of(tenant: &str) -> noema_continuity::domain::access::Caller {
    caller_with(
        tenant,
        &["write:messages", "read:files"],
        &["messages"],
        &["messages"],
    )
}

async fn concurrent_sends_with_one_key_make_one_message(backend: Backend) {
    let h = std::sync::Arc::new(harness(backend).await);
    let a = sender();
    let mut tasks = Vec::new();
    for n in 0..16 {
        let h = std::sync::Arc::clone(&h);
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            let req = message(
                n,
                json!({"idempotency_key": "same", "delivery": {"requires_ack": true}}),
            );
            parse(&h.continuity.send_message(&a, &body(req)).await.unwrap())
        }));
    }
    let mut ids = std::collections::BTreeSet::new();
    let mut fresh = 0;
    for task in tasks {
        let answer = task.await.unwrap();
        ids.insert(answer["message"]["id"].as_str().unwrap().to_owned());
        if answer["idempotent_replay"] == false {
            fresh += 1;
        }
    }
    assert_eq!((ids.len(), fresh), (1, 1));
    let inbox = parse(
        &h.continuity
            .inbox_messages(&a, &body(json!({"recipient": "peer-b"})))
            .await
            .unwrap(),
    );
    assert_eq!(inbox["count"], 1);

    // One nonce, many concurrent senders: exactly one lands, the others are replays.
    rotate(&h, "agent:a", "key-1", "s3cret").await;
    let mut tasks = Vec::new();
    for n in 0..8 {
        let h = std::sync::Arc::clone(&h);
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            let mut req = message(100 + n, json!({}));
            req["signed_envelope"] =
                envelope(&signed_payload(&req), "key-1", "s3cret", "one-nonce", None);
            h.continuity.send_message(&a, &body(req)).await
        }));
    }
    let mut landed = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => landed += 1,
            Err(err) => assert_eq!(
                refusal(&err),
                (
                    401,
                    r#"{"detail":"Invalid signed envelope: replay_detected"}"#.to_owned()
                )
            ),
        }
    }
    assert_eq!(landed, 1);
}

async fn signed_envelopes_verify_expire_and_never_replay(backend: Backend) {
    let h = harness(backend).await;
    let a = sender();
    rotate(&h, "agent:a", "key-1", "s3cret").await;
    let req = message(1, json!({"body_md": "naïve — 日本"}));
    let signed = |nonce: &str, secret: &str, expires: Option<&str>| {
        let mut r = req.clone();
        r["signed_envelope"] = envelope(&signed_payload(&r), "key-1", secret, nonce, expires);
        r
    };
    // Valid: verified, nonce consumed with the message.
    let ok = send(&h, &a, signed("n1", "s3cret", Some("2099-01-01T00:00:00Z"))).await;
    let v = &ok["signature_verification"];
    assert_eq!(
        (
            v["valid"].clone(),
            v["reason"].clone(),
            v["nonce_consumed"].clone()
        ),
        (json!(true), json!("ok"), json!(true))
    );
    assert_eq!(
        ok["committed_files"][0],
        "messages/security/nonce_index.json"
    );
    let refused = |r: Value| {
        let h = &h;
        let a = &a;
        async move { refusal(&h.continuity.send_message(a, &body(r)).await.unwrap_err()) }
    };
    let detail = |reason: &str| {
        (
            401,
            format!(r#"{{"detail":"Invalid signed envelope: {reason}"}}"#),
        )
    };
    // Replayed nonce, expired, wrong key (secret), unknown key id.
    assert_eq!(
        refused(signed("n1", "s3cret", Some("2099-01-01T00:00:00Z"))).await,
        detail("replay_detected")
    );
    assert_eq!(
        refused(signed("n2", "s3cret", Some("2020-01-01T00:00:00Z"))).await,
        detail("expired")
    );
    assert_eq!(
        refused(signed("n3", "wrong", None)).await,
        detail("invalid_signature")
    );
    let mut unknown = signed("n4", "s3cret", None);
    unknown["signed_envelope"]["key_id"] = json!("key-9");
    assert_eq!(
        refused(unknown).await,
        (404, r#"{"detail":"Unknown key_id: key-9"}"#.to_owned())
    );
    // A tampered body fails the signature.
    let mut tampered = signed("n5", "s3cret", None);
    tampered["body_md"] = json!("changed");
    assert_eq!(refused(tampered).await, detail("invalid_signature"));

    // Verify: 200 with the verdict; consuming a nonce once.
    let verify = |nonce: &str, consume: bool| {
        let payload = json!({"x": 1, "é": [1.5, null]});
        let mut r = envelope(&payload, "key-1", "s3cret", nonce, None);
        r["payload"] = payload;
        r["consume_nonce"] = json!(consume);
        let h = &h;
        let a = &a;
        async move { parse(&h.continuity.verify_message(a, &body(r)).await.unwrap()) }
    };
    let first = verify("v1", true).await;
    assert_eq!(
        (first["valid"].clone(), first["nonce_consumed"].clone()),
        (json!(true), json!(true))
    );
    assert!(
        first["latest_commit"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let second = verify("v1", true).await;
    assert_eq!(
        (second["valid"].clone(), second["reason"].clone()),
        (json!(false), json!("replay_detected"))
    );
    let peek = verify("v2", false).await;
    assert_eq!(
        (peek["valid"].clone(), peek["nonce_consumed"].clone()),
        (json!(true), json!(false))
    );
    // Another tenant knows neither the key nor the nonce.
    let err = h
        .continuity
        .send_message(&sender_of("agent:b"), &body(signed("n9", "s3cret", None)))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 404);
}

async fn strict_ingress_and_the_failure_throttle(backend: Backend) {
    let h = harness_with(
        backend,
        Options {
            require_signed_ingress: true,
            verify_failure_limit: 3,
            ..Options::default()
        },
    )
    .await;
    let a = sender();
    let err = h
        .continuity
        .send_message(&a, &body(message(1, json!({}))))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            400,
            r#"{"detail":"signed_envelope is required when strict signed ingress is enabled"}"#
                .to_owned()
        )
    );
    rotate(&h, "agent:a", "key-1", "s3cret").await;
    let mut good = message(2, json!({}));
    good["signed_envelope"] = envelope(&signed_payload(&good), "key-1", "s3cret", "g1", None);
    send(&h, &a, good.clone()).await;
    // Three failures, then the throttle answers without checking (even a good envelope).
    for n in 0..3 {
        let mut bad = message(10 + n, json!({}));
        bad["signed_envelope"] = envelope(
            &signed_payload(&bad),
            "key-1",
            "wrong",
            &format!("b{n}"),
            None,
        );
        let err = h.continuity.send_message(&a, &body(bad)).await.unwrap_err();
        assert_eq!(refusal(&err).0, 401);
    }
    good["signed_envelope"] = envelope(&signed_payload(&good), "key-1", "s3cret", "g2", None);
    let err = h
        .continuity
        .send_message(&a, &body(good))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            401,
            r#"{"detail":"Invalid signed envelope: verification_throttled"}"#.to_owned()
        )
    );
    // Another caller is not throttled.
    let other = caller_with(
        "agent:a",
        &["write:messages", "read:files"],
        &["messages"],
        &["messages"],
    );
    let other = noema_continuity::domain::access::Caller {
        principal: noema_core::scopes::Principal {
            token_id: "tok-other".into(),
            ..other.principal
        },
        ..other
    };
    let mut fine = message(3, json!({}));
    fine["signed_envelope"] = envelope(&signed_payload(&fine), "key-1", "s3cret", "g3", None);
    send(&h, &other, fine).await;
}

async fn relay_and_replay_write_where_the_original_does(backend: Backend) {
    let h = harness(backend).await;
    let a = sender();
    let relayed = parse(
        &h.continuity
            .relay_forward(
                &a,
                &body(json!({"target_recipient": "peer-c", "thread_id": "t-9", "sender": "peer-a", "subject": "via", "body_md": "x", "envelope": {"hop": 1}})),
            )
            .await
            .unwrap(),
    );
    assert_eq!(relayed["message"]["via"], "relay-local");
    assert_eq!(
        relayed["committed_files"],
        json!([
            "messages/relay/relay-local.jsonl",
            "messages/inbox/peer-c.jsonl",
            "messages/threads/t-9.jsonl"
        ])
    );
    let inbox = parse(
        &h.continuity
            .inbox_messages(&a, &body(json!({"recipient": "peer-c"})))
            .await
            .unwrap(),
    );
    assert_eq!(inbox["messages"][0]["envelope"], json!({"hop": 1}));

    // Replay: only a dead letter with retries left, unless forced.
    let sent = send(
        &h,
        &a,
        message(
            1,
            json!({"delivery": {"requires_ack": true, "max_retries": 1}}),
        ),
    )
    .await;
    let id = sent["message"]["id"].as_str().unwrap();
    let replay = |req: Value| {
        let h = &h;
        let a = &a;
        async move { h.continuity.replay_message(a, &body(req)).await }
    };
    let err = replay(json!({"message_id": id})).await.unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            409,
            r#"{"detail":"Replay requires dead_letter status; got pending_ack"}"#.to_owned()
        )
    );
    h.continuity
        .ack_message(
            &a,
            &body(json!({"message_id": id, "status": "rejected", "reason": "busy"})),
        )
        .await
        .unwrap();
    let again = parse(
        &replay(json!({"message_id": id, "reason": "retry"}))
            .await
            .unwrap(),
    );
    let new_id = again["replayed_message_id"].as_str().unwrap().to_owned();
    assert_eq!(again["delivery_state"]["retry_count"], 1);
    assert_eq!(again["delivery_state"]["replay_of"], id);
    assert_eq!(again["delivery_state"]["message"]["replay_of"], id);
    let all = parse(
        &h.continuity
            .pending_messages(&a, &body(json!({"include_terminal": "true"})))
            .await
            .unwrap(),
    );
    assert_eq!(
        all["summary"],
        json!({"replayed": 1, "pending_ack": 1}),
        "{all}"
    );
    // The replay is the recipient's latest message; its retries are spent now.
    let inbox = parse(
        &h.continuity
            .inbox_messages(&a, &body(json!({"recipient": "peer-b"})))
            .await
            .unwrap(),
    );
    assert_eq!(inbox["messages"][1]["id"].as_str(), Some(new_id.as_str()));
    h.continuity
        .ack_message(
            &a,
            &body(json!({"message_id": new_id, "status": "rejected"})),
        )
        .await
        .unwrap();
    let err = replay(json!({"message_id": new_id})).await.unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            409,
            r#"{"detail":"Replay retry limit reached (1/1)"}"#.to_owned()
        )
    );
    let forced = parse(
        &replay(json!({"message_id": new_id, "force": true, "requires_ack": false}))
            .await
            .unwrap(),
    );
    assert_eq!(forced["delivery_state"]["status"], "delivered");
    let err = replay(json!({"message_id": "msg_nope"})).await.unwrap_err();
    assert_eq!(refusal(&err).0, 404);
}

/// A reader of `tenant`'s metrics: `read:index`, and the namespaces the original checks.
fn metrics_reader(tenant: &str) -> noema_continuity::domain::access::Caller {
    caller_with(tenant, &["read:index"], &["messages", "logs"], &[])
}

async fn metrics_count_the_tenants_own_deliveries_audit_and_failures(backend: Backend) {
    let h = harness(backend).await;
    let a = sender();
    rotate(&h, "agent:a", "key-1", "s3cret").await;
    let tracked = |n: u32, to: &str, timeout: u32| {
        message(
            n,
            json!({"recipient": to, "delivery": {"requires_ack": true, "ack_timeout_seconds": timeout}}),
        )
    };
    let acked = send(&h, &a, tracked(1, "peer-b", 300)).await;
    send(&h, &a, tracked(2, "peer-c", 1)).await;
    send(&h, &a, tracked(3, "peer-b", 300)).await;
    let id = acked["message"]["id"].as_str().unwrap();
    h.continuity
        .ack_message(&a, &body(json!({"message_id": id, "status": "accepted"})))
        .await
        .unwrap();
    for nonce in ["v1", "v2"] {
        let bad = json!({"payload": {"x": 1}, "key_id": "key-1", "nonce": nonce, "signature": "00", "algorithm": "hmac-sha256"});
        let answer = parse(&h.continuity.verify_message(&a, &body(bad)).await.unwrap());
        assert_eq!(answer["reason"], "invalid_signature");
    }
    // A tenant whose name is a prefix of agent:a's up to its `:`.
    let short = sender_of("agent");
    send(&h, &short, message(9, json!({}))).await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;

    let metrics = |tenant: &str| {
        let h = &h;
        let reader = metrics_reader(tenant);
        async move { parse(&h.continuity.metrics(&reader).await.unwrap()) }
    };
    let m = metrics("agent:a").await;
    let keys: Vec<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(m["ok"], true);
    assert!(
        keys.contains(&"generated_at") && !keys.contains(&"warnings"),
        "{m}"
    );
    assert_eq!(
        m["delivery"],
        json!({
            "summary": {"acked": 1, "dead_letter": 1, "pending_ack": 1},
            "backlog_depth": 1,
            "ack_success_ratio": 0.5,
            "by_recipient": {
                "peer-b": {"total": 2, "pending": 1, "acked": 1, "dead_letter": 0},
                "peer-c": {"total": 1, "pending": 0, "acked": 0, "dead_letter": 1},
            },
        }),
        "{m}"
    );
    // In first-seen order, as the original's dicts.
    let text = String::from_utf8(
        h.continuity
            .metrics(&metrics_reader("agent:a"))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        text.contains(r#""summary":{"acked":1,"dead_letter":1,"pending_ack":1}"#),
        "{text}"
    );
    assert!(text.contains(r#""event_counts":{"continuity.security.keys_rotate":1,"continuity.messages.send":3,"continuity.messages.ack":1},"peer_counts":{"agent:a":5}"#), "{text}");
    assert_eq!(
        m["security"],
        json!({"verification_failures_recent": 2, "verification_failure_window_seconds": 600})
    );
    assert_eq!(m["checks"], json!({"summary": {}, "artifact_count": 0}));
    assert_eq!(
        m["replication"],
        json!({"last_push": null, "last_pull_by_source": {}})
    );
    assert_eq!(m["alarms"], json!([]));

    // The other tenant counts only its own.
    let other = metrics("agent").await;
    assert_eq!(other["delivery"]["summary"], json!({}));
    assert_eq!(other["delivery"]["ack_success_ratio"], 1.0);
    assert_eq!(
        other["audit"],
        json!({"event_counts": {"continuity.messages.send": 1}, "peer_counts": {"agent": 1}})
    );
    assert_eq!(other["security"]["verification_failures_recent"], 0);

    // The original's checks: its scope, then the namespaces of its two sources.
    let err = h.continuity.metrics(&a).await.unwrap_err();
    assert_eq!(
        refusal(&err),
        (403, r#"{"detail":"Missing scope: read:index"}"#.to_owned())
    );
    let narrow = caller_with("agent:a", &["read:index"], &["messages"], &[]);
    let err = h.continuity.metrics(&narrow).await.unwrap_err();
    assert_eq!(
        refusal(&err),
        (
            403,
            r#"{"detail":"Read path namespace not allowed: logs/api_audit.jsonl"}"#.to_owned()
        )
    );
}

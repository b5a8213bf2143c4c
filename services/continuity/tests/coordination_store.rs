//! Coordination (peers, handoffs, shared artifacts, reconciliations), store conformance
//! through the operations layer: every case runs on SQLite and on Postgres (scripts/test
//! provides them; a missing backend fails).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use std::sync::Arc;

use noema_continuity::domain::access::Caller;
use noema_core::scopes::Principal;
use noema_store::sql::query;
use noema_store::with_pool;
use serde_json::{Value, json};
use support::*;

conformance!(
    artifacts_are_per_tenant_and_audited,
    concurrent_shared_updates_at_one_version_one_wins,
    concurrent_trust_transitions_keep_every_history_entry,
);

/// A member `peer` of `tenant` with `scopes` and every namespace.
fn member(tenant: &str, peer: &str, scopes: &[&str]) -> Caller {
    Caller::resolve(
        Principal {
            token_id: format!("tok-{peer}"),
            peer_id: peer.to_owned(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            read_namespaces: vec!["*".to_owned()],
            write_namespaces: vec!["*".to_owned()],
            superuser: false,
            tenant: tenant.to_owned(),
        },
        None,
    )
    .unwrap()
}

fn rw(tenant: &str, peer: &str) -> Caller {
    member(tenant, peer, &["continuity:read", "continuity:write"])
}

fn admin(tenant: &str) -> Caller {
    member(
        tenant,
        "lead",
        &["continuity:admin", "continuity:read", "continuity:write"],
    )
}

async fn register(h: &Harness, tenant: &str, peers: &[&str]) {
    for peer in peers {
        h.continuity
            .register_peer(
                &admin(tenant),
                &body(json!({"peer_id": peer, "base_url": format!("http://{peer}")})),
            )
            .await
            .unwrap();
    }
}

async fn audit_count(h: &Harness, action: &str) -> i64 {
    let (n,): (i64,) = with_pool!(&h.db, |pool| {
        query("SELECT COUNT(*) FROM audit_log WHERE action = $1")
            .bind(action)
            .fetch_one(pool)
            .await
            .unwrap()
    });
    n
}

async fn artifacts_are_per_tenant_and_audited(backend: Backend) {
    let h = harness(backend).await;
    register(&h, "team", &["alice", "bob"]).await;
    register(&h, "other", &["alice", "bob"]).await;
    let alice = rw("team", "alice");
    h.continuity
        .upsert(&alice, &upsert("user", "alice", &at(1), &["ship"]))
        .await
        .unwrap();
    let created = parse(
        &h.continuity
            .create_handoff(
                &alice,
                &body(
                    json!({"recipient_peer": "bob", "subject_kind": "user", "subject_id": "alice"}),
                ),
            )
            .await
            .unwrap(),
    );
    let id = created["handoff"]["handoff_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        created["handoff"]["shared_continuity"]["active_constraints"],
        json!(["stay small"])
    );
    assert_eq!(
        audit_count(&h, "continuity.coordination.handoff_create").await,
        1
    );
    assert_eq!(audit_count(&h, "continuity.peers.register").await, 4);

    // The same peer names in another tenant see nothing of it.
    let elsewhere = rw("other", "bob");
    let err = h
        .continuity
        .read_handoff(&elsewhere, &id)
        .await
        .unwrap_err();
    assert_eq!(
        refusal(&err),
        (404, r#"{"detail":"Handoff artifact not found"}"#.to_owned())
    );
    let found = parse(
        &h.continuity
            .query_handoffs(&elsewhere, &body(json!({"recipient_peer": "bob"})))
            .await
            .unwrap(),
    );
    assert_eq!(found["total_matches"], 0);
    let err = h
        .continuity
        .consume_handoff(&elsewhere, &id, &body(json!({"status": "rejected"})))
        .await
        .unwrap_err();
    assert_eq!(refusal(&err).0, 404);

    // Consumed by its recipient: one audited write; a replay writes nothing.
    let bob = rw("team", "bob");
    for _ in 0..2 {
        h.continuity
            .consume_handoff(&bob, &id, &body(json!({"status": "deferred"})))
            .await
            .unwrap();
    }
    assert_eq!(
        audit_count(&h, "continuity.coordination.handoff_consume").await,
        1
    );
    let read = parse(&h.continuity.read_handoff(&bob, &id).await.unwrap());
    assert_eq!(read["handoff"]["recipient_status"], "deferred");

    // The peer registry is per tenant too.
    h.continuity
        .transition_peer(
            &admin("other"),
            "bob",
            &body(json!({"trust_level": "untrusted", "reason": "elsewhere only"})),
        )
        .await
        .unwrap();
    let peers = parse(&h.continuity.list_peers(&alice).await.unwrap());
    assert_eq!(peers["peers"][1]["trust_level"], "restricted");
}

async fn concurrent_shared_updates_at_one_version_one_wins(backend: Backend) {
    let h = Arc::new(harness(backend).await);
    register(&h, "team", &["alice", "bob"]).await;
    let alice = rw("team", "alice");
    let created = parse(
        &h.continuity
            .create_shared(
                &alice,
                &body(json!({"participant_peers": ["bob"], "title": "Plan", "constraints": ["c"]})),
            )
            .await
            .unwrap(),
    );
    let id = created["shared"]["shared_id"].as_str().unwrap().to_owned();
    let mut handles = Vec::new();
    for n in 0..6 {
        let h = Arc::clone(&h);
        let id = id.clone();
        handles.push(tokio::spawn(async move {
            let update = body(json!({"expected_version": 1, "title": format!("Plan {n}"),
                                     "constraints": [format!("c{n}")]}));
            h.continuity
                .update_shared(&rw("team", "alice"), &id, &update)
                .await
                .map_err(|err| refusal(&err))
        }));
    }
    let mut landed = Vec::new();
    for handle in handles {
        match handle.await.unwrap() {
            Ok(answer) => landed.push(parse(&answer)),
            Err(refused) => assert_eq!(
                refused,
                (
                    409,
                    r#"{"detail":"Shared coordination version conflict"}"#.to_owned()
                )
            ),
        }
    }
    assert_eq!(landed.len(), 1, "{landed:?}");
    let now = parse(&h.continuity.read_shared(&alice, &id).await.unwrap());
    assert_eq!(now["shared"], landed[0]["shared"]);
    assert_eq!(now["shared"]["version"], 2);
    let history = parse(&h.continuity.shared_history(&alice, &id).await.unwrap());
    assert_eq!(history["count"], 1);
    assert_eq!(history["versions"][0]["shared"], created["shared"]);
    assert_eq!(
        audit_count(&h, "continuity.coordination.shared_update").await,
        1
    );
}

async fn concurrent_trust_transitions_keep_every_history_entry(backend: Backend) {
    let h = Arc::new(harness(backend).await);
    register(&h, "team", &["bob"]).await;
    // restricted → untrusted → restricted → untrusted …: each writer moves the state it
    // reads, so every landed move must be in the history.
    let mut handles = Vec::new();
    for n in 0..4 {
        let h = Arc::clone(&h);
        handles.push(tokio::spawn(async move {
            let target = if n % 2 == 0 {
                "untrusted"
            } else {
                "restricted"
            };
            h.continuity
                .transition_peer(
                    &admin("team"),
                    "bob",
                    &body(json!({"trust_level": target, "reason": format!("move {n}")})),
                )
                .await
                .is_ok()
        }));
    }
    let mut landed = 0;
    for handle in handles {
        if handle.await.unwrap() {
            landed += 1;
        }
    }
    let peers = parse(&h.continuity.list_peers(&rw("team", "bob")).await.unwrap());
    let history = peers["peers"][0]["trust_history"].as_array().unwrap();
    assert_eq!(history.len(), 1 + landed, "{peers}");
    for pair in history.windows(2) {
        assert_eq!(pair[0]["to"], pair[1]["from"], "{peers}");
    }
    let last: &Value = history.last().unwrap();
    assert_eq!(peers["peers"][0]["trust_level"], last["to"]);
}

//! CogniRelay's peer registry and coordination artifacts (digest §11) over REST on every
//! shape and both backends: each state machine, each rule with the original's status and
//! message, visibility (a non-participant neither reads nor discovers an artifact; another
//! tenant sees nothing), a collaboration_peer token refused the capsule it may not read, and
//! concurrent writers at one version (exactly one wins).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_core::keys::{self, PublicKey, Signature, SigningKeyPair};
use noema_e2e::{Backend, Shape, TestCluster, client_as, cluster_cases};
use noema_proto::identity::v1::{IssueTokenRequest, RegisterAgentRequest};
use serde_json::{Value, json};

/// CogniRelay 1.4.15's answers, recorded by scripts/record-coordination-facts.
const FACTS: &str = include_str!("../facts/cognirelay_coordination_rest.json");

cluster_cases!(
    peers_and_handoffs,
    shared_and_reconciliations,
    answers_as_the_original,
    signed_writes,
);

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

    async fn post(&self, path: &str, body: Value) -> (u16, String) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
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

    /// A 200 answer, parsed.
    async fn ok(&self, path: &str, body: Value) -> Value {
        let (status, text) = self.post(path, body).await;
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    async fn ok_get(&self, path: &str) -> Value {
        let (status, text) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// A refusal: its status and `detail`.
    async fn refused(&self, path: &str, body: Value) -> (u16, Value) {
        let (status, text) = self.post(path, body).await;
        (status, detail(&text))
    }

    async fn refused_get(&self, path: &str) -> (u16, Value) {
        let (status, text) = self.get(path).await;
        (status, detail(&text))
    }
}

fn detail(text: &str) -> Value {
    serde_json::from_str::<Value>(text)
        .map(|v| v["detail"].clone())
        .unwrap_or(Value::Null)
}

/// Asserts that `keys` appear in `text` in this order (the original's key order, which
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

/// A token acting for `peer_id` in `tenant`.
async fn token(cluster: &TestCluster, tenant: &str, peer_id: &str, scopes: &[&str]) -> String {
    let mut identity = cluster.identity().await.unwrap();
    identity
        .issue_token(IssueTokenRequest {
            peer_id: peer_id.into(),
            tenant: tenant.into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            ..IssueTokenRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token
}

async fn collaborator(cluster: &TestCluster, tenant: &str, peer_id: &str) -> String {
    let mut identity = cluster.identity().await.unwrap();
    identity
        .issue_token(IssueTokenRequest {
            peer_id: peer_id.into(),
            tenant: tenant.into(),
            template: "collaboration_peer".into(),
            ..IssueTokenRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token
}

fn capsule(kind: &str, id: &str) -> Value {
    json!({
        "subject_kind": kind, "subject_id": id,
        "updated_at": "2026-01-01T00:00:00Z", "verified_at": "2026-01-01T00:00:00Z",
        "source": {"producer": "e2e", "update_reason": "manual"},
        "continuity": {
            "top_priorities": ["ship release 2"], "active_concerns": ["flaky test"],
            "active_constraints": ["no schema change", "keep the API"], "open_loops": ["pick a date"],
            "stance_summary": "Release 2 is close.", "drift_signals": ["scope creep"]
        },
        "confidence": {"continuity": 0.8, "relationship_model": 0.5}
    })
}

const PEER_KEYS: &[&str] = &[
    "peer_id",
    "base_url",
    "public_key",
    "public_key_fingerprint",
    "capabilities_url",
    "trust_level",
    "allowed_scopes",
    "created_at",
    "updated_at",
    "trust_history",
];

const HANDOFF_KEYS: &[&str] = &[
    "schema_type",
    "schema_version",
    "handoff_id",
    "created_at",
    "created_by",
    "sender_peer",
    "recipient_peer",
    "source_selector",
    "subject_kind",
    "subject_id",
    "source_summary",
    "path",
    "updated_at",
    "verified_at",
    "verification_status",
    "health_status",
    "task_id",
    "thread_id",
    "note",
    "shared_continuity",
    "active_constraints",
    "drift_signals",
    "recipient_status",
    "recipient_reason",
    "consumed_at",
    "consumed_by",
];

struct Team {
    lead: Rest,
    alice: Rest,
    bob: Rest,
    carol: Rest,
    stranger: Rest,
}

async fn team(cluster: &TestCluster) -> Team {
    let rw = ["continuity:read", "continuity:write"];
    Team {
        lead: Rest::new(
            cluster,
            &token(
                cluster,
                "team",
                "lead",
                &["continuity:read", "continuity:write", "continuity:admin"],
            )
            .await,
        ),
        alice: Rest::new(cluster, &token(cluster, "team", "alice", &rw).await),
        bob: Rest::new(cluster, &token(cluster, "team", "bob", &rw).await),
        carol: Rest::new(cluster, &token(cluster, "team", "carol", &rw).await),
        // The same peer name in another tenant: it sees nothing of `team`.
        stranger: Rest::new(cluster, &token(cluster, "elsewhere", "bob", &rw).await),
    }
}

async fn peers_and_handoffs(cluster: &TestCluster) {
    let t = team(cluster).await;

    // The registry starts empty; registering needs admin.
    assert_eq!(
        t.alice.get("/v1/peers").await,
        (
            200,
            r#"{"ok":true,"count":0,"peers":[],"updated_at":null}"#.to_owned()
        )
    );
    let (status, _) = t
        .alice
        .post(
            "/v1/peers/register",
            json!({"peer_id": "bob", "base_url": "http://bob"}),
        )
        .await;
    assert_eq!(status, 403);

    let (status, text) = t
        .lead
        .post(
            "/v1/peers/register",
            json!({"peer_id": "bob", "base_url": "http://bob", "allowed_scopes": ["read:files"]}),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    in_order(&text, &["ok", "peer"]);
    in_order(&text, PEER_KEYS);
    in_order(
        &text,
        &["trust_history", "created", "committed", "latest_commit"],
    );
    let bob: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(bob["created"], true);
    assert_eq!(bob["peer"]["trust_level"], "restricted");
    assert_eq!(bob["peer"]["capabilities_url"], "/v1/manifest");
    assert_eq!(bob["peer"]["trust_history"][0]["reason"], "register_update");
    assert_eq!(bob["peer"]["trust_history"][0]["by"], "lead");
    for peer in ["carol", "alice"] {
        t.lead
            .ok(
                "/v1/peers/register",
                json!({"peer_id": peer, "base_url": format!("http://{peer}")}),
            )
            .await;
    }
    // Registering again updates the record; a trust move on it needs a reason.
    let again = t
        .lead
        .ok(
            "/v1/peers/register",
            json!({"peer_id": "alice", "base_url": "http://alice-2", "public_key": "pk-alice"}),
        )
        .await;
    assert_eq!(again["created"], false);
    assert_eq!(
        again["peer"]["public_key_fingerprint"],
        format!("sha256:{}", noema_core::content_id::sha256_hex(b"pk-alice"))
    );
    let register_refusals = [
        (
            json!({"peer_id": "alice", "base_url": "u", "trust_level": "untrusted"}),
            400,
            json!("Trust transition reason is required"),
        ),
        (
            json!({"peer_id": "eve", "base_url": "u", "trust_level": "trusted"}),
            400,
            json!("public_key fingerprint is required for trusted peers"),
        ),
        (
            json!({"peer_id": "eve", "base_url": "u", "public_key": "k",
                   "expected_public_key_fingerprint": "abc"}),
            400,
            json!("public_key fingerprint mismatch"),
        ),
    ];
    for (body, status, expected) in register_refusals {
        assert_eq!(
            t.lead.refused("/v1/peers/register", body.clone()).await,
            (status, expected),
            "{body}"
        );
    }
    let (status, missing) = t
        .lead
        .refused("/v1/peers/register", json!({"peer_id": "eve"}))
        .await;
    assert_eq!(status, 422);
    assert_eq!(missing[0]["loc"], json!(["body", "base_url"]));

    // Trust transitions: the policy's moves, with the original's refusals.
    let untrusted = t
        .lead
        .ok(
            "/v1/peers/carol/trust",
            json!({"trust_level": "untrusted", "reason": "bad actor"}),
        )
        .await;
    assert_eq!(untrusted["peer"]["trust_level"], "untrusted");
    assert_eq!(
        untrusted["peer"]["trust_history"][1],
        json!({"at": untrusted["peer"]["updated_at"], "from": "restricted", "to": "untrusted",
               "reason": "bad actor", "by": "lead"})
    );
    let transition_refusals = [
        (
            "/v1/peers/carol/trust",
            json!({"trust_level": "trusted", "reason": "trust me"}),
            409,
            json!("Trust transition not allowed: untrusted -> trusted"),
        ),
        (
            "/v1/peers/nobody/trust",
            json!({"trust_level": "trusted", "reason": "trust me"}),
            404,
            json!("Peer not found: nobody"),
        ),
        (
            "/v1/peers/bob/trust",
            json!({"trust_level": "trusted", "reason": "ok!", "expected_public_key_fingerprint": "sha256:00"}),
            409,
            json!("Peer fingerprint mismatch for trust transition"),
        ),
    ];
    for (path, body, status, expected) in transition_refusals {
        assert_eq!(
            t.lead.refused(path, body.clone()).await,
            (status, expected),
            "{path} {body}"
        );
    }
    let (status, short) = t
        .lead
        .refused(
            "/v1/peers/bob/trust",
            json!({"trust_level": "trusted", "reason": "x"}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(short[0]["type"], "string_too_short");
    let listed = t.bob.ok_get("/v1/peers").await;
    assert_eq!(listed["count"], 3);
    let ids: Vec<&str> = listed["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["peer_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alice", "bob", "carol"]);
    assert_eq!(listed["updated_at"], untrusted["peer"]["updated_at"]);
    // Another tenant's registry is its own.
    assert_eq!(t.stranger.ok_get("/v1/peers").await["count"], 0);

    // Handoffs: from an active capsule the sender may read, to a registered, trusted peer.
    t.alice
        .ok(
            "/v1/continuity/upsert",
            json!({"subject_kind": "user", "subject_id": "alice-notes",
                   "capsule": capsule("user", "alice-notes")}),
        )
        .await;
    let create = |recipient: &str| {
        json!({"recipient_peer": recipient, "subject_kind": "user", "subject_id": "alice-notes",
               "task_id": "t-1", "note": "over to you"})
    };
    let create_refusals = [
        (create("zed"), 404, json!("Peer not found: zed")),
        (create("carol"), 409, json!("Peer is untrusted: carol")),
        (
            json!({"recipient_peer": "bob", "subject_kind": "user", "subject_id": "nobody"}),
            404,
            json!("Continuity capsule not found"),
        ),
        (
            json!({"recipient_peer": "bob", "subject_kind": "user", "subject_id": "alice-notes",
                   "commit_message": "x".repeat(121)}),
            400,
            json!("Value too long in coordination_handoff.commit_message"),
        ),
    ];
    for (body, status, expected) in create_refusals {
        assert_eq!(
            t.alice
                .refused("/v1/coordination/handoff/create", body.clone())
                .await,
            (status, expected),
            "{body}"
        );
    }
    let (status, invalid) = t
        .alice
        .refused(
            "/v1/coordination/handoff/create",
            json!({"recipient_peer": "bob", "subject_kind": "team", "subject_id": "x"}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(invalid[0]["type"], "literal_error");

    let (status, text) = t
        .alice
        .post("/v1/coordination/handoff/create", create("bob"))
        .await;
    assert_eq!(status, 200, "{text}");
    in_order(&text, &["ok", "handoff"]);
    in_order(&text, HANDOFF_KEYS);
    in_order(&text, &["consumed_by", "path", "created", "latest_commit"]);
    let created: Value = serde_json::from_str(&text).unwrap();
    let handoff = created["handoff"].clone();
    let id = handoff["handoff_id"].as_str().unwrap().to_owned();
    assert!(
        id.strip_prefix("handoff_")
            .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())),
        "{id}"
    );
    assert_eq!(
        created["path"],
        format!("memory/coordination/handoffs/{id}.json")
    );
    assert_eq!(created["created"], true);
    assert!(
        created["latest_commit"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(
        (
            handoff["sender_peer"].clone(),
            handoff["created_by"].clone(),
            handoff["recipient_peer"].clone()
        ),
        (json!("alice"), json!("alice"), json!("bob"))
    );
    assert_eq!(
        handoff["source_summary"],
        json!({"path": "memory/continuity/user-alice-notes.json",
               "updated_at": "2026-01-01T00:00:00Z", "verified_at": "2026-01-01T00:00:00Z",
               "verification_status": "unverified", "health_status": "healthy"})
    );
    assert_eq!(
        handoff["shared_continuity"],
        json!({"active_constraints": ["no schema change", "keep the API"],
               "drift_signals": ["scope creep"]})
    );
    assert_eq!(
        (
            handoff["task_id"].clone(),
            handoff["thread_id"].clone(),
            handoff["note"].clone(),
            handoff["recipient_status"].clone()
        ),
        (
            json!("t-1"),
            Value::Null,
            json!("over to you"),
            json!("pending")
        )
    );

    // Digest §16 fixed: a collaboration_peer token may write handoffs but not read the
    // capsule, so it may not project it.
    let collab = Rest::new(cluster, &collaborator(cluster, "team", "alice").await);
    assert_eq!(
        collab
            .refused("/v1/coordination/handoff/create", create("bob"))
            .await,
        (
            403,
            json!("Read path namespace not allowed: memory/continuity/user-alice-notes.json")
        )
    );

    // Reads: sender, recipient, admin; not a bystander; nothing in another tenant.
    let one = format!("/v1/coordination/handoff/{id}");
    for reader in [&t.alice, &t.bob, &t.lead] {
        let (status, text) = reader.get(&one).await;
        assert_eq!(status, 200, "{text}");
        in_order(&text, &["ok", "handoff", "path"]);
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap()["handoff"],
            handoff
        );
    }
    assert_eq!(
        t.carol.refused_get(&one).await,
        (403, json!("Handoff artifact not visible to caller"))
    );
    assert_eq!(
        t.stranger.refused_get(&one).await,
        (404, json!("Handoff artifact not found"))
    );
    assert_eq!(
        t.bob
            .refused_get("/v1/coordination/handoff/handoff_nope")
            .await,
        (404, json!("Handoff artifact not found"))
    );

    // Queries: one's own identity (or admin), newest first, counted before paging.
    let mut ids = vec![id.clone()];
    for _ in 0..2 {
        let more = t
            .alice
            .ok("/v1/coordination/handoff/create", create("bob"))
            .await;
        ids.push(more["handoff"]["handoff_id"].as_str().unwrap().to_owned());
    }
    let all = t
        .alice
        .ok_get("/v1/coordination/handoffs/query?sender_peer=alice")
        .await;
    assert_eq!(
        (all["count"].clone(), all["total_matches"].clone()),
        (json!(3), json!(3))
    );
    assert_eq!(all["warnings"], json!([]));
    let listed: Vec<String> = all["handoffs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["handoff_id"].as_str().unwrap().to_owned())
        .collect();
    let mut expected = ids.clone();
    // Newest first; handoffs created within one second are ordered by id.
    expected.sort_by(|a, b| {
        let at = |id: &str| {
            all["handoffs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["handoff_id"] == id)
                .unwrap()["created_at"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        at(b).cmp(&at(a)).then_with(|| a.cmp(b))
    });
    assert_eq!(listed, expected);
    let (status, text) = t
        .alice
        .get("/v1/coordination/handoffs/query?sender_peer=alice&offset=1&limit=1")
        .await;
    assert_eq!(status, 200, "{text}");
    in_order(
        &text,
        &["ok", "count", "total_matches", "warnings", "handoffs"],
    );
    let page: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (page["count"].clone(), page["total_matches"].clone()),
        (json!(1), json!(3))
    );
    assert_eq!(page["handoffs"][0]["handoff_id"], expected[1].as_str());
    assert_eq!(
        t.bob
            .ok_get("/v1/coordination/handoffs/query?recipient_peer=bob&status=pending")
            .await["total_matches"],
        3
    );
    assert_eq!(
        t.lead
            .ok_get("/v1/coordination/handoffs/query?sender_peer=alice&recipient_peer=bob")
            .await["total_matches"],
        3
    );
    assert_eq!(
        t.carol
            .ok_get("/v1/coordination/handoffs/query?recipient_peer=carol")
            .await["total_matches"],
        0
    );
    assert_eq!(
        t.stranger
            .ok_get("/v1/coordination/handoffs/query?recipient_peer=bob")
            .await["total_matches"],
        0
    );
    let query_refusals = [
        (
            "/v1/coordination/handoffs/query?sender_peer=alice",
            &t.bob,
            403,
            json!("Non-admin callers may query only their own handoff identity"),
        ),
        (
            "/v1/coordination/handoffs/query?recipient_peer=bob&sender_peer=alice",
            &t.carol,
            403,
            json!("Non-admin callers may query only their own handoff identity"),
        ),
        (
            "/v1/coordination/handoffs/query",
            &t.bob,
            400,
            json!("recipient_peer or sender_peer is required"),
        ),
    ];
    for (path, who, status, expected) in query_refusals {
        assert_eq!(who.refused_get(path).await, (status, expected), "{path}");
    }
    let (status, limit) = t
        .bob
        .refused_get("/v1/coordination/handoffs/query?recipient_peer=bob&limit=0")
        .await;
    assert_eq!(status, 422);
    assert_eq!(limit[0]["loc"], json!(["query", "limit"]));

    // Consume: the recipient only, once; the same outcome again is a replay.
    let consume = format!("/v1/coordination/handoff/{id}/consume");
    assert_eq!(
        t.alice
            .refused(&consume, json!({"status": "accepted_advisory"}))
            .await,
        (
            403,
            json!("Only the intended recipient may consume this handoff")
        )
    );
    assert_eq!(
        t.bob
            .refused(
                "/v1/coordination/handoff/handoff_xyz/consume",
                json!({"status": "accepted_advisory"})
            )
            .await,
        (400, json!("Invalid handoff artifact id"))
    );
    assert_eq!(
        t.stranger
            .refused(&consume, json!({"status": "accepted_advisory"}))
            .await,
        (404, json!("Handoff artifact not found"))
    );
    let (status, text) = t
        .bob
        .post(
            &consume,
            json!({"status": "accepted_advisory", "reason": "on it"}),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    in_order(
        &text,
        &["ok", "handoff", "path", "updated", "latest_commit"],
    );
    let consumed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(consumed["updated"], true);
    assert_eq!(consumed["handoff"]["recipient_status"], "accepted_advisory");
    assert_eq!(consumed["handoff"]["recipient_reason"], "on it");
    assert_eq!(consumed["handoff"]["consumed_by"], "bob");
    assert!(consumed["handoff"]["consumed_at"].is_string());
    assert_ne!(consumed["latest_commit"], created["latest_commit"]);
    let replay = t
        .bob
        .ok(
            &consume,
            json!({"status": "accepted_advisory", "reason": "on it"}),
        )
        .await;
    assert_eq!(replay["updated"], false);
    assert_eq!(replay["handoff"], consumed["handoff"]);
    assert_eq!(replay["latest_commit"], consumed["latest_commit"]);
    assert_eq!(
        t.bob.refused(&consume, json!({"status": "rejected"})).await,
        (409, json!("Handoff has already been consumed"))
    );
    assert_eq!(
        t.bob
            .ok_get("/v1/coordination/handoffs/query?recipient_peer=bob&status=pending")
            .await["total_matches"],
        2
    );

    // Two consumes racing on one pending handoff: exactly one lands.
    let racing = format!("/v1/coordination/handoff/{}/consume", ids[1]);
    let (first, second) = tokio::join!(
        t.bob.post(&racing, json!({"status": "deferred"})),
        t.bob.post(&racing, json!({"status": "rejected"})),
    );
    let mut statuses = [first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{first:?} {second:?}");
}

const SHARED_KEYS: &[&str] = &[
    "schema_type",
    "schema_version",
    "shared_id",
    "created_at",
    "updated_at",
    "created_by",
    "owner_peer",
    "participant_peers",
    "task_id",
    "thread_id",
    "title",
    "summary",
    "shared_state",
    "constraints",
    "drift_signals",
    "coordination_alerts",
    "version",
    "last_updated_by",
];

const RECONCILIATION_KEYS: &[&str] = &[
    "schema_type",
    "schema_version",
    "reconciliation_id",
    "created_at",
    "updated_at",
    "opened_by",
    "owner_peer",
    "participant_peers",
    "task_id",
    "thread_id",
    "title",
    "summary",
    "classification",
    "trigger",
    "claims",
    "source_kind",
    "source_id",
    "claimant_peer",
    "claim_summary",
    "epistemic_status",
    "evidence_refs",
    "observed_version",
    "status",
    "resolution_outcome",
    "resolution_summary",
    "resolved_at",
    "resolved_by",
    "version",
    "last_updated_by",
];

/// Registers alice, bob and carol (restricted) and dave (untrusted).
async fn registry(t: &Team) {
    for peer in ["alice", "bob", "carol", "dave"] {
        t.lead
            .ok(
                "/v1/peers/register",
                json!({"peer_id": peer, "base_url": format!("http://{peer}")}),
            )
            .await;
    }
    t.lead
        .ok(
            "/v1/peers/dave/trust",
            json!({"trust_level": "untrusted", "reason": "compromised"}),
        )
        .await;
}

async fn shared_and_reconciliations(cluster: &TestCluster) {
    let t = team(cluster).await;
    registry(&t).await;

    // Shared artifacts: created by their owner for registered, trusted participants.
    let shared = |participants: Value| {
        json!({"participant_peers": participants, "task_id": "t-1", "title": "Release plan",
               "constraints": ["no schema change"], "coordination_alerts": ["freeze friday"]})
    };
    let create_refusals = [
        (
            shared(json!(["alice"])),
            400,
            json!("participant_peers must not include owner_peer"),
        ),
        (
            shared(json!(["bob", "bob"])),
            400,
            json!("participant_peers must not contain duplicates"),
        ),
        (shared(json!(["zed"])), 404, json!("Peer not found: zed")),
        // Each participant in turn, as the original checks them.
        (
            shared(json!(["zed", "alice"])),
            404,
            json!("Peer not found: zed"),
        ),
        (
            shared(json!(["bob", "alice"])),
            400,
            json!("participant_peers must not include owner_peer"),
        ),
        (
            shared(json!(["dave"])),
            409,
            json!("Peer is untrusted: dave"),
        ),
        (
            json!({"participant_peers": ["bob"], "title": "Empty"}),
            400,
            json!("Shared coordination state must include at least one shared item"),
        ),
        (
            json!({"participant_peers": ["bob"], "title": "", "constraints": ["c"]}),
            400,
            json!("Value too short in coordination_shared.title"),
        ),
        (
            json!({"participant_peers": ["bob"], "title": "T", "constraints": ["x".repeat(161)]}),
            400,
            json!("Value too long in coordination_shared.constraints"),
        ),
    ];
    for (body, status, expected) in create_refusals {
        assert_eq!(
            t.alice
                .refused("/v1/coordination/shared/create", body.clone())
                .await,
            (status, expected),
            "{body}"
        );
    }
    let (status, empty) = t
        .alice
        .refused("/v1/coordination/shared/create", shared(json!([])))
        .await;
    assert_eq!(status, 422);
    assert_eq!(empty[0]["type"], "too_short");
    // Left out, the list is required (the original stores nothing either: it defaults the
    // list to [] unchecked and fails building the artifact, with a 500).
    let (status, left_out) = t
        .alice
        .refused(
            "/v1/coordination/shared/create",
            json!({"title": "T", "constraints": ["c"]}),
        )
        .await;
    assert_eq!(
        (status, &left_out[0]["type"], &left_out[0]["loc"]),
        (
            422,
            &json!("missing"),
            &json!(["body", "participant_peers"])
        )
    );

    let (status, text) = t
        .alice
        .post("/v1/coordination/shared/create", shared(json!(["bob"])))
        .await;
    assert_eq!(status, 200, "{text}");
    in_order(&text, &["ok", "shared"]);
    in_order(&text, SHARED_KEYS);
    in_order(
        &text,
        &["last_updated_by", "path", "created", "latest_commit"],
    );
    let created: Value = serde_json::from_str(&text).unwrap();
    let artifact = created["shared"].clone();
    let sid = artifact["shared_id"].as_str().unwrap().to_owned();
    assert!(sid.starts_with("shared_") && sid.len() == 39, "{sid}");
    assert_eq!(
        created["path"],
        format!("memory/coordination/shared/{sid}.json")
    );
    assert_eq!(
        (
            artifact["owner_peer"].clone(),
            artifact["participant_peers"].clone(),
            artifact["version"].clone(),
            artifact["summary"].clone()
        ),
        (json!("alice"), json!(["bob"]), json!(1), Value::Null)
    );
    assert_eq!(
        artifact["shared_state"],
        json!({"constraints": ["no schema change"], "drift_signals": [],
               "coordination_alerts": ["freeze friday"]})
    );

    // Reads: owner, participant, admin; a bystander is refused; another tenant finds nothing.
    let one = format!("/v1/coordination/shared/{sid}");
    for reader in [&t.alice, &t.bob, &t.lead] {
        assert_eq!(reader.ok_get(&one).await["shared"], artifact);
    }
    assert_eq!(
        t.carol.refused_get(&one).await,
        (
            403,
            json!("Shared coordination artifact not visible to caller")
        )
    );
    assert_eq!(
        t.stranger.refused_get(&one).await,
        (404, json!("Shared coordination artifact not found"))
    );
    assert_eq!(
        t.bob
            .refused_get("/v1/coordination/shared/shared_nope")
            .await,
        (400, json!("Invalid shared coordination artifact id"))
    );

    // Updates: the owner only, at the version it read; the old version is kept.
    let update = format!("/v1/coordination/shared/{sid}/update");
    let change = |version: i64, title: &str| {
        json!({"expected_version": version, "title": title, "summary": "now with drift",
               "drift_signals": ["scope creep"]})
    };
    assert_eq!(
        t.bob.refused(&update, change(1, "Bob's plan")).await,
        (
            403,
            json!("Only the owner may update this shared coordination artifact")
        )
    );
    assert_eq!(
        t.alice.refused(&update, change(2, "Too new")).await,
        (409, json!("Shared coordination version conflict"))
    );
    let (status, extra) = t
        .alice
        .refused(
            &update,
            json!({"expected_version": 1, "title": "T", "constraints": ["c"], "owner_peer": "bob"}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(extra[0]["type"], "extra_forbidden");
    let (status, text) = t.alice.post(&update, change(1, "Release plan v2")).await;
    assert_eq!(status, 200, "{text}");
    in_order(
        &text,
        &[
            "ok",
            "shared",
            "path",
            "updated",
            "latest_commit",
            "warnings",
        ],
    );
    let updated: Value = serde_json::from_str(&text).unwrap();
    let v2 = updated["shared"].clone();
    assert_eq!(
        (
            v2["version"].clone(),
            v2["title"].clone(),
            v2["summary"].clone(),
            v2["created_at"].clone()
        ),
        (
            json!(2),
            json!("Release plan v2"),
            json!("now with drift"),
            artifact["created_at"].clone()
        )
    );
    assert_eq!(
        v2["shared_state"],
        json!({"constraints": [], "drift_signals": ["scope creep"], "coordination_alerts": []})
    );
    assert_eq!(updated["warnings"], json!([]));
    let history = t.bob.ok_get(&format!("{one}/history")).await;
    assert_eq!(history["current_version"], 2);
    assert_eq!(history["count"], 1);
    assert_eq!(history["versions"][0]["version"], 1);
    assert_eq!(history["versions"][0]["shared"], artifact);
    assert_eq!(
        history["versions"][0]["latest_commit"],
        created["latest_commit"]
    );
    assert_eq!(t.carol.refused_get(&format!("{one}/history")).await.0, 403);

    // Two updates at one version: exactly one lands, the other is told the version moved.
    let (first, second) = tokio::join!(
        t.alice.post(&update, change(2, "Racer one")),
        t.alice.post(&update, change(2, "Racer two")),
    );
    let mut statuses = [first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{first:?} {second:?}");
    let loser = if first.0 == 409 { &first.1 } else { &second.1 };
    assert_eq!(detail(loser), json!("Shared coordination version conflict"));
    let now = t.alice.ok_get(&one).await["shared"].clone();
    assert_eq!(now["version"], 3);
    assert_eq!(t.alice.ok_get(&format!("{one}/history")).await["count"], 2);

    // Queries: the caller's own identity (or admin).
    for (who, path, total) in [
        (
            &t.alice,
            "/v1/coordination/shared/query?owner_peer=alice",
            1,
        ),
        (
            &t.bob,
            "/v1/coordination/shared/query?participant_peer=bob",
            1,
        ),
        (
            &t.bob,
            "/v1/coordination/shared/query?participant_peer=bob&task_id=t-2",
            0,
        ),
        (&t.lead, "/v1/coordination/shared/query?task_id=t-1", 1),
        (
            &t.carol,
            "/v1/coordination/shared/query?participant_peer=carol",
            0,
        ),
        (
            &t.stranger,
            "/v1/coordination/shared/query?participant_peer=bob",
            0,
        ),
    ] {
        let (status, text) = who.get(path).await;
        assert_eq!(status, 200, "{path}: {text}");
        in_order(
            &text,
            &[
                "ok",
                "count",
                "total_matches",
                "warnings",
                "shared_artifacts",
            ],
        );
        let found: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(found["total_matches"], total, "{path}: {text}");
    }
    for (who, path, status, expected) in [
        (
            &t.bob,
            "/v1/coordination/shared/query?owner_peer=alice",
            403,
            json!("Non-admin callers must include their own shared coordination identity"),
        ),
        (
            &t.carol,
            "/v1/coordination/shared/query?task_id=t-1",
            403,
            json!("Non-admin callers must include their own shared coordination identity"),
        ),
        (
            &t.bob,
            "/v1/coordination/shared/query?participant_peer=bob&owner_peer=alice",
            403,
            json!("Non-admin callers may query only their own shared coordination identity"),
        ),
    ] {
        assert_eq!(who.refused_get(path).await, (status, expected), "{path}");
    }
    // Recorded from CogniRelay 1.4.15: pydantic's report of the query model's validator.
    assert_eq!(
        t.bob.refused_get("/v1/coordination/shared/query").await,
        (
            400,
            json!(
                "Invalid shared coordination query: 1 validation error for CoordinationSharedQueryRequest\n  Value error, owner_peer, participant_peer, task_id, or thread_id is required [type=value_error, input_value={'owner_peer': None, 'par...offset': 0, 'limit': 20}, input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.14/v/value_error"
            )
        )
    );

    // Recorded from CogniRelay 1.4.15: filters over 200 characters, each in field order,
    // on the shared and reconciliation queries as on the handoff query.
    let long = "o".repeat(201);
    let too_long = |field: &str| {
        format!(
            "{field}\n  String should have at most 200 characters [type=string_too_long, input_value='oooooooooooooooooooooooo...ooooooooooooooooooooooo', input_type=str]\n    For further information visit https://errors.pydantic.dev/2.14/v/string_too_long"
        )
    };
    assert_eq!(
        t.bob
            .refused_get(&format!(
                "/v1/coordination/shared/query?task_id={long}&owner_peer={long}"
            ))
            .await,
        (
            400,
            json!(format!(
                "Invalid shared coordination query: 2 validation errors for CoordinationSharedQueryRequest\n{}\n{}",
                too_long("owner_peer"),
                too_long("task_id")
            ))
        )
    );
    assert_eq!(
        t.bob
            .refused_get(&format!(
                "/v1/coordination/reconciliations/query?claimant_peer={long}&status=open"
            ))
            .await,
        (
            400,
            json!(format!(
                "Invalid reconciliation query: 1 validation error for CoordinationReconciliationQueryRequest\n{}",
                too_long("claimant_peer")
            ))
        )
    );

    // Reconciliations over a handoff and the shared artifact.
    t.alice
        .ok(
            "/v1/continuity/upsert",
            json!({"subject_kind": "thread", "subject_id": "release",
                   "capsule": capsule("thread", "release")}),
        )
        .await;
    let handoff = t
        .alice
        .ok(
            "/v1/coordination/handoff/create",
            json!({"recipient_peer": "bob", "subject_kind": "thread", "subject_id": "release"}),
        )
        .await["handoff"]["handoff_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let claim = |kind: &str, id: &str, claimant: &str, observed: Option<i64>| {
        let mut c = json!({"source_kind": kind, "source_id": id, "claimant_peer": claimant,
                           "claim_summary": format!("{claimant} says so"),
                           "epistemic_status": "frame_present", "evidence_refs": ["log:1"]});
        if let Some(v) = observed {
            c["observed_version"] = json!(v);
        }
        c
    };
    let open = |trigger: &str, claims: Value| {
        json!({"task_id": "t-1", "title": "Freeze or not", "classification": "contradictory",
               "trigger": trigger, "claims": claims})
    };
    let good = open(
        "handoff_vs_shared",
        json!([
            claim("handoff", &handoff, "alice", None),
            claim("shared", &sid, "bob", Some(1))
        ]),
    );
    let missing_handoff = format!("handoff_{}", "0".repeat(32));
    let open_refusals = [
        (
            &t.alice,
            open(
                "handoff_vs_handoff",
                json!([claim("handoff", &handoff, "alice", None)]),
            ),
            400,
            json!("Reconciliation must include at least two claims"),
        ),
        (
            &t.alice,
            json!({"title": "No anchor", "classification": "contradictory", "trigger": "handoff_vs_handoff",
                   "claims": [claim("handoff", &handoff, "alice", None), claim("handoff", &handoff, "bob", None)]}),
            400,
            json!("task_id or thread_id is required"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_handoff",
                json!([
                    claim("handoff", &handoff, "alice", None),
                    claim("handoff", &handoff, "alice", None)
                ]),
            ),
            400,
            json!("Reconciliation claims must be unique"),
        ),
        (
            &t.alice,
            open(
                "shared_vs_shared",
                json!([
                    claim("shared", &sid, "alice", None),
                    claim("shared", &sid, "bob", Some(1))
                ]),
            ),
            400,
            json!("observed_version is required for shared claims"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_handoff",
                json!([
                    claim("handoff", &handoff, "alice", Some(1)),
                    claim("handoff", &handoff, "bob", None)
                ]),
            ),
            400,
            json!("observed_version is not allowed for handoff claims"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_handoff",
                json!([
                    claim("handoff", &handoff, "alice", None),
                    claim("shared", &sid, "bob", Some(1))
                ]),
            ),
            400,
            json!("trigger does not match claim source kinds"),
        ),
        (
            &t.alice,
            open(
                "concurrent_mutation_race",
                json!([
                    claim("handoff", &handoff, "alice", None),
                    claim("shared", &sid, "bob", Some(1))
                ]),
            ),
            400,
            json!("trigger does not match claim source kinds"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_shared",
                json!([
                    claim("handoff", &handoff, "zed", None),
                    claim("shared", &sid, "bob", Some(1))
                ]),
            ),
            404,
            json!("Peer not found: zed"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_shared",
                json!([
                    claim("handoff", &handoff, "alice", None),
                    claim("shared", &sid, "dave", Some(1))
                ]),
            ),
            409,
            json!("Peer is untrusted: dave"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_shared",
                json!([
                    claim("handoff", &missing_handoff, "alice", None),
                    claim("shared", &sid, "bob", Some(1))
                ]),
            ),
            404,
            json!("Referenced source artifact not found"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_shared",
                json!([
                    claim("handoff", "handoff_x", "alice", None),
                    claim("shared", &sid, "bob", Some(1))
                ]),
            ),
            400,
            json!("Referenced source artifact is invalid: handoff_x"),
        ),
        (
            &t.carol,
            good.clone(),
            403,
            json!("Referenced source artifact not visible to caller"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_shared",
                json!([
                    claim("handoff", &handoff, "carol", None),
                    claim("shared", &sid, "bob", Some(1))
                ]),
            ),
            400,
            json!("Claimant peer is not recognized on referenced handoff artifact"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_shared",
                json!([
                    claim("handoff", &handoff, "alice", None),
                    claim("shared", &sid, "carol", Some(1))
                ]),
            ),
            400,
            json!("Claimant peer is not recognized on referenced shared artifact"),
        ),
        (
            &t.alice,
            open(
                "handoff_vs_shared",
                json!([
                    claim("handoff", &handoff, "alice", None),
                    claim("shared", &sid, "bob", Some(9))
                ]),
            ),
            400,
            json!("observed_version exceeds stored shared version"),
        ),
    ];
    for (who, body, status, expected) in open_refusals {
        assert_eq!(
            who.refused("/v1/coordination/reconciliation/open", body.clone())
                .await,
            (status, expected),
            "{body}"
        );
    }
    let mut extra = good.clone();
    extra["owner_peer"] = json!("bob");
    let (status, refused) = t
        .alice
        .refused("/v1/coordination/reconciliation/open", extra)
        .await;
    assert_eq!(status, 422);
    assert_eq!(refused[0]["type"], "extra_forbidden");

    let (status, text) = t
        .alice
        .post("/v1/coordination/reconciliation/open", good.clone())
        .await;
    assert_eq!(status, 200, "{text}");
    in_order(&text, &["ok", "reconciliation"]);
    in_order(&text, RECONCILIATION_KEYS);
    in_order(
        &text,
        &["last_updated_by", "path", "created", "latest_commit"],
    );
    let opened: Value = serde_json::from_str(&text).unwrap();
    let record = opened["reconciliation"].clone();
    let rid = record["reconciliation_id"].as_str().unwrap().to_owned();
    assert!(rid.starts_with("recon_") && rid.len() == 38, "{rid}");
    assert_eq!(
        opened["path"],
        format!("memory/coordination/reconciliations/{rid}.json")
    );
    assert_eq!(
        (
            record["owner_peer"].clone(),
            record["opened_by"].clone(),
            record["participant_peers"].clone(),
            record["status"].clone(),
            record["version"].clone()
        ),
        (
            json!("alice"),
            json!("alice"),
            json!(["bob"]),
            json!("open"),
            json!(1)
        )
    );
    assert_eq!(record["claims"][0]["observed_version"], Value::Null);
    assert_eq!(record["claims"][1]["observed_version"], 1);

    let one = format!("/v1/coordination/reconciliation/{rid}");
    for reader in [&t.alice, &t.bob, &t.lead] {
        assert_eq!(reader.ok_get(&one).await["reconciliation"], record);
    }
    assert_eq!(
        t.carol.refused_get(&one).await,
        (403, json!("Reconciliation artifact not visible to caller"))
    );
    assert_eq!(
        t.stranger.refused_get(&one).await,
        (404, json!("Reconciliation artifact not found"))
    );
    assert_eq!(
        t.bob
            .refused_get("/v1/coordination/reconciliation/recon_1")
            .await,
        (400, json!("Invalid reconciliation artifact id"))
    );

    // Queries.
    for (who, path, total) in [
        (
            &t.alice,
            "/v1/coordination/reconciliations/query?owner_peer=alice",
            1,
        ),
        (
            &t.bob,
            "/v1/coordination/reconciliations/query?claimant_peer=bob&status=open",
            1,
        ),
        (
            &t.bob,
            "/v1/coordination/reconciliations/query?claimant_peer=bob&status=resolved",
            0,
        ),
        (
            &t.lead,
            "/v1/coordination/reconciliations/query?classification=contradictory",
            1,
        ),
        (
            &t.carol,
            "/v1/coordination/reconciliations/query?claimant_peer=carol",
            0,
        ),
        (
            &t.stranger,
            "/v1/coordination/reconciliations/query?claimant_peer=bob",
            0,
        ),
    ] {
        let (status, text) = who.get(path).await;
        assert_eq!(status, 200, "{path}: {text}");
        in_order(
            &text,
            &[
                "ok",
                "count",
                "total_matches",
                "warnings",
                "reconciliations",
            ],
        );
        let found: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(found["total_matches"], total, "{path}: {text}");
    }
    for (who, path, status, expected) in [
        (
            &t.bob,
            "/v1/coordination/reconciliations/query?status=open",
            403,
            json!("Non-admin callers may query only their own reconciliation identity"),
        ),
        (
            &t.bob,
            "/v1/coordination/reconciliations/query?claimant_peer=bob&owner_peer=alice",
            403,
            json!("Non-admin callers may query only their own reconciliation identity"),
        ),
        (
            &t.bob,
            "/v1/coordination/reconciliations/query",
            400,
            json!("At least one reconciliation query filter is required"),
        ),
    ] {
        assert_eq!(who.refused_get(path).await, (status, expected), "{path}");
    }
    let (status, bad) = t
        .lead
        .refused_get("/v1/coordination/reconciliations/query?classification=bogus")
        .await;
    assert_eq!(status, 422);
    assert_eq!(bad[0]["loc"], json!(["query", "classification"]));

    // Resolve: owner or admin, once, at the version read; the same outcome again replays.
    let resolve = format!("{one}/resolve");
    let outcome = |version: i64, outcome: &str| json!({"expected_version": version, "outcome": outcome, "resolution_summary": "keep the freeze"});
    let resolve_refusals = [
        (
            &t.bob,
            outcome(1, "advisory_only"),
            403,
            json!("Only the owner may resolve this reconciliation artifact"),
        ),
        (
            &t.alice,
            json!({"expected_version": 1, "outcome": "advisory_only"}),
            400,
            json!("resolution_summary is required for reconciliation resolve"),
        ),
        (
            &t.alice,
            outcome(2, "advisory_only"),
            409,
            json!("Reconciliation version conflict"),
        ),
    ];
    for (who, body, status, expected) in resolve_refusals {
        assert_eq!(
            who.refused(&resolve, body.clone()).await,
            (status, expected),
            "{body}"
        );
    }
    let (status, text) = t.alice.post(&resolve, outcome(1, "advisory_only")).await;
    assert_eq!(status, 200, "{text}");
    in_order(
        &text,
        &["ok", "reconciliation", "path", "updated", "latest_commit"],
    );
    let resolved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(resolved["updated"], true);
    let after = &resolved["reconciliation"];
    assert_eq!(
        (
            after["status"].clone(),
            after["resolution_outcome"].clone(),
            after["resolution_summary"].clone(),
            after["resolved_by"].clone(),
            after["version"].clone()
        ),
        (
            json!("resolved"),
            json!("advisory_only"),
            json!("keep the freeze"),
            json!("alice"),
            json!(2)
        )
    );
    let replay = t.alice.ok(&resolve, outcome(1, "advisory_only")).await;
    assert_eq!(replay["updated"], false);
    assert_eq!(replay["reconciliation"], resolved["reconciliation"]);
    assert_eq!(
        t.alice.refused(&resolve, outcome(2, "rejected")).await,
        (409, json!("Reconciliation has already been resolved"))
    );

    // A second one, resolved by two writers at once: exactly one lands; an admin may resolve.
    let second = t
        .alice
        .ok("/v1/coordination/reconciliation/open", good.clone())
        .await["reconciliation"]["reconciliation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let racing = format!("/v1/coordination/reconciliation/{second}/resolve");
    let (first, other) = tokio::join!(
        t.alice.post(&racing, outcome(1, "conflicted")),
        t.lead.post(&racing, outcome(1, "rejected")),
    );
    let mut statuses = [first.0, other.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{first:?} {other:?}");
}

/// A body as the facts keep it: artifact ids, UTC timestamps and `latest_commit` masked (the
/// same rules as scripts/record-coordination-facts).
fn normalised(body: &str) -> String {
    let ids = regex::Regex::new(r"\b(handoff|shared|recon)_[0-9a-f]{32}\b").unwrap();
    let stamps = regex::Regex::new(r#""\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z""#).unwrap();
    let commits = regex::Regex::new(r#""latest_commit":"[^"]*""#).unwrap();
    let body = ids.replace_all(body, "${1}_<id>");
    let body = stamps.replace_all(&body, "\"<ts>\"");
    commits
        .replace_all(&body, "\"latest_commit\":\"<masked>\"")
        .into_owned()
}

/// The recorded cases replayed on Noema (a token of `peer-1` with continuity's scopes and
/// admin, as the original's all-scope token): the same status and, normalised, the same bytes.
async fn answers_as_the_original(cluster: &TestCluster) {
    let facts: Value = serde_json::from_str(FACTS).unwrap();
    let me = Rest::new(
        cluster,
        &token(
            cluster,
            "facts",
            "peer-1",
            &["continuity:read", "continuity:write", "continuity:admin"],
        )
        .await,
    );
    let placeholder = regex::Regex::new(r"\{(\w+)\}").unwrap();
    let mut captured = std::collections::HashMap::<String, String>::new();
    for case in facts["cases"].as_array().unwrap() {
        let fill = |text: &str| {
            placeholder
                .replace_all(text, |c: &regex::Captures| captured[&c[1]].clone())
                .into_owned()
        };
        let path = fill(case["path"].as_str().unwrap());
        let body = case["body"].as_str().map(fill);
        let request = match case["method"].as_str().unwrap() {
            "GET" => me.client.get(format!("{}{path}", me.base)),
            _ => me
                .client
                .post(format!("{}{path}", me.base))
                .header("content-type", "application/json")
                .body(body.unwrap_or_default()),
        };
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        if let Some(capture) = case["capture"].as_object() {
            let answer: Value = serde_json::from_str(&text).unwrap();
            for (name, pointer) in capture {
                let value = answer.pointer(pointer.as_str().unwrap()).unwrap();
                captured.insert(name.clone(), value.as_str().unwrap().to_owned());
            }
        }
        if case["setup"] == true {
            assert_eq!(status, 200, "{}: {text}", case["name"]);
            continue;
        }
        assert_eq!(
            (status, normalised(&text)),
            (
                case["status"].as_u64().unwrap() as u16,
                case["response"].as_str().unwrap().to_owned()
            ),
            "{}",
            case["name"]
        );
    }
}

/// `body` with Noema's `sender_signature` by `pair` over the JCS bytes of `body`.
fn sign(pair: &SigningKeyPair, body: &Value) -> Value {
    let message = noema_core::jcs::canonicalize(body).unwrap();
    let mut signed = body.clone();
    signed["sender_signature"] = json!({
        "public_key": pair.public_key().to_prefixed(),
        "signature": pair.sign(&message).to_base64(),
    });
    signed
}

/// `body` signed for the artifact its path names: the signature covers `{member: id, ...body}`
/// (a shared update's `shared_id`, a resolve's `reconciliation_id`); the body is sent as is.
fn sign_for(pair: &SigningKeyPair, body: &Value, member: &str, id: &str) -> Value {
    let mut covered = body.clone();
    covered[member] = json!(id);
    let mut signed = body.clone();
    signed["sender_signature"] = sign(pair, &covered)["sender_signature"].clone();
    signed
}

/// What a recipient does with a stored `sender_signature`: re-verifies it offline over the
/// JCS bytes of its `signed_body`, and returns the agent and key it names.
fn reverify(stored: &Value) -> (String, PublicKey) {
    let key = PublicKey::parse(stored["public_key"].as_str().unwrap()).unwrap();
    let signature = Signature::from_base64(stored["signature"].as_str().unwrap()).unwrap();
    let message = noema_core::jcs::canonicalize(&stored["signed_body"]).unwrap();
    assert!(keys::verify(&key, &message, &signature), "{stored}");
    assert_eq!(stored["algorithm"], "ed25519");
    assert_eq!(stored["canonicalization"], "jcs-rfc8785");
    assert_eq!(stored["fingerprint"], key.fingerprint());
    (stored["agent_id"].as_str().unwrap().to_owned(), key)
}

async fn register_agent(cluster: &TestCluster, agent_id: &str, pair: &SigningKeyPair) {
    cluster
        .identity()
        .await
        .unwrap()
        .register_agent(RegisterAgentRequest {
            agent_id: agent_id.into(),
            public_key: pair.public_key().to_prefixed(),
            first_object_id: String::new(),
        })
        .await
        .unwrap();
}

/// Peers bound to identity agents and their Ed25519-signed handoffs and shared updates
/// (Noema's, beyond the original): stored, returned, re-verifiable by a recipient; every
/// doubtful signature refused with nothing written; no new field, no new shape.
async fn signed_writes(cluster: &TestCluster) {
    let rw = ["continuity:read", "continuity:write", "identity:read"];
    let lead = Rest::new(
        cluster,
        &token(
            cluster,
            "crew",
            "lead",
            &[
                "continuity:read",
                "continuity:write",
                "continuity:admin",
                "identity:read",
            ],
        )
        .await,
    );
    let alice = Rest::new(cluster, &token(cluster, "crew", "alice", &rw).await);
    let bob = Rest::new(cluster, &token(cluster, "crew", "bob", &rw).await);
    // Alice's peer without identity:read: identity will not answer for her token.
    let alice_blind = Rest::new(
        cluster,
        &token(
            cluster,
            "crew",
            "alice",
            &["continuity:read", "continuity:write"],
        )
        .await,
    );
    let alice_key = SigningKeyPair::from_seed(&[21; 32]);
    let bob_key = SigningKeyPair::from_seed(&[22; 32]);
    let stray_key = SigningKeyPair::from_seed(&[23; 32]);
    register_agent(cluster, "agent:alice", &alice_key).await;
    register_agent(cluster, "agent:bob", &bob_key).await;
    for peer in ["alice", "bob"] {
        lead.ok(
            "/v1/peers/register",
            json!({"peer_id": peer, "base_url": format!("http://{peer}")}),
        )
        .await;
    }
    let shared_body = |title: &str| json!({"participant_peers": ["bob"], "title": title, "constraints": ["keep the API"]});
    let count = |answer: Value| answer["total_matches"].as_u64().unwrap();
    let owned = "/v1/coordination/shared/query?owner_peer=alice";

    // Without the new fields everything is the original's: no binding, no signature key.
    let (status, text) = alice
        .post("/v1/coordination/shared/create", shared_body("plain"))
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("sender_signature"), "{text}");
    let plain: Value = serde_json::from_str(&text).unwrap();
    let plain_id = plain["shared"]["shared_id"].as_str().unwrap().to_owned();
    let (status, text) = lead.get("/v1/peers").await;
    assert_eq!(status, 200);
    assert!(!text.contains("agent_binding"), "{text}");

    // A signature needs its sender's peer bound to an agent.
    assert_eq!(
        alice
            .refused(
                "/v1/coordination/shared/create",
                sign(&alice_key, &shared_body("early")),
            )
            .await,
        (
            403,
            json!(
                "Peer is not bound to an agent: alice; a signed coordination write needs its \
                 sender's peer bound to an agent (POST /v1/peers/{peer_id}/trust with agent_id)"
            )
        )
    );
    // Binding checks the agent in identity.
    assert_eq!(
        lead.refused(
            "/v1/peers/alice/trust",
            json!({"trust_level": "restricted", "reason": "bind", "agent_id": "agent:nobody"}),
        )
        .await,
        (
            400,
            json!("agent_id agent:nobody is not an agent registered in identity")
        )
    );
    let bound = lead
        .ok(
            "/v1/peers/alice/trust",
            json!({"trust_level": "restricted", "reason": "bind", "agent_id": "agent:alice"}),
        )
        .await;
    assert_eq!(bound["peer"]["agent_binding"]["agent_id"], "agent:alice");
    assert_eq!(
        bound["peer"]["agent_binding"]["require_signed_writes"],
        false
    );
    assert_eq!(bound["peer"]["trust_level"], "restricted");
    lead.ok(
        "/v1/peers/bob/trust",
        json!({"trust_level": "restricted", "reason": "bind", "agent_id": "agent:bob"}),
    )
    .await;

    // A valid signature: stored with the artifact, returned to a participant, re-verifiable.
    let body = shared_body("signed plan");
    let created = alice
        .ok("/v1/coordination/shared/create", sign(&alice_key, &body))
        .await;
    let stored = &created["shared"]["sender_signature"];
    assert_eq!(stored["signed_body"], body);
    let (agent, key) = reverify(stored);
    assert_eq!(agent, "agent:alice");
    assert_eq!(key, alice_key.public_key());
    let id = created["shared"]["shared_id"].as_str().unwrap().to_owned();
    let read = bob.ok_get(&format!("/v1/coordination/shared/{id}")).await;
    assert_eq!(&read["shared"]["sender_signature"], stored);
    assert_eq!(count(alice.ok_get(owned).await), 2);

    // Every doubtful signature is refused and writes nothing.
    let mut tampered = sign(&alice_key, &body);
    tampered["title"] = json!("another plan");
    let mut malformed = sign(&alice_key, &body);
    malformed["sender_signature"]["signature"] = json!("not base64!");
    let not_verifying = json!(
        "sender_signature does not verify: it must be an Ed25519 signature by public_key over \
         the JCS (RFC 8785) bytes of the request body without sender_signature (for a shared \
         update or a reconciliation resolve, with the path's shared_id or reconciliation_id \
         added)"
    );
    let not_registered = json!(
        "sender_signature refused: public_key is not the registered key of agent agent:alice"
    );
    let refusals = [
        (&alice, tampered, 400, Some(not_verifying.clone())),
        (&alice, malformed, 400, None),
        (
            &alice,
            sign(&stray_key, &body),
            403,
            Some(not_registered.clone()),
        ),
        (&alice, sign(&bob_key, &body), 403, Some(not_registered)),
        (&alice_blind, sign(&alice_key, &body), 403, None),
    ];
    for (who, request, status, expected) in refusals {
        let (got, detail) = who
            .refused("/v1/coordination/shared/create", request.clone())
            .await;
        assert_eq!(got, status, "{request}: {detail}");
        if let Some(expected) = expected {
            assert_eq!(detail, expected, "{request}");
        }
    }
    let (_, blind) = alice_blind
        .refused("/v1/coordination/shared/create", sign(&alice_key, &body))
        .await;
    assert!(
        blind
            .as_str()
            .unwrap()
            .starts_with("identity refused to verify sender_signature for this token"),
        "{blind}"
    );
    assert_eq!(count(alice.ok_get(owned).await), 2);

    // A binding may require signed writes: an unsigned one is then refused.
    let strict = lead
        .ok(
            "/v1/peers/alice/trust",
            json!({"trust_level": "restricted", "reason": "strict", "require_signed_writes": true}),
        )
        .await;
    assert_eq!(
        strict["peer"]["agent_binding"]["require_signed_writes"],
        true
    );
    let update =
        json!({"expected_version": 1, "title": "signed plan v2", "constraints": ["keep it"]});
    assert_eq!(
        alice
            .refused(
                &format!("/v1/coordination/shared/{id}/update"),
                update.clone()
            )
            .await,
        (
            403,
            json!("Peer requires signed coordination writes: alice; send sender_signature")
        )
    );
    assert_eq!(
        alice
            .refused("/v1/coordination/shared/create", shared_body("unsigned"))
            .await
            .0,
        403
    );
    // The signature covers the path's shared_id: an update signed for one artifact, replayed
    // onto another at the same version, does not verify and writes nothing; nor does a body
    // naming another artifact than its path.
    let signed_update = sign_for(&alice_key, &update, "shared_id", &id);
    let replayed = alice
        .refused(
            &format!("/v1/coordination/shared/{plain_id}/update"),
            signed_update.clone(),
        )
        .await;
    assert_eq!(replayed, (400, not_verifying));
    let mut naming_another = signed_update.clone();
    naming_another["shared_id"] = json!(id);
    let (status, detail) = alice
        .refused(
            &format!("/v1/coordination/shared/{plain_id}/update"),
            naming_another,
        )
        .await;
    assert_eq!(status, 400, "{detail}");
    assert_eq!(
        detail,
        json!(format!(
            "sender_signature: the body's shared_id is not the shared_id of the path ({plain_id})"
        ))
    );
    let untouched = alice
        .ok_get(&format!("/v1/coordination/shared/{plain_id}"))
        .await;
    assert_eq!(untouched["shared"]["version"], 1);
    assert_eq!(untouched["shared"]["title"], "plain");
    assert!(untouched["shared"].get("sender_signature").is_none());
    // A signed update (forbid-extra model: neither the signature member nor the signed
    // shared_id is a field) stores its own signature over the body and its artifact's id;
    // the superseded version keeps the create's.
    let updated = alice
        .ok(
            &format!("/v1/coordination/shared/{id}/update"),
            signed_update,
        )
        .await;
    assert_eq!(updated["shared"]["version"], 2);
    let mut covered = update.clone();
    covered["shared_id"] = json!(id);
    assert_eq!(
        updated["shared"]["sender_signature"]["signed_body"],
        covered
    );
    assert_eq!(
        updated["shared"]["sender_signature"]["signed_body"]["shared_id"],
        id
    );
    reverify(&updated["shared"]["sender_signature"]);
    let history = bob
        .ok_get(&format!("/v1/coordination/shared/{id}/history"))
        .await;
    assert_eq!(
        &history["versions"][0]["shared"]["sender_signature"],
        stored
    );

    // A signed handoff; consuming it keeps the sender's signature.
    alice
        .ok(
            "/v1/continuity/upsert",
            json!({"subject_kind": "user", "subject_id": "alice-notes",
                   "capsule": capsule("user", "alice-notes")}),
        )
        .await;
    let handoff = json!({"recipient_peer": "bob", "subject_kind": "user",
                         "subject_id": "alice-notes", "note": "yours now"});
    let (status, text) = alice
        .post(
            "/v1/coordination/handoff/create",
            sign(&alice_key, &handoff),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    // The original's keys first, then Noema's.
    in_order(&text, &["consumed_by", "sender_signature"]);
    let created: Value = serde_json::from_str(&text).unwrap();
    let handoff_id = created["handoff"]["handoff_id"].as_str().unwrap();
    assert_eq!(
        created["handoff"]["sender_signature"]["signed_body"],
        handoff
    );
    let consumed = bob
        .ok(
            &format!("/v1/coordination/handoff/{handoff_id}/consume"),
            json!({"status": "accepted_advisory"}),
        )
        .await;
    assert_eq!(
        consumed["handoff"]["sender_signature"],
        created["handoff"]["sender_signature"]
    );
    assert_eq!(
        reverify(&consumed["handoff"]["sender_signature"]).0,
        "agent:alice"
    );

    // A reconciliation: the opener's signature, and the resolver's beside it.
    let open = json!({"task_id": "t-9", "title": "Which plan", "classification": "contradictory",
                      "trigger": "handoff_vs_shared", "claims": [
        {"source_kind": "handoff", "source_id": handoff_id, "claimant_peer": "alice",
         "claim_summary": "alice says so", "epistemic_status": "frame_present"},
        {"source_kind": "shared", "source_id": id, "claimant_peer": "bob",
         "claim_summary": "bob says so", "epistemic_status": "frame_present",
         "observed_version": 2}]});
    let opened = alice
        .ok(
            "/v1/coordination/reconciliation/open",
            sign(&alice_key, &open),
        )
        .await;
    let record = &opened["reconciliation"];
    assert_eq!(record["sender_signature"]["signed_body"], open);
    let rid = record["reconciliation_id"].as_str().unwrap();
    let resolve = json!({"expected_version": 1, "outcome": "advisory_only",
                         "resolution_summary": "keep both"});
    let path = format!("/v1/coordination/reconciliation/{rid}/resolve");
    assert_eq!(alice.refused(&path, resolve.clone()).await.0, 403);
    let resolved = alice
        .ok(
            &path,
            sign_for(&alice_key, &resolve, "reconciliation_id", rid),
        )
        .await;
    let record = &resolved["reconciliation"];
    assert_eq!(
        record["sender_signature"],
        opened["reconciliation"]["sender_signature"]
    );
    let mut covered = resolve.clone();
    covered["reconciliation_id"] = json!(rid);
    assert_eq!(record["resolver_signature"]["signed_body"], covered);
    reverify(&record["resolver_signature"]);

    // Unbinding restores the original's behaviour; re-registering keeps a binding.
    let kept = lead
        .ok(
            "/v1/peers/register",
            json!({"peer_id": "bob", "base_url": "http://bob-2"}),
        )
        .await;
    assert_eq!(kept["peer"]["agent_binding"]["agent_id"], "agent:bob");
    let unbound = lead
        .ok(
            "/v1/peers/alice/trust",
            json!({"trust_level": "restricted", "reason": "unbind", "agent_id": null}),
        )
        .await;
    assert!(unbound["peer"].get("agent_binding").is_none(), "{unbound}");
    alice
        .ok("/v1/coordination/shared/create", shared_body("free again"))
        .await;
}

/// A signed write asks identity; with identity down it is refused (503), never trusted on
/// the local check alone. Processes shape: the tokens are cached before identity is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_write_fails_closed_while_identity_is_down() {
    let mut cluster = match TestCluster::start(Backend::PostgresS3, Shape::Processes).await {
        Ok(cluster) => cluster,
        Err(err) => panic!("cannot start a processes cluster on Postgres + S3: {err}"),
    };
    let lead = Rest::new(
        &cluster,
        &token(
            &cluster,
            "crew",
            "lead",
            &[
                "continuity:read",
                "continuity:write",
                "continuity:admin",
                "identity:read",
            ],
        )
        .await,
    );
    let alice = Rest::new(
        &cluster,
        &token(
            &cluster,
            "crew",
            "alice",
            &["continuity:read", "continuity:write", "identity:read"],
        )
        .await,
    );
    let key = SigningKeyPair::from_seed(&[31; 32]);
    register_agent(&cluster, "agent:alice", &key).await;
    for peer in ["alice", "bob"] {
        lead.ok(
            "/v1/peers/register",
            json!({"peer_id": peer, "base_url": format!("http://{peer}")}),
        )
        .await;
    }
    lead.ok(
        "/v1/peers/alice/trust",
        json!({"trust_level": "restricted", "reason": "bind", "agent_id": "agent:alice"}),
    )
    .await;
    let body = json!({"participant_peers": ["bob"], "title": "t", "constraints": ["c"]});
    alice
        .ok("/v1/coordination/shared/create", sign(&key, &body))
        .await;

    cluster.kill("identity").await.unwrap();
    let (status, detail) = alice
        .refused("/v1/coordination/shared/create", sign(&key, &body))
        .await;
    assert_eq!(status, 503, "{detail}");
    assert!(
        detail
            .as_str()
            .unwrap()
            .starts_with("identity is unavailable to verify sender_signature; nothing was written"),
        "{detail}"
    );
    // Unsigned writes of an unbound peer do not need identity.
    let query = alice
        .ok_get("/v1/coordination/shared/query?owner_peer=alice")
        .await;
    assert_eq!(query["total_matches"], 1);
    cluster.restart("identity").await.unwrap();
    if let Err(err) = cluster.shutdown().await {
        panic!("cluster did not shut down cleanly: {err}");
    }
}

//! The identity service from outside: agents on trust-first-use (including the race),
//! key rotation with proof of possession, verification, and token lifecycle on
//! CogniRelay's and MoltNet's REST shapes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_core::keys::{self, PublicKey, SigningKeyPair};
use noema_e2e::{Backend, Shape, TestCluster, client_as, cluster_cases, owner};
use noema_proto::identity::v1 as pb;
use serde_json::{Value, json};

cluster_cases!(
    trust_on_first_use_over_rest,
    concurrent_first_registrations_have_one_winner,
    key_rotation_needs_a_proof_by_the_current_key,
    verify_checks_signatures_for_agents,
    token_lifecycle_on_cognirelay_routes,
    a_token_acts_as_its_agent_on_moltnet_routes,
    identity_writes_are_audited_in_a_chain,
);

/// The MoltNet compat vector: this seed's key and fingerprint.
const SEED: &str = "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=";
const PUBLIC_KEY: &str = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
const FINGERPRINT: &str = "21FE-31DF-A154-A261";

async fn post(cluster: &TestCluster, token: &str, path: &str, body: Value) -> (u16, Value) {
    let response = client_as(token)
        .post(format!("{}{path}", cluster.rest_url))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(cluster: &TestCluster, token: &str, path: &str) -> (u16, Value) {
    let response = client_as(token)
        .get(format!("{}{path}", cluster.rest_url))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn trust_on_first_use_over_rest(cluster: &TestCluster) {
    let token = &cluster.owner_token;
    let body = json!({"agent_id": "agent:alpha", "public_key": PUBLIC_KEY});
    let (status, agent) = post(cluster, token, "/v1/agents", body.clone()).await;
    assert_eq!(status, 201, "{agent}");
    assert_eq!(agent["agent_id"], "agent:alpha");
    assert_eq!(agent["public_key"], PUBLIC_KEY);
    assert_eq!(agent["fingerprint"], FINGERPRINT);

    // The same key again is accepted; a bare base64 spelling is the same key.
    let (status, _) = post(cluster, token, "/v1/agents", body).await;
    assert_eq!(status, 200);
    let bare = PUBLIC_KEY.trim_start_matches("ed25519:");
    let (status, _) = post(
        cluster,
        token,
        "/v1/agents",
        json!({"agent_id": "agent:alpha", "public_key": bare}),
    )
    .await;
    assert_eq!(status, 200);

    // Another key for the same agent is refused, with open-cognition's words, and nothing changes.
    let other = SigningKeyPair::from_seed(&[3; 32])
        .public_key()
        .to_prefixed();
    let (status, error) = post(
        cluster,
        token,
        "/v1/agents",
        json!({"agent_id": "agent:alpha", "public_key": other}),
    )
    .await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["error"], "public key mismatch");
    let (status, agent) = get(cluster, token, "/v1/agents/agent:alpha").await;
    assert_eq!(status, 200);
    assert_eq!(agent["public_key"], PUBLIC_KEY);
    assert_eq!(agent["key_version"], 1);

    // MoltNet's lookup by fingerprint, in either case.
    let (status, found) = get(cluster, token, "/agents/21fe-31df-a154-a261").await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(
        found,
        json!({"publicKey": PUBLIC_KEY, "fingerprint": FINGERPRINT})
    );
    let (status, problem) = get(cluster, token, "/agents/0000-0000-0000-0000").await;
    assert_eq!(status, 404);
    assert_eq!(problem["type"], "https://themolt.net/problems/not-found");
    assert_eq!(problem["status"], 404);

    // Bad input says what to fix and writes nothing.
    let (status, error) = post(
        cluster,
        token,
        "/v1/agents",
        json!({"agent_id": "agent:beta", "public_key": "ed25519:abc"}),
    )
    .await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("public_key"),
        "{error}"
    );
    let (status, _) = get(cluster, token, "/v1/agents/agent:beta").await;
    assert_eq!(status, 404);
    let response = owner(cluster)
        .post(format!("{}/v1/agents", cluster.rest_url))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: "),
        "{error}"
    );
}

async fn concurrent_first_registrations_have_one_winner(cluster: &TestCluster) {
    let contenders: Vec<PublicKey> = (0..8u8)
        .map(|i| SigningKeyPair::from_seed(&[40 + i; 32]).public_key())
        .collect();
    let mut tasks = Vec::new();
    for key in &contenders {
        let mut identity = cluster.identity().await.unwrap();
        let key = key.to_prefixed();
        tasks.push(tokio::spawn(async move {
            identity
                .register_agent(pb::RegisterAgentRequest {
                    agent_id: "agent:raced".into(),
                    public_key: key,
                    first_object_id: String::new(),
                })
                .await
        }));
    }
    let mut winners = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.unwrap() {
            Ok(response) => {
                assert!(response.get_ref().created);
                winners.push(i);
            }
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::FailedPrecondition);
                assert_eq!(status.message(), "public key mismatch");
            }
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one first registration wins: {winners:?}"
    );
    let mut identity = cluster.identity().await.unwrap();
    let agent = identity
        .get_agent(pb::GetAgentRequest {
            agent_id: "agent:raced".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(agent.public_key, contenders[winners[0]].to_prefixed());
}

async fn key_rotation_needs_a_proof_by_the_current_key(cluster: &TestCluster) {
    let current = SigningKeyPair::from_seed(&[11; 32]);
    let next = SigningKeyPair::from_seed(&[12; 32]);
    let mut identity = cluster.identity().await.unwrap();
    identity
        .register_agent(pb::RegisterAgentRequest {
            agent_id: "agent:rotor".into(),
            public_key: current.public_key().to_prefixed(),
            first_object_id: "obj-1".into(),
        })
        .await
        .unwrap();
    let message =
        keys::key_rotation_message("agent:rotor", &current.public_key(), &next.public_key())
            .unwrap();
    let rotate = |proof: String| pb::RotateKeyRequest {
        agent_id: "agent:rotor".into(),
        new_public_key: next.public_key().to_prefixed(),
        proof_signature: proof,
    };

    // Signed by the new key: refused, nothing changes.
    let err = identity
        .rotate_key(rotate(next.sign(&message).to_base64()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    // Not a signature at all: refused as bad input.
    let err = identity
        .rotate_key(rotate("nope".into()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    let agent = identity
        .get_agent(pb::GetAgentRequest {
            agent_id: "agent:rotor".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(agent.public_key, current.public_key().to_prefixed());
    assert_eq!(agent.key_version, 1);

    // The right proof rotates, over REST too.
    let proof = current.sign(&message).to_base64();
    let (status, agent) = post(
        cluster,
        &cluster.owner_token,
        "/v1/agents/agent:rotor/rotate-key",
        json!({"new_public_key": next.public_key().to_prefixed(), "proof_signature": proof}),
    )
    .await;
    assert_eq!(status, 200, "{agent}");
    assert_eq!(agent["public_key"], next.public_key().to_prefixed());
    assert_eq!(agent["key_version"], 2);
    assert_eq!(agent["first_object_id"], "obj-1");

    // Replaying the same proof does nothing: it names the old key, no longer current.
    let err = identity.rotate_key(rotate(proof)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);

    // After rotation the agent's new key is the one TOFU accepts.
    let again = identity
        .register_agent(pb::RegisterAgentRequest {
            agent_id: "agent:rotor".into(),
            public_key: next.public_key().to_prefixed(),
            first_object_id: String::new(),
        })
        .await
        .unwrap();
    assert!(!again.get_ref().created);
}

async fn verify_checks_signatures_for_agents(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed_base64(SEED).unwrap();
    let mut identity = cluster.identity().await.unwrap();
    identity
        .register_agent(pb::RegisterAgentRequest {
            agent_id: "agent:verifier".into(),
            public_key: pair.public_key().to_prefixed(),
            first_object_id: String::new(),
        })
        .await
        .unwrap();
    let message = b"id:sha256:abc:agent:verifier:2026-01-01T00:00:00Z".to_vec();
    let signature = pair.sign(&message).to_base64();
    let verify = |message: Vec<u8>, key: &str| pb::VerifyRequest {
        agent_id: "agent:verifier".into(),
        message,
        signature: signature.clone(),
        public_key: key.into(),
    };
    let ok = identity
        .verify(verify(message.clone(), ""))
        .await
        .unwrap()
        .into_inner();
    assert!(ok.valid);
    assert_eq!(ok.key_status, pb::KeyStatus::Registered as i32);
    assert_eq!(ok.fingerprint, FINGERPRINT);

    let tampered = identity
        .verify(verify(b"other".to_vec(), ""))
        .await
        .unwrap()
        .into_inner();
    assert!(!tampered.valid);

    let stranger = SigningKeyPair::from_seed(&[5; 32])
        .public_key()
        .to_prefixed();
    let mismatch = identity
        .verify(verify(message.clone(), &stranger))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mismatch.key_status, pb::KeyStatus::Mismatch as i32);
    assert!(!mismatch.valid);

    let unknown = identity
        .verify(pb::VerifyRequest {
            agent_id: "agent:nobody".into(),
            message: message.clone(),
            signature: signature.clone(),
            public_key: PUBLIC_KEY.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(unknown.valid);
    assert_eq!(unknown.key_status, pb::KeyStatus::Unregistered as i32);

    let err = identity
        .verify(pb::VerifyRequest {
            agent_id: "agent:nobody".into(),
            message,
            signature,
            public_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
}

async fn token_lifecycle_on_cognirelay_routes(cluster: &TestCluster) {
    let owner_token = &cluster.owner_token;
    let (status, issued) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "peer:reader", "scopes": ["ledger:read"], "ttl_seconds": 3600,
               "description": "reads the ledger"}),
    )
    .await;
    assert_eq!(status, 200, "{issued}");
    assert_eq!(issued["ok"], true);
    let token = issued["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("noema_"), "{token}");
    let meta = &issued["token_meta"];
    assert_eq!(meta["peer_id"], "peer:reader");
    assert_eq!(meta["scopes"], json!(["ledger:read"]));
    assert_eq!(meta["effective_status"], "active");
    assert!(meta["expires_at"].as_str().unwrap().ends_with('Z'));
    // Bare hex, as the original stores and shows it.
    let sha = noema_core::content_id::sha256_hex(token.as_bytes());
    assert_eq!(meta["token_sha256"], sha.as_str());
    let token_id = meta["token_id"].as_str().unwrap().to_owned();
    assert!(token_id.starts_with("tok_"), "{token_id}");

    // The scope decides: reading the ledger works, halting it does not.
    let (status, _) = get(cluster, &token, "/status").await;
    assert_eq!(status, 200);
    let (status, error) = post(cluster, &token, "/stop", json!({})).await;
    assert_eq!(status, 403);
    assert!(
        error["error"].as_str().unwrap().contains("ledger:admin"),
        "{error}"
    );
    // A reader cannot manage tokens.
    let (status, _) = get(cluster, &token, "/v1/security/tokens").await;
    assert_eq!(status, 403);

    let (status, list) = get(
        cluster,
        owner_token,
        "/v1/security/tokens?peer_id=peer:reader",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(list["count"], 1);
    let listed = list.to_string();
    assert!(
        !listed.contains(&token),
        "a listing must never contain a token"
    );

    // Rotation: a new secret with the same rights, the old one revoked.
    let (status, rotated) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/rotate",
        json!({"token_id": token_id}),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    let new_token = rotated["token"].as_str().unwrap().to_owned();
    assert_eq!(rotated["from_token"]["status"], "revoked");
    assert_eq!(
        rotated["token_meta"]["rotated_from_token_id"],
        token_id.as_str()
    );
    assert_eq!(rotated["token_meta"]["scopes"], json!(["ledger:read"]));
    let new_id = rotated["token_meta"]["token_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        rotated["from_token"]["revoked_reason"],
        format!("rotated_to:{new_id}")
    );
    // A token id in use: the original's 409 on issue and on rotate, and nothing changes.
    let (status, taken) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "peer:other", "token_id": new_id}),
    )
    .await;
    assert_eq!(status, 409, "{taken}");
    assert_eq!(
        taken,
        json!({"detail": format!("Token id already exists: {new_id}")})
    );
    let (status, taken) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/rotate",
        json!({"token_id": new_id, "new_token_id": token_id}),
    )
    .await;
    assert_eq!(status, 409, "{taken}");
    assert_eq!(
        taken,
        json!({"detail": format!("Token id already exists: {token_id}")})
    );
    let (_, list) = get(cluster, owner_token, "/v1/security/tokens").await;
    assert!(
        !list.to_string().contains("peer:other"),
        "a refused issue stored nothing: {list}"
    );
    // Checked on an identity route: the identity service sees revocation at once (other
    // services within their cache TTL; see revocation_reaches_a_split_ledger).
    let (status, error) = get(cluster, &token, "/crypto/identity").await;
    assert_eq!(status, 401);
    assert_eq!(error["detail"], "token revoked");
    let (status, _) = get(cluster, &new_token, "/crypto/identity").await;
    assert_eq!(status, 404, "authenticated, but not an agent");

    // Revocation by id; CogniRelay's body shape; then the token stops working.
    let (status, revoked) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/revoke",
        json!({"token_id": new_id}),
    )
    .await;
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(
        (revoked["matched"].as_u64(), revoked["revoked"].as_u64()),
        (Some(1), Some(1))
    );
    let (status, _) = get(cluster, &new_token, "/crypto/identity").await;
    assert_eq!(status, 401);
    let (status, error) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/revoke",
        json!({"token_id": "tok_none"}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(error, json!({"detail": "Token entry not found"}));
    // Again: matched, nothing changed, nothing committed; no reason given is none recorded.
    let (status, again) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/revoke",
        json!({"token_id": new_id}),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (&again["matched"], &again["revoked"], &again["committed"]),
        (&json!(1), &json!(0), &json!(false))
    );
    assert_eq!(again["tokens"][0]["revoked_reason"], Value::Null);
    let (status, error) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/rotate",
        json!({"token_id": new_id}),
    )
    .await;
    assert_eq!(
        (status, error),
        (409, json!({"detail": "Token is already revoked"}))
    );

    // A digest no token can have matches none, as in the original (it compares).
    for route in ["/v1/security/tokens/revoke", "/v1/security/tokens/rotate"] {
        let (status, error) = post(
            cluster,
            owner_token,
            route,
            json!({"token_sha256": "sha256:zz"}),
        )
        .await;
        assert_eq!(
            (status, error),
            (404, json!({"detail": "Token entry not found"})),
            "{route}"
        );
    }
    // Listing: pydantic's booleans, and a status no token has matches none.
    let (status, error) = get(
        cluster,
        owner_token,
        "/v1/security/tokens?include_inactive=maybe",
    )
    .await;
    assert_eq!(
        (status, error),
        (
            422,
            json!({"detail": [{"type": "bool_parsing", "loc": ["query", "include_inactive"],
                "msg": "Input should be a valid boolean, unable to interpret input",
                "input": "maybe"}]})
        )
    );
    let (status, listed) = get(
        cluster,
        owner_token,
        "/v1/security/tokens?include_inactive=Y&status=bogus",
    )
    .await;
    assert_eq!(
        (status, listed),
        (200, json!({"ok": true, "count": 0, "tokens": []}))
    );
    // A peer id revokes all of the peer's tokens only with revoke_all_for_peer, as in the
    // original; alone it names no token.
    let mut peer_tokens = Vec::new();
    for _ in 0..2 {
        let (status, issued) = post(
            cluster,
            owner_token,
            "/v1/security/tokens/issue",
            json!({"peer_id": "peer:many", "scopes": ["ledger:read"]}),
        )
        .await;
        assert_eq!(status, 200, "{issued}");
        peer_tokens.push(issued["token"].as_str().unwrap().to_owned());
    }
    let (status, error) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/revoke",
        json!({"peer_id": "peer:many"}),
    )
    .await;
    assert_eq!(
        (status, error),
        (400, json!({"detail": "Provide token_id or token_sha256"}))
    );
    // On an identity route, which sees revocation at once (see above).
    let (status, _) = get(cluster, &peer_tokens[0], "/crypto/identity").await;
    assert_eq!(
        status, 404,
        "nothing was revoked: authenticated, not an agent"
    );
    let (status, error) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/revoke",
        json!({"revoke_all_for_peer": true}),
    )
    .await;
    assert_eq!(
        (status, error),
        (
            400,
            json!({"detail": "peer_id is required when revoke_all_for_peer=true"})
        )
    );
    let (status, all) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/revoke",
        json!({"peer_id": "peer:many", "revoke_all_for_peer": true, "reason": "rotating out"}),
    )
    .await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(
        (&all["matched"], &all["revoked"], &all["committed"]),
        (&json!(2), &json!(2), &json!(true))
    );
    assert_eq!(all["tokens"][0]["revoked_reason"], "rotating out");
    for token in &peer_tokens {
        let (status, _) = get(cluster, token, "/crypto/identity").await;
        assert_eq!(status, 401);
    }
    // pydantic's bounds on ttl_seconds (1 to a year): its 422.
    let (status, error) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "p", "ttl_seconds": 0}),
    )
    .await;
    assert_eq!(
        (status, error),
        (
            422,
            json!({"detail": [{"type": "greater_than_equal", "loc": ["body", "ttl_seconds"],
                "msg": "Input should be greater than or equal to 1", "input": 0,
                "ctx": {"ge": 1}}]})
        )
    );

    // The owner token cannot be revoked through the API.
    let (status, error) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/revoke",
        json!({"token_id": "owner"}),
    )
    .await;
    assert_eq!(status, 422, "{error}");

    // Bad requests: unknown scope, both expiry forms, duplicate id.
    let (status, error) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "p", "scopes": ["ledger:everything"]}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        error["detail"].as_str().unwrap().contains("unknown scopes"),
        "{error}"
    );
    // The original's own refusals of an expiry (CogniRelay 1.4.15's bodies), and a naive
    // expiry taken as UTC, as its `fromisoformat` reading does.
    for (body, detail) in [
        (
            json!({"peer_id": "p", "ttl_seconds": 5, "expires_at": "2099-01-01T00:00:00Z"}),
            "Provide either expires_at or ttl_seconds, not both",
        ),
        (
            json!({"peer_id": "p", "expires_at": "garbage"}),
            "Invalid expires_at format",
        ),
    ] {
        let answer = post(cluster, owner_token, "/v1/security/tokens/issue", body).await;
        assert_eq!(answer, (400, json!({"detail": detail})));
    }
    let (status, naive) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "p", "expires_at": "2099-01-01T00:00:00"}),
    )
    .await;
    assert_eq!(status, 200, "{naive}");
    assert_eq!(naive["token_meta"]["expires_at"], "2099-01-01T00:00:00Z");
    // A past expiry issues a token born expired, refused as the original refuses it.
    let (status, born_expired) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "p", "scopes": ["read:files"], "expires_at": "2020-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, 200, "{born_expired}");
    assert_eq!(born_expired["token_meta"]["effective_status"], "expired");
    let secret = born_expired["token"].as_str().unwrap();
    let answer = get(cluster, secret, "/v1/messages/pending").await;
    assert_eq!(answer, (401, json!({"detail": "Token expired"})));
    // Listed only with include_inactive, as both of the original's filters apply.
    let (_, listed) = get(cluster, owner_token, "/v1/security/tokens?status=expired").await;
    assert_eq!(listed["count"], 0, "{listed}");
    let (_, listed) = get(
        cluster,
        owner_token,
        "/v1/security/tokens?status=expired&include_inactive=true",
    )
    .await;
    assert_eq!(listed["count"], 1, "{listed}");
    // A rotation's expiry is refused as an issue's is, once the token is found.
    let expired_id = born_expired["token_meta"]["token_id"].as_str().unwrap();
    let answer = post(
        cluster,
        owner_token,
        "/v1/security/tokens/rotate",
        json!({"token_id": expired_id, "ttl_seconds": 60, "expires_at": "2099-01-01"}),
    )
    .await;
    let both = json!({"detail": "Provide either expires_at or ttl_seconds, not both"});
    assert_eq!(answer, (400, both));
    // It rotates; the replacement inherits the expiry unless the rotation names one.
    let (status, rotated) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/rotate",
        json!({"token_id": expired_id, "ttl_seconds": 60}),
    )
    .await;
    assert_eq!(status, 200, "{rotated}");
    assert_eq!(rotated["token_meta"]["effective_status"], "active");
    assert_eq!(rotated["from_token"]["status"], "revoked");
    // A missing peer_id is pydantic's 422, echoing the body in its own key order.
    let answer = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"scopes": ["read:files"], "description": "d"}),
    )
    .await;
    let echo = r#"{"detail":[{"type":"missing","loc":["body","peer_id"],"msg":"Field required","input":{"description":"d","scopes":["read:files"]}}]}"#;
    assert_eq!(answer, (422, serde_json::from_str::<Value>(echo).unwrap()));
    let (status, _) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "p", "token_id": "tok_fixed"}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "p", "token_id": "tok_fixed"}),
    )
    .await;
    assert_eq!(status, 409);

    // Templates.
    let (status, collab) = post(
        cluster,
        owner_token,
        "/v1/security/tokens/issue",
        json!({"peer_id": "peer:collab", "template": "collaboration_peer"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        collab["token_meta"]["scopes"],
        json!(["read:files", "search", "write:messages", "write:projects"])
    );
}

async fn a_token_acts_as_its_agent_on_moltnet_routes(cluster: &TestCluster) {
    let (status, _) = post(
        cluster,
        &cluster.owner_token,
        "/v1/agents",
        json!({"agent_id": "agent:self", "public_key": PUBLIC_KEY}),
    )
    .await;
    assert_eq!(status, 201);
    let token = cluster
        .issue_token("agent:self", &["identity:read"])
        .await
        .unwrap();
    let (status, me) = get(cluster, &token, "/crypto/identity").await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(
        me,
        json!({"identityId": "agent:self", "publicKey": PUBLIC_KEY, "fingerprint": FINGERPRINT})
    );
    // A token that is not an agent gets MoltNet's problem body.
    let stranger = cluster
        .issue_token("peer:human", &["identity:read"])
        .await
        .unwrap();
    let (status, problem) = get(cluster, &stranger, "/crypto/identity").await;
    assert_eq!(status, 404);
    assert_eq!(problem["code"], "NOT_FOUND");
}

async fn identity_writes_are_audited_in_a_chain(cluster: &TestCluster) {
    let token = cluster
        .issue_token("peer:audited", &["ledger:read"])
        .await
        .unwrap();
    let _ = token;
    let (status, _) = post(
        cluster,
        &cluster.owner_token,
        "/v1/agents",
        json!({"agent_id": "agent:audited", "public_key": PUBLIC_KEY}),
    )
    .await;
    assert_eq!(status, 201);
    let mut identity = cluster.identity().await.unwrap();
    let entries = identity
        .list_audit(noema_proto::common::v1::ListAuditRequest::default())
        .await
        .unwrap()
        .into_inner()
        .entries;
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    assert!(
        actions.starts_with(&["register_key", "issue_token"]),
        "{actions:?}"
    );
    assert!(actions.contains(&"create_owner_token"), "{actions:?}");
    assert_eq!(entries[0].actor, "owner");
    assert_eq!(entries[0].target_id, "agent:audited");
    for pair in entries.windows(2) {
        assert_eq!(pair[0].prev_hash, pair[1].hash);
        assert_eq!(pair[0].id, pair[1].id + 1);
    }
    // Audit details never carry a token secret.
    let text = format!("{entries:?}");
    assert!(
        !text.contains("noema_"),
        "audit must not contain token secrets"
    );
}

/// Revocation reaches a service in another process within its cache TTL (here 2 s; the
/// configuration caps it at 30 s).
async fn revocation_reaches_a_split_ledger(backend: Backend) {
    let cluster = TestCluster::start_with(backend, Shape::Split, &[("auth.cache_ttl_secs", "2")])
        .await
        .unwrap();
    let token = cluster
        .issue_token("peer:short-lived", &["ledger:read"])
        .await
        .unwrap();
    let mut ledger = cluster.ledger_as(&token).await.unwrap();
    ledger
        .get_status(noema_proto::ledger::v1::GetStatusRequest {})
        .await
        .unwrap();
    let mut identity = cluster.identity().await.unwrap();
    identity
        .revoke_token(pb::RevokeTokenRequest {
            peer_id: "peer:short-lived".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        match ledger
            .get_status(noema_proto::ledger::v1::GetStatusRequest {})
            .await
        {
            Err(status) => break status,
            Ok(_) if started.elapsed() < std::time::Duration::from_secs(30) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Ok(_) => panic!("the revoked token still works after 30 s"),
        }
    };
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert_eq!(status.message(), "token revoked");
    cluster.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_reaches_a_split_ledger_sqlite() {
    revocation_reaches_a_split_ledger(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_reaches_a_split_ledger_postgres_s3() {
    revocation_reaches_a_split_ledger(Backend::PostgresS3).await;
}

/// Anonymous access exists only when configured, and only with the configured scopes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_access_only_when_configured() {
    let cluster = TestCluster::start_with(
        Backend::Sqlite,
        Shape::AllInOne,
        &[("auth.anonymous_scopes", "[\"ledger:read\"]")],
    )
    .await
    .unwrap();
    let client = noema_e2e::anonymous();
    let status = client
        .get(format!("{}/status", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(status.status().as_u16(), 200);
    let stop = client
        .post(format!("{}/stop", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status().as_u16(), 403);
    cluster.shutdown().await.unwrap();
}

/// An owner-token hash configured in uppercase hex (as some tools print digests) still
/// authenticates the owner, over REST and across the split shape's gRPC hop: loading the
/// configuration folds it to the lowercase form tokens are stored and looked up in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uppercase_configured_owner_hash_authenticates() {
    let secret = format!("noema_upper_owner_{}", std::process::id());
    let stored = noema_core::content_id::ContentId::of_bytes(secret.as_bytes());
    let uppercase = stored
        .as_str()
        .to_ascii_uppercase()
        .replacen("SHA256:", "sha256:", 1);
    assert_ne!(uppercase, stored.as_str());
    let literal = format!("\"{uppercase}\"");
    let cluster = TestCluster::start_with(
        Backend::Sqlite,
        Shape::Split,
        &[("auth.owner_token_sha256", literal.as_str())],
    )
    .await
    .unwrap();
    let status = client_as(&secret)
        .get(format!("{}/status", cluster.rest_url))
        .send()
        .await
        .unwrap();
    assert_eq!(status.status().as_u16(), 200);
    let mut ledger = cluster.ledger_as(&secret).await.unwrap();
    ledger
        .get_status(noema_proto::ledger::v1::GetStatusRequest {})
        .await
        .unwrap();
    let mut identity = cluster.identity_as(&secret).await.unwrap();
    let principal = identity
        .authenticate(pb::AuthenticateRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(principal.token_id, "owner");
    assert!(principal.superuser);
    cluster.shutdown().await.unwrap();
}

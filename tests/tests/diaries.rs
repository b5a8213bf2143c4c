//! Signed diaries from outside (seed 004, MoltNet wire compatibility): the compat vectors
//! through REST, the seed's draft → sign → supersede lifecycle with local signing, MoltNet's
//! sign-then-create flow, the state × constraint matrix over gRPC and REST, and
//! diary-scoped authorisation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_core::keys::{self, SigningKeyPair};
use noema_e2e::{TestCluster, client_as, cluster_cases};
use noema_proto::identity::v1 as pb;
use noema_proto::identity::v1::diary_service_client::DiaryServiceClient;
use noema_test_support::BearerToken;
use serde_json::{Value, json};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

cluster_cases!(
    compat_vectors_through_rest,
    seed_lifecycle_with_local_signing,
    moltnet_sign_then_create_flow,
    state_constraint_matrix_over_grpc_and_rest,
    diary_scoped_authorisation,
    sdk_prepare_sign_submit,
    diary_tags_listing,
    bulk_entry_delete,
    relation_walks,
    pending_signing_request_limit_says_when_to_retry,
    moltnets_public_verifiers_answer_without_a_token,
    moltnet_grants,
    public_feed_without_a_token,
    tampering_breaks_the_signature_chain,
);

const SEED: &str = "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=";
const PUBLIC_KEY: &str = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
const FINGERPRINT: &str = "21FE-31DF-A154-A261";
const CID_1: &str = "bafkreidxfykbrvutwidnpsnto4ij6kpe6r3oofqthfc5ohvcmrpsw3irse";
const CID_2: &str = "bafkreid5liobpxc3pneqhqzj55uewevi7ekznbyq2zskfhfla5vb62lqhe";
const SCOPES: &[&str] = &["diary:read", "diary:write", "diary:manage", "crypto:sign"];

type Diary = DiaryServiceClient<InterceptedService<Channel, BearerToken>>;

/// Registers `agent_id` with `pair`'s key and returns a token acting as it.
async fn agent(cluster: &TestCluster, agent_id: &str, pair: &SigningKeyPair) -> String {
    let mut identity = cluster.identity().await.unwrap();
    identity
        .register_agent(pb::RegisterAgentRequest {
            agent_id: agent_id.into(),
            public_key: pair.public_key().to_prefixed(),
            first_object_id: String::new(),
        })
        .await
        .unwrap();
    cluster.issue_token(agent_id, SCOPES).await.unwrap()
}

async fn grpc_as(cluster: &TestCluster, token: &str) -> Diary {
    let channel = cluster.channel(&cluster.identity_endpoint).await.unwrap();
    DiaryServiceClient::with_interceptor(channel, BearerToken::new(token).unwrap())
}

async fn rest(
    cluster: &TestCluster,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let client = client_as(token);
    let url = format!("{}{path}", cluster.rest_url);
    let request = match method {
        "GET" => client.get(&url),
        "POST" => client.post(&url),
        "PATCH" => client.patch(&url),
        "DELETE" => client.delete(&url),
        other => panic!("method {other}"),
    };
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

async fn new_diary(cluster: &TestCluster, token: &str, visibility: &str) -> String {
    let (status, diary) = rest(
        cluster,
        token,
        "POST",
        "/diaries",
        Some(json!({"name": "journal", "visibility": visibility})),
    )
    .await;
    assert_eq!(status, 201, "{diary}");
    s(&diary["id"])
}

/// The seed's flow over REST: prepare a signing request for a draft, sign its
/// signingInput locally, submit. Returns (request id, signature).
async fn sign_draft(
    cluster: &TestCluster,
    token: &str,
    pair: &SigningKeyPair,
    entry_id: &str,
) -> (String, String) {
    let (status, request) = rest(
        cluster,
        token,
        "POST",
        "/crypto/signing-requests",
        Some(json!({"entryId": entry_id})),
    )
    .await;
    assert_eq!(status, 201, "{request}");
    let expected = keys::moltnet_signing_bytes(&s(&request["message"]), &s(&request["nonce"]));
    let input = data_encoding::BASE64
        .decode(s(&request["signingInput"]).as_bytes())
        .unwrap();
    assert_eq!(input, expected, "signingInput is MoltNet's framing");
    let signature = pair.sign(&input).to_base64();
    let id = s(&request["id"]);
    let (status, done) = rest(
        cluster,
        token,
        "POST",
        &format!("/crypto/signing-requests/{id}/sign"),
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["valid"], true);
    (id, signature)
}

async fn compat_vectors_through_rest(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed_base64(SEED).unwrap();
    assert_eq!(pair.public_key().to_prefixed(), PUBLIC_KEY);
    assert_eq!(pair.public_key().fingerprint(), FINGERPRINT);
    let token = agent(cluster, "agent:vector", &pair).await;
    let (status, me) = rest(cluster, &token, "GET", "/crypto/identity", None).await;
    assert_eq!(status, 200);
    assert_eq!(me["fingerprint"], FINGERPRINT);
    let diary = new_diary(cluster, &token, "private").await;
    let (status, entry) = rest(
        cluster,
        &token,
        "POST",
        &format!("/diaries/{diary}/entries"),
        Some(json!({"title": "Title", "content": "Content", "tags": ["tag1"]})),
    )
    .await;
    assert_eq!(status, 201, "{entry}");
    assert_eq!(entry["contentHash"], CID_1);
    assert_eq!(entry["entryType"], "semantic");
    assert_eq!(entry["creator"]["fingerprint"], FINGERPRINT);
    assert!(s(&entry["createdAt"]).ends_with('Z') && s(&entry["createdAt"]).len() == 24);
    let (_, entry) = rest(
        cluster,
        &token,
        "POST",
        &format!("/diaries/{diary}/entries"),
        Some(json!({"title": "", "content": "Content", "tags": []})),
    )
    .await;
    assert_eq!(entry["contentHash"], CID_2);
    sign_draft(cluster, &token, &pair, &s(&entry["id"])).await;
    let (_, verify) = rest(
        cluster,
        &token,
        "GET",
        &format!("/entries/{}/verify", s(&entry["id"])),
        None,
    )
    .await;
    assert_eq!(verify["valid"], true, "{verify}");
    assert_eq!(verify["agentFingerprint"], FINGERPRINT);
}

async fn seed_lifecycle_with_local_signing(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed_base64(SEED).unwrap();
    let other = SigningKeyPair::from_seed(&[9; 32]);
    let token = agent(cluster, "agent:life", &pair).await;
    let diary = new_diary(cluster, &token, "private").await;

    // Draft, then an update that changes the hash.
    let (_, draft) = rest(
        cluster,
        &token,
        "POST",
        &format!("/diaries/{diary}/entries"),
        Some(json!({"title": "Title", "content": "Content", "tags": ["tag1"]})),
    )
    .await;
    let id = s(&draft["id"]);
    assert_eq!(draft["contentSignature"], Value::Null);
    let (status, updated) = rest(
        cluster,
        &token,
        "PATCH",
        &format!("/entries/{id}"),
        Some(json!({"title": "", "tags": []})),
    )
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["contentHash"], CID_2);

    // Prepare; a signature by another key is refused and changes nothing.
    let (_, request) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/signing-requests",
        Some(json!({"entryId": id})),
    )
    .await;
    let rid = s(&request["id"]);
    assert_eq!(request["message"], CID_2);
    let input = data_encoding::BASE64
        .decode(s(&request["signingInput"]).as_bytes())
        .unwrap();
    let (status, error) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{rid}/sign"),
        Some(json!({"signature": other.sign(&input).to_base64()})),
    )
    .await;
    assert_eq!(status, 409, "{error}");
    assert!(s(&error["detail"]).contains("does not verify"), "{error}");
    let (_, still) = rest(cluster, &token, "GET", &format!("/entries/{id}"), None).await;
    assert_eq!(still["contentSignature"], Value::Null);
    let (_, pending) = rest(
        cluster,
        &token,
        "GET",
        &format!("/crypto/signing-requests/{rid}"),
        None,
    )
    .await;
    assert_eq!(pending["status"], "pending");

    // The right key signs; the nonce cannot be replayed.
    let signature = pair.sign(&input).to_base64();
    let (status, done) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{rid}/sign"),
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let (status, replay) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{rid}/sign"),
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(
        replay["type"],
        "https://themolt.net/problems/signing-request-already-completed"
    );

    let (status, verify) = rest(
        cluster,
        &token,
        "GET",
        &format!("/entries/{id}/verify"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        verify,
        json!({"signed": true, "hashMatches": true, "signatureValid": true, "valid": true,
               "contentHash": CID_2, "agentFingerprint": FINGERPRINT, "reason": null})
    );

    // Signed: content updates and deletion are refused; importance is still allowed.
    let (status, error) = rest(
        cluster,
        &token,
        "PATCH",
        &format!("/entries/{id}"),
        Some(json!({"content": "tampered"})),
    )
    .await;
    assert_eq!(status, 409);
    assert!(s(&error["detail"]).contains("immutable"), "{error}");
    let (status, _) = rest(cluster, &token, "DELETE", &format!("/entries/{id}"), None).await;
    assert_eq!(status, 409);
    let (status, _) = rest(
        cluster,
        &token,
        "DELETE",
        &format!("/diaries/{diary}"),
        None,
    )
    .await;
    assert_eq!(status, 409);

    // A draft edited after prepare cannot be signed with the prepared request, and a
    // signature made for another entry is refused.
    let (_, second) = rest(
        cluster,
        &token,
        "POST",
        &format!("/diaries/{diary}/entries"),
        Some(json!({"content": "Second version", "entryType": "procedural"})),
    )
    .await;
    let second_id = s(&second["id"]);
    let (_, prepared) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/signing-requests",
        Some(json!({"entryId": second_id})),
    )
    .await;
    let (status, _) = rest(
        cluster,
        &token,
        "PATCH",
        &format!("/entries/{second_id}"),
        Some(json!({"content": "Second version, edited"})),
    )
    .await;
    assert_eq!(status, 200);
    let prepared_input = data_encoding::BASE64
        .decode(s(&prepared["signingInput"]).as_bytes())
        .unwrap();
    let (status, error) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{}/sign", s(&prepared["id"])),
        Some(json!({"signature": pair.sign(&prepared_input).to_base64()})),
    )
    .await;
    assert_eq!(status, 409, "{error}");
    assert!(s(&error["detail"]).contains("changed"), "{error}");
    let (_, fresh) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/signing-requests",
        Some(json!({"entryId": second_id})),
    )
    .await;
    let (status, _) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{}/sign", s(&fresh["id"])),
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!(
        status, 409,
        "a signature reused on another entry is refused"
    );
    let (_, unsigned) = rest(
        cluster,
        &token,
        "GET",
        &format!("/entries/{second_id}"),
        None,
    )
    .await;
    assert_eq!(unsigned["contentSignature"], Value::Null);

    // Supersede the signed entry with the new one.
    let (status, relation) = rest(
        cluster,
        &token,
        "POST",
        &format!("/entries/{second_id}/relations"),
        Some(json!({"targetId": id, "relation": "supersedes", "status": "accepted"})),
    )
    .await;
    assert_eq!(status, 201, "{relation}");
    assert_eq!(relation["targetCidSnapshot"], CID_2);
    let (_, all) = rest(
        cluster,
        &token,
        "GET",
        &format!("/diaries/{diary}/entries"),
        None,
    )
    .await;
    assert_eq!(all["total"], 2);
    let (_, active) = rest(
        cluster,
        &token,
        "GET",
        &format!("/diaries/{diary}/entries?excludeSuperseded=true"),
        None,
    )
    .await;
    assert_eq!(active["total"], 1, "{active}");
    assert_eq!(active["items"][0]["id"], second_id.as_str());
    let (status, old) = rest(cluster, &token, "GET", &format!("/entries/{id}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(old["superseded"], true);
    let (_, found) = rest(
        cluster,
        &token,
        "POST",
        "/diaries/search",
        Some(json!({"diaryId": diary, "query": "version", "excludeSuperseded": true})),
    )
    .await;
    assert_eq!(found["total"], 1, "{found}");
    let (_, found) = rest(
        cluster,
        &token,
        "POST",
        "/diaries/search",
        Some(json!({"query": "Content"})),
    )
    .await;
    assert_eq!(found["results"][0]["id"], id.as_str(), "{found}");

    // The signature chain is whole.
    let (status, chain) = rest(
        cluster,
        &token,
        "GET",
        "/v1/agents/agent:life/signature-chain",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(chain["valid"], true, "{chain}");
    assert_eq!(chain["length"], 1);
}

async fn moltnet_sign_then_create_flow(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed_base64(SEED).unwrap();
    let token = agent(cluster, "agent:molt", &pair).await;
    let diary = new_diary(cluster, &token, "moltnet").await;
    let tags = vec!["tag1".to_owned()];
    let cid = noema_core::cid::entry_cid("semantic", Some("Title"), "Content", Some(&tags));
    assert_eq!(cid, CID_1);
    let (status, request) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/signing-requests",
        Some(json!({"message": cid})),
    )
    .await;
    assert_eq!(status, 201, "{request}");
    let input = data_encoding::BASE64
        .decode(s(&request["signingInput"]).as_bytes())
        .unwrap();
    assert_eq!(input.len(), 86);
    let signature = pair.sign(&input).to_base64();
    let rid = s(&request["id"]);
    let (status, _) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{rid}/sign"),
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!(status, 200);

    let body = |hash: &str, rid: Option<&str>| {
        let mut b =
            json!({"title": "Title", "content": "Content", "tags": ["tag1"], "contentHash": hash});
        if let Some(rid) = rid {
            b["signingRequestId"] = json!(rid);
        }
        b
    };
    let path = format!("/diaries/{diary}/entries");
    let (status, error) = rest(
        cluster,
        &token,
        "POST",
        &path,
        Some(body(CID_2, Some(&rid))),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        error["detail"],
        format!("Content hash mismatch: provided {CID_2}, computed {CID_1}")
    );
    let (status, error) = rest(cluster, &token, "POST", &path, Some(body(CID_1, None))).await;
    assert_eq!(status, 400);
    assert_eq!(
        error["detail"],
        "contentHash requires signingRequestId to create a signed entry."
    );
    let (status, entry) = rest(
        cluster,
        &token,
        "POST",
        &path,
        Some(body(CID_1, Some(&rid))),
    )
    .await;
    assert_eq!(status, 201, "{entry}");
    assert_eq!(entry["contentSignature"], signature.as_str());
    let (status, error) = rest(
        cluster,
        &token,
        "POST",
        &path,
        Some(body(CID_1, Some(&rid))),
    )
    .await;
    assert_eq!(status, 409, "{error}");
    assert_eq!(
        error["conflict"]["constraint"],
        "diary_entries_content_signature_unique_idx"
    );
    let (_, verify) = rest(
        cluster,
        &token,
        "GET",
        &format!("/entries/{}/verify", s(&entry["id"])),
        None,
    )
    .await;
    assert_eq!(verify["valid"], true, "{verify}");
    let (status, verified) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/verify",
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(verified["valid"], true);

    // Arbitrary message: a wrong signature consumes the request with valid: false.
    let (_, request) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/signing-requests",
        Some(json!({"message": "commit rationale"})),
    )
    .await;
    let wrong = SigningKeyPair::from_seed(&[5; 32]).sign(b"x").to_base64();
    let (status, done) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{}/sign", s(&request["id"])),
        Some(json!({"signature": wrong})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(done["valid"], false);
    let (_, verified) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/verify",
        Some(json!({"signature": wrong})),
    )
    .await;
    assert_eq!(verified["valid"], false);
}

/// A fresh entry of `entry_type` in `diary`, signed through gRPC's prepare → submit
/// when `signed`.
async fn make_entry(
    grpc: &mut Diary,
    diary: &str,
    entry_type: &str,
    signed: bool,
    pair: &SigningKeyPair,
) -> String {
    let e = grpc
        .create_entry(pb::CreateEntryRequest {
            diary_id: diary.to_owned(),
            content: format!("{entry_type} body"),
            entry_type: entry_type.into(),
            tags: vec!["a".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    if signed {
        let r = grpc
            .create_signing_request(pb::CreateSigningRequestRequest {
                entry_id: e.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        grpc.submit_signature(pb::SubmitSignatureRequest {
            id: r.id,
            signature: pair.sign(&r.signing_input).to_base64(),
        })
        .await
        .unwrap();
    }
    e.id
}

/// Seed 004's state × constraint matrix: (type, signed) → content, tags, importance
/// mutable. Each row runs on a fresh entry, once through gRPC and once through REST.
async fn state_constraint_matrix_over_grpc_and_rest(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed(&[11; 32]);
    let token = agent(cluster, "agent:matrix", &pair).await;
    let mut grpc = grpc_as(cluster, &token).await;
    let diary = new_diary(cluster, &token, "public").await;
    let matrix: [(&str, bool, bool, bool, bool); 12] = [
        ("episodic", false, true, true, true),
        ("episodic", true, false, false, true),
        ("semantic", false, true, true, true),
        ("semantic", true, false, false, true),
        ("procedural", false, true, true, true),
        ("procedural", true, false, false, true),
        ("reflection", false, true, true, true),
        ("reflection", true, false, false, false),
        ("identity", false, true, true, true),
        ("identity", true, false, false, false),
        ("soul", false, true, true, true),
        ("soul", true, false, false, false),
    ];
    for (entry_type, signed, content_ok, tags_ok, importance_ok) in matrix {
        for transport in ["grpc", "rest"] {
            let row = format!("{entry_type} signed={signed} via {transport}");
            let changes = [
                ("content", content_ok),
                ("tags", tags_ok),
                ("importance", importance_ok),
            ];
            for (field, allowed) in changes {
                let id = make_entry(&mut grpc, &diary, entry_type, signed, &pair).await;
                let ok = if transport == "grpc" {
                    let mut req = pb::UpdateEntryRequest {
                        id: id.clone(),
                        ..Default::default()
                    };
                    match field {
                        "content" => req.content = Some("changed".into()),
                        "tags" => {
                            req.set_tags = true;
                            req.tags = vec!["b".into()];
                        }
                        _ => req.importance = Some(9),
                    }
                    match grpc.update_entry(req).await {
                        Ok(_) => true,
                        Err(status) => {
                            assert_eq!(
                                status.code(),
                                tonic::Code::FailedPrecondition,
                                "{row} {field}"
                            );
                            false
                        }
                    }
                } else {
                    let body = match field {
                        "content" => json!({"content": "changed"}),
                        "tags" => json!({"tags": ["b"]}),
                        _ => json!({"importance": 9}),
                    };
                    let (status, reply) = rest(
                        cluster,
                        &token,
                        "PATCH",
                        &format!("/entries/{id}"),
                        Some(body),
                    )
                    .await;
                    assert!(
                        status == 200 || status == 409,
                        "{row} {field}: {status} {reply}"
                    );
                    status == 200
                };
                assert_eq!(ok, allowed, "{row}: {field}");
                let (_, verify) = rest(
                    cluster,
                    &token,
                    "GET",
                    &format!("/entries/{id}/verify"),
                    None,
                )
                .await;
                assert_eq!(verify["signed"], signed, "{row}");
                if signed {
                    assert_eq!(verify["valid"], true, "{row}: {verify}");
                }
            }
        }
    }
}

async fn diary_scoped_authorisation(cluster: &TestCluster) {
    let owner_pair = SigningKeyPair::from_seed(&[21; 32]);
    let owner = agent(cluster, "agent:owner", &owner_pair).await;
    let other = agent(
        cluster,
        "agent:other",
        &SigningKeyPair::from_seed(&[22; 32]),
    )
    .await;
    let diary = new_diary(cluster, &owner, "private").await;
    let (_, entry) = rest(
        cluster,
        &owner,
        "POST",
        &format!("/diaries/{diary}/entries"),
        Some(json!({"content": "private thought"})),
    )
    .await;
    let entry_id = s(&entry["id"]);
    let invisible = |expect: u16| {
        let (diary, entry_id, other) = (diary.clone(), entry_id.clone(), other.clone());
        async move {
            let (status, _) =
                rest(cluster, &other, "GET", &format!("/diaries/{diary}"), None).await;
            assert_eq!(status, expect, "GET diary");
            let (status, _) = rest(
                cluster,
                &other,
                "GET",
                &format!("/entries/{entry_id}"),
                None,
            )
            .await;
            assert_eq!(status, expect, "GET entry");
            let (status, _) = rest(
                cluster,
                &other,
                "GET",
                &format!("/diaries/{diary}/entries"),
                None,
            )
            .await;
            assert_eq!(status, expect, "list entries");
        }
    };
    invisible(404).await;
    let (_, listed) = rest(cluster, &other, "GET", "/diaries", None).await;
    assert_eq!(listed["items"], json!([]));
    let (_, found) = rest(
        cluster,
        &other,
        "POST",
        "/diaries/search",
        Some(json!({"query": "private"})),
    )
    .await;
    assert_eq!(found["total"], 0);

    // A reader share: pending grants nothing; accepted reads but cannot write.
    let (status, share) = rest(
        cluster,
        &owner,
        "POST",
        &format!("/diaries/{diary}/shares"),
        Some(json!({"agentId": "agent:other", "role": "reader"})),
    )
    .await;
    assert_eq!(status, 201, "{share}");
    assert_eq!(share["status"], "pending");
    invisible(404).await;
    let (status, share) = rest(
        cluster,
        &other,
        "POST",
        &format!("/diaries/{diary}/shares/accept"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{share}");
    assert_eq!(share["status"], "accepted");
    invisible(200).await;
    let (status, _) = rest(
        cluster,
        &other,
        "POST",
        &format!("/diaries/{diary}/entries"),
        Some(json!({"content": "intrusion"})),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = rest(
        cluster,
        &other,
        "PATCH",
        &format!("/entries/{entry_id}"),
        Some(json!({"content": "edited"})),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = rest(
        cluster,
        &other,
        "DELETE",
        &format!("/diaries/{diary}"),
        None,
    )
    .await;
    assert_eq!(status, 403);

    // Revoked: access is gone.
    let (status, share) = rest(
        cluster,
        &owner,
        "DELETE",
        &format!("/diaries/{diary}/shares/agent:other"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(share["status"], "revoked");
    invisible(404).await;

    // A writer share may write; moltnet visibility lets anyone read.
    rest(
        cluster,
        &owner,
        "POST",
        &format!("/diaries/{diary}/shares"),
        Some(json!({"agentId": "agent:other", "role": "writer"})),
    )
    .await;
    rest(
        cluster,
        &other,
        "POST",
        &format!("/diaries/{diary}/shares/accept"),
        Some(json!({})),
    )
    .await;
    let (status, _) = rest(
        cluster,
        &other,
        "POST",
        &format!("/diaries/{diary}/entries"),
        Some(json!({"content": "by a writer"})),
    )
    .await;
    assert_eq!(status, 201);
    let third = agent(
        cluster,
        "agent:third",
        &SigningKeyPair::from_seed(&[23; 32]),
    )
    .await;
    let (status, _) = rest(
        cluster,
        &third,
        "GET",
        &format!("/entries/{entry_id}"),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = rest(
        cluster,
        &owner,
        "PATCH",
        &format!("/diaries/{diary}"),
        Some(json!({"visibility": "moltnet"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = rest(
        cluster,
        &third,
        "GET",
        &format!("/entries/{entry_id}"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = rest(
        cluster,
        &third,
        "PATCH",
        &format!("/entries/{entry_id}"),
        Some(json!({"importance": 2})),
    )
    .await;
    assert_eq!(status, 403);
}

/// noema-client computes the CID and signing bytes locally and runs prepare → sign →
/// submit with a key that never leaves the agent.
async fn sdk_prepare_sign_submit(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed(&[31; 32]);
    let token = agent(cluster, "agent:sdk", &pair).await;
    let noema = noema_client::Noema::connect(&cluster.identity_endpoint, &token)
        .await
        .unwrap();
    let mut diary = noema.diary();
    let d = diary
        .create_diary(pb::CreateDiaryRequest {
            name: "sdk".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let e = diary
        .create_entry(pb::CreateEntryRequest {
            diary_id: d.id,
            content: "Content".into(),
            title: Some("Title".into()),
            tags: vec!["tag1".into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(e.content_hash, CID_1);
    let done = noema_client::diary::sign_entry(&mut diary, &e.id, &pair)
        .await
        .unwrap();
    assert_eq!(done.valid, Some(true));
    let v = diary
        .verify_entry(pb::VerifyEntryRequest { id: e.id })
        .await
        .unwrap()
        .into_inner();
    assert!(v.valid && v.signed && v.hash_matches && v.signature_valid);
    let chain = diary
        .verify_chain(pb::VerifyChainRequest {
            agent_id: "agent:sdk".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(chain.valid, "{:?}", chain.problems);
}

/// MoltNet's `GET /diaries/{id}/tags`: counts per tag, most used first then by tag (byte
/// order), with prefix (literal, case-sensitive), minCount and entryTypes filters, and
/// the same refusals as the entries listing.
async fn diary_tags_listing(cluster: &TestCluster) {
    let owner = agent(
        cluster,
        "agent:tagger",
        &SigningKeyPair::from_seed(&[41; 32]),
    )
    .await;
    let other = agent(
        cluster,
        "agent:tag-stranger",
        &SigningKeyPair::from_seed(&[42; 32]),
    )
    .await;
    let diary = new_diary(cluster, &owner, "private").await;
    let entries = [
        json!({"content": "one", "tags": ["rust", "db", "a_b"]}),
        json!({"content": "two", "entryType": "semantic", "tags": ["rust", "db"]}),
        json!({"content": "three", "entryType": "episodic", "tags": ["rust", "axb", "Rust"]}),
        json!({"content": "four", "entryType": "procedural", "tags": ["db", "a%c"]}),
        json!({"content": "five, no tags", "tags": null}),
        json!({"content": "six, empty tags", "entryType": "episodic", "tags": []}),
        json!({"content": "seven, tags absent", "entryType": "procedural"}),
    ];
    for body in entries {
        let (status, e) = rest(
            cluster,
            &owner,
            "POST",
            &format!("/diaries/{diary}/entries"),
            Some(body),
        )
        .await;
        assert_eq!(status, 201, "{e}");
    }
    let tags = |query: &'static str| {
        let (diary, owner) = (diary.clone(), owner.clone());
        async move {
            let (status, body) = rest(
                cluster,
                &owner,
                "GET",
                &format!("/diaries/{diary}/tags{query}"),
                None,
            )
            .await;
            assert_eq!(status, 200, "{query}: {body}");
            body
        }
    };
    let expect = |pairs: &[(&str, u64)]| {
        let list: Vec<Value> = pairs
            .iter()
            .map(|(tag, count)| json!({"tag": tag, "count": count}))
            .collect();
        json!({"tags": list, "total": pairs.len()})
    };

    // No filters: untagged entries add nothing; ties by tag in byte order.
    let all = expect(&[
        ("db", 3),
        ("rust", 3),
        ("Rust", 1),
        ("a%c", 1),
        ("a_b", 1),
        ("axb", 1),
    ]);
    assert_eq!(tags("").await, all);
    assert_eq!(tags("?prefix=").await, all);
    assert_eq!(tags("?minCount=1").await, all);

    // prefix: case-sensitive and literal (`_` and `%` are not wildcards).
    assert_eq!(tags("?prefix=ru").await, expect(&[("rust", 3)]));
    assert_eq!(tags("?prefix=R").await, expect(&[("Rust", 1)]));
    assert_eq!(tags("?prefix=a_").await, expect(&[("a_b", 1)]));
    assert_eq!(tags("?prefix=a%25").await, expect(&[("a%c", 1)]));
    assert_eq!(tags("?prefix=a%25c").await, expect(&[("a%c", 1)]));
    assert_eq!(tags("?prefix=%25").await, expect(&[]));
    assert_eq!(tags("?prefix=_").await, expect(&[]));
    assert_eq!(
        tags("?prefix=a").await,
        expect(&[("a%c", 1), ("a_b", 1), ("axb", 1)])
    );
    assert_eq!(tags("?prefix=rusty").await, expect(&[]));

    // minCount.
    assert_eq!(tags("?minCount=2").await, expect(&[("db", 3), ("rust", 3)]));
    assert_eq!(tags("?minCount=4").await, expect(&[]));

    // entryTypes: one, repeated, comma-separated, `[]` form; counts only those entries.
    assert_eq!(
        tags("?entryTypes=episodic").await,
        expect(&[("Rust", 1), ("axb", 1), ("rust", 1)])
    );
    let semantic_and_procedural = expect(&[("db", 3), ("rust", 2), ("a%c", 1), ("a_b", 1)]);
    assert_eq!(
        tags("?entryTypes=semantic&entryTypes=procedural").await,
        semantic_and_procedural
    );
    assert_eq!(
        tags("?entryTypes=semantic,procedural").await,
        semantic_and_procedural
    );
    assert_eq!(
        tags("?entryTypes[]=procedural&entryTypes[]=semantic").await,
        semantic_and_procedural
    );
    assert_eq!(tags("?entryTypes=reflection").await, expect(&[]));

    // Filters combine.
    assert_eq!(
        tags("?entryTypes=semantic&minCount=2&prefix=r").await,
        expect(&[("rust", 2)])
    );

    // Bad parameters: 400 validation problems like the other MoltNet routes.
    let refused = |query: &'static str| {
        let (diary, owner) = (diary.clone(), owner.clone());
        async move {
            let (status, body) = rest(
                cluster,
                &owner,
                "GET",
                &format!("/diaries/{diary}/tags{query}"),
                None,
            )
            .await;
            assert_eq!(status, 400, "{query}: {body}");
            assert_eq!(
                body["type"], "https://themolt.net/problems/validation-failed",
                "{query}: {body}"
            );
            assert_eq!(body["code"], "VALIDATION_FAILED", "{query}: {body}");
            assert_eq!(body["status"], 400, "{query}: {body}");
            s(&body["detail"])
        }
    };
    for query in [
        "?minCount=0",
        "?minCount=-1",
        "?minCount=abc",
        "?minCount=1.5",
        "?minCount=",
    ] {
        assert_eq!(
            refused(query).await,
            "minCount must be an integer of at least 1",
            "{query}"
        );
    }
    for query in [
        "?entryTypes=bogus",
        "?entryTypes=semantic,bogus",
        "?entryTypes=semantic,,episodic",
        "?entryTypes=",
    ] {
        let detail = refused(query).await;
        assert!(
            detail.contains("entry type") || detail.contains("entry_type"),
            "{query}: {detail}"
        );
    }
    // The entries listing refuses an unknown type the same way.
    let (status, listed) = rest(
        cluster,
        &owner,
        "GET",
        &format!("/diaries/{diary}/entries?entryType=bogus"),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(s(&listed["detail"]), refused("?entryTypes=bogus").await);

    // A diary whose only entry has no tags, and one with no entries.
    let bare = new_diary(cluster, &owner, "private").await;
    let (status, _) = rest(
        cluster,
        &owner,
        "GET",
        &format!("/diaries/{bare}/tags"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    rest(
        cluster,
        &owner,
        "POST",
        &format!("/diaries/{bare}/entries"),
        Some(json!({"content": "untagged", "tags": null})),
    )
    .await;
    let (status, body) = rest(
        cluster,
        &owner,
        "GET",
        &format!("/diaries/{bare}/tags"),
        None,
    )
    .await;
    assert_eq!((status, body), (200, json!({"tags": [], "total": 0})));

    // Unknown diary and a caller without access: exactly what the entries listing says.
    let same_as_entries = |token: String, diary: String| async move {
        let entries = rest(
            cluster,
            &token,
            "GET",
            &format!("/diaries/{diary}/entries"),
            None,
        )
        .await;
        let tags = rest(
            cluster,
            &token,
            "GET",
            &format!("/diaries/{diary}/tags?minCount=2"),
            None,
        )
        .await;
        assert_eq!(tags, entries, "tags vs entries for {diary}");
        entries
    };
    let (status, body) =
        same_as_entries(owner.clone(), "00000000-0000-4000-8000-000000000000".into()).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(s(&body["detail"]), "Diary not found or access denied");
    let (status, _) = same_as_entries(other.clone(), diary.clone()).await;
    assert_eq!(status, 404);
    // Validation comes after the access check, as on the entries listing.
    let (status, _) = rest(
        cluster,
        &other,
        "GET",
        &format!("/diaries/{diary}/tags?minCount=0"),
        None,
    )
    .await;
    assert_eq!(status, 404);

    // An accepted reader share reads the tags, like the entries.
    rest(
        cluster,
        &owner,
        "POST",
        &format!("/diaries/{diary}/shares"),
        Some(json!({"agentId": "agent:tag-stranger", "role": "reader"})),
    )
    .await;
    let (status, _) = same_as_entries(other.clone(), diary.clone()).await;
    assert_eq!(status, 404, "a pending share grants nothing");
    rest(
        cluster,
        &other,
        "POST",
        &format!("/diaries/{diary}/shares/accept"),
        Some(json!({})),
    )
    .await;
    let (status, body) = rest(
        cluster,
        &other,
        "GET",
        &format!("/diaries/{diary}/tags"),
        None,
    )
    .await;
    assert_eq!((status, body), (200, all));

    // Over gRPC the same query, and the same refusal.
    let mut grpc = grpc_as(cluster, &owner).await;
    let listed = grpc
        .list_diary_tags(pb::ListDiaryTagsRequest {
            diary_id: diary.clone(),
            prefix: "r".into(),
            min_count: Some(2),
            entry_types: vec!["semantic".into(), "episodic".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.total, 1);
    assert_eq!(
        listed.tags,
        vec![pb::DiaryTag {
            tag: "rust".into(),
            count: 3,
        }]
    );
    let err = grpc
        .list_diary_tags(pb::ListDiaryTagsRequest {
            diary_id: diary,
            min_count: Some(0),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
}

/// MoltNet's `DELETE /entries`: each id handled as a single delete in request order;
/// signed, missing and not deletable ids are skipped; invalid requests delete nothing.
async fn bulk_entry_delete(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed(&[31; 32]);
    let token = agent(cluster, "agent:bulk", &pair).await;
    let mut grpc = grpc_as(cluster, &token).await;
    let diary = new_diary(cluster, &token, "private").await;
    let other_pair = SigningKeyPair::from_seed(&[32; 32]);
    let other = agent(cluster, "agent:bulk-other", &other_pair).await;
    let mut other_grpc = grpc_as(cluster, &other).await;

    let d1 = make_entry(&mut grpc, &diary, "episodic", false, &pair).await;
    let d2 = make_entry(&mut grpc, &diary, "semantic", false, &pair).await;
    let d3 = make_entry(&mut grpc, &diary, "procedural", false, &pair).await;
    let signed = make_entry(&mut grpc, &diary, "semantic", true, &pair).await;
    // A relation from a draft to the signed entry goes with the draft.
    grpc.create_relation(pb::CreateRelationRequest {
        source_id: d1.clone(),
        target_id: signed.clone(),
        relation: "references".into(),
        status: "accepted".into(),
    })
    .await
    .unwrap();
    // Another agent's entries: one in a diary the caller cannot see, one the caller only
    // reads through an accepted reader share.
    let hidden_diary = new_diary(cluster, &other, "private").await;
    let hidden = make_entry(
        &mut other_grpc,
        &hidden_diary,
        "episodic",
        false,
        &other_pair,
    )
    .await;
    let shared_diary = new_diary(cluster, &other, "private").await;
    let readable = make_entry(
        &mut other_grpc,
        &shared_diary,
        "episodic",
        false,
        &other_pair,
    )
    .await;
    let (status, share) = rest(
        cluster,
        &other,
        "POST",
        &format!("/diaries/{shared_diary}/shares"),
        Some(json!({"agentId": "agent:bulk", "role": "reader"})),
    )
    .await;
    assert_eq!(status, 201, "{share}");
    let (status, share) = rest(
        cluster,
        &token,
        "POST",
        &format!("/diaries/{shared_diary}/shares/accept"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{share}");
    let (status, _) = rest(
        cluster,
        &token,
        "GET",
        &format!("/entries/{readable}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "the share lets the caller read");
    let missing = "00000000-0000-4000-8000-000000000000";
    let get = |token: String, id: String| async move {
        rest(cluster, &token, "GET", &format!("/entries/{id}"), None).await
    };
    let (_, signed_before) = get(token.clone(), signed.clone()).await;

    // Every invalid request: 400 validation problem, nothing deleted.
    let too_many: Vec<String> = std::iter::once(d3.clone())
        .chain((0..100).map(|n| format!("00000000-0000-4000-8000-{n:012}")))
        .collect();
    let invalid: Vec<(&str, String, String)> = vec![
        ("not JSON", "ids: [".into(), "invalid JSON: ".into()),
        (
            "ids missing",
            json!({}).to_string(),
            "ids must list 1-100 entry ids, got 0".into(),
        ),
        (
            "ids null",
            json!({"ids": null}).to_string(),
            "ids must list 1-100 entry ids, got 0".into(),
        ),
        (
            "ids not an array",
            json!({"ids": d3}).to_string(),
            format!("ids must be an array of entry ids, got \"{d3}\""),
        ),
        (
            "ids empty",
            json!({"ids": []}).to_string(),
            "ids must list 1-100 entry ids, got 0".into(),
        ),
        (
            "101 ids",
            json!({"ids": too_many}).to_string(),
            "ids must list 1-100 entry ids, got 101".into(),
        ),
        (
            "not a UUID",
            json!({"ids": [d3, "not-a-uuid"]}).to_string(),
            "ids[1] must be a UUID, got \"not-a-uuid\"".into(),
        ),
        (
            "not a string",
            json!({"ids": [d3, 7]}).to_string(),
            "ids[1] must be a UUID string, got 7".into(),
        ),
        (
            "duplicate",
            json!({"ids": [d3, d1, d3]}).to_string(),
            format!("ids must be unique: ids[2] repeats ids[0] ({d3})"),
        ),
        (
            "duplicate in another case",
            json!({"ids": [d3, d3.to_uppercase()]}).to_string(),
            format!("ids must be unique: ids[1] repeats ids[0] ({d3})"),
        ),
    ];
    let client = client_as(&token);
    for (case, body, detail) in invalid {
        let response = client
            .delete(format!("{}/entries", cluster.rest_url))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 400, "{case}");
        let problem: Value = response.json().await.unwrap();
        assert_eq!(
            problem["type"], "https://themolt.net/problems/validation-failed",
            "{case}: {problem}"
        );
        assert_eq!(problem["title"], "Validation Failed", "{case}: {problem}");
        assert_eq!(problem["code"], "VALIDATION_FAILED", "{case}: {problem}");
        assert_eq!(problem["status"], 400, "{case}: {problem}");
        let text = s(&problem["detail"]);
        assert!(
            text == detail || (detail.ends_with(": ") && text.starts_with(&detail)),
            "{case}: {problem}"
        );
    }
    for id in [&d1, &d2, &d3, &signed] {
        let (status, _) = get(token.clone(), id.clone()).await;
        assert_eq!(status, 200, "an invalid request deleted {id}");
    }

    // Without a token, or without diary:manage, the route is refused like the others.
    let anonymous = noema_tools::tls::client()
        .unwrap()
        .delete(format!("{}/entries", cluster.rest_url))
        .json(&json!({"ids": [d3]}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let reader = cluster
        .issue_token("agent:bulk", &["diary:read", "diary:write"])
        .await
        .unwrap();
    let (status, problem) = rest(
        cluster,
        &reader,
        "DELETE",
        "/entries",
        Some(json!({"ids": [d3]})),
    )
    .await;
    assert_eq!(status, 403, "{problem}");

    // The mix: drafts deleted, the rest skipped, both in request order.
    let ids = json!([d1, signed, missing, d2, hidden, readable]);
    let (status, reply) = rest(
        cluster,
        &token,
        "DELETE",
        "/entries",
        Some(json!({"ids": ids})),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply,
        json!({"deleted": [d1, d2], "skipped": [signed, missing, hidden, readable]})
    );
    for id in [&d1, &d2] {
        let (status, problem) = get(token.clone(), id.clone()).await;
        assert_eq!(status, 404, "{id}: {problem}");
        assert_eq!(problem["detail"], "Diary entry not found");
    }
    let (status, signed_after) = get(token.clone(), signed.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(signed_after, signed_before, "the signed entry is untouched");
    for (owner, id) in [(&token, &d3), (&other, &hidden), (&other, &readable)] {
        let (status, _) = get(owner.clone(), id.clone()).await;
        assert_eq!(status, 200, "{id} is untouched");
    }
    let relations = grpc
        .list_relations(pb::ListRelationsRequest {
            entry_id: signed.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        relations.total, 0,
        "the deleted draft's relation went with it"
    );

    // One audit entry per deleted entry, as a single delete writes; none for skipped ids.
    let audit = cluster
        .identity()
        .await
        .unwrap()
        .list_audit(noema_proto::common::v1::ListAuditRequest {
            page: Some(noema_proto::common::v1::PageRequest {
                page_size: 100,
                page_token: String::new(),
            }),
            oldest_first: false,
        })
        .await
        .unwrap()
        .into_inner()
        .entries;
    let deletions: Vec<(&str, &str, &str)> = audit
        .iter()
        .filter(|e| e.action == "delete_entry" && e.actor == "agent:bulk")
        .map(|e| {
            (
                e.actor.as_str(),
                e.target_type.as_str(),
                e.target_id.as_str(),
            )
        })
        .collect();
    // Newest first.
    assert_eq!(
        deletions,
        vec![
            ("agent:bulk", "entry", d2.as_str()),
            ("agent:bulk", "entry", d1.as_str()),
        ]
    );
    for pair in audit.windows(2) {
        assert_eq!(pair[0].prev_hash, pair[1].hash, "the audit chain holds");
    }

    // Already gone: skipped. An id in another case is the same entry.
    let (status, reply) = rest(
        cluster,
        &token,
        "DELETE",
        "/entries",
        Some(json!({"ids": [d1, d3.to_uppercase()]})),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply, json!({"deleted": [d3], "skipped": [d1]}));
    let (status, _) = get(token.clone(), d3.clone()).await;
    assert_eq!(status, 404);
}

/// MoltNet's relation walks (compat §7 `expand=relations`, §10 `depth`): A→B→C→D plus a
/// side branch E→B, E→F, walked from A at depths 1-3, as the entry's `relations` and as
/// the depth > 1 relation list; status filter; 400 for bad depth/expand; access first.
async fn relation_walks(cluster: &TestCluster) {
    let token = agent(
        cluster,
        "agent:walker",
        &SigningKeyPair::from_seed(&[51; 32]),
    )
    .await;
    let stranger = agent(
        cluster,
        "agent:walk-stranger",
        &SigningKeyPair::from_seed(&[52; 32]),
    )
    .await;
    let diary = new_diary(cluster, &token, "private").await;
    let mut ids = Vec::new();
    for name in ["A", "B", "C", "D", "E", "F", "G"] {
        let (status, e) = rest(
            cluster,
            &token,
            "POST",
            &format!("/diaries/{diary}/entries"),
            Some(json!({"content": format!("entry {name}")})),
        )
        .await;
        assert_eq!(status, 201, "{e}");
        ids.push(s(&e["id"]));
    }
    let [a, b, c, d, e, f, g] = <[String; 7]>::try_from(ids).unwrap();
    // Created in this order, a few ms apart, so newest-first within a level is r4 > r2
    // and r5 > r3.
    let relate = async |source: &str, target: &str, relation: &str, status: &str| {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let (code, r) = rest(
            cluster,
            &token,
            "POST",
            &format!("/entries/{source}/relations"),
            Some(json!({"targetId": target, "relation": relation, "status": status})),
        )
        .await;
        assert_eq!(code, 201, "{r}");
        r
    };
    let r1 = relate(&a, &b, "elaborates", "accepted").await;
    let r2 = relate(&b, &c, "supports", "accepted").await;
    let r3 = relate(&c, &d, "references", "proposed").await;
    let r4 = relate(&e, &b, "caused_by", "proposed").await;
    let r5 = relate(&e, &f, "supports", "accepted").await;
    let walked = |r: &Value, depth: u32, parent: Option<&Value>| {
        let mut r = r.clone();
        r["depth"] = json!(depth);
        r["parentRelationId"] = parent.map_or(Value::Null, |p| p["id"].clone());
        r
    };
    let get =
        |path: String, who: String| async move { rest(cluster, &who, "GET", &path, None).await };

    let (status, plain) = get(format!("/entries/{a}"), token.clone()).await;
    assert_eq!(status, 200, "{plain}");
    assert!(plain.get("relations").is_none(), "{plain}");
    let expected = [
        (1, vec![walked(&r1, 1, None)]),
        (
            2,
            vec![
                walked(&r1, 1, None),
                walked(&r4, 2, Some(&r1)),
                walked(&r2, 2, Some(&r1)),
            ],
        ),
        (
            3,
            vec![
                walked(&r1, 1, None),
                walked(&r4, 2, Some(&r1)),
                walked(&r2, 2, Some(&r1)),
                walked(&r5, 3, Some(&r4)),
                walked(&r3, 3, Some(&r2)),
            ],
        ),
    ];
    for (depth, items) in expected {
        let (status, body) = get(
            format!("/entries/{a}?expand=relations&depth={depth}"),
            token.clone(),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let mut entry = body.clone();
        let relations = entry.as_object_mut().unwrap().remove("relations").unwrap();
        assert_eq!(entry, plain, "depth {depth}: the entry itself is unchanged");
        assert_eq!(
            relations,
            json!({"requestedDepth": depth, "maxDepth": depth, "items": items}),
            "depth {depth}"
        );
    }
    // depth defaults to 1; no relations → maxDepth 0.
    let (_, body) = get(format!("/entries/{a}?expand=relations"), token.clone()).await;
    assert_eq!(
        body["relations"],
        json!({"requestedDepth": 1, "maxDepth": 1, "items": [walked(&r1, 1, None)]})
    );
    let (_, body) = get(
        format!("/entries/{g}?expand=relations&depth=3"),
        token.clone(),
    )
    .await;
    assert_eq!(
        body["relations"],
        json!({"requestedDepth": 3, "maxDepth": 0, "items": []})
    );

    // The relation list at depth 2: every edge, no depth fields, limit = total = count;
    // relation, direction, limit and offset are ignored, status is honoured.
    let all2 = json!({"items": [r1, r4, r2], "total": 3, "limit": 3, "offset": 0});
    for query in [
        "depth=2",
        "depth=2&relation=references&direction=as_target&limit=1&offset=5",
    ] {
        let (status, body) = get(format!("/entries/{a}/relations?{query}"), token.clone()).await;
        assert_eq!((status, body), (200, all2.clone()), "{query}");
    }
    let (status, body) = get(
        format!("/entries/{a}/relations?depth=2&status=accepted"),
        token.clone(),
    )
    .await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"items": [r1, r2], "total": 2, "limit": 2, "offset": 0})
        )
    );
    let (_, body) = get(
        format!("/entries/{a}/relations?depth=3&status=proposed"),
        token.clone(),
    )
    .await;
    assert_eq!(
        body,
        json!({"items": [], "total": 0, "limit": 0, "offset": 0}),
        "the only relation touching A is accepted"
    );
    // depth 1 is today's filtered page.
    let (_, today) = get(format!("/entries/{b}/relations"), token.clone()).await;
    let (_, depth1) = get(format!("/entries/{b}/relations?depth=1"), token.clone()).await;
    assert_eq!(today, depth1);
    assert_eq!(
        today,
        json!({"items": [r4, r2, r1], "total": 3, "limit": 50, "offset": 0})
    );

    // Bad depth or expand: 400 validation-failed.
    for path in [
        format!("/entries/{a}?depth=0"),
        format!("/entries/{a}?depth=4"),
        format!("/entries/{a}?depth=x"),
        format!("/entries/{a}?expand=relations&depth=0"),
        format!("/entries/{a}?expand=relations&depth=4"),
        format!("/entries/{a}?expand=relations&depth=x"),
        format!("/entries/{a}?expand=children"),
        format!("/entries/{a}/relations?depth=0"),
        format!("/entries/{a}/relations?depth=4"),
        format!("/entries/{a}/relations?depth=x"),
        format!("/entries/{a}/relations?depth=-1"),
    ] {
        let (status, problem) = get(path.clone(), token.clone()).await;
        assert_eq!(status, 400, "{path}: {problem}");
        assert_eq!(
            problem["type"], "https://themolt.net/problems/validation-failed",
            "{path}: {problem}"
        );
        assert_eq!(problem["code"], "VALIDATION_FAILED", "{path}: {problem}");
        let detail = s(&problem["detail"]);
        assert!(
            detail == "depth must be an integer from 1 to 3"
                || detail == "expand \"children\" is not one of relations",
            "{path}: {problem}"
        );
    }

    // Access as GetEntry / ListRelations: a stranger gets the same 404, before validation.
    let (status, plain_404) = get(format!("/entries/{a}"), stranger.clone()).await;
    assert_eq!(status, 404, "{plain_404}");
    for path in [
        format!("/entries/{a}?expand=relations&depth=2"),
        format!("/entries/{a}?depth=x"),
        format!("/entries/{a}/relations?depth=2"),
        format!("/entries/{a}/relations?depth=x"),
    ] {
        let (status, body) = get(path.clone(), stranger.clone()).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["detail"], plain_404["detail"], "{path}");
    }

    // Both query parameters are in /openapi.json.
    let (status, openapi) = get("/openapi.json".into(), token.clone()).await;
    assert_eq!(status, 200);
    for (path, name) in [
        ("/entries/{id}", "expand"),
        ("/entries/{id}", "depth"),
        ("/entries/{id}/relations", "depth"),
    ] {
        let parameters = openapi["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap();
        assert!(
            parameters
                .iter()
                .any(|p| p["name"] == name && p["in"] == "query"),
            "{path} {name}: {parameters:?}"
        );
    }

    // The same walk over gRPC.
    let mut grpc = grpc_as(cluster, &token).await;
    let walk = grpc
        .walk_relations(pb::WalkRelationsRequest {
            entry_id: e.clone(),
            depth: Some(2),
            status: "accepted".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let got: Vec<(String, u32, String)> = walk
        .items
        .iter()
        .map(|w| {
            (
                w.relation.clone().unwrap().id,
                w.depth,
                w.parent_relation_id.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (s(&r5["id"]), 1, String::new()),
            // F has no other relation; E's proposed r4 is filtered out.
        ]
    );
    assert_eq!((walk.requested_depth, walk.max_depth), (2, 1));
    let refused = grpc
        .walk_relations(pb::WalkRelationsRequest {
            entry_id: d.clone(),
            depth: Some(4),
            status: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
}

/// MoltNet's pending-request limit: the 11th pending signing request of an agent is a 429
/// whose `Retry-After` header and `retryAfter` field say the same number of seconds.
async fn pending_signing_request_limit_says_when_to_retry(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed(&[77; 32]);
    let token = agent(cluster, "agent:impatient", &pair).await;
    for n in 0..10 {
        let (status, body) = rest(
            cluster,
            &token,
            "POST",
            "/crypto/signing-requests",
            Some(json!({"message": format!("message {n}")})),
        )
        .await;
        assert_eq!(status, 201, "request {n}: {body}");
    }
    let response = client_as(&token)
        .post(format!("{}/crypto/signing-requests", cluster.rest_url))
        .json(&json!({"message": "one too many"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    let header: u64 = response
        .headers()
        .get("retry-after")
        .expect("a 429 carries Retry-After")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["type"],
        "https://themolt.net/problems/signing-request-limit-reached"
    );
    assert_eq!(body["retryAfter"], json!(header), "{body}");
    assert!(header > 0, "{body}");
}

/// MoltNet's public routes answer without a token, and only what MoltNet's answer:
/// `POST /crypto/verify` → `{valid}`, `GET /agents/{fingerprint}` → `{fingerprint,
/// publicKey}`, `POST /agents/{fingerprint}/verify` → `{valid, signer?}`. A bad token is
/// still refused, and writes still need one.
async fn moltnets_public_verifiers_answer_without_a_token(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed(&[91; 32]);
    let fingerprint = pair.public_key().fingerprint();
    let token = agent(cluster, "agent:public-signer", &pair).await;
    let (status, request) = rest(
        cluster,
        &token,
        "POST",
        "/crypto/signing-requests",
        Some(json!({"message": "said in public"})),
    )
    .await;
    assert_eq!(status, 201, "{request}");
    let input = data_encoding::BASE64
        .decode(s(&request["signingInput"]).as_bytes())
        .unwrap();
    let signature = pair.sign(&input).to_base64();
    let (status, done) = rest(
        cluster,
        &token,
        "POST",
        &format!("/crypto/signing-requests/{}/sign", s(&request["id"])),
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!((status, &done["valid"]), (200, &json!(true)), "{done}");

    let anonymous = |method: &str, path: &str, body: Option<Value>| {
        let url = format!("{}{path}", cluster.rest_url);
        let request = match method {
            "GET" => noema_e2e::anonymous().get(url),
            _ => noema_e2e::anonymous().post(url),
        };
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        async move {
            let response = request.send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    let verify = json!({"signature": signature});
    assert_eq!(
        anonymous("POST", "/crypto/verify", Some(verify.clone())).await,
        (200, json!({"valid": true}))
    );
    assert_eq!(
        anonymous("GET", &format!("/agents/{fingerprint}"), None).await,
        (
            200,
            json!({"fingerprint": fingerprint, "publicKey": pair.public_key().to_prefixed()})
        )
    );
    assert_eq!(
        anonymous(
            "POST",
            &format!("/agents/{}/verify", fingerprint.to_lowercase()),
            Some(verify.clone())
        )
        .await,
        (
            200,
            json!({"valid": true, "signer": {"fingerprint": fingerprint}})
        )
    );
    let stranger = SigningKeyPair::from_seed(&[92; 32])
        .public_key()
        .fingerprint();
    assert_eq!(
        anonymous("POST", &format!("/agents/{stranger}/verify"), Some(verify)).await,
        (200, json!({"valid": false}))
    );
    let (status, _) = anonymous("GET", "/agents/0000-0000-0000-0000", None).await;
    assert_eq!(status, 404);

    // A token, when sent, is checked; and nothing is written without one.
    let (status, _) = rest(
        cluster,
        "noema_not_a_real_token",
        "POST",
        "/crypto/verify",
        Some(json!({"signature": signature})),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = anonymous(
        "POST",
        "/crypto/signing-requests",
        Some(json!({"message": "anonymous"})),
    )
    .await;
    assert_eq!(status, 401);
}

/// A request without a token: (status, Cache-Control, body).
async fn anonymous(
    cluster: &TestCluster,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, String, Value) {
    let client = noema_e2e::anonymous();
    let url = format!("{}{path}", cluster.rest_url);
    let request = match method {
        "GET" => client.get(&url),
        "POST" => client.post(&url),
        "PATCH" => client.patch(&url),
        "DELETE" => client.delete(&url),
        other => panic!("method {other}"),
    };
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let cache = response
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, cache, response.json().await.unwrap_or(Value::Null))
}

/// MoltNet's grants: a manager hands out writer or manager access at once; one role per
/// subject; re-granting is idempotent, revoking too; only managers grant and revoke; no
/// token changes nothing.
async fn moltnet_grants(cluster: &TestCluster) {
    let owner = agent(
        cluster,
        "agent:g-owner",
        &SigningKeyPair::from_seed(&[61; 32]),
    )
    .await;
    let writer = agent(
        cluster,
        "agent:g-writer",
        &SigningKeyPair::from_seed(&[62; 32]),
    )
    .await;
    let manager = agent(
        cluster,
        "agent:g-manager",
        &SigningKeyPair::from_seed(&[63; 32]),
    )
    .await;
    let helper = agent(
        cluster,
        "agent:g-helper",
        &SigningKeyPair::from_seed(&[64; 32]),
    )
    .await;
    let diary = new_diary(cluster, &owner, "private").await;
    let grants = format!("/diaries/{diary}/grants");
    let grant = |subject: &str, role: &str| json!({"subjectId": subject, "subjectNs": "Agent", "role": role});
    let write_entry = |token: String| {
        let path = format!("/diaries/{diary}/entries");
        async move {
            rest(
                cluster,
                &token,
                "POST",
                &path,
                Some(json!({"content": "by a grantee"})),
            )
            .await
            .0
        }
    };

    // Without a token nothing is read or changed.
    for (method, body) in [
        ("POST", Some(grant("agent:g-writer", "writer"))),
        ("GET", None),
        ("DELETE", Some(grant("agent:g-writer", "writer"))),
    ] {
        let (status, _, error) = anonymous(cluster, method, &grants, body).await;
        assert_eq!(status, 401, "{method} {error}");
    }
    let (status, listed) = rest(cluster, &owner, "GET", &grants, None).await;
    assert_eq!((status, &listed), (200, &json!({"grants": []})));
    assert_ne!(write_entry(writer.clone()).await, 201);

    // Only managers grant, revoke or (readers) list, also for a diary that does not exist.
    let (status, error) = rest(
        cluster,
        &writer,
        "POST",
        &grants,
        Some(grant("agent:g-writer", "writer")),
    )
    .await;
    assert_eq!(
        (status, s(&error["detail"]).as_str()),
        (403, "Only diary managers can grant access")
    );
    let (status, error) = rest(cluster, &writer, "GET", &grants, None).await;
    assert_eq!(
        (status, s(&error["detail"]).as_str()),
        (403, "No read access to this diary")
    );
    let (status, error) = rest(
        cluster,
        &writer,
        "DELETE",
        &grants,
        Some(grant("agent:g-writer", "writer")),
    )
    .await;
    assert_eq!(
        (status, s(&error["detail"]).as_str()),
        (403, "Only diary managers can revoke access")
    );
    let missing = "/diaries/00000000-0000-4000-8000-000000000000/grants";
    let (status, _) = rest(
        cluster,
        &owner,
        "POST",
        missing,
        Some(grant("agent:g-writer", "writer")),
    )
    .await;
    assert_eq!(status, 403);

    // A writer grant lets the grantee write and read, and nothing more.
    let (status, granted) = rest(
        cluster,
        &owner,
        "POST",
        &grants,
        Some(grant("agent:g-writer", "writer")),
    )
    .await;
    assert_eq!(
        (status, &granted),
        (201, &grant("agent:g-writer", "writer"))
    );
    assert_eq!(write_entry(writer.clone()).await, 201);
    let (status, listed) = rest(cluster, &writer, "GET", &grants, None).await;
    assert_eq!(
        (status, &listed),
        (200, &json!({"grants": [grant("agent:g-writer", "writer")]}))
    );
    let (status, _) = rest(
        cluster,
        &writer,
        "POST",
        &grants,
        Some(grant("agent:g-helper", "writer")),
    )
    .await;
    assert_eq!(status, 403, "a writer does not manage");

    // Re-granting the same role is idempotent; another role is a conflict.
    let (status, again) = rest(
        cluster,
        &owner,
        "POST",
        &grants,
        Some(grant("agent:g-writer", "writer")),
    )
    .await;
    assert_eq!((status, &again), (201, &grant("agent:g-writer", "writer")));
    let (status, conflict) = rest(
        cluster,
        &owner,
        "POST",
        &grants,
        Some(grant("agent:g-writer", "manager")),
    )
    .await;
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(
        s(&conflict["detail"]),
        "Subject already has 'writer' access on this diary. Revoke it first."
    );
    assert_eq!(conflict["conflict"], json!({}));
    let (status, error) = rest(
        cluster,
        &owner,
        "POST",
        &grants,
        Some(json!({"subjectId": "agent:g-helper", "subjectNs": "Human", "role": "writer"})),
    )
    .await;
    assert_eq!(status, 400, "{error}");
    let (status, _) = rest(
        cluster,
        &owner,
        "POST",
        &grants,
        Some(grant("agent:g-helper", "reader")),
    )
    .await;
    assert_eq!(status, 400);

    // A manager grant lets the grantee grant and revoke.
    let (status, _) = rest(
        cluster,
        &owner,
        "POST",
        &grants,
        Some(grant("agent:g-manager", "manager")),
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = rest(
        cluster,
        &manager,
        "POST",
        &grants,
        Some(grant("agent:g-helper", "writer")),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(write_entry(helper.clone()).await, 201);
    let (status, done) = rest(
        cluster,
        &manager,
        "DELETE",
        &grants,
        Some(grant("agent:g-helper", "writer")),
    )
    .await;
    assert_eq!((status, &done), (200, &json!({"revoked": true})));
    assert_ne!(write_entry(helper.clone()).await, 201);
    let (_, listed) = rest(cluster, &owner, "GET", &grants, None).await;
    let mut roles: Vec<(String, String)> = listed["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (s(&g["subjectId"]), s(&g["role"])))
        .collect();
    roles.sort();
    assert_eq!(
        roles,
        [
            ("agent:g-manager".to_owned(), "manager".to_owned()),
            ("agent:g-writer".to_owned(), "writer".to_owned())
        ]
    );

    // Revoking is idempotent, and a revoked writer can write no more.
    for _ in 0..2 {
        let (status, done) = rest(
            cluster,
            &owner,
            "DELETE",
            &grants,
            Some(grant("agent:g-writer", "writer")),
        )
        .await;
        assert_eq!((status, &done), (200, &json!({"revoked": true})));
    }
    assert_ne!(write_entry(writer.clone()).await, 201);
    let (_, listed) = rest(cluster, &owner, "GET", &grants, None).await;
    assert_eq!(
        listed,
        json!({"grants": [grant("agent:g-manager", "manager")]})
    );
}

/// MoltNet's public feed, without a token: only public diaries, suspicious entries only
/// when asked for, cursor paging that walks every entry once, MoltNet's errors and cache
/// headers; and no write route answers without a token.
async fn public_feed_without_a_token(cluster: &TestCluster) {
    let pair = SigningKeyPair::from_seed(&[71; 32]);
    let token = agent(cluster, "agent:publisher", &pair).await;
    let public = new_diary(cluster, &token, "public").await;
    let private = new_diary(cluster, &token, "private").await;
    let moltnet = new_diary(cluster, &token, "moltnet").await;
    let create = |diary: &str, content: String, tags: Value| {
        let path = format!("/diaries/{diary}/entries");
        let token = token.clone();
        async move {
            let (status, e) = rest(
                cluster,
                &token,
                "POST",
                &path,
                Some(json!({"content": content, "tags": tags})),
            )
            .await;
            assert_eq!(status, 201, "{e}");
            s(&e["id"])
        }
    };
    let mut public_ids = Vec::new();
    for n in 0..7 {
        let tags = if n % 2 == 0 {
            json!(["even"])
        } else {
            json!(null)
        };
        public_ids.push(create(&public, format!("public harbour note {n}"), tags).await);
    }
    let private_id = create(&private, "private harbour note".into(), json!(["even"])).await;
    create(&moltnet, "moltnet harbour note".into(), json!(["even"])).await;
    let suspicious = public_ids[3].clone();
    let (status, _) = rest(
        cluster,
        &token,
        "PATCH",
        &format!("/entries/{suspicious}"),
        Some(json!({"injectionRisk": true})),
    )
    .await;
    assert_eq!(status, 200);

    // Newest first: the entries of the public diary only, the suspicious one hidden.
    let (status, cache, feed) = anonymous(cluster, "GET", "/public/feed", None).await;
    assert_eq!(
        (status, cache.as_str()),
        (200, "public, max-age=300"),
        "{feed}"
    );
    assert_eq!(feed["nextCursor"], Value::Null);
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| s(&e["id"]))
            .collect()
    };
    let newest_first: Vec<String> = public_ids.iter().rev().cloned().collect();
    let unsuspicious: Vec<String> = newest_first
        .iter()
        .filter(|id| **id != suspicious)
        .cloned()
        .collect();
    assert_eq!(ids(&feed), unsuspicious);
    let first = &feed["items"][0];
    assert_eq!(
        first["author"],
        json!({"fingerprint": pair.public_key().fingerprint(), "publicKey": pair.public_key().to_prefixed()})
    );
    assert_eq!(
        (
            first["content"].clone(),
            first["tags"].clone(),
            first["title"].clone()
        ),
        (json!("public harbour note 6"), json!(["even"]), Value::Null)
    );
    assert_eq!(feed["items"][1]["tags"], Value::Null);
    let (_, _, everything) =
        anonymous(cluster, "GET", "/public/feed?includeSuspicious=true", None).await;
    assert_eq!(ids(&everything), newest_first);
    let (_, _, tagged) = anonymous(
        cluster,
        "GET",
        "/public/feed?tag=even&includeSuspicious=true",
        None,
    )
    .await;
    assert_eq!(
        ids(&tagged),
        newest_first
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, id)| id.clone())
            .collect::<Vec<_>>()
    );

    // Paging by cursor walks every entry exactly once, in order.
    let mut walked = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/public/feed?limit=2&includeSuspicious=true&cursor={c}"),
            None => "/public/feed?limit=2&includeSuspicious=true".to_owned(),
        };
        let (status, _, page) = anonymous(cluster, "GET", &path, None).await;
        assert_eq!(status, 200, "{page}");
        walked.extend(ids(&page));
        pages += 1;
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages < 10, "the cursor does not advance");
    }
    assert_eq!(pages, 4);
    assert_eq!(walked, newest_first);

    // MoltNet's refusals.
    for bad in [
        "cursor=bm90LWEtY3Vyc29y",
        "cursor=%25%25",
        "limit=101",
        "limit=0",
    ] {
        let (status, _, error) =
            anonymous(cluster, "GET", &format!("/public/feed?{bad}"), None).await;
        assert_eq!(status, 400, "{bad}: {error}");
        if bad.starts_with("cursor") {
            assert_eq!(s(&error["detail"]), "Invalid cursor", "{bad}");
        }
    }

    // One entry: any entry of a public diary, none of another.
    let (status, cache, one) =
        anonymous(cluster, "GET", &format!("/public/entry/{suspicious}"), None).await;
    assert_eq!(
        (status, cache.as_str()),
        (200, "public, max-age=3600"),
        "{one}"
    );
    assert_eq!(
        (one["id"].clone(), one["injectionRisk"].clone()),
        (json!(suspicious), json!(true))
    );
    assert_eq!(one["entryType"], "semantic");
    for hidden in [private_id.as_str(), "00000000-0000-4000-8000-000000000000"] {
        let (status, _, error) =
            anonymous(cluster, "GET", &format!("/public/entry/{hidden}"), None).await;
        assert_eq!(
            (status, s(&error["detail"]).as_str()),
            (404, "Entry not found"),
            "{error}"
        );
    }

    // Search: public diaries only, the query echoed.
    let (status, cache, found) = anonymous(
        cluster,
        "GET",
        "/public/feed/search?q=harbour&limit=50",
        None,
    )
    .await;
    assert_eq!(
        (status, cache.as_str()),
        (200, "public, max-age=60"),
        "{found}"
    );
    assert_eq!(found["query"], "harbour");
    let mut found_ids = ids(&found);
    found_ids.sort();
    let mut expected = unsuspicious.clone();
    expected.sort();
    assert_eq!(found_ids, expected);
    let (status, _, _) = anonymous(cluster, "GET", "/public/feed/search?q=h", None).await;
    assert_eq!(status, 400);
    // A NUL separates words like a space (it used to end SQLite's FTS5 query: a 500).
    let (status, _, found) = anonymous(
        cluster,
        "GET",
        "/public/feed/search?q=%00harbour%00&limit=50",
        None,
    )
    .await;
    assert_eq!(status, 200, "{found}");
    let mut found_ids = ids(&found);
    found_ids.sort();
    assert_eq!(found_ids, expected);

    // No route that writes answers without a token, and nothing changed.
    let entry = &public_ids[0];
    for (method, path, body) in [
        ("POST", "/diaries".to_owned(), json!({"name": "anonymous"})),
        (
            "PATCH",
            format!("/diaries/{public}"),
            json!({"name": "renamed"}),
        ),
        ("DELETE", format!("/diaries/{public}"), json!({})),
        (
            "POST",
            format!("/diaries/{public}/entries"),
            json!({"content": "anonymous"}),
        ),
        (
            "PATCH",
            format!("/entries/{entry}"),
            json!({"content": "edited"}),
        ),
        ("DELETE", format!("/entries/{entry}"), json!({})),
        ("DELETE", "/entries".to_owned(), json!({"ids": [entry]})),
        (
            "POST",
            format!("/diaries/{public}/grants"),
            json!({"subjectId": "agent:x", "subjectNs": "Agent", "role": "writer"}),
        ),
        (
            "DELETE",
            format!("/diaries/{public}/grants"),
            json!({"subjectId": "agent:x", "subjectNs": "Agent", "role": "writer"}),
        ),
        (
            "POST",
            format!("/diaries/{public}/shares"),
            json!({"agentId": "agent:x", "role": "writer"}),
        ),
        (
            "POST",
            format!("/entries/{entry}/relations"),
            json!({"targetId": public_ids[1], "relation": "references"}),
        ),
    ] {
        let (status, _, error) = anonymous(cluster, method, &path, Some(body)).await;
        assert_eq!(status, 401, "{method} {path}: {error}");
    }
    let (_, _, after) =
        anonymous(cluster, "GET", "/public/feed?includeSuspicious=true", None).await;
    assert_eq!(ids(&after), newest_first);
    assert_eq!(after["items"][6]["content"], "public harbour note 0");
}

/// The signature chain catches what someone with database access does under the service:
/// a signed entry edited in place (its CID left as it was, or changed) or deleted.
async fn tampering_breaks_the_signature_chain(cluster: &TestCluster) {
    let spec = cluster.registry.get("identity").unwrap();
    let url = cluster.config().database_url(spec);
    let db = noema_store::Database::connect(&url).await.unwrap();
    // The immutability triggers stand in the way; an intruder removes them first.
    match &db {
        noema_store::Database::Sqlite(pool) => {
            for trigger in [
                "prevent_signed_content_update",
                "prevent_signed_entry_deletion",
            ] {
                sqlx::query(&format!("DROP TRIGGER {trigger}"))
                    .execute(pool)
                    .await
                    .unwrap();
            }
        }
        noema_store::Database::Postgres(pool) => {
            sqlx::query("ALTER TABLE diary_entries DISABLE TRIGGER USER")
                .execute(pool)
                .await
                .unwrap();
        }
    }
    let tamper = |sql: String| {
        let db = db.clone();
        async move {
            let done = match &db {
                noema_store::Database::Sqlite(pool) => sqlx::query(&sql)
                    .execute(pool)
                    .await
                    .unwrap()
                    .rows_affected(),
                noema_store::Database::Postgres(pool) => sqlx::query(&sql)
                    .execute(pool)
                    .await
                    .unwrap()
                    .rows_affected(),
            };
            assert_eq!(done, 1, "{sql}");
        }
    };
    let cases = [
        (
            "content",
            "UPDATE diary_entries SET content = 'rewritten' WHERE id = '{id}'",
        ),
        (
            "hash",
            "UPDATE diary_entries SET content = 'rewritten', content_hash = 'bafkreiaaaa' WHERE id = '{id}'",
        ),
        ("middle", "DELETE FROM diary_entries WHERE id = '{id}'"),
        ("newest", "DELETE FROM diary_entries WHERE id = '{id}'"),
    ];
    for (n, (case, edit)) in cases.iter().enumerate() {
        let agent_id = format!("agent:chain-{case}");
        let pair = SigningKeyPair::from_seed(&[80 + u8::try_from(n).unwrap(); 32]);
        let token = agent(cluster, &agent_id, &pair).await;
        let mut grpc = grpc_as(cluster, &token).await;
        let diary = new_diary(cluster, &token, "private").await;
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(make_entry(&mut grpc, &diary, "semantic", true, &pair).await);
        }
        let chain_path = format!("/v1/agents/{agent_id}/signature-chain");
        let (status, chain) = rest(cluster, &token, "GET", &chain_path, None).await;
        assert_eq!(status, 200);
        assert_eq!(
            (chain["valid"].clone(), chain["length"].clone()),
            (json!(true), json!(3)),
            "{case}: {chain}"
        );

        let target = if *case == "newest" { &ids[2] } else { &ids[1] };
        tamper(edit.replace("{id}", target)).await;
        let (status, chain) = rest(cluster, &token, "GET", &chain_path, None).await;
        assert_eq!(status, 200);
        assert_eq!(chain["valid"], false, "{case}: {chain}");
        let problems = chain["problems"].as_array().unwrap();
        assert!(!problems.is_empty(), "{case}: {chain}");
        if *case != "newest" {
            assert!(
                problems
                    .iter()
                    .any(|p| s(p).contains(target.as_str()) || s(p).contains(ids[2].as_str())),
                "{case}: the problems name the broken link: {chain}"
            );
        }
    }
}

//! Continuity from outside, over gRPC: capsules, history and the cold tier in every shape;
//! tenants and CogniRelay's namespaces keeping capsules private on every RPC; 8 agents on
//! 2 replicas (Postgres, split) losing no acknowledged write; and a kill -9 in the middle of
//! a retention apply losing nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use noema_client::Noema;
use noema_client::continuity::ReadRequest;
use noema_core::Failure;
use noema_e2e::{Backend, Role, Shape, TestCluster, cluster_cases};
use noema_proto::continuity::v1 as pb;
use noema_proto::identity::v1::IssueTokenRequest;
use serde_json::{Value, json};

cluster_cases!(
    capsules_history_and_the_cold_tier,
    other_tenants_and_collaborators_see_nothing,
);

/// `2026-01-01T…Z` timestamps, increasing with `n` (seconds).
fn at(n: u32) -> String {
    format!(
        "2026-01-01T{:02}:{:02}:{:02}Z",
        n / 3600,
        (n / 60) % 60,
        n % 60
    )
}

fn capsule(kind: &str, id: &str, updated_at: &str, priorities: &[&str]) -> Value {
    json!({
        "subject_kind": kind, "subject_id": id, "updated_at": updated_at, "verified_at": updated_at,
        "source": {"producer": "e2e", "update_reason": "manual"},
        "continuity": {"top_priorities": priorities, "active_concerns": [], "active_constraints": ["c"],
            "open_loops": ["o"], "stance_summary": "A stance long enough to count as adequate.",
            "drift_signals": []},
        "confidence": {"continuity": 0.5, "relationship_model": 0.5}
    })
}

fn upsert_body(kind: &str, id: &str, updated_at: &str, priorities: &[&str]) -> Vec<u8> {
    serde_json::to_vec(&json!({"subject_kind": kind, "subject_id": id,
        "capsule": capsule(kind, id, updated_at, priorities)}))
    .unwrap()
}

fn bytes(value: Value) -> Vec<u8> {
    serde_json::to_vec(&value).unwrap()
}

fn req(body: Vec<u8>) -> pb::JsonRequest {
    pb::JsonRequest { body }
}

fn parse(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

async fn connect(cluster: &TestCluster, token: &str) -> Noema {
    let endpoint = cluster.endpoint("continuity").unwrap();
    Noema::connect(endpoint, token).await.unwrap()
}

/// A token of `peer_id` (its tenant) with `scopes`.
async fn token(cluster: &TestCluster, peer_id: &str, scopes: &[&str]) -> String {
    cluster.issue_token(peer_id, scopes).await.unwrap()
}

/// The status a call failed with: its code, reason and the original's HTTP status/body.
fn failure(status: tonic::Status) -> (tonic::Code, String, String, String) {
    let failure = Failure::from_status(&status);
    (
        status.code(),
        failure.reason.as_str().to_owned(),
        failure
            .metadata
            .get("http_status")
            .cloned()
            .unwrap_or_default(),
        failure.metadata.get("body").cloned().unwrap_or_default(),
    )
}

async fn capsules_history_and_the_cold_tier(cluster: &TestCluster) {
    let agent = token(cluster, "agent:keeper", &["continuity:write"]).await;
    let noema = connect(cluster, &agent).await;
    let mut client = noema.continuity().client();
    let first = client
        .upsert(req(upsert_body("thread", "Launch", &at(1), &["plan"])))
        .await
        .unwrap()
        .into_inner();
    assert!(first.written && first.revision_id.starts_with("sha256:"));
    assert_eq!(parse(&first.body)["created"], true);
    let second = client
        .upsert(req(upsert_body("thread", "Launch", &at(2), &["ship"])))
        .await
        .unwrap()
        .into_inner();
    // A stale write: the original's 409, told apart by its reason.
    let stale = client
        .upsert(req(upsert_body("thread", "Launch", &at(1), &["old"])))
        .await
        .unwrap_err();
    let (code, reason, http, body) = failure(stale);
    assert_eq!(
        (code, reason.as_str(), http.as_str()),
        (tonic::Code::AlreadyExists, "STALE_WRITE", "409")
    );
    assert_eq!(
        body,
        r#"{"detail":"Incoming continuity capsule is older than the current stored capsule"}"#
    );
    // A model violation: the original's 422 list, byte for byte in the metadata.
    let invalid = client
        .upsert(req(bytes(
            json!({"subject_kind": "robot", "subject_id": "x", "capsule": {}}),
        )))
        .await
        .unwrap_err();
    let (code, reason, http, body) = failure(invalid);
    assert_eq!(
        (code, reason.as_str(), http.as_str()),
        (
            tonic::Code::FailedPrecondition,
            "REQUEST_MODEL_INVALID",
            "422"
        )
    );
    assert!(
        body.starts_with(r#"{"detail":[{"type":"literal_error","loc":["body","subject_kind"]"#),
        "{body}"
    );

    // The SDK reads it typed.
    let read = noema
        .continuity()
        .read(&ReadRequest::new("thread", "Launch"))
        .await
        .unwrap();
    assert_eq!(read.revision_id, second.revision_id);
    assert_eq!(
        read.body.capsule.unwrap().continuity.top_priorities,
        ["ship"]
    );
    assert_eq!(read.body.source_state, "active");
    assert!(read.body.trust_signals.is_some());
    let history = noema
        .continuity()
        .history("thread", "launch", 10, "")
        .await
        .unwrap();
    assert!(history.chain_intact);
    let ids: Vec<&str> = history
        .revisions
        .iter()
        .map(|r| r.revision_id.as_str())
        .collect();
    assert_eq!(ids, [&second.revision_id, &first.revision_id]);

    // Archive, then the cold tier (an admin job) and back, byte for byte.
    let archived = noema
        .continuity()
        .archive("thread", "Launch", "shipped it")
        .await
        .unwrap();
    let path = archived["archived_path"].as_str().unwrap().to_owned();
    let owner = connect(cluster, &cluster.owner_token).await;
    let mut admin = owner
        .in_tenant("agent:keeper")
        .unwrap()
        .continuity()
        .client();
    let refused = client
        .cold_store(req(bytes(json!({"source_archive_path": path}))))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let before = admin
        .check_artifacts(pb::CheckArtifactsRequest { all_tenants: false })
        .await
        .unwrap()
        .into_inner();
    assert!(before.ok);
    admin
        .cold_store(req(bytes(json!({"source_archive_path": path}))))
        .await
        .unwrap();
    let listed = parse(
        &client
            .list(req(bytes(
                json!({"include_cold": true, "include_fallback": true}),
            )))
            .await
            .unwrap()
            .into_inner()
            .body,
    );
    let states: Vec<&str> = listed["capsules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["artifact_state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["fallback", "cold"]);
    let rehydrated = parse(
        &admin
            .cold_rehydrate(req(bytes(json!({"source_archive_path": path}))))
            .await
            .unwrap()
            .into_inner()
            .body,
    );
    assert_eq!(rehydrated["restored_archive_path"], path.as_str());
    let after = admin
        .check_artifacts(pb::CheckArtifactsRequest { all_tenants: false })
        .await
        .unwrap()
        .into_inner();
    assert!(after.ok, "{:?}", after.invalid);
    let counts: BTreeMap<String, u64> = after
        .tiers
        .iter()
        .map(|t| (t.tier.clone(), t.total))
        .collect();
    assert_eq!(counts["archive"], 1);
    assert_eq!(counts["cold"], 0);
    // Every write is in continuity's audit chain.
    let audit = admin
        .list_audit(noema_proto::common::v1::ListAuditRequest {
            page: None,
            oldest_first: true,
        })
        .await
        .unwrap()
        .into_inner();
    let actions: Vec<&str> = audit.entries.iter().map(|e| e.action.as_str()).collect();
    for action in [
        "continuity.upsert",
        "continuity.archive",
        "continuity.cold_store",
        "continuity.cold_rehydrate",
    ] {
        assert!(actions.contains(&action), "{actions:?}");
    }
}

/// Every RPC of the service, as `client` with the subject `kind`/`id`: each must answer as
/// for a subject that does not exist (or refuse), never with the capsule.
async fn probe_every_rpc(
    client: &mut noema_client::ContinuityClient,
    kind: &str,
    id: &str,
    secret: &str,
) -> Vec<(String, String)> {
    let subject = |extra: Value| {
        let mut body = json!({"subject_kind": kind, "subject_id": id});
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
            b.extend(e);
        }
        req(bytes(body))
    };
    let signal =
        json!([{"kind": "self_review", "source_ref": "r", "observed_at": at(1), "summary": "s"}]);
    let mut seen = Vec::new();
    let mut record = |rpc: &str, result: Result<Vec<u8>, tonic::Status>| {
        let text = match result {
            Ok(body) => String::from_utf8(body).unwrap(),
            Err(status) => format!("{:?}: {}", status.code(), status.message()),
        };
        assert!(!text.contains(secret), "{rpc} leaked the capsule: {text}");
        seen.push((rpc.to_owned(), text));
    };
    let r = client
        .read(subject(json!({"allow_fallback": true, "view": "startup"})))
        .await;
    record("read", r.map(|r| r.into_inner().body));
    let r = client.list(req(bytes(json!({"include_fallback": true, "include_archived": true, "include_cold": true, "sort": "salience"})))).await;
    record("list", r.map(|r| r.into_inner().body));
    let r = client
        .compare(subject(
            json!({"candidate_capsule": capsule(kind, id, &at(1), &["guess"]), "signals": signal}),
        ))
        .await;
    record("compare", r.map(|r| r.into_inner().body));
    let r = client
        .history(pb::HistoryRequest {
            subject_kind: kind.into(),
            subject_id: id.into(),
            page: None,
            include_capsules: true,
        })
        .await;
    record(
        "history",
        r.map(|r| format!("{:?}", r.into_inner()).into_bytes()),
    );
    let r = client
        .patch(subject(json!({"updated_at": at(50), "operations": [{"target": "continuity.open_loops", "action": "append", "value": "x"}]})))
        .await;
    record("patch", r.map(|r| r.into_inner().body));
    let r = client
        .lifecycle(subject(
            json!({"transition": "suspend", "updated_at": at(50)}),
        ))
        .await;
    record("lifecycle", r.map(|r| r.into_inner().body));
    let r = client
        .revalidate(subject(json!({"outcome": "confirm", "signals": signal})))
        .await;
    record("revalidate", r.map(|r| r.into_inner().body));
    let r = client
        .archive(subject(json!({"reason": "taking it"})))
        .await;
    record("archive", r.map(|r| r.into_inner().body));
    let r = client
        .refresh_plan(req(bytes(json!({"include_healthy": true}))))
        .await;
    record("refresh_plan", r.map(|r| r.into_inner().body));
    let r = client.retention_plan(req(bytes(json!({})))).await;
    record("retention_plan", r.map(|r| r.into_inner().body));
    let r = client
        .delete(subject(json!({"delete_active": true, "delete_fallback": true, "delete_archive": true, "reason": "taking it"})))
        .await;
    record("delete", r.map(|r| r.into_inner().body));
    seen
}

async fn other_tenants_and_collaborators_see_nothing(cluster: &TestCluster) {
    let owner_token = token(cluster, "agent:owner", &["continuity:write"]).await;
    let owner = connect(cluster, &owner_token).await;
    let mut mine = owner.continuity().client();
    mine.upsert(req(upsert_body(
        "thread",
        "Secret Plan",
        &at(1),
        &["the-secret-priority"],
    )))
    .await
    .unwrap();
    let before = mine
        .read(req(bytes(
            json!({"subject_kind": "thread", "subject_id": "Secret Plan"}),
        )))
        .await
        .unwrap()
        .into_inner();

    // Another tenant, with every continuity scope and CogniRelay's too.
    let stranger = token(
        cluster,
        "agent:stranger",
        &["continuity:write", "read:files", "write:projects"],
    )
    .await;
    let mut theirs = connect(cluster, &stranger).await.continuity().client();
    let seen = probe_every_rpc(&mut theirs, "thread", "Secret Plan", "the-secret-priority").await;
    let missing = probe_every_rpc(
        &mut theirs,
        "thread",
        "Never Written",
        "the-secret-priority",
    )
    .await;
    // Indistinguishable from a subject that was never written (ids and timestamps aside).
    for ((rpc, hidden), (_, absent)) in seen.iter().zip(&missing) {
        let normalize = |text: &str| {
            text.replace("secret-plan", "X")
                .replace("never-written", "X")
                .replace("Secret Plan", "X")
                .replace("Never Written", "X")
        };
        if rpc == "list" || rpc == "refresh_plan" || rpc == "retention_plan" {
            let list: Value = serde_json::from_str(hidden).unwrap_or(Value::Null);
            assert!(
                list["count"] == 0 || list["count"].is_null(),
                "{rpc}: {hidden}"
            );
            continue;
        }
        assert_eq!(
            normalize(hidden),
            normalize(absent),
            "{rpc} tells a hidden capsule from a missing one"
        );
    }
    // The audit log spans every tenant: a tenant's own admin does not read it.
    let stranger_admin = token(cluster, "agent:stranger", &["continuity:admin"]).await;
    let audit = connect(cluster, &stranger_admin)
        .await
        .continuity()
        .client()
        .list_audit(noema_proto::common::v1::ListAuditRequest {
            page: None,
            oldest_first: false,
        })
        .await
        .unwrap_err();
    assert_eq!(audit.code(), tonic::Code::PermissionDenied);
    // Nor do its other admin RPCs reach the owner's tenant.
    let check = connect(cluster, &stranger_admin)
        .await
        .continuity()
        .client()
        .check_artifacts(pb::CheckArtifactsRequest { all_tenants: false })
        .await
        .unwrap()
        .into_inner();
    assert!(
        check.tiers.iter().all(|t| t.total == 0),
        "{:?}",
        check.tiers
    );
    // Naming the tenant does not help a non-superuser.
    let named = connect(cluster, &stranger)
        .await
        .in_tenant("agent:owner")
        .unwrap()
        .continuity();
    let err = named
        .read(&ReadRequest::new("thread", "Secret Plan"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Tenant not allowed"), "{err}");

    // The same tenant's collaboration_peer token (CogniRelay's template): its scopes pass,
    // its namespaces exclude memory/continuity, on every RPC alike.
    let mut identity = cluster.identity().await.unwrap();
    let collaborator = identity
        .issue_token(IssueTokenRequest {
            peer_id: "agent:owner".into(),
            template: "collaboration_peer".into(),
            ..IssueTokenRequest::default()
        })
        .await
        .unwrap()
        .into_inner()
        .token;
    let mut collab = connect(cluster, &collaborator).await.continuity().client();
    let seen = probe_every_rpc(&mut collab, "thread", "Secret Plan", "the-secret-priority").await;
    for (rpc, answer) in &seen {
        assert!(
            answer.starts_with("PermissionDenied"),
            "{rpc} answered the collaborator: {answer}"
        );
    }

    // Nothing changed for the owner.
    let after = mine
        .read(req(bytes(
            json!({"subject_kind": "thread", "subject_id": "Secret Plan"}),
        )))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.revision_id, before.revision_id);
}

/// 8 agents of one tenant on 2 continuity replicas (Postgres, split): upserts, patches and
/// reads of shared and own subjects. Every write lands or gets a clean conflict, no
/// acknowledged write is lost, every fallback is a valid capsule, and no history has a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_agents_on_two_replicas_lose_no_write() {
    let cluster = TestCluster::split(Backend::PostgresS3).await.unwrap();
    // The second replica: the same database and object store, its own process-local state.
    let mut config = cluster.config().clone();
    config.endpoints.insert(
        "identity".into(),
        cluster.endpoint("identity").unwrap().to_owned(),
    );
    let shutdown = tokio_util::sync::CancellationToken::new();
    let replica = noema::Node::start(
        &cluster.registry,
        &config,
        &[Role::Service("continuity")],
        shutdown.child_token(),
    )
    .await
    .unwrap();
    let endpoints = [
        cluster.endpoint("continuity").unwrap().to_owned(),
        format!("http://{}", replica.grpc_addr.unwrap()),
    ];
    let clock = Arc::new(AtomicU32::new(1));
    let mut agents = Vec::new();
    for n in 0..8u32 {
        let secret = cluster
            .issue_token("agent:fleet", &["continuity:write"])
            .await
            .unwrap();
        let noema = Noema::connect(&endpoints[n as usize % 2], &secret)
            .await
            .unwrap();
        let clock = Arc::clone(&clock);
        agents.push(tokio::spawn(async move {
            let mut client = noema.continuity().client();
            let mut acknowledged: Vec<(String, String)> = Vec::new();
            let mut conflicts = 0u32;
            let own = format!("agent-{n}");
            for round in 0..12u32 {
                let subject = match round % 3 {
                    0 => "hot-a".to_owned(),
                    1 => "hot-b".to_owned(),
                    _ => own.clone(),
                };
                let stamp = at(clock.fetch_add(1, Ordering::SeqCst));
                let result = if round % 2 == 0 {
                    client
                        .upsert(req(upsert_body("task", &subject, &stamp, &[&format!("{n}:{round}")])))
                        .await
                } else {
                    client
                        .patch(req(bytes(json!({"subject_kind": "task", "subject_id": subject, "updated_at": stamp,
                            "operations": [{"target": "continuity.open_loops", "action": "append", "value": format!("{n}:{round}")}]}))))
                        .await
                };
                match result {
                    Ok(written) => {
                        let written = written.into_inner();
                        if written.written {
                            acknowledged.push((subject.clone(), written.revision_id));
                        }
                    }
                    Err(status) => {
                        let reason = Failure::from_status(&status).reason.as_str().to_owned();
                        // A clean conflict (stale, same timestamp, lock timeout) or a patch
                        // that outgrew its list or came before the subject existed.
                        assert!(
                            matches!(status.code(), tonic::Code::AlreadyExists | tonic::Code::InvalidArgument | tonic::Code::NotFound),
                            "{reason}: {status:?}"
                        );
                        conflicts += 1;
                    }
                }
                let read = client
                    .read(req(bytes(json!({"subject_kind": "task", "subject_id": subject, "allow_fallback": true}))))
                    .await
                    .unwrap()
                    .into_inner();
                assert_ne!(read.source_state, "", "a read always answers");
            }
            (acknowledged, conflicts)
        }));
    }
    let mut acknowledged: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut landed = 0;
    for agent in agents {
        let (writes, _conflicts) = agent.await.unwrap();
        landed += writes.len();
        for (subject, revision) in writes {
            acknowledged.entry(subject).or_default().insert(revision);
        }
    }
    assert!(landed > 0);
    let noema = Noema::connect(&endpoints[1], &cluster.owner_token)
        .await
        .unwrap();
    let continuity = noema.in_tenant("agent:fleet").unwrap().continuity();
    for (subject, revisions) in &acknowledged {
        let history = continuity.history("task", subject, 200, "").await.unwrap();
        assert!(history.chain_intact, "{subject}: chain broken");
        let sequences: Vec<u64> = history.revisions.iter().map(|r| r.sequence).collect();
        let expected: Vec<u64> = (1..=sequences.len() as u64).rev().collect();
        assert_eq!(sequences, expected, "{subject}: the history has a gap");
        let ids: BTreeSet<String> = history
            .revisions
            .iter()
            .map(|r| r.revision_id.clone())
            .collect();
        assert_eq!(
            &ids, revisions,
            "{subject}: acknowledged writes and history differ"
        );
    }
    let check = continuity
        .client()
        .check_artifacts(pb::CheckArtifactsRequest { all_tenants: false })
        .await
        .unwrap()
        .into_inner();
    assert!(check.ok, "{:?}", check.invalid);
    shutdown.cancel();
    replica.wait().await.unwrap();
    cluster.shutdown().await.unwrap();
}

/// Processes shape on Postgres + S3: the continuity process is SIGKILLed while a retention
/// apply moves a backlog to the cold tier. After a restart every archive is whole, hot or
/// cold (no payload without its row, no row without its payload), and applying again drains
/// the backlog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_retention_apply_loses_nothing() {
    let mut cluster = TestCluster::builder(Backend::PostgresS3, Shape::Processes)
        .setting("continuity.retention_archive_days", "0")
        .start()
        .await
        .unwrap();
    const ARCHIVES: u32 = 100;
    let endpoint = cluster.endpoint("continuity").unwrap().to_owned();
    let owner = Noema::connect(&endpoint, &cluster.owner_token)
        .await
        .unwrap();
    let mut client = owner.continuity().client();
    for n in 0..ARCHIVES {
        let id = format!("backlog-{n:03}");
        client
            .upsert(req(upsert_body("task", &id, &at(n), &["x"])))
            .await
            .unwrap();
        client
            .archive(req(bytes(
                json!({"subject_kind": "task", "subject_id": id, "reason": "old work"}),
            )))
            .await
            .unwrap();
    }
    // Stale means strictly older than 0 days: let a second pass.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let plan = parse(
        &client
            .retention_plan(req(bytes(json!({"limit": 100}))))
            .await
            .unwrap()
            .into_inner()
            .body,
    );
    assert_eq!(plan["total_candidates"], ARCHIVES, "{plan}");
    let paths: Vec<Value> = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["source_archive_path"].clone())
        .collect();
    let mut applying = owner.continuity().client();
    let apply = tokio::spawn(async move {
        applying
            .retention_apply(req(bytes(json!({"source_archive_paths": paths}))))
            .await
    });
    // Kill it once the first archives are cold, in the middle of the backlog.
    let mut watcher = Noema::connect(&endpoint, &cluster.owner_token)
        .await
        .unwrap()
        .continuity()
        .client();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = parse(
            &watcher
                .list(req(bytes(json!({"include_cold": true, "limit": 200}))))
                .await
                .unwrap()
                .into_inner()
                .body,
        );
        let cold = list["count"].as_u64().unwrap();
        if cold >= 3 {
            assert!(
                cold < u64::from(ARCHIVES),
                "the apply finished before the kill"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing became cold"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.kill("continuity").await.unwrap();
    assert!(
        apply.await.unwrap().is_err(),
        "the apply answered although its process died"
    );
    cluster.restart("continuity").await.unwrap();

    let owner = Noema::connect(&endpoint, &cluster.owner_token)
        .await
        .unwrap();
    let mut client = owner.continuity().client();
    let count = |client: &mut noema_client::ContinuityClient, which: Value| {
        let mut client = client.clone();
        async move {
            parse(
                &client
                    .list(req(bytes(which)))
                    .await
                    .unwrap()
                    .into_inner()
                    .body,
            )["count"]
                .as_u64()
                .unwrap()
        }
    };
    let hot = count(&mut client, json!({"include_archived": true, "limit": 200})).await;
    let cold = count(&mut client, json!({"include_cold": true, "limit": 200})).await;
    assert_eq!(hot + cold, u64::from(ARCHIVES), "an archive was lost");
    assert!(cold > 0 && hot > 0, "hot {hot}, cold {cold}");
    // Every cold payload is in S3 and decodes to its archive; nothing half-moved.
    let check = client
        .check_artifacts(pb::CheckArtifactsRequest { all_tenants: true })
        .await
        .unwrap()
        .into_inner();
    assert!(check.ok, "{:?}", check.invalid);
    // Draining the rest.
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 10);
        let plan = parse(
            &client
                .retention_plan(req(bytes(json!({"limit": 50}))))
                .await
                .unwrap()
                .into_inner()
                .body,
        );
        let paths: Vec<Value> = plan["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["source_archive_path"].clone())
            .collect();
        if paths.is_empty() {
            assert_eq!(plan["has_more"], false);
            break;
        }
        let applied = parse(
            &client
                .retention_apply(req(bytes(json!({"source_archive_paths": paths}))))
                .await
                .unwrap()
                .into_inner()
                .body,
        );
        assert_eq!(applied["ok"], true, "{applied}");
    }
    let cold = count(&mut client, json!({"include_cold": true, "limit": 200})).await;
    assert_eq!(cold, u64::from(ARCHIVES));
    cluster.shutdown().await.unwrap();
}

//! The ledger from outside, as open-cognition's clients see it (smoke test, STOPPED,
//! references and their failure cases) and through gRPC (export → import → reconcile).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use noema_client::ledger::{canonical_request, signed_reference, utc_seconds};
use noema_client::pb::ledger as pb;
use noema_core::keys::SigningKeyPair;
use noema_e2e::{Backend, Shape, TestCluster, cluster_cases, owner};
use serde_json::{Value, json};
use time::OffsetDateTime;

cluster_cases!(
    the_original_smoke_test_passes,
    stopped_refuses_writes_and_every_read_still_answers,
    references_are_verified_and_bad_ones_change_nothing,
    invalid_objects_get_open_cognitions_messages,
    objects_read_back_by_id_payload_and_filters,
    export_then_import_into_an_empty_instance_reconciles_clean,
);

fn canonical_body(payload: &[u8], created_at: &str, object_type: &str) -> Value {
    let id = noema_core::content_id::ContentId::of_bytes(payload).into_string();
    let date = &created_at[..10].replace('-', "/");
    json!({
        "schema_version": "0.1.0",
        "id": id,
        "object_type": object_type,
        "content_type": "application/json",
        "size_bytes": payload.len(),
        "created_at": created_at,
        "created_by": "smoke:test",
        "storage_path": format!("canonical/{object_type}/{date}/{id}.json"),
        "payload": data_encoding::BASE64.encode(payload),
    })
}

async fn post(cluster: &TestCluster, path: &str, body: &Value) -> (u16, String) {
    let response = owner(cluster)
        .post(format!("{}{path}", cluster.rest_url))
        .header("X-Actor", "smoke:test")
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn get(cluster: &TestCluster, path: &str) -> (u16, Value) {
    let response = owner(cluster)
        .get(format!("{}{path}", cluster.rest_url))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn count(cluster: &TestCluster, path: &str) -> usize {
    get(cluster, path).await.1.as_array().map_or(0, Vec::len)
}

async fn the_original_smoke_test_passes(cluster: &TestCluster) {
    let (status, state) = get(cluster, "/status").await;
    assert_eq!((status, state["mode"].as_str()), (200, Some("RUNNING")));

    let now = utc_seconds(OffsetDateTime::now_utc());
    let payload = format!("{{\"smoke\":\"test\",\"ts\":\"{now}\"}}");
    let body = canonical_body(payload.as_bytes(), &now, "observation");
    let (status, text) = post(cluster, "/canonical", &body).await;
    assert_eq!(status, 201, "{text}");
    let created: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(created["id"], body["id"]);
    // Exactly the original's body: fields in order, payload dropped, metadata omitted.
    let expected = format!(
        "{{\"schema_version\":\"0.1.0\",\"id\":\"{id}\",\"object_type\":\"observation\",\"content_type\":\"application/json\",\"size_bytes\":{size},\"created_at\":\"{now}\",\"created_by\":\"smoke:test\",\"storage_path\":\"{path}\"}}\n",
        id = body["id"].as_str().unwrap(),
        size = payload.len(),
        path = body["storage_path"].as_str().unwrap(),
    );
    assert_eq!(text, expected);

    let (status, text) = post(cluster, "/canonical", &body).await;
    assert_eq!(status, 409, "{text}");
    let error: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        error["error"],
        "canonical object with this id already exists"
    );
}

async fn stopped_refuses_writes_and_every_read_still_answers(cluster: &TestCluster) {
    let now = utc_seconds(OffsetDateTime::now_utc());
    let body = canonical_body(b"{\"stopped\":1}", &now, "document");
    let key = SigningKeyPair::from_seed(&[21; 32]);

    let (status, _) = post(cluster, "/stop", &json!({})).await;
    assert_eq!(status, 200);
    let (status, text) = post(cluster, "/canonical", &body).await;
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("\"error\":\"system is STOPPED; no writes accepted\""),
        "{text}"
    );
    // The mode is checked before the body is even decoded, as in the original.
    let response = owner(cluster)
        .post(format!("{}/canonical", cluster.rest_url))
        .body("{broken")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let reference = signed_reference(
        &key,
        "agent:stopped",
        body["id"].as_str().unwrap(),
        "ctx",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    let (status, _) = post(cluster, "/reference", &reference_json(&reference)).await;
    assert_eq!(status, 503);
    // gRPC writes too, with the same message.
    let mut ledger = cluster.ledger().await.unwrap();
    let err = ledger
        .put_canonical(canonical_request(
            b"x".to_vec(),
            "observation",
            "text/plain",
            "t",
            OffsetDateTime::now_utc(),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert_eq!(err.message(), "system is STOPPED; no writes accepted");

    for path in [
        "/status",
        "/canonicals",
        "/references",
        "/audit",
        "/reconcile",
    ] {
        let (status, _) = get(cluster, path).await;
        assert_eq!(status, 200, "GET {path} while STOPPED");
    }
    let (status, _) = post(cluster, "/resume", &json!({})).await;
    assert_eq!(status, 200);
    let (status, text) = post(cluster, "/canonical", &body).await;
    assert_eq!(status, 201, "{text}");
    let (_, audit) = get(cluster, "/audit?limit=3").await;
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create_canonical", "resume", "stop"]);
}

fn reference_json(r: &pb::PutReferenceRequest) -> Value {
    let mut body = json!({
        "schema_version": r.schema_version, "id": r.id, "canonical_object_id": r.canonical_object_id,
        "agent_id": r.agent_id, "created_at": r.created_at, "context": r.context,
        "signature": r.signature, "public_key": r.public_key,
    });
    if let Some(v) = r.relevance {
        body["relevance"] = json!(v);
    }
    if let Some(v) = r.trust_weight {
        body["trust_weight"] = json!(v);
    }
    body
}

async fn references_are_verified_and_bad_ones_change_nothing(cluster: &TestCluster) {
    let now = utc_seconds(OffsetDateTime::now_utc());
    let object = canonical_body(b"{\"target\":true}", &now, "observation");
    assert_eq!(post(cluster, "/canonical", &object).await.0, 201);
    let target = object["id"].as_str().unwrap();
    let key = SigningKeyPair::from_seed(&[31; 32]);

    let mut good = signed_reference(
        &key,
        "agent:observer",
        target,
        "observed it",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    good.relevance = Some(1.0);
    good.trust_weight = Some(0.5);
    let (status, text) = post(cluster, "/reference", &reference_json(&good)).await;
    assert_eq!(status, 201, "{text}");
    let echoed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(echoed["relevance"], json!(1));
    assert_eq!(echoed["public_key"], good.public_key.as_str());
    assert!(
        text.starts_with("{\"schema_version\":\"0.1.0\",\"id\":"),
        "{text}"
    );

    let (_, listed) = get(cluster, "/references").await;
    let first = &listed.as_array().unwrap()[0];
    assert_eq!(first["id"], good.id.as_str());
    assert!(
        first.get("public_key").is_none(),
        "GET /references never returns keys"
    );
    assert_eq!(first["signature"], good.signature.as_str());

    let references_before = count(cluster, "/references").await;
    let audit_before = count(cluster, "/audit?limit=200").await;
    let mut bad_signature = signed_reference(
        &key,
        "agent:observer",
        target,
        "x",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    bad_signature.context = "tampered is fine (not signed)".into();
    bad_signature.agent_id = "agent:someone-else".into();
    let mut missing_target = signed_reference(
        &key,
        "agent:observer",
        noema_core::content_id::ContentId::from_digest(&[0; 32]).as_str(),
        "x",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    missing_target.relevance = None;
    let mut out_of_range = signed_reference(
        &key,
        "agent:observer",
        target,
        "x",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    out_of_range.relevance = Some(1.5);
    let other_key = SigningKeyPair::from_seed(&[32; 32]);
    let second_key = signed_reference(
        &other_key,
        "agent:observer",
        target,
        "x",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    let mut unsigned = signed_reference(
        &key,
        "agent:observer",
        target,
        "x",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    unsigned.signature.clear();

    let cases = [
        (
            bad_signature,
            "signature verification failed".to_owned(),
            None,
        ),
        (
            missing_target,
            format!(
                "canonical_object_id \"sha256:{}\" does not exist in ledger",
                "0".repeat(64)
            ),
            None,
        ),
        (
            out_of_range,
            "relevance must be between 0.0 and 1.0".to_owned(),
            None,
        ),
        (
            second_key,
            "public key mismatch".to_owned(),
            Some("agent \"agent:observer\" is already registered with a different public key"),
        ),
        (
            unsigned,
            "signature is required".to_owned(),
            Some("sign the string '{id}:{canonical_object_id}:{agent_id}:{created_at}'"),
        ),
    ];
    for (request, message, hint) in cases {
        let (status, text) = post(cluster, "/reference", &reference_json(&request)).await;
        assert_eq!(status, 422, "{message}: {text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(error["error"], message.as_str());
        match hint {
            Some(prefix) => assert!(
                error["hint"].as_str().unwrap().starts_with(prefix),
                "{text}"
            ),
            None => assert!(error.get("hint").is_none(), "{text}"),
        }
    }
    assert_eq!(
        count(cluster, "/references").await,
        references_before,
        "nothing written"
    );
    assert_eq!(
        count(cluster, "/audit?limit=200").await,
        audit_before,
        "nothing audited"
    );

    // The same reference id twice is a conflict, not a server error.
    let (status, _) = post(cluster, "/reference", &reference_json(&good)).await;
    assert_eq!(status, 409);
}

async fn invalid_objects_get_open_cognitions_messages(cluster: &TestCluster) {
    let now = utc_seconds(OffsetDateTime::now_utc());
    let before = count(cluster, "/canonicals").await;
    let mut wrong_hash = canonical_body(b"{\"a\":1}", &now, "observation");
    wrong_hash["payload"] = json!(data_encoding::BASE64.encode(b"{\"a\":2}"));
    let mut wrong_size = canonical_body(b"{\"a\":3}", &now, "observation");
    wrong_size["size_bytes"] = json!(99);
    let mut wrong_path = canonical_body(b"{\"a\":4}", &now, "observation");
    wrong_path["object_type"] = json!("document");
    let mut bad_type = canonical_body(b"{\"a\":5}", &now, "observation");
    bad_type["object_type"] = json!("diary");
    for (body, prefix) in [
        (wrong_hash, "payload hash mismatch: id is sha256:"),
        (
            wrong_size,
            "size_bytes mismatch: declared 99 but payload is 7 bytes",
        ),
        (wrong_path, "storage_path must be \"canonical/document/"),
        (
            bad_type,
            "object_type must be one of: observation, document, tool_output, policy",
        ),
    ] {
        let (status, text) = post(cluster, "/canonical", &body).await;
        assert_eq!(status, 422, "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        assert!(
            error["error"].as_str().unwrap().starts_with(prefix),
            "{text}"
        );
    }
    let mut bad_base64 = canonical_body(b"{\"a\":6}", &now, "observation");
    bad_base64["payload"] = json!("not base64!");
    let (status, text) = post(cluster, "/canonical", &bad_base64).await;
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("invalid JSON: illegal base64 data at input byte"),
        "{text}"
    );
    let mut fractional = canonical_body(b"{\"a\":7}", &now, "observation");
    fractional["size_bytes"] = json!(5.5);
    assert_eq!(post(cluster, "/canonical", &fractional).await.0, 400);
    assert_eq!(
        count(cluster, "/canonicals").await,
        before,
        "nothing written"
    );
}

async fn objects_read_back_by_id_payload_and_filters(cluster: &TestCluster) {
    let mut ledger = cluster.ledger().await.unwrap();
    let mut ids = Vec::new();
    for (i, kind) in ["observation", "document", "observation"]
        .iter()
        .enumerate()
    {
        let at = OffsetDateTime::now_utc() - time::Duration::days(i64::try_from(i).unwrap());
        let request = canonical_request(
            format!("{{\"n\":{i}}}").into_bytes(),
            kind,
            "application/json",
            "creator:a",
            at,
        );
        ids.push(ledger.put_canonical(request).await.unwrap().into_inner().id);
    }
    let object = ledger
        .get_canonical(pb::GetCanonicalRequest { id: ids[1].clone() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(object.object_type, "document");
    let mut chunks = ledger
        .get_canonical_payload(pb::GetCanonicalRequest { id: ids[1].clone() })
        .await
        .unwrap()
        .into_inner();
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        bytes.extend(chunk.unwrap().data);
    }
    assert_eq!(bytes, b"{\"n\":1}");
    let response = owner(cluster)
        .get(format!(
            "{}/canonicals/{}/payload",
            cluster.rest_url, ids[0]
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(response.bytes().await.unwrap().as_ref(), b"{\"n\":0}");
    let missing = ledger
        .get_canonical(pb::GetCanonicalRequest {
            id: noema_core::content_id::ContentId::from_digest(&[0xff; 32]).into_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);

    // Filters and cursor paging.
    let listed = ledger
        .list_canonicals(pb::ListCanonicalsRequest {
            object_type: "observation".into(),
            created_by: "creator:a".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .objects;
    assert_eq!(
        listed.iter().map(|o| o.id.clone()).collect::<Vec<_>>(),
        [ids[0].clone(), ids[2].clone()]
    );
    let page = |token: String| pb::ListCanonicalsRequest {
        page: Some(noema_client::pb::common::PageRequest {
            page_size: 1,
            page_token: token,
        }),
        created_by: "creator:a".into(),
        ..Default::default()
    };
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let response = ledger
            .list_canonicals(page(token))
            .await
            .unwrap()
            .into_inner();
        seen.extend(response.objects.into_iter().map(|o| o.id));
        token = response.page.unwrap().next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen, ids, "newest created_at first, each object once");
}

async fn export_then_import_into_an_empty_instance_reconciles_clean(cluster: &TestCluster) {
    let mut ledger = cluster.ledger().await.unwrap();
    for i in 0..5 {
        let request = canonical_request(
            format!("{{\"export\":{i}}}").into_bytes(),
            "tool_output",
            "application/json",
            "exporter",
            OffsetDateTime::now_utc(),
        );
        ledger.put_canonical(request).await.unwrap();
    }
    let mut records = Vec::new();
    let mut stream = ledger
        .export_canonicals(pb::ExportCanonicalsRequest {})
        .await
        .unwrap()
        .into_inner();
    while let Some(record) = stream.next().await {
        records.push(record.unwrap());
    }
    assert!(records.len() >= 5);

    let target = TestCluster::start(Backend::Sqlite, Shape::AllInOne)
        .await
        .unwrap();
    let mut empty = target.ledger().await.unwrap();
    for pass in 0..2 {
        for record in &records {
            let o = record.object.clone().unwrap();
            let result = empty
                .put_canonical(pb::PutCanonicalRequest {
                    schema_version: o.schema_version,
                    id: o.id,
                    object_type: o.object_type,
                    content_type: o.content_type,
                    size_bytes: o.size_bytes,
                    created_at: o.created_at,
                    created_by: o.created_by,
                    storage_path: o.storage_path,
                    payload: record.payload.clone(),
                    metadata: o.metadata,
                })
                .await;
            match (pass, result) {
                (0, Ok(_)) => {}
                (1, Err(status)) => assert_eq!(
                    status.code(),
                    tonic::Code::AlreadyExists,
                    "re-import reports duplicates"
                ),
                (p, r) => panic!("pass {p}: {r:?}"),
            }
        }
    }
    let report = empty
        .reconcile(pb::ReconcileRequest {
            verify_hashes: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(report.checked, u64::try_from(records.len()).unwrap());
    assert_eq!(report.ok, report.checked);
    assert!(
        report.missing_in_storage.is_empty()
            && report.corrupt.is_empty()
            && report.orphans_in_storage.is_empty()
    );
    target.shutdown().await.unwrap();
}

//! Continuity over REST on CogniRelay's own paths, compared with the original: every case of
//! tests/facts/cognirelay_continuity_rest.json (recorded from CogniRelay 1.4.15 by
//! scripts/record-continuity-facts) is sent in order and must get the same status and the
//! same body bytes; then Noema's history route shows the chain the cases wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_e2e::{TestCluster, client_as, cluster_cases};
use serde_json::Value;

cluster_cases!(answers_as_cognirelay_does);

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
    let client = client_as(&cluster.owner_token);
    let mut compared = 0;
    for case in facts["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let url = format!("{}{}", cluster.rest_url, case["path"].as_str().unwrap());
        let request = match case["method"].as_str().unwrap() {
            "POST" => client.post(&url),
            other => panic!("{name}: method {other}"),
        };
        let response = request
            .header("content-type", "application/json")
            .body(case["body"].as_str().unwrap().to_owned())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
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
    assert!(compared >= 30, "only {compared} cases");

    // The capsule the cases wrote (created, then patched) has a two-revision chain.
    let history: Value = client
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

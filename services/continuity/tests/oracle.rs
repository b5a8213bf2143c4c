//! Contract tests against facts recorded from the original.
//!
//! The fixtures under `tests/fixtures/` were recorded by running CogniRelay 1.4.15 (PyPI
//! `cognirelay`, CPython 3.12, pydantic 2.14) on 127.0.0.1 and sending it the request bodies
//! they contain: each case keeps the body as sent, the status and the JSON body the original
//! answered, and (for the flow) the exact bytes it stored before and after. Nothing in them
//! was produced by this crate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_continuity::domain::error::ContinuityError;
use noema_continuity::domain::json::{Json, to_py_json};
use noema_continuity::domain::lifecycle::apply_lifecycle;
use noema_continuity::domain::patch::apply_patch;
use noema_continuity::domain::request::{LifecycleRequest, PatchRequest, UpsertRequest};
use noema_continuity::domain::stored::StoredCapsule;
use noema_continuity::domain::upsert::{apply_upsert, prepare_upsert};
use serde_json::Value;

fn fixture(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ordered_text(raw: &str, pointer: &[&str], index: usize) -> Json {
    // Fixtures are arrays of objects; find the member in the original text to keep its order.
    let all: Json = Json::parse(raw.as_bytes()).unwrap();
    let mut node = all.as_array().unwrap()[index].clone();
    for key in pointer {
        node = node.get(key).cloned().unwrap_or(Json::Null);
    }
    node
}

fn raw_fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Status and body the rules give for one request, as the REST layer would send them.
fn answer(result: Result<Json, ContinuityError>) -> (u16, String) {
    match result {
        Ok(body) => (200, to_py_json(&body)),
        Err(err) => (err.http_status(), to_py_json(&err.body())),
    }
}

/// The whole upsert path; `fallback_failure` replays the original's fallback refresh result
/// (an I/O outcome, recorded with the case) so the warning shapes are compared too.
fn upsert(
    body: &Json,
    stored: Option<&StoredCapsule>,
    revision: Option<&str>,
    fallback_failure: Option<&str>,
) -> Result<(Json, Option<String>), ContinuityError> {
    let request = UpsertRequest::from_json(body)?;
    let prepared = prepare_upsert(request)?;
    let outcome = apply_upsert(prepared, stored)?;
    let bytes = outcome
        .write
        .changed
        .then(|| outcome.write.canonical.clone());
    Ok((outcome.response(revision, fallback_failure), bytes))
}

#[test]
fn upsert_cases_answer_as_the_original() {
    let raw = raw_fixture("upsert_cases.json");
    let cases = fixture("upsert_cases.json");
    assert!(cases.len() >= 70);
    for (index, case) in cases.iter().enumerate() {
        let name = case["name"].as_str().unwrap();
        let body = ordered_text(&raw, &["body"], index);
        let want_status = case["status"].as_u64().unwrap() as u16;
        let want_body = to_py_json(&ordered_text(&raw, &["response"], index));
        let revision = case["response"]["latest_commit"].as_str();
        let fallback = case["response"]["fallback_warning_detail"].as_str();
        let got = answer(upsert(&body, None, revision, fallback).map(|(body, _)| body));
        assert_eq!(got, (want_status, want_body), "case {name:?}");
    }
}

#[test]
fn the_seed_flow_stores_the_same_bytes_as_the_original() {
    let raw = raw_fixture("seed_flow.json");
    let steps = fixture("seed_flow.json");
    for (index, step) in steps.iter().enumerate() {
        let name = step["name"].as_str().unwrap();
        let body = ordered_text(&raw, &["body"], index);
        let stored = step["stored_before"].as_str().map(StoredCapsule::new);
        let revision = step["response"]["latest_commit"].as_str();
        let (result, bytes) = match step["path"].as_str().unwrap() {
            "/v1/continuity/upsert" => match upsert(
                &body,
                stored.as_ref(),
                revision,
                step["response"]["fallback_warning_detail"].as_str(),
            ) {
                Ok((body, bytes)) => (Ok(body), bytes),
                Err(e) => (Err(e), None),
            },
            "/v1/continuity/patch" => {
                match PatchRequest::from_json(&body).and_then(|r| apply_patch(&r, stored.as_ref()))
                {
                    Ok(outcome) => (
                        Ok(outcome.response(revision, None)),
                        outcome
                            .write
                            .changed
                            .then(|| outcome.write.canonical.clone()),
                    ),
                    Err(e) => (Err(e), None),
                }
            }
            "/v1/continuity/lifecycle" => {
                match LifecycleRequest::from_json(&body)
                    .and_then(|r| apply_lifecycle(&r, stored.as_ref()))
                {
                    Ok(outcome) => (
                        Ok(outcome.response(revision, None)),
                        outcome
                            .write
                            .changed
                            .then(|| outcome.write.canonical.clone()),
                    ),
                    Err(e) => (Err(e), None),
                }
            }
            other => panic!("unexpected route {other}"),
        };
        let want_status = step["status"].as_u64().unwrap() as u16;
        let want_body = to_py_json(&ordered_text(&raw, &["response"], index));
        assert_eq!(answer(result), (want_status, want_body), "step {name:?}");
        if want_status == 200 {
            let before = step["stored_before"].as_str();
            let after = step["stored_after"].as_str();
            let expected = if before == after { None } else { after };
            assert_eq!(bytes.as_deref(), expected, "stored bytes after {name:?}");
        }
    }
}

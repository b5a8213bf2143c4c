//! Request models and pre-lock checks of every continuity route, against the original.
//!
//! `tests/fixtures/request_cases.json` holds bodies sent to CogniRelay 1.4.15 on 127.0.0.1
//! with the status and JSON body it answered (422 from its pydantic models, 400 from the
//! checks its services make before touching storage).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use noema_continuity::domain::error::ContinuityError;
use noema_continuity::domain::json::{Json, to_py_json};
use noema_continuity::domain::request::{
    ArchiveRequest, CompareRequest, DeleteRequest, LifecycleRequest, ListRequest, PatchRequest,
    ReadRequest, RefreshPlanRequest, RetentionPlanRequest, RevalidateRequest,
};
use noema_continuity::domain::verify::{check_compare, check_revalidate};

/// The route's request model and the checks its service makes before storage.
fn route(path: &str, body: &Json) -> Result<(), ContinuityError> {
    match path {
        "/v1/continuity/read" => ReadRequest::from_json(body).map(drop),
        "/v1/continuity/list" => ListRequest::from_json(body).map(drop),
        "/v1/continuity/lifecycle" => LifecycleRequest::from_json(body).map(drop),
        "/v1/continuity/patch" => PatchRequest::from_json(body).map(drop),
        "/v1/continuity/delete" => DeleteRequest::from_json(body).map(drop),
        "/v1/continuity/archive" => ArchiveRequest::from_json(body).map(drop),
        "/v1/continuity/refresh/plan" => RefreshPlanRequest::from_json(body).map(drop),
        "/v1/continuity/retention/plan" => RetentionPlanRequest::from_json(body).map(drop),
        "/v1/continuity/compare" => check_compare(&CompareRequest::from_json(body)?).map(drop),
        "/v1/continuity/revalidate" => {
            check_revalidate(&RevalidateRequest::from_json(body)?).map(drop)
        }
        other => panic!("no route {other}"),
    }
}

#[test]
fn every_route_refuses_bad_bodies_like_the_original() {
    let path = format!(
        "{}/tests/fixtures/request_cases.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let cases = Json::parse(std::fs::read_to_string(path).unwrap().as_bytes()).unwrap();
    let cases = cases.as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let route_path = case.get("path").unwrap().as_str().unwrap();
        let body = case.get("body").unwrap();
        let err = route(route_path, body).expect_err(route_path);
        let Json::Number(status) = case.get("status").unwrap() else {
            panic!("status")
        };
        assert_eq!(
            (u64::from(err.http_status()), to_py_json(&err.body())),
            (
                status.as_u64().unwrap(),
                to_py_json(case.get("response").unwrap())
            ),
            "{route_path} {}",
            to_py_json(body)
        );
    }
}

#[test]
fn list_defaults_follow_the_model() {
    let request = ListRequest::from_json(&Json::parse(b"{}").unwrap()).unwrap();
    assert_eq!(request.limit, 50);
    assert!(!request.salience());
    assert_eq!(request.sort.as_deref(), Some("default"));
    let request = RefreshPlanRequest::from_json(&Json::parse(b"{}").unwrap()).unwrap();
    assert_eq!(request.limit, 25);
}

//! A step from plan to tool run: the assessment allows it, the invocation built from the
//! same policy runs it through the real runners (a program, an HTTP server on 127.0.0.1),
//! and the runner's own checks still stand behind the assessment.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::Path;

use noema_orchestrator::domain::invoke::{Invocation, command_runner, invocation};
use noema_orchestrator::domain::objects::{RiskLevel, Step};
use noema_orchestrator::domain::policy::{DEFAULT_POLICY_TEXT, RiskPolicy};
use noema_orchestrator::domain::risk::assess_step;
use noema_tools::command::CommandError;
use noema_tools::http_json::HttpJsonClient;
use serde_json::{Value, json};

fn policy(protected: &Path, url: &str) -> RiskPolicy {
    let mut value: Value = serde_json::from_str(DEFAULT_POLICY_TEXT).unwrap();
    value["protected_paths"]
        .as_array_mut()
        .unwrap()
        .push(json!(protected.display().to_string()));
    let tools = value["tools"].as_object_mut().unwrap();
    tools.insert(
        "text.echo".into(),
        json!({"kind": "command", "level": "L1", "permission": "orchestrator:write",
               "command": {"program": "/bin/echo", "argv": ["{text}"],
                           "timeout_ms": 10000, "max_output_bytes": 4096}}),
    );
    tools.insert(
        "files.touch".into(),
        json!({"kind": "command", "level": "L1", "permission": "orchestrator:write",
               "command": {"program": "/usr/bin/touch", "argv": ["{path}"],
                           "timeout_ms": 10000, "max_output_bytes": 4096}}),
    );
    tools.insert(
        "index.local".into(),
        json!({"kind": "http_json", "level": "L1", "permission": "orchestrator:write",
               "http": {"url": url, "timeout_ms": 10000, "max_response_bytes": 65536}}),
    );
    RiskPolicy::from_value(value).unwrap()
}

fn step(tool: &str, args: Value) -> Step {
    Step {
        step_id: "s1".into(),
        action: "do it".into(),
        tool: tool.into(),
        expected_output: String::new(),
        scope: None,
        args: args.as_object().cloned(),
    }
}

#[tokio::test]
async fn an_allowed_command_step_runs_in_the_sandbox() {
    let sandbox = tempfile::tempdir().unwrap();
    let protected = tempfile::tempdir().unwrap();
    let policy = policy(protected.path(), "http://127.0.0.1:9/x");
    let s = step(
        "text.echo",
        json!({"text": "hello; rm -rf ~ && echo $HOME"}),
    );
    let risk = assess_step(&s, false, &policy);
    assert_eq!((risk.risk_level, risk.forbidden), (RiskLevel::L1, false));
    let Invocation::Command(spec) = invocation(&policy, &s, sandbox.path()).unwrap() else {
        panic!("expected a command");
    };
    let out = command_runner(&policy).run(&spec).await.unwrap();
    assert_eq!(out.stdout, "hello; rm -rf ~ && echo $HOME\n");
}

#[tokio::test]
async fn the_runner_stands_behind_the_assessment() {
    let sandbox = tempfile::tempdir().unwrap();
    let protected = tempfile::tempdir().unwrap();
    let policy = policy(protected.path(), "http://127.0.0.1:9/x");

    // Lexically a harmless relative path, so the assessment allows it…
    std::os::unix::fs::symlink(protected.path(), sandbox.path().join("link")).unwrap();
    let s = step("files.touch", json!({"path": "link/planted"}));
    assert!(!assess_step(&s, false, &policy).forbidden);
    // …but it resolves into a protected directory, and the runner refuses it.
    let Invocation::Command(spec) = invocation(&policy, &s, sandbox.path()).unwrap() else {
        panic!("expected a command");
    };
    let err = command_runner(&policy).run(&spec).await.unwrap_err();
    assert!(matches!(err, CommandError::Path { .. }), "{err:?}");
    assert!(!protected.path().join("planted").exists());

    // The direct form is caught by the assessment already.
    let direct = step(
        "files.touch",
        json!({"path": protected.path().join("planted").display().to_string()}),
    );
    let risk = assess_step(&direct, false, &policy);
    assert!(risk.forbidden && risk.risk_level == RiskLevel::L3);
}

#[tokio::test]
async fn an_internal_http_json_step_posts_its_arguments() {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/index",
        post(|body: axum::Json<Value>| async move { axum::Json(json!({"indexed": body.0})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let protected = tempfile::tempdir().unwrap();
    let policy = policy(protected.path(), &format!("http://{addr}/index"));
    let s = step("index.local", json!({"doc": "d1"}));
    let risk = assess_step(&s, false, &policy);
    assert_eq!((risk.risk_level, risk.forbidden), (RiskLevel::L1, false));
    let Invocation::Http(call) = invocation(&policy, &s, Path::new("/unused")).unwrap() else {
        panic!("expected an HTTP call");
    };
    let response = HttpJsonClient::new().unwrap().call(&call).await.unwrap();
    assert_eq!(response.body, json!({"indexed": {"doc": "d1"}}));
}

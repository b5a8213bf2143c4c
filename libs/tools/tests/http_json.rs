//! The HTTP JSON caller against a real HTTP server on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use noema_tools::http_json::{HeaderValue, HttpJsonCall, HttpJsonClient, HttpJsonError};
use noema_tools::secret::SecretSource;
use serde_json::{Value, json};

const SECRET: &str = "sk-test-0123456789abcdef";

fn auth(headers: &HeaderMap) -> String {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned()
}

async fn serve() -> SocketAddr {
    let app = Router::new()
        .route(
            "/echo",
            post(|headers: HeaderMap, body: axum::Json<Value>| async move {
                axum::Json(json!({"received": body.0, "authorization": auth(&headers)}))
            }),
        )
        .route(
            "/fail",
            post(|headers: HeaderMap| async move {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("boom; you sent {}", auth(&headers)),
                )
            }),
        )
        .route(
            "/text",
            post(|| async { (StatusCode::OK, "plain words, not JSON") }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                axum::Json(json!({}))
            }),
        )
        .route(
            "/big",
            post(|| async { axum::Json(json!({"blob": "x".repeat(20_000)})) }),
        )
        .route(
            "/redirect",
            post(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, "/echo")],
                )
                    .into_response()
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

fn call(addr: SocketAddr, path: &str) -> HttpJsonCall {
    HttpJsonCall {
        url: format!("http://{addr}{path}").parse().unwrap(),
        body: json!({"n": 1, "text": "hi"}),
        headers: Vec::new(),
        timeout: Duration::from_secs(10),
        max_response_bytes: 1024 * 1024,
    }
}

fn secret_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("api-key");
    std::fs::write(&path, format!("{SECRET}\n")).unwrap();
    (dir, path)
}

#[tokio::test]
async fn posts_json_and_reads_json() {
    let addr = serve().await;
    let client = HttpJsonClient::new().unwrap();
    let mut c = call(addr, "/echo");
    c.headers = vec![("X-Trace".into(), HeaderValue::Plain("t1".into()))];
    let response = client.call(&c).await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.body["received"], json!({"n": 1, "text": "hi"}));
}

#[tokio::test]
async fn secret_headers_are_sent_but_never_returned() {
    let addr = serve().await;
    let client = HttpJsonClient::new().unwrap();
    let (_dir, path) = secret_file();
    let mut c = call(addr, "/echo");
    c.headers = vec![(
        "Authorization".into(),
        HeaderValue::Secret {
            source: SecretSource::File(path.clone()),
            prefix: "Bearer ".into(),
        },
    )];
    let response = client.call(&c).await.unwrap();
    assert_eq!(response.body["authorization"], "Bearer [redacted]");
    assert!(!response.body.to_string().contains(SECRET));

    // A failing server that echoes the key into its error body.
    c.url = format!("http://{addr}/fail").parse().unwrap();
    let err = client.call(&c).await.unwrap_err();
    let text = format!("{err} {err:?} {}", serde_json::to_string(&err).unwrap());
    assert!(!text.contains(SECRET), "{text}");
    assert_eq!(
        err,
        HttpJsonError::Status {
            status: 500,
            body_excerpt: "boom; you sent Bearer [redacted]".into()
        }
    );
}

#[tokio::test]
async fn failures_come_back_as_data() {
    let addr = serve().await;
    let client = HttpJsonClient::new().unwrap();

    match client.call(&call(addr, "/text")).await.unwrap_err() {
        HttpJsonError::NotJson {
            status,
            body_excerpt,
            ..
        } => {
            assert_eq!(status, 200);
            assert_eq!(body_excerpt, "plain words, not JSON");
        }
        other => panic!("{other:?}"),
    }

    let mut slow = call(addr, "/slow");
    slow.timeout = Duration::from_millis(300);
    assert_eq!(
        client.call(&slow).await.unwrap_err(),
        HttpJsonError::Timeout { timeout_ms: 300 }
    );

    let mut big = call(addr, "/big");
    big.max_response_bytes = 10_000;
    assert_eq!(
        client.call(&big).await.unwrap_err(),
        HttpJsonError::TooLarge { limit: 10_000 }
    );
    big.max_response_bytes = 30_000;
    assert!(client.call(&big).await.is_ok());

    // A redirect is an answer, not an invitation: the policy judged this URL's host.
    match client.call(&call(addr, "/redirect")).await.unwrap_err() {
        HttpJsonError::Status { status, .. } => assert_eq!(status, 307),
        other => panic!("{other:?}"),
    }

    assert!(matches!(
        client.call(&call(addr, "/nope")).await.unwrap_err(),
        HttpJsonError::Status { status: 404, .. }
    ));

    // Nothing listens on a port we just released.
    let closed = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    assert!(matches!(
        client.call(&call(closed, "/echo")).await.unwrap_err(),
        HttpJsonError::Transport { .. }
    ));

    // https is spoken (rustls, ring): a plain-HTTP server fails the TLS handshake, which is a
    // transport failure, not a refused scheme.
    let mut tls = call(addr, "/echo");
    tls.url = format!("https://{addr}/echo").parse().unwrap();
    match client.call(&tls).await.unwrap_err() {
        HttpJsonError::Transport { reason } => {
            assert!(!reason.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let mut ftp = call(addr, "/echo");
    ftp.url = "ftp://example.invalid/x".parse().unwrap();
    assert_eq!(
        client.call(&ftp).await.unwrap_err(),
        HttpJsonError::UnsupportedScheme {
            scheme: "ftp".into()
        }
    );
}

#[tokio::test]
async fn errors_serialize_with_a_tag_for_traces() {
    let err = HttpJsonError::Timeout { timeout_ms: 5 };
    assert_eq!(
        serde_json::to_value(&err).unwrap(),
        json!({"error": "timeout", "timeout_ms": 5})
    );
}

#[tokio::test]
async fn an_exchange_returns_any_answer_and_leaves_judging_to_the_caller() {
    let addr = serve().await;
    let client = HttpJsonClient::new().unwrap();
    let (_dir, path) = secret_file();
    let mut c = call(addr, "/fail");
    c.headers = vec![(
        "Authorization".into(),
        HeaderValue::Secret {
            source: SecretSource::File(path),
            prefix: "Bearer ".into(),
        },
    )];
    let exchange = client.exchange(&c).await.unwrap();
    assert_eq!(exchange.status, 500);
    assert_eq!(exchange.body, "boom; you sent Bearer [redacted]");
    assert!(
        exchange
            .headers
            .iter()
            .any(|(name, value)| name == "content-type" && value.starts_with("text/plain")),
        "{:?}",
        exchange.headers
    );
    let text = client.exchange(&call(addr, "/text")).await.unwrap();
    assert_eq!(
        (text.status, text.body.as_str()),
        (200, "plain words, not JSON")
    );
    let mut slow = call(addr, "/slow");
    slow.timeout = Duration::from_millis(200);
    assert_eq!(
        client.exchange(&slow).await.unwrap_err(),
        HttpJsonError::Timeout { timeout_ms: 200 }
    );
}

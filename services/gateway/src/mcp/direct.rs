//! The hot requests answered without the SDK's transport: `ping`, `tools/list` and
//! `tools/call` from a client of a revision with the handshake (before 2026-07-28), sent
//! as plain JSON POSTs.
//!
//! rmcp's stateless transport serves each POST with a service instance of its own: a
//! spawned serve loop, a spawned task per request and channels between them, around a
//! handler call that takes microseconds. For these three methods the endpoint calls the
//! same [`Tools`] the SDK's handler calls, with the SDK's model types for the message and
//! its answer and the SDK's own rules for answering an older client
//! ([`ServerResult::strip_result_type_for_legacy_peer`] and
//! [`ServerResult::strip_non_object_output_for_legacy_peer`]), so the wire format is the
//! SDK's. Everything else goes to the transport as before: `initialize`, notifications,
//! `server/discover` and requests that carry the 2026-07-28 lifecycle (`_meta` protocol
//! version, or that revision in `MCP-Protocol-Version`), unknown methods, and any request
//! whose headers the transport might refuse (an `Accept` that is not plainly JSON and
//! SSE, an unknown revision, a `Host` it cannot parse). For a request taken here, every
//! check the transport makes passes by construction: the test below compares both
//! answers.

use axum::http::header::{ACCEPT, CONTENT_TYPE, HOST};
use axum::http::{HeaderMap, HeaderValue, StatusCode, request::Parts};
use axum::response::{IntoResponse, Response};
use noema_core::scopes::Principal;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, JsonObject, JsonRpcRequest,
    JsonRpcResponse, JsonRpcVersion2_0, PaginatedRequestParams, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use serde::ser::Error as _;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::call::{ToolOutput, WireResult};
use super::{PROTOCOL_VERSION_HEADER, Tools};
use crate::forward::TokenChecked;

/// The methods answered here.
const METHODS: [&str; 3] = ["ping", "tools/list", "tools/call"];

/// The prefix of the `_meta` keys of the 2026-07-28 lifecycle (protocol version, client
/// info and capabilities per request), which the transport validates and negotiates.
const LIFECYCLE_META_PREFIX: &str = "io.modelcontextprotocol/";

/// A request answered here.
#[derive(Debug, PartialEq)]
pub struct Hot {
    id: RequestId,
    method: Method,
    /// The endpoint's check of the request's token, passed on to a tool's route.
    checked: Option<TokenChecked>,
}

/// The methods answered here, with their parameters.
#[derive(Debug, PartialEq)]
enum Method {
    Ping,
    ListTools(Option<PaginatedRequestParams>),
    CallTool(CallToolRequestParams),
}

/// `message` (already checked by [`super::jsonrpc::check`]) as a request answered here,
/// or `None` when it is for the SDK's transport.
pub fn eligible(parts: &Parts, message: Value) -> Option<Hot> {
    let method = message.get("method")?.as_str()?;
    if !METHODS.contains(&method) || message.get("id").is_none() {
        return None;
    }
    let lifecycle_meta = message
        .get("params")
        .and_then(|params| params.get("_meta"))
        .and_then(Value::as_object)
        .is_some_and(|meta| meta.keys().any(|k| k.starts_with(LIFECYCLE_META_PREFIX)));
    if lifecycle_meta || !headers_pass(parts) {
        return None;
    }
    let ClientJsonRpcMessage::Request(JsonRpcRequest { id, request, .. }) =
        serde_json::from_value::<ClientJsonRpcMessage>(message).ok()?
    else {
        return None;
    };
    let method = match request {
        ClientRequest::PingRequest(_) => Method::Ping,
        ClientRequest::ListToolsRequest(request) => Method::ListTools(request.params),
        ClientRequest::CallToolRequest(request) => Method::CallTool(request.params),
        _ => return None,
    };
    Some(Hot {
        id,
        method,
        checked: parts.extensions.get::<TokenChecked>().cloned(),
    })
}

/// The plainest `tools/call`: exactly these members, the parameters only a name and
/// arguments, strings without escapes where borrowed. Anything else, however valid, is
/// read the long way ([`eligible`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainCall<'a> {
    jsonrpc: &'a str,
    id: RequestId,
    method: &'a str,
    params: PlainParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

/// `body` as a request answered here, read straight into its parameters rather than into
/// a tree first, when it is a plain `tools/call` ([`PlainCall`], which [`super::jsonrpc`]'s
/// checks pass by construction) with headers the transport would pass; `None` sends it the
/// long way. The request is the one [`eligible`] makes of the same message (a test
/// compares).
pub fn plain_call(parts: &Parts, body: &[u8]) -> Option<Hot> {
    let call: PlainCall = serde_json::from_slice(body).ok()?;
    if call.jsonrpc != "2.0" || call.method != "tools/call" || !headers_pass(parts) {
        return None;
    }
    let mut params = CallToolRequestParams::new(call.params.name);
    if let Some(arguments) = call.params.arguments {
        params = params.with_arguments(arguments);
    }
    Some(Hot {
        id: call.id,
        method: Method::CallTool(params),
        checked: parts.extensions.get::<TokenChecked>().cloned(),
    })
}

/// Whether the transport would let a request with these headers through to its handler,
/// judged conservatively: anything unusual is left to the transport.
fn headers_pass(parts: &Parts) -> bool {
    accepts_json_and_sse(&parts.headers)
        && host_parses(parts)
        && revision(&parts.headers).is_some_and(|revision| {
            revision.is_none_or(|r| {
                r < ProtocolVersion::V_2026_07_28.as_str()
                    && ProtocolVersion::KNOWN_VERSIONS
                        .iter()
                        .any(|known| known.as_str() == r)
            })
        })
}

/// The `MCP-Protocol-Version` header: `Some(None)` when absent, `None` when unreadable.
fn revision(headers: &HeaderMap) -> Option<Option<&str>> {
    match headers.get(PROTOCOL_VERSION_HEADER) {
        None => Some(None),
        Some(value) => value.to_str().ok().map(Some),
    }
}

/// An `Accept` that names both `application/json` and `text/event-stream` without
/// parameters (a quality weight is the transport's to judge).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',') {
            if entry.contains([';', '"']) {
                return false;
            }
            let essence = entry.trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// A `Host` header that is a valid authority, or none and an absolute URI.
fn host_parses(parts: &Parts) -> bool {
    match parts.headers.get(HOST) {
        Some(host) => host
            .to_str()
            .is_ok_and(|host| http::uri::Authority::try_from(host).is_ok()),
        None => parts.uri.authority().is_some(),
    }
}

/// An answer given here.
pub enum Answer {
    /// A message as the SDK's type (boxed: it is much larger than a tool's result).
    Message(Box<ServerJsonRpcMessage>),
    /// A tool's result with structured content, which goes out as the route wrote it.
    Tool {
        id: RequestId,
        is_error: bool,
        text: String,
        structured: Box<RawValue>,
    },
}

impl Serialize for Answer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Answer::Message(message) => message.serialize(serializer),
            Answer::Tool {
                id,
                is_error,
                text,
                structured,
            } => {
                let mut result =
                    ServerResult::CallToolResult(ToolOutput::sdk_result(*is_error, text.clone()));
                result.strip_result_type_for_legacy_peer();
                let ServerResult::CallToolResult(result) = &result else {
                    return Err(S::Error::custom("a tool's result changed its kind"));
                };
                JsonRpcResponse {
                    jsonrpc: JsonRpcVersion2_0,
                    id: id.clone(),
                    result: WireResult {
                        result,
                        structured: Some(structured),
                    },
                }
                .serialize(serializer)
            }
        }
    }
}

impl Answer {
    /// The answer's JSON. A tool's result is written straight into one buffer sized for
    /// it, in the bytes the SDK's types give (its [`Serialize`] above; a test compares):
    /// the text escaped in one pass, the structured content copied as it is.
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let Answer::Tool {
            id,
            is_error,
            text,
            structured,
        } = self
        else {
            return serde_json::to_vec(self);
        };
        let structured = structured.get();
        // Escaping grows a route's JSON by its quotes (about a tenth); a rare larger text
        // just grows the buffer once more.
        let mut out = Vec::with_capacity(128 + text.len() + text.len() / 8 + structured.len());
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut out, id)?;
        out.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
        serde_json::to_writer(&mut out, text.as_str())?;
        out.extend_from_slice(br#"}],"isError":"#);
        out.extend_from_slice(if *is_error { b"true" } else { b"false" });
        out.extend_from_slice(br#","structuredContent":"#);
        out.extend_from_slice(structured.as_bytes());
        out.extend_from_slice(b"}}");
        Ok(out)
    }
}

/// The answer to an eligible `request` from `principal`, as the SDK's handler would give
/// it to a client of a revision with the handshake.
pub async fn answer(
    tools: &Tools,
    principal: &Principal,
    headers: &HeaderMap,
    request: Hot,
) -> Answer {
    let Hot {
        id,
        method,
        checked,
    } = request;
    let result = match method {
        Method::Ping => Ok(ServerResult::empty(())),
        Method::ListTools(params) => tools
            .list(principal, params)
            .map(ServerResult::ListToolsResult),
        Method::CallTool(params) => match tools
            .call(principal, headers, checked.as_ref(), params)
            .await
        {
            Ok(ToolOutput {
                is_error,
                text,
                structured: Some(structured),
            }) => {
                return Answer::Tool {
                    id,
                    is_error,
                    text,
                    structured,
                };
            }
            Ok(output) => Ok(ServerResult::CallToolResult(ToolOutput::sdk_result(
                output.is_error,
                output.text,
            ))),
            Err(error) => Err(error),
        },
    };
    match result {
        Ok(mut result) => {
            // The SDK's rules for a client before 2026-07-28 (a tool's structured content
            // is always an object, which they keep).
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            Answer::Message(Box::new(ServerJsonRpcMessage::response(result, id)))
        }
        Err(error) => Answer::Message(Box::new(ServerJsonRpcMessage::error(error, Some(id)))),
    }
}

/// `answer` as the transport sends a JSON answer: 200, `application/json`.
pub fn response(answer: &Answer) -> Response {
    match answer.to_json() {
        Ok(body) => (
            StatusCode::OK,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response(),
        Err(err) => {
            tracing::error!(error = %err, "serialising an MCP answer failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::extract::Request;
    use axum::http::Method;
    use axum::routing::get;
    use serde_json::json;

    use super::super::Mcp;
    use super::*;

    fn principal(superuser: bool) -> Principal {
        Principal {
            token_id: "t".into(),
            peer_id: "p".into(),
            scopes: Vec::new(),
            read_namespaces: Vec::new(),
            write_namespaces: Vec::new(),
            superuser,
            tenant: "p".into(),
        }
    }

    /// Routes standing in for the gateway's: an object, an array and a problem answer.
    fn routes() -> Router {
        Router::new()
            .route(
                "/v1/messages/inbox",
                get(|request: Request| async move {
                    axum::Json(json!({"ok": true, "query": request.uri().query(),
                                      "actor": request.headers().get("x-actor")
                                          .and_then(|v| v.to_str().ok())}))
                }),
            )
            .route(
                "/status",
                get(|| async { axum::Json(json!(["RUNNING", 1])) }),
            )
            .route(
                "/health",
                get(|| async {
                    (
                        StatusCode::NOT_FOUND,
                        [(CONTENT_TYPE, "application/problem+json")],
                        r#"{"title":"missing"}"#,
                    )
                }),
            )
    }

    fn request(body: &Value, revision: Option<&str>, principal: &Principal) -> Request {
        let mut request = Request::new(Body::from(body.to_string()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = "/v1/mcp".parse().unwrap();
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(HOST, HeaderValue::from_static("127.0.0.1:8080"));
        headers.insert("x-actor", HeaderValue::from_static("alice"));
        if let Some(revision) = revision {
            headers.insert(
                PROTOCOL_VERSION_HEADER,
                HeaderValue::from_str(revision).unwrap(),
            );
        }
        request.extensions_mut().insert(principal.clone());
        request
    }

    async fn read(response: Response) -> (StatusCode, Option<HeaderValue>, Value) {
        let status = response.status();
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            content_type,
            serde_json::from_slice(&bytes).unwrap(),
        )
    }

    #[tokio::test]
    async fn answers_are_the_sdk_transports() {
        let mcp = Mcp::with_page_size(routes(), 1 << 20, 7);
        let call = |name: &str, arguments: Value| {
            json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})
        };
        let messages = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "7"}}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"cursor": "x"}}),
            call(
                "messages.inbox",
                json!({"recipient": "bob/é", "limit": "20"}),
            ),
            call("messages.inbox", json!({"bogus": [1]})),
            call("ledger_status", json!({})),
            call("system.health", json!({})),
            call("no_such_tool", json!({})),
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "ledger_status", "_meta": {"progressToken": 1}}}),
        ];
        let callers = [principal(true), principal(false)];
        let mut compared = 0;
        for revision in [
            None,
            Some("2024-11-05"),
            Some("2025-03-26"),
            Some("2025-06-18"),
            Some("2025-11-25"),
        ] {
            for caller in &callers {
                for message in &messages {
                    let (parts, _) = request(message, revision, caller).into_parts();
                    let hot = eligible(&parts, message.clone())
                        .unwrap_or_else(|| panic!("{message} is not answered directly"));
                    let direct = response(&answer(&mcp.tools, caller, &parts.headers, hot).await);
                    let transport = mcp.forward(request(message, revision, caller)).await;
                    let (direct, transport) = (read(direct).await, read(transport).await);
                    assert_eq!(direct, transport, "{message} at {revision:?}");
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, 5 * 2 * messages.len());
    }

    #[test]
    fn plain_calls_are_read_as_the_long_way_reads_them() {
        let caller = principal(true);
        let plain = [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"messages.inbox","arguments":{"recipient":"bob","limit":"20"}}}"#,
            r#"{"params":{"arguments":null,"name":"ledger_status"},"method":"tools/call","id":"c","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"x\u00e9"}}"#,
        ];
        for body in plain {
            let message: Value = serde_json::from_str(body).unwrap();
            let (parts, _) = request(&message, Some("2025-06-18"), &caller).into_parts();
            let fast = plain_call(&parts, body.as_bytes()).unwrap_or_else(|| panic!("{body}"));
            assert_eq!(Some(fast), eligible(&parts, message), "{body}");
        }
        let long_way = [
            // Members or parameters besides the plain ones.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":1}"#,
            // Not a tool call, not JSON-RPC 2.0, an escaped method, a duplicate member.
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
            // Ids the SDK does not read, a bad name or arguments.
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            "not json",
        ];
        for body in long_way {
            let (parts, _) = request(&json!({}), None, &caller).into_parts();
            assert_eq!(plain_call(&parts, body.as_bytes()), None, "{body}");
        }
        // Headers the transport must judge send even a plain call the long way.
        let (mut parts, _) = request(&json!({}), Some("2026-07-28"), &caller).into_parts();
        assert_eq!(plain_call(&parts, plain[0].as_bytes()), None);
        parts.headers.remove(PROTOCOL_VERSION_HEADER);
        parts
            .headers
            .insert(ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(plain_call(&parts, plain[0].as_bytes()), None);
    }

    #[test]
    fn tool_answers_are_written_as_the_sdk_types_serialise_them() {
        let texts = [
            String::new(),
            r#"{"ok":true,"body":"a \"quoted\" line\nand é, 🙂"}"#.to_owned(),
            "tab\t, control \u{1} and \u{7f}, quote \" and backslash \\".to_owned(),
            "x".repeat(10_000),
        ];
        let ids = [
            RequestId::Number(0),
            RequestId::Number(-42),
            RequestId::String("c\"é".into()),
        ];
        let mut compared = 0;
        for id in &ids {
            for text in &texts {
                for is_error in [false, true] {
                    let structured =
                        RawValue::from_string(r#"{"b":[1,2.5,"é"],"a":null}"#.into()).unwrap();
                    let answer = Answer::Tool {
                        id: id.clone(),
                        is_error,
                        text: text.clone(),
                        structured,
                    };
                    assert_eq!(
                        String::from_utf8(answer.to_json().unwrap()).unwrap(),
                        serde_json::to_string(&answer).unwrap()
                    );
                    compared += 1;
                }
            }
        }
        assert_eq!(compared, 3 * 4 * 2);
    }

    #[test]
    fn requests_the_transport_must_judge_are_left_to_it() {
        let caller = principal(true);
        let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let eligible_with =
            |message: &Value, revision: Option<&str>, edit: &dyn Fn(&mut HeaderMap)| {
                let (mut parts, _) = request(message, revision, &caller).into_parts();
                edit(&mut parts.headers);
                eligible(&parts, message.clone()).is_some()
            };
        let nothing = |_: &mut HeaderMap| {};
        assert!(eligible_with(&ping, None, &nothing));
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "no/such"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping",
                   "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
        ] {
            assert!(!eligible_with(&message, None, &nothing), "{message}");
        }
        for revision in ["2026-07-28", "1999-01-01"] {
            assert!(
                !eligible_with(&ping, Some(revision), &nothing),
                "{revision}"
            );
        }
        for accept in [
            "application/json",
            "application/json;q=0, text/event-stream",
            "*/*",
        ] {
            let edit = |headers: &mut HeaderMap| {
                headers.insert(ACCEPT, HeaderValue::from_static(accept));
            };
            assert!(!eligible_with(&ping, None, &edit), "{accept}");
        }
        let bad_host = |headers: &mut HeaderMap| {
            headers.insert(HOST, HeaderValue::from_static("a b"));
        };
        assert!(!eligible_with(&ping, None, &bad_host));
    }
}

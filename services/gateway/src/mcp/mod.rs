//! One MCP endpoint for all of Noema: `POST /v1/mcp`, streamable HTTP, JSON-RPC 2.0.
//!
//! The protocol is the official Rust SDK's (`rmcp`): its streamable HTTP service runs
//! without sessions (`legacy_session_mode: false`) and answers plain JSON, so any gateway
//! replica serves any request. It negotiates every revision it knows, from 2024-11-05
//! through the handshake revisions (`initialize` → the newest both sides know) to
//! 2026-07-28 (`server/discover` and per-request `_meta`), answers `ping` and
//! notifications (202), and `GET`/`DELETE` with 405 (no server-initiated stream, no
//! session to end). rmcp fits the gateway because it is a tower service an axum handler
//! can call, and because it hands each request's HTTP parts to the handler: Noema
//! authenticates the bearer token before the SDK sees the request, and the handler reads
//! the caller's principal and token from those parts. The cost is its dependency tree
//! (chrono, a second base64 and SHA-2 version, rand 0.10 besides ours); writing the
//! protocol by hand would mean following the revision churn (2026-07-28 removed the
//! handshake, sessions and `ping`) ourselves.
//!
//! Two paths, one set of tools ([`Tools`]): the hot requests of a client with the
//! handshake (`ping`, `tools/list`, `tools/call` as plain JSON POSTs, headers the
//! transport would pass) are answered by the endpoint itself ([`direct`]), with the SDK's
//! model types for the message and the answer and its rules for older clients; the
//! stateless transport spends more on a service instance, two spawned tasks and channels
//! per POST than the tool call itself costs. Everything else (`initialize`,
//! notifications, the 2026-07-28 lifecycle, unknown methods, unusual headers) goes to the
//! SDK's transport, whose handler calls the same [`Tools`]. A test compares both paths'
//! answers message by message.
//!
//! Tools are the routes declared with [`Route::tool`](crate::route::Route::tool)
//! ([`tools`]). `tools/list` shows a token only the tools its scopes allow, paged; a
//! tool the token may not call is refused exactly as an unknown tool is. `tools/call`
//! turns the arguments into the route's REST request, carrying the caller's token, and
//! runs it through the gateway's router ([`call`]): the same handler, checks and errors
//! as REST. The route's JSON answer is the result's `structuredContent` and its text; a
//! non-2xx answer is a result with `isError: true` (a tool failure), while protocol
//! problems (unknown tool, bad cursor) are JSON-RPC errors. On the direct path the
//! structured content is the route's JSON text as it came (validated, not parsed into a
//! tree and written out again). Before a message reaches either path, [`jsonrpc`] checks
//! its envelope (parse error, invalid request, invalid params as JSON-RPC errors where
//! the SDK would answer 415 or "method not found") and splits a 2025-03-26 client's
//! batch.
//!
//! Adding a tool is one line on a route declaration in `routes/<svc>.rs`:
//! `.tool("name", "one short sentence")`; nothing here changes.

pub mod call;
mod direct;
pub mod jsonrpc;
pub mod tools;

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, FromRequest, Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use noema_core::scopes::Principal;
use noema_proto::identity::v1 as pb;
use noema_runtime::auth::{Authenticator, bearer_token};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ErrorData, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tower::ServiceExt;
use tracing::Instrument;

use crate::GatewayState;
use crate::error::{ApiError, ErrorStyle};
use crate::forward::TokenChecked;
use crate::route::{Input, OperationDoc, Reply, ResponseDoc, Route, Routes, Schemas, Verb};
use call::ToolOutput;
use tools::ToolSpec;

/// The endpoint's path.
pub const PATH: &str = "/v1/mcp";

/// Tools per `tools/list` page.
pub const PAGE_SIZE: usize = 50;

/// The JSON-RPC methods the endpoint answers (besides notifications).
pub const METHODS: [&str; 6] = [
    "initialize",
    "notifications/initialized",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
];

/// The protocol revisions the endpoint negotiates, oldest first.
pub fn protocol_versions() -> Vec<&'static str> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(ProtocolVersion::as_str)
        .collect()
}

/// The newest revision a client reaches with `initialize` (later ones have no
/// handshake: their clients use `server/discover`).
pub fn handshake_version() -> &'static str {
    let modern = ProtocolVersion::V_2026_07_28.as_str();
    protocol_versions()
        .into_iter()
        .rfind(|v| *v < modern)
        .unwrap_or(modern)
}

/// The MCP endpoint's state: Noema's tools, answered directly for the hot requests
/// ([`direct`]) and through the SDK's transport for everything else.
#[derive(Clone)]
pub struct Mcp {
    transport: StreamableHttpService<Handler, NeverSessionManager>,
    tools: Arc<Tools>,
    /// The gateway's cached token check, the one a REST route makes first.
    tokens: Option<Arc<dyn Authenticator>>,
}

impl Mcp {
    /// Tool calls are dispatched through `routes` (the gateway's router without this
    /// endpoint's state); bodies are read up to `max_body_bytes`.
    pub fn new(routes: Router, max_body_bytes: usize) -> Mcp {
        Mcp::with_page_size(routes, max_body_bytes, PAGE_SIZE)
    }

    /// As [`Mcp::new`], with `page_size` tools per `tools/list` page.
    pub fn with_page_size(routes: Router, max_body_bytes: usize, page_size: usize) -> Mcp {
        let tools = Arc::new(Tools {
            routes,
            max_body_bytes,
            page_size: page_size.max(1),
        });
        let handler = Handler {
            tools: Arc::clone(&tools),
        };
        let mut config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_json_response(true);
        // Any replica answers any request: no sessions, no server-initiated streams.
        config.legacy_session_mode = false;
        config.sse_keep_alive = None;
        config.max_request_body_bytes = max_body_bytes;
        Mcp {
            transport: StreamableHttpService::new(
                move || Ok(handler.clone()),
                Arc::new(NeverSessionManager::default()),
                config,
            ),
            tools,
            tokens: None,
        }
    }

    /// The endpoint authenticates a bearer token through `tokens`, the gateway's cached
    /// token check that a REST route makes first, not with an `Authenticate` call. The
    /// endpoint's own route makes that check before it (unless anonymous scopes are
    /// configured) and hands on the principal it found, and the tool call's route takes
    /// the endpoint's word for the same token ([`TokenChecked`]), so a tool call checks the
    /// token as often as the REST call does. Anything but a valid token (none, a malformed
    /// header, a rejected token, the authority unreachable) is still answered by
    /// `Authenticate` itself, so refusals read as before.
    pub fn with_token_cache(mut self, tokens: Arc<dyn Authenticator>) -> Mcp {
        self.tokens = Some(tokens);
        self
    }

    /// Puts the caller of a `POST` in `request`'s extensions: as the route's token check
    /// found it ([`TokenChecked`]), or from the token cache when it knows the token as
    /// valid (then with a [`TokenChecked`] too, so the tool call's route does not look the
    /// token up again), otherwise as `Authenticate` answers.
    async fn authenticate(
        &self,
        state: &GatewayState,
        request: &mut Request,
    ) -> Result<(), tonic::Status> {
        let headers = request.headers();
        let token = bearer_token(headers).ok().flatten();
        let extensions = request.extensions();
        if let Some(token) = token
            && extensions
                .get::<TokenChecked>()
                .is_some_and(|checked| checked.is(token))
            && extensions.get::<Principal>().is_some()
        {
            return Ok(());
        }
        if let (Some(tokens), Some(token)) = (&self.tokens, token)
            && let Ok(principal) = tokens.authenticate(token).await
        {
            let checked = TokenChecked::new(token);
            let extensions = request.extensions_mut();
            extensions.insert(checked);
            extensions.insert(principal);
            return Ok(());
        }
        let principal = state
            .identity()
            .authenticate(crate::forward::grpc(headers, pb::AuthenticateRequest {}))
            .await?;
        let extensions = request.extensions_mut();
        extensions.remove::<TokenChecked>();
        extensions.insert(noema_runtime::auth::principal_from_proto(
            principal.into_inner(),
        ));
        Ok(())
    }

    /// The SDK transport's answer to `request`.
    async fn forward(&self, request: Request) -> Response {
        match self.transport.clone().oneshot(request).await {
            Ok(response) => response.map(Body::new),
            Err(never) => match never {},
        }
    }

    /// A JSON `POST`: its envelope checked ([`jsonrpc`]), a batch split into messages.
    async fn post(&self, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, self.tools.max_body_bytes).await else {
            return StatusCode::PAYLOAD_TOO_LARGE.into_response();
        };
        if let Some(principal) = parts.extensions.get::<Principal>()
            && let Some(call) = direct::plain_call(&parts, &bytes)
        {
            let answer = direct::answer(&self.tools, principal, &parts.headers, call).await;
            return direct::response(&answer);
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Err(_) => rpc_error(jsonrpc::error(
                Value::Null,
                jsonrpc::PARSE_ERROR,
                "Parse error: the body is not JSON",
            )),
            Ok(Value::Array(batch)) => self.batch(&parts, batch).await,
            Ok(mut message) => match jsonrpc::check(&message) {
                Err(error) => rpc_error(error),
                Ok(()) => {
                    let bytes = if jsonrpc::normalise_id(&mut message) {
                        Bytes::from(message.to_string())
                    } else {
                        bytes
                    };
                    match self.direct(&parts, message).await {
                        Some(answer) => direct::response(&answer),
                        None => {
                            self.forward(Request::from_parts(parts, Body::from(bytes)))
                                .await
                        }
                    }
                }
            },
        }
    }

    /// The answer to a checked message the endpoint answers itself ([`direct`]), or
    /// `None` when the SDK's transport must.
    async fn direct(&self, parts: &http::request::Parts, message: Value) -> Option<direct::Answer> {
        let principal = parts.extensions.get::<Principal>()?;
        let request = direct::eligible(parts, message)?;
        Some(direct::answer(&self.tools, principal, &parts.headers, request).await)
    }

    /// A batch: allowed only to 2025-03-26 clients; each message is answered as if sent
    /// alone, and the answers (none for notifications) are returned together.
    async fn batch(&self, parts: &http::request::Parts, batch: Vec<Value>) -> Response {
        let revision = parts
            .headers
            .get(PROTOCOL_VERSION_HEADER)
            .and_then(|v| v.to_str().ok());
        if batch.is_empty() || !jsonrpc::batches_allowed(revision) {
            return rpc_error(jsonrpc::error(
                Value::Null,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: batches are allowed only to 2025-03-26 clients, and not empty",
            ));
        }
        let mut answers = Vec::new();
        let mut processed = 0_usize;
        for mut message in batch {
            if let Err(error) = jsonrpc::check(&message) {
                answers.push(error);
                continue;
            }
            jsonrpc::normalise_id(&mut message);
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            if message.get("method") == Some(&Value::from("initialize")) {
                answers.push(jsonrpc::error(
                    id,
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: initialize may not be part of a batch",
                ));
                continue;
            }
            processed += 1;
            let body = message.to_string();
            if let Some(answer) = self.direct(parts, message).await {
                answers.push(serde_json::to_value(&answer).unwrap_or_else(|err| {
                    jsonrpc::error(id, jsonrpc::INTERNAL_ERROR, &err.to_string())
                }));
                continue;
            }
            let mut single = Request::new(Body::from(body));
            *single.method_mut() = Method::POST;
            *single.uri_mut() = parts.uri.clone();
            *single.headers_mut() = parts.headers.clone();
            single.headers_mut().remove(CONTENT_LENGTH);
            if let Some(principal) = parts.extensions.get::<Principal>() {
                single.extensions_mut().insert(principal.clone());
            }
            let response = self.forward(single).await;
            if response.status() == StatusCode::ACCEPTED {
                continue;
            }
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap_or_default();
            answers.push(serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                jsonrpc::error(
                    id,
                    jsonrpc::INVALID_REQUEST,
                    String::from_utf8_lossy(&bytes).trim(),
                )
            }));
        }
        if answers.is_empty() {
            return StatusCode::ACCEPTED.into_response();
        }
        // Nothing in it could be processed: the input as a whole is not accepted (400, as
        // for a single invalid message), with each message's error.
        let status = if processed == 0 {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        (status, axum::Json(Value::Array(answers))).into_response()
    }
}

/// The header a client names its protocol revision in, after the handshake.
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// A JSON-RPC error for a message that cannot be processed: 400 with the error body.
fn rpc_error(error: Value) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
}

/// Whether the request says its body is JSON (other bodies go to the SDK as they are,
/// which refuses them with 415).
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Noema's tools as MCP serves them, whichever path a request takes: the tool table
/// filtered by the caller's scopes, and calls run through the gateway's router.
struct Tools {
    routes: Router,
    max_body_bytes: usize,
    page_size: usize,
}

impl Tools {
    /// `tools/list`: the page at `request`'s cursor of the tools `principal` may call.
    fn list(
        &self,
        principal: &Principal,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ListToolsResult, ErrorData> {
        let visible: Vec<&ToolSpec> = tools::table()
            .tools
            .iter()
            .filter(|spec| spec.allowed(principal))
            .collect();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&start| start > 0 && start < visible.len())
                .ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?,
        };
        let end = visible.len().min(start + self.page_size);
        let mut result = ListToolsResult::with_all_items(
            visible[start..end]
                .iter()
                .map(|spec| spec.tool.clone())
                .collect(),
        )
        // The list depends on the token: no shared cache may keep it.
        .with_cache_scope(CacheScope::Private)
        .with_ttl_ms(60_000);
        if end < visible.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    /// `tools/call`: the tool's route run for `principal`, with the request's `headers`
    /// (and the endpoint's check of their token, when it made one the route honours).
    async fn call(
        &self,
        principal: &Principal,
        headers: &http::HeaderMap,
        checked: Option<&TokenChecked>,
        request: CallToolRequestParams,
    ) -> Result<ToolOutput, ErrorData> {
        let spec = tools::table()
            .get(&request.name)
            .filter(|spec| spec.allowed(principal))
            .ok_or_else(|| unknown_tool(&request.name))?;
        let span = tracing::info_span!("mcp.tool", tool = %spec.name(), http.route = spec.path);
        async {
            let mut rest = match call::rest_request(spec, request.arguments, headers) {
                Ok(rest) => rest,
                Err(message) => return Ok(ToolOutput::error(message)),
            };
            if let Some(checked) = checked {
                rest.extensions_mut().insert(checked.clone());
            }
            let response = match self.routes.clone().oneshot(rest).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            call::tool_result(response, self.max_body_bytes)
                .await
                .map_err(|message| ErrorData::internal_error(message, None))
        }
        .instrument(span)
        .await
    }
}

/// Noema's MCP server for the SDK's transport: [`Tools`] behind rmcp's handler trait.
#[derive(Clone)]
struct Handler {
    tools: Arc<Tools>,
}

/// The caller the endpoint authenticated, and its request's parts.
fn caller(
    context: &RequestContext<RoleServer>,
) -> Result<(&Principal, &http::request::Parts), ErrorData> {
    let parts = context
        .extensions
        .get::<http::request::Parts>()
        .ok_or_else(|| ErrorData::internal_error("request parts missing", None))?;
    let principal = parts
        .extensions
        .get::<Principal>()
        .ok_or_else(|| ErrorData::internal_error("caller not authenticated", None))?;
    Ok((principal, parts))
}

/// The protocol error for a tool that does not exist or that the caller may not call:
/// the same either way, so a token cannot learn which tools it lacks.
fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown tool: {name}"), None)
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("noema", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Noema: ledger, identity, diaries and signing as tools. tools/list shows \
                 what this token may call; each tool runs the REST route it names, with \
                 the same checks and errors (GET /v1/help for more).",
            )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (principal, _) = caller(&context)?;
        self.tools.list(principal, request)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (principal, parts) = caller(&context)?;
        self.tools
            .call(
                principal,
                &parts.headers,
                parts.extensions.get::<TokenChecked>(),
                request,
            )
            .await?
            .into_result()
            .map(CallToolResponse::from)
            .map_err(|message| ErrorData::internal_error(message, None))
    }
}

/// A JSON-RPC 2.0 request or notification, as `POST /v1/mcp` reads it (alone, or in a
/// batch from a 2025-03-26 client).
#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct JsonRpcMessage {
    #[schemars(extend("enum" = ["2.0"]))]
    jsonrpc: String,
    /// Absent for a notification.
    #[schemars(extend("anyOf" = [
        {"type": "string"},
        {"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}
    ]))]
    id: Option<serde_json::Value>,
    /// `initialize`, `ping`, `tools/list`, `tools/call`, `server/discover`, …
    method: String,
    /// An object when present (MCP names every parameter).
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    params: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The endpoint's request, passed to the SDK as it came.
pub struct McpRequest(Request);

impl<S: Send + Sync> FromRequest<S> for McpRequest {
    type Rejection = std::convert::Infallible;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(McpRequest(request))
    }
}

impl Input for McpRequest {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        let message = schemas
            .requests
            .subschema_for::<JsonRpcMessage>()
            .to_value();
        doc.body = Some(serde_json::json!({
            "oneOf": [message, {"type": "array", "minItems": 1, "items": message}]
        }));
    }
}

/// The SDK's answer.
pub struct McpReply(Response);

impl IntoResponse for McpReply {
    fn into_response(self) -> Response {
        self.0
    }
}

impl Reply for McpReply {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.responses.push(ResponseDoc {
            status: 200,
            description: "The JSON-RPC response",
            content: Some((
                "application/json",
                serde_json::json!({
                    "type": ["object", "array"],
                    "description": "JSON-RPC 2.0 response (an array of them for a batch)"
                }),
            )),
        });
        doc.responses.push(ResponseDoc {
            status: 202,
            description: "A notification or response was accepted",
            content: None,
        });
        // The SDK's own refusals: a message that is not JSON-RPC 2.0 is answered with a
        // JSON-RPC error object, and a client that does not accept both response media
        // types with 406.
        doc.responses.push(ResponseDoc {
            status: 400,
            description: "Not a JSON-RPC 2.0 message, or a batch with none: JSON-RPC error responses",
            content: Some((
                "application/json",
                serde_json::json!({
                    "type": ["object", "array"],
                    "description": "JSON-RPC 2.0 error response (an array of them for a batch)"
                }),
            )),
        });
        doc.responses.push(ResponseDoc {
            status: 406,
            description: "The Accept header does not name both application/json and text/event-stream",
            content: None,
        });
        doc.responses.push(ResponseDoc {
            status: 415,
            description: "The body is not application/json",
            content: None,
        });
    }
}

/// Every MCP request: a `POST` is authenticated (401 in Noema's error shape, with
/// `WWW-Authenticate: Bearer`) and then handed to the SDK with the caller's principal.
async fn endpoint(
    State(state): State<GatewayState>,
    Extension(mcp): Extension<Mcp>,
    McpRequest(mut request): McpRequest,
) -> McpReply {
    if request.method() == Method::POST {
        match mcp.authenticate(&state, &mut request).await {
            Ok(()) => {}
            Err(status) => {
                let error = ApiError::from(status);
                let mut response = ErrorStyle::Noema.render(&error.0);
                if response.status() == StatusCode::UNAUTHORIZED {
                    response
                        .headers_mut()
                        .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                }
                return McpReply(response);
            }
        }
    }
    if request.method() == Method::POST && is_json(request.headers()) {
        return McpReply(mcp.post(request).await);
    }
    McpReply(mcp.forward(request).await)
}

const MCP: Routes = Routes::new(
    "mcp",
    ErrorStyle::Noema,
    "noema.identity.v1.IdentityService",
);

/// The endpoint's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    vec![
        MCP.route(
            Verb::Post,
            PATH,
            "mcp",
            "MCP (streamable HTTP, JSON-RPC 2.0): initialize or server/discover, ping, tools/list, tools/call",
            endpoint,
        )
        .calls("Authenticate")
        .feature(crate::features::DISCOVERY_TOOLS),
        // GET and DELETE are not routes: the router answers them 405 with `Allow: POST`,
        // which is what the specification asks of a server that opens no stream and
        // keeps no session.
    ]
}

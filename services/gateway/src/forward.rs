//! What a REST request passes on to the gRPC calls made for it: the caller's own bearer
//! token (the gateway never substitutes a privileged one) through [`Caller`], and the
//! request's body and query read into typed values that also document the route.

use std::marker::PhantomData;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use noema_core::Failure;
use noema_runtime::auth::{AuthError, Authenticator};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::GatewayState;
use crate::error::{ApiError, ErrorStyle};
use crate::object_body::ObjectBody;
use crate::route::{Input, OperationDoc, Schemas};

/// A gRPC request carrying the REST caller's `Authorization` header.
pub fn grpc<T>(headers: &HeaderMap, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = headers.get(axum::http::header::AUTHORIZATION)
        && let Ok(value) = tonic::metadata::MetadataValue::try_from(value.as_bytes())
    {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// The REST caller, as the services behind the gateway see it: their clients, and
/// requests that carry the caller's token.
pub struct Caller {
    state: GatewayState,
    headers: HeaderMap,
    /// The TCP peer of the connection, when the request came over one (not for the
    /// requests the MCP endpoint makes of the routes in memory).
    peer: Option<SocketAddr>,
}

impl Caller {
    /// `message` as a gRPC request with the caller's token.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        grpc(&self.headers, message)
    }

    /// Whether the request comes from this host ([`is_local_client`]).
    pub fn is_local(&self) -> bool {
        is_local_client(self.peer, &self.headers)
    }

    /// A request header's text, or empty.
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }
}

/// A caller reaches the services through the state's clients (`caller.ledger()`, …), so a
/// new service's client is written once, in `crate::clients`.
impl std::ops::Deref for Caller {
    type Target = GatewayState;

    fn deref(&self) -> &GatewayState {
        &self.state
    }
}

impl FromRequestParts<GatewayState> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &GatewayState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Caller {
            state: state.clone(),
            headers: parts.headers.clone(),
            peer: parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| *addr),
        })
    }
}

impl Input for Caller {}

/// An address as a proxy header writes it: `1.2.3.4`, `::1`, `[::1]`, `::ffff:1.2.3.4`.
fn header_ip(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    let text = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    text.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
}

/// Whether a request comes from this host, as CogniRelay judges it for its host ops
/// endpoints: the connection's peer must be a loopback address, and a proxy on this host
/// that names a non-loopback client (`X-Forwarded-For`'s first entry, or `X-Real-IP`)
/// makes the request remote. A header can only ever make a caller remote, never local: a
/// remote peer stays remote whatever it claims. No peer (a request made in memory) is
/// not local.
pub fn is_local_client(peer: Option<SocketAddr>, headers: &HeaderMap) -> bool {
    let Some(peer) = peer else {
        return false;
    };
    if !peer.ip().to_canonical().is_loopback() {
        return false;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let forwarded = header("x-forwarded-for")
        .and_then(|v| v.split(',').next().map(str::to_owned))
        .filter(|v| !v.trim().is_empty());
    let real = header("x-real-ip").filter(|v| !v.trim().is_empty());
    // A named client that is not an address (`unknown`, a host name) is not loopback.
    ![forwarded, real].into_iter().flatten().any(|named| {
        !header_ip(&named).is_some_and(|ip| ip.is_loopback()) && named.trim() != "localhost"
    })
}

/// What [`require_token`] checks a route's caller with: the route's error style, and the
/// token authority (asked over gRPC, answers cached briefly, as every service does).
#[derive(Clone)]
pub struct TokenCheck {
    pub style: ErrorStyle,
    pub authenticator: Arc<dyn Authenticator>,
    /// The route reads the caller's principal the check found (the MCP endpoint): it goes
    /// into the request's extensions, with the [`TokenChecked`] it came from.
    pub keeps_principal: bool,
}

/// A bearer token the MCP endpoint has just found valid through the same cached check
/// [`require_token`] makes, on a request the endpoint makes of a route in memory for a tool
/// call: the route lets it through without looking the token up a second time. Only this
/// crate makes one, and a request from the wire cannot carry an extension. The route's
/// service still authenticates the token and checks its scopes, as for any request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenChecked {
    token: Arc<str>,
}

impl TokenChecked {
    /// `token` was found valid by the gateway's token check.
    pub(crate) fn new(token: &str) -> TokenChecked {
        TokenChecked {
            token: token.into(),
        }
    }

    /// Whether `token` is the one that was checked.
    pub fn is(&self, token: &str) -> bool {
        *self.token == *token
    }
}

/// Refuses a request without a valid bearer token before anything reads its body, so a
/// caller without one learns it must authenticate (401 with `WWW-Authenticate: Bearer`),
/// not what its body lacks: a missing or malformed header, and a token the token
/// authority rejects (unknown, revoked, expired). When the authority cannot be asked,
/// the request goes on and the service answers for itself. A tool call's request whose
/// token the MCP endpoint has just checked ([`TokenChecked`]) is not looked up again. The
/// services still authenticate the token and check its scopes.
pub async fn require_token(
    State(check): State<TokenCheck>,
    mut request: Request,
    next: Next,
) -> Response {
    let style = check.style;
    let refusal = match noema_runtime::auth::bearer_token(request.headers()) {
        Ok(Some(token))
            if request
                .extensions()
                .get::<TokenChecked>()
                .is_some_and(|checked| checked.is(token)) =>
        {
            return next.run(request).await;
        }
        Ok(Some(token)) => match check.authenticator.authenticate(token).await {
            Ok(principal) if check.keeps_principal => {
                let checked = TokenChecked::new(token);
                let extensions = request.extensions_mut();
                extensions.insert(checked);
                extensions.insert(principal);
                return next.run(request).await;
            }
            Ok(_) | Err(AuthError::Unavailable(_)) => return next.run(request).await,
            Err(err) => err,
        },
        Ok(None) => AuthError::Missing,
        Err(err) => err,
    };
    let mut response = style.render(&Failure::from_status(&noema_core::to_status(&refusal)));
    // RFC 6750 §3: a 401 names the scheme it wants (MCP clients look for it). CogniRelay's
    // paths answer exactly as the original, which names none.
    if style != ErrorStyle::CogniRelay {
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// Parses a JSON body. Only the first JSON value counts and unknown fields are ignored,
/// as the seed systems do; a decode failure is `invalid JSON: …` (`MALFORMED_BODY`). A
/// struct is read from a JSON object only, never from an array ([`ObjectBody`]).
pub fn json_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<ObjectBody<T>>();
    match stream.next() {
        Some(Ok(ObjectBody(value))) => Ok(value),
        Some(Err(err)) => Err(ApiError::malformed_body(format!("invalid JSON: {err}"))),
        None => Err(ApiError::malformed_body("invalid JSON: EOF")),
    }
}

/// A JSON request body read as `T` ([`json_body`]), documented by `T`'s schema.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        json_body(&bytes)
            .map(JsonBody)
            .map_err(IntoResponse::into_response)
    }
}

impl<T: JsonSchema> Input for JsonBody<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.body = Some(schemas.requests.subschema_for::<T>().to_value());
    }
}

/// A JSON request body the handler decodes itself (open-cognition's Go-style
/// decoding), documented by the schema of `T`, the shape it expects.
pub struct RawJson<T> {
    pub bytes: Bytes,
    shape: PhantomData<T>,
}

impl<T, S: Send + Sync> FromRequest<S> for RawJson<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(RawJson {
            bytes,
            shape: PhantomData,
        })
    }
}

impl<T: JsonSchema> Input for RawJson<T> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.body = Some(schemas.requests.subschema_for::<T>().to_value());
    }
}

/// A CogniRelay route's query string read as `T`: a name given twice counts once, with its
/// last value, as Starlette's `QueryParams` gives FastAPI's scalar parameters. Otherwise
/// [`Query`].
pub struct LastQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for LastQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        let mut last: Vec<(String, String)> = Vec::new();
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            match last.iter_mut().find(|(seen, _)| *seen == name) {
                Some(pair) => pair.1 = value.into_owned(),
                None => last.push((name.into_owned(), value.into_owned())),
            }
        }
        let once = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(last)
            .finish();
        let uri: axum::http::Uri = format!("/?{once}")
            .parse()
            .map_err(|_| ApiError::malformed_query("query: not a query string"))?;
        axum::extract::Query::<T>::try_from_uri(&uri)
            .map(|axum::extract::Query(value)| LastQuery(value))
            .map_err(|err| ApiError::malformed_query(format!("query: {}", err.body_text())))
    }
}

impl<T: JsonSchema> Input for LastQuery<T> {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.query_from::<T>();
    }
}

/// A query string read as `T` (a name given twice is refused), documented by `T`'s
/// schema. A query `T` cannot read is the route's own 400 (`MALFORMED_QUERY`) in its
/// error shape, never axum's plain-text rejection.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::try_from_uri(&parts.uri)
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|err| ApiError::malformed_query(format!("query: {}", err.body_text())))
    }
}

impl<T: JsonSchema> Input for Query<T> {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.query_from::<T>();
    }
}

/// A query string in which names may repeat (MoltNet's arrays: `tags=a&tags=b`, also
/// `tags[]=a`), read as `T`: a `Vec<String>` field takes every value of its name, a
/// field read with [`first`] the first one. Values are percent-decoded, `+` is a space.
pub struct RepeatedQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for RepeatedQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parse_repeated(parts.uri.query())
            .map(RepeatedQuery)
            .map_err(|err| ApiError::malformed_query(format!("query: {err}")))
    }
}

impl<T: JsonSchema> Input for RepeatedQuery<T> {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.query_from::<T>();
    }
}

pub(crate) fn parse_repeated<T: DeserializeOwned>(
    raw: Option<&str>,
) -> Result<T, serde_json::Error> {
    let mut values: Map<String, Value> = Map::new();
    for (name, value) in query_pairs(raw) {
        let name = name.strip_suffix("[]").unwrap_or(&name).to_owned();
        if let Value::Array(list) = values
            .entry(name)
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            list.push(Value::String(value));
        }
    }
    T::deserialize(Value::Object(values))
}

/// Reads the first of a repeated query value's occurrences (`#[serde(default,
/// deserialize_with = "first")]` on an `Option<String>` field of a [`RepeatedQuery`]).
pub fn first<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(Vec::<String>::deserialize(deserializer)?.into_iter().next())
}

/// Query parameters as (name, value) pairs, repeated names kept.
fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                // Exactly two hex digits (`from_str_radix` alone would also take `+1`).
                b'%' => match (hex_digit(bytes.get(i + 1)), hex_digit(bytes.get(i + 2))) {
                    (Some(high), Some(low)) => {
                        out.push(high << 4 | low);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                },
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    fn hex_digit(byte: Option<&u8>) -> Option<u8> {
        byte.and_then(|b| char::from(*b).to_digit(16))
            .and_then(|d| u8::try_from(d).ok())
    }
    raw.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Sample {
        #[serde(default)]
        tags: Vec<String>,
        #[serde(default, deserialize_with = "first")]
        limit: Option<String>,
        #[serde(default, deserialize_with = "first")]
        x: Option<String>,
        #[serde(default, deserialize_with = "first")]
        offset: Option<String>,
    }

    #[test]
    fn repeated_query_values_are_kept_and_decoded() {
        let q: Sample = parse_repeated(Some("tags=a&tags=b%20c&tags[]=d+e&limit=5&x=%zz")).unwrap();
        assert_eq!(q.tags, ["a", "b c", "d e"]);
        assert_eq!(q.limit.as_deref(), Some("5"));
        assert_eq!(q.x.as_deref(), Some("%zz"));
        assert_eq!(q.offset, None);
        let none: Sample = parse_repeated(None).unwrap();
        assert!(none.tags.is_empty() && none.limit.is_none());
        let twice: Sample = parse_repeated(Some("limit=3&limit=1")).unwrap();
        assert_eq!(twice.limit.as_deref(), Some("3"));
    }

    /// Every byte percent-encoded, or left as it is where that is unambiguous.
    fn percent_encode(bytes: &[u8], plain: &[bool]) -> String {
        let mut out = String::new();
        for (i, b) in bytes.iter().enumerate() {
            let keep = plain.get(i).copied().unwrap_or(false)
                && (b.is_ascii_alphanumeric() || b"-._~!$'()*,;:@/?".contains(b));
            if keep {
                out.push(char::from(*b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn percent_encoded_values_decode_to_what_was_encoded(
            name in "[a-z]{1,8}",
            value in proptest::prelude::any::<String>(),
            plain in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..64),
        ) {
            let raw = format!("{name}={}", percent_encode(value.as_bytes(), &plain));
            proptest::prop_assert_eq!(query_pairs(Some(&raw)), vec![(name, value)]);
        }

        #[test]
        fn a_percent_without_two_hex_digits_stays_as_it_is(
            after in "[^0-9a-fA-F&=%]{0,2}|[0-9a-fA-F][^0-9a-fA-F&=%]|[+\\-][0-9a-fA-F]",
        ) {
            let raw = format!("x=%{after}");
            let value = after.replace('+', " ");
            proptest::prop_assert_eq!(query_pairs(Some(&raw)), vec![("x".to_owned(), format!("%{value}"))]);
        }

        #[test]
        fn any_query_is_read_without_a_panic(raw in "[a-z%+&=\\[\\]0-9A-F\u{e9}]{0,40}") {
            let _ = parse_repeated::<Sample>(Some(&raw));
            let _ = parse_repeated::<Value>(Some(&raw));
        }

        #[test]
        fn any_body_is_decoded_or_refused_as_malformed(bytes in proptest::prelude::any::<Vec<u8>>()) {
            if let Err(err) = json_body::<Value>(&bytes) {
                proptest::prop_assert_eq!(err.0.reason, noema_core::Reason::MalformedBody);
            }
        }
    }

    #[tokio::test]
    async fn a_query_that_cannot_be_read_is_a_malformed_query_error() {
        #[derive(Debug, Deserialize)]
        struct One {
            #[allow(dead_code)]
            a: Option<String>,
        }
        let parts = |uri: &str| {
            axum::http::Request::builder()
                .uri(uri)
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        let Err(err) = Query::<One>::from_request_parts(&mut parts("/x?a=1&a=2"), &()).await else {
            panic!("a name given twice was read");
        };
        assert_eq!(err.0.reason, noema_core::Reason::MalformedQuery);
        assert!(err.0.message.starts_with("query: "), "{}", err.0.message);
        let Query(one) = Query::<One>::from_request_parts(&mut parts("/x?a=%41"), &())
            .await
            .unwrap();
        assert_eq!(one.a.as_deref(), Some("A"));
    }

    /// A token authority that knows one token and counts the lookups.
    struct OneToken(std::sync::atomic::AtomicUsize);

    impl Authenticator for OneToken {
        fn authenticate<'a, 'b, 'c>(
            &'a self,
            token: &'b str,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = Result<noema_core::scopes::Principal, AuthError>> + Send + 'c>,
        >
        where
            'a: 'c,
            'b: 'c,
            Self: 'c,
        {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let answer = if token == "good" {
                Ok(noema_core::scopes::Principal {
                    token_id: "t".into(),
                    peer_id: "p".into(),
                    scopes: Vec::new(),
                    read_namespaces: Vec::new(),
                    write_namespaces: Vec::new(),
                    superuser: false,
                    tenant: "p".into(),
                })
            } else {
                Err(AuthError::Rejected(
                    noema_core::scopes::TokenRejection::Revoked,
                ))
            };
            Box::pin(std::future::ready(answer))
        }
    }

    #[tokio::test]
    async fn a_token_the_endpoint_checked_is_not_looked_up_again_and_no_other_is() {
        use axum::http::StatusCode;
        let tokens = Arc::new(OneToken(std::sync::atomic::AtomicUsize::new(0)));
        let router = |keeps_principal: bool| {
            let check = TokenCheck {
                style: ErrorStyle::Noema,
                authenticator: tokens.clone(),
                keeps_principal,
            };
            axum::Router::new().route(
                "/x",
                axum::routing::get(|request: Request| async move {
                    let extensions = request.extensions();
                    format!(
                        "{} {}",
                        extensions.get::<TokenChecked>().is_some(),
                        extensions
                            .get::<noema_core::scopes::Principal>()
                            .map_or("-", |p| p.peer_id.as_str())
                    )
                })
                .route_layer(axum::middleware::from_fn_with_state(check, require_token)),
            )
        };
        let call = |keeps_principal: bool, token: &str, checked: Option<&str>| {
            let mut request = axum::http::Request::builder()
                .uri("/x")
                .header("authorization", format!("Bearer {token}"))
                .body(axum::body::Body::empty())
                .unwrap();
            if let Some(checked) = checked {
                request.extensions_mut().insert(TokenChecked::new(checked));
            }
            tower::ServiceExt::oneshot(router(keeps_principal), request)
        };
        let lookups = || tokens.0.load(std::sync::atomic::Ordering::SeqCst);
        let text = |response: Response| async move {
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap();
            (status, String::from_utf8(body.to_vec()).unwrap())
        };

        // Checked by the endpoint: let through without a lookup.
        let (status, _) = text(call(false, "good", Some("good")).await.unwrap()).await;
        assert_eq!((status, lookups()), (StatusCode::OK, 0));
        // A check of another token counts for nothing: a revoked token is refused.
        let (status, _) = text(call(false, "bad", Some("good")).await.unwrap()).await;
        assert_eq!((status, lookups()), (StatusCode::UNAUTHORIZED, 1));
        let (status, _) = text(call(false, "bad", None).await.unwrap()).await;
        assert_eq!((status, lookups()), (StatusCode::UNAUTHORIZED, 2));
        // The MCP endpoint's route hands on what it found; no other route does.
        let answer = text(call(true, "good", None).await.unwrap()).await;
        assert_eq!(answer, (StatusCode::OK, "true p".to_owned()));
        let answer = text(call(false, "good", None).await.unwrap()).await;
        assert_eq!(answer, (StatusCode::OK, "false -".to_owned()));
        assert_eq!(lookups(), 4);
    }

    #[test]
    fn bodies_decode_the_first_json_value_and_say_what_is_malformed() {
        let value: Value = json_body(b"{\"a\":1} trailing").unwrap();
        assert_eq!(value["a"], 1);
        let err = json_body::<Value>(b"").unwrap_err();
        assert_eq!(err.0.message, "invalid JSON: EOF");
        assert_eq!(err.0.reason, noema_core::Reason::MalformedBody);
        let err = json_body::<Value>(b"{not json").unwrap_err();
        assert!(err.0.message.starts_with("invalid JSON: "));
    }

    #[test]
    fn a_struct_is_read_from_an_object_only() {
        #[derive(Debug, Deserialize)]
        struct Pair {
            #[allow(dead_code)]
            a: Option<String>,
            #[allow(dead_code)]
            b: Option<String>,
        }
        assert!(json_body::<Pair>(b"{\"a\":\"x\"}").is_ok());
        for body in ["[null,null]", "[]", "\"text\"", "7", "null"] {
            let err = json_body::<Pair>(body.as_bytes()).unwrap_err();
            assert_eq!(err.0.reason, noema_core::Reason::MalformedBody, "{body}");
            assert!(
                err.0.message.starts_with("invalid JSON: invalid type: "),
                "{body}: {}",
                err.0.message
            );
        }
        let err = json_body::<Pair>(b"[null,null]").unwrap_err();
        assert!(
            err.0
                .message
                .starts_with("invalid JSON: invalid type: sequence, expected struct Pair"),
            "{}",
            err.0.message
        );
        // A body that is a list where the route wants one still reads.
        let list: Vec<Option<String>> = json_body(b"[null,\"x\"]").unwrap();
        assert_eq!(list, vec![None, Some("x".to_owned())]);
        let value: Value = json_body(b"[1]").unwrap();
        assert_eq!(value, serde_json::json!([1]));
    }

    #[test]
    fn a_nested_struct_is_read_from_an_object_only() {
        #[derive(Debug, Deserialize, PartialEq)]
        struct Inner {
            a: Option<String>,
        }
        #[derive(Debug, Deserialize, PartialEq)]
        #[serde(rename_all = "snake_case")]
        enum Shape {
            Round { inner: Inner },
            Flat(Inner),
        }
        #[derive(Debug, Deserialize, PartialEq)]
        struct Outer {
            #[serde(default)]
            inner: Option<Inner>,
            #[serde(default)]
            list: Vec<Inner>,
            #[serde(default)]
            shape: Option<Shape>,
            #[serde(default)]
            free: Value,
        }
        let outer: Outer = json_body(
            br#"{"inner":{"a":"x"},"list":[{"a":null}],"shape":{"round":{"inner":{}}},"free":[1,[2]]}"#,
        )
        .unwrap();
        assert_eq!(
            outer.inner,
            Some(Inner {
                a: Some("x".to_owned())
            })
        );
        assert_eq!(outer.list, vec![Inner { a: None }]);
        assert_eq!(
            outer.shape,
            Some(Shape::Round {
                inner: Inner { a: None }
            })
        );
        assert_eq!(outer.free, serde_json::json!([1, [2]]));
        for body in [
            r#"{"inner":["x"]}"#,
            r#"{"list":[{"a":"x"},[null]]}"#,
            r#"{"shape":{"round":[{}]}}"#,
            r#"{"shape":{"round":{"inner":[null]}}}"#,
            r#"{"shape":{"flat":[null]}}"#,
        ] {
            let err = json_body::<Outer>(body.as_bytes()).unwrap_err();
            assert_eq!(err.0.reason, noema_core::Reason::MalformedBody, "{body}");
            assert!(
                err.0
                    .message
                    .contains("invalid type: sequence, expected struct"),
                "{body}: {}",
                err.0.message
            );
        }
    }

    #[test]
    fn an_integer_takes_an_integral_float_and_a_value_keeps_its_number() {
        #[derive(Debug, Deserialize)]
        struct Numbers {
            count: u32,
            #[serde(default)]
            delta: Option<i64>,
            #[serde(default)]
            list: Vec<u8>,
            #[serde(default)]
            free: Value,
        }
        let numbers: Numbers =
            json_body(br#"{"count":10.0,"delta":-3.0,"list":[1.0,2],"free":10.0}"#).unwrap();
        assert_eq!(numbers.count, 10);
        assert_eq!(numbers.delta, Some(-3));
        assert_eq!(numbers.list, vec![1, 2]);
        assert_eq!(serde_json::to_string(&numbers.free).unwrap(), "10.0");
        for body in [
            r#"{"count":10.5}"#,
            r#"{"count":-1.0}"#,
            r#"{"count":4294967296.0}"#,
            r#"{"count":1,"list":[256.0]}"#,
            r#"{"count":1,"delta":1e300}"#,
        ] {
            let err = json_body::<Numbers>(body.as_bytes()).unwrap_err();
            assert_eq!(err.0.reason, noema_core::Reason::MalformedBody, "{body}");
        }
    }

    #[test]
    fn only_a_loopback_peer_is_local_and_a_header_never_makes_one() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let none = HeaderMap::new();
        let v4: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let v6: SocketAddr = "[::1]:5000".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.2]:5000".parse().unwrap();
        let remote: SocketAddr = "192.0.2.7:5000".parse().unwrap();
        assert!(is_local_client(Some(v4), &none));
        assert!(is_local_client(Some(v6), &none));
        assert!(is_local_client(Some(mapped), &none));
        assert!(!is_local_client(None, &none));
        assert!(!is_local_client(Some(remote), &none));
        // A remote peer claiming to be local stays remote.
        for claim in [
            headers(&[("x-forwarded-for", "127.0.0.1")]),
            headers(&[("x-real-ip", "::1")]),
            headers(&[("x-forwarded-for", "localhost, 127.0.0.1")]),
        ] {
            assert!(!is_local_client(Some(remote), &claim), "{claim:?}");
        }
        // A proxy on this host naming a remote client makes the request remote.
        for named in [
            headers(&[("x-forwarded-for", "192.0.2.9, 127.0.0.1")]),
            headers(&[("x-real-ip", "[2001:db8::1]")]),
            headers(&[("x-forwarded-for", "unknown")]),
        ] {
            assert!(!is_local_client(Some(v4), &named), "{named:?}");
        }
        // …and naming a loopback client keeps it local.
        assert!(is_local_client(
            Some(v4),
            &headers(&[
                ("x-forwarded-for", "127.0.0.1, 192.0.2.9"),
                ("x-real-ip", "localhost")
            ])
        ));
    }
}

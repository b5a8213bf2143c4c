//! Authentication and authorisation for every gRPC service, as one tower layer.
//!
//! The layer reads `authorization: Bearer <token>`, resolves it through an
//! [`Authenticator`] (the identity store in the process that hosts identity; the identity
//! service over gRPC, cached briefly, elsewhere), checks the scope the RPC declares in its
//! contract (`noema_proto::METHOD_SCOPES`), and puts the [`Principal`] in the request's
//! extensions for the handler. Tokens are never logged.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use noema_core::content_id::sha256_hex;
use noema_core::scopes::{AUTHENTICATED, PUBLIC, Principal, TokenRejection};
use noema_core::{ErrorCode, Reason, ServiceError};
use noema_proto::identity::v1 as pb;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use tonic::Status;

use crate::client::TracedChannel;

/// Why a request is not authenticated. Messages follow CogniRelay's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing authorization: send the header `authorization: Bearer <token>`")]
    Missing,
    #[error("invalid authorization header: expected `Bearer <token>`")]
    Malformed,
    /// The identity service rejected the token: invalid, revoked or expired.
    #[error("{0}")]
    Rejected(TokenRejection),
    #[error("identity service unavailable: {0}")]
    Unavailable(String),
    /// The token is valid but lacks the scope the RPC declares.
    #[error("missing scope: {required} (the token of {principal} lacks it)")]
    MissingScope { required: String, principal: String },
}

impl ServiceError for AuthError {
    fn code(&self) -> ErrorCode {
        match self {
            AuthError::Missing | AuthError::Malformed | AuthError::Rejected(_) => {
                ErrorCode::Unauthenticated
            }
            AuthError::Unavailable(_) => ErrorCode::Unavailable,
            AuthError::MissingScope { .. } => ErrorCode::PermissionDenied,
        }
    }

    fn reason(&self) -> Reason {
        match self {
            AuthError::Missing => Reason::TokenMissing,
            AuthError::Malformed => Reason::TokenMalformed,
            AuthError::Rejected(rejection) => rejection.reason(),
            AuthError::MissingScope { .. } => Reason::ScopeMissing,
            other => Reason::generic(other.code()),
        }
    }

    fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            AuthError::MissingScope { required, .. } => {
                vec![(noema_core::error::REQUIRED_SCOPE_KEY, required.clone())]
            }
            _ => Vec::new(),
        }
    }
}

impl AuthError {
    pub fn to_status(&self) -> Status {
        noema_core::to_status(self)
    }
}

/// Resolves a bearer token to its principal.
#[async_trait::async_trait]
pub trait Authenticator: Send + Sync + 'static {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthError>;
}

/// gRPC paths anyone may call: health checks and reflection.
fn is_public(path: &str) -> bool {
    path.starts_with("/grpc.health.v1.Health/") || path.starts_with("/grpc.reflection.")
}

/// The bearer token of a request, if it carries one.
pub fn bearer_token(headers: &http::HeaderMap) -> Result<Option<&str>, AuthError> {
    let Some(value) = headers.get(http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| AuthError::Malformed)?;
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::Malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthError::Malformed);
    }
    Ok(Some(token))
}

/// The policy applied to every request of a server.
#[derive(Clone)]
pub struct AuthLayer {
    authenticator: Arc<dyn Authenticator>,
    anonymous_scopes: Arc<Vec<String>>,
}

impl AuthLayer {
    pub fn new(authenticator: Arc<dyn Authenticator>, anonymous_scopes: Vec<String>) -> Self {
        AuthLayer {
            authenticator,
            anonymous_scopes: Arc::new(anonymous_scopes),
        }
    }

    /// Who is calling `path` with `headers`, and whether they may.
    pub async fn authorize(
        &self,
        path: &str,
        headers: &http::HeaderMap,
    ) -> Result<Option<Principal>, Status> {
        if is_public(path) {
            return Ok(None);
        }
        let required = noema_proto::required_scope(path).unwrap_or(AUTHENTICATED);
        let token = bearer_token(headers).map_err(|e| e.to_status())?;
        if required == PUBLIC && token.is_none() {
            return Ok(None);
        }
        let principal = match token {
            Some(token) => self
                .authenticator
                .authenticate(token)
                .await
                .map_err(|e| e.to_status())?,
            None if !self.anonymous_scopes.is_empty() => {
                Principal::anonymous(self.anonymous_scopes.to_vec())
            }
            None => return Err(AuthError::Missing.to_status()),
        };
        if !principal.allows(required) {
            return Err(AuthError::MissingScope {
                required: required.to_owned(),
                principal: principal.to_string(),
            }
            .to_status());
        }
        Ok(Some(principal))
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            policy: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    policy: AuthLayer,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, B, RB> tower::Service<http::Request<B>> for AuthService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    RB: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // The clone that was polled ready serves this call; the fresh clone waits its turn.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let policy = self.policy.clone();
        Box::pin(async move {
            let path = request.uri().path().to_owned();
            match policy.authorize(&path, request.headers()).await {
                Ok(principal) => {
                    if let Some(principal) = principal {
                        request.extensions_mut().insert(principal);
                    }
                    inner.call(request).await
                }
                Err(status) => {
                    tracing::debug!(rpc = %path, code = ?status.code(), "request refused by auth");
                    Ok(status.into_http())
                }
            }
        })
    }
}

/// The principal the auth layer attached to a request.
pub fn principal<T>(request: &tonic::Request<T>) -> Result<&Principal, Status> {
    request
        .extensions()
        .get::<Principal>()
        .ok_or_else(|| AuthError::Missing.to_status())
}

/// Resolves tokens through the identity service over gRPC, remembering answers for `ttl`
/// so that a revoked token stops working within `ttl` (config caps it at 30 s).
pub struct RemoteAuthenticator {
    client: IdentityServiceClient<TracedChannel>,
    ttl: Duration,
    cache: Mutex<HashMap<String, CachedAnswer>>,
}

/// When an answer was fetched, and what it was.
type CachedAnswer = (Instant, Result<Principal, AuthError>);

/// Past this many cached tokens, expired entries are swept on insert.
const CACHE_SWEEP_AT: usize = 10_000;

impl RemoteAuthenticator {
    pub fn new(channel: TracedChannel, ttl: Duration) -> Self {
        RemoteAuthenticator {
            client: IdentityServiceClient::new(channel),
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, key: &str) -> Option<Result<Principal, AuthError>> {
        let cache = self.cache.lock().ok()?;
        let (at, answer) = cache.get(key)?;
        (at.elapsed() < self.ttl).then(|| answer.clone())
    }

    fn remember(&self, key: String, answer: Result<Principal, AuthError>) {
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_SWEEP_AT {
                let ttl = self.ttl;
                cache.retain(|_, (at, _)| at.elapsed() < ttl);
            }
            cache.insert(key, (Instant::now(), answer));
        }
    }
}

pub fn principal_from_proto(p: pb::Principal) -> Principal {
    // An identity service from before tenants names none: the peer is the tenant.
    let tenant = if p.tenant.is_empty() {
        p.peer_id.clone()
    } else {
        p.tenant
    };
    Principal {
        tenant,
        token_id: p.token_id,
        peer_id: p.peer_id,
        scopes: p.scopes,
        read_namespaces: p.read_namespaces,
        write_namespaces: p.write_namespaces,
        superuser: p.superuser,
    }
}

#[async_trait::async_trait]
impl Authenticator for RemoteAuthenticator {
    async fn authenticate(&self, token: &str) -> Result<Principal, AuthError> {
        // Keyed by hash so the cache never holds secrets.
        let key = sha256_hex(token.as_bytes());
        if let Some(answer) = self.cached(&key) {
            return answer;
        }
        let mut request = tonic::Request::new(pb::AuthenticateRequest {});
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|_| AuthError::Malformed)?;
        request.metadata_mut().insert("authorization", value);
        let mut client = self.client.clone();
        let answer = match client.authenticate(request).await {
            Ok(response) => Ok(principal_from_proto(response.into_inner())),
            Err(status) if status.code() == tonic::Code::Unauthenticated => {
                Err(AuthError::Rejected(TokenRejection::from_reason(
                    noema_core::Failure::from_status(&status).reason,
                )))
            }
            // Not cached: the identity service may be back on the next call.
            Err(status) => return Err(AuthError::Unavailable(status.message().to_owned())),
        };
        self.remember(key, answer.clone());
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        if let Ok(v) = value.parse() {
            headers.insert(http::header::AUTHORIZATION, v);
        }
        headers
    }

    #[test]
    fn bearer_tokens_are_parsed_strictly() {
        assert_eq!(bearer_token(&http::HeaderMap::new()), Ok(None));
        assert_eq!(bearer_token(&headers("Bearer abc")), Ok(Some("abc")));
        assert_eq!(bearer_token(&headers("bearer abc")), Ok(Some("abc")));
        assert_eq!(
            bearer_token(&headers("Basic abc")),
            Err(AuthError::Malformed)
        );
        assert_eq!(bearer_token(&headers("Bearer ")), Err(AuthError::Malformed));
        assert_eq!(bearer_token(&headers("abc")), Err(AuthError::Malformed));
    }

    #[test]
    fn health_and_reflection_are_public() {
        assert!(is_public("/grpc.health.v1.Health/Check"));
        assert!(is_public(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
        ));
        assert!(!is_public("/noema.ledger.v1.LedgerService/GetStatus"));
    }
}

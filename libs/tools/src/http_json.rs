//! The `http_json` tool kind: POST a JSON body to a configured URL and read a JSON
//! answer.
//!
//! Every way a call can fail (a status other than 2xx, a body that is not JSON, a body
//! over the size cap, the deadline, a refused connection) comes back as an
//! [`HttpJsonError`] value that can be written into a trace. [`HttpJsonClient::exchange`]
//! is the same POST without judging the answer: whatever status, headers and body came
//! back, for callers that classify answers themselves (the world kernel's sources judge
//! every source kind's answer the same way). Redirects are not followed:
//! the policy judged the configured URL's host, and a redirect could lead anywhere.
//! Header values may be secrets, which are scrubbed from everything returned.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use url::Url;

use crate::secret::{Redactor, SecretError, SecretSource};

/// How much of a non-JSON or error body is kept in an error, for the operator to see.
pub const EXCERPT_BYTES: usize = 512;

/// A header value: plain, or read from a secret (with an optional prefix such as
/// `"Bearer "`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValue {
    Plain(String),
    Secret {
        source: SecretSource,
        prefix: String,
    },
}

/// One call.
#[derive(Debug, Clone)]
pub struct HttpJsonCall {
    pub url: Url,
    pub body: Value,
    pub headers: Vec<(String, HeaderValue)>,
    pub timeout: Duration,
    /// The largest response body read; a larger one fails the call.
    pub max_response_bytes: usize,
}

/// A 2xx answer with a JSON body.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpJsonResponse {
    pub status: u16,
    pub body: Value,
}

/// What came back from a POST, whatever its status and body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpExchange {
    pub status: u16,
    /// Response headers whose values are text, names lowercase; secret values scrubbed.
    pub headers: Vec<(String, String)>,
    /// The body as text (invalid UTF-8 replaced), secret values scrubbed.
    pub body: String,
}

/// Why a call failed, as data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum HttpJsonError {
    #[error("URL scheme {scheme:?} is not supported (http and https are)")]
    UnsupportedScheme { scheme: String },
    #[error("header {name:?} is invalid")]
    InvalidHeader { name: String },
    #[error("{message}")]
    Secret { message: String },
    #[error("the server answered {status}")]
    Status { status: u16, body_excerpt: String },
    #[error("the server answered {status} with a body that is not JSON: {reason}")]
    NotJson {
        status: u16,
        content_type: Option<String>,
        reason: String,
        body_excerpt: String,
    },
    #[error("the response body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("no complete answer within {timeout_ms} ms")]
    Timeout { timeout_ms: u64 },
    #[error("the request failed: {reason}")]
    Transport { reason: String },
}

impl From<SecretError> for HttpJsonError {
    fn from(err: SecretError) -> Self {
        HttpJsonError::Secret {
            message: err.to_string(),
        }
    }
}

/// A reusable caller (one connection pool).
#[derive(Debug, Clone)]
pub struct HttpJsonClient {
    client: reqwest::Client,
}

impl HttpJsonClient {
    pub fn new() -> Result<HttpJsonClient, HttpJsonError> {
        let client = crate::tls::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| HttpJsonError::Transport {
                reason: err.to_string(),
            })?;
        Ok(HttpJsonClient { client })
    }

    /// POSTs `call.body` and returns the JSON answer, scrubbed of secret values.
    pub async fn call(&self, call: &HttpJsonCall) -> Result<HttpJsonResponse, HttpJsonError> {
        let (exchange, redactor) = self.send_call(call).await?;
        let excerpt = |body: &str| redactor.redact(&excerpt(body.as_bytes()));
        if !(200..300).contains(&exchange.status) {
            return Err(HttpJsonError::Status {
                status: exchange.status,
                body_excerpt: excerpt(&exchange.body),
            });
        }
        match serde_json::from_str::<Value>(&exchange.body) {
            Ok(body) => Ok(HttpJsonResponse {
                status: exchange.status,
                body: redactor.redact_json(body),
            }),
            Err(err) => Err(HttpJsonError::NotJson {
                status: exchange.status,
                content_type: exchange
                    .headers
                    .iter()
                    .find(|(name, _)| name == "content-type")
                    .map(|(_, value)| redactor.redact(value)),
                reason: redactor.redact(&err.to_string()),
                body_excerpt: excerpt(&exchange.body),
            }),
        }
    }

    /// POSTs `call.body` and returns what came back, any status and any body, scrubbed of
    /// secret values: only the transport (scheme, headers to send, connection, deadline,
    /// size cap) can fail.
    pub async fn exchange(&self, call: &HttpJsonCall) -> Result<HttpExchange, HttpJsonError> {
        let (exchange, redactor) = self.send_call(call).await?;
        Ok(HttpExchange {
            status: exchange.status,
            headers: exchange
                .headers
                .into_iter()
                .map(|(name, value)| (name, redactor.redact(&value)))
                .collect(),
            body: redactor.redact(&exchange.body),
        })
    }

    /// The POST itself: the raw answer and the redactor of the secrets it sent.
    async fn send_call(
        &self,
        call: &HttpJsonCall,
    ) -> Result<(HttpExchange, Redactor), HttpJsonError> {
        if !matches!(call.url.scheme(), "http" | "https") {
            return Err(HttpJsonError::UnsupportedScheme {
                scheme: call.url.scheme().to_owned(),
            });
        }
        let mut secrets = Vec::new();
        let mut request = self
            .client
            .post(call.url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .json(&call.body);
        for (name, value) in &call.headers {
            let name_ok = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok();
            let text = match value {
                HeaderValue::Plain(text) => text.clone(),
                HeaderValue::Secret { source, prefix } => {
                    let secret = source.resolve()?;
                    let text = format!("{prefix}{}", secret.expose());
                    secrets.push(secret);
                    text
                }
            };
            let mut header_value = match reqwest::header::HeaderValue::from_str(&text) {
                Ok(v) if name_ok => v,
                _ => return Err(HttpJsonError::InvalidHeader { name: name.clone() }),
            };
            if matches!(value, HeaderValue::Secret { .. }) {
                header_value.set_sensitive(true);
            }
            request = request.header(name.as_str(), header_value);
        }
        let redactor = Redactor::new(secrets);
        let timeout_ms = u64::try_from(call.timeout.as_millis()).unwrap_or(u64::MAX);
        match tokio::time::timeout(call.timeout, send(request, call.max_response_bytes)).await {
            Err(_) => Err(HttpJsonError::Timeout { timeout_ms }),
            Ok(Err(err)) => Err(scrub(err, &redactor)),
            Ok(Ok(exchange)) => Ok((exchange, redactor)),
        }
    }
}

async fn send(
    request: reqwest::RequestBuilder,
    limit: usize,
) -> Result<HttpExchange, HttpJsonError> {
    let mut response = request.send().await.map_err(transport)?;
    let status = response.status().as_u16();
    if response
        .content_length()
        .is_some_and(|len| usize::try_from(len).map_or(true, |len| len > limit))
    {
        return Err(HttpJsonError::TooLarge { limit });
    }
    let headers = response
        .headers()
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if body.len() + chunk.len() > limit {
            return Err(HttpJsonError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(HttpExchange {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn transport(err: reqwest::Error) -> HttpJsonError {
    // reqwest's message names the URL; the cause chain says what went wrong.
    let err = err.without_url();
    let mut reason = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        reason.push_str(": ");
        reason.push_str(&cause.to_string());
        source = cause.source();
    }
    HttpJsonError::Transport { reason }
}

fn excerpt(body: &[u8]) -> String {
    let cut = body.get(..EXCERPT_BYTES).unwrap_or(body);
    String::from_utf8_lossy(cut).into_owned()
}

/// Every text in an error with secret values replaced.
fn scrub(err: HttpJsonError, redactor: &Redactor) -> HttpJsonError {
    let r = |s: String| redactor.redact(&s);
    match err {
        HttpJsonError::Status {
            status,
            body_excerpt,
        } => HttpJsonError::Status {
            status,
            body_excerpt: r(body_excerpt),
        },
        HttpJsonError::NotJson {
            status,
            content_type,
            reason,
            body_excerpt,
        } => HttpJsonError::NotJson {
            status,
            content_type: content_type.map(r),
            reason: r(reason),
            body_excerpt: r(body_excerpt),
        },
        HttpJsonError::Transport { reason } => HttpJsonError::Transport { reason: r(reason) },
        other => other,
    }
}

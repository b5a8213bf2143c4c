//! `HttpJsonSource`: the seed's `http_json` interface on noema-tools' HTTP JSON caller (the
//! one the orchestrator uses). It POSTs the JSON body (a rendered ambient request template,
//! or a tool call's arguments) to the base URL held by `url_env` plus `path`, within
//! `timeout_ms`, and returns whatever came back: the kernel judges every JSON source's
//! answer with one rule (`judge_json_response`), whatever its kind.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use noema_tools::http_json::{HeaderValue, HttpJsonCall, HttpJsonClient};

use super::env::SourceEnv;
use crate::domain::failure::{Failure, FailureClass};
use crate::domain::source::{
    HttpJsonInterface, ResponseSource, SourceError, SourceInvocationContext, SourceOutput,
    SourceRequest,
};

/// The largest answer a JSON source may send.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

pub struct HttpJsonSource {
    client: HttpJsonClient,
    interface: HttpJsonInterface,
    env: Arc<SourceEnv>,
}

impl HttpJsonSource {
    pub fn new(
        client: HttpJsonClient,
        interface: HttpJsonInterface,
        env: Arc<SourceEnv>,
    ) -> HttpJsonSource {
        HttpJsonSource {
            client,
            interface,
            env,
        }
    }
}

fn http_error(message: impl Into<String>) -> SourceError {
    SourceError::new(Failure::new(FailureClass::SourceHttpError, message))
}

#[async_trait]
impl ResponseSource for HttpJsonSource {
    async fn invoke_json(
        &self,
        ctx: &SourceInvocationContext,
        request: SourceRequest,
    ) -> Result<SourceOutput, SourceError> {
        let SourceRequest::Json(body) = request else {
            return Err(http_error("an http_json source answers JSON requests only"));
        };
        let base = self.env.var(&self.interface.url_env).ok_or_else(|| {
            http_error(format!(
                "environment variable {} (url_env) is not set in the world service's process",
                self.interface.url_env
            ))
        })?;
        let url = self.interface.url(&base);
        let url = url.parse().map_err(|e| {
            http_error(format!(
                "{} holds {base:?}, which with path {:?} is not a URL: {e}",
                self.interface.url_env, self.interface.path
            ))
        })?;
        let call = HttpJsonCall {
            url,
            body,
            headers: ctx
                .provenance_headers()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), HeaderValue::Plain(value)))
                .collect(),
            timeout: Duration::from_millis(self.interface.timeout_ms),
            max_response_bytes: MAX_RESPONSE_BYTES,
        };
        let exchange = self
            .client
            .exchange(&call)
            .await
            .map_err(|e| http_error(e.to_string()))?;
        Ok(SourceOutput {
            http_status: Some(exchange.status),
            headers: exchange.headers.into_iter().collect(),
            text: exchange.body,
            tokens: None,
        })
    }
}

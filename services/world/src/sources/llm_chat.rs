//! `LlmChatSource`: an OpenAI-compatible `POST {base_url}/chat/completions`, streamed as
//! server-sent events (each content delta is handed to the generation's observer as it
//! arrives, so the trace holds what came while the call runs) or answered whole.
//!
//! The contract goes as `response_format: {"type": "json_schema", …}` when the kernel asks
//! for it; a provider that refuses it fails the call with `structured_output_rejected` and
//! nothing is resent without it (D14). The request carries the world's provenance headers
//! (`x-noema-world`, `x-noema-attempted-turn`, `x-noema-subject`, …).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::env::SourceEnv;
use crate::domain::failure::{Failure, FailureClass};
use crate::domain::llm_call::TokenUsage;
use crate::domain::source::invoke::GenerationObserver;
use crate::domain::source::{
    ChatRequest, LlmChatInterface, ResponseSource, SourceError, SourceInvocationContext,
    SourceOutput, SourceRequest,
};

/// How much of an error body is kept.
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// Where an LLM source finds its provider when its definition does not say.
#[derive(Debug, Clone, Default)]
pub struct LlmDefaults {
    pub base_url: String,
    pub api_key_env: String,
    pub timeout: Duration,
}

pub struct LlmChatSource {
    http: reqwest::Client,
    interface: LlmChatInterface,
    defaults: Arc<LlmDefaults>,
    env: Arc<SourceEnv>,
}

fn provider_error(message: impl Into<String>) -> SourceError {
    SourceError::new(Failure::new(FailureClass::LlmProviderError, message))
}

impl LlmChatSource {
    pub fn new(
        http: reqwest::Client,
        interface: LlmChatInterface,
        defaults: Arc<LlmDefaults>,
        env: Arc<SourceEnv>,
    ) -> LlmChatSource {
        LlmChatSource {
            http,
            interface,
            defaults,
            env,
        }
    }

    fn base_url(&self) -> Result<String, SourceError> {
        match &self.interface.base_url_env {
            Some(name) => self.env.var(name).ok_or_else(|| {
                provider_error(format!(
                    "environment variable {name} (base_url_env) is not set in the world service's process"
                ))
            }),
            None if !self.defaults.base_url.is_empty() => Ok(self.defaults.base_url.clone()),
            None => Err(provider_error(
                "no LLM provider is configured: set [world.llm] base_url (NOEMA__WORLD__LLM__BASE_URL) \
                 or name base_url_env in the source",
            )),
        }
    }

    fn api_key(&self) -> Result<Option<String>, SourceError> {
        let name = match &self.interface.api_key_env {
            Some(name) => name.as_str(),
            None if !self.defaults.api_key_env.is_empty() => self.defaults.api_key_env.as_str(),
            None => return Ok(None),
        };
        self.env.var(name).map(Some).ok_or_else(|| {
            provider_error(format!(
                "environment variable {name} (the API key) is not set in the world service's process"
            ))
        })
    }
}

#[async_trait]
impl ResponseSource for LlmChatSource {
    async fn invoke_json(
        &self,
        ctx: &SourceInvocationContext,
        request: SourceRequest,
    ) -> Result<SourceOutput, SourceError> {
        let SourceRequest::Chat(chat) = request else {
            return Err(provider_error(
                "an llm_chat_completions source answers chat requests only",
            ));
        };
        let url = format!(
            "{}/chat/completions",
            self.base_url()?.trim_end_matches('/')
        );
        let timeout = self.defaults.timeout;
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        match tokio::time::timeout(timeout, self.exchange(ctx, &url, chat)).await {
            Ok(result) => result,
            Err(_) => Err(provider_error(format!(
                "the provider gave no complete answer within {timeout_ms} ms"
            ))),
        }
    }
}

impl LlmChatSource {
    async fn exchange(
        &self,
        ctx: &SourceInvocationContext,
        url: &str,
        chat: ChatRequest,
    ) -> Result<SourceOutput, SourceError> {
        let mut body = json!({
            "model": chat.model,
            "messages": chat.messages,
            "stream": chat.stream,
        });
        if chat.stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        let sent_format = chat.response_schema.is_some();
        if let Some(schema) = &chat.response_schema {
            body["response_format"] = schema.response_format();
        }
        let mut post = self.http.post(url).json(&body);
        for (name, value) in ctx.provenance_headers() {
            post = post.header(name, value);
        }
        if let Some(key) = self.api_key()? {
            post = post.bearer_auth(key);
        }
        let mut response = post.send().await.map_err(|e| {
            provider_error(format!(
                "the provider could not be reached: {}",
                cause_chain(&e)
            ))
        })?;
        let status = response.status().as_u16();
        let headers: BTreeMap<String, String> = response
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
            })
            .collect();
        if !(200..300).contains(&status) {
            let text = read_capped(&mut response).await;
            return Err(refusal(status, sent_format, headers, text));
        }
        let event_stream = headers
            .get("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let (text, tokens) = if event_stream {
            read_stream(&mut response, chat.observer.as_deref()).await?
        } else {
            let text = read_capped(&mut response).await;
            let answer: Value = serde_json::from_str(&text).map_err(|e| {
                provider_error(format!(
                    "the provider's answer is not JSON ({e}): {}",
                    excerpt(&text)
                ))
            })?;
            let content = answer["choices"][0]["message"]["content"]
                .as_str()
                .ok_or_else(|| {
                    provider_error(format!(
                        "the provider's answer has no choices[0].message.content: {}",
                        excerpt(&text)
                    ))
                })?
                .to_owned();
            if let Some(observer) = chat.observer.as_deref()
                && !content.is_empty()
            {
                observer.chunk(&content).await;
            }
            (content, usage_of(&answer["usage"]))
        };
        Ok(SourceOutput {
            http_status: Some(status),
            headers,
            text,
            tokens,
        })
    }
}

/// A provider's error answer: `structured_output_rejected` when it refuses the response
/// format we sent, `llm_provider_error` otherwise.
fn refusal(
    status: u16,
    sent_format: bool,
    headers: BTreeMap<String, String>,
    body: String,
) -> SourceError {
    let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let error = &parsed["error"];
    let message = error["message"]
        .as_str()
        .map_or_else(|| excerpt(&body), str::to_owned);
    let about_format = error["param"] == json!("response_format")
        || message.contains("response_format")
        || message.contains("json_schema");
    let failure = if sent_format && status == 400 && about_format {
        Failure::new(
            FailureClass::StructuredOutputRejected,
            format!(
                "the provider refused response_format json_schema (HTTP {status}): {message}; \
                 the source requires structured output, so nothing was resent without it"
            ),
        )
    } else {
        Failure::new(
            FailureClass::LlmProviderError,
            format!("the provider answered HTTP {status}: {message}"),
        )
    };
    SourceError {
        failure,
        http_status: Some(status),
        headers,
        body: Some(body),
    }
}

async fn read_capped(response: &mut reqwest::Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = ERROR_BODY_BYTES.saturating_sub(body.len());
        body.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
        if body.len() >= ERROR_BODY_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// Reads server-sent events: each `data:` payload is a chunk object whose
/// `choices[0].delta.content` is the next piece of text; a payload with `usage` carries the
/// token counts; `[DONE]` ends the stream.
async fn read_stream(
    response: &mut reqwest::Response,
    observer: Option<&dyn GenerationObserver>,
) -> Result<(String, Option<TokenUsage>), SourceError> {
    let mut events = SseLines::default();
    let mut text = String::new();
    let mut tokens = None;
    let mut done = false;
    while !done {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| provider_error(format!("the stream broke off: {}", cause_chain(&e))))?;
        let Some(chunk) = chunk else {
            break;
        };
        for data in events.push(&chunk) {
            if data == "[DONE]" {
                done = true;
                break;
            }
            let event: Value = serde_json::from_str(&data).map_err(|e| {
                provider_error(format!(
                    "a stream event is not JSON ({e}): {}",
                    excerpt(&data)
                ))
            })?;
            if !event["error"].is_null() {
                return Err(provider_error(format!(
                    "the provider reported an error in the stream: {}",
                    excerpt(&event["error"].to_string())
                )));
            }
            if let Some(piece) = event["choices"][0]["delta"]["content"].as_str()
                && !piece.is_empty()
            {
                text.push_str(piece);
                if let Some(observer) = observer {
                    observer.chunk(piece).await;
                }
            }
            if let Some(usage) = usage_of(&event["usage"]) {
                tokens = Some(usage);
            }
        }
    }
    if !done {
        return Err(provider_error(
            "the stream ended without [DONE]: the answer may be incomplete",
        ));
    }
    Ok((text, tokens))
}

fn usage_of(usage: &Value) -> Option<TokenUsage> {
    if !usage.is_object() {
        return None;
    }
    Some(TokenUsage {
        prompt_tokens: usage["prompt_tokens"].as_u64(),
        completion_tokens: usage["completion_tokens"].as_u64(),
        total_tokens: usage["total_tokens"].as_u64(),
    })
}

/// Splits a byte stream into server-sent events and returns each event's data (its `data:`
/// lines joined by newlines). Bytes of an unfinished line wait for the next push.
#[derive(Debug, Default)]
struct SseLines {
    pending: Vec<u8>,
    data: Vec<String>,
}

impl SseLines {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(self.data.join("\n"));
                    self.data.clear();
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                self.data
                    .push(value.strip_prefix(' ').unwrap_or(value).to_owned());
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
        }
        events
    }
}

fn excerpt(text: &str) -> String {
    const CHARS: usize = 300;
    let mut out: String = text.chars().take(CHARS).collect();
    if text.chars().count() > CHARS {
        out.push('…');
    }
    out
}

/// An error with its causes, without the URL (reqwest's message names it).
fn cause_chain(err: &reqwest::Error) -> String {
    let mut out = if err.is_timeout() {
        "timed out".to_owned()
    } else if err.is_connect() {
        "connection failed".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::SseLines;

    #[test]
    fn events_are_split_across_arbitrary_byte_boundaries() {
        let stream =
            "data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":\r\ndata: 2}\r\n\r\ndata: [DONE]\n\n";
        for size in [1, 2, 3, 7, 100] {
            let mut lines = SseLines::default();
            let mut events = Vec::new();
            for piece in stream.as_bytes().chunks(size) {
                events.extend(lines.push(piece));
            }
            assert_eq!(
                events,
                ["{\"a\":1}", "{\"b\":\n2}", "[DONE]"],
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn multibyte_text_split_inside_a_character_survives() {
        let stream = "data: {\"t\":\"héllo\"}\n\n".as_bytes().to_vec();
        let mut lines = SseLines::default();
        let mut events = Vec::new();
        for byte in stream {
            events.extend(lines.push(&[byte]));
        }
        assert_eq!(events, ["{\"t\":\"héllo\"}"]);
    }
}

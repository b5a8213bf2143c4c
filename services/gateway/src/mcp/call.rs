//! A tool call as the REST request of its route, and the route's response as the tool's
//! result. The request goes through the gateway's own router, so a call runs the same
//! extractors, handler, scope checks and error rendering as the REST call would.

use axum::body::Body;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, Method, Request, Response};
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::tools::{BODY_ARGUMENT, BodyArgs, ToolSpec};
use crate::route::Verb;

/// Request headers a tool call passes on to its route: the caller's token, the trace
/// context, and `x-…` headers some routes read (`X-Actor`, `x-moltnet-team-id`).
fn forwarded(name: &HeaderName) -> bool {
    name == AUTHORIZATION
        || name == "traceparent"
        || name == "tracestate"
        || name.as_str().starts_with("x-")
}

/// The REST request `spec`'s route receives for `arguments`, or why the arguments do
/// not make one (a tool execution error: the caller can fix its arguments).
pub fn rest_request(
    spec: &ToolSpec,
    arguments: Option<Map<String, Value>>,
    headers: &HeaderMap,
) -> Result<Request<Body>, String> {
    let mut arguments = arguments.unwrap_or_default();
    let mut path = String::with_capacity(spec.path.len() + 32);
    for segment in spec.path.split('/').skip(1) {
        path.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => {
                let value = arguments
                    .remove(name)
                    .ok_or_else(|| format!("missing argument `{name}`"))?;
                let text = scalar(&value)
                    .filter(|text| !text.is_empty())
                    .ok_or_else(|| format!("argument `{name}` must be a non-empty string"))?;
                percent_encode(&text, &mut path);
            }
            None => path.push_str(segment),
        }
    }
    let mut query = String::new();
    for (name, repeated) in &spec.query_params {
        let Some(value) = arguments.remove(name) else {
            continue;
        };
        let values = match value {
            Value::Null => Vec::new(),
            Value::Array(items) if *repeated => items,
            other => vec![other],
        };
        for value in values {
            let text = scalar(&value)
                .ok_or_else(|| format!("argument `{name}` must be a string, number or boolean"))?;
            query.push(if query.is_empty() { '?' } else { '&' });
            percent_encode(name, &mut query);
            query.push('=');
            percent_encode(&text, &mut query);
        }
    }
    let body = match spec.body {
        None => {
            if let Some(name) = arguments.keys().next() {
                return Err(format!("unknown argument `{name}`"));
            }
            None
        }
        Some(BodyArgs::Fields) => Some(Value::Object(arguments)),
        Some(BodyArgs::Nested) => {
            let body = arguments.remove(BODY_ARGUMENT).unwrap_or(Value::Null);
            if let Some(name) = arguments.keys().next() {
                return Err(format!("unknown argument `{name}`"));
            }
            Some(body)
        }
    };

    let method = match spec.verb {
        Verb::Get => Method::GET,
        Verb::Post => Method::POST,
        Verb::Patch => Method::PATCH,
        Verb::Delete => Method::DELETE,
    };
    let mut request = Request::builder().method(method).uri(path + &query);
    for (name, value) in headers {
        if forwarded(name) {
            request = request.header(name, value);
        }
    }
    let body = match body {
        Some(value) => {
            request = request.header(CONTENT_TYPE, "application/json");
            Body::from(value.to_string())
        }
        None => Body::empty(),
    };
    request
        .body(body)
        .map_err(|err| format!("the arguments make no valid request: {err}"))
}

/// A JSON scalar as the text a path or query string carries.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// Appends `text` with every byte but RFC 3986's unreserved characters percent-encoded.
fn percent_encode(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &byte in text.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
}

/// A tool's result: one text block, whether it is an error, and the structured content
/// kept as the JSON text the route answered (not parsed into a tree only to be written out
/// again).
#[derive(Debug, Clone)]
pub struct ToolOutput {
    /// The route answered non-2xx, or the arguments made no request.
    pub is_error: bool,
    /// The text block's text.
    pub text: String,
    /// The structured content: always a JSON object.
    pub structured: Option<Box<RawValue>>,
}

impl ToolOutput {
    /// A tool execution error the caller can fix (bad arguments): text only.
    pub fn error(message: String) -> ToolOutput {
        ToolOutput {
            is_error: true,
            text: message,
            structured: None,
        }
    }

    /// The SDK's result for `text` and `is_error`, without structured content.
    pub fn sdk_result(is_error: bool, text: String) -> CallToolResult {
        let content = vec![ContentBlock::text(text)];
        if is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
    }

    /// The result as the SDK's type, structured content parsed.
    pub fn into_result(self) -> Result<CallToolResult, String> {
        let mut result = ToolOutput::sdk_result(self.is_error, self.text);
        if let Some(raw) = self.structured {
            result.structured_content = Some(
                serde_json::from_str(raw.get())
                    .map_err(|err| format!("structured content: {err}"))?,
            );
        }
        Ok(result)
    }
}

/// The JSON a [`ToolOutput`] is on the wire: the SDK's result with its structured content
/// written out as it is.
#[derive(Serialize)]
pub struct WireResult<'a> {
    #[serde(flatten)]
    pub result: &'a CallToolResult,
    #[serde(rename = "structuredContent", skip_serializing_if = "Option::is_none")]
    pub structured: Option<&'a RawValue>,
}

/// The tool result for the route's response: its JSON body as `structuredContent` and as
/// text (an array body as `{"items": [...]}`, since structured content is an object for
/// clients before 2026-07-28), other bodies as text or base64; `isError` unless 2xx.
pub async fn tool_result(response: Response<Body>, limit: usize) -> Result<ToolOutput, String> {
    let is_error = !response.status().is_success();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let bytes = axum::body::to_bytes(response.into_body(), limit)
        .await
        .map_err(|err| format!("reading the response failed: {err}"))?;
    let is_json = content_type.starts_with("application/json")
        || content_type.starts_with("application/problem+json");
    // JSON is UTF-8, so a body that is not cannot be JSON.
    let utf8 = std::str::from_utf8(&bytes).ok();
    let json = utf8
        .filter(|_| is_json)
        .and_then(|body| Some((body, serde_json::from_str::<&RawValue>(body).ok()?)));
    let (text, structured) = match json {
        Some((body, raw)) => {
            let structured = if raw.get().starts_with('{') {
                raw.to_owned()
            } else {
                serde_json::value::to_raw_value(&json!({ "items": raw }))
                    .map_err(|err| format!("structured content: {err}"))?
            };
            (body.trim_end().to_owned(), structured)
        }
        None => {
            let structured = match utf8 {
                Some(text) => {
                    json!({"content_type": content_type, "size_bytes": bytes.len(), "text": text})
                }
                None => json!({
                    "content_type": content_type,
                    "size_bytes": bytes.len(),
                    "base64": data_encoding::BASE64.encode(&bytes),
                }),
            };
            let text = structured.to_string();
            let structured = serde_json::value::to_raw_value(&structured)
                .map_err(|err| format!("structured content: {err}"))?;
            (text, structured)
        }
    };
    Ok(ToolOutput {
        is_error,
        text,
        structured: Some(structured),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_and_query_values_are_percent_encoded() {
        let mut out = String::new();
        percent_encode("a b/c?d=é~", &mut out);
        assert_eq!(out, "a%20b%2Fc%3Fd%3D%C3%A9~");
    }
}

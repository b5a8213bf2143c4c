//! A scripted OpenAI-compatible chat completions server: `POST /v1/chat/completions`,
//! streaming (server-sent events, `stream_options.include_usage`) or not, with
//! `response_format` json_schema accepted — or refused with a provider's 400 when the script
//! says so. Answers come from an [`LlmScript`]; every request is recorded for the tests
//! (`GET /_toys/llm/requests`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Value, json};

use crate::script::{Answer, LlmScript, ScriptedOutput};

/// The header naming the workflow subject a generation is for.
pub const SUBJECT_HEADER: &str = "x-noema-subject";
/// The header naming the attempted turn a generation is for.
pub const TURN_HEADER: &str = "x-noema-attempted-turn";

/// A fixed `created` time: the toy's answers are the same on every run.
const CREATED: u64 = 1_767_225_600;

/// One request as the toy received it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    pub subject: Option<String>,
    pub turn: Option<u64>,
    pub stream: bool,
    pub body: Value,
}

struct Queue {
    subject: Option<String>,
    turn: Option<u64>,
    outputs: VecDeque<ScriptedOutput>,
}

struct Inner {
    script: LlmScript,
    queues: Mutex<Vec<Queue>>,
    requests: Mutex<Vec<RecordedRequest>>,
    answered: Mutex<u64>,
}

/// The scripted LLM; clones share one script and one request log.
#[derive(Clone)]
pub struct ScriptedLlm {
    inner: Arc<Inner>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a toy's lock poisons nothing worth refusing service for.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ScriptedLlm {
    pub fn new(script: LlmScript) -> ScriptedLlm {
        let queues = script
            .scripts
            .iter()
            .map(|s| Queue {
                subject: s.subject.clone(),
                turn: s.turn,
                outputs: s.outputs.iter().cloned().collect(),
            })
            .collect();
        ScriptedLlm {
            inner: Arc::new(Inner {
                script,
                queues: Mutex::new(queues),
                requests: Mutex::new(Vec::new()),
                answered: Mutex::new(0),
            }),
        }
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/models", get(models))
            .route("/_toys/llm/requests", get(recorded))
            .with_state(self.clone())
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.requests).clone()
    }

    /// Outputs not yet used.
    pub fn remaining(&self) -> usize {
        lock(&self.inner.queues)
            .iter()
            .map(|q| q.outputs.len())
            .sum()
    }

    fn next_output(&self, subject: Option<&str>, turn: Option<u64>) -> Option<ScriptedOutput> {
        let mut queues = lock(&self.inner.queues);
        queues
            .iter_mut()
            .filter(|q| q.subject.is_none() || q.subject.as_deref() == subject)
            .filter(|q| q.turn.is_none() || q.turn == turn)
            .find_map(|q| q.outputs.pop_front())
    }

    fn next_id(&self) -> String {
        let mut answered = lock(&self.inner.answered);
        *answered += 1;
        format!("chatcmpl-toy-{answered}")
    }
}

fn openai_error(status: StatusCode, message: &str, kind: &str, param: Option<&str>) -> Response {
    let mut error =
        json!({"message": message, "type": kind, "code": Value::Null, "param": Value::Null});
    if let Some(param) = param {
        error["param"] = json!(param);
        error["code"] = json!("unsupported_parameter");
    }
    (status, Json(json!({"error": error}))).into_response()
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn completions(State(llm): State<ScriptedLlm>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return openai_error(
            StatusCode::BAD_REQUEST,
            "the body is not JSON",
            "invalid_request_error",
            None,
        );
    };
    let messages_ok = request["messages"].as_array().is_some_and(|m| {
        !m.is_empty()
            && m.iter()
                .all(|m| m["role"].is_string() && m["content"].is_string())
    });
    if !messages_ok || !request["model"].is_string() {
        return openai_error(
            StatusCode::BAD_REQUEST,
            "model (a string) and messages (a non-empty array of {role, content}) are required",
            "invalid_request_error",
            None,
        );
    }
    let subject = header_text(&headers, SUBJECT_HEADER).map(str::to_owned);
    let turn = header_text(&headers, TURN_HEADER).and_then(|t| t.parse().ok());
    let stream = request["stream"] == json!(true);
    lock(&llm.inner.requests).push(RecordedRequest {
        subject: subject.clone(),
        turn,
        stream,
        body: request.clone(),
    });

    if let Some(format) = request.get("response_format") {
        if llm.inner.script.reject_response_format {
            return openai_error(
                StatusCode::BAD_REQUEST,
                "response_format json_schema is not supported by this model",
                "invalid_request_error",
                Some("response_format"),
            );
        }
        let well_formed = match format["type"].as_str() {
            Some("json_schema") => {
                format["json_schema"]["schema"].is_object()
                    && format["json_schema"]["name"].is_string()
            }
            Some("json_object") | Some("text") => true,
            _ => false,
        };
        if !well_formed {
            return openai_error(
                StatusCode::BAD_REQUEST,
                "response_format must be {\"type\": \"json_schema\", \"json_schema\": {\"name\", \"schema\"}}",
                "invalid_request_error",
                Some("response_format"),
            );
        }
    }

    let Some(output) = llm.next_output(subject.as_deref(), turn) else {
        let message = format!(
            "no script answers subject {} turn {}",
            subject.as_deref().unwrap_or("(none)"),
            turn.map_or_else(|| "(none)".to_owned(), |t| t.to_string())
        );
        return openai_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &message,
            "server_error",
            None,
        );
    };
    let latency = llm.inner.script.latency_ms + output.latency_ms;
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    let content = match output.answer() {
        Ok(Answer::Content(content)) => content,
        Ok(Answer::Error(error)) => {
            let status =
                StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return openai_error(status, &error.message, "server_error", None);
        }
        Err(e) => return openai_error(StatusCode::INTERNAL_SERVER_ERROR, &e, "server_error", None),
    };

    let model = request["model"].as_str().unwrap_or_default().to_owned();
    let usage = usage(&request, &content);
    let id = llm.next_id();
    if stream {
        let include_usage = request["stream_options"]["include_usage"] == json!(true);
        stream_response(
            &llm.inner.script,
            id,
            model,
            content,
            include_usage.then_some(usage),
        )
    } else {
        Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop"
            }],
            "usage": usage
        }))
        .into_response()
    }
}

/// Token counts: whitespace-separated words, so they are stable and easy to check.
fn usage(request: &Value, content: &str) -> Value {
    let prompt: usize = request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m["content"].as_str())
                .map(|c| c.split_whitespace().count())
                .sum()
        })
        .unwrap_or_default();
    let completion = content.split_whitespace().count();
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// Splits `content` into pieces of `size` characters (never inside a character).
fn pieces(content: &str, size: usize) -> Vec<String> {
    if size == 0 || content.is_empty() {
        return vec![content.to_owned()];
    }
    let chars: Vec<char> = content.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn stream_response(
    script: &LlmScript,
    id: String,
    model: String,
    content: String,
    usage: Option<Value>,
) -> Response {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    events.extend(
        pieces(&content, script.chunk_chars)
            .into_iter()
            .map(|piece| chunk(json!({"content": piece}), Value::Null)),
    );
    events.push(chunk(json!({}), json!("stop")));
    if let Some(usage) = usage {
        events.push(json!({
            "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "choices": [], "usage": usage
        }));
    }
    let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    frames.push("data: [DONE]\n\n".to_owned());
    let delay = Duration::from_millis(script.chunk_delay_ms);
    let stream = futures::stream::unfold(
        (frames.into_iter(), true),
        move |(mut frames, first)| async move {
            let frame = frames.next()?;
            if !first && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (frames, false)))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn models() -> Json<Value> {
    Json(
        json!({"object": "list", "data": [{"id": "toy", "object": "model", "owned_by": "noema-toys"}]}),
    )
}

async fn recorded(State(llm): State<ScriptedLlm>) -> Json<Vec<RecordedRequest>> {
    Json(llm.requests())
}

//! The one interface every source implementation fulfils. An LLM chat source answers a
//! [`SourceRequest::Chat`], a JSON source (HTTP JSON today, MCP next, test kinds) a
//! [`SourceRequest::Json`]. Implementations do transport only: they return what came back
//! (status, headers, text) or a classified [`SourceError`]; parsing the JSON and checking it
//! against the declared schema is the kernel's ([`super::response`]), so it is the same for
//! every kind. The caller has already stored the `running` source invocation (and, for a
//! generation, the `llm_calls` row) before it calls `invoke_json` (D17).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use uuid::Uuid;

use crate::domain::chat::ChatMessage;
use crate::domain::failure::Failure;
use crate::domain::hash::ContentHash;
use crate::domain::ids::{EntityId, HumanId};
use crate::domain::invocation::InvocationKind;
use crate::domain::llm_call::TokenUsage;

#[async_trait]
pub trait ResponseSource: Send + Sync {
    async fn invoke_json(
        &self,
        ctx: &SourceInvocationContext,
        request: SourceRequest,
    ) -> Result<SourceOutput, SourceError>;
}

/// Who is calling and why: the invocation's provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceInvocationContext {
    pub source_invocation_id: Uuid,
    pub attempt_id: Uuid,
    pub world_slug: HumanId,
    pub attempted_turn: u64,
    pub invocation_kind: InvocationKind,
    pub source_hash: ContentHash,
    pub workflow_node_id: Option<HumanId>,
    pub workflow_subject_entity_id: Option<EntityId>,
}

/// Headers an LLM source sends with each generation so a provider's logs (and the scripted
/// toy LLM, which picks its script by subject and turn) can tell calls apart.
pub const WORLD_HEADER: &str = "x-noema-world";
pub const ATTEMPTED_TURN_HEADER: &str = "x-noema-attempted-turn";
pub const SUBJECT_HEADER: &str = "x-noema-subject";
pub const SOURCE_INVOCATION_HEADER: &str = "x-noema-source-invocation";

impl SourceInvocationContext {
    /// The provenance headers for this call.
    pub fn provenance_headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            (WORLD_HEADER, self.world_slug.to_string()),
            (ATTEMPTED_TURN_HEADER, self.attempted_turn.to_string()),
            (
                SOURCE_INVOCATION_HEADER,
                self.source_invocation_id.to_string(),
            ),
        ];
        if let Some(subject) = &self.workflow_subject_entity_id {
            headers.push((SUBJECT_HEADER, subject.to_string()));
        }
        headers
    }
}

pub enum SourceRequest {
    /// A JSON body: a rendered ambient request template, or a tool call's arguments.
    Json(Value),
    Chat(ChatRequest),
}

/// Notified as a streamed generation arrives, so its chunks are durable while it runs.
#[async_trait]
pub trait GenerationObserver: Send + Sync {
    async fn chunk(&self, text: &str);
}

/// One generation.
pub struct ChatRequest {
    /// The provider's model name (aliases such as `@chat` already resolved).
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// Sent as `response_format` json_schema; `None` when the source delivers the contract
    /// in the prompt.
    pub response_schema: Option<ResponseSchema>,
    pub stream: bool,
    pub observer: Option<Arc<dyn GenerationObserver>>,
}

impl fmt::Debug for ChatRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatRequest")
            .field("model", &self.model)
            .field("messages", &self.messages)
            .field("response_schema", &self.response_schema)
            .field("stream", &self.stream)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl fmt::Debug for SourceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceRequest::Json(body) => f.debug_tuple("Json").field(body).finish(),
            SourceRequest::Chat(chat) => f.debug_tuple("Chat").field(chat).finish(),
        }
    }
}

/// A `response_format` json_schema: its name and the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseSchema {
    pub name: String,
    pub schema: Value,
}

impl ResponseSchema {
    /// The OpenAI-compatible `response_format` object.
    pub fn response_format(&self) -> Value {
        serde_json::json!({
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self.schema},
        })
    }
}

/// What a source answered, untouched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceOutput {
    /// The HTTP status, where the transport has one.
    pub http_status: Option<u16>,
    pub headers: BTreeMap<String, String>,
    /// The body (HTTP JSON) or the assistant's text (chat).
    pub text: String,
    /// Token counts (chat).
    pub tokens: Option<TokenUsage>,
}

/// A call that failed before it produced an answer to judge: transport, timeout, provider
/// error, refused `response_format`. What did come back is kept for the trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{failure}")]
pub struct SourceError {
    pub failure: Failure,
    pub http_status: Option<u16>,
    pub headers: BTreeMap<String, String>,
    pub body: Option<String>,
}

impl SourceError {
    pub fn new(failure: Failure) -> SourceError {
        SourceError {
            failure,
            http_status: None,
            headers: BTreeMap::new(),
            body: None,
        }
    }
}

/// The provider model for `model` as a source names it: an alias (`@chat`) through
/// `aliases`, anything else as written.
pub fn resolve_model(model: &str, aliases: &BTreeMap<String, String>) -> Result<String, String> {
    if model.starts_with('@') {
        aliases.get(model).cloned().ok_or_else(|| {
            format!(
                "model alias {model:?} is not configured (configured: {})",
                aliases.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
    } else {
        Ok(model.to_owned())
    }
}

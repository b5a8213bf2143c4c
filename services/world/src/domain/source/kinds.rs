//! The registry of source kinds. A kind has a name (`interface.name`), a role — what a
//! workflow may bind it as — and the schema of its interface. The kernel, patch application,
//! commit and the retry lane only ever see the [`super::ResponseSource`] trait, so adding a
//! kind (MCP next, D20) is one more entry here and its implementation, nothing else.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::domain::problem::Problem;
use crate::domain::schema::{Builtin, CompiledSchema};

use super::definition::ResponseSourceDefinition;

/// What a source of a kind can be bound as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceRole {
    /// Answers chat generations: an `llm_tool_loop` node's `llm_source_ref`.
    Chat,
    /// Answers a JSON request with JSON: an ambient source or a model-elected tool.
    Json,
}

impl SourceRole {
    pub fn describe(self) -> &'static str {
        match self {
            SourceRole::Chat => "an LLM chat source",
            SourceRole::Json => "a JSON source (ambient context or tool)",
        }
    }
}

pub trait SourceKind: Send + Sync {
    /// The `interface.name` this kind answers to.
    fn name(&self) -> &str;
    fn role(&self) -> SourceRole;
    /// The schema `interface` must match.
    fn interface_schema(&self) -> Result<&CompiledSchema, Problem>;
}

impl std::fmt::Debug for dyn SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceKind")
            .field("name", &self.name())
            .field("role", &self.role())
            .finish()
    }
}

/// The kinds this build can run.
#[derive(Clone, Default)]
pub struct SourceKinds {
    kinds: BTreeMap<String, Arc<dyn SourceKind>>,
}

impl std::fmt::Debug for SourceKinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.kinds.keys()).finish()
    }
}

struct BuiltinKind {
    name: &'static str,
    role: SourceRole,
    schema: Builtin,
}

impl SourceKind for BuiltinKind {
    fn name(&self) -> &str {
        self.name
    }

    fn role(&self) -> SourceRole {
        self.role
    }

    fn interface_schema(&self) -> Result<&CompiledSchema, Problem> {
        self.schema.schema()
    }
}

/// The kind name of OpenAI-compatible chat completion sources.
pub const LLM_CHAT_COMPLETIONS: &str = "llm_chat_completions";
/// The kind name of HTTP JSON sources.
pub const HTTP_JSON: &str = "http_json";

impl SourceKinds {
    /// `llm_chat_completions` and `http_json`.
    pub fn standard() -> SourceKinds {
        SourceKinds::default()
            .with(Arc::new(BuiltinKind {
                name: LLM_CHAT_COMPLETIONS,
                role: SourceRole::Chat,
                schema: Builtin::LlmChatInterface,
            }))
            .with(Arc::new(BuiltinKind {
                name: HTTP_JSON,
                role: SourceRole::Json,
                schema: Builtin::HttpJsonInterface,
            }))
    }

    /// This registry with one more kind (replacing a kind of the same name).
    pub fn with(mut self, kind: Arc<dyn SourceKind>) -> SourceKinds {
        self.kinds.insert(kind.name().to_owned(), kind);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn SourceKind>> {
        self.kinds.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.kinds.keys().map(String::as_str)
    }

    /// The kind of `definition`, once its interface matches the kind's schema; problems are
    /// pointers into the definition (`/interface/timeout_ms`).
    pub fn check(
        &self,
        definition: &ResponseSourceDefinition,
    ) -> Result<&Arc<dyn SourceKind>, Vec<Problem>> {
        let Some(kind) = self.get(definition.kind()) else {
            return Err(vec![Problem::new(
                "/interface/name",
                format!(
                    "source kind {:?} is not available (available: {})",
                    definition.kind(),
                    self.names().collect::<Vec<_>>().join(", ")
                ),
            )]);
        };
        kind.interface_schema()
            .map_err(|p| vec![p])?
            .check(&definition.interface.to_json())
            .map_err(|problems| {
                problems
                    .into_iter()
                    .map(|p| p.under("/interface"))
                    .collect::<Vec<_>>()
            })?;
        Ok(kind)
    }
}

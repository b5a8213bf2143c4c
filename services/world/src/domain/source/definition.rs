//! Response source definitions: `{"version": 1, "label": …, "interface": {"name": <kind>,
//! …}}`. The envelope is checked here; what the interface holds is the kind's business
//! ([`super::kinds`]), so a new kind (MCP next) needs no change to this file.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::ids::HumanId;
use crate::domain::problem::Problem;
use crate::domain::schema::Builtin;

/// The only source definition version.
pub const SOURCE_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseSourceDefinition {
    pub version: u32,
    pub label: HumanId,
    pub interface: SourceInterface,
}

/// `interface`: the kind's name and its configuration, kept as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceInterface {
    pub name: String,
    #[serde(flatten)]
    pub config: Map<String, Value>,
}

impl SourceInterface {
    /// The interface as one JSON object (with `name`), as its kind's schema sees it.
    pub fn to_json(&self) -> Value {
        let mut object = self.config.clone();
        object.insert("name".into(), Value::from(self.name.as_str()));
        Value::Object(object)
    }
}

impl ResponseSourceDefinition {
    /// Parses the envelope. The interface is checked by [`super::SourceKinds::check`].
    pub fn from_json(document: &Value) -> Result<ResponseSourceDefinition, Vec<Problem>> {
        Builtin::ResponseSource.check(document)?;
        serde_json::from_value(document.clone()).map_err(|e| vec![Problem::new("", e.to_string())])
    }

    pub fn kind(&self) -> &str {
        &self.interface.name
    }
}

/// How an LLM source delivers the output contract to the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaDelivery {
    /// `response_format: {"type": "json_schema", …}`. A provider that rejects it fails the
    /// call with `structured_output_rejected`; nothing falls back (D14).
    ResponseFormat,
    /// The contract is written into the prompt; only when the source definition says so.
    PromptOnly,
}

/// The `llm_chat_completions` interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmChatInterface {
    pub name: String,
    /// A model name, or an alias (`@chat`) resolved from configuration.
    pub model: String,
    pub schema_delivery: SchemaDelivery,
    /// The environment variable holding the provider's base URL (`…/v1`); without it,
    /// `[world.llm] base_url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url_env: Option<String>,
    /// The environment variable holding the API key; without it, `[world.llm] api_key_env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

/// The `http_json` interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpJsonInterface {
    pub name: String,
    /// Always `POST`: the body is the rendered request template or the tool call's arguments.
    pub method: String,
    /// The environment variable of the world service's process holding the base URL.
    pub url_env: String,
    pub path: String,
    pub timeout_ms: u64,
}

impl LlmChatInterface {
    pub fn of(definition: &ResponseSourceDefinition) -> Result<LlmChatInterface, Vec<Problem>> {
        typed_interface(definition, Builtin::LlmChatInterface)
    }
}

impl HttpJsonInterface {
    pub fn of(definition: &ResponseSourceDefinition) -> Result<HttpJsonInterface, Vec<Problem>> {
        typed_interface(definition, Builtin::HttpJsonInterface)
    }

    /// The URL to call given the base URL read from `url_env`: exactly one `/` between them.
    pub fn url(&self, base: &str) -> String {
        format!("{}{}", base.trim_end_matches('/'), self.path)
    }
}

fn typed_interface<T: serde::de::DeserializeOwned>(
    definition: &ResponseSourceDefinition,
    schema: Builtin,
) -> Result<T, Vec<Problem>> {
    let interface = definition.interface.to_json();
    schema.check(&interface).map_err(|problems| {
        problems
            .into_iter()
            .map(|p| p.under("/interface"))
            .collect::<Vec<_>>()
    })?;
    serde_json::from_value(interface).map_err(|e| vec![Problem::new("/interface", e.to_string())])
}

//! Why an attempted turn failed. Each class says whether it is a model-content failure (the
//! node's retry lane handles it, D13) and which HTTP status a failed attempt answers with:
//! 502 when a source or the LLM provider failed, 422 when the model never produced valid
//! output within its limits. (409 — another attempt holds the world's lease — is a refusal
//! to start, not a failure class.)

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The source's HTTP call failed: connection, timeout, or a non-2xx status.
    SourceHttpError,
    /// The source answered, but not with JSON.
    SourceInvalidJson,
    /// The source's JSON does not match the declared result schema.
    SourceSchemaInvalid,
    /// The LLM provider failed (connection, timeout, error status, a broken stream).
    LlmProviderError,
    /// The provider refused the `response_format` the source requires (D14: no silent
    /// fallback to prompt-only delivery).
    StructuredOutputRejected,
    /// The model's output was invalid (not JSON, wrong shape, unknown tool, bad arguments,
    /// a patch that does not apply) and the retry lane is exhausted, or the model ran out of
    /// tool calls before a final patch.
    ModelOutputInvalid,
}

impl FailureClass {
    pub const ALL: [FailureClass; 6] = [
        FailureClass::SourceHttpError,
        FailureClass::SourceInvalidJson,
        FailureClass::SourceSchemaInvalid,
        FailureClass::LlmProviderError,
        FailureClass::StructuredOutputRejected,
        FailureClass::ModelOutputInvalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::SourceHttpError => "source_http_error",
            FailureClass::SourceInvalidJson => "source_invalid_json",
            FailureClass::SourceSchemaInvalid => "source_schema_invalid",
            FailureClass::LlmProviderError => "llm_provider_error",
            FailureClass::StructuredOutputRejected => "structured_output_rejected",
            FailureClass::ModelOutputInvalid => "model_output_invalid",
        }
    }

    pub fn parse(text: &str) -> Option<FailureClass> {
        FailureClass::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// The status of `POST /worlds/{slug}/turns` for an attempt that failed with this class.
    pub fn http_status(self) -> http::StatusCode {
        match self {
            FailureClass::ModelOutputInvalid => http::StatusCode::UNPROCESSABLE_ENTITY,
            FailureClass::SourceHttpError
            | FailureClass::SourceInvalidJson
            | FailureClass::SourceSchemaInvalid
            | FailureClass::LlmProviderError
            | FailureClass::StructuredOutputRejected => http::StatusCode::BAD_GATEWAY,
        }
    }

    /// Whether the failure is about what the model wrote (so the retry lane may try again),
    /// rather than about a source or provider (which fails the attempt at once).
    pub fn is_model_content(self) -> bool {
        self == FailureClass::ModelOutputInvalid
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure with its class and a message for traces and the attempt's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{class}: {message}")]
pub struct Failure {
    pub class: FailureClass,
    pub message: String,
}

impl Failure {
    pub fn new(class: FailureClass, message: impl Into<String>) -> Failure {
        Failure {
            class,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_have_stable_names_and_statuses() {
        let table = [
            ("source_http_error", 502, false),
            ("source_invalid_json", 502, false),
            ("source_schema_invalid", 502, false),
            ("llm_provider_error", 502, false),
            ("structured_output_rejected", 502, false),
            ("model_output_invalid", 422, true),
        ];
        for (class, (name, status, model)) in FailureClass::ALL.into_iter().zip(table) {
            assert_eq!(class.as_str(), name);
            assert_eq!(FailureClass::parse(name), Some(class));
            assert_eq!(class.http_status().as_u16(), status, "{name}");
            assert_eq!(class.is_model_content(), model, "{name}");
            assert_eq!(
                serde_json::to_value(class).ok(),
                Some(serde_json::Value::from(name))
            );
        }
        assert_eq!(FailureClass::parse("timeout"), None);
    }
}

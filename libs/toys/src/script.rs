//! The scripted LLM's script: a JSON file of what to answer, per subject and turn, in order —
//! valid outputs, invalid ones (to exercise the retry lane) and provider errors.
//!
//! ```json
//! {
//!   "latency_ms": 0,
//!   "chunk_chars": 16,
//!   "chunk_delay_ms": 0,
//!   "reject_response_format": false,
//!   "scripts": [
//!     {"subject": "bob", "turn": 1, "outputs": [
//!       {"text": "I think Bob is hungry."},
//!       {"json": {"kind": "tool_call", "tool_call": {"name": "buy_candy", "arguments": {}}}},
//!       {"json": {"kind": "final_patch", "patch": {"narration": "…", "effects": []}}, "latency_ms": 200}
//!     ]},
//!     {"subject": "ant", "outputs": [{"error": {"status": 503, "message": "overloaded"}}]}
//!   ]
//! }
//! ```
//!
//! A request is answered by the first script whose `subject` and `turn` match (an absent one
//! matches anything) and that has outputs left; each answer uses up one output. The subject
//! and turn come from the `x-noema-subject` and `x-noema-attempted-turn` headers the world's
//! LLM source sends. A request no script can answer gets an HTTP 500 saying so.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmScript {
    /// Added to every answer before it starts.
    #[serde(default)]
    pub latency_ms: u64,
    /// Size of the streamed content pieces (0: the whole content in one chunk).
    #[serde(default = "default_chunk_chars")]
    pub chunk_chars: usize,
    /// Pause between streamed chunks.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// Answer any request carrying a `response_format` with the 400 a provider without
    /// structured output sends (D14: the world must fail loudly, not fall back).
    #[serde(default)]
    pub reject_response_format: bool,
    #[serde(default)]
    pub scripts: Vec<SubjectScript>,
}

fn default_chunk_chars() -> usize {
    16
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubjectScript {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    pub outputs: Vec<ScriptedOutput>,
}

/// One answer: exactly one of `json`, `text` or `error`, and an optional extra latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedOutput {
    /// Assistant content: this value serialised as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    /// Assistant content as written (for outputs that are not JSON at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// An HTTP error instead of an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    #[serde(default)]
    pub latency_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    pub status: u16,
    pub message: String,
}

/// What one scripted answer is.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Content(String),
    Error(ScriptedError),
}

impl ScriptedOutput {
    pub fn answer(&self) -> Result<Answer, String> {
        match (&self.json, &self.text, &self.error) {
            (Some(json), None, None) => Ok(Answer::Content(json.to_string())),
            (None, Some(text), None) => Ok(Answer::Content(text.clone())),
            (None, None, Some(error)) => Ok(Answer::Error(error.clone())),
            _ => Err("an output has exactly one of json, text or error".to_owned()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("reading the LLM script {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the LLM script is not valid: {0}")]
    Invalid(String),
}

impl LlmScript {
    pub fn from_json(text: &str) -> Result<LlmScript, ScriptError> {
        let script: LlmScript =
            serde_json::from_str(text).map_err(|e| ScriptError::Invalid(e.to_string()))?;
        script.check()?;
        Ok(script)
    }

    pub fn from_file(path: &Path) -> Result<LlmScript, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        LlmScript::from_json(&text)
    }

    fn check(&self) -> Result<(), ScriptError> {
        for (i, script) in self.scripts.iter().enumerate() {
            for (j, output) in script.outputs.iter().enumerate() {
                output
                    .answer()
                    .map_err(|e| ScriptError::Invalid(format!("scripts[{i}].outputs[{j}]: {e}")))?;
                if let Some(error) = &output.error
                    && !(400..600).contains(&error.status)
                {
                    return Err(ScriptError::Invalid(format!(
                        "scripts[{i}].outputs[{j}]: an error status is 400-599, not {}",
                        error.status
                    )));
                }
            }
        }
        Ok(())
    }
}

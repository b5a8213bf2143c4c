//! The `[world]` section of the configuration (`NOEMA__WORLD__…`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The world service's own settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorldOptions {
    /// Anchor each committed turn's hash in the ledger (a canonical object per turn).
    pub anchor: bool,
    /// How many subjects of a `per_subject_concurrent` workflow run at once.
    pub max_concurrent_subjects: u32,
    /// How long an attempt's lease on its world lasts without renewal. A process that dies
    /// mid-attempt holds the world this long; then its attempt is marked `interrupted`.
    pub lease_ttl_ms: u64,
    /// LLM providers of `llm_chat_completions` sources.
    pub llm: LlmOptions,
    /// Values for the environment variables sources name (`url_env`, `base_url_env`,
    /// `api_key_env`), looked up before the process environment: a configuration file can
    /// then hold a whole setup (and tests need no process-wide variables).
    pub source_env: BTreeMap<String, String>,
}

impl Default for WorldOptions {
    fn default() -> Self {
        WorldOptions {
            anchor: false,
            max_concurrent_subjects: 32,
            lease_ttl_ms: 30_000,
            llm: LlmOptions::default(),
            source_env: BTreeMap::new(),
        }
    }
}

/// `[world.llm]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmOptions {
    /// The OpenAI-compatible base URL (`…/v1`); requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The environment variable holding the API key (sent as a bearer token); empty: none.
    pub api_key_env: String,
    /// Model aliases: `"@chat" = "gpt-4o-mini"` lets sources say `"model": "@chat"`.
    pub models: BTreeMap<String, String>,
    /// The longest one generation may take, streaming included.
    pub timeout_ms: u64,
}

impl Default for LlmOptions {
    fn default() -> Self {
        LlmOptions {
            base_url: String::new(),
            api_key_env: String::new(),
            models: BTreeMap::new(),
            timeout_ms: 120_000,
        }
    }
}

impl WorldOptions {
    /// What is wrong with these settings, by setting name.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(1..=1024).contains(&self.max_concurrent_subjects) {
            problems.push(format!(
                "world.max_concurrent_subjects: {} is not between 1 and 1024",
                self.max_concurrent_subjects
            ));
        }
        if !(200..=3_600_000).contains(&self.lease_ttl_ms) {
            problems.push(format!(
                "world.lease_ttl_ms: {} is not between 200 and 3600000",
                self.lease_ttl_ms
            ));
        }
        if !(1..=3_600_000).contains(&self.llm.timeout_ms) {
            problems.push(format!(
                "world.llm.timeout_ms: {} is not between 1 and 3600000",
                self.llm.timeout_ms
            ));
        }
        for alias in self.llm.models.keys() {
            if !alias.starts_with('@') || alias.len() < 2 {
                problems.push(format!(
                    "world.llm.models: {alias:?} is not an alias (aliases start with @)"
                ));
            }
        }
        problems
    }

    pub fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.lease_ttl_ms)
    }
}

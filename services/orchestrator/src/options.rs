//! The `[orchestrator]` section's own settings (`NOEMA__ORCHESTRATOR__…`).

use serde::{Deserialize, Serialize};

use crate::domain::policy::AntiAbuseParams;

/// What the orchestrator reads from its configuration section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// The risk policy file (JSON, `schemas/risk_policy.v0.1.json`). Empty: the policy
    /// that ships with Noema. A file that is missing or invalid stops start-up with
    /// "risk matrix not loaded: …"; SIGHUP and `ReloadPolicy` read it again.
    pub policy_file: String,
    /// Share of evaluator items that are gold tasks, overriding the policy's `gold.ratio`
    /// (0.05–0.15). 0: the policy's.
    pub gold_ratio: f64,
    /// The anti-abuse rules' parameters, overriding the policy's `anti_abuse` (all four
    /// keys) when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anti_abuse: Option<AntiAbuseParams>,
    /// Also write every object to the ledger as a canonical object (with the caller's
    /// token, which then needs `ledger:write`), so a request's history can be proven with
    /// the ledger's tools.
    pub ledger_anchor: bool,
    /// Where `command` tools run, one fresh directory per execution. Empty: a directory in
    /// the system's temporary directory.
    pub sandbox_dir: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policy_file: String::new(),
            gold_ratio: 0.0,
            anti_abuse: None,
            ledger_anchor: false,
            sandbox_dir: String::new(),
        }
    }
}

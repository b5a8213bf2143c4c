//! The risk policy (seed §4–§9): a versioned JSON document, validated by its own schema
//! (`schemas/risk_policy.v0.1.json`) and by the rules a schema cannot state, then
//! compiled (patterns, templates, URLs) so assessment never fails on the policy itself.
//!
//! A policy that is missing or invalid is refused as a whole with "risk matrix not
//! loaded: …": the service must not start, and the release check names it, rather than
//! run under a partial policy. Its content id (sha256 of its JCS bytes) identifies it in
//! every risk report. The default policy ships with the crate ([`RiskPolicy::default_policy`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

use noema_core::content_id::ContentId;
use noema_tools::command::paths::ProtectedPaths;
use noema_tools::command::template::ArgvTemplate;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::objects::{RiskLevel, ToolKind};
use super::schema::{self, ObjectError, SchemaName};

/// The default policy as shipped (`policy/default.json`).
pub const DEFAULT_POLICY_TEXT: &str = include_str!("../../policy/default.json");

/// The name of the suite every policy declares.
pub const DEFAULT_SUITE: &str = "default";

/// Lowest and highest gold ratio the seed allows (§8: 5–15 %).
pub const GOLD_RATIO_MIN: f64 = 0.05;
pub const GOLD_RATIO_MAX: f64 = 0.15;

/// Largest compiled size of one destructive pattern.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// Why a policy was not loaded. Every message starts with "risk matrix not loaded", the
/// release blocker's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("risk matrix not loaded: policy file {0} does not exist")]
    Missing(String),
    #[error("risk matrix not loaded: policy file {path} cannot be read: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("risk matrix not loaded: the policy is not valid JSON: {0}")]
    NotJson(String),
    #[error(
        "risk matrix not loaded: unknown policy schema_version {0:?} (this server knows \"0.1\")"
    )]
    UnknownSchemaVersion(String),
    #[error("risk matrix not loaded: field {field}: {message}")]
    Invalid { field: String, message: String },
}

impl PolicyError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> PolicyError {
        PolicyError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The policy field at fault, when one is.
    pub fn field(&self) -> Option<&str> {
        match self {
            PolicyError::Invalid { field, .. } => Some(field),
            PolicyError::UnknownSchemaVersion(_) => Some("schema_version"),
            _ => None,
        }
    }
}

impl From<ObjectError> for PolicyError {
    fn from(err: ObjectError) -> Self {
        match err {
            ObjectError::UnknownSchemaVersion { version, .. } => {
                PolicyError::UnknownSchemaVersion(version)
            }
            ObjectError::Invalid { errors, .. } => match errors.into_iter().next() {
                Some(first) => PolicyError::invalid(first.field, first.message),
                None => PolicyError::invalid("(object)", "invalid"),
            },
            ObjectError::NotAnObject { .. } => {
                PolicyError::invalid("(object)", "the policy must be a JSON object")
            }
            ObjectError::SchemasUnavailable(reason) => PolicyError::invalid("(schema)", reason),
        }
    }
}

/// Whether a level needs an approval (seed §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalNeed {
    None,
    /// A confirmation may be given but execution does not wait for one.
    Optional,
    Required,
    /// Never executes (L3).
    Denied,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelRule {
    pub approval: ApprovalNeed,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The L0–L3 matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(non_snake_case)] // the levels' own names
pub struct Levels {
    pub L0: LevelRule,
    pub L1: LevelRule,
    pub L2: LevelRule,
    pub L3: LevelRule,
}

impl Levels {
    pub fn rule(&self, level: RiskLevel) -> &LevelRule {
        match level {
            RiskLevel::L0 => &self.L0,
            RiskLevel::L1 => &self.L1,
            RiskLevel::L2 => &self.L2,
            RiskLevel::L3 => &self.L3,
        }
    }
}

/// Single or dual approval (seed §4 L2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    Single,
    Dual,
}

impl ApprovalMode {
    /// Distinct approvers an approval-requiring request needs.
    pub fn approvers(self) -> u8 {
        match self {
            ApprovalMode::Single => 1,
            ApprovalMode::Dual => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Single => "single",
            ApprovalMode::Dual => "dual",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRules {
    pub mode: ApprovalMode,
    /// How long an approval is valid after its `ts`.
    pub ttl_seconds: u64,
    /// How far in the future an approval's `ts` may lie (clocks differ).
    pub max_clock_skew_seconds: u64,
    /// Whether the plan's own source may approve it.
    pub allow_self_approval: bool,
}

/// A literal value or a secret's location, for headers and environment variables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

impl ValueSource {
    /// As a header value for the HTTP runner.
    pub fn header_value(&self) -> noema_tools::http_json::HeaderValue {
        use noema_tools::http_json::HeaderValue;
        match self.secret_source() {
            Some(source) => HeaderValue::Secret {
                source,
                prefix: self.prefix.clone().unwrap_or_default(),
            },
            None => HeaderValue::Plain(self.value.clone().unwrap_or_default()),
        }
    }

    /// As an environment value for the command runner. A prefix on a secret is kept in
    /// the plain part of the value only for headers; environment secrets are the value.
    pub fn env_value(&self) -> noema_tools::command::EnvValue {
        use noema_tools::command::EnvValue;
        match self.secret_source() {
            Some(source) => EnvValue::Secret(source),
            None => EnvValue::Plain(self.value.clone().unwrap_or_default()),
        }
    }

    fn secret_source(&self) -> Option<noema_tools::secret::SecretSource> {
        use noema_tools::secret::SecretSource;
        match (&self.env, &self.file) {
            (Some(var), _) => Some(SecretSource::Env(var.clone())),
            (None, Some(file)) => Some(SecretSource::File(PathBuf::from(file))),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpToolSpec {
    pub url: String,
    pub timeout_ms: u64,
    pub max_response_bytes: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, ValueSource>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandToolSpec {
    pub program: String,
    /// The arguments after the program, with `{name}` placeholders for step arguments.
    pub argv: Vec<String>,
    pub timeout_ms: u64,
    pub max_output_bytes: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, ValueSource>,
    /// Protected paths this tool may touch anyway: the policy exception of seed §5.3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_paths: Vec<String>,
}

/// One allowlisted tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub kind: ToolKind,
    /// The tool's own level; assessment may raise it for what a step does.
    pub level: RiskLevel,
    /// The permission (scope) the executing token needs.
    pub permission: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For `noema` tools: which operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpToolSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandToolSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternSpec {
    pub name: String,
    pub pattern: String,
    pub why: String,
}

/// An eval suite (seed §7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteSpec {
    pub name: String,
    pub gate_min_score: f64,
    /// Whether the release check requires this suite's latest evaluation to pass.
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalRules {
    /// How far below a suite's baseline a score may fall before it is a regression.
    pub regression_tolerance: f64,
    pub suites: Vec<SuiteSpec>,
}

/// Gold calibration (seed §8).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldRules {
    /// Share of evaluator items that are gold tasks (0.05–0.15).
    pub ratio: f64,
    /// Factor applied to an evaluator's influence per consecutive gold mismatch.
    pub mismatch_decay: f64,
}

/// The reward formula's parameters (seed §9).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardParams {
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    pub rep_cap: f64,
    /// An actor's reputation before its first update.
    pub initial_rep: f64,
}

/// Anti-abuse parameters (seed §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AntiAbuseParams {
    /// An evaluator's vote this soon after its previous vote is suppressed.
    pub duplicate_vote_cooldown_seconds: u64,
    /// Votes one evaluator may cast on one submission; later ones are suppressed.
    pub max_votes_per_submission: u32,
    pub burst_window_seconds: u64,
    /// Votes one evaluator may cast within the burst window; later ones are penalised.
    pub burst_max_votes: u32,
}

/// The policy document as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyDocument {
    pub schema_version: String,
    pub policy_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub levels: Levels,
    pub approval: ApprovalRules,
    pub tools: BTreeMap<String, ToolSpec>,
    pub internal_hosts: Vec<String>,
    #[serde(default)]
    pub prohibited_hosts: Vec<String>,
    pub external_send_channels: Vec<ToolKind>,
    pub protected_paths: Vec<String>,
    pub destructive_patterns: Vec<PatternSpec>,
    pub eval: EvalRules,
    pub gold: GoldRules,
    pub reward: RewardParams,
    pub anti_abuse: AntiAbuseParams,
}

/// A destructive pattern, compiled.
#[derive(Debug, Clone)]
pub struct DestructivePattern {
    pub name: String,
    pub why: String,
    pub regex: regex::Regex,
}

/// A loaded, validated and compiled policy.
#[derive(Debug, Clone)]
pub struct RiskPolicy {
    document: PolicyDocument,
    hash: ContentId,
    patterns: Vec<DestructivePattern>,
    templates: BTreeMap<String, ArgvTemplate>,
    urls: BTreeMap<String, Url>,
}

impl RiskPolicy {
    /// The policy that ships with Noema.
    pub fn default_policy() -> Result<RiskPolicy, PolicyError> {
        RiskPolicy::from_json_text(DEFAULT_POLICY_TEXT)
    }

    /// Loads a policy from its file's text. Duplicate keys are refused (a tool listed
    /// twice would otherwise silently keep only its last entry).
    pub fn from_json_text(text: &str) -> Result<RiskPolicy, PolicyError> {
        noema_core::jcs::canonicalize_str(text).map_err(|e| PolicyError::NotJson(e.to_string()))?;
        let value: Value =
            serde_json::from_str(text).map_err(|e| PolicyError::NotJson(e.to_string()))?;
        RiskPolicy::from_value(value)
    }

    /// Loads a policy from a JSON value.
    pub fn from_value(value: Value) -> Result<RiskPolicy, PolicyError> {
        schema::validate(SchemaName::RiskPolicy, &value)?;
        let hash = ContentId::of_json(&value).map_err(|e| PolicyError::NotJson(e.to_string()))?;
        let document: PolicyDocument = serde_json::from_value(value)
            .map_err(|e| PolicyError::invalid("(object)", e.to_string()))?;
        let (patterns, templates, urls) = compile(&document)?;
        Ok(RiskPolicy {
            document,
            hash,
            patterns,
            templates,
            urls,
        })
    }

    /// Content id of the policy's JCS bytes.
    pub fn hash(&self) -> &ContentId {
        &self.hash
    }

    pub fn version(&self) -> &str {
        &self.document.policy_version
    }

    pub fn document(&self) -> &PolicyDocument {
        &self.document
    }

    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.document.tools.get(name)
    }

    /// The compiled argv template of a `command` tool.
    pub fn template(&self, tool: &str) -> Option<&ArgvTemplate> {
        self.templates.get(tool)
    }

    /// The parsed URL of an `http_json` tool.
    pub fn url(&self, tool: &str) -> Option<&Url> {
        self.urls.get(tool)
    }

    pub fn patterns(&self) -> &[DestructivePattern] {
        &self.patterns
    }

    pub fn suite(&self, name: &str) -> Option<&SuiteSpec> {
        self.document.eval.suites.iter().find(|s| s.name == name)
    }

    /// The protected paths with `tool`'s exceptions.
    pub fn protected_paths_for(&self, tool: &str) -> ProtectedPaths {
        let exceptions = self
            .tool(tool)
            .and_then(|t| t.command.as_ref())
            .map(|c| {
                c.allowed_paths
                    .iter()
                    .map(PathBuf::from)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        ProtectedPaths::new(
            self.document.protected_paths.iter().map(PathBuf::from),
            exceptions,
        )
    }

    /// Every `command` tool's program: the runner's allowlist.
    pub fn command_programs(&self) -> BTreeSet<PathBuf> {
        self.document
            .tools
            .values()
            .filter_map(|t| t.command.as_ref())
            .map(|c| PathBuf::from(&c.program))
            .collect()
    }

    /// Whether sends to `host` stay inside (the internal-hosts list).
    pub fn is_internal_host(&self, host: &str) -> bool {
        self.document
            .internal_hosts
            .iter()
            .any(|p| host_matches(p, host))
    }

    /// Whether `host` is a prohibited channel.
    pub fn is_prohibited_host(&self, host: &str) -> bool {
        self.document
            .prohibited_hosts
            .iter()
            .any(|p| host_matches(p, host))
    }
}

impl fmt::Display for RiskPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "policy {} ({})", self.version(), self.hash)
    }
}

/// `pattern` is a host name or address, or `*.suffix` for any name below `suffix`.
/// Names compare without case.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let pattern = pattern.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(suffix) => host
            .strip_suffix(suffix)
            .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
        None => host == pattern,
    }
}

/// The host of a URL as policies name it (IPv6 without brackets).
pub fn url_host(url: &Url) -> Option<String> {
    match url.host()? {
        url::Host::Domain(name) => Some(name.to_ascii_lowercase()),
        url::Host::Ipv4(addr) => Some(addr.to_string()),
        url::Host::Ipv6(addr) => Some(addr.to_string()),
    }
}

type Compiled = (
    Vec<DestructivePattern>,
    BTreeMap<String, ArgvTemplate>,
    BTreeMap<String, Url>,
);

/// The rules a schema cannot state, and compiling what assessment uses.
fn compile(doc: &PolicyDocument) -> Result<Compiled, PolicyError> {
    let mut names = BTreeSet::new();
    for (i, suite) in doc.eval.suites.iter().enumerate() {
        if !names.insert(suite.name.as_str()) {
            return Err(PolicyError::invalid(
                format!("eval.suites[{i}].name"),
                format!("suite {:?} is declared twice", suite.name),
            ));
        }
    }
    if !names.contains(DEFAULT_SUITE) {
        return Err(PolicyError::invalid(
            "eval.suites",
            format!("a suite named {DEFAULT_SUITE:?} must be declared"),
        ));
    }
    if !(GOLD_RATIO_MIN..=GOLD_RATIO_MAX).contains(&doc.gold.ratio) {
        return Err(PolicyError::invalid(
            "gold.ratio",
            format!("gold ratio {} is outside 5–15 % (seed §8)", doc.gold.ratio),
        ));
    }
    if doc.reward.initial_rep > doc.reward.rep_cap {
        return Err(PolicyError::invalid(
            "reward.initial_rep",
            "must not exceed reward.rep_cap",
        ));
    }

    let mut patterns = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, p) in doc.destructive_patterns.iter().enumerate() {
        let field = format!("destructive_patterns[{i}]");
        if !seen.insert(p.name.as_str()) {
            return Err(PolicyError::invalid(
                format!("{field}.name"),
                format!("pattern {:?} is declared twice", p.name),
            ));
        }
        let regex = regex::RegexBuilder::new(&p.pattern)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|e| PolicyError::invalid(format!("{field}.pattern"), e.to_string()))?;
        patterns.push(DestructivePattern {
            name: p.name.clone(),
            why: p.why.clone(),
            regex,
        });
    }

    let mut templates = BTreeMap::new();
    let mut urls = BTreeMap::new();
    for (name, tool) in &doc.tools {
        let field = format!("tools.{name}");
        let sections = [
            ("operation", tool.operation.is_some(), ToolKind::Noema),
            ("http", tool.http.is_some(), ToolKind::HttpJson),
            ("command", tool.command.is_some(), ToolKind::Command),
        ];
        for (section, present, kind) in sections {
            if present && kind != tool.kind {
                return Err(PolicyError::invalid(
                    format!("{field}.{section}"),
                    format!("a {} tool has no {section} section", tool.kind),
                ));
            }
        }
        if let Some(http) = &tool.http {
            let url = Url::parse(&http.url)
                .map_err(|e| PolicyError::invalid(format!("{field}.http.url"), e.to_string()))?;
            if url_host(&url).is_none() {
                return Err(PolicyError::invalid(
                    format!("{field}.http.url"),
                    "the URL has no host",
                ));
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err(PolicyError::invalid(
                    format!("{field}.http.url"),
                    "credentials do not belong in a URL; use a header with a secret",
                ));
            }
            urls.insert(name.clone(), url);
        }
        if let Some(command) = &tool.command {
            let template = ArgvTemplate::parse(&command.argv).map_err(|e| {
                PolicyError::invalid(format!("{field}.command.argv"), e.to_string())
            })?;
            templates.insert(name.clone(), template);
        }
    }
    Ok((patterns, templates, urls))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn default_value() -> Value {
        serde_json::from_str(DEFAULT_POLICY_TEXT).unwrap()
    }

    fn load(edit: impl FnOnce(&mut Value)) -> Result<RiskPolicy, PolicyError> {
        let mut value = default_value();
        edit(&mut value);
        RiskPolicy::from_value(value)
    }

    #[test]
    fn the_default_policy_loads_with_the_seeds_defaults() {
        let policy = RiskPolicy::default_policy().unwrap();
        let doc = policy.document();
        assert_eq!(doc.levels.L2.approval, ApprovalNeed::Required);
        assert_eq!(doc.levels.L3.approval, ApprovalNeed::Denied);
        assert_eq!(doc.approval.mode, ApprovalMode::Single);
        assert_eq!(policy.tool("noema.noop").unwrap().level, RiskLevel::L0);
        assert_eq!(
            policy.tool("noema.put_canonical").unwrap().level,
            RiskLevel::L1
        );
        assert!(policy.tool("shell").is_none());
        assert_eq!(doc.gold.ratio, 0.10);
        assert_eq!(
            (
                doc.reward.alpha,
                doc.reward.beta,
                doc.reward.gamma,
                doc.reward.rep_cap
            ),
            (1.0, 1.2, 0.5, 100.0)
        );
        assert!(policy.suite(DEFAULT_SUITE).unwrap().required);
        assert!(policy.is_internal_host("127.0.0.1"));
        assert!(!policy.is_internal_host("example.com"));
        assert!(
            policy
                .patterns()
                .iter()
                .any(|p| p.regex.is_match("rm -rf /tmp/x"))
        );
        // The hash is the content id of the document's canonical bytes.
        assert_eq!(
            policy.hash(),
            &ContentId::of_json(&default_value()).unwrap()
        );
        assert_eq!(
            policy.to_string(),
            format!("policy noema-default-1 ({})", policy.hash())
        );
    }

    #[test]
    fn formatting_does_not_change_the_hash_but_content_does() {
        let compact = serde_json::to_string(&default_value()).unwrap();
        let a = RiskPolicy::from_json_text(DEFAULT_POLICY_TEXT).unwrap();
        let b = RiskPolicy::from_json_text(&compact).unwrap();
        assert_eq!(a.hash(), b.hash());
        let c = load(|v| v["approval"]["ttl_seconds"] = json!(60)).unwrap();
        assert_ne!(a.hash(), c.hash());
    }

    #[test]
    fn a_missing_or_broken_policy_is_the_release_blocker() {
        assert_eq!(
            PolicyError::Missing("/etc/noema/policy.json".into()).to_string(),
            "risk matrix not loaded: policy file /etc/noema/policy.json does not exist"
        );
        for text in ["", "{", "[]", "{\"schema_version\": \"0.1\"}", "null"] {
            let err = RiskPolicy::from_json_text(text).unwrap_err();
            assert!(
                err.to_string().starts_with("risk matrix not loaded: "),
                "{text}: {err}"
            );
        }
        // Duplicate keys are refused, not silently merged.
        let duplicated = DEFAULT_POLICY_TEXT.replacen(
            "\"tools\": {",
            "\"tools\": {\"noema.noop\": {\"kind\": \"noema\", \"operation\": \"noop\", \"level\": \"L3\", \"permission\": \"x\"},",
            1,
        );
        assert!(matches!(
            RiskPolicy::from_json_text(&duplicated),
            Err(PolicyError::NotJson(_))
        ));
        assert_eq!(
            load(|v| v["schema_version"] = json!("0.2")).unwrap_err(),
            PolicyError::UnknownSchemaVersion("0.2".into())
        );
    }

    fn field_of(result: Result<RiskPolicy, PolicyError>) -> String {
        result.unwrap_err().field().unwrap_or("").to_owned()
    }

    #[test]
    fn invalid_policies_name_the_field() {
        assert_eq!(
            field_of(load(|v| v["levels"]["L2"]["approval"] = json!("optional"))),
            "levels.L2.approval"
        );
        assert_eq!(
            field_of(load(|v| v["levels"]["L3"]["approval"] = json!("required"))),
            "levels.L3.approval"
        );
        assert_eq!(
            field_of(load(|v| v["approval"]["mode"] = json!("triple"))),
            "approval.mode"
        );
        assert_eq!(
            field_of(load(|v| {
                v["tools"]["x"] = json!({"kind": "http_json", "level": "L1", "permission": "p"});
            })),
            "tools.x.http"
        );
        assert_eq!(
            field_of(load(|v| {
                v["tools"]["x"] = json!({"kind": "noema", "operation": "noop", "level": "L1",
                    "permission": "p", "http": {"url": "http://a", "timeout_ms": 1, "max_response_bytes": 1}});
            })),
            "tools.x.http"
        );
        assert_eq!(
            field_of(load(|v| {
                v["tools"]["x"] = json!({"kind": "command", "level": "L1", "permission": "p",
                    "command": {"program": "/bin/echo", "argv": ["{open"], "timeout_ms": 1, "max_output_bytes": 1}});
            })),
            "tools.x.command.argv"
        );
        assert_eq!(
            field_of(load(|v| {
                v["tools"]["x"] = json!({"kind": "command", "level": "L1", "permission": "p",
                    "command": {"program": "echo", "argv": [], "timeout_ms": 1, "max_output_bytes": 1}});
            })),
            "tools.x.command.program"
        );
        assert_eq!(
            field_of(load(|v| {
                v["tools"]["x"] = json!({"kind": "http_json", "level": "L1", "permission": "p",
                    "http": {"url": "http://user:pw@host/x", "timeout_ms": 1, "max_response_bytes": 1}});
            })),
            "tools.x.http.url"
        );
        assert_eq!(
            field_of(load(
                |v| v["destructive_patterns"][0]["pattern"] = json!("(unclosed")
            )),
            "destructive_patterns[0].pattern"
        );
        assert_eq!(
            field_of(load(|v| v["eval"]["suites"][0]["name"] = json!("smoke"))),
            "eval.suites"
        );
        assert_eq!(
            field_of(load(|v| {
                let suite = v["eval"]["suites"][0].clone();
                v["eval"]["suites"].as_array_mut().unwrap().push(suite);
            })),
            "eval.suites[1].name"
        );
        assert_eq!(
            field_of(load(|v| v["reward"]["initial_rep"] = json!(101))),
            "reward.initial_rep"
        );
        assert_eq!(
            field_of(load(|v| v["protected_paths"] = json!(["etc"]))),
            "protected_paths[0]"
        );
        assert_eq!(field_of(load(|v| v["typo"] = json!(1))), "typo");
    }

    #[test]
    fn the_gold_ratio_must_stay_within_five_to_fifteen_percent() {
        for ok in [0.05, 0.08, 0.10, 0.15] {
            let policy = load(|v| v["gold"]["ratio"] = json!(ok)).unwrap();
            assert_eq!(policy.document().gold.ratio, ok);
        }
        for bad in [0.0, 0.04, 0.0499, 0.1501, 0.16, 0.5, 1.0] {
            let err = load(|v| v["gold"]["ratio"] = json!(bad)).unwrap_err();
            assert_eq!(err.field(), Some("gold.ratio"), "{bad}: {err}");
        }
        let mut missing = default_value();
        missing["gold"].as_object_mut().unwrap().remove("ratio");
        assert_eq!(
            RiskPolicy::from_value(missing).unwrap_err().field(),
            Some("gold.ratio")
        );
    }

    #[test]
    fn hosts_match_exactly_or_below_a_wildcard() {
        assert!(host_matches("localhost", "LOCALHOST"));
        assert!(host_matches(
            "*.svc.cluster.local",
            "ledger.noema.svc.cluster.local"
        ));
        assert!(!host_matches("*.svc.cluster.local", "svc.cluster.local"));
        assert!(!host_matches("*.example.com", "evilexample.com"));
        assert!(!host_matches("example.com", "example.com.evil.net"));
        assert!(host_matches("example.com", "example.com."));
        let v6: Url = "http://[::1]:8080/x".parse().unwrap();
        assert_eq!(url_host(&v6).as_deref(), Some("::1"));
        let named: Url = "http://Hooks.Example.COM/x".parse().unwrap();
        assert_eq!(url_host(&named).as_deref(), Some("hooks.example.com"));
    }
}

//! From an assessed step to what the tool runner needs (seed §6): the policy's tool
//! entry and the step's arguments become an [`Invocation`] — a Noema operation, an
//! HTTP JSON call or a command — with the same template, program, URL and protected
//! paths the assessment judged. Building one does no I/O; secrets are still references
//! here and are read by the runner when it runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use noema_tools::command::{CommandRunner, CommandSpec};
use noema_tools::http_json::HttpJsonCall;
use serde_json::{Map, Value};

use super::objects::{Step, ToolKind};
use super::policy::RiskPolicy;

/// What to run for one step.
#[derive(Debug, Clone)]
pub enum Invocation {
    /// One of Noema's own operations, called through its gRPC client with the request's
    /// token.
    Noema {
        operation: String,
        args: Map<String, Value>,
    },
    Http(HttpJsonCall),
    Command(CommandSpec),
}

/// Why a step cannot be turned into a call (an assessed, allowed step always can).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvocationError {
    #[error("tool {0:?} is not on the policy's allowlist")]
    NotAllowlisted(String),
    #[error("tool {tool:?}: {message}")]
    Arguments { tool: String, message: String },
}

/// The invocation for `step` under `policy`; commands run in `sandbox_dir`.
pub fn invocation(
    policy: &RiskPolicy,
    step: &Step,
    sandbox_dir: &Path,
) -> Result<Invocation, InvocationError> {
    let tool = policy
        .tool(&step.tool)
        .ok_or_else(|| InvocationError::NotAllowlisted(step.tool.clone()))?;
    let args = step.args.clone().unwrap_or_default();
    let broken = |message: String| InvocationError::Arguments {
        tool: step.tool.clone(),
        message,
    };
    match tool.kind {
        ToolKind::Noema => Ok(Invocation::Noema {
            operation: tool
                .operation
                .clone()
                .ok_or_else(|| broken("no operation".into()))?,
            args,
        }),
        ToolKind::HttpJson => {
            let spec = tool
                .http
                .as_ref()
                .ok_or_else(|| broken("no http section".into()))?;
            let url = policy
                .url(&step.tool)
                .cloned()
                .ok_or_else(|| broken("no URL".into()))?;
            Ok(Invocation::Http(HttpJsonCall {
                url,
                body: Value::Object(args),
                headers: spec
                    .headers
                    .iter()
                    .map(|(name, value)| (name.clone(), value.header_value()))
                    .collect(),
                timeout: Duration::from_millis(spec.timeout_ms),
                max_response_bytes: usize::try_from(spec.max_response_bytes).unwrap_or(usize::MAX),
            }))
        }
        ToolKind::Command => {
            let spec = tool
                .command
                .as_ref()
                .ok_or_else(|| broken("no command section".into()))?;
            let template = policy
                .template(&step.tool)
                .ok_or_else(|| broken("no argv template".into()))?;
            let argv = template.render(&args).map_err(|e| broken(e.to_string()))?;
            Ok(Invocation::Command(CommandSpec {
                program: PathBuf::from(&spec.program),
                args: argv,
                working_dir: sandbox_dir.to_path_buf(),
                env: spec
                    .env
                    .iter()
                    .map(|(name, value)| (name.clone(), value.env_value()))
                    .collect(),
                timeout: Duration::from_millis(spec.timeout_ms),
                max_output_bytes: usize::try_from(spec.max_output_bytes).unwrap_or(usize::MAX),
                allowed_paths: spec.allowed_paths.iter().map(PathBuf::from).collect(),
            }))
        }
    }
}

/// The command runner for `policy`: its command tools' programs are the allowlist and
/// its protected paths are protected.
pub fn command_runner(policy: &RiskPolicy) -> CommandRunner {
    CommandRunner::new(
        policy.command_programs(),
        policy.document().protected_paths.iter().map(PathBuf::from),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::policy::tests::default_value;
    use noema_tools::command::EnvValue;
    use noema_tools::http_json::HeaderValue;
    use noema_tools::secret::SecretSource;
    use serde_json::json;

    fn policy() -> RiskPolicy {
        let mut value = default_value();
        let tools = value["tools"].as_object_mut().unwrap();
        tools.insert(
            "notify.webhook".into(),
            json!({"kind": "http_json", "level": "L1", "permission": "orchestrator:write",
                   "http": {"url": "http://127.0.0.1:9/in", "timeout_ms": 1500,
                            "max_response_bytes": 2048,
                            "headers": {"Authorization": {"env": "HOOK_TOKEN", "prefix": "Bearer "},
                                        "X-Source": {"value": "noema"}}}}),
        );
        tools.insert(
            "files.copy".into(),
            json!({"kind": "command", "level": "L1", "permission": "orchestrator:write",
                   "command": {"program": "/usr/bin/cp", "argv": ["--", "{from}", "{to}"],
                               "timeout_ms": 2500, "max_output_bytes": 4096,
                               "env": {"API_KEY": {"file": "/run/secrets/api"}, "LANG": {"value": "C"}},
                               "allowed_paths": ["/etc/noema/hosts"]}}),
        );
        RiskPolicy::from_value(value).unwrap()
    }

    fn step(tool: &str, args: Value) -> Step {
        Step {
            step_id: "s".into(),
            action: String::new(),
            tool: tool.into(),
            expected_output: String::new(),
            scope: None,
            args: args.as_object().cloned(),
        }
    }

    #[test]
    fn each_kind_becomes_its_runner_call() {
        let policy = policy();
        let sandbox = Path::new("/tmp/sandbox");
        match invocation(&policy, &step("noema.noop", json!({"x": 1})), sandbox).unwrap() {
            Invocation::Noema { operation, args } => {
                assert_eq!(operation, "noop");
                assert_eq!(Value::Object(args), json!({"x": 1}));
            }
            other => panic!("{other:?}"),
        }
        match invocation(
            &policy,
            &step("notify.webhook", json!({"text": "hi"})),
            sandbox,
        )
        .unwrap()
        {
            Invocation::Http(call) => {
                assert_eq!(call.url.as_str(), "http://127.0.0.1:9/in");
                assert_eq!(call.body, json!({"text": "hi"}));
                assert_eq!(call.timeout, Duration::from_millis(1500));
                assert_eq!(call.max_response_bytes, 2048);
                assert_eq!(
                    call.headers,
                    [
                        (
                            "Authorization".to_owned(),
                            HeaderValue::Secret {
                                source: SecretSource::Env("HOOK_TOKEN".into()),
                                prefix: "Bearer ".into()
                            }
                        ),
                        ("X-Source".to_owned(), HeaderValue::Plain("noema".into())),
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        match invocation(
            &policy,
            &step("files.copy", json!({"from": "a b", "to": "c"})),
            sandbox,
        )
        .unwrap()
        {
            Invocation::Command(spec) => {
                assert_eq!(spec.program, PathBuf::from("/usr/bin/cp"));
                assert_eq!(spec.args, ["--", "a b", "c"]);
                assert_eq!(spec.working_dir, sandbox);
                assert_eq!(spec.timeout, Duration::from_millis(2500));
                assert_eq!(spec.allowed_paths, [PathBuf::from("/etc/noema/hosts")]);
                assert_eq!(
                    spec.env,
                    [
                        (
                            "API_KEY".to_owned(),
                            EnvValue::Secret(SecretSource::File("/run/secrets/api".into()))
                        ),
                        ("LANG".to_owned(), EnvValue::Plain("C".into())),
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            invocation(&policy, &step("nope", json!({})), sandbox).unwrap_err(),
            InvocationError::NotAllowlisted("nope".into())
        );
        assert!(matches!(
            invocation(&policy, &step("files.copy", json!({"from": "a"})), sandbox),
            Err(InvocationError::Arguments { .. })
        ));
    }
}

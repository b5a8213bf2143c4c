//! Running a step's tool: `noema` operations through the ledger's client, `http_json`
//! and `command` through `noema-tools`. Only tools the policy in force lists can be turned
//! into a call ([`invoke::invocation`]), so nothing else ever runs. A tool's result and
//! failure are data for the trace; their secret values are scrubbed by the runners, and
//! neither is logged.

use std::path::{Path, PathBuf};

use noema_tools::command::CommandRunner;
use noema_tools::http_json::HttpJsonClient;
use serde_json::{Value, json};

use super::{Caller, Orchestrator};
use crate::domain::invoke::{self, Invocation};
use crate::domain::objects::Step;
use crate::domain::policy::RiskPolicy;
use crate::error::OrchestratorError;

pub(super) struct Tools {
    http: HttpJsonClient,
    /// Each execution gets a fresh directory below this one.
    sandbox_root: PathBuf,
    /// Paths no command may touch besides the policy's: the service's data directory and
    /// its policy file.
    protected: Vec<PathBuf>,
}

impl Tools {
    pub fn new(sandbox_root: PathBuf, protected: Vec<PathBuf>) -> Result<Tools, OrchestratorError> {
        let http = HttpJsonClient::new()
            .map_err(|e| OrchestratorError::Invalid(format!("the HTTP tool client: {e}")))?;
        Ok(Tools {
            http,
            sandbox_root,
            protected,
        })
    }

    /// The command runner for `policy`: its programs, its protected paths and ours.
    fn runner(&self, policy: &RiskPolicy) -> CommandRunner {
        CommandRunner::new(
            policy.command_programs(),
            policy
                .document()
                .protected_paths
                .iter()
                .map(PathBuf::from)
                .chain(self.protected.iter().cloned()),
        )
    }

    /// Where one execution's sandbox goes (made when its first `command` step runs).
    fn sandbox(&self, execution: &str) -> PathBuf {
        self.sandbox_root.join(execution)
    }
}

/// What the steps of one execution share.
pub(super) struct Run<'a> {
    pub caller: &'a Caller,
    pub actor: &'a str,
    pub policy: &'a RiskPolicy,
    runner: CommandRunner,
    sandbox: PathBuf,
    /// Whether the sandbox directory was made, or why it could not be: only an execution
    /// with a `command` step needs one, so the others cost no directory.
    made: tokio::sync::OnceCell<Result<(), String>>,
}

impl Run<'_> {
    /// The sandbox directory, made on first use.
    async fn sandbox(&self) -> Result<&Path, String> {
        self.made
            .get_or_init(|| async {
                tokio::fs::create_dir_all(&self.sandbox)
                    .await
                    .map_err(|e| format!("sandbox directory unavailable: {e}"))
            })
            .await
            .clone()?;
        Ok(&self.sandbox)
    }
}

impl Orchestrator {
    /// Prepares an execution (its runner and sandbox).
    pub(super) fn start_run<'a>(
        &self,
        caller: &'a Caller,
        actor: &'a str,
        policy: &'a RiskPolicy,
        execution: &str,
    ) -> Run<'a> {
        Run {
            caller,
            actor,
            policy,
            runner: self.tools.runner(policy),
            sandbox: self.tools.sandbox(execution),
            made: tokio::sync::OnceCell::new(),
        }
    }

    /// Removes an execution's sandbox.
    pub(super) async fn finish_run(&self, run: Run<'_>) {
        if run.made.get().is_some_and(Result::is_ok)
            && let Err(e) = tokio::fs::remove_dir_all(&run.sandbox).await
        {
            tracing::warn!(dir = %run.sandbox.display(), error = %e, "sandbox not removed");
        }
    }

    /// Runs one step; `Ok` with its result, or `Err` with why it failed.
    pub(super) async fn run_step(&self, run: &Run<'_>, step: &Step) -> Result<Value, String> {
        let invocation =
            invoke::invocation(run.policy, step, &run.sandbox).map_err(|e| e.to_string())?;
        match invocation {
            Invocation::Noema { operation, args } => match operation.as_str() {
                "noop" => Ok(json!({})),
                "put_canonical" => self.put_canonical_tool(run.caller, run.actor, &args).await,
                other => Err(format!("unknown noema operation {other:?}")),
            },
            Invocation::Http(call) => match self.tools.http.call(&call).await {
                Ok(response) => Ok(json!({"status": response.status, "body": response.body})),
                Err(e) => Err(e.to_string()),
            },
            Invocation::Command(spec) => match async {
                run.sandbox().await?;
                run.runner.run(&spec).await.map_err(|e| e.to_string())
            }
            .await
            {
                Ok(output) if output.success => {
                    serde_json::to_value(&output).map_err(|e| e.to_string())
                }
                Ok(output) => Err(match (output.exit_code, output.signal) {
                    (Some(code), _) => format!("the program exited with status {code}"),
                    (None, Some(signal)) => format!("the program was ended by signal {signal}"),
                    (None, None) => "the program failed".to_owned(),
                }),
                Err(e) => Err(e),
            },
        }
    }
}

//! The `command` tool kind: an allowlisted program run without a shell.
//!
//! The program is started directly (absolute path, argv from a template, no shell to
//! expand anything) in its own process group, in a sandbox working directory, with an
//! empty environment plus the variables its tool declares, stdin closed, a deadline
//! after which the whole group is killed, and a cap on how much output is kept. Every
//! path-like argument is checked against the protected paths, resolved through the file
//! system, before the program starts. Secret values the tool was given are scrubbed from
//! its output and from every error.

pub mod paths;
pub mod template;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::secret::{Redactor, SecretError, SecretSource};
use paths::{PathRefusal, ProtectedPaths};

/// How long to wait for the output pipes after the program is gone. Only a process that
/// left the group (e.g. with `setsid`) and kept a pipe open can hold them longer.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// An environment variable for the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvValue {
    Plain(String),
    /// Read when the program starts; scrubbed from its output.
    Secret(SecretSource),
}

/// One run of a program.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// Absolute path; must be on the runner's allowlist.
    pub program: PathBuf,
    /// The arguments after the program name, already rendered from the tool's template.
    pub args: Vec<String>,
    /// The sandbox directory the program runs in; must exist.
    pub working_dir: PathBuf,
    pub env: Vec<(String, EnvValue)>,
    pub timeout: Duration,
    /// The most bytes kept of stdout and of stderr, each.
    pub max_output_bytes: usize,
    /// Protected paths this tool may touch anyway (the policy's exception).
    pub allowed_paths: Vec<PathBuf>,
}

/// What a finished program left. A non-zero exit is an outcome, not an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandOutput {
    pub exit_code: Option<i32>,
    /// The signal that ended the program, if one did.
    pub signal: Option<i32>,
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// Why a program did not run to completion, as data (it goes into a trace).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum CommandError {
    #[error("program {program} is not on the allowlist")]
    NotAllowlisted { program: String },
    #[error("program {program} must be an absolute path")]
    NotAbsolute { program: String },
    #[error("sandbox directory {path} is not usable: {reason}")]
    Sandbox { path: String, reason: String },
    #[error("{message}")]
    Path { message: String },
    #[error("environment variable name {name:?} is invalid")]
    EnvName { name: String },
    #[error("{message}")]
    Secret { message: String },
    #[error("program {program} could not be started: {reason}")]
    Spawn { program: String, reason: String },
    #[error("program {program} did not finish within {timeout_ms} ms and was killed")]
    TimedOut {
        program: String,
        timeout_ms: u64,
        /// Whatever it had printed, capped and scrubbed.
        stdout: String,
        stderr: String,
    },
    #[error("waiting for program {program} failed: {reason}")]
    Wait { program: String, reason: String },
}

impl From<PathRefusal> for CommandError {
    fn from(refusal: PathRefusal) -> Self {
        CommandError::Path {
            message: refusal.to_string(),
        }
    }
}

impl From<SecretError> for CommandError {
    fn from(err: SecretError) -> Self {
        CommandError::Secret {
            message: err.to_string(),
        }
    }
}

/// Runs allowlisted programs under the protected-path rules.
#[derive(Debug, Clone)]
pub struct CommandRunner {
    allowlist: BTreeSet<PathBuf>,
    protected: Vec<PathBuf>,
}

impl CommandRunner {
    /// `allowlist`: the absolute program paths that may run; `protected`: paths no
    /// argument may touch (plus, per call, the tool's exceptions).
    pub fn new(
        allowlist: impl IntoIterator<Item = PathBuf>,
        protected: impl IntoIterator<Item = PathBuf>,
    ) -> CommandRunner {
        CommandRunner {
            allowlist: allowlist.into_iter().collect(),
            protected: protected.into_iter().collect(),
        }
    }

    /// Runs `spec` to completion or its deadline.
    pub async fn run(&self, spec: &CommandSpec) -> Result<CommandOutput, CommandError> {
        let program = spec.program.display().to_string();
        if !spec.program.is_absolute() {
            return Err(CommandError::NotAbsolute { program });
        }
        if !self.allowlist.contains(&spec.program) {
            return Err(CommandError::NotAllowlisted { program });
        }
        let rules =
            ProtectedPaths::new(self.protected.clone(), spec.allowed_paths.clone()).resolved();
        let working_dir = sandbox_dir(&spec.working_dir, &rules)?;
        paths::check_resolved(&spec.args, &working_dir, &rules)?;

        let mut env = Vec::with_capacity(spec.env.len());
        let mut secrets = Vec::new();
        for (name, value) in &spec.env {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(CommandError::EnvName { name: name.clone() });
            }
            let value = match value {
                EnvValue::Plain(text) => text.clone(),
                EnvValue::Secret(source) => {
                    let secret = source.resolve()?;
                    let text = secret.expose().to_owned();
                    secrets.push(secret);
                    text
                }
            };
            env.push((name.clone(), value));
        }
        let redactor = Redactor::new(secrets);

        let mut command = tokio::process::Command::new(&spec.program);
        command
            .args(&spec.args)
            .current_dir(&working_dir)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|err| CommandError::Spawn {
            program: program.clone(),
            reason: redactor.redact(&err.to_string()),
        })?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);

        let stdout = Capture::start(child.stdout.take(), spec.max_output_bytes);
        let stderr = Capture::start(child.stderr.take(), spec.max_output_bytes);

        let waited = tokio::time::timeout(spec.timeout, child.wait()).await;
        // The program is done (or out of time): nothing it started may outlive it.
        if let Some(group) = group {
            kill_group(group);
        }
        let status = match waited {
            Ok(Ok(status)) => status,
            Ok(Err(err)) => {
                return Err(CommandError::Wait {
                    program,
                    reason: redactor.redact(&err.to_string()),
                });
            }
            Err(_) => {
                // Reap the killed child so it does not linger as a zombie.
                let _ = tokio::time::timeout(PIPE_GRACE, child.wait()).await;
                let (out, _) = stdout.finish().await;
                let (err, _) = stderr.finish().await;
                return Err(CommandError::TimedOut {
                    program,
                    timeout_ms: u64::try_from(spec.timeout.as_millis()).unwrap_or(u64::MAX),
                    stdout: redactor.redact(&out),
                    stderr: redactor.redact(&err),
                });
            }
        };
        let (out, out_truncated) = stdout.finish().await;
        let (err, err_truncated) = stderr.finish().await;
        use std::os::unix::process::ExitStatusExt;
        Ok(CommandOutput {
            exit_code: status.code(),
            signal: status.signal(),
            success: status.success(),
            stdout: redactor.redact(&out),
            stderr: redactor.redact(&err),
            stdout_truncated: out_truncated,
            stderr_truncated: err_truncated,
        })
    }
}

/// The sandbox directory, resolved; refused when missing or touching a protected path.
fn sandbox_dir(dir: &Path, rules: &ProtectedPaths) -> Result<PathBuf, CommandError> {
    let refuse = |reason: String| CommandError::Sandbox {
        path: dir.display().to_string(),
        reason,
    };
    let real = std::fs::canonicalize(dir).map_err(|err| refuse(err.kind().to_string()))?;
    if !real.is_dir() {
        return Err(refuse("not a directory".into()));
    }
    if let Some(protected) = rules.touched_by(&real) {
        return Err(refuse(format!(
            "it touches protected path {}",
            protected.display()
        )));
    }
    Ok(real)
}

fn kill_group(group: rustix::process::Pid) {
    match rustix::process::kill_process_group(group, rustix::process::Signal::KILL) {
        // ESRCH: every member has exited already.
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(err) => tracing::warn!(error = %err, "could not kill a command's process group"),
    }
}

/// One output stream read into a capped buffer by a task of its own, so the program
/// never blocks on a full pipe and partial output survives a timeout.
struct Capture {
    buffer: Arc<Mutex<Captured>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    truncated: bool,
}

impl Capture {
    fn start<R: AsyncRead + Unpin + Send + 'static>(stream: Option<R>, cap: usize) -> Capture {
        let buffer = Arc::new(Mutex::new(Captured::default()));
        let task = stream.map(|mut stream| {
            let buffer = Arc::clone(&buffer);
            tokio::spawn(async move {
                let mut chunk = vec![0u8; 8192];
                loop {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let Ok(mut captured) = buffer.lock() else {
                                break;
                            };
                            let room = cap.saturating_sub(captured.bytes.len());
                            let read = chunk.get(..n).unwrap_or_default();
                            if read.len() > room {
                                captured.truncated = true;
                            }
                            captured
                                .bytes
                                .extend_from_slice(read.get(..room.min(n)).unwrap_or_default());
                        }
                    }
                }
            })
        });
        Capture { buffer, task }
    }

    /// Waits briefly for the stream to close, then returns what was kept.
    async fn finish(mut self) -> (String, bool) {
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(PIPE_GRACE, &mut task).await.is_err()
        {
            task.abort();
        }
        match self.buffer.lock() {
            Ok(captured) => (
                String::from_utf8_lossy(&captured.bytes).into_owned(),
                captured.truncated,
            ),
            Err(_) => (String::new(), true),
        }
    }
}

//! The processes shape: every role as its own `noema serve <role>` OS process, wired only
//! by configuration (`NOEMA__…` environment variables and one shared settings file), the
//! way separate pods are. Ports are `127.0.0.1:0`, read back from the lines the binary
//! prints; a restarted process gets the same ports, so its peers' endpoints stay valid.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use noema::Role;

use crate::ClusterError;

/// Env var naming the `noema` binary to run; unset, it is looked up next to the test.
pub const NOEMA_BIN_ENV: &str = "NOEMA_BIN";

/// How long a process may take to print its addresses (debug builds migrating Postgres
/// on 2 shared cores are slow, but not this slow).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a process may take to drain and exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The `noema` binary: `$NOEMA_BIN`, else `target/<profile>/noema` next to the running test
/// (`target/<profile>/deps/<test>-<hash>`).
pub fn noema_bin() -> Result<PathBuf, ClusterError> {
    if let Some(path) = std::env::var_os(NOEMA_BIN_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(ClusterError::MissingBinary(format!(
                "{NOEMA_BIN_ENV}={} is not a file",
                path.display()
            )))
        };
    }
    let exe = std::env::current_exe()?;
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.file_name().is_some_and(|name| name == "deps") {
        dir.pop();
    }
    let candidate = dir.join("noema");
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(ClusterError::MissingBinary(format!(
            "{} does not exist: build it first with `cargo build -p noema` \
             (`cargo test --workspace`, `cargo nextest run --workspace` and scripts/test \
             build it), or set {NOEMA_BIN_ENV}",
            candidate.display()
        )))
    }
}

/// Everything needed to (re)start one role's process.
#[derive(Debug, Clone)]
pub(crate) struct ProcessSpec {
    pub role: Role,
    pub bin: PathBuf,
    /// `NOEMA__…` settings of this process (its own database, peers' endpoints, …).
    pub env: Vec<(String, String)>,
    /// Settings shared by every process (`start_with`), as a TOML file.
    pub config_file: Option<PathBuf>,
    /// stderr (the logs) of every start of this process, appended.
    pub log: PathBuf,
}

/// Addresses a process printed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bound {
    pub grpc: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub metrics: Option<SocketAddr>,
}

/// One running `noema serve <role>`. Killed (SIGKILL) when dropped.
pub(crate) struct ServiceProcess {
    pub spec: ProcessSpec,
    pub bound: Bound,
    child: Option<Child>,
}

impl ServiceProcess {
    /// Starts the process, on `fixed` addresses when given (a restart), else on port 0,
    /// and waits until it has printed every address it binds.
    pub fn start(spec: ProcessSpec, fixed: Option<Bound>) -> Result<ServiceProcess, ClusterError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&spec.log)?;
        let mut command = Command::new(&spec.bin);
        // The test's own environment must not configure the process: only `spec` does.
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("NOEMA__") || key == "OTEL_EXPORTER_OTLP_ENDPOINT" {
                command.env_remove(&*key);
            }
        }
        if let Some(file) = &spec.config_file {
            command.arg("--config").arg(file);
        }
        command.args(["serve", spec.role.name()]);
        command.envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let addr =
            |a: Option<SocketAddr>| a.map_or_else(|| "127.0.0.1:0".to_owned(), |a| a.to_string());
        let fixed = fixed.unwrap_or_default();
        let wants_metrics = spec.role.is_grpc_service();
        if spec.role.is_grpc_service() {
            command.env("NOEMA__SERVER__GRPC_ADDR", addr(fixed.grpc));
            command.env("NOEMA__SERVER__METRICS_ADDR", addr(fixed.metrics));
        } else {
            command.env("NOEMA__SERVER__HTTP_ADDR", addr(fixed.http));
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                ClusterError::Process(format!("cannot run {}: {e}", spec.bin.display()))
            })?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err(ClusterError::Process("no stdout pipe".into()));
        };
        // A thread drains stdout for the process's whole life, so it never blocks on a
        // full pipe; lines reach us through the channel.
        let (lines_tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines_tx.send(line).is_err() {
                    // Nobody listens any more; keep draining.
                }
            }
        });
        let mut process = ServiceProcess {
            spec,
            bound: Bound::default(),
            child: Some(child),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let done = if process.spec.role.is_grpc_service() {
                process.bound.grpc.is_some() && (!wants_metrics || process.bound.metrics.is_some())
            } else {
                process.bound.http.is_some()
            };
            if done {
                return Ok(process);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match lines_rx.recv_timeout(left) {
                Ok(line) => process.bound.record(&line),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(process.failed(&format!(
                        "did not print its addresses within {START_TIMEOUT:?}"
                    )));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = process.child.as_mut().and_then(|c| c.wait().ok());
                    return Err(process.failed(&format!(
                        "exited before printing its addresses ({status:?})"
                    )));
                }
            }
        }
    }

    fn failed(&mut self, what: &str) -> ClusterError {
        self.kill();
        ClusterError::Process(format!(
            "`noema serve {}` {what}; its log ({}) ends with:\n{}",
            self.spec.role,
            self.spec.log.display(),
            log_tail(&self.spec.log)
        ))
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL: no drain, no flush. Waits for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits (bounded) for a clean exit; a non-zero status or a process
    /// still running after [`STOP_TIMEOUT`] is an error.
    pub fn terminate(&mut self) -> Result<(), ClusterError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()?;
        if !sent.success() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ClusterError::Process(format!(
                "kill -TERM {} failed",
                child.id()
            )));
        }
        let started = Instant::now();
        let status: ExitStatus = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if started.elapsed() > STOP_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ClusterError::Process(format!(
                    "`noema serve {}` still ran {STOP_TIMEOUT:?} after SIGTERM",
                    self.spec.role
                )));
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        if status.success() {
            Ok(())
        } else {
            Err(ClusterError::Process(format!(
                "`noema serve {}` exited with {status} after SIGTERM; its log ends with:\n{}",
                self.spec.role,
                log_tail(&self.spec.log)
            )))
        }
    }
}

impl Bound {
    /// Takes an address from one of the lines `noema serve` prints.
    fn record(&mut self, line: &str) {
        if let Some(url) = line.strip_prefix("REST  http://") {
            self.http = url.trim().parse().ok();
        } else if let Some(addr) = line.strip_prefix("gRPC  ") {
            self.grpc = addr.trim().parse().ok();
        } else if let Some(url) = line.strip_prefix("metrics  http://") {
            self.metrics = url.trim().trim_end_matches("/metrics").parse().ok();
        }
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last lines of a log, for error messages.
pub(crate) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::Bound;

    #[test]
    fn printed_addresses_are_read_back() {
        let mut bound = Bound::default();
        bound.record("REST  http://127.0.0.1:8080");
        bound.record("gRPC  127.0.0.1:50051");
        bound.record("metrics  http://127.0.0.1:9090/metrics");
        bound.record("Owner token (shown once; …):");
        assert_eq!(bound.http.map(|a| a.port()), Some(8080));
        assert_eq!(bound.grpc.map(|a| a.port()), Some(50051));
        assert_eq!(bound.metrics.map(|a| a.port()), Some(9090));
    }
}

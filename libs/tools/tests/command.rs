//! The command runner against real processes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::{Path, PathBuf};
use std::time::Duration;

use noema_tools::command::{CommandError, CommandRunner, CommandSpec, EnvValue};
use noema_tools::secret::SecretSource;

const SH: &str = "/bin/sh";
const ECHO: &str = "/bin/echo";
const ENV: &str = "/usr/bin/env";
const PWD: &str = "/bin/pwd";
const TOUCH: &str = "/usr/bin/touch";

struct Sandbox {
    dir: tempfile::TempDir,
    protected: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
            protected: tempfile::tempdir().unwrap(),
        }
    }

    fn runner(&self) -> CommandRunner {
        CommandRunner::new(
            [SH, ECHO, ENV, PWD, TOUCH, "/nonexistent/program"].map(PathBuf::from),
            [self.protected.path().to_path_buf(), PathBuf::from("/etc")],
        )
    }

    fn spec(&self, program: &str, args: &[&str]) -> CommandSpec {
        CommandSpec {
            program: PathBuf::from(program),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            working_dir: self.dir.path().to_path_buf(),
            env: Vec::new(),
            timeout: Duration::from_secs(20),
            max_output_bytes: 64 * 1024,
            allowed_paths: Vec::new(),
        }
    }
}

#[tokio::test]
async fn runs_a_program_and_captures_its_output_and_exit() {
    let sb = Sandbox::new();
    let out = sb
        .runner()
        .run(&sb.spec(ECHO, &["hello", "world"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, "hello world\n");
    assert_eq!(out.exit_code, Some(0));
    assert!(out.success && !out.stdout_truncated);

    let out = sb
        .runner()
        .run(&sb.spec(SH, &["-c", "echo oops >&2; exit 3"]))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.success);
    assert_eq!(out.stderr, "oops\n");
}

#[tokio::test]
async fn there_is_no_shell_between_template_and_program() {
    let sb = Sandbox::new();
    let out = sb
        .runner()
        .run(&sb.spec(ECHO, &["$(touch pwned)", "; touch pwned2", "`id`"]))
        .await
        .unwrap();
    assert_eq!(out.stdout, "$(touch pwned) ; touch pwned2 `id`\n");
    assert!(!sb.dir.path().join("pwned").exists());
    assert!(!sb.dir.path().join("pwned2").exists());
}

#[tokio::test]
async fn runs_in_the_sandbox_with_a_cleared_environment() {
    let sb = Sandbox::new();
    let out = sb.runner().run(&sb.spec(PWD, &[])).await.unwrap();
    assert_eq!(
        Path::new(out.stdout.trim()),
        std::fs::canonicalize(sb.dir.path()).unwrap()
    );

    let mut spec = sb.spec(ENV, &[]);
    spec.env = vec![("GREETING".into(), EnvValue::Plain("hi".into()))];
    let out = sb.runner().run(&spec).await.unwrap();
    // Nothing of the server's own environment (PATH, HOME, …) reaches the program.
    assert_eq!(out.stdout, "GREETING=hi\n");
}

#[tokio::test]
async fn secrets_reach_the_program_but_never_its_output() {
    let sb = Sandbox::new();
    let secret_file = sb.protected.path().join("token");
    std::fs::write(&secret_file, "tok-3f9a8b7c6d5e\n").unwrap();
    let mut spec = sb.spec(SH, &["-c", "echo \"token is $TOKEN\"; echo \"$TOKEN\" >&2"]);
    spec.env = vec![(
        "TOKEN".into(),
        EnvValue::Secret(SecretSource::File(secret_file)),
    )];
    let out = sb.runner().run(&spec).await.unwrap();
    assert_eq!(out.stdout, "token is [redacted]\n");
    assert_eq!(out.stderr, "[redacted]\n");

    // The program did receive the real value: it can compare it.
    let mut spec = sb.spec(
        SH,
        &["-c", "[ \"$TOKEN\" = tok-3f9a8b7c6d5e ] && echo same"],
    );
    spec.env = vec![(
        "TOKEN".into(),
        EnvValue::Secret(SecretSource::File(sb.protected.path().join("token"))),
    )];
    assert_eq!(sb.runner().run(&spec).await.unwrap().stdout, "same\n");

    // A missing secret is an error naming the source, and the program never starts.
    let mut spec = sb.spec(TOUCH, &["ran"]);
    spec.env = vec![(
        "TOKEN".into(),
        EnvValue::Secret(SecretSource::File(sb.protected.path().join("missing"))),
    )];
    let err = sb.runner().run(&spec).await.unwrap_err();
    assert!(matches!(err, CommandError::Secret { .. }), "{err:?}");
    assert!(!sb.dir.path().join("ran").exists());
}

#[tokio::test]
async fn only_allowlisted_absolute_programs_run() {
    let sb = Sandbox::new();
    let err = sb
        .runner()
        .run(&sb.spec("/bin/true", &[]))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CommandError::NotAllowlisted {
            program: "/bin/true".into()
        }
    );
    let err = sb.runner().run(&sb.spec("echo", &[])).await.unwrap_err();
    assert!(matches!(err, CommandError::NotAbsolute { .. }));
    let err = sb
        .runner()
        .run(&sb.spec("/nonexistent/program", &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, CommandError::Spawn { .. }), "{err:?}");
}

#[tokio::test]
async fn protected_paths_are_checked_on_every_path_argument_before_the_program_runs() {
    let sb = Sandbox::new();
    let target = sb.protected.path().join("created");
    let as_text = target.display().to_string();
    for args in [
        vec![as_text.clone()],
        vec![format!("--reference={as_text}")],
        vec!["-c".to_owned(), format!("x:{as_text}")],
        vec!["/etc/hostname".to_owned()],
        vec!["../escape".to_owned()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = sb.runner().run(&sb.spec(TOUCH, &args)).await.unwrap_err();
        assert!(
            matches!(err, CommandError::Path { .. }),
            "{args:?}: {err:?}"
        );
    }
    assert!(!target.exists());

    // A symlink inside the sandbox does not get around the rule.
    std::os::unix::fs::symlink(sb.protected.path(), sb.dir.path().join("link")).unwrap();
    let err = sb
        .runner()
        .run(&sb.spec(TOUCH, &["link/created"]))
        .await
        .unwrap_err();
    assert!(matches!(err, CommandError::Path { .. }), "{err:?}");
    assert!(!target.exists());

    // The tool's policy exception allows exactly its path.
    let mut spec = sb.spec(TOUCH, &[&as_text]);
    spec.allowed_paths = vec![target.clone()];
    assert!(sb.runner().run(&spec).await.unwrap().success);
    assert!(target.exists());

    // Plain relative paths inside the sandbox are fine.
    assert!(
        sb.runner()
            .run(&sb.spec(TOUCH, &["inside.txt"]))
            .await
            .unwrap()
            .success
    );
    assert!(sb.dir.path().join("inside.txt").exists());
}

#[tokio::test]
async fn a_sandbox_under_a_protected_path_is_refused() {
    let sb = Sandbox::new();
    let inner = sb.protected.path().join("sandbox");
    std::fs::create_dir(&inner).unwrap();
    let mut spec = sb.spec(ECHO, &["x"]);
    spec.working_dir = inner;
    let err = sb.runner().run(&spec).await.unwrap_err();
    assert!(matches!(err, CommandError::Sandbox { .. }), "{err:?}");
    let mut spec = sb.spec(ECHO, &["x"]);
    spec.working_dir = sb.dir.path().join("missing");
    assert!(matches!(
        sb.runner().run(&spec).await,
        Err(CommandError::Sandbox { .. })
    ));
}

#[tokio::test]
async fn output_beyond_the_cap_is_dropped_and_flagged() {
    let sb = Sandbox::new();
    let mut spec = sb.spec(
        SH,
        &[
            "-c",
            "i=0; while [ $i -lt 2000 ]; do echo 0123456789abcdef; i=$((i+1)); done",
        ],
    );
    spec.max_output_bytes = 1000;
    let out = sb.runner().run(&spec).await.unwrap();
    assert!(out.success, "{out:?}");
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated);
    assert!(!out.stderr_truncated);
}

fn process_gone(pid: u32) -> bool {
    // Gone, or a zombie waiting for its (new) parent to reap it: either way not running.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn the_deadline_kills_the_whole_process_group() {
    let sb = Sandbox::new();
    let mut spec = sb.spec(
        SH,
        &["-c", "sleep 300 & echo $! > child.pid; echo started; wait"],
    );
    spec.timeout = Duration::from_millis(1500);
    let err = sb.runner().run(&spec).await.unwrap_err();
    match &err {
        CommandError::TimedOut {
            timeout_ms, stdout, ..
        } => {
            assert_eq!(*timeout_ms, 1500);
            assert_eq!(stdout, "started\n");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    let pid: u32 = std::fs::read_to_string(sb.dir.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut gone = false;
    for _ in 0..50 {
        if process_gone(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the background child {pid} survived the deadline");
}

#[tokio::test]
async fn children_left_behind_by_a_finished_program_are_killed() {
    let sb = Sandbox::new();
    let spec = sb.spec(
        SH,
        &["-c", "sleep 300 > /dev/null 2>&1 & echo $! > child.pid"],
    );
    let out = sb.runner().run(&spec).await.unwrap();
    assert!(out.success);
    let pid: u32 = std::fs::read_to_string(sb.dir.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut gone = false;
    for _ in 0..50 {
        if process_gone(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the background child {pid} outlived its program");
}

//! The `noema` binary as an operator uses it: help and version, config layering and
//! dump, start-up refusing bad settings by name, migrations, and `noema up` serving
//! until SIGTERM, then exiting 0.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NOEMA: &str = env!("CARGO_BIN_EXE_noema");

/// A `noema` command with a clean environment layer (no NOEMA__ leaking in).
fn noema() -> Command {
    let mut cmd = Command::new(NOEMA);
    for (key, _) in std::env::vars() {
        if key.starts_with("NOEMA__") {
            cmd.env_remove(key);
        }
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run noema")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn version_and_help_describe_the_commands() {
    let out = run(noema().arg("--version"));
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("noema {}", env!("CARGO_PKG_VERSION"))
    );

    let out = run(noema().arg("--help"));
    assert!(out.status.success());
    let help = text(&out.stdout);
    for command in ["up", "serve", "migrate", "config"] {
        assert!(help.contains(command), "--help lacks {command}: {help}");
    }
    for sub in [
        &["up", "--help"][..],
        &["serve", "--help"],
        &["migrate", "--help"],
        &["config", "dump", "--help"],
    ] {
        let out = run(noema().args(sub));
        assert!(out.status.success(), "{sub:?}");
        assert!(text(&out.stdout).contains("--data-dir"), "{sub:?}");
    }
}

#[test]
fn config_dump_shows_every_layer() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("noema.toml");
    std::fs::write(
        &file,
        "[server]\ngrpc_addr = \"127.0.0.1:1111\"\nhttp_addr = \"127.0.0.1:2222\"\n",
    )
    .unwrap();
    let out = run(noema()
        .args([
            "--config",
            file.to_str().unwrap(),
            "config",
            "dump",
            "--http-addr",
            "127.0.0.1:3333",
        ])
        .env("NOEMA__TELEMETRY__LOG_FILTER", "debug"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dump = text(&out.stdout);
    assert!(
        dump.contains("grpc_addr = \"127.0.0.1:1111\""),
        "file layer: {dump}"
    );
    assert!(
        dump.contains("http_addr = \"127.0.0.1:3333\""),
        "flag beats file: {dump}"
    );
    assert!(dump.contains("log_filter = \"debug\""), "env layer: {dump}");

    // The dump is itself a valid config file.
    let dumped = dir.path().join("dumped.toml");
    std::fs::write(&dumped, dump.as_bytes()).unwrap();
    let again = run(noema().args(["--config", dumped.to_str().unwrap(), "config", "dump"]));
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), dump);
}

/// Starts `noema up` with the given extra env and returns its failure output.
fn failed_start(envs: &[(&str, &str)], args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = noema();
    cmd.args(["up", "--data-dir", dir.path().to_str().unwrap()])
        .args(["--grpc-addr", "127.0.0.1:0"])
        .args(args)
        .envs(envs.iter().copied());
    if !args.contains(&"--http-addr") {
        cmd.args(["--http-addr", "127.0.0.1:0"]);
    }
    let out = run(&mut cmd);
    assert!(
        !out.status.success(),
        "start-up should fail for {envs:?} {args:?}"
    );
    text(&out.stderr)
}

#[test]
fn bad_settings_fail_start_up_naming_the_setting() {
    let err = failed_start(&[("NOEMA__LEDGER__DATABASE_URL", "mysql://db/x")], &[]);
    assert!(err.contains("ledger.database_url"), "{err}");

    let err = failed_start(&[("NOEMA__LEDGER__DATABASE_URL", "postgres://[bad")], &[]);
    assert!(err.contains("ledger.database_url"), "{err}");

    let err = failed_start(&[("NOEMA__LEDGER__OBJECT_STORE_URL", "ftp://x")], &[]);
    assert!(err.contains("ledger.object_store_url"), "{err}");

    let err = failed_start(
        &[("NOEMA__LEDGER__OBJECT_STORE_URL", "s3://?endpoint=nope")],
        &[],
    );
    assert!(err.contains("ledger.object_store_url"), "{err}");

    let err = failed_start(&[], &["--http-addr", "not-an-address"]);
    assert!(err.contains("server.http_addr"), "{err}");

    let err = failed_start(&[("NOEMA__SERVER__SHUTDOWN_GRACE_SECS", "soon")], &[]);
    assert!(err.contains("server.shutdown_grace_secs"), "{err}");

    let err = failed_start(&[], &["--log-format", "xml"]);
    assert!(err.contains("telemetry.log_format"), "{err}");
}

#[test]
fn the_registry_decides_which_services_exist() {
    // `noema services --json` lists the registry (the Helm values check reads it).
    let out = run(noema().args(["services", "--json"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let services: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = services
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["identity", "ledger", "continuity", "orchestrator", "world"]
    );
    assert_eq!(services[1]["calls"], serde_json::json!(["identity"]));
    assert_eq!(services[0]["owner_token"], true);

    // A service that is not registered is no role, no section and no endpoint.
    let out = run(noema().args(["serve", "example"]));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("identity, ledger, continuity, orchestrator, world, gateway"),
        "{err}"
    );
    let err = failed_start(&[("NOEMA__EXAMPLE__GREETING", "hi")], &[]);
    assert!(
        err.contains(
            "`example`: unknown service `example`; known services: identity, ledger, continuity, orchestrator, world"
        ),
        "{err}"
    );
    let err = failed_start(&[("NOEMA__ENDPOINTS__LEDGR", "http://ledger:50051")], &[]);
    assert!(err.contains("endpoints.ledgr"), "{err}");
}

#[test]
fn migrate_twice_is_a_no_op_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let out = run(noema().args(["migrate", "--data-dir", dir.path().to_str().unwrap()]));
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("ledger: migrations applied (sqlite)"));
    }
    assert!(dir.path().join("ledger.db").is_file());
}

#[test]
fn concurrent_migrations_on_postgres_are_safe() {
    let admin = std::env::var("NOEMA_TEST_DATABASE_URL").expect(
        "NOEMA_TEST_DATABASE_URL is not set: run the suite through scripts/test, which starts Postgres",
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime
        .block_on(noema_store_testing_db(&admin))
        .expect("create a test database");
    let children: Vec<Child> = (0..3)
        .map(|_| {
            noema()
                .args(["migrate", "ledger"])
                .env("NOEMA__LEDGER__DATABASE_URL", &url)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("ledger: migrations applied (postgres)"));
    }
}

async fn noema_store_testing_db(admin: &str) -> Result<String, String> {
    noema_store::testing::create_test_database(admin, "cli_migrate")
        .await
        .map_err(|e| e.to_string())
}

/// A running `noema up` with what it printed.
struct Running {
    child: Child,
    rest: String,
    grpc: String,
    /// Everything printed on stdout before the addresses (the owner token notice).
    banner: String,
}

/// The owner token `noema up` saved in `data_dir`.
fn owner_token(data_dir: &std::path::Path) -> String {
    std::fs::read_to_string(data_dir.join("owner.token"))
        .unwrap()
        .trim()
        .to_owned()
}

/// A key pair made by `noema keygen --out key` and registered in identity as `agent_id`;
/// the keygen's JSON report.
async fn register_agent_key(
    http: &reqwest::Client,
    rest: &str,
    owner: &str,
    key: &std::path::Path,
    agent_id: &str,
) -> serde_json::Value {
    let out = run(noema().args(["keygen", "--out", key.to_str().unwrap()]));
    let keygen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let registered = http
        .post(format!("{rest}/v1/agents"))
        .bearer_auth(owner)
        .json(
            &serde_json::json!({"agent_id": agent_id, "public_key": keygen["public_key_prefixed"]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status().as_u16(), 201);
    keygen
}

/// A bench's JSON report, once the bench has succeeded and every phase did some work
/// without an error.
fn successful_bench(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in report["results"].as_array().unwrap() {
        assert_eq!(r["errors"], 0, "{r}");
        assert!(r["ops"].as_u64().unwrap() > 0, "{r}");
    }
    report
}

/// The `(op, transport)` of each row of a bench report's results.
fn phases_of(results: &[serde_json::Value]) -> Vec<(&str, &str)> {
    results
        .iter()
        .map(|r| (r["op"].as_str().unwrap(), r["transport"].as_str().unwrap()))
        .collect()
}

/// Starts `noema up` logging at debug level into `log`.
fn start_up(data_dir: &std::path::Path, log: &std::path::Path) -> Running {
    start_roles(&["up"], data_dir, log)
}

/// `noema <command…>` (`up`, or `serve` and its roles) on free ports, once it has printed
/// its addresses.
fn start_roles(command: &[&str], data_dir: &std::path::Path, log: &std::path::Path) -> Running {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut child = noema()
        .args(command)
        .args(["--data-dir", data_dir.to_str().unwrap()])
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let (mut rest, mut grpc, mut banner) = (None, None, String::new());
    while rest.is_none() || grpc.is_none() {
        let line = lines
            .next()
            .expect("noema up exited before printing its addresses")
            .unwrap();
        if let Some(url) = line.strip_prefix("REST  ") {
            rest = Some(url.to_owned());
        } else if let Some(addr) = line.strip_prefix("gRPC  ") {
            grpc = Some(addr.to_owned());
        } else {
            banner.push_str(&line);
            banner.push('\n');
        }
    }
    Running {
        child,
        rest: rest.unwrap(),
        grpc: grpc.unwrap(),
        banner,
    }
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("noema did not exit within {limit:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_serves_then_drains_on_sigterm_and_exits_zero() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("noema.log");
    let data = dir.path().join("data");
    let mut running = start_up(&data, &log);

    // First start: the owner token is created, printed once and saved with mode 0600.
    let token_path = data.join("owner.token");
    let owner_token = std::fs::read_to_string(&token_path)
        .unwrap()
        .trim()
        .to_owned();
    assert!(owner_token.starts_with("noema_"), "{owner_token}");
    assert_eq!(
        std::fs::metadata(&token_path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(running.banner.contains(&owner_token), "{}", running.banner);

    let http = noema_tools::tls::client().unwrap();
    let health = http
        .get(format!("{}/healthz", running.rest))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let refused = http
        .get(format!("{}/status", running.rest))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let status: serde_json::Value = http
        .get(format!("{}/status", running.rest))
        .bearer_auth(&owner_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["mode"], "RUNNING");

    // gRPC answers on the printed address, with the owner token.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", running.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut ledger =
        noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient::new(channel);
    let mut request = tonic::Request::new(noema_proto::ledger::v1::GetStatusRequest {});
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {owner_token}").parse().unwrap(),
    );
    let state = ledger.get_status(request).await.unwrap();
    assert_eq!(state.get_ref().changed_by, "system:init");

    // Issue a token; it is printed in the response body, never in the logs.
    let issued: serde_json::Value = http
        .post(format!("{}/v1/security/tokens/issue", running.rest))
        .bearer_auth(&owner_token)
        .json(&serde_json::json!({"peer_id": "peer:cli", "scopes": ["ledger:admin"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let issued_token = issued["token"].as_str().unwrap().to_owned();

    // A stop written before SIGTERM is still there after a restart on the same data dir.
    let stopped = http
        .post(format!("{}/stop", running.rest))
        .bearer_auth(&issued_token)
        .header("X-Actor", "ops:test")
        .send()
        .await
        .unwrap();
    assert_eq!(stopped.status().as_u16(), 200);

    sigterm(&running.child);
    let exit = wait_exit(&mut running.child, Duration::from_secs(20));
    assert!(exit.success(), "exit status after SIGTERM: {exit:?}");

    // Second start: the same owner token, not printed again.
    let mut again = start_up(&data, &log);
    assert!(
        !again.banner.contains("noema_"),
        "owner token printed twice: {}",
        again.banner
    );
    assert_eq!(
        std::fs::read_to_string(&token_path).unwrap().trim(),
        owner_token
    );
    let status: serde_json::Value = http
        .get(format!("{}/status", again.rest))
        .bearer_auth(&owner_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["mode"], "STOPPED");
    assert_eq!(status["changed_by"], "ops:test");
    sigterm(&again.child);
    assert!(wait_exit(&mut again.child, Duration::from_secs(20)).success());

    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.contains("DEBUG"), "debug logging was on");
    for secret in [&owner_token, &issued_token] {
        assert!(
            !logs.contains(secret.as_str()),
            "a token appeared in the logs"
        );
        assert!(
            !logs.contains(&secret[6..]),
            "a token's random part appeared in the logs"
        );
    }
}

/// Everything acknowledged before a `kill -9` is there after a restart, with its bytes,
/// and the audit chain and reconciliation are clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_acknowledged_is_lost_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("noema.log");
    let data = dir.path().join("data");
    let mut running = start_up(&data, &log);
    let token = owner_token(&data);
    let http = noema_tools::tls::client().unwrap();

    // Writers run concurrently; the process is killed while they are still writing.
    let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (http, rest, token, acknowledged) = (
            http.clone(),
            running.rest.clone(),
            token.clone(),
            acknowledged.clone(),
        );
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let request = noema_client::ledger::canonical_request(
                    format!("{{\"writer\":{w},\"i\":{i}}}").into_bytes(),
                    "observation",
                    "application/json",
                    "crash:test",
                    time::OffsetDateTime::now_utc(),
                );
                let body = serde_json::json!({
                    "schema_version": request.schema_version, "id": request.id,
                    "object_type": request.object_type, "content_type": request.content_type,
                    "size_bytes": request.size_bytes, "created_at": request.created_at,
                    "created_by": request.created_by, "storage_path": request.storage_path,
                    "payload": data_encoding::BASE64.encode(&request.payload),
                });
                match http
                    .post(format!("{rest}/canonical"))
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
                    .await
                {
                    Ok(response) if response.status().as_u16() == 201 => {
                        acknowledged.lock().unwrap().push(request.id);
                    }
                    _ => break,
                }
            }
        }));
    }
    while acknowledged.lock().unwrap().len() < 40 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.child.kill().unwrap(); // SIGKILL: no drain, no flush
    running.child.wait().unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();

    let mut again = start_up(&data, &log);
    for id in &acknowledged {
        let response = http
            .get(format!("{}/canonicals/{id}/payload", again.rest))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status().as_u16(),
            200,
            "acknowledged {id} was lost"
        );
        let bytes = response.bytes().await.unwrap();
        assert_eq!(
            noema_core::content_id::ContentId::of_bytes(&bytes).into_string(),
            *id
        );
    }
    let endpoint = format!("http://{}", again.grpc);
    for args in [&["ledger", "reconcile"][..], &["ledger", "verify-audit"]] {
        let out = run(noema()
            .args(args)
            .args(["--endpoint", &endpoint, "--token", &token]));
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    sigterm(&again.child);
    assert!(wait_exit(&mut again.child, Duration::from_secs(20)).success());
}

/// The CLI's export → import → reconcile round trip between two instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_export_import_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("noema.log");
    let (a_data, b_data) = (dir.path().join("a"), dir.path().join("b"));
    let mut a = start_up(&a_data, &log);
    let mut b = start_up(&b_data, &log);
    let a_flags = [
        "--endpoint".to_owned(),
        format!("http://{}", a.grpc),
        "--data-dir".to_owned(),
        a_data.display().to_string(),
    ];
    let b_flags = [
        "--endpoint".to_owned(),
        format!("http://{}", b.grpc),
        "--data-dir".to_owned(),
        b_data.display().to_string(),
    ];
    let key = dir.path().join("agent.key");
    let out = run(noema().args(["keygen", "--out", key.to_str().unwrap()]));
    assert!(out.status.success());
    let mut ids = Vec::new();
    for i in 0..3 {
        let file = dir.path().join(format!("obs{i}.json"));
        std::fs::write(&file, format!("{{\"obs\":{i}}}")).unwrap();
        let out = run(noema()
            .args([
                "canonical",
                "put",
                file.to_str().unwrap(),
                "--content-type",
                "application/json",
            ])
            .args(&a_flags));
        assert!(out.status.success(), "{}", text(&out.stderr));
        let object: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        ids.push(object["id"].as_str().unwrap().to_owned());
    }
    let out = run(noema()
        .args([
            "reference",
            "emit",
            "--canonical",
            &ids[0],
            "--agent",
            "agent:cli",
            "--context",
            "seen",
        ])
        .args(["--key-file", key.to_str().unwrap()])
        .args(&a_flags));
    assert!(out.status.success(), "{}", text(&out.stderr));

    let export = dir.path().join("export.ndjson");
    let out = run(noema()
        .args(["ledger", "export", "--out", export.to_str().unwrap()])
        .args(&a_flags));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&export).unwrap().lines().count(), 3);
    for (pass, expect) in [(0, "\"imported\": 3"), (1, "\"duplicates\": 3")] {
        let out = run(noema()
            .args(["ledger", "import", export.to_str().unwrap()])
            .args(&b_flags));
        assert!(out.status.success(), "pass {pass}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(expect),
            "pass {pass}: {}",
            text(&out.stdout)
        );
    }
    let out = run(noema().args(["ledger", "reconcile"]).args(&b_flags));
    assert!(out.status.success(), "{}", text(&out.stdout));
    let out = run(noema().args(["canonical", "get", &ids[2]]).args(&b_flags));
    assert!(text(&out.stdout).contains(&ids[2]));
    for child in [&mut a.child, &mut b.child] {
        sigterm(child);
        assert!(wait_exit(child, Duration::from_secs(20)).success());
    }
}

/// An agent keeps a signed diary from the command line: register its key, create a
/// draft, sign it locally, verify it, and walk its signature chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_diary_entry_sign_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("noema.log");
    let data = dir.path().join("data");
    let mut running = start_up(&data, &log);
    let owner = owner_token(&data);
    let endpoint = format!("http://{}", running.grpc);
    let key = dir.path().join("agent.key");
    let http = noema_tools::tls::client().unwrap();
    let keygen = register_agent_key(&http, &running.rest, &owner, &key, "agent:diarist").await;
    let issued: serde_json::Value = http
        .post(format!("{}/v1/security/tokens/issue", running.rest))
        .bearer_auth(&owner)
        .json(&serde_json::json!({"peer_id": "agent:diarist", "scopes": ["diary:read", "diary:write", "crypto:sign", "identity:read"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = issued["token"].as_str().unwrap().to_owned();
    let client = [
        "--endpoint".to_owned(),
        endpoint,
        "--token".to_owned(),
        token,
    ];

    let out = run(noema()
        .args(["diary", "create", "--name", "field notes"])
        .args(&client));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let diary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = run(noema()
        .args(["entry", "create", "--diary", diary["id"].as_str().unwrap()])
        .args(["--title", "Title", "--content", "Content", "--tag", "tag1"])
        .args(&client));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let entry: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // MoltNet's compat vector: this title/content/tags/type has this CID.
    assert_eq!(
        entry["content_hash"],
        "bafkreidxfykbrvutwidnpsnto4ij6kpe6r3oofqthfc5ohvcmrpsw3irse"
    );
    let id = entry["id"].as_str().unwrap();

    let out = run(noema()
        .args(["entry", "sign", id, "--key-file", key.to_str().unwrap()])
        .args(&client));
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = run(noema().args(["entry", "verify", id]).args(&client));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let verified: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verified["valid"], true);
    assert_eq!(verified["agentFingerprint"], keygen["fingerprint"]);
    let out = run(noema()
        .args(["identity", "verify-chain", "agent:diarist"])
        .args(&client));
    assert!(out.status.success(), "{}", text(&out.stdout));
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `noema peers trust --agent-id` binds a peer to an agent; `noema shared create|update
/// --sign-key` signs the body client-side, which such a peer's binding may require.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_signed_shared_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_up(&data, &dir.path().join("noema.log"));
    let owner = owner_token(&data);
    let endpoint = format!("http://{}", running.grpc);
    let key = dir.path().join("planner.key");
    let http = noema_tools::tls::client().unwrap();
    let keygen = register_agent_key(&http, &running.rest, &owner, &key, "agent:planner").await;
    let issued: serde_json::Value = http
        .post(format!("{}/v1/security/tokens/issue", running.rest))
        .bearer_auth(&owner)
        .json(
            &serde_json::json!({"peer_id": "agent:planner", "tenant": "crew",
            "scopes": ["continuity:read", "continuity:write", "identity:read"]}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let planner = issued["token"].as_str().unwrap().to_owned();
    // The owner acts in the planner's tenant.
    let as_owner = [
        "--endpoint",
        endpoint.as_str(),
        "--token",
        owner.as_str(),
        "--tenant",
        "crew",
    ];
    let as_planner = ["--endpoint", endpoint.as_str(), "--token", planner.as_str()];
    let json = |args: &[&str], client: &[&str]| {
        let out = run(noema().args(args).args(client));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    for peer in ["agent:planner", "bob"] {
        json(
            &["peers", "register", peer, "--base-url", "http://peer"],
            &as_owner,
        );
    }
    let bound = json(
        &[
            "peers",
            "trust",
            "agent:planner",
            "restricted",
            "--reason",
            "bind",
            "--agent-id",
            "agent:planner",
            "--require-signed-writes",
            "true",
        ],
        &as_owner,
    );
    assert_eq!(
        bound["peer"]["agent_binding"]["require_signed_writes"],
        true
    );

    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"participant_peers":["bob"],"title":"Plan","constraints":["no schema change"]}"#,
    )
    .unwrap();
    let out = run(noema()
        .args(["shared", "create", plan.to_str().unwrap()])
        .args(as_planner));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Peer requires signed coordination writes"),
        "{}",
        text(&out.stderr)
    );
    let created = json(
        &[
            "shared",
            "create",
            plan.to_str().unwrap(),
            "--sign-key",
            key.to_str().unwrap(),
        ],
        &as_planner,
    );
    let signature = &created["shared"]["sender_signature"];
    assert_eq!(signature["agent_id"], "agent:planner");
    assert_eq!(signature["public_key"], keygen["public_key_prefixed"]);
    assert_eq!(signature["signed_body"]["title"], "Plan");
    // `shared update --sign-key` signs the body with the path's shared_id, as continuity
    // verifies it; the stored signed body names the artifact.
    let id = created["shared"]["shared_id"].as_str().unwrap();
    let update = dir.path().join("update.json");
    std::fs::write(
        &update,
        r#"{"expected_version":1,"title":"Plan v2","constraints":["no schema change"]}"#,
    )
    .unwrap();
    let updated = json(
        &[
            "shared",
            "update",
            id,
            update.to_str().unwrap(),
            "--sign-key",
            key.to_str().unwrap(),
        ],
        &as_planner,
    );
    assert_eq!(updated["shared"]["version"], 2);
    let signed_body = &updated["shared"]["sender_signature"]["signed_body"];
    assert_eq!(signed_body["shared_id"], id);
    assert_eq!(signed_body["title"], "Plan v2");
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `noema mcp tools`: the tools the endpoint lists for a token, by name or as JSON; a
/// narrower token sees fewer, and never one it may not call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_mcp_tools_lists_what_the_token_may_call() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_up(&data, &dir.path().join("noema.log"));
    let owner = owner_token(&data);
    let issued: serde_json::Value = noema_tools::tls::client()
        .unwrap()
        .post(format!("{}/v1/security/tokens/issue", running.rest))
        .bearer_auth(&owner)
        .json(&serde_json::json!({"peer_id": "mcp-reader", "scopes": ["ledger:read"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let reader = issued["token"].as_str().unwrap();

    let names = |token: &str| {
        let out = run(noema().args(["mcp", "tools", "--rest", &running.rest, "--token", token]));
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|line| {
                line.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    let all = names(&owner);
    let few = names(reader);
    for name in [
        "ledger_status",
        "ledger_stop",
        "security.tokens_issue",
        "diaries_create",
    ] {
        assert!(
            all.contains(&name.to_owned()),
            "owner lacks {name}: {all:?}"
        );
    }
    assert!(few.contains(&"ledger_status".to_owned()), "{few:?}");
    for name in ["ledger_stop", "security.tokens_issue", "diaries_create"] {
        assert!(!few.contains(&name.to_owned()), "ledger:read lists {name}");
    }
    assert!(few.iter().all(|name| all.contains(name)));

    let out = run(noema().args([
        "mcp",
        "tools",
        "--json",
        "--rest",
        &running.rest,
        "--token",
        reader,
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| {
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
            tool["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(listed, few);

    let out = run(noema().args([
        "mcp",
        "tools",
        "--rest",
        &running.rest,
        "--token",
        "not-a-token",
    ]));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("401"), "{}", text(&out.stderr));
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `noema memory write|read|append`, `noema search`, `noema tasks`: CogniRelay's memory files,
/// search and tasks from the command line, answered with the original's JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_memory_search_and_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_up(&data, &dir.path().join("noema.log"));
    let owner = owner_token(&data);
    let endpoint = format!("http://{}", running.grpc);
    let client = ["--endpoint", endpoint.as_str(), "--token", owner.as_str()];
    let json = |args: &[&str]| {
        let out = run(noema().args(args).args(client));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };

    let written = json(&[
        "memory",
        "write",
        "memory/core/identity.md",
        "--content",
        "I am agent #alpha. Blue whales.",
    ]);
    assert_eq!(written["committed"], true);
    assert_eq!(written["durable"], true);
    json(&[
        "memory",
        "append",
        "memory/episodic/log.jsonl",
        r#"{"b":1,"a":2}"#,
    ]);
    let read = json(&["memory", "read", "memory/episodic/log.jsonl"]);
    assert_eq!(read["content"], "{\"b\": 1, \"a\": 2}\n");
    let found = json(&["search", "blue whales", "--limit", "5"]);
    assert_eq!(found["count"], 1);
    assert_eq!(found["results"][0]["path"], "memory/core/identity.md");

    let task = dir.path().join("task.json");
    std::fs::write(
        &task,
        r#"{"task_id":"t-1","title":"Tag whales","owner_peer":"p"}"#,
    )
    .unwrap();
    assert_eq!(
        json(&["tasks", "create", task.to_str().unwrap()])["path"],
        "tasks/open/t-1.json"
    );
    std::fs::write(&task, r#"{"status":"done"}"#).unwrap();
    assert_eq!(
        json(&["tasks", "update", "t-1", task.to_str().unwrap()])["path"],
        "tasks/done/t-1.json"
    );
    assert_eq!(json(&["tasks", "query", "--status", "done"])["count"], 1);

    // A refusal exits non-zero with the service's message.
    let out = run(noema()
        .args(["memory", "read", "memory/core/missing.md"])
        .args(client));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("File not found"),
        "{}",
        text(&out.stderr)
    );
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `--log-format json`: every line `noema up` writes on stderr is one JSON object with a
/// timestamp, a level and a message, from start-up to the drain after SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("noema.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let mut child = noema()
        .args(["up", "--log-format", "json", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let rest = loop {
        let line = lines
            .next()
            .expect("noema up exited before printing its addresses")
            .unwrap();
        if let Some(url) = line.strip_prefix("REST  ") {
            break url.to_owned();
        }
    };
    let response = noema_tools::tls::client()
        .unwrap()
        .get(format!("{rest}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    sigterm(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(20)).success());

    let text = std::fs::read_to_string(&log).unwrap();
    let mut messages = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        for field in ["timestamp", "level", "message"] {
            assert!(value.get(field).is_some(), "no {field}: {line}");
        }
        messages.push(value["message"].as_str().unwrap_or_default().to_owned());
    }
    for expected in [
        "noema is serving; SIGTERM or Ctrl-C to stop",
        "stopped cleanly",
    ] {
        assert!(
            messages.iter().any(|m| m == expected),
            "{expected:?} not logged: {messages:?}"
        );
    }
}

/// `noema backup` while `noema up` serves, then `noema restore` into a new data dir and
/// `noema up` on it: everything written before the backup is there, the owner token
/// still works, reconcile and the audit chain are clean. Restore refuses a non-empty data
/// dir and a damaged backup (before writing anything).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_while_running_then_restore_into_a_new_dir() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("noema.log");
    let data = dir.path().join("data");
    let mut running = start_up(&data, &log);
    let token = owner_token(&data);
    let http = noema_tools::tls::client().unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = noema_client::ledger::canonical_request(
            format!("{{\"backup\":{i}}}").into_bytes(),
            "observation",
            "application/json",
            "backup:test",
            time::OffsetDateTime::now_utc(),
        );
        let body = serde_json::json!({
            "schema_version": r.schema_version, "id": r.id, "object_type": r.object_type,
            "content_type": r.content_type, "size_bytes": r.size_bytes,
            "created_at": r.created_at, "created_by": r.created_by,
            "storage_path": r.storage_path,
            "payload": data_encoding::BASE64.encode(&r.payload),
        });
        let response = http
            .post(format!("{}/canonical", running.rest))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 201);
        ids.push(r.id);
    }
    let endpoint = format!("http://{}", running.grpc);
    let key = dir.path().join("agent.key");
    assert!(
        run(noema().args(["keygen", "--out", key.to_str().unwrap()]))
            .status
            .success()
    );
    let out = run(noema()
        .args([
            "reference",
            "emit",
            "--canonical",
            &ids[0],
            "--agent",
            "agent:backup",
        ])
        .args(["--context", "kept", "--key-file", key.to_str().unwrap()])
        .args(["--endpoint", &endpoint, "--token", &token]));
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Backup while serving.
    let backup = dir.path().join("backup");
    let data_arg = ["--data-dir", data.to_str().unwrap()];
    let out = run(noema()
        .args(["backup", "--out", backup.to_str().unwrap()])
        .args(data_arg));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("backed up"),
        "{}",
        text(&out.stdout)
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(backup.join("manifest.json")).unwrap()).unwrap();
    let paths: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for expected in [
        "databases/identity.db",
        "databases/ledger.db",
        "owner.token",
    ] {
        assert!(paths.contains(&expected), "{expected} not in {paths:?}");
    }
    // The default object store is a pack store: its segments, never its lock file.
    let objects: Vec<&&str> = paths.iter().filter(|p| p.starts_with("objects/")).collect();
    assert!(!objects.is_empty(), "{paths:?}");
    assert!(
        objects
            .iter()
            .all(|p| p.starts_with("objects/segments/") && p.ends_with(".pack")),
        "{paths:?}"
    );
    // Not into a backup that exists.
    let out = run(noema()
        .args(["backup", "--out", backup.to_str().unwrap()])
        .args(data_arg));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );

    // Restore refuses a live (non-empty) data dir.
    let out = run(noema()
        .args(["restore", "--from", backup.to_str().unwrap()])
        .args(data_arg));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
    // … and a damaged backup, before writing anything.
    let damaged = dir.path().join("damaged");
    assert!(
        Command::new("cp")
            .args(["-a", backup.to_str().unwrap(), damaged.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    );
    let object = paths.iter().find(|p| p.starts_with("objects/")).unwrap();
    std::fs::write(damaged.join(object), b"tampered").unwrap();
    let nowhere = dir.path().join("nowhere");
    let out = run(noema()
        .args(["restore", "--from", damaged.to_str().unwrap()])
        .args(["--data-dir", nowhere.to_str().unwrap()]));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("damaged"),
        "{}",
        text(&out.stderr)
    );
    assert!(!nowhere.exists(), "a refused restore wrote nothing");

    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());

    let restored = dir.path().join("restored");
    let out = run(noema()
        .args(["restore", "--from", backup.to_str().unwrap()])
        .args(["--data-dir", restored.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut again = start_up(&restored, &log);
    assert!(
        !again.banner.contains("noema_"),
        "the owner token came back with the backup: {}",
        again.banner
    );
    for id in &ids {
        let response = http
            .get(format!("{}/canonicals/{id}/payload", again.rest))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{id} was not restored");
    }
    let references: serde_json::Value = http
        .get(format!("{}/references", again.rest))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(references.as_array().unwrap().len(), 1, "{references}");
    let endpoint = format!("http://{}", again.grpc);
    for args in [
        &["ledger", "reconcile"][..],
        &["ledger", "verify-audit"],
        &["ledger", "verify-audit", "--service", "identity"],
    ] {
        let out = run(noema()
            .args(args)
            .args(["--endpoint", &endpoint, "--token", &token]));
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    sigterm(&again.child);
    assert!(wait_exit(&mut again.child, Duration::from_secs(20)).success());
}

/// A data dir of an earlier version keeps its file store (`<data_dir>/objects`), and content
/// types survive `noema backup` → `noema restore` of it: those the store keeps in an extended
/// attribute (the backup holds them as meta files), those in meta files written by earlier
/// versions, and the absence of one; an attribute wins over a stale meta file. Its backup
/// does not restore into a configured pack store.
#[tokio::test]
async fn backup_and_restore_keep_content_types() {
    use bytes::Bytes;
    use noema_store::ObjectStore as _;
    use noema_store::object::{ContentTypeStorage, FileObjectStore};

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = run(noema().args(["migrate", "--data-dir", data.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out.stderr));

    let store_root = data.join("objects");
    let store = FileObjectStore::open(&store_root).await.unwrap();
    assert_eq!(
        store.content_type_storage(),
        ContentTypeStorage::Xattr,
        "this test needs a temp dir on a file system with user extended attributes"
    );
    let typed = "canonical/observation/2026/04/14/sha256:00aa.json";
    store
        .put(typed, Bytes::from_static(b"{}"), "application/json")
        .await
        .unwrap();
    store
        .put("untyped", Bytes::from_static(b"raw"), "")
        .await
        .unwrap();
    // The attribute wins over a stale meta file, in the backup too.
    store
        .put("overridden", Bytes::from_static(b"x"), "text/markdown")
        .await
        .unwrap();
    std::fs::write(store_root.join("meta/overridden"), "text/plain").unwrap();
    // An object written by an earlier version: its type in a meta file only.
    std::fs::write(store_root.join("objects/legacy"), "a,b").unwrap();
    std::fs::write(store_root.join("meta/legacy"), "text/csv").unwrap();
    let expected = [
        (typed, Some("application/json")),
        ("untyped", None),
        ("overridden", Some("text/markdown")),
        ("legacy", Some("text/csv")),
    ];
    for (key, content_type) in expected {
        let head = store.head(key).await.unwrap().unwrap();
        assert_eq!(head.content_type.as_deref(), content_type, "{key} before");
    }

    let backup = dir.path().join("backup");
    let out = run(noema()
        .args(["backup", "--out", backup.to_str().unwrap()])
        .args(["--data-dir", data.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(backup.join("objects/meta").join(typed)).unwrap(),
        "application/json",
        "the backup holds the attribute's content type as a plain file"
    );
    assert!(!backup.join("objects/meta/untyped").exists());

    let restored = dir.path().join("restored");
    let out = run(noema()
        .args(["restore", "--from", backup.to_str().unwrap()])
        .args(["--data-dir", restored.to_str().unwrap()]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let store = FileObjectStore::open(restored.join("objects"))
        .await
        .unwrap();
    for (key, content_type) in expected {
        let head = store.head(key).await.unwrap().unwrap();
        assert_eq!(head.content_type.as_deref(), content_type, "{key} restored");
    }

    // A file store's backup does not go into a configured pack store.
    let elsewhere = dir.path().join("elsewhere");
    let out = run(noema()
        .args(["restore", "--from", backup.to_str().unwrap()])
        .args(["--data-dir", elsewhere.to_str().unwrap()])
        .env(
            "NOEMA__LEDGER__OBJECT_STORE_URL",
            format!("pack://{}", elsewhere.join("packs").display()),
        ));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("holds a file:// object store") && err.contains("pack:// URL"),
        "{err}"
    );
    assert!(!elsewhere.exists(), "a refused restore wrote nothing");
}

/// An operation or transport the bench does not know is a usage error, named with the
/// accepted values, before anything is connected or run.
#[test]
fn bench_ledger_refuses_unknown_operations_and_transports() {
    for (flag, value, accepted) in [
        (
            "--ops",
            "canonical_put,reference",
            "canonical_put, reference_put, canonical_get",
        ),
        ("--transports", "grpc,http", "grpc, rest"),
    ] {
        let out = run(noema().args([
            "bench",
            "ledger",
            "--endpoint",
            "http://127.0.0.1:9",
            "--duration",
            "60",
            flag,
            value,
        ]));
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(accepted), "{stderr}");
    }
}

/// `noema bench ledger` drives every operation over both transports with real, durable
/// writes and reports what it measured: the writes it counts are the writes the ledger has,
/// the server's memory and CPU per operation are read from the process it was given, and the
/// load client ran on its default threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_ledger_reports_every_phase_and_its_writes_are_real() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_up(&data, &dir.path().join("noema.log"));
    let flags = [
        "--endpoint".to_owned(),
        format!("http://{}", running.grpc),
        "--data-dir".to_owned(),
        data.display().to_string(),
    ];
    let out = run(noema()
        .args(["bench", "ledger", "--concurrency", "2", "--duration", "1"])
        .args(["--rest", &running.rest])
        .args(["--server-pid", &running.child.id().to_string()])
        .args(&flags));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The load client's threads by default: a quarter of the cores, at least one.
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(report["client_threads"], (cores / 4).max(1));
    let results = report["results"].as_array().unwrap();
    assert_eq!(
        phases_of(results),
        [
            ("canonical_put", "grpc"),
            ("canonical_put", "rest"),
            ("reference_put", "grpc"),
            ("reference_put", "rest"),
            ("canonical_get", "grpc"),
            ("canonical_get", "rest"),
        ]
    );
    let ops = |op: &str| -> u64 {
        results
            .iter()
            .filter(|r| r["op"] == op)
            .map(|r| r["ops"].as_u64().unwrap())
            .sum()
    };
    for r in results {
        assert_eq!(r["errors"], 0, "{r}");
        assert!(r["ops"].as_u64().unwrap() > 0, "{r}");
        assert!(r["throughput_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["p50_ms"].as_f64().unwrap() <= r["p99_ms"].as_f64().unwrap(),
            "{r}"
        );
        assert!(r["server_cpu_us_per_op"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["bench_cpu_us_per_op"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(
        report["server_peak_rss_mb"].as_f64().unwrap() > 1.0,
        "{report}"
    );

    // Every put the bench counted is in the ledger (plus the object references point at),
    // with its bytes and its audit entry.
    let out = run(noema().args(["ledger", "reconcile"]).args(&flags));
    assert!(out.status.success(), "{}", text(&out.stdout));
    let reconcile: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        reconcile["checked"],
        1 + ops("canonical_put"),
        "{reconcile}"
    );
    let out = run(noema().args(["ledger", "verify-audit"]).args(&flags));
    assert!(out.status.success(), "{}", text(&out.stdout));
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The init entry, the anchor object, then one entry per counted write.
    assert_eq!(
        audit["checked"],
        2 + ops("canonical_put") + ops("reference_put"),
        "{audit}"
    );
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `--transports rest,mcp`: the same operations as MCP tool calls, every call a success
/// (real writes), and the p50 overhead of a tool call over its REST route reported per
/// operation (reported, never judged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_ledger_measures_mcp_tool_calls_against_rest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_up(&data, &dir.path().join("noema.log"));
    let flags = [
        "--endpoint".to_owned(),
        format!("http://{}", running.grpc),
        "--data-dir".to_owned(),
        data.display().to_string(),
    ];
    let out = run(noema()
        .args(["bench", "ledger", "--concurrency", "2", "--duration", "1"])
        .args([
            "--ops",
            "canonical_put,canonical_get",
            "--transports",
            "rest,mcp",
        ])
        .args(["--rest", &running.rest])
        .args(&flags));
    let report = successful_bench(&out);
    let results = report["results"].as_array().unwrap();
    assert_eq!(
        phases_of(results),
        [
            ("canonical_put", "rest"),
            ("canonical_put", "mcp"),
            ("canonical_get", "rest"),
            ("canonical_get", "mcp"),
        ]
    );
    let overhead = report["mcp_overhead_p50_ms"].as_object().unwrap();
    assert_eq!(
        overhead.keys().collect::<Vec<_>>(),
        ["canonical_get", "canonical_put"]
    );
    for (op, ms) in overhead {
        let p50 = |transport: &str| {
            results
                .iter()
                .find(|r| r["op"] == op.as_str() && r["transport"] == transport)
                .unwrap()["p50_ms"]
                .as_f64()
                .unwrap()
        };
        let expected = ((p50("mcp") - p50("rest")) * 1000.0).round() / 1000.0;
        assert!((ms.as_f64().unwrap() - expected).abs() < 1e-9, "{op}: {ms}");
    }
    // The MCP puts are real writes: the ledger holds every counted one.
    let out = run(noema().args(["ledger", "reconcile"]).args(&flags));
    assert!(out.status.success(), "{}", text(&out.stdout));
    let reconcile: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let puts: u64 = results
        .iter()
        .filter(|r| r["op"] == "canonical_put")
        .map(|r| r["ops"].as_u64().unwrap())
        .sum();
    assert_eq!(reconcile["checked"], 1 + puts, "{reconcile}");
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `noema bench coordination`: every phase's calls succeed, the paired phase splits its
/// clients between REST and MCP, and the MCP overhead reported is that phase's p50
/// difference (the separate phases' difference and throughput ratio beside it). The load
/// client runs on the threads asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_coordination_reports_the_mcp_overhead_under_one_load() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_up(&data, &dir.path().join("noema.log"));
    let out = run(noema()
        .args([
            "bench",
            "coordination",
            "--concurrency",
            "3",
            "--duration",
            "1",
            "--client-threads",
            "3",
        ])
        .args(["--target", &running.rest, "--data-dir"])
        .arg(&data));
    let report = successful_bench(&out);
    assert_eq!(report["client_threads"], 3);
    let results = report["results"].as_array().unwrap();
    assert_eq!(
        phases_of(results),
        [
            ("send", "rest"),
            ("inbox", "rest"),
            ("rest_call", "rest"),
            ("mcp_call", "mcp"),
            ("paired_rest_call", "rest"),
            ("paired_mcp_call", "mcp"),
        ]
    );
    let row = |op: &str| results.iter().find(|r| r["op"] == op).unwrap();
    assert_eq!(row("paired_rest_call")["clients"], 1);
    assert_eq!(row("paired_mcp_call")["clients"], 2);
    let difference = |mcp: &str, rest: &str| {
        let p50 = |op: &str| row(op)["p50_ms"].as_f64().unwrap();
        ((p50(mcp) - p50(rest)) * 1000.0).round() / 1000.0
    };
    let reported = |key: &str| report[key].as_f64().unwrap();
    assert!(
        (reported("mcp_overhead_p50_ms") - difference("paired_mcp_call", "paired_rest_call")).abs()
            < 1e-9
    );
    assert!(
        (reported("mcp_separate_phases_overhead_p50_ms") - difference("mcp_call", "rest_call"))
            .abs()
            < 1e-9
    );
    let throughput = |op: &str| row(op)["throughput_per_sec"].as_f64().unwrap();
    let ratio = reported("mcp_separate_phases_throughput_ratio");
    assert!((ratio - throughput("mcp_call") / throughput("rest_call")).abs() < 1e-3);
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `noema bench orchestrator` runs complete lifecycles against a running Noema and reports
/// them; each one it counts is a request that reached REWARDED, and the whole-store replay
/// it times covers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_orchestrator_reports_lifecycles_that_happened() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_up(&data, &dir.path().join("noema.log"));
    let flags = [
        "--endpoint".to_owned(),
        format!("http://{}", running.grpc),
        "--data-dir".to_owned(),
        data.display().to_string(),
    ];
    let out = run(noema()
        .args([
            "bench",
            "orchestrator",
            "--concurrency",
            "2",
            "--duration",
            "1",
        ])
        .args(["--server-pid", &running.child.id().to_string()])
        .args(&flags));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lifecycle = &report["lifecycle"];
    assert_eq!(lifecycle["errors"], 0, "{report}");
    let done = lifecycle["lifecycles"].as_u64().unwrap();
    assert!(done > 0, "{report}");
    for call in ["plan", "risk", "execute", "evaluate", "reward"] {
        let c = &lifecycle["calls"][call];
        assert!(
            c["p50_ms"].as_f64().unwrap() <= c["p99_ms"].as_f64().unwrap(),
            "{report}"
        );
    }
    assert!(
        lifecycle["server_cpu_us_per_lifecycle"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    // Seven events per lifecycle (received, planned, risked, executed, traced, evaluated,
    // rewarded), all replayed; started but unfinished lifecycles may add a few requests.
    let runs = report["replay_all"]["runs"].as_array().unwrap();
    assert!(!runs.is_empty(), "{report}");
    for replay in runs {
        assert_eq!(replay["ok"], true, "{report}");
        assert_eq!(replay["mismatched"], 0, "{report}");
        assert!(replay["requests"].as_u64().unwrap() >= done, "{report}");
        assert!(replay["events"].as_u64().unwrap() >= 7 * done, "{report}");
    }
    let out = run(noema().args(["request", "replay", "--all"]).args(&flags));
    assert!(out.status.success(), "{}", text(&out.stdout));
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

/// `noema bench world` runs its turns with the toys in a child process of their own and
/// reports the kernel's and the toys' CPU apart; a failed turn would fail the command. The
/// concurrent phase's turns cannot be shorter than the scripted LLM's latency.
#[test]
fn bench_world_runs_turns_against_toys_in_their_own_process() {
    let out = run(noema().args([
        "bench",
        "world",
        "--subjects",
        "3",
        "--turns",
        "2",
        "--llm-latency-ms",
        "30",
        "--max-concurrent-subjects",
        "3",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["subjects"], 3, "{report}");
    for phase in ["ordered", "concurrent"] {
        for key in [
            "turn_ms_median",
            "kernel_cpu_ms_per_subject_median",
            "toys_cpu_ms_per_subject_median",
        ] {
            assert!(
                report[phase][key].as_f64().is_some(),
                "{phase}.{key}: {report}"
            );
        }
    }
    assert_eq!(report["concurrent"]["execution"], "per_subject_concurrent");
    assert!(
        report["concurrent"]["turn_ms_median"].as_f64().unwrap() >= 30.0,
        "{report}"
    );
}

/// `--client-threads` sets a load client's threads; `bench world` does the work itself and
/// refuses it rather than ignore it.
#[test]
fn bench_world_refuses_client_threads() {
    let out = run(noema().args(["bench", "world", "--client-threads", "1"]));
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("--client-threads sets a load client's threads"),
        "{}",
        text(&out.stderr)
    );
}

/// A gateway given no endpoint for a service that its process does not run either (the Helm
/// chart's `enabled: false`) starts, is ready, serves the services it has, and answers the
/// missing one's routes 503 naming it. The ledger bench's REST canonical puts need no gRPC
/// endpoint (here: none listens), so the same client can measure other servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_some_services_serves_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut running = start_roles(
        &["serve", "identity", "ledger", "gateway"],
        &data,
        &dir.path().join("noema.log"),
    );
    let token = owner_token(&data);
    let http = noema_tools::tls::client().unwrap();
    let ready = http
        .get(format!("{}/readyz", running.rest))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());
    let status = http
        .get(format!("{}/status", running.rest))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);
    let missing = http
        .get(format!("{}/requests", running.rest))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 503);
    let body = missing.text().await.unwrap();
    assert!(body.contains("orchestrator"), "{body}");

    let out = run(noema()
        .args(["bench", "ledger", "--concurrency", "2", "--duration", "1"])
        .args(["--ops", "canonical_put", "--transports", "rest"])
        .args(["--rest", &running.rest, "--token", &token])
        .args(["--endpoint", "http://127.0.0.1:9"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = &report["results"][0];
    assert_eq!(result["errors"], 0, "{result}");
    assert!(result["ops"].as_u64().unwrap() > 0, "{result}");
    sigterm(&running.child);
    assert!(wait_exit(&mut running.child, Duration::from_secs(20)).success());
}

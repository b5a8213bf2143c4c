//! The registry's proof: the example service is registered in one place
//! (`noema_example_service::registry()`, the production registry `.with(spec())`) and,
//! without any other edit, is served in every cluster shape (all-in-one, split, separate
//! processes of the `noema-example` binary), answers through auth, shows in gRPC health,
//! readiness (the gateway's `/readyz`) and reflection, has its configuration section,
//! endpoint, migrations and backup; and the production registry knows nothing of it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use noema_example_service::pb::VisitRequest;
use noema_example_service::pb::example_service_client::ExampleServiceClient;
use noema_runtime::config::ConfigLoader;
use noema_test_support::{Backend, BearerToken, Shape, TestCluster};
use tokio_stream::StreamExt;

const EXAMPLE: &str = "noema.example.v1.ExampleService";
const NOEMA_EXAMPLE: &str = env!("CARGO_BIN_EXE_noema-example");

async fn cluster(backend: Backend, shape: Shape) -> TestCluster {
    TestCluster::builder(backend, shape)
        .registry(noema_example_service::registry().unwrap())
        .binary(NOEMA_EXAMPLE)
        .setting("example.greeting", "\"hi\"")
        .start()
        .await
        .unwrap_or_else(|err| panic!("cannot start a {shape:?} cluster on {backend}: {err}"))
}

macro_rules! every_shape {
    ($($test:ident: $backend:ident, $shape:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let cluster = cluster(Backend::$backend, Shape::$shape).await;
                the_example_is_served(&cluster).await;
                cluster.shutdown().await.unwrap();
            }
        )*
    };
}

every_shape! {
    all_in_one_sqlite: Sqlite, AllInOne;
    split_sqlite: Sqlite, Split;
    all_in_one_postgres_s3: PostgresS3, AllInOne;
    split_postgres_s3: PostgresS3, Split;
    processes_postgres_s3: PostgresS3, Processes;
}

async fn the_example_is_served(cluster: &TestCluster) {
    let endpoint = cluster
        .endpoint("example")
        .expect("the cluster runs example");
    assert_eq!(cluster.endpoint_of(EXAMPLE), Some(endpoint));
    let channel = cluster.channel(endpoint).await.unwrap();

    // Its RPC answers through auth: its own row, its object store, its peer (the ledger,
    // reached with the caller's token), its configured option.
    let mut example = ExampleServiceClient::with_interceptor(
        channel.clone(),
        BearerToken::new(&cluster.owner_token).unwrap(),
    );
    for expected in 1..=2 {
        let reply = example
            .visit(VisitRequest { name: "ada".into() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reply.name, "ada");
        assert_eq!(reply.visits, expected);
        assert_eq!(reply.greeting, "hi");
        assert_eq!(reply.ledger_mode, "RUNNING");
        assert_eq!(reply.postcard_key, format!("postcards/ada/{expected}"));
    }
    let err = example
        .visit(VisitRequest {
            name: "Not A Name".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    let err = ExampleServiceClient::new(channel.clone())
        .visit(VisitRequest { name: "ada".into() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");

    // gRPC health and reflection on its endpoint.
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: EXAMPLE.into(),
        })
        .await
        .unwrap();
    assert_eq!(health.get_ref().status, ServingStatus::Serving as i32);
    let names = reflected_services(channel.clone()).await;
    assert!(names.iter().any(|n| n == EXAMPLE), "{names:?}");
    assert!(
        describes(channel, "noema.example.v1.VisitRequest").await,
        "reflection cannot describe the example's messages"
    );

    // The gateway fronts it: readiness checks it.
    let ready: serde_json::Value = noema_tools::tls::client()
        .unwrap()
        .get(format!("{}/readyz", cluster.rest_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["status"], "ready", "{ready}");
    assert_eq!(ready["services"][EXAMPLE], "serving", "{ready}");

    // The embedded default gives it its own pack store, beside the ledger's.
    if cluster.backend == Backend::Sqlite {
        let data = cluster.data_dir();
        assert!(data.join("example/packs").is_dir());
        assert!(data.join("packs").is_dir());
        assert!(data.join("example.db").is_file());
    }
}

/// Every service name reflection lists.
async fn reflected_services(channel: tonic::transport::Channel) -> Vec<String> {
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    match reflect(channel, MessageRequest::ListServices(String::new()))
        .await
        .unwrap()
    {
        Some(MessageResponse::ListServicesResponse(list)) => {
            list.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("unexpected reflection response {other:?}"),
    }
}

/// Whether reflection finds the file that defines `symbol`.
async fn describes(channel: tonic::transport::Channel, symbol: &str) -> bool {
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    // An unknown symbol is answered with a NOT_FOUND status.
    matches!(
        reflect(channel, MessageRequest::FileContainingSymbol(symbol.into())).await,
        Ok(Some(MessageResponse::FileDescriptorResponse(files))) if !files.file_descriptor_proto.is_empty()
    )
}

async fn reflect(
    channel: tonic::transport::Channel,
    request: tonic_reflection::pb::v1::server_reflection_request::MessageRequest,
) -> Result<
    Option<tonic_reflection::pb::v1::server_reflection_response::MessageResponse>,
    tonic::Status,
> {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([ServerReflectionRequest {
            host: String::new(),
            message_request: Some(request),
        }]))
        .await
        .unwrap()
        .into_inner();
    Ok(responses.next().await.unwrap()?.message_response)
}

#[tokio::test]
async fn the_production_registry_knows_nothing_of_it() {
    let production = noema::registry::builtin().unwrap();
    let extended = noema_example_service::registry().unwrap();
    assert_eq!(
        extended.names(),
        [
            "identity",
            "ledger",
            "continuity",
            "orchestrator",
            "world",
            "example"
        ]
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("noema.toml");
    std::fs::write(
        &file,
        "[example]\ngreeting = \"hi\"\n\n[endpoints]\nexample = \"http://example:50051\"\n",
    )
    .unwrap();
    let config = ConfigLoader::new(&extended)
        .without_env()
        .file(Some(&file))
        .load()
        .unwrap();
    assert_eq!(config.endpoint("example"), Some("http://example:50051"));
    assert_eq!(
        config.settings("example").unwrap().options["greeting"],
        "hi"
    );
    let err = ConfigLoader::new(&production)
        .without_env()
        .file(Some(&file))
        .load()
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "unknown service `example`; known services: identity, ledger, continuity, orchestrator, world"
        ),
        "{err}"
    );

    // Nor does the production cluster serve or reflect it.
    let cluster = TestCluster::all_in_one(Backend::Sqlite).await.unwrap();
    assert_eq!(cluster.endpoint("example"), None);
    let channel = cluster.ledger_channel().await.unwrap();
    let names = reflected_services(channel.clone()).await;
    assert!(!names.iter().any(|n| n.contains("example")), "{names:?}");
    assert!(!describes(channel, "noema.example.v1.VisitRequest").await);
    cluster.shutdown().await.unwrap();
}

// --- the `noema-example` binary: the `noema` command line over the extended registry ------

fn noema_example() -> Command {
    let mut cmd = Command::new(NOEMA_EXAMPLE);
    for (key, _) in std::env::vars() {
        if key.starts_with("NOEMA__") {
            cmd.env_remove(key);
        }
    }
    cmd.env("RUST_LOG", "warn");
    cmd
}

fn output(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `noema-example up` on `data_dir`, once it has printed its gRPC address.
struct Up {
    child: Child,
    grpc: String,
}

impl Up {
    fn start(data_dir: &Path) -> Up {
        let mut child = noema_example()
            .args(["up", "--data-dir", data_dir.to_str().unwrap()])
            .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut grpc = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(addr) = line.strip_prefix("gRPC  ") {
                grpc = Some(format!("http://{}", addr.trim()));
                break;
            }
        }
        Up {
            child,
            grpc: grpc.expect("noema-example up printed no gRPC address"),
        }
    }

    async fn visit(&self, token: &str, name: &str) -> i64 {
        let channel = tonic::transport::Endpoint::from_shared(self.grpc.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        ExampleServiceClient::with_interceptor(channel, BearerToken::new(token).unwrap())
            .visit(VisitRequest { name: name.into() })
            .await
            .unwrap()
            .into_inner()
            .visits
    }

    /// SIGTERM; the process must drain and exit 0.
    fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "noema-example up exited with {status}");
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_command_line_lists_configures_and_migrates_it() {
    let services: serde_json::Value =
        serde_json::from_str(&output(noema_example().args(["services", "--json"]))).unwrap();
    let example = services
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "example")
        .expect("services --json lists example");
    assert_eq!(example["grpc_services"], serde_json::json!([EXAMPLE]));
    assert_eq!(example["object_store"], true);
    assert_eq!(example["calls"], serde_json::json!(["identity", "ledger"]));

    let dump = output(noema_example().args(["config", "dump"]));
    assert!(dump.contains("[example]"), "{dump}");
    assert!(dump.contains("greeting = \"hello\""), "{dump}");
    assert!(dump.contains("example = \"\""), "the endpoint: {dump}");

    let help = output(noema_example().args(["serve", "--help"]));
    // clap wraps the list of possible values at the terminal width.
    let unwrapped = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        unwrapped.contains("identity, ledger, continuity, orchestrator, world, example, gateway"),
        "{help}"
    );

    let dir = tempfile::tempdir().unwrap();
    let migrated = output(noema_example().args([
        "migrate",
        "example",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]));
    assert_eq!(migrated.trim(), "example: migrations applied (sqlite)");
    assert!(dir.path().join("example.db").is_file());
    assert!(!dir.path().join("ledger.db").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_serves_it_and_backup_restore_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let up = Up::start(&data);
    let token = std::fs::read_to_string(data.join("owner.token")).unwrap();
    let token = token.trim();
    assert_eq!(up.visit(token, "ada").await, 1);
    assert_eq!(up.visit(token, "ada").await, 2);

    // A backup taken while it runs holds the example's database and objects.
    let backup = dir.path().join("backup");
    output(noema_example().args([
        "backup",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        backup.to_str().unwrap(),
    ]));
    up.stop();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(backup.join("manifest.json")).unwrap()).unwrap();
    let paths: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"databases/example.db"), "{paths:?}");
    assert!(
        paths
            .iter()
            .any(|p| p.starts_with("example/objects/segments/")),
        "{paths:?}"
    );

    // Restored into a new data dir, the count carries on and the postcards are back.
    let restored = dir.path().join("restored");
    output(noema_example().args([
        "restore",
        "--from",
        backup.to_str().unwrap(),
        "--data-dir",
        restored.to_str().unwrap(),
    ]));
    assert!(restored.join("example/packs/segments").is_dir());
    let up = Up::start(&restored);
    assert_eq!(up.visit(token, "ada").await, 3);
    up.stop();
}

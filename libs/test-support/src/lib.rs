//! Whole Noema clusters for tests, on `127.0.0.1:0` ports and temporary directories:
//! all-in-one (one in-process node runs everything), split (one in-process node per
//! service plus a gateway node, wired only by config) or processes (every role as its
//! own `noema serve <role>` OS process), on SQLite + files or on the Postgres and
//! S3-compatible server that `scripts/test` provides.
//!
//! The services, their databases, object stores, endpoints and start order come from a
//! service registry: the production one by default, or a test's own
//! ([`ClusterBuilder::registry`], e.g. with an example service added).

mod processes;

pub use noema::Role;
pub use processes::{NOEMA_BIN_ENV, noema_bin};

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use noema::{Node, NodeError};
use noema_proto::identity::v1::IssueTokenRequest;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::config::ConfigLoader;
use noema_runtime::registry::RegistryError;
use noema_runtime::{NoemaConfig, Registry};
use noema_store::testing::TestDatabase;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Env var with an admin URL of the test Postgres server (set by `scripts/test`).
pub const DATABASE_URL_ENV: &str = "NOEMA_TEST_DATABASE_URL";
/// Env var with the `s3://` URL of the test S3-compatible server (set by `scripts/test`).
pub const S3_URL_ENV: &str = "NOEMA_TEST_S3_URL";

/// Which storage a cluster runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded default: a SQLite file per service, objects on the local disk.
    Sqlite,
    /// A fresh Postgres database per service and a fresh prefix in the S3 bucket.
    PostgresS3,
}

/// How the services are spread over nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    AllInOne,
    Split,
    /// Every role (each registered service, then the gateway) as its own `noema serve
    /// <role>` process of the built binary ([`noema_bin`], or the builder's), killed when
    /// the cluster is dropped.
    Processes,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "sqlite",
            Backend::PostgresS3 => "postgres+s3",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "{0} is not set: the Postgres/S3 tests need the servers that scripts/test starts; \
         run the suite through scripts/test (or scripts/test --backends-only CMD)"
    )]
    MissingBackend(&'static str),
    // The server's own message is the part that says what to fix: show the whole chain.
    #[error("test database: {}", cause_chain(.0))]
    Database(#[from] noema_store::DbError),
    #[error("config: {0}")]
    Config(#[from] noema_runtime::ConfigError),
    #[error("node: {0}")]
    Node(#[from] NodeError),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("connect: {0}")]
    Connect(#[from] tonic::transport::Error),
    #[error("the noema binary: {0}")]
    MissingBinary(String),
    #[error("process: {0}")]
    Process(String),
    #[error("{0}")]
    Shape(String),
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// A running cluster. Dropping it stops every node; [`TestCluster::shutdown`] also waits.
pub struct TestCluster {
    pub backend: Backend,
    pub shape: Shape,
    /// Base URL of the REST gateway, e.g. `http://127.0.0.1:41234`.
    pub rest_url: String,
    /// gRPC endpoint of every service, by name, e.g. `ledger` → `http://127.0.0.1:41235`.
    pub endpoints: BTreeMap<String, String>,
    /// gRPC endpoint of the ledger (`endpoints["ledger"]`).
    pub ledger_endpoint: String,
    /// gRPC endpoint of the identity service (`endpoints["identity"]`).
    pub identity_endpoint: String,
    /// The owner (superuser) token.
    pub owner_token: String,
    /// The services the cluster runs.
    pub registry: Registry,
    nodes: Vec<Node>,
    /// Processes shape: every service in start order, then the gateway.
    processes: Vec<processes::ServiceProcess>,
    /// The configuration the cluster was built from (storage URLs included).
    config: NoemaConfig,
    shutdown: CancellationToken,
    data_dir: TempDir,
    /// Postgres: one database per service, dropped last, after every node is down.
    _databases: Vec<TestDatabase>,
}

/// `error` and each of its sources, joined by ": ".
fn cause_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn require_env(name: &'static str) -> Result<String, ClusterError> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or(ClusterError::MissingBackend(name))
}

/// `s3://bucket[/prefix]?query` → the same with a fresh sub-prefix, so clusters never
/// see each other's objects.
fn with_fresh_prefix(s3_url: &str, tag: &str) -> String {
    let (location, query) = s3_url.split_once('?').unwrap_or((s3_url, ""));
    let location = location.trim_end_matches('/');
    let fresh = format!("{location}/{tag}-{}", uuid::Uuid::new_v4().simple());
    if query.is_empty() {
        fresh
    } else {
        format!("{fresh}?{query}")
    }
}

/// Starts a cluster of a chosen registry and binary: `TestCluster::builder(backend, shape)`.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    backend: Backend,
    shape: Shape,
    registry: Option<Registry>,
    binary: Option<PathBuf>,
    settings: Vec<(String, String)>,
}

impl ClusterBuilder {
    /// The services to run (default: the production registry).
    #[must_use]
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Processes shape: the binary to run as `<binary> serve <role>` (default:
    /// [`noema_bin`]). It must run the same registry.
    #[must_use]
    pub fn binary(mut self, path: impl Into<PathBuf>) -> Self {
        self.binary = Some(path.into());
        self
    }

    /// An extra config setting: a dotted key and a TOML literal value, e.g.
    /// `("auth.cache_ttl_secs", "2")` or `("auth.anonymous_scopes", "[\"ledger:read\"]")`.
    #[must_use]
    pub fn setting(mut self, key: &str, literal: &str) -> Self {
        self.settings.push((key.to_owned(), literal.to_owned()));
        self
    }

    pub async fn start(self) -> Result<TestCluster, ClusterError> {
        let registry = match self.registry {
            Some(registry) => registry,
            None => noema::registry::builtin()?,
        };
        TestCluster::launch(
            registry,
            self.backend,
            self.shape,
            self.binary,
            &self.settings,
        )
        .await
    }
}

impl TestCluster {
    pub async fn all_in_one(backend: Backend) -> Result<TestCluster, ClusterError> {
        Self::start(backend, Shape::AllInOne).await
    }

    pub async fn split(backend: Backend) -> Result<TestCluster, ClusterError> {
        Self::start(backend, Shape::Split).await
    }

    pub async fn start(backend: Backend, shape: Shape) -> Result<TestCluster, ClusterError> {
        Self::builder(backend, shape).start().await
    }

    /// Starts a cluster with extra config settings: dotted keys and TOML literal values,
    /// e.g. `("auth.cache_ttl_secs", "2")` or `("auth.anonymous_scopes", "[\"ledger:read\"]")`.
    pub async fn start_with(
        backend: Backend,
        shape: Shape,
        settings: &[(&str, &str)],
    ) -> Result<TestCluster, ClusterError> {
        settings
            .iter()
            .fold(Self::builder(backend, shape), |builder, (key, literal)| {
                builder.setting(key, literal)
            })
            .start()
            .await
    }

    /// A cluster to configure before starting it (its registry, binary and settings).
    pub fn builder(backend: Backend, shape: Shape) -> ClusterBuilder {
        ClusterBuilder {
            backend,
            shape,
            registry: None,
            binary: None,
            settings: Vec::new(),
        }
    }

    async fn launch(
        registry: Registry,
        backend: Backend,
        shape: Shape,
        binary: Option<PathBuf>,
        settings: &[(String, String)],
    ) -> Result<TestCluster, ClusterError> {
        let data_dir = tempfile::tempdir()?;
        let owner_token = format!("noema_test_owner_{}", uuid::Uuid::new_v4().simple());
        let mut loader = ConfigLoader::new(&registry)
            .without_env()
            .set("server.data_dir", data_dir.path().display().to_string())
            .set("server.grpc_addr", "127.0.0.1:0")
            .set("server.http_addr", "127.0.0.1:0")
            .set("server.shutdown_grace_secs", 5)
            .set(
                "auth.owner_token_sha256",
                noema_identity::token_sha256(&owner_token),
            );
        let mut databases = Vec::new();
        if backend == Backend::PostgresS3 {
            // A fresh database per service and a fresh prefix per object store.
            let admin_url = require_env(DATABASE_URL_ENV)?;
            let s3_url = require_env(S3_URL_ENV)?;
            for spec in registry.services() {
                let name = spec.name;
                let database = TestDatabase::create(&admin_url, name).await?;
                loader = loader.set(&format!("{name}.database_url"), database.url());
                databases.push(database);
                if spec.object_store.is_some() {
                    // Every service's objects in plain S3, except that with a process per
                    // service (how the split shape is deployed and benchmarked) the ledger
                    // keeps them packed: both S3 stores serve the ledger's cases.
                    let mut url = with_fresh_prefix(&s3_url, name);
                    if name == "ledger" && shape == Shape::Processes {
                        url = url.replacen("s3://", "s3+pack://", 1);
                    }
                    loader = loader.set(&format!("{name}.object_store_url"), url);
                }
            }
        }
        let mut shared = toml::Table::new();
        for (key, literal) in settings {
            let mut table: toml::Table = toml::from_str(&format!("value = {literal}"))
                .map_err(|e| ClusterError::Io(std::io::Error::other(format!("{key}: {e}"))))?;
            let value = table.remove("value").unwrap_or(toml::Value::Boolean(false));
            insert_dotted(&mut shared, key, value.clone())?;
            loader = loader.set(key, value);
        }
        let config = loader.load()?;
        let shutdown = CancellationToken::new();
        if shape == Shape::Processes {
            let bin = match binary {
                Some(bin) => bin,
                None => noema_bin()?,
            };
            let cluster = Cluster {
                registry,
                backend,
                config,
                owner_token,
                data_dir,
                databases,
            };
            return cluster.start_processes(bin, &shared).await;
        }

        let mut endpoints = BTreeMap::new();
        let nodes = match shape {
            Shape::AllInOne => {
                let node = Node::start(
                    &registry,
                    &config,
                    &Role::all(&registry),
                    shutdown.child_token(),
                )
                .await?;
                let url = format!("http://{}", bound(node.grpc_addr)?);
                for name in registry.names() {
                    endpoints.insert(name.to_owned(), url.clone());
                }
                vec![node]
            }
            Shape::Split => {
                // Each service in its own node, wired only by config, as separate pods would
                // be: in start order, each pointed at the services started before it.
                let mut wired: NoemaConfig = config.clone();
                let mut nodes = Vec::new();
                for name in registry.names() {
                    let node = Node::start(
                        &registry,
                        &wired,
                        &[Role::Service(name)],
                        shutdown.child_token(),
                    )
                    .await?;
                    let url = format!("http://{}", bound(node.grpc_addr)?);
                    wired.endpoints.insert(name.to_owned(), url.clone());
                    endpoints.insert(name.to_owned(), url);
                    nodes.push(node);
                }
                nodes.push(
                    Node::start(&registry, &wired, &[Role::Gateway], shutdown.child_token())
                        .await?,
                );
                nodes
            }
            Shape::Processes => {
                return Err(ClusterError::Shape(
                    "the processes shape starts through start_processes".into(),
                ));
            }
        };
        let http = nodes.iter().find_map(|n| n.http_addr);
        let endpoint = |name: &str| endpoints.get(name).cloned().unwrap_or_default();
        Ok(TestCluster {
            backend,
            shape,
            rest_url: format!("http://{}", bound(http)?),
            ledger_endpoint: endpoint("ledger"),
            identity_endpoint: endpoint("identity"),
            endpoints,
            owner_token,
            registry,
            nodes,
            processes: Vec::new(),
            config,
            shutdown,
            data_dir,
            _databases: databases,
        })
    }

    fn process_mut(&mut self, role: &str) -> Result<&mut processes::ServiceProcess, ClusterError> {
        let shape = self.shape;
        self.processes
            .iter_mut()
            .find(|p| p.spec.role.name() == role)
            .ok_or_else(|| {
                ClusterError::Shape(format!(
                    "a {shape:?} cluster has no {role} process; kill and restart need Shape::Processes"
                ))
            })
    }

    /// Processes shape: SIGKILLs `role`'s process (e.g. `"ledger"`; no drain, no flush) and
    /// waits until it is gone. Its peers keep their configured endpoints and see it
    /// unreachable.
    pub async fn kill(&mut self, role: &str) -> Result<(), ClusterError> {
        // SIGKILL and reaping take milliseconds; not worth a blocking-pool hop.
        self.process_mut(role)?.kill();
        Ok(())
    }

    /// Processes shape: starts `role`'s process again (after [`TestCluster::kill`]) on the
    /// same ports and storage, and waits until it has bound them.
    pub async fn restart(&mut self, role: &str) -> Result<(), ClusterError> {
        let process = self.process_mut(role)?;
        if process.is_running() {
            return Err(ClusterError::Shape(format!(
                "the {role} process is still running; kill it first"
            )));
        }
        let (spec, bound) = (process.spec.clone(), process.bound);
        let restarted = tokio::task::spawn_blocking(move || {
            processes::ServiceProcess::start(spec, Some(bound))
        })
        .await
        .map_err(|e| ClusterError::Process(e.to_string()))??;
        *process = restarted;
        Ok(())
    }

    /// Processes shape on Postgres: starts one more process of `role` on the same database
    /// and object store (its own ports, data dir and log), as a second replica of the
    /// service would run; returns its gRPC endpoint. It stops with the cluster. On SQLite
    /// a second process would have a database of its own, so that is refused.
    pub async fn start_replica(&mut self, role: &str) -> Result<String, ClusterError> {
        if self.backend != Backend::PostgresS3 {
            return Err(ClusterError::Shape(
                "replicas share a database only on Postgres".into(),
            ));
        }
        let mut spec = self.process_mut(role)?.spec.clone();
        let n = self
            .processes
            .iter()
            .filter(|p| p.spec.role.name() == role)
            .count();
        let name = format!("{role}-replica-{n}");
        for (key, value) in &mut spec.env {
            if key == "NOEMA__SERVER__DATA_DIR" {
                *value = self.data_dir.path().join(&name).display().to_string();
            }
        }
        spec.log = self.data_dir.path().join(format!("{name}.log"));
        let replica =
            tokio::task::spawn_blocking(move || processes::ServiceProcess::start(spec, None))
                .await
                .map_err(|e| ClusterError::Process(e.to_string()))??;
        let endpoint = format!("http://{}", bound(replica.bound.grpc)?);
        self.processes.push(replica);
        Ok(endpoint)
    }

    /// The configuration the cluster was built from: its storage URLs, for tests that
    /// reach under the services (outages, corruption).
    pub fn config(&self) -> &NoemaConfig {
        &self.config
    }

    /// The cluster's temporary directory (in-process shapes: `server.data_dir`; processes
    /// shape: one `<role>/` data dir per process and their logs).
    pub fn data_dir(&self) -> &std::path::Path {
        self.data_dir.path()
    }

    /// Processes shape: the logs (stderr) of every start of `role`'s process so far.
    pub fn process_log(&self, role: &str) -> String {
        std::fs::read_to_string(self.data_dir.path().join(format!("{role}.log")))
            .unwrap_or_default()
    }

    /// Processes shape: where `role`'s process serves `/metrics`.
    pub fn metrics_url(&self, role: &str) -> Option<String> {
        self.processes
            .iter()
            .find(|p| p.spec.role.name() == role)
            .and_then(|p| p.bound.metrics)
            .map(|a| format!("http://{a}/metrics"))
    }

    /// A gRPC client of the ledger whose calls carry `token`.
    pub async fn ledger_as(&self, token: &str) -> Result<LedgerClient, ClusterError> {
        Ok(LedgerServiceClient::with_interceptor(
            self.ledger_channel().await?,
            BearerToken::new(token)?,
        ))
    }

    /// A gRPC client of the ledger acting as the owner.
    pub async fn ledger(&self) -> Result<LedgerClient, ClusterError> {
        self.ledger_as(&self.owner_token).await
    }

    /// A gRPC client of the identity service whose calls carry `token`.
    pub async fn identity_as(&self, token: &str) -> Result<IdentityClient, ClusterError> {
        Ok(IdentityServiceClient::with_interceptor(
            connect(&self.identity_endpoint).await?,
            BearerToken::new(token)?,
        ))
    }

    /// A gRPC client of the identity service acting as the owner.
    pub async fn identity(&self) -> Result<IdentityClient, ClusterError> {
        self.identity_as(&self.owner_token).await
    }

    /// A plain channel to the ledger's gRPC server (health, reflection, raw calls).
    pub async fn ledger_channel(&self) -> Result<Channel, ClusterError> {
        connect(&self.ledger_endpoint).await
    }

    /// The gRPC endpoint of the registered service `name` (e.g. `ledger`).
    pub fn endpoint(&self, name: &str) -> Option<&str> {
        self.endpoints.get(name).map(String::as_str)
    }

    /// The gRPC endpoint serving `service` (a fully qualified name such as
    /// `noema.ledger.v1.LedgerService`), or `None` for a service this cluster lacks.
    pub fn endpoint_of(&self, service: &str) -> Option<&str> {
        self.endpoint(self.registry.hosting(service)?.name)
    }

    /// A plain channel to `endpoint`.
    pub async fn channel(&self, endpoint: &str) -> Result<Channel, ClusterError> {
        connect(endpoint).await
    }

    /// A plain channel to the identity service's gRPC server.
    pub async fn identity_channel(&self) -> Result<Channel, ClusterError> {
        connect(&self.identity_endpoint).await
    }

    /// Issues a token with exactly `scopes` for `peer_id`, as the owner; returns the secret.
    pub async fn issue_token(
        &self,
        peer_id: &str,
        scopes: &[&str],
    ) -> Result<String, ClusterError> {
        let mut identity = self.identity().await?;
        let response = identity
            .issue_token(IssueTokenRequest {
                peer_id: peer_id.to_owned(),
                scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
                ..IssueTokenRequest::default()
            })
            .await
            .map_err(|s| ClusterError::Io(std::io::Error::other(s.to_string())))?;
        Ok(response.into_inner().token)
    }

    /// Stops every node (NOT_SERVING, drain) and waits for them. Processes get SIGTERM,
    /// the gateway first, and must exit 0.
    pub async fn shutdown(mut self) -> Result<(), ClusterError> {
        self.shutdown.cancel();
        for node in self.nodes.drain(..) {
            node.wait().await?;
        }
        let mut processes = std::mem::take(&mut self.processes);
        tokio::task::spawn_blocking(move || {
            let mut first_error = None;
            while let Some(mut process) = processes.pop() {
                if let Err(err) = process.terminate() {
                    first_error.get_or_insert(err);
                }
            }
            first_error.map_or(Ok(()), Err)
        })
        .await
        .map_err(|e| ClusterError::Process(e.to_string()))?
    }
}

/// A configured cluster not started yet (processes shape).
struct Cluster {
    registry: Registry,
    backend: Backend,
    config: NoemaConfig,
    owner_token: String,
    data_dir: TempDir,
    databases: Vec<TestDatabase>,
}

impl Cluster {
    /// The processes shape: every service in start order, each pointed at the services it
    /// calls, then the gateway (pointed at every service). Each process gets only its own
    /// settings, as its pod would.
    async fn start_processes(
        self,
        bin: PathBuf,
        shared: &toml::Table,
    ) -> Result<TestCluster, ClusterError> {
        let Cluster {
            registry,
            backend,
            config,
            owner_token,
            data_dir,
            databases,
        } = self;
        let config_file = if shared.is_empty() {
            None
        } else {
            let path = data_dir.path().join("shared-settings.toml");
            let text = toml::to_string(shared)
                .map_err(|e| ClusterError::Io(std::io::Error::other(e.to_string())))?;
            std::fs::write(&path, text)?;
            Some(path)
        };
        let spec = |role: Role, mut env: Vec<(String, String)>| {
            let dir = data_dir.path().join(role.name());
            let mut all = vec![
                ("NOEMA__SERVER__DATA_DIR".into(), dir.display().to_string()),
                ("NOEMA__SERVER__SHUTDOWN_GRACE_SECS".into(), "5".into()),
                (
                    "NOEMA__AUTH__OWNER_TOKEN_SHA256".into(),
                    config.auth.owner_token_sha256.clone(),
                ),
                // As the Helm chart names them, so traces tell the processes apart.
                (
                    "NOEMA__TELEMETRY__SERVICE_NAME".into(),
                    format!("noema-{role}"),
                ),
            ];
            all.append(&mut env);
            processes::ProcessSpec {
                role,
                bin: bin.clone(),
                env: all,
                config_file: config_file.clone(),
                log: data_dir.path().join(format!("{role}.log")),
            }
        };
        let start = |spec: processes::ProcessSpec| async move {
            tokio::task::spawn_blocking(move || processes::ServiceProcess::start(spec, None))
                .await
                .map_err(|e| ClusterError::Process(e.to_string()))?
        };
        let endpoint_env = |name: &str, url: &str| {
            (
                format!("NOEMA__ENDPOINTS__{}", name.to_ascii_uppercase()),
                url.to_owned(),
            )
        };

        let mut endpoints: BTreeMap<String, String> = BTreeMap::new();
        let mut started = Vec::new();
        for service in registry.services() {
            let section = service.name.to_ascii_uppercase();
            let mut env = Vec::new();
            // Storage from the in-process config (fresh Postgres databases and S3 prefixes),
            // or the SQLite default under each process's own data dir.
            if backend == Backend::PostgresS3 {
                env.push((
                    format!("NOEMA__{section}__DATABASE_URL"),
                    config.database_url(service),
                ));
                if let Some(url) = config.object_store_url(service) {
                    env.push((format!("NOEMA__{section}__OBJECT_STORE_URL"), url));
                }
            }
            for peer in registry.calls(service) {
                let url = endpoints.get(peer).ok_or_else(|| {
                    ClusterError::Shape(format!("{} starts before its peer {peer}", service.name))
                })?;
                env.push(endpoint_env(peer, url));
            }
            let process = start(spec(Role::Service(service.name), env)).await?;
            let url = format!("http://{}", bound(process.bound.grpc)?);
            endpoints.insert(service.name.to_owned(), url);
            started.push(process);
        }
        let gateway_env = endpoints
            .iter()
            .map(|(name, url)| endpoint_env(name, url))
            .collect();
        let gateway = start(spec(Role::Gateway, gateway_env)).await?;
        let rest_url = format!("http://{}", bound(gateway.bound.http)?);
        started.push(gateway);
        let endpoint = |name: &str| endpoints.get(name).cloned().unwrap_or_default();
        Ok(TestCluster {
            backend,
            shape: Shape::Processes,
            rest_url,
            ledger_endpoint: endpoint("ledger"),
            identity_endpoint: endpoint("identity"),
            endpoints,
            owner_token,
            registry,
            nodes: Vec::new(),
            processes: started,
            config,
            shutdown: CancellationToken::new(),
            data_dir,
            _databases: databases,
        })
    }
}

async fn connect(endpoint: &str) -> Result<Channel, ClusterError> {
    Ok(Channel::from_shared(endpoint.to_owned())
        .map_err(|e| ClusterError::Io(std::io::Error::other(e.to_string())))?
        .connect()
        .await?)
}

/// Adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct BearerToken(MetadataValue<Ascii>);

impl BearerToken {
    pub fn new(token: &str) -> Result<Self, ClusterError> {
        format!("Bearer {token}")
            .parse()
            .map(BearerToken)
            .map_err(|_| ClusterError::Io(std::io::Error::other("token is not valid ASCII")))
    }
}

impl Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

pub type LedgerClient = LedgerServiceClient<InterceptedService<Channel, BearerToken>>;
pub type IdentityClient = IdentityServiceClient<InterceptedService<Channel, BearerToken>>;

/// Sets `a.b.c = value` in a nested TOML table.
fn insert_dotted(
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> Result<(), ClusterError> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut current = table;
    for part in parts {
        let entry = current
            .entry(part.to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = match entry {
            toml::Value::Table(inner) => inner,
            _ => {
                return Err(ClusterError::Shape(format!(
                    "setting {key}: {part} is not a table"
                )));
            }
        };
    }
    current.insert(last.to_owned(), value);
    Ok(())
}

fn bound(addr: Option<SocketAddr>) -> Result<SocketAddr, ClusterError> {
    addr.ok_or_else(|| ClusterError::Io(std::io::Error::other("node bound no address")))
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
        // Processes are SIGKILLed by their own Drop: a failing test leaves nothing behind.
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn dotted_settings_nest() {
        let mut table = toml::Table::new();
        super::insert_dotted(&mut table, "auth.cache_ttl_secs", toml::Value::Integer(2)).unwrap();
        super::insert_dotted(
            &mut table,
            "auth.anonymous_scopes",
            toml::Value::Array(vec![]),
        )
        .unwrap();
        let text = toml::to_string(&table).unwrap();
        assert!(text.contains("[auth]"), "{text}");
        assert!(text.contains("cache_ttl_secs = 2"), "{text}");
    }

    #[test]
    fn fresh_prefixes_keep_the_query() {
        let url = super::with_fresh_prefix("s3://b?endpoint=http://x:1&region=r", "ledger");
        assert!(url.starts_with("s3://b/ledger-"), "{url}");
        assert!(url.ends_with("?endpoint=http://x:1&region=r"), "{url}");
        let url = super::with_fresh_prefix("s3://b/base/", "t");
        assert!(url.starts_with("s3://b/base/t-"), "{url}");
    }
}

//! Starts a set of roles in this process from one configuration. `noema up`, `noema
//! serve` and the test clusters all go through here, so every shape runs the same code.
//! Which services exist, what they need and how they are built comes from the [`Registry`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use noema_runtime::auth::{AuthLayer, Authenticator, RemoteAuthenticator};
use noema_runtime::client::{ClientOptions, channel};
use noema_runtime::registry::{ServiceContext, ServiceSpec, TokenAuthority};
use noema_runtime::{GrpcServer, NoemaConfig, Registry};
use noema_store::{Database, DbOptions, ObjectStore};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::role::Role;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Config(#[from] noema_runtime::ConfigError),
    #[error("cannot listen on {setting} {addr}: {source}")]
    Bind {
        setting: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("{setting}: {source}")]
    Database {
        setting: String,
        source: noema_store::DbError,
    },
    #[error("{setting}: {source}")]
    ObjectStore {
        setting: String,
        source: noema_store::ObjectError,
    },
    #[error("starting the {service} service: {reason}")]
    Service {
        service: &'static str,
        reason: String,
    },
    #[error("{0} is not a registered service")]
    UnknownService(String),
    #[error("no registered service checks tokens (a token authority such as identity)")]
    NoTokenAuthority,
    #[error("endpoints.{service} must be set when this process does not run the {service} service")]
    MissingEndpoint { service: &'static str },
    #[error(transparent)]
    Client(#[from] noema_runtime::client::ClientError),
    #[error(transparent)]
    Grpc(#[from] noema_runtime::server::ServerError),
    #[error("REST gateway failed: {0}")]
    Http(std::io::Error),
    #[error("owner token file {path}: {reason}")]
    OwnerToken {
        path: std::path::PathBuf,
        reason: String,
    },
    #[error("a server task panicked: {0}")]
    Panicked(String),
}

/// A running process: its bound addresses and its server tasks.
pub struct Node {
    pub grpc_addr: Option<SocketAddr>,
    pub http_addr: Option<SocketAddr>,
    /// Where this process serves `/metrics` on its own listener (`server.metrics_addr`).
    pub metrics_addr: Option<SocketAddr>,
    /// The owner token, when this start created it (embedded default, first start only).
    pub created_owner_token: Option<String>,
    shutdown: CancellationToken,
    tasks: JoinSet<Result<(), NodeError>>,
}

impl Node {
    /// Starts `roles` (of `registry`) and returns once every listener is bound and every
    /// service built. Cancel `shutdown` to stop; then [`Node::wait`] returns after draining.
    pub async fn start(
        registry: &Registry,
        config: &NoemaConfig,
        roles: &[Role],
        shutdown: CancellationToken,
    ) -> Result<Node, NodeError> {
        let roles: BTreeSet<Role> = roles.iter().copied().collect();
        for role in &roles {
            if let Role::Service(name) = role
                && registry.get(name).is_none()
            {
                return Err(NodeError::UnknownService((*name).to_owned()));
            }
        }
        // In start order, so that a service's peers are built before it.
        let hosted: Vec<&ServiceSpec> = registry
            .services()
            .filter(|spec| roles.contains(&Role::Service(spec.name)))
            .collect();
        let hosts = |name: &str| hosted.iter().any(|spec| spec.name == name);
        let grace = Duration::from_secs(config.server.shutdown_grace_secs);
        let cache_ttl = Duration::from_secs(config.auth.cache_ttl_secs);
        let mut tasks = JoinSet::new();

        let mut grpc_addr = None;
        let mut created_owner_token = None;
        let mut local_service = None;
        if !hosted.is_empty() {
            let addr = config.grpc_addr()?;
            let listener = bind("server.grpc_addr", addr).await?;
            grpc_addr = listener.local_addr().ok();
            let own = grpc_addr.map(|a| format!("http://{a}"));
            let endpoint_of =
                |name: &'static str| endpoint(config, name, hosts(name), own.as_deref());

            let mut storages = Vec::new();
            for spec in &hosted {
                storages.push((*spec, Box::pin(open_storage(spec, config)).await?));
            }
            let (authenticator, created) =
                authenticator(registry, &storages, config, &endpoint_of).await?;
            created_owner_token = created;
            if !config.auth.anonymous_scopes.is_empty() {
                tracing::warn!(
                    scopes = ?config.auth.anonymous_scopes,
                    "ANONYMOUS ACCESS IS ON: requests without a token get these scopes \
                     (auth.anonymous_scopes); use this only on a loopback dev instance"
                );
            }
            let mut server = GrpcServer::new(AuthLayer::new(
                authenticator,
                config.auth.anonymous_scopes.clone(),
            ));
            let mut readiness = Vec::new();
            for (spec, storage) in storages {
                let mut peers = BTreeMap::new();
                for peer in spec.peers {
                    let channel = channel(peer, &endpoint_of(peer)?, ClientOptions::default())?;
                    peers.insert(*peer, channel);
                }
                let context = ServiceContext {
                    name: spec.name,
                    db: storage.db.clone(),
                    objects: storage.objects.clone(),
                    peers,
                    cache_ttl,
                    options: config.options(spec),
                    data_dir: config.server.data_dir.clone(),
                };
                Box::pin(add_service(&mut server, spec, context)).await?;
                readiness.push((spec, storage));
            }
            let health = server.health();
            let interval = Duration::from_millis(config.server.readiness_interval_ms);
            for (spec, storage) in readiness {
                tasks.spawn(watch_readiness(
                    spec.name,
                    spec.grpc_services,
                    storage,
                    interval,
                    health.clone(),
                    shutdown.clone(),
                ));
            }
            local_service = Some(server.local_service());
            tracing::info!(addr = ?grpc_addr, services = ?server.service_names(), "gRPC listening");
            let token = shutdown.clone();
            tasks.spawn(async move {
                server
                    .serve(listener, token, grace)
                    .await
                    .map_err(NodeError::from)
            });
        }

        let mut metrics_addr = None;
        if !config.server.metrics_addr.is_empty() {
            let addr = parse_metrics_addr(&config.server.metrics_addr)?;
            let listener = bind("server.metrics_addr", addr).await?;
            metrics_addr = listener.local_addr().ok();
            let token = shutdown.clone();
            tasks.spawn(async move {
                noema_runtime::metrics::serve(listener, token)
                    .await
                    .map_err(NodeError::Http)
            });
        }

        let mut http_addr = None;
        if roles.contains(&Role::Gateway) {
            let own = grpc_addr.map(|a| format!("http://{a}"));
            let mut upstreams = Vec::new();
            for spec in registry.services() {
                // A service that has no endpoint and does not run here is not deployed (the
                // Helm chart's `enabled: false`): the gateway does not front it, and its
                // routes answer 503 naming it.
                if config.endpoint(spec.name).is_none() && !hosts(spec.name) {
                    tracing::warn!(
                        service = spec.name,
                        "no endpoint for this service: the gateway does not front it (its routes answer 503); set endpoints.{} to front it",
                        spec.name
                    );
                    continue;
                }
                upstreams.push(noema_gateway::Upstream {
                    name: spec.name,
                    endpoint: endpoint(config, spec.name, hosts(spec.name), own.as_deref())?,
                    grpc_services: spec.grpc_services,
                    // Only services this process serves, and only where no endpoint was set
                    // explicitly (an operator's endpoint wins).
                    in_process: hosts(spec.name) && config.endpoint(spec.name).is_none(),
                });
            }
            let gateway_config = noema_gateway::GatewayConfig {
                upstreams,
                request_timeout: Duration::from_secs(config.gateway.request_timeout_secs),
                max_body_bytes: config.gateway.max_body_bytes,
                anonymous_scopes: config.auth.anonymous_scopes.clone(),
                token_cache_ttl: Duration::from_secs(config.auth.cache_ttl_secs),
            };
            let state =
                noema_gateway::GatewayState::connect(&gateway_config, local_service.as_ref())?;
            let router = noema_gateway::router(state, &gateway_config);
            let listener = bind("server.http_addr", config.http_addr()?).await?;
            http_addr = listener.local_addr().ok();
            let token = shutdown.clone();
            tasks.spawn(async move {
                noema_gateway::serve(listener, router, token)
                    .await
                    .map_err(NodeError::Http)
            });
        }

        Ok(Node {
            grpc_addr,
            http_addr,
            metrics_addr,
            created_owner_token,
            shutdown,
            tasks,
        })
    }

    /// Starts shutdown: NOT_SERVING, stop accepting, drain.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Waits until every server task has ended. If one fails, the others are stopped
    /// and the first error is returned.
    pub async fn wait(mut self) -> Result<(), NodeError> {
        let mut first_error = None;
        while let Some(joined) = self.tasks.join_next().await {
            let result = joined.unwrap_or_else(|e| Err(NodeError::Panicked(e.to_string())));
            if let Err(err) = result {
                self.shutdown.cancel();
                first_error.get_or_insert(err);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

fn parse_metrics_addr(text: &str) -> Result<SocketAddr, NodeError> {
    text.parse().map_err(|_| {
        NodeError::Config(noema_runtime::ConfigError::Invalid {
            setting: "server.metrics_addr".into(),
            reason: format!("{text:?} is not a socket address like 0.0.0.0:9090"),
        })
    })
}

async fn bind(setting: &'static str, addr: SocketAddr) -> Result<TcpListener, NodeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| NodeError::Bind {
            setting,
            addr,
            source,
        })
}

/// The configured endpoint of `service`, or this process's own gRPC address when it hosts it.
fn endpoint(
    config: &NoemaConfig,
    service: &'static str,
    hosted_here: bool,
    own: Option<&str>,
) -> Result<String, NodeError> {
    if let Some(configured) = config.endpoint(service) {
        return Ok(configured.to_owned());
    }
    match own {
        Some(own) if hosted_here => Ok(own.to_owned()),
        _ => Err(NodeError::MissingEndpoint { service }),
    }
}

/// How this process's services check tokens: through the token authority's own database
/// when this process hosts it (bootstrapping the owner token, which is returned when this
/// start created it), else by asking it over gRPC.
async fn authenticator(
    registry: &Registry,
    storages: &[(&ServiceSpec, Storage)],
    config: &NoemaConfig,
    endpoint_of: &dyn Fn(&'static str) -> Result<String, NodeError>,
) -> Result<(Arc<dyn Authenticator>, Option<String>), NodeError> {
    let cache_ttl = Duration::from_secs(config.auth.cache_ttl_secs);
    let (spec, authority) = registry
        .token_authority()
        .ok_or(NodeError::NoTokenAuthority)?;
    let local = storages
        .iter()
        .find(|(hosted, _)| hosted.name == spec.name)
        .map(|(_, storage)| storage.db.clone());
    match local {
        Some(db) => {
            let created = bootstrap_owner(spec.name, authority, &db, config).await?;
            Ok((authority.local_authenticator(db, cache_ttl), created))
        }
        None => {
            let endpoint = endpoint_of(spec.name)?;
            let channel = channel(spec.name, &endpoint, ClientOptions::default())?;
            Ok((Arc::new(RemoteAuthenticator::new(channel, cache_ttl)), None))
        }
    }
}

/// A service's opened and migrated storage; its readiness depends on both.
struct Storage {
    db: Database,
    objects: Option<Arc<dyn ObjectStore>>,
}

impl Storage {
    async fn ready(&self) -> bool {
        let db_ok = self.db.ping().await.is_ok();
        let objects_ok = match &self.objects {
            Some(store) => store.check().await.is_ok(),
            None => true,
        };
        db_ok && objects_ok
    }
}

/// Connects to `spec`'s database and applies its migrations.
async fn open_database(spec: &ServiceSpec, config: &NoemaConfig) -> Result<Database, NodeError> {
    let setting = format!("{}.database_url", spec.name);
    let options = DbOptions {
        max_connections: config.max_connections(spec),
        ..DbOptions::default()
    };
    let db = Database::connect_with(&config.database_url(spec), &options)
        .await
        .map_err(|source| NodeError::Database {
            setting: setting.clone(),
            source,
        })?;
    db.migrate(spec.migrations)
        .await
        .map_err(|source| NodeError::Database { setting, source })?;
    Ok(db)
}

/// Opens and migrates `spec`'s database and opens its object store.
async fn open_storage(spec: &ServiceSpec, config: &NoemaConfig) -> Result<Storage, NodeError> {
    let db = open_database(spec, config).await?;
    let objects = match config.object_store_url(spec) {
        Some(url) => Some(crate::instrumented::InstrumentedObjectStore::wrap(
            noema_store::object::open_with_database(&url, &db)
                .await
                .map_err(|source| NodeError::ObjectStore {
                    setting: format!("{}.object_store_url", spec.name),
                    source,
                })?,
            spec.name,
        )),
        None => None,
    };
    Ok(Storage { db, objects })
}

fn service_error(service: &'static str, err: &dyn std::error::Error) -> NodeError {
    NodeError::Service {
        service,
        reason: noema_core::ErrorChain(err).to_string(),
    }
}

/// Builds `spec`'s services from `context` and hosts them on `server`. What it builds must
/// be what its spec declares, since health, readiness and reflection go by the spec.
async fn add_service(
    server: &mut GrpcServer,
    spec: &ServiceSpec,
    context: ServiceContext,
) -> Result<(), NodeError> {
    let hosted = (spec.build)(context)
        .await
        .map_err(|e| service_error(spec.name, &e))?;
    let built: BTreeSet<&str> = hosted.names().iter().copied().collect();
    let declared: BTreeSet<&str> = spec.grpc_services.iter().copied().collect();
    if built != declared {
        return Err(NodeError::Service {
            service: spec.name,
            reason: format!("it built {built:?} but its spec declares {declared:?}"),
        });
    }
    server.add_descriptors(spec.descriptors);
    hosted.add_to(server);
    Ok(())
}

/// Makes sure an owner token exists: `auth.owner_token_sha256` when configured (split
/// shape, from a secret), else `<data_dir>/owner.token`, created with mode 0600 on first
/// start. Returns the token when this call created it, so it can be shown once.
async fn bootstrap_owner(
    service: &'static str,
    authority: &dyn TokenAuthority,
    db: &Database,
    config: &NoemaConfig,
) -> Result<Option<String>, NodeError> {
    let configured = &config.auth.owner_token_sha256;
    let (sha256, created) = if configured.is_empty() {
        let path = config.owner_token_path();
        match tokio::fs::read_to_string(&path).await {
            Ok(text) if !text.trim().is_empty() => (authority.token_sha256(text.trim()), None),
            Ok(_) => {
                return Err(NodeError::OwnerToken {
                    path,
                    reason: "the file is empty".into(),
                });
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let secret = authority
                    .new_secret()
                    .map_err(|e| service_error(service, &e))?;
                write_secret_file(&path, &secret).await?;
                (authority.token_sha256(&secret), Some(secret))
            }
            Err(err) => {
                return Err(NodeError::OwnerToken {
                    path,
                    reason: err.to_string(),
                });
            }
        }
    } else {
        (configured.clone(), None)
    };
    authority
        .ensure_owner(db, &sha256)
        .await
        .map_err(|e| service_error(service, &e))?;
    Ok(created)
}

/// Writes `secret` to `path` readable by the owner only, durably.
async fn write_secret_file(path: &std::path::Path, secret: &str) -> Result<(), NodeError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path_buf = path.to_path_buf();
    let secret = format!("{secret}\n");
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        if let Some(dir) = path_buf.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path_buf)?;
        file.write_all(secret.as_bytes())?;
        file.sync_all()
    })
    .await
    .map_err(|e| NodeError::OwnerToken {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?
    .map_err(|e| NodeError::OwnerToken {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Publishes the pool's connection counts, labelled with the service's name.
fn record_pool(service: &str, db: &Database) {
    let (open, idle) = db.pool_stats();
    if let Some(m) = noema_runtime::metrics::global() {
        let idle = i64::try_from(idle).unwrap_or(i64::MAX);
        m.db_pool_connections
            .with_label_values(&[service, "idle"])
            .set(idle);
        m.db_pool_connections
            .with_label_values(&[service, "in_use"])
            .set(i64::from(open).saturating_sub(idle));
    }
}

/// Reports every gRPC service of `service` NOT_SERVING while its storage is unreachable,
/// SERVING when it is back.
async fn watch_readiness(
    service: &'static str,
    grpc_services: &'static [&'static str],
    storage: Storage,
    interval: Duration,
    health: HealthReporter,
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    let mut was_ready = true;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(interval) => {}
        }
        record_pool(service, &storage.db);
        let ready = storage.ready().await;
        if ready != was_ready && !shutdown.is_cancelled() {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            tracing::warn!(service, ready, "readiness changed");
            for name in grpc_services {
                health.set_service_status(*name, status).await;
            }
            was_ready = ready;
        }
    }
}

/// Applies `role`'s migrations and returns its backend, or `None` for a role without a
/// database (the gateway). Concurrent runs are safe (Postgres advisory lock).
pub async fn migrate(
    registry: &Registry,
    config: &NoemaConfig,
    role: Role,
) -> Result<Option<noema_store::Backend>, NodeError> {
    let Role::Service(name) = role else {
        return Ok(None);
    };
    let spec = registry
        .get(name)
        .ok_or_else(|| NodeError::UnknownService(name.to_owned()))?;
    let db = open_database(spec, config).await?;
    let backend = db.backend();
    db.close().await;
    Ok(Some(backend))
}

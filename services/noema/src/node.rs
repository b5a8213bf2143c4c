//! Starts a set of roles in this process from one configuration. `noema up`, `noema
//! serve` and the test clusters all go through here, so every shape runs the same code.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use noema_runtime::auth::{AuthLayer, RemoteAuthenticator};
use noema_runtime::client::{ClientOptions, channel};
use noema_runtime::{GrpcServer, NoemaConfig};
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
    /// Starts `roles` and returns once every listener is bound and every service built.
    /// Cancel `shutdown` to stop; then [`Node::wait`] returns after draining.
    pub async fn start(
        config: &NoemaConfig,
        roles: &[Role],
        shutdown: CancellationToken,
    ) -> Result<Node, NodeError> {
        let roles: BTreeSet<Role> = roles.iter().copied().collect();
        let grace = Duration::from_secs(config.server.shutdown_grace_secs);
        let mut tasks = JoinSet::new();

        let grpc_roles: Vec<Role> = roles
            .iter()
            .copied()
            .filter(|r| r.is_grpc_service())
            .collect();
        let mut grpc_addr = None;
        let mut created_owner_token = None;
        let mut local_service = None;
        if !grpc_roles.is_empty() {
            let addr = config.grpc_addr()?;
            let listener = bind("server.grpc_addr", addr).await?;
            grpc_addr = listener.local_addr().ok();
            let own = grpc_addr.map(|a| format!("http://{a}"));

            let mut storages = Vec::new();
            for role in &grpc_roles {
                storages.push((*role, Box::pin(open_storage(*role, config)).await?));
            }
            let identity_db = storages
                .iter()
                .find(|(role, _)| *role == Role::Identity)
                .map(|(_, storage)| storage.db.clone());
            let authenticator = match &identity_db {
                Some(db) => {
                    created_owner_token = bootstrap_owner(db, config).await?;
                    noema_identity::local_authenticator(
                        db.clone(),
                        Duration::from_secs(config.auth.cache_ttl_secs),
                    )
                }
                None => {
                    let endpoint = endpoint(
                        &config.endpoints.identity,
                        &roles,
                        Role::Identity,
                        own.as_deref(),
                    )?;
                    let channel = channel("identity", &endpoint, ClientOptions::default())?;
                    Arc::new(RemoteAuthenticator::new(
                        channel,
                        Duration::from_secs(config.auth.cache_ttl_secs),
                    ))
                }
            };
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
            let peers = Peers {
                identity: endpoint(
                    &config.endpoints.identity,
                    &roles,
                    Role::Identity,
                    own.as_deref(),
                )?,
                key_cache_ttl: Duration::from_secs(config.auth.cache_ttl_secs),
            };
            let mut readiness = Vec::new();
            for (role, storage) in storages {
                readiness.push(Box::pin(add_service(&mut server, role, storage, &peers)).await?);
            }
            let health = server.health();
            let interval = Duration::from_millis(config.server.readiness_interval_ms);
            for (name, probe) in readiness {
                tasks.spawn(watch_readiness(
                    name,
                    probe,
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
            let gateway_config = noema_gateway::GatewayConfig {
                identity_endpoint: endpoint(
                    &config.endpoints.identity,
                    &roles,
                    Role::Identity,
                    own.as_deref(),
                )?,
                ledger_endpoint: endpoint(
                    &config.endpoints.ledger,
                    &roles,
                    Role::Ledger,
                    own.as_deref(),
                )?,
                request_timeout: Duration::from_secs(config.gateway.request_timeout_secs),
                max_body_bytes: config.gateway.max_body_bytes,
            };
            let mut state = noema_gateway::GatewayState::connect(&gateway_config)?;
            if let Some(local) = &local_service {
                // Only services this process serves, and only where no endpoint was set
                // explicitly (an operator's endpoint wins).
                state = state.in_process(
                    local,
                    roles.contains(&Role::Identity) && config.endpoints.identity.is_empty(),
                    roles.contains(&Role::Ledger) && config.endpoints.ledger.is_empty(),
                    &gateway_config,
                );
            }
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
    configured: &str,
    roles: &BTreeSet<Role>,
    service: Role,
    own: Option<&str>,
) -> Result<String, NodeError> {
    if !configured.is_empty() {
        return Ok(configured.to_owned());
    }
    match own {
        Some(own) if roles.contains(&service) => Ok(own.to_owned()),
        _ => Err(NodeError::MissingEndpoint {
            service: service.name(),
        }),
    }
}

/// What a service's readiness depends on.
struct ReadinessProbe {
    db: Database,
    objects: Option<Arc<dyn ObjectStore>>,
}

impl ReadinessProbe {
    async fn ready(&self) -> bool {
        let db_ok = self.db.ping().await.is_ok();
        let objects_ok = match &self.objects {
            Some(store) => store.check().await.is_ok(),
            None => true,
        };
        db_ok && objects_ok
    }
}

/// A gRPC role's opened and migrated storage.
struct Storage {
    db: Database,
    objects: Option<Arc<dyn ObjectStore>>,
}

/// Where a role's settings live and what its schema is.
struct StorageSpec {
    section: &'static str,
    database_url: String,
    max_connections: u32,
    migrations: &'static noema_store::Migrations,
    object_store_url: Option<String>,
}

fn storage_spec(role: Role, config: &NoemaConfig) -> Option<StorageSpec> {
    match role {
        Role::Identity => Some(StorageSpec {
            section: "identity",
            database_url: config.identity_database_url(),
            max_connections: config.identity.max_connections,
            migrations: &noema_identity::MIGRATIONS,
            object_store_url: None,
        }),
        Role::Ledger => Some(StorageSpec {
            section: "ledger",
            database_url: config.ledger_database_url(),
            max_connections: config.ledger.max_connections,
            migrations: &noema_ledger::MIGRATIONS,
            object_store_url: Some(config.ledger_object_store_url()),
        }),
        Role::Gateway => None,
    }
}

async fn open_database(spec: &StorageSpec) -> Result<Database, NodeError> {
    let setting = format!("{}.database_url", spec.section);
    let options = DbOptions {
        max_connections: spec.max_connections,
        ..DbOptions::default()
    };
    let db = Database::connect_with(&spec.database_url, &options)
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

/// Opens and migrates `role`'s database and opens its object store.
async fn open_storage(role: Role, config: &NoemaConfig) -> Result<Storage, NodeError> {
    let spec = storage_spec(role, config).ok_or(NodeError::Service {
        service: role.name(),
        reason: "it is not a gRPC service".into(),
    })?;
    let db = open_database(&spec).await?;
    let objects = match &spec.object_store_url {
        Some(url) => Some(crate::instrumented::InstrumentedObjectStore::wrap(
            noema_store::object::open(url)
                .await
                .map_err(|source| NodeError::ObjectStore {
                    setting: format!("{}.object_store_url", spec.section),
                    source,
                })?,
            spec.section,
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

/// How a service reaches the services it calls.
struct Peers {
    identity: String,
    key_cache_ttl: Duration,
}

/// Hosts `role`'s gRPC service on `server` over its storage.
async fn add_service(
    server: &mut GrpcServer,
    role: Role,
    storage: Storage,
    peers: &Peers,
) -> Result<(&'static str, ReadinessProbe), NodeError> {
    let name = match role {
        Role::Identity => {
            let service = noema_identity::service(storage.db.clone())
                .await
                .map_err(|e| service_error("identity", &e))?;
            server.add_service(service);
            server.add_service(noema_identity::diary_service(storage.db.clone()));
            noema_identity::SERVICE_NAME
        }
        Role::Ledger => {
            let objects = storage.objects.clone().ok_or(NodeError::Service {
                service: "ledger",
                reason: "no object store configured".into(),
            })?;
            let deps = noema_ledger::Dependencies {
                objects,
                identity: channel("identity", &peers.identity, ClientOptions::default())?,
                key_cache_ttl: peers.key_cache_ttl,
            };
            let service = noema_ledger::service(storage.db.clone(), deps)
                .await
                .map_err(|e| service_error("ledger", &e))?;
            server.add_service(service);
            noema_ledger::SERVICE_NAME
        }
        Role::Gateway => {
            return Err(NodeError::Service {
                service: "gateway",
                reason: "the gateway is not a gRPC service".into(),
            });
        }
    };
    Ok((
        name,
        ReadinessProbe {
            db: storage.db,
            objects: storage.objects,
        },
    ))
}

/// Makes sure an owner token exists: `auth.owner_token_sha256` when configured (split
/// shape, from a secret), else `<data_dir>/owner.token`, created with mode 0600 on first
/// start. Returns the token when this call created it, so it can be shown once.
async fn bootstrap_owner(db: &Database, config: &NoemaConfig) -> Result<Option<String>, NodeError> {
    let configured = &config.auth.owner_token_sha256;
    let (sha256, created) = if configured.is_empty() {
        let path = config.owner_token_path();
        match tokio::fs::read_to_string(&path).await {
            Ok(text) if !text.trim().is_empty() => {
                (noema_identity::token_sha256(text.trim()), None)
            }
            Ok(_) => {
                return Err(NodeError::OwnerToken {
                    path,
                    reason: "the file is empty".into(),
                });
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let secret =
                    noema_identity::generate_secret().map_err(|e| service_error("identity", &e))?;
                write_secret_file(&path, &secret).await?;
                (noema_identity::token_sha256(&secret), Some(secret))
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
    noema_identity::ensure_owner_token(db.clone(), &sha256)
        .await
        .map_err(|e| service_error("identity", &e))?;
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

/// Reports the service NOT_SERVING while its storage is unreachable, SERVING when it is back.
/// Publishes the pool's connection counts, labelled with the service's short name
/// (`noema.ledger.v1.LedgerService` → `ledger`).
fn record_pool(service: &str, db: &Database) {
    let short = service.split('.').nth(1).unwrap_or(service);
    let (open, idle) = db.pool_stats();
    if let Some(m) = noema_runtime::metrics::global() {
        let idle = i64::try_from(idle).unwrap_or(i64::MAX);
        m.db_pool_connections
            .with_label_values(&[short, "idle"])
            .set(idle);
        m.db_pool_connections
            .with_label_values(&[short, "in_use"])
            .set(i64::from(open).saturating_sub(idle));
    }
}

async fn watch_readiness(
    name: &'static str,
    probe: ReadinessProbe,
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
        record_pool(name, &probe.db);
        let ready = probe.ready().await;
        if ready != was_ready && !shutdown.is_cancelled() {
            let status = if ready {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            tracing::warn!(service = name, ready, "readiness changed");
            health.set_service_status(name, status).await;
            was_ready = ready;
        }
    }
}

/// Applies `role`'s migrations and returns its backend, or `None` for a role without a
/// database. Concurrent runs are safe (Postgres advisory lock).
pub async fn migrate(
    config: &NoemaConfig,
    role: Role,
) -> Result<Option<noema_store::Backend>, NodeError> {
    let Some(spec) = storage_spec(role, config) else {
        return Ok(None);
    };
    let db = open_database(&spec).await?;
    let backend = db.backend();
    db.close().await;
    Ok(Some(backend))
}

//! Starts a set of roles in this process from one configuration. `noema up`, `noema
//! serve` and the test clusters all go through here, so every shape runs the same code.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use noema_runtime::{GrpcServer, NoemaConfig};
use noema_store::{Database, DbOptions, ObjectStore};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::role::Role;

/// How often a service re-checks its database and object store for readiness.
const READINESS_INTERVAL: Duration = Duration::from_secs(5);

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
    #[error("a server task panicked: {0}")]
    Panicked(String),
}

/// A running process: its bound addresses and its server tasks.
pub struct Node {
    pub grpc_addr: Option<SocketAddr>,
    pub http_addr: Option<SocketAddr>,
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
        let mut readiness = Vec::new();
        if !grpc_roles.is_empty() {
            let addr = config.grpc_addr()?;
            let listener = bind("server.grpc_addr", addr).await?;
            grpc_addr = listener.local_addr().ok();
            let mut server = GrpcServer::new();
            for role in &grpc_roles {
                readiness.push(Box::pin(add_service(&mut server, *role, config)).await?);
            }
            let health = server.health();
            for (name, probe) in readiness {
                tasks.spawn(watch_readiness(
                    name,
                    probe,
                    health.clone(),
                    shutdown.clone(),
                ));
            }
            tracing::info!(addr = ?grpc_addr, services = ?server.service_names(), "gRPC listening");
            let token = shutdown.clone();
            tasks.spawn(async move {
                server
                    .serve(listener, token, grace)
                    .await
                    .map_err(NodeError::from)
            });
        }

        let mut http_addr = None;
        if roles.contains(&Role::Gateway) {
            let own = grpc_addr.map(|a| format!("http://{a}"));
            let ledger_endpoint = endpoint(
                &config.endpoints.ledger,
                &roles,
                Role::Ledger,
                own.as_deref(),
            )?;
            let gateway_config = noema_gateway::GatewayConfig {
                ledger_endpoint,
                request_timeout: Duration::from_secs(config.gateway.request_timeout_secs),
                max_body_bytes: config.gateway.max_body_bytes,
            };
            let state = noema_gateway::GatewayState::connect(&gateway_config)?;
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

async fn open_database(
    setting: &str,
    url: &str,
    max_connections: u32,
) -> Result<Database, NodeError> {
    let options = DbOptions {
        max_connections,
        ..DbOptions::default()
    };
    Database::connect_with(url, &options)
        .await
        .map_err(|source| NodeError::Database {
            setting: setting.to_owned(),
            source,
        })
}

/// Opens the role's storage, migrates it, and hosts its gRPC service on `server`.
async fn add_service(
    server: &mut GrpcServer,
    role: Role,
    config: &NoemaConfig,
) -> Result<(&'static str, ReadinessProbe), NodeError> {
    match role {
        Role::Ledger => {
            let db = open_database(
                "ledger.database_url",
                &config.ledger_database_url(),
                config.ledger.max_connections,
            )
            .await?;
            db.migrate(&noema_ledger::MIGRATIONS)
                .await
                .map_err(|source| NodeError::Database {
                    setting: "ledger.database_url".into(),
                    source,
                })?;
            let objects = noema_store::object::open(&config.ledger_object_store_url())
                .await
                .map_err(|source| NodeError::ObjectStore {
                    setting: "ledger.object_store_url".into(),
                    source,
                })?;
            let service =
                noema_ledger::service(db.clone())
                    .await
                    .map_err(|e| NodeError::Service {
                        service: "ledger",
                        reason: noema_core::ErrorChain(&e).to_string(),
                    })?;
            server.add_service(service);
            Ok((
                noema_ledger::SERVICE_NAME,
                ReadinessProbe {
                    db,
                    objects: Some(objects),
                },
            ))
        }
        Role::Gateway => Err(NodeError::Service {
            service: "gateway",
            reason: "the gateway is not a gRPC service".into(),
        }),
    }
}

/// Reports the service NOT_SERVING while its storage is unreachable, SERVING when it is back.
async fn watch_readiness(
    name: &'static str,
    probe: ReadinessProbe,
    health: HealthReporter,
    shutdown: CancellationToken,
) -> Result<(), NodeError> {
    let mut was_ready = true;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(READINESS_INTERVAL) => {}
        }
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
/// database. Concurrent runs are safe (Postgres advisory lock, SQLite file lock).
pub async fn migrate(
    config: &NoemaConfig,
    role: Role,
) -> Result<Option<noema_store::Backend>, NodeError> {
    let (setting, url, max_connections, migrations) = match role {
        Role::Ledger => (
            "ledger.database_url",
            config.ledger_database_url(),
            config.ledger.max_connections,
            &noema_ledger::MIGRATIONS,
        ),
        Role::Gateway => return Ok(None),
    };
    let db = open_database(setting, &url, max_connections).await?;
    db.migrate(migrations)
        .await
        .map_err(|source| NodeError::Database {
            setting: setting.to_owned(),
            source,
        })?;
    let backend = db.backend();
    db.close().await;
    Ok(Some(backend))
}

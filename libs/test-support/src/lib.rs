//! Whole Noema clusters inside one test process, on `127.0.0.1:0` ports and temporary
//! directories: all-in-one (one node runs everything) or split (one node per service
//! plus a gateway node, wired only by config), on SQLite + files or on the Postgres and
//! S3-compatible server that `scripts/test` provides.

use std::fmt;
use std::net::SocketAddr;

use noema::{Node, NodeError, Role};
use noema_proto::identity::v1::IssueTokenRequest;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::NoemaConfig;
use noema_runtime::config::ConfigLoader;
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
    #[error("test database: {0}")]
    Database(#[from] noema_store::DbError),
    #[error("config: {0}")]
    Config(#[from] noema_runtime::ConfigError),
    #[error("node: {0}")]
    Node(#[from] NodeError),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("connect: {0}")]
    Connect(#[from] tonic::transport::Error),
}

/// A running cluster. Dropping it stops every node; [`TestCluster::shutdown`] also waits.
pub struct TestCluster {
    pub backend: Backend,
    pub shape: Shape,
    /// Base URL of the REST gateway, e.g. `http://127.0.0.1:41234`.
    pub rest_url: String,
    /// gRPC endpoint of the ledger, e.g. `http://127.0.0.1:41235`.
    pub ledger_endpoint: String,
    /// gRPC endpoint of the identity service.
    pub identity_endpoint: String,
    /// The owner (superuser) token.
    pub owner_token: String,
    nodes: Vec<Node>,
    shutdown: CancellationToken,
    _data_dir: TempDir,
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

impl TestCluster {
    pub async fn all_in_one(backend: Backend) -> Result<TestCluster, ClusterError> {
        Self::start(backend, Shape::AllInOne).await
    }

    pub async fn split(backend: Backend) -> Result<TestCluster, ClusterError> {
        Self::start(backend, Shape::Split).await
    }

    pub async fn start(backend: Backend, shape: Shape) -> Result<TestCluster, ClusterError> {
        Self::start_with(backend, shape, &[]).await
    }

    /// Starts a cluster with extra config settings: dotted keys and TOML literal values,
    /// e.g. `("auth.cache_ttl_secs", "2")` or `("auth.anonymous_scopes", "[\"ledger:read\"]")`.
    pub async fn start_with(
        backend: Backend,
        shape: Shape,
        settings: &[(&str, &str)],
    ) -> Result<TestCluster, ClusterError> {
        let data_dir = tempfile::tempdir()?;
        let owner_token = format!("noema_test_owner_{}", uuid::Uuid::new_v4().simple());
        let mut loader = ConfigLoader::new()
            .without_env()
            .set("server.data_dir", data_dir.path().display().to_string())
            .set("server.grpc_addr", "127.0.0.1:0")
            .set("server.http_addr", "127.0.0.1:0")
            .set("server.shutdown_grace_secs", 5)
            .set(
                "auth.owner_token_sha256",
                noema_identity::token_sha256(&owner_token),
            );
        if backend == Backend::PostgresS3 {
            let admin_url = require_env(DATABASE_URL_ENV)?;
            let s3_url = require_env(S3_URL_ENV)?;
            for service in ["identity", "ledger"] {
                let url = noema_store::testing::create_test_database(&admin_url, service).await?;
                loader = loader.set(&format!("{service}.database_url"), url);
            }
            loader = loader.set(
                "ledger.object_store_url",
                with_fresh_prefix(&s3_url, "ledger"),
            );
        }
        for (key, literal) in settings {
            let mut table: toml::Table = toml::from_str(&format!("value = {literal}"))
                .map_err(|e| ClusterError::Io(std::io::Error::other(format!("{key}: {e}"))))?;
            let value = table.remove("value").unwrap_or(toml::Value::Boolean(false));
            loader = loader.set(key, value);
        }
        let config = loader.load()?;
        let shutdown = CancellationToken::new();

        let nodes = match shape {
            Shape::AllInOne => {
                vec![Node::start(&config, &Role::ALL, shutdown.child_token()).await?]
            }
            Shape::Split => {
                // Each service in its own node, wired only by config, as separate pods would be.
                let identity =
                    Node::start(&config, &[Role::Identity], shutdown.child_token()).await?;
                let mut wired: NoemaConfig = config.clone();
                wired.endpoints.identity = format!("http://{}", bound(identity.grpc_addr)?);
                let ledger = Node::start(&wired, &[Role::Ledger], shutdown.child_token()).await?;
                wired.endpoints.ledger = format!("http://{}", bound(ledger.grpc_addr)?);
                let gateway = Node::start(&wired, &[Role::Gateway], shutdown.child_token()).await?;
                vec![identity, ledger, gateway]
            }
        };
        let (identity_node, ledger_node) = match shape {
            Shape::AllInOne => (&nodes[0], &nodes[0]),
            Shape::Split => (&nodes[0], &nodes[1]),
        };
        let http = nodes.iter().find_map(|n| n.http_addr);
        Ok(TestCluster {
            backend,
            shape,
            rest_url: format!("http://{}", bound(http)?),
            ledger_endpoint: format!("http://{}", bound(ledger_node.grpc_addr)?),
            identity_endpoint: format!("http://{}", bound(identity_node.grpc_addr)?),
            owner_token,
            nodes,
            shutdown,
            _data_dir: data_dir,
        })
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

    /// The gRPC endpoint serving `service` (a fully qualified name such as
    /// `noema.ledger.v1.LedgerService`), or `None` for a service this cluster lacks.
    pub fn endpoint_of(&self, service: &str) -> Option<&str> {
        if service.starts_with("noema.identity.") {
            Some(&self.identity_endpoint)
        } else if service.starts_with("noema.ledger.") {
            Some(&self.ledger_endpoint)
        } else {
            None
        }
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

    /// Stops every node (NOT_SERVING, drain) and waits for them.
    pub async fn shutdown(mut self) -> Result<(), ClusterError> {
        self.shutdown.cancel();
        for node in self.nodes.drain(..) {
            node.wait().await?;
        }
        Ok(())
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

fn bound(addr: Option<SocketAddr>) -> Result<SocketAddr, ClusterError> {
    addr.ok_or_else(|| ClusterError::Io(std::io::Error::other("node bound no address")))
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fresh_prefixes_keep_the_query() {
        let url = super::with_fresh_prefix("s3://b?endpoint=http://x:1&region=r", "ledger");
        assert!(url.starts_with("s3://b/ledger-"), "{url}");
        assert!(url.ends_with("?endpoint=http://x:1&region=r"), "{url}");
        let url = super::with_fresh_prefix("s3://b/base/", "t");
        assert!(url.starts_with("s3://b/base/t-"), "{url}");
    }
}

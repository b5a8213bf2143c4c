//! Whole Noema clusters inside one test process, on `127.0.0.1:0` ports and temporary
//! directories: all-in-one (one node runs everything) or split (one node per service
//! plus a gateway node, wired only by config), on SQLite + files or on the Postgres and
//! S3-compatible server that `scripts/test` provides.

use std::fmt;
use std::net::SocketAddr;

use noema::{Node, NodeError, Role};
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::NoemaConfig;
use noema_runtime::config::ConfigLoader;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
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
        let data_dir = tempfile::tempdir()?;
        let mut loader = ConfigLoader::new()
            .without_env()
            .set("server.data_dir", data_dir.path().display().to_string())
            .set("server.grpc_addr", "127.0.0.1:0")
            .set("server.http_addr", "127.0.0.1:0")
            .set("server.shutdown_grace_secs", 5);
        if backend == Backend::PostgresS3 {
            let admin_url = require_env(DATABASE_URL_ENV)?;
            let s3_url = require_env(S3_URL_ENV)?;
            let ledger_db =
                noema_store::testing::create_test_database(&admin_url, "ledger").await?;
            loader = loader.set("ledger.database_url", ledger_db).set(
                "ledger.object_store_url",
                with_fresh_prefix(&s3_url, "ledger"),
            );
        }
        let config = loader.load()?;
        let shutdown = CancellationToken::new();

        let nodes = match shape {
            Shape::AllInOne => {
                vec![Node::start(&config, &Role::ALL, shutdown.child_token()).await?]
            }
            Shape::Split => {
                let ledger = Node::start(&config, &[Role::Ledger], shutdown.child_token()).await?;
                let ledger_addr = bound(ledger.grpc_addr)?;
                let mut gateway_config: NoemaConfig = config.clone();
                gateway_config.endpoints.ledger = format!("http://{ledger_addr}");
                let gateway =
                    Node::start(&gateway_config, &[Role::Gateway], shutdown.child_token()).await?;
                vec![ledger, gateway]
            }
        };
        let grpc = nodes.iter().find_map(|n| n.grpc_addr);
        let http = nodes.iter().find_map(|n| n.http_addr);
        Ok(TestCluster {
            backend,
            shape,
            rest_url: format!("http://{}", bound(http)?),
            ledger_endpoint: format!("http://{}", bound(grpc)?),
            nodes,
            shutdown,
            _data_dir: data_dir,
        })
    }

    /// A gRPC client of the ledger.
    pub async fn ledger(&self) -> Result<LedgerServiceClient<Channel>, ClusterError> {
        Ok(LedgerServiceClient::new(self.ledger_channel().await?))
    }

    /// A plain channel to the ledger's gRPC server (health, reflection).
    pub async fn ledger_channel(&self) -> Result<Channel, ClusterError> {
        Ok(Channel::from_shared(self.ledger_endpoint.clone())
            .map_err(|e| ClusterError::Io(std::io::Error::other(e.to_string())))?
            .connect()
            .await?)
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

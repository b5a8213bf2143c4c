//! Shared pieces of the end-to-end suite. Each case is written once as
//! `async fn case(cluster: TestCluster)` and `cluster_cases!` runs it on every shape
//! (all-in-one, split in-process) and every backend (SQLite + files, Postgres + S3), and
//! once more with every role as its own `noema serve` process on Postgres + S3.

pub mod governed;

pub use noema_test_support::{Backend, BearerToken, LedgerClient, Role, Shape, TestCluster};

/// Starts a cluster, failing the test loudly (never skipping) when a backend is missing.
pub async fn cluster(backend: Backend, shape: Shape) -> TestCluster {
    match TestCluster::start(backend, shape).await {
        Ok(cluster) => cluster,
        Err(err) => panic!("cannot start a {shape:?} cluster on {backend}: {err}"),
    }
}

/// A REST client without credentials.
pub fn anonymous() -> reqwest::Client {
    match noema_tools::tls::client() {
        Ok(client) => client,
        Err(err) => panic!("cannot build a REST client: {err}"),
    }
}

/// A REST client whose requests carry `token`.
pub fn client_as(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    match format!("Bearer {token}").parse() {
        Ok(value) => {
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        Err(_) => panic!("token is not a valid header value"),
    }
    match noema_tools::tls::client_builder()
        .default_headers(headers)
        .build()
    {
        Ok(client) => client,
        Err(err) => panic!("cannot build a REST client: {err}"),
    }
}

/// A REST client acting as the cluster's owner.
pub fn owner(cluster: &TestCluster) -> reqwest::Client {
    client_as(&cluster.owner_token)
}

/// An OpenAPI path with every parameter filled: a MoltNet fingerprint's shape for
/// `{fingerprint}`, `probe-id` for the rest (for sweeps over the document, where what the
/// route answers to an unknown id is beside the point).
pub fn concrete_path(template: &str) -> String {
    template
        .split('/')
        .map(|segment| match segment {
            "{fingerprint}" => "21FE-31DF-A154-A261",
            s if s.starts_with('{') => "probe-id",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Expands each named case into one test per shape × backend (four in-process ones,
/// plus `processes_postgres_s3`).
#[macro_export]
macro_rules! cluster_cases {
    ($($case:ident),* $(,)?) => {
        $crate::cluster_cases!(@shape all_in_one_sqlite, Sqlite, AllInOne; $($case),*);
        $crate::cluster_cases!(@shape split_sqlite, Sqlite, Split; $($case),*);
        $crate::cluster_cases!(@shape all_in_one_postgres_s3, PostgresS3, AllInOne; $($case),*);
        $crate::cluster_cases!(@shape split_postgres_s3, PostgresS3, Split; $($case),*);
        $crate::cluster_cases!(@shape processes_postgres_s3, PostgresS3, Processes; $($case),*);
    };
    (@shape $module:ident, $backend:ident, $shape:ident; $($case:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let cluster = $crate::cluster(
                        $crate::Backend::$backend,
                        $crate::Shape::$shape,
                    )
                    .await;
                    super::$case(&cluster).await;
                    if let Err(err) = cluster.shutdown().await {
                        panic!("cluster did not shut down cleanly: {err}");
                    }
                }
            )*
        }
    };
}

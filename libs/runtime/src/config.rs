//! Configuration in layers: defaults → TOML file → `NOEMA__SECTION__KEY` env → CLI flags.
//!
//! Loading validates right away, so a bad value fails start-up with the setting's name.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// Prefix of environment overrides: `NOEMA__SERVER__GRPC_ADDR=0.0.0.0:50051`.
pub const ENV_PREFIX: &str = "NOEMA__";
/// Where the embedded default keeps the ledger's objects (`pack://`) under the data dir.
pub const PACKS_DIR: &str = "packs";
/// Where versions before the pack store kept them (`file://`); still used where it exists.
pub const LEGACY_OBJECTS_DIR: &str = "objects";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(String),
    #[error("configuration setting `{setting}`: {reason}")]
    Invalid { setting: String, reason: String },
}

/// The whole effective configuration of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoemaConfig {
    pub server: ServerConfig,
    pub telemetry: TelemetryConfig,
    pub auth: AuthConfig,
    pub identity: StorageConfig,
    pub ledger: StorageConfig,
    pub endpoints: Endpoints,
    pub gateway: GatewayConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Scopes granted to requests without a token. Empty (the default) means every request
    /// needs a token; anything else is logged loudly at start-up.
    pub anonymous_scopes: Vec<String>,
    /// How long a service remembers a token's principal; a revoked token stops working
    /// within this time. 1 to 30 seconds.
    pub cache_ttl_secs: u64,
    /// `sha256:<hex>` of the owner token (split shape: from a secret). Empty in the embedded
    /// default, where the token lives in `<data_dir>/owner.token`.
    pub owner_token_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Where every gRPC service of this process listens.
    pub grpc_addr: String,
    /// Where the REST gateway listens (when this process runs it).
    pub http_addr: String,
    /// Root of the embedded default's files: SQLite databases, objects, owner token.
    pub data_dir: PathBuf,
    /// How long a graceful shutdown waits for in-flight requests.
    pub shutdown_grace_secs: u64,
    /// Where this process serves Prometheus metrics on `/metrics` (e.g. `0.0.0.0:9090`).
    /// Empty: no separate listener (the gateway always serves `/metrics`).
    pub metrics_addr: String,
    /// How often each service re-checks its database and object store; readiness
    /// (gRPC health, the gateway's `/readyz`) follows within this time.
    pub readiness_interval_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `text` or `json`.
    pub log_format: LogFormat,
    /// A `tracing` filter, e.g. `info,noema_ledger=debug`. `RUST_LOG` wins when set.
    pub log_filter: String,
    /// `service.name` in exported traces.
    pub service_name: String,
    /// OTLP/gRPC collector endpoint; `OTEL_EXPORTER_OTLP_ENDPOINT` sets it too. Empty: no export.
    pub otlp_endpoint: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// A service's storage. Empty URLs mean the embedded default under `server.data_dir`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `sqlite://…` or `postgres://…`.
    pub database_url: String,
    /// `pack://…`, `file://…` or `s3://bucket/prefix?endpoint=…`.
    pub object_store_url: String,
    /// Connection pool size.
    pub max_connections: u32,
}

/// Where other services are reached. Empty means "this process's own gRPC address",
/// which is what `noema up` uses.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoints {
    pub identity: String,
    pub ledger: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Deadline for one downstream gRPC call made for a REST request.
    pub request_timeout_secs: u64,
    /// Largest accepted REST request body.
    pub max_body_bytes: usize,
}

impl Default for NoemaConfig {
    fn default() -> Self {
        NoemaConfig {
            server: ServerConfig {
                grpc_addr: "127.0.0.1:50051".into(),
                http_addr: "127.0.0.1:8080".into(),
                data_dir: PathBuf::from("./noema-data"),
                shutdown_grace_secs: 30,
                metrics_addr: String::new(),
                readiness_interval_ms: 5000,
            },
            telemetry: TelemetryConfig {
                log_format: LogFormat::Text,
                log_filter: "info".into(),
                service_name: "noema".into(),
                otlp_endpoint: String::new(),
            },
            auth: AuthConfig {
                anonymous_scopes: Vec::new(),
                cache_ttl_secs: 10,
                owner_token_sha256: String::new(),
            },
            identity: StorageConfig {
                max_connections: 10,
                ..StorageConfig::default()
            },
            ledger: StorageConfig {
                max_connections: 10,
                ..StorageConfig::default()
            },
            endpoints: Endpoints::default(),
            gateway: GatewayConfig {
                request_timeout_secs: 30,
                max_body_bytes: 32 * 1024 * 1024,
            },
        }
    }
}

/// Builds the layered configuration. `overrides` are CLI flags as `(dotted.key, value)`.
pub struct ConfigLoader {
    file: Option<PathBuf>,
    overrides: Vec<(String, Result<figment::value::Value, figment::Error>)>,
    use_env: bool,
}

impl Default for ConfigLoader {
    fn default() -> Self {
        ConfigLoader {
            file: None,
            overrides: Vec::new(),
            use_env: true,
        }
    }
}

impl ConfigLoader {
    pub fn new() -> Self {
        Self::default()
    }

    /// The TOML file layer. A named file that does not exist is an error.
    pub fn file(mut self, path: Option<&Path>) -> Self {
        self.file = path.map(Path::to_path_buf);
        self
    }

    /// A CLI flag layer value, e.g. `("server.grpc_addr", "0.0.0.0:50051")`.
    pub fn set(mut self, key: &str, value: impl Serialize) -> Self {
        self.overrides
            .push((key.to_owned(), figment::value::Value::serialize(value)));
        self
    }

    /// Tests turn the environment layer off so the machine's env cannot leak in.
    pub fn without_env(mut self) -> Self {
        self.use_env = false;
        self
    }

    pub fn load(self) -> Result<NoemaConfig, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(NoemaConfig::default()));
        if let Some(path) = &self.file {
            if !path.is_file() {
                return Err(ConfigError::Load(format!(
                    "config file {} does not exist",
                    path.display()
                )));
            }
            figment = figment.merge(Toml::file(path));
        }
        if self.use_env {
            figment = figment.merge(Env::prefixed(ENV_PREFIX).split("__"));
            if let Ok(endpoint) = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
                figment = figment.merge(Serialized::default("telemetry.otlp_endpoint", endpoint));
            }
        }
        for (key, value) in self.overrides {
            let value = value.map_err(|e| invalid(&key, e.to_string()))?;
            figment = figment.merge(Serialized::default(&key, value));
        }
        let config: NoemaConfig = figment.extract().map_err(|e| {
            let setting = e.path.join(".");
            if setting.is_empty() {
                ConfigError::Load(e.to_string())
            } else {
                ConfigError::Invalid {
                    setting,
                    reason: e.kind.to_string(),
                }
            }
        })?;
        config.validate()?;
        Ok(config)
    }
}

fn invalid(setting: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        setting: setting.to_owned(),
        reason: reason.into(),
    }
}

fn parse_addr(setting: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|_| {
        invalid(
            setting,
            format!("{value:?} is not a socket address like 127.0.0.1:8080"),
        )
    })
}

fn check_scheme(setting: &str, value: &str, accepted: &[&str]) -> Result<(), ConfigError> {
    if value.is_empty() || accepted.iter().any(|scheme| value.starts_with(scheme)) {
        Ok(())
    } else {
        Err(invalid(
            setting,
            format!(
                "unsupported URL (must start with one of: {}); leave empty for the embedded default",
                accepted.join(", ")
            ),
        ))
    }
}

impl NoemaConfig {
    /// Checks every setting whose shape can be known without touching the network.
    pub fn validate(&self) -> Result<(), ConfigError> {
        parse_addr("server.grpc_addr", &self.server.grpc_addr)?;
        parse_addr("server.http_addr", &self.server.http_addr)?;
        if !self.server.metrics_addr.is_empty() {
            parse_addr("server.metrics_addr", &self.server.metrics_addr)?;
        }
        // Below 50 ms the probes themselves would load the database and the object store.
        if !(50..=600_000).contains(&self.server.readiness_interval_ms) {
            return Err(invalid(
                "server.readiness_interval_ms",
                "must be between 50 and 600000 milliseconds",
            ));
        }
        if self.server.data_dir.as_os_str().is_empty() {
            return Err(invalid("server.data_dir", "must not be empty"));
        }
        for (service, storage) in [("identity", &self.identity), ("ledger", &self.ledger)] {
            check_scheme(
                &format!("{service}.database_url"),
                &storage.database_url,
                &["sqlite:", "postgres://", "postgresql://"],
            )?;
            check_scheme(
                &format!("{service}.object_store_url"),
                &storage.object_store_url,
                &["pack://", "file://", "s3://"],
            )?;
            if storage.max_connections == 0 {
                return Err(invalid(
                    &format!("{service}.max_connections"),
                    "must be at least 1",
                ));
            }
        }
        check_scheme(
            "endpoints.identity",
            &self.endpoints.identity,
            &["http://", "https://"],
        )?;
        check_scheme(
            "endpoints.ledger",
            &self.endpoints.ledger,
            &["http://", "https://"],
        )?;
        if !(1..=30).contains(&self.auth.cache_ttl_secs) {
            return Err(invalid(
                "auth.cache_ttl_secs",
                "must be between 1 and 30 seconds",
            ));
        }
        for scope in &self.auth.anonymous_scopes {
            if !noema_core::scopes::is_known_scope(scope) {
                return Err(invalid(
                    "auth.anonymous_scopes",
                    format!(
                        "unknown scope {scope:?}; known scopes: {}",
                        noema_core::scopes::known_scopes().join(", ")
                    ),
                ));
            }
        }
        let owner = &self.auth.owner_token_sha256;
        if !owner.is_empty() {
            let hex = owner.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid(
                    "auth.owner_token_sha256",
                    "must be sha256:<64 hex digits> (the SHA-256 of the owner token)",
                ));
            }
        }
        if self.gateway.request_timeout_secs == 0 {
            return Err(invalid(
                "gateway.request_timeout_secs",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    pub fn grpc_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("server.grpc_addr", &self.server.grpc_addr)
    }

    pub fn http_addr(&self) -> Result<SocketAddr, ConfigError> {
        parse_addr("server.http_addr", &self.server.http_addr)
    }

    /// The ledger's database URL, defaulting to a SQLite file under the data dir.
    pub fn ledger_database_url(&self) -> String {
        self.storage_url(&self.ledger.database_url, |dir| {
            format!("sqlite://{}", dir.join("ledger.db").display())
        })
    }

    /// The identity service's database URL, defaulting to a SQLite file under the data dir.
    pub fn identity_database_url(&self) -> String {
        self.storage_url(&self.identity.database_url, |dir| {
            format!("sqlite://{}", dir.join("identity.db").display())
        })
    }

    /// Where the embedded default keeps the owner token.
    pub fn owner_token_path(&self) -> PathBuf {
        self.server.data_dir.join("owner.token")
    }

    /// The ledger's object store URL, defaulting to `pack://<data_dir>/packs`; or, for a data
    /// dir that earlier versions filled, to the `file://<data_dir>/objects` it already has.
    pub fn ledger_object_store_url(&self) -> String {
        self.storage_url(&self.ledger.object_store_url, |dir| {
            let earlier = dir.join(LEGACY_OBJECTS_DIR);
            if earlier.is_dir() {
                format!("file://{}", earlier.display())
            } else {
                format!("pack://{}", dir.join(PACKS_DIR).display())
            }
        })
    }

    fn storage_url(&self, configured: &str, default: impl Fn(&Path) -> String) -> String {
        if configured.is_empty() {
            default(&self.server.data_dir)
        } else {
            configured.to_owned()
        }
    }

    /// The effective configuration as TOML, for `noema config dump`.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string_pretty(self).map_err(|e| ConfigError::Load(e.to_string()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_embedded() {
        let config = ConfigLoader::new().without_env().load().unwrap();
        assert_eq!(config.server.grpc_addr, "127.0.0.1:50051");
        assert_eq!(config.server.http_addr, "127.0.0.1:8080");
        assert_eq!(
            config.ledger_database_url(),
            "sqlite://./noema-data/ledger.db"
        );
        assert_eq!(
            config.ledger_object_store_url(),
            "pack://./noema-data/packs"
        );
    }

    #[test]
    fn a_data_dir_of_an_earlier_version_keeps_its_file_store() {
        let dir = tempfile::tempdir().unwrap();
        let config = ConfigLoader::new()
            .without_env()
            .set("server.data_dir", dir.path().display().to_string())
            .load()
            .unwrap();
        let packs = format!("pack://{}", dir.path().join("packs").display());
        assert_eq!(config.ledger_object_store_url(), packs);
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        let objects = format!("file://{}", dir.path().join("objects").display());
        assert_eq!(config.ledger_object_store_url(), objects);
    }

    #[test]
    fn later_layers_win() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("noema.toml");
        std::fs::write(
            &path,
            "[server]\ngrpc_addr = \"127.0.0.1:1\"\nhttp_addr = \"127.0.0.1:2\"\n",
        )
        .unwrap();
        let config = ConfigLoader::new()
            .without_env()
            .file(Some(&path))
            .set("server.http_addr", "127.0.0.1:3")
            .load()
            .unwrap();
        assert_eq!(config.server.grpc_addr, "127.0.0.1:1");
        assert_eq!(config.server.http_addr, "127.0.0.1:3");
    }

    #[test]
    fn a_bad_value_names_its_setting() {
        let err = ConfigLoader::new()
            .without_env()
            .set("ledger.database_url", "mysql://db/x")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("ledger.database_url"), "{err}");

        let err = ConfigLoader::new()
            .without_env()
            .set("server.grpc_addr", "localhost")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("server.grpc_addr"), "{err}");

        let err = ConfigLoader::new()
            .without_env()
            .set("ledger.object_store_url", "ftp://x")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("ledger.object_store_url"), "{err}");

        let err = ConfigLoader::new()
            .without_env()
            .set("auth.cache_ttl_secs", 60)
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("auth.cache_ttl_secs"), "{err}");

        let err = ConfigLoader::new()
            .without_env()
            .set("auth.anonymous_scopes", vec!["ledger:everything"])
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("auth.anonymous_scopes"), "{err}");

        let err = ConfigLoader::new()
            .without_env()
            .set("server.readiness_interval_ms", 0)
            .load()
            .unwrap_err();
        assert!(
            err.to_string().contains("server.readiness_interval_ms"),
            "{err}"
        );

        let err = ConfigLoader::new()
            .without_env()
            .set("auth.owner_token_sha256", "abc")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("auth.owner_token_sha256"), "{err}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("noema.toml");
        std::fs::write(&path, "[server]\nshutdown_grace_secs = \"soon\"\n").unwrap();
        let err = ConfigLoader::new()
            .without_env()
            .file(Some(&path))
            .load()
            .unwrap_err();
        assert!(
            err.to_string().contains("server.shutdown_grace_secs"),
            "{err}"
        );

        std::fs::write(&path, "[server]\ngrpc_adr = \"127.0.0.1:1\"\n").unwrap();
        let err = ConfigLoader::new()
            .without_env()
            .file(Some(&path))
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("grpc_adr"), "{err}");
    }

    #[test]
    fn a_missing_config_file_is_an_error() {
        let err = ConfigLoader::new()
            .without_env()
            .file(Some(Path::new("/nonexistent/noema.toml")))
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    #[test]
    fn the_dump_loads_back_to_the_same_config() {
        let config = ConfigLoader::new().without_env().load().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.toml");
        std::fs::write(&path, config.to_toml().unwrap()).unwrap();
        let again = ConfigLoader::new()
            .without_env()
            .file(Some(&path))
            .load()
            .unwrap();
        assert_eq!(config, again);
    }
}

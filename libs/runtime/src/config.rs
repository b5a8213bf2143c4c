//! Configuration in layers: defaults → TOML file → `NOEMA__SECTION__KEY` env → CLI flags.
//!
//! Loading validates right away, so a bad value fails start-up with the setting's name.
//!
//! Besides the fixed sections (`server`, `telemetry`, `auth`, `endpoints`, `gateway`), every
//! registered service has a top-level section of its own (`[ledger]`,
//! `NOEMA__LEDGER__DATABASE_URL`) and an endpoint (`endpoints.ledger`): both are maps keyed by
//! service name, checked against the [`Registry`], so a section or endpoint that names no
//! registered service is refused by name.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use noema_core::content_id::ContentId;
use serde::{Deserialize, Serialize};

use crate::registry::{FIXED_SECTIONS, Registry, ServiceSpec};

/// Prefix of environment overrides: `NOEMA__SERVER__GRPC_ADDR=0.0.0.0:50051`.
pub const ENV_PREFIX: &str = "NOEMA__";
/// Default database pool size of a service.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(String),
    #[error("configuration setting `{setting}`: {reason}")]
    Invalid { setting: String, reason: String },
}

/// The whole effective configuration of one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoemaConfig {
    pub server: ServerConfig,
    pub telemetry: TelemetryConfig,
    pub auth: AuthConfig,
    /// Where other services are reached, by service name. Empty (or absent) means "this
    /// process's own gRPC address", which is what `noema up` uses.
    pub endpoints: BTreeMap<String, String>,
    pub gateway: GatewayConfig,
    /// Each registered service's section, by service name (`[ledger]`).
    #[serde(flatten)]
    pub services: BTreeMap<String, ServiceSettings>,
}

/// The fixed sections, as read before the service sections.
#[derive(Deserialize)]
struct FixedSections {
    server: ServerConfig,
    telemetry: TelemetryConfig,
    auth: AuthConfig,
    endpoints: BTreeMap<String, String>,
    gateway: GatewayConfig,
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
    /// default, where the token lives in `<data_dir>/owner.token`. The prefix is optional and
    /// the hex may be in either case: loading folds it to `sha256:<lowercase hex>`, the form
    /// token hashes are stored and compared in.
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

/// A service's section. Empty URLs mean the embedded default under `server.data_dir`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceSettings {
    /// `sqlite://…` or `postgres://…`.
    pub database_url: String,
    /// `pack://…`, `file://…` or `s3://bucket/prefix?endpoint=…` (services with an object
    /// store only).
    pub object_store_url: String,
    /// Connection pool size.
    pub max_connections: u32,
    /// The service's own settings, checked by its spec (see `registry::OptionsSpec`).
    #[serde(flatten)]
    pub options: serde_json::Map<String, serde_json::Value>,
}

impl ServiceSettings {
    /// The defaults of `spec`'s section.
    pub fn defaults(spec: &ServiceSpec) -> Result<ServiceSettings, ConfigError> {
        let options = match &spec.options {
            Some(options) => (options.defaults)().map_err(|reason| invalid(spec.name, reason))?,
            None => serde_json::Map::new(),
        };
        Ok(ServiceSettings {
            database_url: String::new(),
            object_store_url: String::new(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            options,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// Deadline for one downstream gRPC call made for a REST request.
    pub request_timeout_secs: u64,
    /// Largest accepted REST request body.
    pub max_body_bytes: usize,
}

impl NoemaConfig {
    /// The built-in defaults, with a section and an (empty) endpoint for every service of
    /// `registry`.
    pub fn defaults(registry: &Registry) -> Result<NoemaConfig, ConfigError> {
        let mut services = BTreeMap::new();
        let mut endpoints = BTreeMap::new();
        for spec in registry.services() {
            services.insert(spec.name.to_owned(), ServiceSettings::defaults(spec)?);
            endpoints.insert(spec.name.to_owned(), String::new());
        }
        Ok(NoemaConfig {
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
            endpoints,
            gateway: GatewayConfig {
                request_timeout_secs: 30,
                max_body_bytes: 32 * 1024 * 1024,
            },
            services,
        })
    }
}

/// Builds the layered configuration. `overrides` are CLI flags as `(dotted.key, value)`.
pub struct ConfigLoader {
    registry: Registry,
    file: Option<PathBuf>,
    overrides: Vec<(String, Result<figment::value::Value, figment::Error>)>,
    use_env: bool,
}

impl ConfigLoader {
    /// A loader for the services of `registry`: their sections get defaults, and any other
    /// section or endpoint is refused.
    pub fn new(registry: &Registry) -> Self {
        ConfigLoader {
            registry: registry.clone(),
            file: None,
            overrides: Vec::new(),
            use_env: true,
        }
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
        let defaults = NoemaConfig::defaults(&self.registry)?;
        let mut figment = Figment::from(Serialized::defaults(defaults));
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
        let fixed: FixedSections = figment.extract().map_err(extract_error)?;
        let sections: BTreeMap<String, figment::value::Value> =
            figment.extract().map_err(extract_error)?;
        let mut services = BTreeMap::new();
        for name in sections.keys() {
            if FIXED_SECTIONS.contains(&name.as_str()) {
                continue;
            }
            if self.registry.get(name).is_none() {
                return Err(unknown_service(name, name, &self.registry));
            }
            let settings: ServiceSettings = figment
                .extract_inner(name)
                .map_err(|e| extract_error(in_section(name, e)))?;
            services.insert(name.clone(), settings);
        }
        let config = NoemaConfig {
            server: fixed.server,
            telemetry: fixed.telemetry,
            auth: fixed.auth,
            endpoints: fixed.endpoints,
            gateway: fixed.gateway,
            services,
        };
        let config = config.normalized()?;
        config.validate(&self.registry)?;
        Ok(config)
    }
}

fn extract_error(e: figment::Error) -> ConfigError {
    let setting = e.path.join(".");
    if setting.is_empty() {
        ConfigError::Load(e.to_string())
    } else {
        ConfigError::Invalid {
            setting,
            reason: e.kind.to_string(),
        }
    }
}

/// An error of `extract_inner(section)` with its path starting at the section (figment
/// 0.10 appends the section to the path instead of prepending it).
fn in_section(section: &str, mut e: figment::Error) -> figment::Error {
    if e.path.last().is_some_and(|last| last == section) {
        e.path.pop();
    }
    e.path.insert(0, section.to_owned());
    e
}

fn unknown_service(setting: &str, name: &str, registry: &Registry) -> ConfigError {
    invalid(
        setting,
        format!(
            "unknown service `{name}`; known services: {}",
            registry.names().join(", ")
        ),
    )
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

/// Checks one service's section against its spec.
fn validate_service(spec: &ServiceSpec, settings: &ServiceSettings) -> Result<(), ConfigError> {
    let name = spec.name;
    check_scheme(
        &format!("{name}.database_url"),
        &settings.database_url,
        &["sqlite:", "postgres://", "postgresql://"],
    )?;
    let store_setting = format!("{name}.object_store_url");
    if spec.object_store.is_some() {
        check_scheme(
            &store_setting,
            &settings.object_store_url,
            &["pack://", "file://", "s3://", "s3+pack://"],
        )?;
    } else if !settings.object_store_url.is_empty() {
        return Err(invalid(
            &store_setting,
            format!("the {name} service keeps no objects; leave it unset"),
        ));
    }
    if settings.max_connections == 0 {
        return Err(invalid(
            &format!("{name}.max_connections"),
            "must be at least 1",
        ));
    }
    match &spec.options {
        Some(options) => (options.check)(&settings.options).map_err(|reason| invalid(name, reason)),
        None => match settings.options.keys().next() {
            Some(key) => Err(invalid(
                &format!("{name}.{key}"),
                format!(
                    "unknown setting; the [{name}] section takes database_url, \
                     object_store_url and max_connections"
                ),
            )),
            None => Ok(()),
        },
    }
}

/// The configured owner-token hash in its one stored form.
fn owner_token_sha256(text: &str) -> Result<ContentId, ConfigError> {
    ContentId::parse_normalizing(text).map_err(|_| {
        invalid(
            "auth.owner_token_sha256",
            "must be sha256:<64 hex digits> (the SHA-256 of the owner token)",
        )
    })
}

impl NoemaConfig {
    /// Settings that have one canonical text, rewritten to it: a hash is compared as a
    /// string, so an uppercase owner-token hash would otherwise never match a token.
    fn normalized(mut self) -> Result<NoemaConfig, ConfigError> {
        if !self.auth.owner_token_sha256.is_empty() {
            self.auth.owner_token_sha256 =
                owner_token_sha256(&self.auth.owner_token_sha256)?.into_string();
        }
        Ok(self)
    }

    /// Checks every setting whose shape can be known without touching the network.
    pub fn validate(&self, registry: &Registry) -> Result<(), ConfigError> {
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
        for (name, settings) in &self.services {
            let spec = registry
                .get(name)
                .ok_or_else(|| unknown_service(name, name, registry))?;
            validate_service(spec, settings)?;
        }
        for (name, endpoint) in &self.endpoints {
            let setting = format!("endpoints.{name}");
            if registry.get(name).is_none() {
                return Err(unknown_service(&setting, name, registry));
            }
            check_scheme(&setting, endpoint, &["http://", "https://"])?;
        }
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
        if !self.auth.owner_token_sha256.is_empty() {
            owner_token_sha256(&self.auth.owner_token_sha256)?;
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

    /// Where the embedded default keeps the owner token.
    pub fn owner_token_path(&self) -> PathBuf {
        self.server.data_dir.join("owner.token")
    }

    /// The section of the service `name` (absent only for a service the configuration was
    /// not loaded for).
    pub fn settings(&self, name: &str) -> Option<&ServiceSettings> {
        self.services.get(name)
    }

    /// `spec`'s database URL, defaulting to `sqlite://<data_dir>/<name>.db`.
    pub fn database_url(&self, spec: &ServiceSpec) -> String {
        let configured = self.settings(spec.name).map(|s| s.database_url.as_str());
        self.storage_url(configured.unwrap_or_default(), |dir| {
            format!(
                "sqlite://{}",
                dir.join(format!("{}.db", spec.name)).display()
            )
        })
    }

    /// `spec`'s object store URL (`None` for a service without one), defaulting to a pack
    /// store in its directory under the data dir; or, for a data dir that earlier versions
    /// filled, to the `file://` store it already has there.
    pub fn object_store_url(&self, spec: &ServiceSpec) -> Option<String> {
        let store = spec.object_store.as_ref()?;
        let configured = self
            .settings(spec.name)
            .map(|s| s.object_store_url.as_str());
        Some(self.storage_url(configured.unwrap_or_default(), |dir| {
            match store.legacy_file_dir.map(|legacy| dir.join(legacy)) {
                Some(earlier) if earlier.is_dir() => format!("file://{}", earlier.display()),
                _ => format!("pack://{}", dir.join(store.default_dir).display()),
            }
        }))
    }

    /// Whether `spec`'s object store URL is set (rather than the embedded default).
    pub fn object_store_configured(&self, spec: &ServiceSpec) -> bool {
        self.settings(spec.name)
            .is_some_and(|s| !s.object_store_url.is_empty())
    }

    /// `spec`'s database pool size.
    pub fn max_connections(&self, spec: &ServiceSpec) -> u32 {
        self.settings(spec.name)
            .map_or(DEFAULT_MAX_CONNECTIONS, |s| s.max_connections)
    }

    /// `spec`'s service-specific options.
    pub fn options(&self, spec: &ServiceSpec) -> serde_json::Map<String, serde_json::Value> {
        self.settings(spec.name)
            .map(|s| s.options.clone())
            .unwrap_or_default()
    }

    /// The configured endpoint of the service `name`, if set.
    pub fn endpoint(&self, name: &str) -> Option<&str> {
        self.endpoints
            .get(name)
            .map(String::as_str)
            .filter(|e| !e.is_empty())
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
    use crate::registry::OptionsSpec;
    use crate::registry::testing::{ledger, registry, spec};

    fn loader() -> ConfigLoader {
        ConfigLoader::new(&registry()).without_env()
    }

    #[test]
    fn defaults_are_valid_and_embedded() {
        let config = loader().load().unwrap();
        assert_eq!(config.server.grpc_addr, "127.0.0.1:50051");
        assert_eq!(config.server.http_addr, "127.0.0.1:8080");
        assert_eq!(
            config.database_url(&ledger()),
            "sqlite://./noema-data/ledger.db"
        );
        assert_eq!(
            config.object_store_url(&ledger()).unwrap(),
            "pack://./noema-data/packs"
        );
    }

    #[test]
    fn a_data_dir_of_an_earlier_version_keeps_its_file_store() {
        let dir = tempfile::tempdir().unwrap();
        let config = loader()
            .set("server.data_dir", dir.path().display().to_string())
            .load()
            .unwrap();
        let packs = format!("pack://{}", dir.path().join("packs").display());
        assert_eq!(config.object_store_url(&ledger()).unwrap(), packs);
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        let objects = format!("file://{}", dir.path().join("objects").display());
        assert_eq!(config.object_store_url(&ledger()).unwrap(), objects);
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
        let config = loader()
            .file(Some(&path))
            .set("server.http_addr", "127.0.0.1:3")
            .load()
            .unwrap();
        assert_eq!(config.server.grpc_addr, "127.0.0.1:1");
        assert_eq!(config.server.http_addr, "127.0.0.1:3");
    }

    #[test]
    fn a_bad_value_names_its_setting() {
        let err = loader()
            .set("ledger.database_url", "mysql://db/x")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("ledger.database_url"), "{err}");

        let err = loader()
            .set("server.grpc_addr", "localhost")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("server.grpc_addr"), "{err}");

        let err = loader()
            .set("ledger.object_store_url", "ftp://x")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("ledger.object_store_url"), "{err}");

        let err = loader().set("auth.cache_ttl_secs", 60).load().unwrap_err();
        assert!(err.to_string().contains("auth.cache_ttl_secs"), "{err}");

        let err = loader()
            .set("auth.anonymous_scopes", vec!["ledger:everything"])
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("auth.anonymous_scopes"), "{err}");

        let err = loader()
            .set("server.readiness_interval_ms", 0)
            .load()
            .unwrap_err();
        assert!(
            err.to_string().contains("server.readiness_interval_ms"),
            "{err}"
        );

        let err = loader()
            .set("auth.owner_token_sha256", "abc")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("auth.owner_token_sha256"), "{err}");
    }

    #[test]
    fn the_owner_token_hash_is_folded_to_its_stored_form() {
        let upper = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
        let stored = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let prefixed = "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
        for configured in [prefixed, upper, stored] {
            let config = loader()
                .set("auth.owner_token_sha256", configured)
                .load()
                .unwrap();
            assert_eq!(config.auth.owner_token_sha256, stored, "{configured}");
        }
        let err = loader()
            .set("auth.owner_token_sha256", &stored[..70])
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("auth.owner_token_sha256"), "{err}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("noema.toml");
        std::fs::write(&path, "[server]\nshutdown_grace_secs = \"soon\"\n").unwrap();
        let err = loader().file(Some(&path)).load().unwrap_err();
        assert!(
            err.to_string().contains("server.shutdown_grace_secs"),
            "{err}"
        );

        std::fs::write(&path, "[server]\ngrpc_adr = \"127.0.0.1:1\"\n").unwrap();
        let err = loader().file(Some(&path)).load().unwrap_err();
        assert!(err.to_string().contains("grpc_adr"), "{err}");
    }

    #[test]
    fn a_missing_config_file_is_an_error() {
        let err = loader()
            .file(Some(Path::new("/nonexistent/noema.toml")))
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    #[test]
    fn the_dump_loads_back_to_the_same_config() {
        let config = loader().load().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dump.toml");
        std::fs::write(&path, config.to_toml().unwrap()).unwrap();
        let again = loader().file(Some(&path)).load().unwrap();
        assert_eq!(config, again);
    }

    #[test]
    fn a_section_or_endpoint_of_no_registered_service_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("noema.toml");
        std::fs::write(&path, "[ledgr]\ndatabase_url = \"sqlite://x.db\"\n").unwrap();
        let err = loader().file(Some(&path)).load().unwrap_err();
        assert_eq!(
            err.to_string(),
            "configuration setting `ledgr`: unknown service `ledgr`; known services: identity, ledger"
        );
        let err = loader()
            .set("endpoints.ledgr", "http://ledger:50051")
            .load()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`endpoints.ledgr`: unknown service `ledgr`"),
            "{err}"
        );
        let err = loader()
            .set("endpoints.ledger", "ledger:50051")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("endpoints.ledger"), "{err}");
        let config = loader()
            .set("endpoints.ledger", "http://ledger:50051")
            .load()
            .unwrap();
        assert_eq!(config.endpoint("ledger"), Some("http://ledger:50051"));
        assert_eq!(config.endpoint("identity"), None);
    }

    #[test]
    fn service_sections_are_checked_against_their_spec() {
        let err = loader()
            .set("identity.object_store_url", "s3://b/identity")
            .load()
            .unwrap_err();
        assert!(
            err.to_string().contains("identity.object_store_url"),
            "{err}"
        );
        let err = loader()
            .set("ledger.max_connections", 0)
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("ledger.max_connections"), "{err}");
        let err = loader()
            .set("ledger.max_connections", "many")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("ledger.max_connections"), "{err}");
        // A key the section does not have: the ledger declares no options.
        let err = loader()
            .set("ledger.llm_url", "http://x")
            .load()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`ledger.llm_url`: unknown setting"),
            "{err}"
        );
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Greeting {
        greeting: String,
        times: u32,
    }

    impl Default for Greeting {
        fn default() -> Self {
            Greeting {
                greeting: "hello".into(),
                times: 1,
            }
        }
    }

    #[test]
    fn service_options_are_defaulted_checked_and_dumped() {
        let registry = registry()
            .with(ServiceSpec {
                options: Some(OptionsSpec::of::<Greeting>()),
                ..spec("example", &[])
            })
            .unwrap();
        let example = registry.get("example").unwrap();
        let config = ConfigLoader::new(&registry).without_env().load().unwrap();
        let options: Greeting =
            serde_json::from_value(serde_json::Value::Object(config.options(example))).unwrap();
        assert_eq!(options, Greeting::default());
        let dump = config.to_toml().unwrap();
        assert!(dump.contains("[example]"), "{dump}");
        assert!(dump.contains("greeting = \"hello\""), "{dump}");

        let config = ConfigLoader::new(&registry)
            .without_env()
            .set("example.greeting", "hi")
            .load()
            .unwrap();
        assert_eq!(config.options(example)["greeting"], "hi");
        assert_eq!(config.options(example)["times"], 1);

        let err = ConfigLoader::new(&registry)
            .without_env()
            .set("example.gretting", "hi")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("gretting"), "{err}");
        let err = ConfigLoader::new(&registry)
            .without_env()
            .set("example.times", "often")
            .load()
            .unwrap_err();
        assert!(err.to_string().contains("`example`"), "{err}");

        // The same section is refused where the service is not registered.
        let err = loader().set("example.greeting", "hi").load().unwrap_err();
        assert!(
            err.to_string().contains("unknown service `example`"),
            "{err}"
        );
    }

    #[test]
    fn the_dump_has_every_registered_section_and_endpoint() {
        let dump = loader().load().unwrap().to_toml().unwrap();
        for section in [
            "[server]",
            "[auth]",
            "[endpoints]",
            "[identity]",
            "[ledger]",
        ] {
            assert!(dump.contains(section), "{section} missing: {dump}");
        }
        assert!(dump.contains("identity = \"\""), "{dump}");
    }
}

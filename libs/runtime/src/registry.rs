//! The service registry: one [`ServiceSpec`] per gRPC service says everything the rest of
//! Noema needs to know about it (its name, gRPC services, schema, storage, peers, options,
//! capabilities and how to build it). The binary's roles, `noema up`/`serve`/`migrate`,
//! configuration, readiness, backup, the gateway's clients and the test clusters all
//! iterate a [`Registry`] instead of naming services by hand.
//!
//! The production list is `noema::registry::builtin()`; a test or an example extends it with
//! [`Registry::with`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use noema_store::{Database, Migrations, ObjectStore};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::Authenticator;
use crate::client::TracedChannel;
use crate::server::{GrpcServer, HostedService};

/// The role that fronts every service over REST; never a service's name.
pub const GATEWAY: &str = "gateway";

/// Top-level configuration sections that are not services (a service cannot be named so).
pub const FIXED_SECTIONS: [&str; 5] = ["server", "telemetry", "auth", "endpoints", "gateway"];

/// Files and directories of a `noema backup` that are not a service's objects.
const BACKUP_RESERVED: [&str; 3] = ["databases", "owner.token", "manifest.json"];

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Builds a service's tonic services from its context.
pub type BuildFn = fn(ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>>;

/// Everything the registry knows about one gRPC service.
pub struct ServiceSpec {
    /// Short name, e.g. `ledger`: the role (`noema serve ledger`), the configuration section
    /// (`[ledger]`, `NOEMA__LEDGER__…`), the endpoint key (`endpoints.ledger`), the default
    /// SQLite file (`<data_dir>/ledger.db`) and the Helm values key. A lowercase word.
    pub name: &'static str,
    /// Fully qualified gRPC service names it hosts (health, readiness, reflection). The
    /// first is its readiness name (the Helm chart's `grpcService`).
    pub grpc_services: &'static [&'static str],
    /// Encoded `FileDescriptorSet` with its contracts, for gRPC reflection.
    pub descriptors: &'static [u8],
    /// Its database schema. Every service owns one database.
    pub migrations: &'static Migrations,
    /// Its object store, if it has one.
    pub object_store: Option<ObjectStoreSpec>,
    /// Services it calls (beyond the token authority, which every other service calls).
    pub peers: &'static [&'static str],
    /// Service-specific settings of its configuration section, if it has any.
    pub options: Option<OptionsSpec>,
    /// Set on the one service that resolves tokens and keeps the owner token (identity).
    pub token_authority: Option<Arc<dyn TokenAuthority>>,
    /// Builds its tonic services.
    pub build: BuildFn,
}

impl fmt::Debug for ServiceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceSpec")
            .field("name", &self.name)
            .field("grpc_services", &self.grpc_services)
            .field("object_store", &self.object_store)
            .field("peers", &self.peers)
            .field("options", &self.options.is_some())
            .field("token_authority", &self.token_authority.is_some())
            .finish_non_exhaustive()
    }
}

impl ServiceSpec {
    /// The gRPC service name its readiness is reported under.
    pub fn readiness_name(&self) -> &'static str {
        self.grpc_services.first().copied().unwrap_or(self.name)
    }
}

/// Where the embedded default keeps a service's objects: a pack store under the data dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectStoreSpec {
    /// Directory of its pack store (`pack://`) under `server.data_dir`. A pack store is
    /// locked by one user, so every service has its own.
    pub default_dir: &'static str,
    /// A file-store directory (`file://`) under the data dir that earlier versions used;
    /// where it exists, it stays the default.
    pub legacy_file_dir: Option<&'static str>,
    /// Directory of its objects inside a `noema backup`.
    pub backup_dir: &'static str,
}

impl ObjectStoreSpec {
    /// A new service's store: `<data_dir>/<name>/packs`, backed up as `<name>/objects/`.
    pub const fn own(default_dir: &'static str, backup_dir: &'static str) -> ObjectStoreSpec {
        ObjectStoreSpec {
            default_dir,
            legacy_file_dir: None,
            backup_dir,
        }
    }
}

/// Service-specific settings: keys of a service's configuration section besides
/// `database_url`, `object_store_url` and `max_connections`, read as one typed struct.
#[derive(Clone, Copy)]
pub struct OptionsSpec {
    /// The defaults (shown by `noema config dump`).
    pub defaults: fn() -> Result<serde_json::Map<String, serde_json::Value>, String>,
    /// Checks a section's options; the error names what is wrong.
    pub check: fn(&serde_json::Map<String, serde_json::Value>) -> Result<(), String>,
}

impl fmt::Debug for OptionsSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OptionsSpec")
    }
}

impl OptionsSpec {
    /// Options read as `T` (make it `#[serde(default, deny_unknown_fields)]` so that a
    /// misspelt key is refused).
    pub fn of<T: Serialize + DeserializeOwned + Default>() -> OptionsSpec {
        OptionsSpec {
            defaults: defaults_of::<T>,
            check: check_as::<T>,
        }
    }
}

fn defaults_of<T: Serialize + Default>()
-> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::to_value(T::default()).map_err(|e| e.to_string())? {
        serde_json::Value::Object(map) => Ok(map),
        other => Err(format!("options must be a table, not {other}")),
    }
}

fn check_as<T: DeserializeOwned>(
    options: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    serde_json::from_value::<T>(serde_json::Value::Object(options.clone()))
        .map(drop)
        .map_err(|e| e.to_string())
}

/// The special role of identity: it checks tokens for every service and keeps the owner
/// token. Exactly one registered service may have it.
#[async_trait::async_trait]
pub trait TokenAuthority: Send + Sync + 'static {
    /// Resolves tokens against the service's own database, in the process that hosts it
    /// (elsewhere, services ask it over gRPC).
    fn local_authenticator(&self, db: Database, cache_ttl: Duration) -> Arc<dyn Authenticator>;
    /// A fresh owner token (the embedded default writes it to `<data_dir>/owner.token`).
    fn new_secret(&self) -> Result<String, BuildError>;
    /// The stored form of a token: `sha256:<hex>`.
    fn token_sha256(&self, secret: &str) -> String;
    /// Makes the token with hash `token_sha256` the owner (superuser) token.
    async fn ensure_owner(&self, db: &Database, token_sha256: &str) -> Result<(), BuildError>;
}

/// Why a service could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("no channel to {0} (not a declared peer)")]
    MissingPeer(String),
    #[error("no object store (the spec declares none)")]
    NoObjectStore,
    #[error("options: {0}")]
    Options(String),
    #[error("{0}")]
    Failed(String),
}

impl BuildError {
    /// A failure with its whole cause chain.
    pub fn failed(err: &dyn std::error::Error) -> BuildError {
        BuildError::Failed(noema_core::ErrorChain(err).to_string())
    }
}

/// What a service is built from: its opened and migrated storage, channels to its peers,
/// and its settings.
pub struct ServiceContext {
    pub name: &'static str,
    pub db: Database,
    pub objects: Option<Arc<dyn ObjectStore>>,
    /// Channels to the services it declared as peers.
    pub peers: BTreeMap<&'static str, TracedChannel>,
    /// How long it may trust what another service confirmed (`auth.cache_ttl_secs`).
    pub cache_ttl: Duration,
    /// Its service-specific options, already checked by its [`OptionsSpec`].
    pub options: serde_json::Map<String, serde_json::Value>,
    /// The process's data directory (`server.data_dir`): where the embedded default keeps
    /// its files, and what a service that runs tools keeps them away from.
    pub data_dir: std::path::PathBuf,
}

impl ServiceContext {
    /// The channel to the peer `name`.
    pub fn peer(&self, name: &str) -> Result<TracedChannel, BuildError> {
        self.peers
            .get(name)
            .cloned()
            .ok_or_else(|| BuildError::MissingPeer(name.to_owned()))
    }

    /// Its object store (declared in its spec).
    pub fn object_store(&self) -> Result<Arc<dyn ObjectStore>, BuildError> {
        self.objects.clone().ok_or(BuildError::NoObjectStore)
    }

    /// Its options as `T`.
    pub fn options<T: DeserializeOwned>(&self) -> Result<T, BuildError> {
        serde_json::from_value(serde_json::Value::Object(self.options.clone()))
            .map_err(|e| BuildError::Options(e.to_string()))
    }
}

type AddToServer = Box<dyn FnOnce(&mut GrpcServer) + Send>;

/// The tonic services a spec built, to be hosted on the process's gRPC server.
#[derive(Default)]
pub struct Hosted {
    names: Vec<&'static str>,
    adds: Vec<AddToServer>,
}

impl Hosted {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tonic service (a generated `…Server`).
    #[must_use]
    pub fn with<S: HostedService>(mut self, service: S) -> Self {
        self.names.push(S::NAME);
        self.adds.push(Box::new(move |server: &mut GrpcServer| {
            server.add_service(service);
        }));
        self
    }

    /// The fully qualified names of the services built.
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// Hosts every service on `server`.
    pub fn add_to(self, server: &mut GrpcServer) {
        for add in self.adds {
            add(server);
        }
    }
}

/// A registry that does not hold together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("service registry: {0}")]
pub struct RegistryError(pub String);

/// The registered services, in start order: a service after every service it calls.
#[derive(Debug, Clone)]
pub struct Registry {
    services: Vec<Arc<ServiceSpec>>,
}

impl Registry {
    /// A registry of `specs`, checked (unique lowercase names, known acyclic peers, at most
    /// one token authority, distinct storage directories).
    pub fn new(specs: Vec<ServiceSpec>) -> Result<Registry, RegistryError> {
        let specs: Vec<Arc<ServiceSpec>> = specs.into_iter().map(Arc::new).collect();
        check(&specs)?;
        Ok(Registry {
            services: start_order(specs)?,
        })
    }

    /// This registry with one more service.
    pub fn with(self, spec: ServiceSpec) -> Result<Registry, RegistryError> {
        let mut specs = self.services;
        specs.push(Arc::new(spec));
        check(&specs)?;
        Ok(Registry {
            services: start_order(specs)?,
        })
    }

    /// Every service, in start order.
    pub fn services(&self) -> impl Iterator<Item = &ServiceSpec> {
        self.services.iter().map(AsRef::as_ref)
    }

    /// The service named `name`.
    pub fn get(&self, name: &str) -> Option<&ServiceSpec> {
        self.services().find(|s| s.name == name)
    }

    /// Every service's name, in start order.
    pub fn names(&self) -> Vec<&'static str> {
        self.services().map(|s| s.name).collect()
    }

    /// The service that resolves tokens (identity), if one is registered.
    pub fn token_authority(&self) -> Option<(&ServiceSpec, &dyn TokenAuthority)> {
        self.services()
            .find_map(|s| s.token_authority.as_deref().map(|authority| (s, authority)))
    }

    /// The services `spec` calls: its peers and, unless it is the token authority itself,
    /// the token authority (for authentication), sorted.
    pub fn calls(&self, spec: &ServiceSpec) -> Vec<&'static str> {
        let mut calls: BTreeSet<&'static str> = spec.peers.iter().copied().collect();
        if let Some((authority, _)) = self.token_authority()
            && authority.name != spec.name
        {
            calls.insert(authority.name);
        }
        calls.into_iter().collect()
    }

    /// The service hosting the fully qualified gRPC service `grpc_service`.
    pub fn hosting(&self, grpc_service: &str) -> Option<&ServiceSpec> {
        self.services()
            .find(|s| s.grpc_services.contains(&grpc_service))
    }
}

fn is_word(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// `a` is `b` or a directory above it, or the other way round.
fn nested(a: &str, b: &str) -> bool {
    let under = |x: &str, y: &str| x == y || x.starts_with(&format!("{y}/"));
    under(a, b) || under(b, a)
}

fn check(specs: &[Arc<ServiceSpec>]) -> Result<(), RegistryError> {
    let err = |text: String| Err(RegistryError(text));
    let names: BTreeSet<&str> = specs.iter().map(|s| s.name).collect();
    if names.len() != specs.len() {
        return err("two services have the same name".into());
    }
    let mut grpc = BTreeSet::new();
    let mut dirs: Vec<(&str, &str)> = Vec::new();
    let mut backup_dirs: Vec<(&str, &str)> = Vec::new();
    for spec in specs {
        let name = spec.name;
        if !is_word(name) {
            return err(format!(
                "`{name}` is not a lowercase word (a-z, then a-z or 0-9)"
            ));
        }
        if FIXED_SECTIONS.contains(&name) {
            return err(format!(
                "`{name}` names a configuration section or the gateway, not a service"
            ));
        }
        if spec.grpc_services.is_empty() {
            return err(format!("{name}: no gRPC services"));
        }
        for service in spec.grpc_services {
            if !grpc.insert(*service) {
                return err(format!("{name}: {service} is hosted by two services"));
            }
        }
        for peer in spec.peers {
            if *peer == name || !names.contains(peer) {
                return err(format!(
                    "{name}: peer `{peer}` is not another registered service"
                ));
            }
        }
        if let Some(store) = &spec.object_store {
            let mut own = vec![store.default_dir];
            own.extend(store.legacy_file_dir);
            for dir in own {
                if dir.is_empty() || dir.starts_with('/') || dir.split('/').any(|p| p == "..") {
                    return err(format!("{name}: `{dir}` is not a relative directory"));
                }
                if let Some((other, _)) = dirs.iter().find(|(_, d)| nested(d, dir)) {
                    return err(format!("{name} and {other} share the directory `{dir}`"));
                }
                dirs.push((name, dir));
            }
            let backup = store.backup_dir;
            if backup.is_empty() || BACKUP_RESERVED.iter().any(|r| nested(r, backup)) {
                return err(format!(
                    "{name}: `{backup}` cannot hold objects in a backup"
                ));
            }
            if let Some((other, _)) = backup_dirs.iter().find(|(_, d)| nested(d, backup)) {
                return err(format!(
                    "{name} and {other} share the backup directory `{backup}`"
                ));
            }
            backup_dirs.push((name, backup));
        }
    }
    if specs.iter().filter(|s| s.token_authority.is_some()).count() > 1 {
        return err("more than one service is a token authority".into());
    }
    Ok(())
}

/// Orders `specs` so that every service comes after the services it calls (the token
/// authority first), keeping registration order otherwise.
fn start_order(specs: Vec<Arc<ServiceSpec>>) -> Result<Vec<Arc<ServiceSpec>>, RegistryError> {
    let authority = specs
        .iter()
        .find(|s| s.token_authority.is_some())
        .map(|s| s.name);
    let calls = |spec: &ServiceSpec| -> Vec<&'static str> {
        let mut calls: Vec<&'static str> = spec.peers.to_vec();
        calls.extend(authority.filter(|a| *a != spec.name));
        calls
    };
    let mut pending = specs;
    let mut ordered: Vec<Arc<ServiceSpec>> = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let ready = pending.iter().position(|spec| {
            calls(spec)
                .iter()
                .all(|peer| ordered.iter().any(|done| done.name == *peer))
        });
        match ready {
            Some(index) => ordered.push(pending.remove(index)),
            None => {
                let names: Vec<&str> = pending.iter().map(|s| s.name).collect();
                return Err(RegistryError(format!(
                    "services call each other in a cycle: {}",
                    names.join(", ")
                )));
            }
        }
    }
    Ok(ordered)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod testing {
    //! Specs for the runtime's own tests.

    use super::*;

    /// Like the ledger: a pack store in `packs/`, a legacy file store in `objects/`.
    pub fn ledger() -> ServiceSpec {
        ServiceSpec {
            object_store: Some(ObjectStoreSpec {
                default_dir: "packs",
                legacy_file_dir: Some("objects"),
                backup_dir: "objects",
            }),
            ..spec("ledger", &["identity"])
        }
    }

    /// `identity` and `ledger`, shaped like the production ones.
    pub fn registry() -> Registry {
        Registry::new(vec![spec("identity", &[]), ledger()]).unwrap()
    }

    /// No migrations: these specs are never opened.
    pub static MIGRATIONS: Migrations = Migrations {
        service: "test",
        sqlite: sqlx::migrate::Migrator::DEFAULT,
        postgres: sqlx::migrate::Migrator::DEFAULT,
    };

    fn never_built(_: ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>> {
        Box::pin(async { Err(BuildError::Failed("not built in these tests".into())) })
    }

    /// A spec named `name` calling `peers`.
    pub fn spec(name: &'static str, peers: &'static [&'static str]) -> ServiceSpec {
        ServiceSpec {
            name,
            grpc_services: Box::leak(Box::new([&*Box::leak(
                format!("noema.{name}.v1.Service").into_boxed_str(),
            )])),
            descriptors: &[],
            migrations: &MIGRATIONS,
            object_store: None,
            peers,
            options: None,
            token_authority: None,
            build: never_built,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::testing::spec;
    use super::*;

    #[test]
    fn services_start_after_their_peers() {
        let registry = Registry::new(vec![
            spec("world", &["ledger", "identity"]),
            spec("ledger", &["identity"]),
            spec("identity", &[]),
        ])
        .unwrap();
        assert_eq!(registry.names(), ["identity", "ledger", "world"]);
    }

    #[test]
    fn a_bad_registry_is_refused_with_the_reason() {
        let cases: Vec<(Vec<ServiceSpec>, &str)> = vec![
            (vec![spec("a", &[]), spec("a", &[])], "same name"),
            (vec![spec("Ledger", &[])], "lowercase"),
            (vec![spec("gateway", &[])], "not a service"),
            (vec![spec("endpoints", &[])], "not a service"),
            (vec![spec("a", &["b"])], "peer `b`"),
            (vec![spec("a", &["a"])], "peer `a`"),
            (vec![spec("a", &["b"]), spec("b", &["a"])], "cycle"),
        ];
        for (specs, expected) in cases {
            let err = Registry::new(specs).unwrap_err();
            assert!(err.to_string().contains(expected), "{err} lacks {expected}");
        }
    }

    #[test]
    fn object_store_directories_are_never_shared() {
        let with_store = |name, store| ServiceSpec {
            object_store: Some(store),
            ..spec(name, &[])
        };
        let err = Registry::new(vec![
            with_store("a", ObjectStoreSpec::own("a/packs", "a/objects")),
            with_store("b", ObjectStoreSpec::own("a", "b/objects")),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("share the directory"), "{err}");
        let err = Registry::new(vec![
            with_store("a", ObjectStoreSpec::own("a/packs", "objects")),
            with_store("b", ObjectStoreSpec::own("b/packs", "objects/b")),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("backup directory"), "{err}");
        let err = Registry::new(vec![with_store(
            "a",
            ObjectStoreSpec::own("a/packs", "databases"),
        )])
        .unwrap_err();
        assert!(err.to_string().contains("cannot hold objects"), "{err}");
        Registry::new(vec![
            with_store("a", ObjectStoreSpec::own("a/packs", "a/objects")),
            with_store("b", ObjectStoreSpec::own("b/packs", "b/objects")),
        ])
        .unwrap();
    }

    #[test]
    fn with_adds_a_service_in_peer_order() {
        let registry = Registry::new(vec![spec("identity", &[]), spec("ledger", &["identity"])])
            .unwrap()
            .with(spec("example", &["ledger"]))
            .unwrap();
        assert_eq!(registry.names(), ["identity", "ledger", "example"]);
        assert!(registry.get("example").is_some());
        assert_eq!(
            registry.hosting("noema.example.v1.Service").map(|s| s.name),
            Some("example")
        );
        let err = registry.with(spec("example", &[])).unwrap_err();
        assert!(err.to_string().contains("same name"), "{err}");
    }
}

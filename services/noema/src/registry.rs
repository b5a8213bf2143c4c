//! The production service registry: the one list of the services the `noema` binary runs.
//! Everything else (roles, `noema up`/`serve`/`migrate`, configuration sections and
//! endpoints, readiness, backup and restore, the gateway's upstreams, the test clusters and
//! the Helm values check) is derived from it. Adding a service adds one entry here
//! (ARCHITECTURE.md lists the rest).

use std::sync::Arc;
use std::time::Duration;

use noema_runtime::auth::Authenticator;
use noema_runtime::registry::{
    BoxFuture, BuildError, Hosted, ObjectStoreSpec, OptionsSpec, RegistryError, ServiceContext,
    ServiceSpec, TokenAuthority,
};
use noema_store::Database;

pub use noema_runtime::registry::Registry;

/// Every service of the `noema` binary. A test or an example extends it with
/// [`Registry::with`].
pub fn builtin() -> Result<Registry, RegistryError> {
    Registry::new(vec![
        identity(),
        ledger(),
        continuity(),
        orchestrator(),
        world(),
    ])
}

/// Agents, keys, tokens and signed diaries (seed 004); checks every service's tokens.
fn identity() -> ServiceSpec {
    ServiceSpec {
        name: "identity",
        grpc_services: &[
            noema_identity::SERVICE_NAME,
            noema_identity::DIARY_SERVICE_NAME,
        ],
        descriptors: noema_proto::FILE_DESCRIPTOR_SET,
        migrations: &noema_identity::MIGRATIONS,
        object_store: None,
        peers: &[],
        options: None,
        token_authority: Some(Arc::new(IdentityTokens)),
        build: build_identity,
    }
}

fn build_identity(ctx: ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>> {
    Box::pin(async move {
        let service = noema_identity::service(ctx.db.clone())
            .await
            .map_err(|e| BuildError::failed(&e))?;
        Ok(Hosted::new()
            .with(service)
            .with(noema_identity::diary_service(ctx.db)))
    })
}

/// Identity's tokens, for the auth layer of every service and the owner token.
struct IdentityTokens;

#[async_trait::async_trait]
impl TokenAuthority for IdentityTokens {
    fn local_authenticator(&self, db: Database, cache_ttl: Duration) -> Arc<dyn Authenticator> {
        noema_identity::local_authenticator(db, cache_ttl)
    }

    fn new_secret(&self) -> Result<String, BuildError> {
        noema_identity::generate_secret().map_err(|e| BuildError::failed(&e))
    }

    fn token_sha256(&self, secret: &str) -> String {
        noema_identity::token_sha256(secret)
    }

    async fn ensure_owner(&self, db: &Database, token_sha256: &str) -> Result<(), BuildError> {
        noema_identity::ensure_owner_token(db.clone(), token_sha256)
            .await
            .map(drop)
            .map_err(|e| BuildError::failed(&e))
    }
}

/// Canonical objects, signed references, the system mode and the audit chain (seed 000).
fn ledger() -> ServiceSpec {
    ServiceSpec {
        name: "ledger",
        grpc_services: &[noema_ledger::SERVICE_NAME],
        descriptors: noema_proto::FILE_DESCRIPTOR_SET,
        migrations: &noema_ledger::MIGRATIONS,
        // `<data_dir>/packs`, or the `objects/` file store of a data dir from before the
        // pack store; `objects/` in a backup (the layout backups have always had).
        object_store: Some(ObjectStoreSpec {
            default_dir: "packs",
            legacy_file_dir: Some("objects"),
            backup_dir: "objects",
        }),
        peers: &["identity"],
        options: None,
        token_authority: None,
        build: build_ledger,
    }
}

fn build_ledger(ctx: ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>> {
    Box::pin(async move {
        let deps = noema_ledger::Dependencies {
            objects: ctx.object_store()?,
            identity: ctx.peer("identity")?,
            key_cache_ttl: ctx.cache_ttl,
        };
        let service = noema_ledger::service(ctx.db, deps)
            .await
            .map_err(|e| BuildError::failed(&e))?;
        Ok(Hosted::new().with(service))
    })
}

/// CogniRelay's continuity capsules per tenant, their tiers and plans (seed 001). Its object
/// store holds the cold tier's gzip payloads; identity confirms the agent keys of signed
/// coordination writes.
fn continuity() -> ServiceSpec {
    ServiceSpec {
        name: "continuity",
        grpc_services: &[noema_continuity::SERVICE_NAME],
        descriptors: noema_proto::FILE_DESCRIPTOR_SET,
        migrations: &noema_continuity::MIGRATIONS,
        object_store: Some(ObjectStoreSpec::own(
            "continuity/packs",
            "continuity/objects",
        )),
        peers: &["identity"],
        options: Some(OptionsSpec::of::<noema_continuity::Options>()),
        token_authority: None,
        build: build_continuity,
    }
}

fn build_continuity(ctx: ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>> {
    Box::pin(async move {
        let options = ctx.options::<noema_continuity::Options>()?;
        let service = noema_continuity::service(
            ctx.db.clone(),
            ctx.object_store()?,
            options,
            ctx.peer("identity")?,
        )
        .await
        .map_err(|e| BuildError::failed(&e))?;
        Ok(Hosted::new().with(service))
    })
}

/// The world kernel (seed 003): components, worlds, attempted turns over its own database;
/// the ledger anchors turn hashes (`world.anchor`).
fn world() -> ServiceSpec {
    ServiceSpec {
        name: "world",
        grpc_services: &[noema_world::SERVICE_NAME],
        descriptors: noema_proto::FILE_DESCRIPTOR_SET,
        migrations: &noema_world::MIGRATIONS,
        object_store: None,
        peers: &["identity", "ledger"],
        options: Some(OptionsSpec::of::<noema_world::WorldOptions>()),
        token_authority: None,
        build: build_world,
    }
}

fn build_world(ctx: ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>> {
    Box::pin(async move {
        let options: noema_world::WorldOptions = ctx.options()?;
        let problems = options.problems();
        if !problems.is_empty() {
            return Err(BuildError::Options(problems.join("; ")));
        }
        let world = noema_world::WorldBuilder::new(ctx.db.clone(), options)
            .ledger(ctx.peer("ledger")?)
            .build()
            .await
            .map_err(|e| BuildError::failed(&e))?;
        Ok(Hosted::new().with(noema_world::service(world)))
    })
}

/// The Cognitive OS governed runtime (seed 002): plan, risk, approval, execution, trace,
/// evaluation and reward under a risk policy. Identity vouches for approvers' keys; the
/// ledger anchors objects and serves the `noema.put_canonical` tool.
fn orchestrator() -> ServiceSpec {
    ServiceSpec {
        name: "orchestrator",
        grpc_services: &[noema_orchestrator::SERVICE_NAME],
        descriptors: noema_proto::FILE_DESCRIPTOR_SET,
        migrations: &noema_orchestrator::MIGRATIONS,
        object_store: None,
        peers: &["identity", "ledger"],
        options: Some(OptionsSpec::of::<noema_orchestrator::Options>()),
        token_authority: None,
        build: build_orchestrator,
    }
}

fn build_orchestrator(ctx: ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>> {
    Box::pin(async move {
        let options: noema_orchestrator::Options = ctx.options()?;
        let deps = noema_orchestrator::Dependencies {
            identity: ctx.peer("identity")?,
            ledger: ctx.peer("ledger")?,
            data_dir: ctx.data_dir.clone(),
        };
        let service = noema_orchestrator::service(ctx.db, &options, deps)
            .await
            .map_err(|e| BuildError::failed(&e))?;
        Ok(Hosted::new().with(service))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use noema_runtime::config::ConfigLoader;

    use super::*;

    #[test]
    fn the_builtin_registry_holds_together() {
        let registry = builtin().unwrap();
        assert_eq!(
            registry.names(),
            ["identity", "ledger", "continuity", "orchestrator", "world"]
        );
        let (authority, _) = registry.token_authority().unwrap();
        assert_eq!(authority.name, "identity");
        let ledger = registry.get("ledger").unwrap();
        assert_eq!(registry.calls(ledger), ["identity"]);
        assert_eq!(registry.calls(authority), Vec::<&str>::new());
        let continuity = registry.get("continuity").unwrap();
        assert_eq!(registry.calls(continuity), ["identity"]);
        let orchestrator = registry.get("orchestrator").unwrap();
        assert_eq!(registry.calls(orchestrator), ["identity", "ledger"]);
        let world = registry.get("world").unwrap();
        assert_eq!(registry.calls(world), ["identity", "ledger"]);
    }

    #[test]
    fn defaults_are_valid_and_embedded() {
        let registry = builtin().unwrap();
        let config = ConfigLoader::new(&registry).without_env().load().unwrap();
        let ledger = registry.get("ledger").unwrap();
        let identity = registry.get("identity").unwrap();
        assert_eq!(
            config.database_url(ledger),
            "sqlite://./noema-data/ledger.db"
        );
        assert_eq!(
            config.database_url(identity),
            "sqlite://./noema-data/identity.db"
        );
        assert_eq!(
            config.object_store_url(ledger).as_deref(),
            Some("pack://./noema-data/packs")
        );
        assert_eq!(config.object_store_url(identity), None);
    }

    #[test]
    fn a_data_dir_of_an_earlier_version_keeps_its_file_store() {
        let registry = builtin().unwrap();
        let ledger = registry.get("ledger").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = ConfigLoader::new(&registry)
            .without_env()
            .set("server.data_dir", dir.path().display().to_string())
            .load()
            .unwrap();
        let packs = format!("pack://{}", dir.path().join("packs").display());
        assert_eq!(config.object_store_url(ledger), Some(packs));
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        let objects = format!("file://{}", dir.path().join("objects").display());
        assert_eq!(config.object_store_url(ledger), Some(objects));
    }
}

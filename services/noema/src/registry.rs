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
    Registry::new(vec![identity(), ledger(), orchestrator()])
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
        assert_eq!(registry.names(), ["identity", "ledger", "orchestrator"]);
        let (authority, _) = registry.token_authority().unwrap();
        assert_eq!(authority.name, "identity");
        let ledger = registry.get("ledger").unwrap();
        assert_eq!(registry.calls(ledger), ["identity"]);
        let orchestrator = registry.get("orchestrator").unwrap();
        assert_eq!(registry.calls(orchestrator), ["identity", "ledger"]);
        assert_eq!(registry.calls(authority), Vec::<&str>::new());
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

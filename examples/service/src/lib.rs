//! An example service, registered in exactly one place ([`registry`]): with that one entry
//! it is served by `noema up` and `noema serve example` (the `noema-example` binary runs the
//! same command line as `noema`), in every test cluster shape, with its own configuration
//! section and endpoint, migrations, readiness, reflection and backup. The tests in
//! `tests/` prove it. It is never part of the `noema` binary.
//!
//! Its one RPC counts visits in its own table, keeps a postcard per visit in its own object
//! store and asks its peer, the ledger, for the system mode.

pub mod api;
pub mod error;
pub mod store;
pub mod visits;

use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::Registry;
use noema_runtime::registry::{
    BoxFuture, BuildError, Hosted, ObjectStoreSpec, OptionsSpec, RegistryError, ServiceContext,
    ServiceSpec,
};
use serde::{Deserialize, Serialize};

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/noema.example.v1.rs"));
}

/// The gRPC service name, as registered for health, readiness and reflection.
pub const SERVICE_NAME: &str = "noema.example.v1.ExampleService";

/// Encoded `FileDescriptorSet` of the example's contract, for reflection.
pub const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/example_descriptor.bin"));

pub static MIGRATIONS: noema_store::Migrations = noema_store::Migrations {
    service: "example",
    sqlite: sqlx::migrate!("migrations/sqlite"),
    postgres: sqlx::migrate!("migrations/postgres"),
};

/// The `[example]` section's own settings (`NOEMA__EXAMPLE__GREETING`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Sent back with every visit.
    pub greeting: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            greeting: "hello".into(),
        }
    }
}

/// The example's registry entry.
pub fn spec() -> ServiceSpec {
    ServiceSpec {
        name: "example",
        grpc_services: &[SERVICE_NAME],
        descriptors: DESCRIPTORS,
        migrations: &MIGRATIONS,
        object_store: Some(ObjectStoreSpec::own("example/packs", "example/objects")),
        peers: &["ledger"],
        options: Some(OptionsSpec::of::<Options>()),
        token_authority: None,
        build,
    }
}

/// The production registry with the example service: its one registration.
pub fn registry() -> Result<Registry, RegistryError> {
    noema::registry::builtin()?.with(spec())
}

fn build(ctx: ServiceContext) -> BoxFuture<'static, Result<Hosted, BuildError>> {
    Box::pin(async move {
        let options: Options = ctx.options()?;
        let visits = visits::Visits::new(
            store::VisitStore::new(ctx.db.clone()),
            ctx.object_store()?,
            LedgerServiceClient::new(ctx.peer("ledger")?),
            options.greeting,
        );
        Ok(
            Hosted::new().with(pb::example_service_server::ExampleServiceServer::new(
                api::ExampleApi::new(visits),
            )),
        )
    })
}

//! The world kernel (issue 19, seed 003): explicitly authored cognition workflows, ambient
//! context sources, model-elected tools, source invocation traces, and WorldPatch as the only
//! way the world changes — served as `noema.world.v1.WorldService`.
//!
//! `api` adapts gRPC, `ops` holds the use cases (the kernel's turn loop among them),
//! `domain` the rules, `store` the SQL, `sources` the source implementations.

pub mod api;
pub mod domain;
pub mod error;
pub mod ops;
pub mod options;
pub mod sources;
pub mod store;

use std::sync::Arc;

use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_proto::world::v1::world_service_server::WorldServiceServer;
use noema_runtime::client::TracedChannel;
use noema_store::Database;
use noema_tools::http_json::HttpJsonClient;

pub use error::WorldError;
pub use ops::World;
pub use options::WorldOptions;
pub use store::{MIGRATIONS, WorldStore};

use crate::domain::source::SourceKind;
use crate::sources::{LlmDefaults, SourceEnv, SourceFactory, SourceRegistry};

/// The gRPC service name, as registered for health and reflection.
pub const SERVICE_NAME: &str = "noema.world.v1.WorldService";

/// Largest gRPC message the world service accepts or sends (a turn record of a big world).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// What the world service is built from.
pub struct WorldBuilder {
    db: Database,
    options: WorldOptions,
    ledger: Option<TracedChannel>,
    extra_kinds: Vec<(Arc<dyn SourceKind>, Arc<dyn SourceFactory>)>,
}

impl WorldBuilder {
    pub fn new(db: Database, options: WorldOptions) -> WorldBuilder {
        WorldBuilder {
            db,
            options,
            ledger: None,
            extra_kinds: Vec::new(),
        }
    }

    /// The ledger, for anchoring turns (`world.anchor`) and checking anchors.
    #[must_use]
    pub fn ledger(mut self, channel: TracedChannel) -> WorldBuilder {
        self.ledger = Some(channel);
        self
    }

    /// One more source kind (D20: MCP would be one), beside `llm_chat_completions` and
    /// `http_json`.
    #[must_use]
    pub fn source_kind(
        mut self,
        kind: Arc<dyn SourceKind>,
        factory: Arc<dyn SourceFactory>,
    ) -> WorldBuilder {
        self.extra_kinds.push((kind, factory));
        self
    }

    /// The operations over an already-migrated database: built-ins stored, attempts of a
    /// stopped process interrupted, and the sweep that keeps doing so started.
    pub async fn build(self) -> Result<Arc<World>, WorldError> {
        let problems = self.options.problems();
        if !problems.is_empty() {
            return Err(WorldError::InvalidArgument(problems.join("; ")));
        }
        let env = Arc::new(SourceEnv::new(self.options.source_env.clone()));
        let http_json = HttpJsonClient::new()
            .map_err(|e| WorldError::Internal(format!("HTTP JSON client: {e}")))?;
        let llm = LlmDefaults {
            base_url: self.options.llm.base_url.clone(),
            api_key_env: self.options.llm.api_key_env.clone(),
            timeout: std::time::Duration::from_millis(self.options.llm.timeout_ms),
        };
        let mut sources = SourceRegistry::standard(http_json, llm, env)
            .map_err(|e| WorldError::Internal(format!("HTTP client: {e}")))?;
        for (kind, factory) in self.extra_kinds {
            sources = sources.with(kind, factory);
        }
        let world = Arc::new(World::new(
            WorldStore::new(self.db),
            sources,
            self.options,
            self.ledger.map(LedgerServiceClient::new),
        ));
        world.ensure_builtins().await?;
        world.recover().await?;
        ops::recovery::spawn_sweeper(Arc::downgrade(&world), world.sweep_interval());
        Ok(world)
    }
}

/// The gRPC service over `world`.
pub fn service(world: Arc<World>) -> WorldServiceServer<api::WorldApi> {
    WorldServiceServer::new(api::WorldApi::new(world))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// Property-test settings for this crate's parsers of outside input: few enough cases to
/// run in every `scripts/test`, no regression files written into the source tree.
#[cfg(test)]
pub(crate) fn proptest_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: 96,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

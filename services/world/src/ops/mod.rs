//! The world service's use cases, the layer between the gRPC adapter (`api`) and the store:
//! each loads what it needs, checks it with the domain's rules, and writes.
//!
//! - [`components`]: putting and reading components, assembling and forking scenarios;
//! - [`worlds`]: creating worlds and reading their history (turns, diffs, events, entity
//!   histories), and verifying its hash chain (and ledger anchors);
//! - [`kernel`]: running one attempted turn under the world's lease;
//! - [`recovery`]: marking attempts whose process stopped `interrupted`;
//! - [`anchor`]: anchoring committed turns in the ledger.

pub mod anchor;
pub mod components;
pub mod kernel;
pub mod recovery;
pub mod worlds;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;

use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::client::TracedChannel;
use time::OffsetDateTime;
use tonic::metadata::{Ascii, MetadataValue};

use crate::domain::assembly::AssembledScenario;
use crate::domain::hash::ContentHash;
use crate::options::WorldOptions;
use crate::sources::SourceRegistry;
use crate::store::{TraceWriter, WorldStore};

/// Who is asking: their principal's peer id (audit entries name it) and their token, which
/// calls to the ledger (anchoring) are made with.
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: String,
    pub authorization: Option<MetadataValue<Ascii>>,
}

impl Caller {
    /// A caller without a token (tests of the store and kernel below the gRPC layer).
    pub fn local(actor: &str) -> Caller {
        Caller {
            actor: actor.to_owned(),
            authorization: None,
        }
    }
}

/// Paging: where a listing starts and how many items it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub offset: u64,
    pub limit: u32,
}

impl Page {
    pub const DEFAULT_LIMIT: u32 = 100;
    pub const MAX_LIMIT: u32 = 1000;

    /// `size` clamped to 1..=MAX (0: the default), from `offset`.
    pub fn new(offset: u64, size: u32) -> Page {
        let limit = match size {
            0 => Page::DEFAULT_LIMIT,
            n => n.min(Page::MAX_LIMIT),
        };
        Page { offset, limit }
    }

    /// The offset of the next page, if this one came back full.
    pub fn next(&self, returned: usize) -> Option<u64> {
        // The offset comes from a client's page token: any u64, so the sum saturates.
        (returned >= self.limit as usize).then(|| self.offset.saturating_add(u64::from(self.limit)))
    }
}

/// Assembled scenarios by hash: scenarios and everything they reference are immutable, so
/// an assembly never goes stale.
#[derive(Default)]
pub(crate) struct AssemblyCache {
    scenarios: Mutex<BTreeMap<ContentHash, Arc<AssembledScenario>>>,
}

/// How many assembled scenarios are kept.
const CACHED_ASSEMBLIES: usize = 64;

impl AssemblyCache {
    fn get(&self, hash: &ContentHash) -> Option<Arc<AssembledScenario>> {
        self.scenarios.lock().ok()?.get(hash).cloned()
    }

    fn put(&self, assembled: Arc<AssembledScenario>) {
        if let Ok(mut scenarios) = self.scenarios.lock() {
            if scenarios.len() >= CACHED_ASSEMBLIES
                && let Some(oldest) = scenarios.keys().next().cloned()
            {
                scenarios.remove(&oldest);
            }
            scenarios.insert(assembled.scenario_hash.clone(), assembled);
        }
    }
}

/// The world service: its store, its sources and its settings.
pub struct World {
    pub(crate) store: WorldStore,
    pub(crate) trace: TraceWriter,
    pub(crate) sources: SourceRegistry,
    pub(crate) options: WorldOptions,
    pub(crate) ledger: Option<LedgerServiceClient<TracedChannel>>,
    /// Names this process in leases (`<host>/<pid>/<random>`).
    pub(crate) owner: String,
    pub(crate) assemblies: AssemblyCache,
}

impl World {
    pub fn new(
        store: WorldStore,
        sources: SourceRegistry,
        options: WorldOptions,
        ledger: Option<LedgerServiceClient<TracedChannel>>,
    ) -> World {
        World {
            trace: TraceWriter::start(store.clone()),
            store,
            sources,
            options,
            ledger,
            owner: process_owner(),
            assemblies: AssemblyCache::default(),
        }
    }

    pub fn store(&self) -> &WorldStore {
        &self.store
    }

    pub fn options(&self) -> &WorldOptions {
        &self.options
    }
}

/// This process's name in leases and attempts.
fn process_owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{host}/{}/{}",
        std::process::id(),
        nonce.get(..8).unwrap_or_default()
    )
}

/// Now, in UTC (every stored time is UTC, so stored texts order as times do).
pub(crate) fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

#[cfg(test)]
mod properties {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        /// Any page token's offset and size make a page, and the next one never goes back.
        #[test]
        fn any_page_request_makes_a_page(offset in proptest::prelude::any::<u64>(), size in proptest::prelude::any::<u32>(), returned in 0usize..2000) {
            let page = Page::new(offset, size);
            proptest::prop_assert!((1..=Page::MAX_LIMIT).contains(&page.limit));
            if let Some(next) = page.next(returned) {
                proptest::prop_assert!(next >= offset);
            }
        }
    }
}

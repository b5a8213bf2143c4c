//! Continuity's use cases: each loads what its rule needs through the store, asks the
//! domain, and hands the store the write (which lands in one audited transaction, or is
//! refused because a concurrent writer moved the state first, and then the rule runs again
//! on the new state). One file per aggregate: capsule writes, reads, tiers (archive,
//! delete), plans, the cold tier and its jobs, the backup drill.

mod artifacts;
mod capsules;
mod cold;
mod context;
mod context_inputs;
mod coordination;
mod in_flight;
mod memory;
mod messages;
mod metrics;
mod plans;
mod reads;
mod schedule;
mod signing;
mod tasks;
mod tiers;

use std::sync::{Arc, OnceLock};

use noema_core::audit::AuditDraft;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_runtime::client::TracedChannel;
use noema_store::ObjectStore;
use serde_json::Value;
use time::OffsetDateTime;

use crate::domain::access::Caller;
use crate::domain::error::ContinuityError;
use crate::domain::json::Json;
use crate::domain::listing::PreparedRow;
use crate::domain::model::Capsule;
use crate::domain::read::{Loaded, load_stored, loaded_as};
use crate::domain::subject::SubjectKey;
use crate::store::ContinuityStore;

pub use artifacts::ArtifactCheck;
pub use capsules::Written;
pub use context::{ContextInputs, SEARCH, SearchQuery};
pub use context_inputs::StoreInputs;
pub use messages::MESSAGES;
pub use reads::{History, ReadAnswer};
pub use schedule::ScheduleCreated;

/// How many times a write re-reads and re-applies its rule when concurrent writers move the
/// subject first, before it answers the original's lock-timeout 409.
pub const WRITE_ATTEMPTS: u32 = 12;
/// Parsed capsules kept in memory, by revision id (revisions never change).
const CACHED_CAPSULES: usize = 8192;

/// Service settings (the `[continuity]` section).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Archives older than this many days are `archive_stale` (the original's
    /// `COGNIRELAY_CONTINUITY_RETENTION_ARCHIVE_DAYS`).
    pub retention_archive_days: i64,
    /// Sends and relay forwards must carry a signed envelope (the original's
    /// `COGNIRELAY_REQUIRE_SIGNED_INGRESS`).
    pub require_signed_ingress: bool,
    /// Signed-envelope verification failures a caller may have within the window before its
    /// verifications are refused unchecked (`COGNIRELAY_VERIFY_FAILURE_LIMIT`).
    pub verify_failure_limit: u64,
    /// That window, in seconds, at least 60 (`COGNIRELAY_VERIFY_FAILURE_WINDOW_SECONDS`).
    pub verify_failure_window_seconds: i64,
    /// `/v1/metrics` alarms when more tracked messages than this await their ack, at least 1
    /// (`COGNIRELAY_BACKLOG_ALARM_THRESHOLD`).
    pub backlog_alarm_threshold: i64,
    /// `/v1/metrics` alarms on more verification failures than this in the window, at least 1
    /// (`COGNIRELAY_VERIFICATION_ALARM_THRESHOLD`).
    pub verification_alarm_threshold: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retention_archive_days: crate::domain::listing::RETENTION_ARCHIVE_DAYS,
            require_signed_ingress: false,
            verify_failure_limit: 20,
            verify_failure_window_seconds: 600,
            backlog_alarm_threshold: crate::domain::metrics::BACKLOG_ALARM_THRESHOLD,
            verification_alarm_threshold: crate::domain::metrics::VERIFICATION_ALARM_THRESHOLD,
        }
    }
}

/// Prepared list rows by revision id.
type RowCache = quick_cache::sync::Cache<String, Arc<PreparedRow>>;

/// A tenant's last complete list rows, with the pointers they were prepared from.
struct ListedRows {
    pointers: Arc<[crate::store::Pointers]>,
    rows: Arc<[Arc<PreparedRow>]>,
}

/// Tenants whose last list rows are kept (by tenant and whether fallbacks are shown).
const LISTED_TENANTS: usize = 256;

/// A revision as the read paths use it, worked out once. Revisions are immutable, so an
/// entry is never stale, and one lookup finds all of it.
struct LoadedRevision {
    loaded: Loaded,
    /// `capsule_sha256` of its stored bytes.
    sha256: String,
    /// Its capsule as a read shows it, serialised at its first read.
    read_json: OnceLock<Arc<str>>,
}

impl LoadedRevision {
    /// The capsule's JSON as a read shows it, `None` if it does not load.
    fn read_json(&self) -> Option<Arc<str>> {
        let (capsule, _) = self.loaded.as_ref().ok()?;
        Some(Arc::clone(self.read_json.get_or_init(|| {
            crate::domain::json::to_py_json(&capsule.to_json()).into()
        })))
    }
}

pub struct Continuity {
    store: ContinuityStore,
    objects: Arc<dyn ObjectStore>,
    options: Options,
    /// Each revision as the read path loads it.
    capsules: quick_cache::sync::Cache<String, Arc<LoadedRevision>>,
    /// Each revision's list row as an active capsule and as a fallback snapshot, prepared
    /// once (see [`PreparedRow`]).
    active_rows: RowCache,
    fallback_rows: RowCache,
    /// Each tenant's last list rows (see `listed_rows`).
    listed: quick_cache::sync::Cache<(String, bool), Arc<ListedRows>>,
    /// Capsule writes in flight per subject (hot subjects' writers build on each other).
    in_flight: in_flight::InFlight,
    /// Memory files, search, tasks and schedule for context bundles (not continuity's own).
    inputs: Arc<dyn ContextInputs>,
    /// Recent signed-envelope verification failures per caller (the throttle).
    failures: messages::VerifyFailures,
    /// Identity, which confirms the agent keys of signed coordination writes (none: such
    /// writes are refused, unsigned ones work as the original's).
    identity: Option<IdentityServiceClient<TracedChannel>>,
}

impl Continuity {
    pub fn new(store: ContinuityStore, objects: Arc<dyn ObjectStore>, options: Options) -> Self {
        let inputs = Arc::new(StoreInputs::new(store.clone()));
        Continuity {
            store,
            objects,
            options,
            capsules: quick_cache::sync::Cache::new(CACHED_CAPSULES),
            active_rows: RowCache::new(CACHED_CAPSULES),
            fallback_rows: RowCache::new(CACHED_CAPSULES),
            listed: quick_cache::sync::Cache::new(LISTED_TENANTS),
            in_flight: in_flight::InFlight::default(),
            inputs,
            failures: messages::VerifyFailures::default(),
            identity: None,
        }
    }

    /// Asks `identity` to confirm the agent keys of signed coordination writes.
    pub fn with_identity(mut self, identity: TracedChannel) -> Self {
        self.identity = Some(IdentityServiceClient::new(identity));
        self
    }

    pub fn store(&self) -> &ContinuityStore {
        &self.store
    }

    /// A revision's capsule loaded for reading (legacy upgrade, related_documents
    /// sanitised, model validated), from the cache when it was loaded before.
    fn load(&self, revision_id: &str, bytes: &[u8]) -> Arc<LoadedRevision> {
        if let Some(revision) = self.capsules.get(revision_id) {
            return revision;
        }
        let revision = Arc::new(LoadedRevision {
            loaded: load_stored(bytes),
            sha256: noema_core::content_id::sha256_hex(bytes),
            read_json: OnceLock::new(),
        });
        self.capsules
            .insert(revision_id.to_owned(), Arc::clone(&revision));
        revision
    }

    /// [`Continuity::load`] with the read path's subject check.
    fn load_as(
        &self,
        revision_id: &str,
        bytes: &[u8],
        kind: crate::domain::model::SubjectKind,
        subject_id: &str,
        mismatch: &str,
    ) -> Loaded {
        loaded_as(
            &self.load(revision_id, bytes).loaded,
            kind,
            subject_id,
            mismatch,
        )
    }

    /// A loaded capsule for summaries (list, plans), `None` if it does not load.
    fn capsule(&self, revision_id: &str, bytes: &[u8]) -> Option<Capsule> {
        self.load(revision_id, bytes)
            .loaded
            .as_ref()
            .ok()
            .map(|(capsule, _)| Capsule::clone(capsule))
    }
}

/// The current time, as every rule sees it.
fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// A JSON body as the original writes it (compact, its key order, Python float forms).
fn bytes_of(body: &Json) -> Vec<u8> {
    crate::domain::json::to_py_json(body).into_bytes()
}

/// The audit entry of a continuity write. The tenant is part of the target; a tenant named
/// explicitly by a superuser is recorded as such.
fn audit(caller: &Caller, action: &str, target: &str, mut detail: Value) -> AuditDraft {
    if let Value::Object(map) = &mut detail {
        map.insert("tenant".into(), Value::from(caller.tenant.as_str()));
        if caller.named_tenant {
            map.insert("tenant_named_by".into(), Value::from(caller.peer_id()));
        }
        map.insert(
            "token_id".into(),
            Value::from(caller.principal.token_id.as_str()),
        );
    }
    AuditDraft {
        actor: caller.peer_id().to_owned(),
        action: format!("continuity.{action}"),
        target_id: Some(format!("{}:{target}", caller.tenant)),
        target_type: Some("continuity".into()),
        detail: Some(detail),
    }
}

/// The subject a request names (400 when its id normalises to nothing).
fn subject_of(
    kind: crate::domain::model::SubjectKind,
    subject_id: &str,
) -> Result<SubjectKey, ContinuityError> {
    SubjectKey::new(kind, subject_id)
}

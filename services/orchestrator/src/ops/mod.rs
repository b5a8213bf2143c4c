//! The orchestrator's operations: each call of the API as one use case — load the request,
//! check the call against the state machine and the policy (`domain`), build the objects
//! and the events, and commit them with the new state in one audited transaction
//! (`store`). Reads of a request happen outside the transaction; the write expects the
//! request still at the version read, and a call that lost a race reads again.

mod anchor;
mod evaluation;
mod execute;
mod fill;
mod lifecycle;
pub mod policy;
mod release;
mod replay;
mod reward;
mod tools;
mod views;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use noema_core::audit::AuditDraft;
use noema_core::content_id::ContentId;
use noema_core::jcs;
use noema_core::scopes::Principal;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_proto::ledger::v1::ledger_service_client::LedgerServiceClient;
use noema_runtime::client::TracedChannel;
use serde_json::json;
use time::OffsetDateTime;
use tonic::metadata::{Ascii, MetadataValue};

use crate::domain::events::{Event, SealedEvent};
use crate::domain::objects::CanonicalObject;
use crate::domain::schema::SchemaName;
use crate::domain::state::{Call, State};
use crate::domain::timestamp;
use crate::error::OrchestratorError;
use crate::options::Options;
use crate::store::{EventRow, ObjectRow, OrchestratorStore, Rejection, RequestRow, Unit};

pub use evaluation::{Evaluated, ServedItem};
pub use execute::Executed;
pub use fill::Filled;
pub use lifecycle::{Approved, Planned, Risked};
pub use policy::{LoadedPolicy, Overrides, PolicyHolder};
pub use replay::{ReplayCheck, ReplayReport};
pub use reward::Rewarded;
pub use views::{RequestDetail, TraceView};

/// How many times a call reads again after losing a race before giving up.
const ATTEMPTS: u32 = 16;

/// Who is calling, and the token to call other services with on their behalf.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub authorization: Option<MetadataValue<Ascii>>,
}

impl Caller {
    /// Who the audit log names.
    pub fn actor(&self) -> &str {
        &self.principal.peer_id
    }
}

/// What the orchestrator needs besides its database.
pub struct Dependencies {
    /// Identity: approver keys.
    pub identity: TracedChannel,
    /// The ledger: anchoring and the `noema.put_canonical` tool.
    pub ledger: TracedChannel,
    /// The process's data directory, protected from `command` tools.
    pub data_dir: PathBuf,
}

pub struct Orchestrator {
    store: OrchestratorStore,
    policy: Arc<PolicyHolder>,
    identity: IdentityServiceClient<TracedChannel>,
    ledger: LedgerServiceClient<TracedChannel>,
    tools: tools::Tools,
    anchor: bool,
}

impl Orchestrator {
    /// Loads the policy (refusing to start without one) and prepares the tool runners.
    pub fn new(
        store: OrchestratorStore,
        options: &Options,
        deps: Dependencies,
    ) -> Result<Orchestrator, OrchestratorError> {
        let file = (!options.policy_file.is_empty()).then(|| PathBuf::from(&options.policy_file));
        let overrides = Overrides {
            gold_ratio: (options.gold_ratio != 0.0).then_some(options.gold_ratio),
            anti_abuse: options.anti_abuse,
        };
        let policy = Arc::new(PolicyHolder::load(file.clone(), overrides)?);
        crate::domain::schema::ensure_compiled()?;
        let sandbox = if options.sandbox_dir.is_empty() {
            std::env::temp_dir().join("noema-orchestrator")
        } else {
            PathBuf::from(&options.sandbox_dir)
        };
        let mut protected = vec![deps.data_dir];
        protected.extend(file);
        let tools = tools::Tools::new(sandbox, protected)?;
        Ok(Orchestrator {
            store,
            policy,
            identity: IdentityServiceClient::new(deps.identity),
            ledger: LedgerServiceClient::new(deps.ledger),
            tools,
            anchor: options.ledger_anchor,
        })
    }

    pub fn store(&self) -> &OrchestratorStore {
        &self.store
    }

    /// The policy holder (SIGHUP reloads through it).
    pub fn policy_holder(&self) -> Arc<PolicyHolder> {
        Arc::clone(&self.policy)
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<LoadedPolicy> {
        self.policy.current()
    }

    /// Reloads the policy file; on failure the running policy stays.
    pub async fn reload_policy(&self, actor: &str) -> Result<Arc<LoadedPolicy>, OrchestratorError> {
        let result = self.policy.reload();
        let detail = match &result {
            Ok(loaded) => json!({"ok": true, "policy_version": loaded.policy.version(),
                                 "policy_hash": loaded.policy.hash(), "source": loaded.source}),
            Err(err) => json!({"ok": false, "error": err.to_string()}),
        };
        self.store
            .audit(
                vec![AuditDraft {
                    actor: actor.to_owned(),
                    action: "policy.reload".into(),
                    target_id: None,
                    target_type: Some("policy".into()),
                    detail: Some(detail),
                }],
                now(),
            )
            .await?;
        match result {
            Ok(loaded) => {
                tracing::info!(policy = %loaded.policy, "risk policy reloaded");
                Ok(loaded)
            }
            Err(err) => {
                tracing::error!(error = %err, "risk policy reload failed; the running policy stays");
                Err(err.into())
            }
        }
    }

    /// Records the policy loaded at start in the audit log.
    pub async fn record_start(&self) -> Result<(), OrchestratorError> {
        let loaded = self.policy();
        self.store
            .audit(
                vec![AuditDraft {
                    actor: "system:start".into(),
                    action: "policy.load".into(),
                    target_id: None,
                    target_type: Some("policy".into()),
                    detail: Some(json!({"policy_version": loaded.policy.version(),
                                        "policy_hash": loaded.policy.hash(),
                                        "source": loaded.source})),
                }],
                now(),
            )
            .await?;
        Ok(())
    }

    /// The request `request_id`, or NOT_FOUND.
    async fn load(&self, request_id: &str) -> Result<RequestRow, OrchestratorError> {
        self.store
            .request(request_id)
            .await?
            .ok_or_else(|| not_found(request_id))
    }

    /// The request `request_id` for a write that makes `call`, and its state: on the first
    /// attempt the row this process committed last (a hint: the write expects its
    /// version), otherwise — or when the hint's state refuses the call, which another
    /// replica may have moved on — the database's row. NOT_FOUND, or the 409 of a state
    /// that refuses the call.
    async fn load_for(
        &self,
        request_id: &str,
        call: Call,
        attempt: u32,
    ) -> Result<(RequestRow, State), OrchestratorError> {
        if attempt == 0
            && let Some(row) = self.store.written_request(request_id)
        {
            let state = state_of(&row)?;
            if state.check_call(call).is_ok() {
                return Ok((row, state));
            }
        }
        let row = self.load(request_id).await?;
        let state = state_of(&row)?;
        state.check_call(call)?;
        Ok((row, state))
    }

    /// Whether the request exists (a request is never deleted, so one this process wrote
    /// needs no read).
    async fn request_exists(&self, request_id: &str) -> Result<bool, OrchestratorError> {
        Ok(self.store.written_request(request_id).is_some()
            || self.store.request(request_id).await?.is_some())
    }

    /// A stored object, read as `T`.
    async fn object<T: CanonicalObject>(&self, content_id: &str) -> Result<T, OrchestratorError> {
        let row = self.store.object(content_id).await?.ok_or_else(|| {
            OrchestratorError::Corrupt(format!("object {content_id} is referenced but not stored"))
        })?;
        parse_stored(&row)
    }

    /// Commits `unit`; `Ok(false)` when the state it expected moved on (read again).
    async fn commit(&self, unit: Unit) -> Result<bool, OrchestratorError> {
        let objects = unit.objects.clone();
        match self.store.commit(unit).await? {
            Ok(()) => {
                self.store.remember(&objects);
                Ok(true)
            }
            Err(Rejection::Moved) => Ok(false),
            Err(rejection @ (Rejection::SignatureUsed | Rejection::AlreadyServed)) => {
                Err(OrchestratorError::Invalid(format!("refused: {rejection}")))
            }
        }
    }
}

/// NOT_FOUND for an unknown request.
fn not_found(request_id: &str) -> OrchestratorError {
    OrchestratorError::NotFound(format!("request {request_id:?} not found"))
}

/// The stored state of a row.
fn state_of(row: &RequestRow) -> Result<State, OrchestratorError> {
    State::parse(&row.state).ok_or_else(|| {
        OrchestratorError::Corrupt(format!(
            "request {} has the unknown state {:?}",
            row.request_id, row.state
        ))
    })
}

/// A stored object's body read back as `T` (a corrupt row is internal).
fn parse_stored<T: CanonicalObject>(row: &ObjectRow) -> Result<T, OrchestratorError> {
    serde_json::from_str(&row.body).map_err(|e| {
        OrchestratorError::Corrupt(format!(
            "object {} does not read back as {}: {e}",
            row.content_id,
            T::SCHEMA.as_str()
        ))
    })
}

/// The current time, at the precision both databases keep.
fn now() -> OffsetDateTime {
    timestamp::normalize(OffsetDateTime::now_utc())
}

/// A server-made id: `<prefix>_`, the time in milliseconds as 12 hex digits (so ids sort
/// by creation and new rows land at the end of their indexes), and 80 random bits.
fn new_id(prefix: &str) -> Result<String, OrchestratorError> {
    let mut random = [0u8; 10];
    getrandom::fill(&mut random)
        .map_err(|e| OrchestratorError::Invalid(format!("no randomness for an id: {e}")))?;
    let millis = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    Ok(format!(
        "{prefix}_{:012x}{}",
        millis,
        data_encoding::HEXLOWER.encode(&random)
    ))
}

/// An object as stored: its JCS text under its content id.
fn stored<T: CanonicalObject>(
    object: &T,
    at: OffsetDateTime,
) -> Result<ObjectRow, OrchestratorError> {
    let value = object.to_json()?;
    let body = jcs::canonical_string(&value)
        .map_err(|e| OrchestratorError::Content(crate::domain::objects::ContentError::from(e)))?;
    Ok(ObjectRow {
        content_id: ContentId::of_bytes(body.as_bytes()).into_string(),
        object_type: T::SCHEMA.as_str().to_owned(),
        object_id: object.id().to_owned(),
        schema_version: value["schema_version"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        body,
        created_at: crate::store::micros(at),
    })
}

/// Chains `events` after the request's head (`version` events, last hash `head`). Each
/// event's meta is canonicalised once, and that text is both hashed and stored.
fn chain(
    version: i64,
    head: &str,
    events: Vec<Event>,
    ts: &str,
) -> Result<(Vec<EventRow>, String), OrchestratorError> {
    let mut rows = Vec::with_capacity(events.len());
    let mut prev = head.to_owned();
    let mut seq = u64::try_from(version).unwrap_or_default();
    let mut scratch = String::new();
    for event in events {
        seq += 1;
        let sealed = SealedEvent::seal(event, seq, ts, prev, &mut scratch).map_err(|e| {
            OrchestratorError::Content(crate::domain::objects::ContentError::from(e))
        })?;
        prev = sealed.hash.clone();
        rows.push(EventRow {
            request_id: sealed.entity_id,
            seq: i64::try_from(sealed.seq).unwrap_or(i64::MAX),
            event_type: sealed.event_type.as_str().to_owned(),
            prev_state: sealed.prev_state.map(|s| s.as_str().to_owned()),
            next_state: sealed.next_state.as_str().to_owned(),
            meta: sealed.meta,
            ts: sealed.ts,
            prev_hash: sealed.prev_hash,
            hash: sealed.hash,
        });
    }
    Ok((rows, prev))
}

/// The audit entries of a request's new events: the service's chain of every transition.
fn audit_events(actor: &str, events: &[EventRow]) -> Vec<AuditDraft> {
    events
        .iter()
        .map(|e| AuditDraft {
            actor: actor.to_owned(),
            action: format!("request.{}", e.event_type),
            target_id: Some(e.request_id.clone()),
            target_type: Some("request".into()),
            detail: Some(json!({"seq": e.seq, "next_state": e.next_state, "hash": e.hash})),
        })
        .collect()
}

/// A short pause before reading again after losing a race, growing with the attempt.
async fn back_off(attempt: u32) {
    let micros = 200u64 << attempt.min(8);
    let jitter = u64::from(OffsetDateTime::now_utc().nanosecond() % 200);
    tokio::time::sleep(Duration::from_micros(micros + jitter)).await;
}

/// The schema name of a stored object type, for objects read generically.
pub fn schema_of(object_type: &str) -> Option<SchemaName> {
    SchemaName::parse(object_type)
}

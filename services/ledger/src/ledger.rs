//! The ledger's operations: they sequence the rules (`domain`), the SQL (`store`), the
//! object store and the identity service. Write order for a canonical object: payload
//! durably in object storage, then the ledger row and its audit entry in one transaction
//! that also checks the mode. A failure between the two leaves an orphan in storage
//! (found by [`Ledger::reconcile`] and adopted by a retry), never a row without bytes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use noema_core::content_id::ContentId;
use noema_core::keys::PublicKey;
use noema_core::{Failure, Reason};
use noema_proto::identity::v1::RegisterAgentRequest;
use noema_proto::identity::v1::identity_service_client::IdentityServiceClient;
use noema_runtime::client::TracedChannel;
use noema_store::object::{PutOutcome, WriteRetry};
use noema_store::{ObjectBody, ObjectStore};
use time::OffsetDateTime;
use tonic::metadata::{Ascii, MetadataValue};

use crate::domain::canonical::{self, CanonicalObject, CanonicalSubmission};
use crate::domain::mode::SystemMode;
use crate::domain::reference::{self, AgentReference, ReferenceSubmission};
use crate::error::LedgerError;
use crate::store::{LedgerStore, Page, Query};

/// Rows per database page when walking the whole ledger.
const WALK_PAGE: u32 = 200;
/// Concurrent object-store calls during reconciliation.
const RECONCILE_CONCURRENCY: usize = 16;

/// Results of a two-way reconciliation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub checked: u64,
    pub missing_in_storage: Vec<(String, String)>,
    pub orphans_in_storage: Vec<(String, u64)>,
    pub corrupt: Vec<(String, String, String)>,
    pub hashes_verified: bool,
    pub checked_at: Option<OffsetDateTime>,
}

impl ReconcileReport {
    /// Ledger rows whose bytes are present (and, when verified, intact).
    pub fn ok(&self) -> u64 {
        let bad = self.missing_in_storage.len() + self.corrupt.len();
        self.checked
            .saturating_sub(u64::try_from(bad).unwrap_or(u64::MAX))
    }
}

pub struct Ledger {
    store: LedgerStore,
    objects: Arc<dyn ObjectStore>,
    identity: IdentityServiceClient<TracedChannel>,
    /// Agent keys the identity service confirmed recently: agent id → (key, when).
    known_keys: Mutex<HashMap<String, (PublicKey, Instant)>>,
    key_cache_ttl: Duration,
}

impl Ledger {
    pub fn new(
        store: LedgerStore,
        objects: Arc<dyn ObjectStore>,
        identity: IdentityServiceClient<TracedChannel>,
        key_cache_ttl: Duration,
    ) -> Self {
        Ledger {
            store,
            objects,
            identity,
            known_keys: Mutex::new(HashMap::new()),
            key_cache_ttl,
        }
    }

    pub fn store(&self) -> &LedgerStore {
        &self.store
    }

    async fn require_running(&self) -> Result<(), LedgerError> {
        match self.store.mode().await? {
            SystemMode::Running => Ok(()),
            SystemMode::Stopped => Err(LedgerError::Stopped),
        }
    }

    /// open-cognition's `POST /canonical`, in its order, with durable writes.
    #[tracing::instrument(skip_all, fields(id = %submission.id))]
    pub async fn put_canonical(
        &self,
        submission: CanonicalSubmission,
        submitted_by: &str,
    ) -> Result<CanonicalObject, LedgerError> {
        self.require_running().await?;
        let (object, payload) = canonical::validate(submission, OffsetDateTime::now_utc())?;
        // One round trip for a new object: the store writes it unless the key is taken.
        let outcome = WriteRetry::STANDARD
            .put_if_absent(
                self.objects.as_ref(),
                &object.storage_path,
                Bytes::from(payload),
                &object.content_type,
            )
            .await
            .map_err(LedgerError::StorageWrite)?;
        if outcome == PutOutcome::Exists {
            // Bytes are there only if the object was written before: a duplicate when its
            // row exists (new objects skip this lookup; the insert refuses a racing twin).
            if self.store.get_canonical(&object.id).await?.is_some() {
                return Err(LedgerError::DuplicateCanonical);
            }
            // Otherwise an earlier write whose ledger insert failed, or a racing twin of
            // this one. Adopt the bytes only if they are exactly this object's bytes.
            let stored = self.read_all(&object.storage_path).await?;
            if ContentId::of_bytes(&stored).as_str() != object.id {
                return Err(LedgerError::StorageConflict);
            }
            tracing::info!(path = %object.storage_path, "adopting orphaned object from an earlier write");
        }
        match self.store.insert_canonical(&object, submitted_by).await {
            Ok(()) => Ok(object),
            Err(err @ (LedgerError::DuplicateCanonical | LedgerError::Stopped)) => Err(err),
            Err(err) => Err(LedgerError::LedgerInsertAfterStore(Box::new(err))),
        }
    }

    async fn read_all(&self, key: &str) -> Result<Bytes, LedgerError> {
        let body = self
            .objects
            .get(key)
            .await
            .map_err(LedgerError::StorageRead)?;
        body.bytes().await.map_err(LedgerError::StorageRead)
    }

    pub async fn get_canonical(&self, id: &str) -> Result<CanonicalObject, LedgerError> {
        self.store
            .get_canonical(id)
            .await?
            .ok_or_else(|| LedgerError::NotFound(format!("canonical object {id} not found")))
    }

    /// The payload of `id`, streamed from object storage.
    pub async fn payload(&self, id: &str) -> Result<(CanonicalObject, ObjectBody), LedgerError> {
        let object = self.get_canonical(id).await?;
        let body = self
            .objects
            .get(&object.storage_path)
            .await
            .map_err(LedgerError::StorageRead)?;
        Ok((object, body))
    }

    pub async fn list_canonicals(
        &self,
        query: &Query,
        page: &Page,
    ) -> Result<Vec<CanonicalObject>, LedgerError> {
        self.store.list_canonicals(query, page).await
    }

    pub async fn list_references(
        &self,
        query: &Query,
        page: &Page,
    ) -> Result<Vec<AgentReference>, LedgerError> {
        self.store.list_references(query, page).await
    }

    /// open-cognition's `POST /reference`: fields, target, signature, then the agent's key
    /// through the identity service (trust on first use), then the row.
    #[tracing::instrument(skip_all, fields(id = %submission.id, agent_id = %submission.agent_id))]
    pub async fn put_reference(
        &self,
        submission: ReferenceSubmission,
        authorization: Option<MetadataValue<Ascii>>,
        submitted_by: &str,
    ) -> Result<AgentReference, LedgerError> {
        self.require_running().await?;
        let created_at = reference::validate_fields(&submission)?;
        if self
            .store
            .get_canonical(&submission.canonical_object_id)
            .await?
            .is_none()
        {
            return Err(LedgerError::invalid(format!(
                "canonical_object_id {:?} does not exist in ledger",
                submission.canonical_object_id
            )));
        }
        let key = reference::check_signature(&submission)?;
        self.register_key(&submission.agent_id, &key, &submission.id, authorization)
            .await?;
        let public_key = key.to_base64();
        let accepted = reference::accepted(submission, created_at, OffsetDateTime::now_utc());
        self.store
            .insert_reference(&accepted, &public_key, submitted_by)
            .await?;
        Ok(accepted)
    }

    fn key_is_known(&self, agent_id: &str, key: &PublicKey) -> bool {
        self.known_keys.lock().is_ok_and(|known| {
            known
                .get(agent_id)
                .is_some_and(|(k, at)| k == key && at.elapsed() < self.key_cache_ttl)
        })
    }

    /// Trust on first use through the identity service, with the caller's own token.
    async fn register_key(
        &self,
        agent_id: &str,
        key: &PublicKey,
        first_object_id: &str,
        authorization: Option<MetadataValue<Ascii>>,
    ) -> Result<(), LedgerError> {
        if self.key_is_known(agent_id, key) {
            return Ok(());
        }
        let mut request = tonic::Request::new(RegisterAgentRequest {
            agent_id: agent_id.to_owned(),
            public_key: key.to_prefixed(),
            first_object_id: first_object_id.to_owned(),
        });
        if let Some(value) = authorization {
            request.metadata_mut().insert("authorization", value);
        }
        let mut identity = self.identity.clone();
        match identity.register_agent(request).await {
            Ok(_) => {
                if let Ok(mut known) = self.known_keys.lock() {
                    known.insert(agent_id.to_owned(), (*key, Instant::now()));
                }
                Ok(())
            }
            Err(status) => {
                let failure = Failure::from_status(&status);
                if failure.reason == Reason::PublicKeyMismatch {
                    Err(LedgerError::KeyMismatch {
                        agent_id: agent_id.to_owned(),
                    })
                } else {
                    Err(LedgerError::Identity(failure))
                }
            }
        }
    }

    /// Two-way reconciliation: ledger rows whose bytes are missing (or, with
    /// `verify_hashes`, no longer hash to their id), and stored objects with no row.
    #[tracing::instrument(skip_all, fields(verify_hashes))]
    pub async fn reconcile(&self, verify_hashes: bool) -> Result<ReconcileReport, LedgerError> {
        let mut report = ReconcileReport {
            hashes_verified: verify_hashes,
            checked_at: Some(OffsetDateTime::now_utc()),
            ..ReconcileReport::default()
        };
        let mut known_paths = HashSet::new();
        let mut after = String::new();
        loop {
            let rows = self.store.storage_paths(&after, WALK_PAGE).await?;
            let Some((last, _)) = rows.last() else { break };
            after = last.clone();
            let checks = futures::stream::iter(rows.into_iter().map(|(id, path)| async move {
                let state = self.check_object(&id, &path, verify_hashes).await;
                (id, path, state)
            }))
            .buffer_unordered(RECONCILE_CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
            for (id, path, state) in checks {
                report.checked += 1;
                match state? {
                    ObjectState::Intact => {}
                    ObjectState::Missing => {
                        report.missing_in_storage.push((id.clone(), path.clone()))
                    }
                    ObjectState::Corrupt(actual) => {
                        report.corrupt.push((id.clone(), path.clone(), actual))
                    }
                }
                known_paths.insert(path);
            }
        }
        let mut start_after: Option<String> = None;
        loop {
            let page = self
                .objects
                .list("canonical/", start_after.as_deref(), 1000)
                .await
                .map_err(LedgerError::StorageCheck)?;
            for object in page.objects {
                if !known_paths.contains(&object.key) {
                    report.orphans_in_storage.push((object.key, object.size));
                }
            }
            match page.next_start_after {
                Some(next) => start_after = Some(next),
                None => break,
            }
        }
        report.missing_in_storage.sort();
        report.corrupt.sort();
        Ok(report)
    }

    async fn check_object(
        &self,
        id: &str,
        path: &str,
        verify_hashes: bool,
    ) -> Result<ObjectState, LedgerError> {
        let head = self
            .objects
            .head(path)
            .await
            .map_err(LedgerError::StorageCheck)?;
        if head.is_none() {
            return Ok(ObjectState::Missing);
        }
        if !verify_hashes {
            return Ok(ObjectState::Intact);
        }
        let bytes = match self.read_all(path).await {
            Ok(bytes) => bytes,
            Err(LedgerError::StorageRead(err)) if err.is_not_found() => {
                return Ok(ObjectState::Missing);
            }
            Err(err) => return Err(err),
        };
        let actual = ContentId::of_bytes(&bytes);
        Ok(if actual.as_str() == id {
            ObjectState::Intact
        } else {
            ObjectState::Corrupt(actual.into_string())
        })
    }

    /// Every canonical object with its payload, oldest first, as a stream.
    pub fn export(
        self: &Arc<Self>,
    ) -> impl futures::Stream<Item = Result<(CanonicalObject, Bytes), LedgerError>> + Send + 'static
    {
        let ledger = Arc::clone(self);
        futures::stream::try_unfold(
            (
                ledger,
                (i64::MIN, String::new()),
                Vec::<CanonicalObject>::new(),
            ),
            |(ledger, mut cursor, mut buffered)| async move {
                if buffered.is_empty() {
                    buffered = ledger
                        .store
                        .canonicals_oldest_first(&cursor, WALK_PAGE)
                        .await?;
                    buffered.reverse();
                }
                let Some(object) = buffered.pop() else {
                    return Ok(None);
                };
                cursor = (object.created_at.unix_timestamp(), object.id.clone());
                let payload = ledger.read_all(&object.storage_path).await?;
                Ok(Some(((object, payload), (ledger, cursor, buffered))))
            },
        )
        .into_stream()
    }
}

enum ObjectState {
    Intact,
    Missing,
    Corrupt(String),
}

//! Capsule writes: upsert, patch, lifecycle, revalidate. Each reads the subject, runs its
//! rule on the stored capsule, and writes a new revision that becomes the active capsule and
//! the fallback snapshot in one transaction, only if nobody moved the subject meanwhile;
//! otherwise it reads again and re-runs the rule (the original's merge under its lock,
//! without a lock), up to [`WRITE_ATTEMPTS`] times.

use noema_core::content_id::sha256_hex;
use serde_json::json;
use time::OffsetDateTime;

use super::in_flight::SubjectId;
use super::{Continuity, WRITE_ATTEMPTS, audit, bytes_of, now, subject_of};
use crate::domain::access::{Caller, WRITE};
use crate::domain::error::ContinuityError;
use crate::domain::json::{Json, canonical_json};
use crate::domain::lifecycle::{LifecycleOutcome, apply_lifecycle};
use crate::domain::patch::{PatchOutcome, apply_patch};
use crate::domain::request::{
    LifecycleRequest, PatchRequest, RevalidateRequest, UpsertRequest, parse_body,
};
use crate::domain::revision::{Operation, RevisionRecord};
use crate::domain::stored::StoredCapsule;
use crate::domain::subject::SubjectKey;
use crate::domain::upsert::{UpsertOutcome, apply_upsert, prepare_upsert};
use crate::domain::verify::{RevalidateOutcome, revalidate};
use crate::domain::write::WriteResult;
use crate::error::Error;
use crate::store::{
    CapsuleRevision, CapsuleWrite, IdempotencyWrite, Refusal, RevisionWrite, Write,
};

/// What a capsule write answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The response body (the original's JSON, compact).
    pub body: Vec<u8>,
    pub subject_kind: String,
    pub subject_id: String,
    /// The active revision after the call.
    pub revision_id: String,
    pub capsule_sha256: String,
    /// A new revision was stored.
    pub written: bool,
    /// The first result of this idempotency key, answered again.
    pub replayed: bool,
}

/// What every capsule rule produces: the write and the response around it.
trait Outcome {
    fn write(&self) -> &WriteResult;
    fn body(&self, revision: Option<&str>) -> Json;
}

macro_rules! outcome {
    ($($t:ty),*) => {$(
        impl Outcome for $t {
            fn write(&self) -> &WriteResult {
                &self.write
            }
            // The fallback is refreshed in the write's own transaction: it cannot fail
            // after the active write, so there is never a fallback warning.
            fn body(&self, revision: Option<&str>) -> Json {
                self.response(revision, None)
            }
        }
    )*};
}
outcome!(
    UpsertOutcome,
    PatchOutcome,
    LifecycleOutcome,
    RevalidateOutcome
);

/// An idempotency key and the hash of the body it came with.
struct Idempotency {
    key: String,
    request_sha256: String,
}

impl Continuity {
    /// `POST /v1/continuity/upsert`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn upsert(&self, caller: &Caller, body: &[u8]) -> Result<Written, Error> {
        let json = parse_body(body)?;
        let request = UpsertRequest::from_json(&json)?;
        caller.require(WRITE)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        caller.require_write_path(&subject.active_path())?;
        let idempotency = request
            .idempotency_key
            .as_ref()
            .filter(|key| !key.is_empty())
            .map(|key| Idempotency {
                key: key.clone(),
                request_sha256: sha256_hex(canonical_json(&json).as_bytes()),
            });
        if let Some(idem) = &idempotency
            && let Some(replay) = self.replay(caller, idem).await?
        {
            return Ok(replay);
        }
        let prepared = prepare_upsert(request)?;
        let subject_id = prepared.request().subject_id.clone();
        self.write_capsule(
            caller,
            &subject,
            &subject_id,
            Operation::Upsert,
            idempotency,
            |stored, _| apply_upsert(prepared.clone(), stored),
        )
        .await
    }

    /// `POST /v1/continuity/patch`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn patch(&self, caller: &Caller, body: &[u8]) -> Result<Written, Error> {
        let request = PatchRequest::from_json(&parse_body(body)?)?;
        caller.require(WRITE)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        caller.require_write_path(&subject.active_path())?;
        crate::domain::patch::check_patch_request(&request)?;
        self.write_capsule(
            caller,
            &subject,
            &request.subject_id,
            Operation::Patch,
            None,
            |stored, _| apply_patch(&request, stored),
        )
        .await
    }

    /// `POST /v1/continuity/lifecycle`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn lifecycle(&self, caller: &Caller, body: &[u8]) -> Result<Written, Error> {
        let request = LifecycleRequest::from_json(&parse_body(body)?)?;
        caller.require(WRITE)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        caller.require_write_path(&subject.active_path())?;
        crate::domain::lifecycle::check_lifecycle_request(&request)?;
        self.write_capsule(
            caller,
            &subject,
            &request.subject_id,
            Operation::Lifecycle,
            None,
            |stored, _| apply_lifecycle(&request, stored),
        )
        .await
    }

    /// `POST /v1/continuity/revalidate`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn revalidate(&self, caller: &Caller, body: &[u8]) -> Result<Written, Error> {
        let request = RevalidateRequest::from_json(&parse_body(body)?)?;
        caller.require(WRITE)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        caller.require_read_path(&subject.active_path())?;
        caller.require_write_path(&subject.active_path())?;
        crate::domain::verify::check_revalidate(&request)?;
        self.write_capsule(
            caller,
            &subject,
            &request.subject_id,
            Operation::Revalidate,
            None,
            |stored, now| revalidate(&request, stored, now),
        )
        .await
    }

    /// The first result of `idem`, if the key was used: the same body answers it again,
    /// another body is a conflict.
    async fn replay(&self, caller: &Caller, idem: &Idempotency) -> Result<Option<Written>, Error> {
        let Some(first) = self.store.idempotency(&caller.tenant, &idem.key).await? else {
            return Ok(None);
        };
        if first.request_sha256 != idem.request_sha256 {
            return Err(ContinuityError::IdempotencyConflict(format!(
                "idempotency_key {:?} was used with another request body",
                idem.key
            ))
            .into());
        }
        Ok(Some(Written {
            body: first.response,
            subject_kind: first.subject_kind,
            subject_id: first.subject_id,
            revision_id: first.revision_id,
            capsule_sha256: first.capsule_sha256,
            written: false,
            replayed: true,
        }))
    }

    /// Read → rule → conditional write, retried while concurrent writers win. Writers of
    /// one subject take turns in this process, each building on the write handed over
    /// before it while that one is in flight (see [`super::in_flight`]).
    async fn write_capsule<O: Outcome>(
        &self,
        caller: &Caller,
        subject: &SubjectKey,
        subject_id: &str,
        operation: Operation,
        idempotency: Option<Idempotency>,
        rule: impl Fn(Option<&StoredCapsule>, OffsetDateTime) -> Result<O, ContinuityError>,
    ) -> Result<Written, Error> {
        let id: SubjectId = (caller.tenant.clone(), subject.clone());
        for attempt in 1..=WRITE_ATTEMPTS {
            let mut turn = self.in_flight.turn(&id).await;
            let basis = turn.basis();
            let read = match &basis {
                Some(_) => None,
                None => self.store.subject(&caller.tenant, subject).await?,
            };
            let row = basis.as_ref().map(|b| &b.row).or(read.as_deref());
            let stored = row
                .and_then(|r| r.active.as_ref())
                .map(|active| StoredCapsule::new(active.capsule.as_slice()));
            let at = now();
            let outcome = match rule(stored.as_ref(), at) {
                Ok(outcome) => outcome,
                Err(err) => {
                    drop(turn);
                    // Refused on a state still being written: an answer only if it lands.
                    if let Some(basis) = basis
                        && !basis.landed().await
                    {
                        continue;
                    }
                    return Err(err.into());
                }
            };
            let result = outcome.write();
            let path = result.path();
            let (revision, revision_id) = if result.changed {
                let sequence = row.map_or(1, |r| r.head_sequence + 1);
                let previous = row.map_or("", |r| r.head_revision.as_str());
                let id = RevisionRecord {
                    tenant: &caller.tenant,
                    subject,
                    sequence,
                    previous,
                    operation,
                    capsule_sha256: &result.sha256,
                }
                .id();
                let revision = RevisionWrite {
                    sequence,
                    revision_id: id.clone(),
                    previous_id: previous.to_owned(),
                    operation: operation.as_str(),
                    capsule: result.canonical.clone().into_bytes(),
                    capsule_sha256: result.sha256.clone(),
                    actor: caller.peer_id().to_owned(),
                };
                (Some(revision), id)
            } else {
                let current = row
                    .and_then(|r| r.active.as_ref())
                    .map(|a| a.revision_id.clone())
                    .unwrap_or_default();
                (None, current)
            };
            let body =
                bytes_of(&outcome.body(Some(revision_id.as_str()).filter(|id| !id.is_empty())));
            let written = Written {
                body: body.clone(),
                subject_kind: subject.kind.as_str().to_owned(),
                subject_id: subject_id.to_owned(),
                revision_id: revision_id.clone(),
                capsule_sha256: result.sha256.clone(),
                written: revision.is_some(),
                replayed: false,
            };
            if revision.is_none() && idempotency.is_none() {
                drop(turn);
                // Unchanged against a state still being written: an answer only if it lands.
                if let Some(basis) = basis
                    && !basis.landed().await
                {
                    continue;
                }
                return Ok(written);
            }
            let idem = idempotency.as_ref().map(|idem| IdempotencyWrite {
                key: idem.key.clone(),
                request_sha256: idem.request_sha256.clone(),
                response: body.clone(),
                subject_kind: subject.kind.as_str().to_owned(),
                subject_id: subject_id.to_owned(),
                revision_id: revision_id.clone(),
                capsule_sha256: result.sha256.clone(),
            });
            let detail = json!({
                "path": path,
                "revision_id": revision_id,
                "capsule_sha256": result.sha256,
                "written": revision.is_some(),
                "idempotency_key": idempotency.as_ref().map(|i| i.key.as_str()),
            });
            let ahead = revision.as_ref().map(|r| CapsuleRevision {
                sequence: r.sequence,
                revision_id: r.revision_id.clone(),
                capsule: r.capsule.clone(),
            });
            let write = Write::Capsule(Box::new(CapsuleWrite {
                tenant: caller.tenant.clone(),
                subject: subject.clone(),
                subject_id: subject_id.to_owned(),
                expected_version: row.map(|r| r.version),
                revision,
                idempotency: idem,
                at,
                audit: audit(caller, operation.as_str(), &path, detail),
            }));
            let wait = self.store.submit(write).await?;
            let handed = ahead.map(|ahead| turn.handed(row, subject_id, ahead));
            let outcome = wait.await;
            if let Some(handed) = handed {
                let landed = matches!(outcome, Ok(Ok(())));
                self.in_flight.answered(&id, handed, landed).await;
            }
            match outcome? {
                Ok(()) => return Ok(written),
                Err(Refusal::KeyTaken) => {
                    // A concurrent write with the same key landed first.
                    if let Some(idem) = &idempotency
                        && let Some(replay) = self.replay(caller, idem).await?
                    {
                        return Ok(replay);
                    }
                }
                Err(Refusal::Moved) => {
                    tracing::debug!(attempt, "subject moved; re-running the rule");
                }
                Err(other) => {
                    return Err(Error::Corrupt(format!("capsule write refused: {other:?}")));
                }
            }
            tokio::task::yield_now().await;
        }
        Err(ContinuityError::lock_timeout(&subject.lock_id(), WRITE_ATTEMPTS).into())
    }
}

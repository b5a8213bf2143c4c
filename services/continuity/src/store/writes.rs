//! Writes: each one's statements inside an audited transaction. A write lands only if the
//! state it was computed against is still there (the subject's version and head revision,
//! an archive's state); otherwise it writes nothing and answers a [`Refusal`], and the operations layer
//! reads again and retries its rule. No statement here can fail on a conflict (they use
//! `ON CONFLICT DO NOTHING` and compensate within the transaction), so one refused write
//! never aborts the other writes of its group.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Engine, query};
use time::OffsetDateTime;

use super::memory::{MemoryWritten, PreparedMemoryWrite};
use super::memory_postings::IndexChange;
use crate::domain::subject::SubjectKey;
use crate::error::Error;

/// Why a write did not land.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The subject's version moved since it was read.
    Moved,
    /// The idempotency key was taken by a concurrent write.
    KeyTaken,
    /// An archive with that path exists already.
    Exists,
    /// The archive is gone or not in the state the write expected.
    Gone,
    /// A signed envelope's nonce was consumed already (and has not expired).
    NonceUsed,
}

/// A new revision of a subject, made active and the fallback in the same transaction.
#[derive(Debug, Clone)]
pub struct RevisionWrite {
    pub sequence: i64,
    pub revision_id: String,
    pub previous_id: String,
    pub operation: &'static str,
    pub capsule: Vec<u8>,
    pub capsule_sha256: String,
    pub actor: String,
}

/// An idempotency key's first result.
#[derive(Debug, Clone)]
pub struct IdempotencyWrite {
    pub key: String,
    pub request_sha256: String,
    pub response: Vec<u8>,
    pub subject_kind: String,
    pub subject_id: String,
    pub revision_id: String,
    pub capsule_sha256: String,
}

/// Upsert, patch, lifecycle, revalidate: a revision (or, for a no-op upsert, only its
/// idempotency key).
#[derive(Debug, Clone)]
pub struct CapsuleWrite {
    pub tenant: String,
    pub subject: SubjectKey,
    pub subject_id: String,
    /// The version read; `None`: the subject had no row. A revision lands only on that
    /// version with its `previous_id` still the head: a version is a counter, which a write
    /// built on another write still in flight could meet again if that one was refused.
    pub expected_version: Option<i64>,
    pub revision: Option<RevisionWrite>,
    pub idempotency: Option<IdempotencyWrite>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// The active capsule becomes an archive envelope.
#[derive(Debug, Clone)]
pub struct ArchiveWrite {
    pub tenant: String,
    pub subject: SubjectKey,
    pub subject_id: String,
    pub expected_version: i64,
    pub archive_path: String,
    pub archived_at: String,
    pub archived_unix: i64,
    pub revision_id: String,
    pub envelope: Vec<u8>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// Explicit deletion, per tier.
#[derive(Debug, Clone)]
pub struct DeleteWrite {
    pub tenant: String,
    pub subject: SubjectKey,
    /// The version read, when active or fallback pointers are cleared.
    pub expected_version: Option<i64>,
    pub clear_active: bool,
    pub clear_fallback: bool,
    /// The hot archives to delete (their paths).
    pub archives: Vec<String>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A hot archive becomes cold: its payload is already durable under `cold_key`.
#[derive(Debug, Clone)]
pub struct ColdStoreWrite {
    pub tenant: String,
    pub archive_path: String,
    pub cold_key: String,
    pub cold_sha256: String,
    pub stub: String,
    pub cold_stored_at: String,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A cold archive becomes hot again, with `envelope`.
#[derive(Debug, Clone)]
pub struct RehydrateWrite {
    pub tenant: String,
    pub archive_path: String,
    /// The payload the row named when it was read.
    pub cold_sha256: String,
    pub envelope: Vec<u8>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A persisted plan.
#[derive(Debug, Clone)]
pub struct PlanWrite {
    pub tenant: String,
    pub plan: &'static str,
    pub body: Vec<u8>,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

/// A context snapshot, stored once under its id (a second write of the same id is refused
/// as `Exists`; the bytes already there stay).
#[derive(Debug, Clone)]
pub struct SnapshotWrite {
    pub tenant: String,
    pub snapshot_id: String,
    pub content_id: String,
    pub body: Vec<u8>,
    pub actor: String,
    pub created_at: String,
    pub at: OffsetDateTime,
    pub audit: AuditDraft,
}

#[derive(Debug, Clone)]
pub enum Write {
    Capsule(Box<CapsuleWrite>),
    /// A memory document's write or append (`store/memory.rs`).
    Memory(Box<PreparedMemoryWrite>),
    Archive(Box<ArchiveWrite>),
    Delete(Box<DeleteWrite>),
    ColdStore(Box<ColdStoreWrite>),
    Rehydrate(Box<RehydrateWrite>),
    Plan(Box<PlanWrite>),
    Snapshot(Box<SnapshotWrite>),
    Message(Box<super::messages::MessageWrite>),
    Delivery(Box<super::messages::DeliveryWrite>),
    Nonce(Box<super::messages::NonceWrite>),
    Key(Box<super::messages::KeyWrite>),
}

impl Write {
    /// The audit entry recorded when the write lands, and its time.
    fn audit(&self) -> (AuditDraft, OffsetDateTime) {
        match self {
            Write::Capsule(w) => (w.audit.clone(), w.at),
            Write::Memory(w) => (w.write.audit.clone(), w.write.at),
            Write::Archive(w) => (w.audit.clone(), w.at),
            Write::Delete(w) => (w.audit.clone(), w.at),
            Write::ColdStore(w) => (w.audit.clone(), w.at),
            Write::Rehydrate(w) => (w.audit.clone(), w.at),
            Write::Plan(w) => (w.audit.clone(), w.at),
            Write::Snapshot(w) => (w.audit.clone(), w.at),
            Write::Message(w) => (w.audit.clone(), w.at),
            Write::Delivery(w) => (w.audit.clone(), w.at),
            Write::Nonce(w) => (w.audit.clone(), w.at),
            Write::Key(w) => (w.audit.clone(), w.at),
        }
    }

    /// The tenant and subject whose row (version, head, active and fallback pointers) this
    /// write moves if it lands: the only writes to `continuity_subjects` but `touch_used`.
    pub(super) fn moves_pointers_of(&self) -> Option<(&str, &SubjectKey)> {
        match self {
            Write::Capsule(w) if w.revision.is_some() => Some((&w.tenant, &w.subject)),
            Write::Archive(w) => Some((&w.tenant, &w.subject)),
            Write::Delete(w) => Some((&w.tenant, &w.subject)),
            _ => None,
        }
    }

    /// Runs the write's statements in `tx` and records its audit entry if it landed.
    pub(super) async fn apply<D: Engine>(
        &self,
        tx: &mut AuditedTx<'_, D>,
        appends: &mut super::memory::GroupAppends,
    ) -> Result<Result<Landed, Refusal>, Error> {
        if !matches!(self, Write::Memory(_)) {
            // The group's appends held so far land before this write's statements run.
            appends.flush(tx).await?;
        }
        let outcome = match self {
            Write::Memory(w) => {
                let (written, change) = super::memory::put(tx, w, appends).await?;
                // Writing a document's content again is no change and no audit entry.
                if written.committed {
                    let (draft, at) = self.audit();
                    tx.record(draft, at);
                }
                return Ok(Ok(Landed::Memory(written, change)));
            }
            Write::Capsule(w) => capsule(tx, w).await?,
            Write::Archive(w) => archive(tx, w).await?,
            Write::Delete(w) => delete(tx, w).await?,
            Write::ColdStore(w) => cold_store(tx, w).await?,
            Write::Rehydrate(w) => rehydrate(tx, w).await?,
            Write::Plan(w) => plan(tx, w).await?,
            Write::Snapshot(w) => snapshot(tx, w).await?,
            Write::Message(w) => super::messages::message(tx, w).await?,
            Write::Delivery(w) => super::messages::delivery(tx, w).await?,
            Write::Nonce(w) => super::messages::nonce(tx, w).await?,
            Write::Key(w) => super::messages::key(tx, w).await?,
        };
        if outcome.is_ok() {
            let (draft, at) = self.audit();
            tx.record(draft, at);
        }
        Ok(outcome.map(|()| Landed::Done))
    }
}

/// What a write that landed answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Landed {
    Done,
    /// A memory document's revision after the write, and on SQLite what it changed in the
    /// tenant's in-memory index (applied once the write committed).
    Memory(MemoryWritten, Option<Box<IndexChange>>),
}

async fn capsule<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &CapsuleWrite,
) -> Result<Result<(), Refusal>, Error> {
    let kind = w.subject.kind.as_str();
    let key = w.subject.key.as_str();
    if let Some(idem) = &w.idempotency {
        let inserted = query(
            "INSERT INTO continuity_idempotency (tenant, idempotency_key, request_sha256, \
             response, subject_kind, subject_id, revision_id, capsule_sha256, recorded_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
        )
        .bind(w.tenant.as_str())
        .bind(idem.key.as_str())
        .bind(idem.request_sha256.as_str())
        .bind(idem.response.as_slice())
        .bind(idem.subject_kind.as_str())
        .bind(idem.subject_id.as_str())
        .bind(idem.revision_id.as_str())
        .bind(idem.capsule_sha256.as_str())
        .bind(w.at)
        .execute(tx.conn())
        .await?;
        if inserted == 0 {
            return Ok(Err(Refusal::KeyTaken));
        }
    }
    let Some(revision) = &w.revision else {
        return Ok(Ok(()));
    };
    let moved =
        match w.expected_version {
            None => query(
                "INSERT INTO continuity_subjects (tenant, subject_kind, subject_key, subject_id, \
                 version, head_sequence, head_revision, active_sequence, active_revision, \
                 fallback_sequence, fallback_revision) \
                 VALUES ($1, $2, $3, $4, 1, $5, $6, $5, $6, $5, $6) ON CONFLICT DO NOTHING",
            )
            .bind(w.tenant.as_str())
            .bind(kind)
            .bind(key)
            .bind(w.subject_id.as_str())
            .bind(revision.sequence)
            .bind(revision.revision_id.as_str())
            .execute(tx.conn())
            .await?
                == 0,
            Some(version) => {
                query(
                    "UPDATE continuity_subjects SET subject_id = $4, version = version + 1, \
                 head_sequence = $5, head_revision = $6, active_sequence = $5, \
                 active_revision = $6, fallback_sequence = $5, fallback_revision = $6 \
                 WHERE tenant = $1 AND subject_kind = $2 AND subject_key = $3 AND version = $7 \
                 AND head_revision = $8",
                )
                .bind(w.tenant.as_str())
                .bind(kind)
                .bind(key)
                .bind(w.subject_id.as_str())
                .bind(revision.sequence)
                .bind(revision.revision_id.as_str())
                .bind(version)
                .bind(revision.previous_id.as_str())
                .execute(tx.conn())
                .await?
                    == 0
            }
        };
    if moved {
        if let Some(idem) = &w.idempotency {
            query("DELETE FROM continuity_idempotency WHERE tenant = $1 AND idempotency_key = $2")
                .bind(w.tenant.as_str())
                .bind(idem.key.as_str())
                .execute(tx.conn())
                .await?;
        }
        return Ok(Err(Refusal::Moved));
    }
    query(
        "INSERT INTO continuity_revisions (tenant, subject_kind, subject_key, sequence, \
         revision_id, previous_id, operation, capsule, capsule_sha256, actor, recorded_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(w.tenant.as_str())
    .bind(kind)
    .bind(key)
    .bind(revision.sequence)
    .bind(revision.revision_id.as_str())
    .bind(revision.previous_id.as_str())
    .bind(revision.operation)
    .bind(revision.capsule.as_slice())
    .bind(revision.capsule_sha256.as_str())
    .bind(revision.actor.as_str())
    .bind(w.at)
    .execute(tx.conn())
    .await?;
    Ok(Ok(()))
}

async fn archive<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &ArchiveWrite,
) -> Result<Result<(), Refusal>, Error> {
    let inserted = query(
        "INSERT INTO continuity_archives (tenant, archive_path, subject_kind, subject_key, \
         subject_id, archived_at, archived_unix, revision_id, state, envelope) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'archived', $9) ON CONFLICT DO NOTHING",
    )
    .bind(w.tenant.as_str())
    .bind(w.archive_path.as_str())
    .bind(w.subject.kind.as_str())
    .bind(w.subject.key.as_str())
    .bind(w.subject_id.as_str())
    .bind(w.archived_at.as_str())
    .bind(w.archived_unix)
    .bind(w.revision_id.as_str())
    .bind(w.envelope.as_slice())
    .execute(tx.conn())
    .await?;
    if inserted == 0 {
        return Ok(Err(Refusal::Exists));
    }
    let moved = query(
        "UPDATE continuity_subjects SET version = version + 1, active_sequence = NULL, \
         active_revision = NULL WHERE tenant = $1 AND subject_kind = $2 AND subject_key = $3 \
         AND version = $4 AND active_sequence IS NOT NULL",
    )
    .bind(w.tenant.as_str())
    .bind(w.subject.kind.as_str())
    .bind(w.subject.key.as_str())
    .bind(w.expected_version)
    .execute(tx.conn())
    .await?
        == 0;
    if moved {
        query("DELETE FROM continuity_archives WHERE tenant = $1 AND archive_path = $2")
            .bind(w.tenant.as_str())
            .bind(w.archive_path.as_str())
            .execute(tx.conn())
            .await?;
        return Ok(Err(Refusal::Moved));
    }
    Ok(Ok(()))
}

async fn delete<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &DeleteWrite,
) -> Result<Result<(), Refusal>, Error> {
    if let Some(version) = w.expected_version {
        let moved = query(
            "UPDATE continuity_subjects SET version = version + 1, \
             active_sequence = CASE WHEN $5 THEN NULL ELSE active_sequence END, \
             active_revision = CASE WHEN $5 THEN NULL ELSE active_revision END, \
             fallback_sequence = CASE WHEN $6 THEN NULL ELSE fallback_sequence END, \
             fallback_revision = CASE WHEN $6 THEN NULL ELSE fallback_revision END \
             WHERE tenant = $1 AND subject_kind = $2 AND subject_key = $3 AND version = $4",
        )
        .bind(w.tenant.as_str())
        .bind(w.subject.kind.as_str())
        .bind(w.subject.key.as_str())
        .bind(version)
        .bind(w.clear_active)
        .bind(w.clear_fallback)
        .execute(tx.conn())
        .await?
            == 0;
        if moved {
            return Ok(Err(Refusal::Moved));
        }
    }
    for path in &w.archives {
        // Already gone (deleted or cold-stored concurrently): nothing to delete there; the
        // operations layer reports what it selected, as the original reports what it saw.
        query(
            "DELETE FROM continuity_archives WHERE tenant = $1 AND archive_path = $2 \
             AND state = 'archived'",
        )
        .bind(w.tenant.as_str())
        .bind(path.as_str())
        .execute(tx.conn())
        .await?;
    }
    Ok(Ok(()))
}

async fn cold_store<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &ColdStoreWrite,
) -> Result<Result<(), Refusal>, Error> {
    let moved = query(
        "UPDATE continuity_archives SET state = 'cold', envelope = NULL, cold_key = $3, \
         cold_sha256 = $4, stub = $5, cold_stored_at = $6 \
         WHERE tenant = $1 AND archive_path = $2 AND state = 'archived'",
    )
    .bind(w.tenant.as_str())
    .bind(w.archive_path.as_str())
    .bind(w.cold_key.as_str())
    .bind(w.cold_sha256.as_str())
    .bind(w.stub.as_str())
    .bind(w.cold_stored_at.as_str())
    .execute(tx.conn())
    .await?
        == 0;
    Ok(if moved { Err(Refusal::Gone) } else { Ok(()) })
}

async fn rehydrate<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &RehydrateWrite,
) -> Result<Result<(), Refusal>, Error> {
    let moved = query(
        "UPDATE continuity_archives SET state = 'archived', envelope = $3, cold_key = NULL, \
         cold_sha256 = NULL, stub = NULL, cold_stored_at = NULL \
         WHERE tenant = $1 AND archive_path = $2 AND state = 'cold' AND cold_sha256 = $4",
    )
    .bind(w.tenant.as_str())
    .bind(w.archive_path.as_str())
    .bind(w.envelope.as_slice())
    .bind(w.cold_sha256.as_str())
    .execute(tx.conn())
    .await?
        == 0;
    Ok(if moved { Err(Refusal::Gone) } else { Ok(()) })
}

async fn plan<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &PlanWrite,
) -> Result<Result<(), Refusal>, Error> {
    query(
        "INSERT INTO continuity_plans (tenant, plan, body) VALUES ($1, $2, $3) \
         ON CONFLICT (tenant, plan) DO UPDATE SET body = excluded.body",
    )
    .bind(w.tenant.as_str())
    .bind(w.plan)
    .bind(w.body.as_slice())
    .execute(tx.conn())
    .await?;
    Ok(Ok(()))
}

async fn snapshot<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    w: &SnapshotWrite,
) -> Result<Result<(), Refusal>, Error> {
    let inserted = query(
        "INSERT INTO context_snapshots (tenant, snapshot_id, content_id, body, actor, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, snapshot_id) DO NOTHING",
    )
    .bind(w.tenant.as_str())
    .bind(w.snapshot_id.as_str())
    .bind(w.content_id.as_str())
    .bind(w.body.as_slice())
    .bind(w.actor.as_str())
    .bind(w.created_at.as_str())
    .execute(tx.conn())
    .await?;
    Ok(if inserted == 1 {
        Ok(())
    } else {
        Err(Refusal::Exists)
    })
}

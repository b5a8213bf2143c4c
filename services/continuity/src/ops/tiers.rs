//! Moving capsules between tiers by hand: archive (active → archive envelope) and explicit
//! delete, per tier.

use serde_json::json;

use super::{Continuity, WRITE_ATTEMPTS, audit, bytes_of, now, subject_of};
use crate::domain::access::{Caller, WRITE};
use crate::domain::error::{ConflictKind, ContinuityError};
use crate::domain::json::canonical_json;
use crate::domain::request::{ArchiveRequest, DeleteRequest, parse_body};
use crate::domain::tiers::{DeletePlan, archive_response, delete_response};
use crate::domain::timestamp::{format_compact, format_iso};
use crate::domain::write::archive_envelope;
use crate::error::Error;
use crate::store::{ArchiveWrite, DeleteWrite, Refusal, Write};

impl Continuity {
    /// `POST /v1/continuity/archive`: the active capsule becomes an archive envelope and
    /// leaves retrieval; the fallback snapshot stays.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn archive(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = ArchiveRequest::from_json(&parse_body(body)?)?;
        caller.require(WRITE)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        let active_path = subject.active_path();
        caller.require_read_path(&active_path)?;
        caller.require_write_path(&active_path)?;
        for attempt in 1..=WRITE_ATTEMPTS {
            // The original stamps `archived_at` with the request's microseconds; the archive's
            // name keeps whole seconds.
            let at = now();
            let archive_path = subject.archive_path(&format_compact(at));
            caller.require_write_path(&archive_path)?;
            let row = self.store.subject(&caller.tenant, &subject).await?;
            let (row, active) = match row {
                Some(row) => match row.active.clone() {
                    Some(active) => (row, active),
                    None => return Err(not_found().into()),
                },
                None => return Err(not_found().into()),
            };
            let (capsule, _) = self.load_as(
                &active.revision_id,
                &active.capsule,
                request.subject_kind,
                &request.subject_id,
                "Continuity capsule subject does not match requested subject",
            )?;
            let (path, envelope) =
                archive_envelope(&subject, &capsule, caller.peer_id(), &request.reason, at);
            let write = Write::Archive(Box::new(ArchiveWrite {
                tenant: caller.tenant.clone(),
                subject: subject.clone(),
                subject_id: capsule.subject_id.clone(),
                expected_version: row.version,
                archive_path: path.clone(),
                archived_at: format_iso(at),
                archived_unix: at.unix_timestamp(),
                revision_id: active.revision_id.clone(),
                envelope: canonical_json(&envelope).into_bytes(),
                at,
                audit: audit(
                    caller,
                    "archive",
                    &path,
                    json!({
                        "archived_path": path,
                        "removed_active_path": active_path,
                        "revision_id": active.revision_id,
                        "reason": request.reason,
                    }),
                ),
            }));
            match self.store.write(write).await? {
                Ok(()) => {
                    return Ok(bytes_of(&archive_response(
                        &path,
                        &active_path,
                        Some(&active.revision_id),
                    )));
                }
                Err(Refusal::Exists) => {
                    return Err(ContinuityError::Conflict {
                        kind: ConflictKind::State,
                        detail: "Continuity archive envelope already exists".into(),
                    }
                    .into());
                }
                Err(_) => tracing::debug!(attempt, "subject moved; archiving again"),
            }
            tokio::task::yield_now().await;
        }
        Err(ContinuityError::lock_timeout(&subject.lock_id(), WRITE_ATTEMPTS).into())
    }

    /// `POST /v1/continuity/delete`: the selected tiers of one subject. Revisions stay: the
    /// history is append-only.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn delete(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = DeleteRequest::from_json(&parse_body(body)?)?;
        caller.require(WRITE)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        let active_path = subject.active_path();
        let fallback_path = subject.fallback_path();
        for attempt in 1..=WRITE_ATTEMPTS {
            let row = self.store.subject(&caller.tenant, &subject).await?;
            let mut plan = DeletePlan::default();
            let mut clear_active = false;
            let mut clear_fallback = false;
            if request.delete_active {
                caller.require_write_path(&active_path)?;
                clear_active = row.as_ref().is_some_and(|r| r.active_revision.is_some());
                if clear_active {
                    plan.deleted_paths.push(active_path.clone());
                } else {
                    plan.missing_paths.push(active_path.clone());
                }
            }
            if request.delete_fallback {
                caller.require_write_path(&fallback_path)?;
                clear_fallback = row.as_ref().is_some_and(|r| r.fallback.is_some());
                if clear_fallback {
                    plan.deleted_paths.push(fallback_path.clone());
                } else {
                    plan.missing_paths.push(fallback_path.clone());
                }
            }
            let mut archives = Vec::new();
            if request.delete_archive {
                for archive in self
                    .store
                    .archives(&caller.tenant, Some(&subject), None, Some("archived"))
                    .await?
                {
                    caller.require_write_path(&archive.archive_path)?;
                    plan.deleted_paths.push(archive.archive_path.clone());
                    archives.push(archive.archive_path);
                }
            }
            let revision = row.as_ref().map(|r| r.head_revision.clone());
            if plan.deleted_paths.is_empty() {
                return Ok(bytes_of(&delete_response(&plan, revision.as_deref())));
            }
            let at = now();
            let write = Write::Delete(Box::new(DeleteWrite {
                tenant: caller.tenant.clone(),
                subject: subject.clone(),
                expected_version: if clear_active || clear_fallback {
                    row.as_ref().map(|r| r.version)
                } else {
                    None
                },
                clear_active,
                clear_fallback,
                archives,
                at,
                audit: audit(
                    caller,
                    "delete",
                    &active_path,
                    json!({
                        "deleted_paths": plan.deleted_paths,
                        "missing_paths": plan.missing_paths,
                        "reason": request.reason,
                    }),
                ),
            }));
            match self.store.write(write).await? {
                Ok(()) => return Ok(bytes_of(&delete_response(&plan, revision.as_deref()))),
                Err(_) => tracing::debug!(attempt, "subject moved; deleting again"),
            }
            tokio::task::yield_now().await;
        }
        Err(ContinuityError::lock_timeout(&subject.lock_id(), WRITE_ATTEMPTS).into())
    }
}

fn not_found() -> ContinuityError {
    ContinuityError::not_found("Continuity capsule not found")
}

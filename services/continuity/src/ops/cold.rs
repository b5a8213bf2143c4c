//! The cold tier's jobs (`POST /v1/ops/run`): cold store, rehydrate and retention apply.
//!
//! Crash safety: a cold store writes the gzip payload to the object store (durable when the
//! put returns; its key is the payload's content id, so a retry rewrites the same object)
//! and only then, in one transaction, turns the archive row cold (envelope dropped, key and
//! stub recorded). A crash between the two leaves the archive hot and an unreferenced
//! object, never a row naming missing bytes. A rehydrate restores the envelope in one
//! transaction; the payload object stays (objects are never deleted while a backup may be
//! copying them; an unreferenced one harms nothing).

use bytes::Bytes;
use noema_core::content_id::sha256_hex;
use noema_store::object::WriteRetry;
use serde_json::json;

use super::{Continuity, audit, bytes_of, now};
use crate::domain::access::{ADMIN, Caller};
use crate::domain::cold::{
    cold_gunzip, cold_gzip, cold_store_response, parse_cold_stub, rehydrate_response,
    rehydrated_envelope, render_cold_stub,
};
use crate::domain::error::{ConflictKind, ContinuityError};
use crate::domain::listing::is_archive_stale;
use crate::domain::plans::{archive_path_from_envelope, load_archive_envelope};
use crate::domain::request::{
    ColdRehydrateRequest, ColdStoreRequest, RetentionApplyRequest, parse_body,
};
use crate::domain::subject::{
    archive_path_from_cold_artifact, cold_storage_path, cold_stub_path, validate_archive_path,
};
use crate::domain::tiers::{ApplyResult, ApplyStatus, dedup_apply_paths, retention_apply_response};
use crate::domain::timestamp::{format_iso, parse_iso, whole_seconds};
use crate::error::Error;
use crate::store::{ArchiveRow, ColdStoreWrite, RehydrateWrite, Write};

/// Where cold payloads live in the service's object store: by content id.
const COLD_PREFIX: &str = "continuity/cold";

fn cold_key(sha256: &str) -> String {
    format!("{COLD_PREFIX}/{sha256}.json.gz")
}

fn already_cold() -> ContinuityError {
    ContinuityError::Conflict {
        kind: ConflictKind::State,
        detail: "Continuity cold artifact already exists for source archive".into(),
    }
}

fn archive_missing() -> ContinuityError {
    ContinuityError::not_found("Continuity archive envelope not found")
}

impl Continuity {
    /// The `continuity_cold_store` job: one archive envelope to the cold tier.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn cold_store(&self, caller: &Caller, arguments: &[u8]) -> Result<Vec<u8>, Error> {
        let request = ColdStoreRequest::from_json(&parse_body(arguments)?)?;
        caller.require(ADMIN)?;
        let source = validate_archive_path(&request.source_archive_path)?;
        check_cold_paths(caller, &source)?;
        let row = self
            .store
            .archive(&caller.tenant, &source)
            .await?
            .ok_or_else(archive_missing)?;
        let body = self.cold_store_row(caller, &source, row).await?;
        Ok(bytes_of(&body))
    }

    /// Cold-stores one hot archive row.
    async fn cold_store_row(
        &self,
        caller: &Caller,
        source: &str,
        row: ArchiveRow,
    ) -> Result<crate::domain::json::Json, Error> {
        let Some(bytes) = row.envelope.as_deref() else {
            return Err(already_cold().into());
        };
        let envelope = load_archive_envelope(bytes)?;
        if archive_path_from_envelope(&envelope)? != source {
            return Err(ContinuityError::invalid(
                "Continuity archive envelope identity does not match source_archive_path",
            )
            .into());
        }
        let at = whole_seconds(now());
        let cold_stored_at = format_iso(at);
        let payload = cold_gzip(bytes)?;
        let stub = render_cold_stub(
            &envelope.json,
            &envelope.capsule,
            source,
            &cold_stored_at,
            at,
        )?;
        let sha256 = sha256_hex(&payload);
        let key = cold_key(&sha256);
        // The bytes are durable before any row names them.
        if self.objects.head(&key).await?.is_none() {
            WriteRetry::STANDARD
                .put(
                    self.objects.as_ref(),
                    &key,
                    Bytes::from(payload),
                    "application/gzip",
                )
                .await?;
        }
        let write = Write::ColdStore(Box::new(ColdStoreWrite {
            tenant: caller.tenant.clone(),
            archive_path: source.to_owned(),
            cold_key: key.clone(),
            cold_sha256: sha256.clone(),
            stub,
            cold_stored_at: cold_stored_at.clone(),
            at,
            audit: audit(
                caller,
                "cold_store",
                source,
                json!({
                    "source_archive_path": source,
                    "cold_storage_path": cold_storage_path(source)?,
                    "cold_stub_path": cold_stub_path(source)?,
                    "object_key": key,
                }),
            ),
        }));
        if self.store.write(write).await?.is_err() {
            // Someone moved it first: cold by now, or deleted.
            return Err(match self.store.archive(&caller.tenant, source).await? {
                Some(row) if row.is_cold() => already_cold(),
                _ => archive_missing(),
            }
            .into());
        }
        Ok(cold_store_response(
            source,
            &cold_stored_at,
            Some(&row.revision_id),
            &envelope.warnings,
        )?)
    }

    /// The `continuity_cold_rehydrate` job: one cold archive back to the hot tier, its
    /// envelope byte for byte as it was archived.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn cold_rehydrate(
        &self,
        caller: &Caller,
        arguments: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let request = ColdRehydrateRequest::from_json(&parse_body(arguments)?)?;
        caller.require(ADMIN)?;
        let (source, stub_path) = match (&request.cold_stub_path, &request.source_archive_path) {
            (Some(stub_path), _) if !stub_path.is_empty() => {
                if !stub_path.starts_with("memory/continuity/cold/index/")
                    || !stub_path.ends_with(".md")
                {
                    return Err(ContinuityError::invalid(
                        "cold_stub_path must be under memory/continuity/cold/index/",
                    )
                    .into());
                }
                (
                    archive_path_from_cold_artifact(stub_path)?,
                    stub_path.clone(),
                )
            }
            (_, Some(source)) => {
                let source = validate_archive_path(source)?;
                let stub = cold_stub_path(&source)?;
                (source, stub)
            }
            _ => {
                return Err(ContinuityError::invalid(
                    "exactly one of source_archive_path or cold_stub_path is required",
                )
                .into());
            }
        };
        let storage_path = cold_storage_path(&source)?;
        caller.require_read_path(&stub_path)?;
        caller.require_read_path(&storage_path)?;
        caller.require_write_path(&source)?;
        caller.require_write_path(&stub_path)?;
        caller.require_write_path(&storage_path)?;
        let row = self
            .store
            .archive(&caller.tenant, &source)
            .await?
            .ok_or_else(|| ContinuityError::not_found("Continuity cold stub not found"))?;
        let Some(cold) = row.cold() else {
            return Err(ContinuityError::Conflict {
                kind: ConflictKind::State,
                detail: "Continuity archive envelope already exists".into(),
            }
            .into());
        };
        let stub = parse_cold_stub(&stub_path, &cold.stub)?;
        if stub.get("source_archive_path") != source {
            return Err(ContinuityError::invalid(
                "Continuity cold stub identity does not match requested source archive",
            )
            .into());
        }
        let payload = match self.objects.get(&cold.key).await {
            Ok(body) => body.bytes().await?,
            Err(err) if err.is_not_found() => {
                return Err(ContinuityError::not_found("Continuity cold payload not found").into());
            }
            Err(err) => return Err(err.into()),
        };
        if sha256_hex(&payload) != cold.sha256 {
            return Err(ContinuityError::invalid(
                "Invalid continuity cold payload: its bytes do not match the recorded checksum",
            )
            .into());
        }
        let decoded = cold_gunzip(&payload)?;
        let (restored, _, warnings) = rehydrated_envelope(&decoded, &source)?;
        let at = now();
        let write = Write::Rehydrate(Box::new(RehydrateWrite {
            tenant: caller.tenant.clone(),
            archive_path: source.clone(),
            cold_sha256: cold.sha256.clone(),
            envelope: restored,
            at,
            audit: audit(
                caller,
                "cold_rehydrate",
                &source,
                json!({
                    "source_archive_path": source,
                    "cold_storage_path": storage_path,
                    "cold_stub_path": stub_path,
                    "object_key": cold.key,
                }),
            ),
        }));
        if self.store.write(write).await?.is_err() {
            return Err(ContinuityError::Conflict {
                kind: ConflictKind::State,
                detail: format!("Continuity cold artifact changed during rehydrate: {source}"),
            }
            .into());
        }
        let rehydrated_at = format_iso(whole_seconds(at));
        Ok(bytes_of(&rehydrate_response(
            &source,
            &rehydrated_at,
            Some(&row.revision_id),
            &warnings,
        )?))
    }

    /// The `continuity_retention_apply` job: cold-stores the listed stale archives, each in
    /// its own transaction, reporting each path.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn retention_apply(
        &self,
        caller: &Caller,
        arguments: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let request = RetentionApplyRequest::from_json(&parse_body(arguments)?)?;
        caller.require(ADMIN)?;
        let (unique, mut warnings) = dedup_apply_paths(&request.source_archive_paths);
        warnings.sort();
        let mut results = Vec::with_capacity(unique.len());
        for path in &unique {
            results.push(self.apply_one(caller, path).await?);
        }
        Ok(bytes_of(&retention_apply_response(
            request.source_archive_paths.len(),
            unique.len(),
            &results,
            &warnings,
        )))
    }

    async fn apply_one(&self, caller: &Caller, raw: &str) -> Result<ApplyResult, Error> {
        let refused = |status: ApplyStatus, err: &ContinuityError| {
            ApplyResult::new(raw, status).with_detail(detail_of(err))
        };
        let source = match validate_archive_path(raw) {
            Ok(source) => source,
            Err(err) => return Ok(refused(ApplyStatus::FailedInvalidArchive, &err)),
        };
        if let Err(err) = check_cold_paths(caller, &source) {
            return Ok(refused(ApplyStatus::FailedAuthorization, &err));
        }
        let Some(row) = self.store.archive(&caller.tenant, &source).await? else {
            return Ok(ApplyResult::new(raw, ApplyStatus::SkippedMissing));
        };
        if row.is_cold() {
            return Ok(ApplyResult::new(raw, ApplyStatus::SkippedAlreadyCold));
        }
        let envelope = row.envelope.as_deref().map(load_archive_envelope);
        match envelope {
            Some(Ok(envelope)) => match archive_path_from_envelope(&envelope) {
                Ok(path) if path == source => {
                    let archived_at = envelope
                        .json
                        .get("archived_at")
                        .and_then(|v| v.as_str())
                        .and_then(parse_iso);
                    if !is_archive_stale(archived_at, now(), self.options.retention_archive_days) {
                        return Ok(ApplyResult::new(raw, ApplyStatus::SkippedNotStale));
                    }
                }
                Ok(_) => {
                    let err = ContinuityError::invalid("archive identity mismatch");
                    return Ok(refused(ApplyStatus::FailedInvalidArchive, &err));
                }
                Err(err) => return Ok(refused(ApplyStatus::of_error(&err, false), &err)),
            },
            Some(Err(err)) => return Ok(refused(ApplyStatus::FailedInvalidArchive, &err)),
            None => return Ok(ApplyResult::new(raw, ApplyStatus::SkippedAlreadyCold)),
        }
        match self.cold_store_row(caller, &source, row).await {
            Ok(_) => Ok(ApplyResult::new(raw, ApplyStatus::ColdStored)),
            Err(Error::Refused(err)) => {
                let cold_now = matches!(
                    self.store.archive(&caller.tenant, &source).await?,
                    Some(row) if row.is_cold()
                );
                Ok(refused(ApplyStatus::of_error(&err, cold_now), &err))
            }
            Err(other) => {
                tracing::warn!(path = %source, error = %noema_core::ErrorChain(&other), "retention apply could not cold-store an archive");
                Ok(ApplyResult::new(raw, ApplyStatus::FailedInternal)
                    .with_detail(other.to_string()))
            }
        }
    }
}

/// The namespace checks of a cold store (read and write the archive, write both cold files).
fn check_cold_paths(caller: &Caller, source: &str) -> Result<(), ContinuityError> {
    caller.require_read_path(source)?;
    caller.require_write_path(source)?;
    caller.require_write_path(&cold_storage_path(source)?)?;
    caller.require_write_path(&cold_stub_path(source)?)
}

/// The detail text a result row shows for a refusal (`str(exc.detail)`).
fn detail_of(err: &ContinuityError) -> String {
    noema_core::ServiceError::public_message(err)
}

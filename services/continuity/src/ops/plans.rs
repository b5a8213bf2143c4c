//! The refresh and retention plans, over the caller's tenant, persisted (audited) as the
//! original persists `refresh_state.json` and `retention_state.json`.

use noema_core::content_id::ContentId;
use serde_json::json;
use time::OffsetDateTime;

use super::{Continuity, audit, bytes_of, now};
use crate::domain::access::{Caller, READ, WRITE};
use crate::domain::json::{Json, to_py_json};
use crate::domain::model::SubjectKind;
use crate::domain::plans::{
    ColdState, RefreshSource, RetentionArchive, load_archive_envelope, refresh_plan,
    refresh_response, refresh_state, retention_plan,
};
use crate::domain::request::{RefreshPlanRequest, RetentionPlanRequest, parse_body};
use crate::domain::subject::{
    CONTINUITY_DIR, REFRESH_STATE_PATH, RETENTION_STATE_PATH, SubjectKey,
};
use crate::domain::timestamp::whole_seconds;
use crate::error::Error;
use crate::store::{PlanWrite, Write};

/// A subject read in the last this many seconds is `recently_used`.
const RECENTLY_USED_SECONDS: i64 = 7 * 86_400;

impl Continuity {
    /// `POST /v1/continuity/refresh/plan`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn refresh_plan(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = RefreshPlanRequest::from_json(&parse_body(body)?)?;
        caller.require(READ)?;
        caller.require(WRITE)?;
        caller.require_read_path(CONTINUITY_DIR)?;
        caller.require_write_path(REFRESH_STATE_PATH)?;
        let at = whole_seconds(now());
        let kind = request.subject_kind.map(|k| k.as_str());
        let mut sources = Vec::new();
        for subject in self.store.subjects(&caller.tenant, kind).await? {
            let recently_used = subject.used_at >= at.unix_timestamp() - RECENTLY_USED_SECONDS;
            let (sequence, fallback_only) = match (&subject.active_revision, &subject.fallback) {
                (Some((sequence, _)), _) => (*sequence, false),
                (None, Some((sequence, _))) => (*sequence, true),
                (None, None) => continue,
            };
            let Some(key) = SubjectKind::parse(&subject.subject_kind).map(|kind| SubjectKey {
                kind,
                key: subject.subject_key.clone(),
            }) else {
                continue;
            };
            let Some(revision) = self.store.revision(&caller.tenant, &key, sequence).await? else {
                continue;
            };
            if let Some(capsule) = self.capsule(&revision.revision_id, &revision.capsule) {
                sources.push(RefreshSource {
                    capsule,
                    fallback_only,
                    recently_used,
                });
            }
        }
        let candidates = refresh_plan(&request, &sources, at);
        let revision = self
            .persist_plan(
                caller,
                "refresh",
                REFRESH_STATE_PATH,
                &refresh_state(at, &candidates),
                at,
            )
            .await?;
        Ok(bytes_of(&refresh_response(
            at,
            &candidates,
            Some(&revision),
        )))
    }

    /// `POST /v1/continuity/retention/plan`: the next window of stale hot archives.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn retention_plan(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = RetentionPlanRequest::from_json(&parse_body(body)?)?;
        caller.require(READ)?;
        caller.require(WRITE)?;
        caller.require_read_path(CONTINUITY_DIR)?;
        caller.require_write_path(RETENTION_STATE_PATH)?;
        let at = whole_seconds(now());
        let days = self.options.retention_archive_days;
        let cutoff = at.unix_timestamp() - days * 86_400;
        let limit = u32::try_from(request.limit).unwrap_or(100);
        let kind = request.subject_kind.map(|k| k.as_str());
        let (rows, total) = self
            .store
            .stale_archives(&caller.tenant, kind, cutoff, limit)
            .await?;
        let window = rows.len();
        let archives = rows
            .into_iter()
            .map(|row| RetentionArchive {
                envelope: load_archive_envelope(row.envelope.as_deref().unwrap_or_default()),
                path: row.archive_path,
                // A row is hot or cold as a whole: there is no partial cold state.
                cold_state: ColdState::None,
            })
            .collect();
        let mut plan = retention_plan(&request, archives, at, days)?;
        // The window was cut in SQL; the total counts the whole backlog (less any archive of
        // the window the plan skipped as invalid).
        let skipped = window.saturating_sub(plan.total_candidates);
        plan.total_candidates = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .saturating_sub(skipped);
        let revision = self
            .persist_plan(
                caller,
                "retention",
                RETENTION_STATE_PATH,
                &plan.persisted(),
                at,
            )
            .await?;
        Ok(bytes_of(&plan.response(Some(&revision))))
    }

    /// Stores a plan unless it is unchanged; answers its content id (the response's
    /// `latest_commit`).
    async fn persist_plan(
        &self,
        caller: &Caller,
        plan: &'static str,
        path: &str,
        body: &Json,
        at: OffsetDateTime,
    ) -> Result<String, Error> {
        let bytes = to_py_json(body).into_bytes();
        let id = ContentId::of_bytes(&bytes).into_string();
        if self.store.plan(&caller.tenant, plan).await?.as_deref() == Some(bytes.as_slice()) {
            return Ok(id);
        }
        let write = Write::Plan(Box::new(PlanWrite {
            tenant: caller.tenant.clone(),
            plan,
            body: bytes,
            at,
            audit: audit(
                caller,
                &format!("{plan}_plan"),
                path,
                json!({"plan_id": id}),
            ),
        }));
        // A plan is the latest one written: nothing to refuse.
        let _ = self.store.write(write).await?;
        Ok(id)
    }
}

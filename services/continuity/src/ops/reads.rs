//! Reads: read (with fallback and the startup view), list, compare and history. Each reads
//! only the caller's tenant.

use std::sync::Arc;

use super::{Continuity, ListedRows, RowCache, bytes_of, now, subject_of};
use crate::domain::access::{Caller, READ};
use crate::domain::cold::parse_cold_stub;
use crate::domain::context::graph::{self as context_graph, STARTUP_GRAPH_CAPS, empty_graph};
use crate::domain::context::schedule;
use crate::domain::listing::{ArtifactState, ListRow, PreparedRow, list_body};
use crate::domain::model::{SubjectKind, SubjectKind as Kind};
use crate::domain::plans::load_archive_envelope;
use crate::domain::read::{ReadOutcome, StartupExtras, loaded_as, read_body, resolve_loaded};
use crate::domain::request::{CompareRequest, ListRequest, ReadRequest, parse_body};
use crate::domain::revision::{StoredRevision, chain_intact};
use crate::domain::stored::StoredCapsule;
use crate::domain::subject::{CONTINUITY_DIR, SubjectKey, cold_stub_path};
use crate::domain::trust::SourceState;
use crate::domain::verify::compare;
use crate::error::Error;
use crate::store::{ContinuityStore, HistoryRow, Pointers};

/// What a read answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadAnswer {
    pub body: Vec<u8>,
    pub source_state: &'static str,
    pub revision_id: String,
    pub capsule_sha256: String,
}

/// A page of a subject's history.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub revisions: Vec<HistoryRow>,
    /// Where the next page starts (a sequence), if there is one.
    pub next: Option<i64>,
    pub chain_intact: bool,
}

impl Continuity {
    /// `POST /v1/continuity/read`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn read(&self, caller: &Caller, body: &[u8]) -> Result<ReadAnswer, Error> {
        let request = ReadRequest::from_json(&parse_body(body)?)?;
        caller.require(READ)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        caller.require_read_path(&subject.active_path())?;
        let row = self.store.subject(&caller.tenant, &subject).await?;
        let at = now();
        // Each revision with its id, as loaded (from the cache when it was before).
        let active_revision = row.as_ref().and_then(|r| r.active.as_ref()).map(|a| {
            (
                a.revision_id.as_str(),
                self.load(&a.revision_id, &a.capsule),
            )
        });
        let active = active_revision.as_ref().map(|(_, revision)| {
            loaded_as(
                &revision.loaded,
                request.subject_kind,
                &request.subject_id,
                "Continuity capsule subject does not match requested subject",
            )
        });
        let fallback_ref = row.as_ref().and_then(|r| r.fallback.clone());
        let fallback = match (&active, &fallback_ref, request.allow_fallback) {
            (Some(Ok(_)), _, _) | (_, None, _) | (_, _, false) => None,
            (_, Some((sequence, _)), true) => {
                caller.require_read_path(&subject.fallback_path())?;
                self.store
                    .revision(&caller.tenant, &subject, *sequence)
                    .await?
            }
        };
        let fallback_revision = fallback.as_ref().map(|f| {
            (
                f.revision_id.as_str(),
                self.load(&f.revision_id, &f.capsule),
            )
        });
        let outcome: ReadOutcome = resolve_loaded(&request, active, || {
            fallback_revision.as_ref().map(|(_, revision)| {
                loaded_as(
                    &revision.loaded,
                    request.subject_kind,
                    &request.subject_id,
                    "Continuity fallback snapshot subject does not match requested subject",
                )
            })
        })?;
        // The revision the read answers with, if any.
        let shown = match outcome.source_state {
            SourceState::Active => active_revision.as_ref(),
            SourceState::Fallback => fallback_revision.as_ref(),
            _ => None,
        };
        let startup = if request.startup_view() {
            Some(
                self.startup_extras(caller, request.subject_kind, &request.subject_id, at)
                    .await?,
            )
        } else {
            None
        };
        let capsule_json = shown.and_then(|(_, revision)| revision.read_json());
        let body = read_body(&outcome, at, startup, capsule_json.as_deref());
        if let Some(row) = &row
            && ContinuityStore::needs_touch(row.used_at, at.unix_timestamp())
        {
            self.mark_used(&caller.tenant, &subject, at.unix_timestamp());
        }
        let (revision_id, capsule_sha256) = shown
            .map(|(id, revision)| ((*id).to_owned(), revision.sha256.clone()))
            .unwrap_or_default();
        Ok(ReadAnswer {
            body,
            source_state: outcome.source_state.as_str(),
            revision_id,
            capsule_sha256,
        })
    }

    /// The startup view's graph (thread/task anchors; user/peer are not graph anchors) and
    /// the subject's schedule context.
    async fn startup_extras(
        &self,
        caller: &Caller,
        kind: SubjectKind,
        subject_id: &str,
        at: time::OffsetDateTime,
    ) -> Result<StartupExtras, Error> {
        let graph_summary = match kind {
            Kind::User | Kind::Peer => empty_graph(
                STARTUP_GRAPH_CAPS,
                None,
                vec![context_graph::anchor_not_supported(Some(kind))],
            ),
            Kind::Thread | Kind::Task => {
                self.derive_graph(caller, kind, subject_id, STARTUP_GRAPH_CAPS)
                    .await?
            }
        };
        let scopes = schedule::scopes([(kind, subject_id.to_owned())]);
        Ok(StartupExtras {
            graph_summary,
            schedule_context: self.schedule_context(caller, &scopes, at).await?,
        })
    }

    /// Records the subject's use for the refresh plan, off the read's path.
    fn mark_used(&self, tenant: &str, subject: &SubjectKey, at: i64) {
        let store = self.store.clone();
        let (tenant, subject) = (tenant.to_owned(), subject.clone());
        tokio::spawn(async move {
            if let Err(err) = store.touch_used(&tenant, &subject, at).await {
                tracing::debug!(error = %noema_core::ErrorChain(&err), "could not record a capsule's use");
            }
        });
    }

    /// `POST /v1/continuity/list`: the caller's tenant only. Unlike the original, a token
    /// without read access to `memory/continuity` is refused (403) rather than shown an
    /// empty list.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn list(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = ListRequest::from_json(&parse_body(body)?)?;
        caller.require(READ)?;
        caller.require_read_path(CONTINUITY_DIR)?;
        let at = now();
        let kind = request.subject_kind.map(|k| k.as_str());
        let subjects = self.store.pointers(&caller.tenant, kind).await?;
        let prepared = self
            .listed_rows(caller, &subjects, request.include_fallback, at)
            .await?;
        let mut rows = Vec::new();
        if request.include_archived || request.include_cold {
            let state = match (request.include_archived, request.include_cold) {
                (true, false) => Some("archived"),
                (false, true) => Some("cold"),
                _ => None,
            };
            for archive in self
                .store
                .archives(&caller.tenant, None, kind, state)
                .await?
            {
                if let Some(cold) = archive.cold() {
                    let Ok(stub_path) = cold_stub_path(&archive.archive_path) else {
                        continue;
                    };
                    if let Ok(stub) = parse_cold_stub(&stub_path, &cold.stub) {
                        rows.push(PreparedRow::of_cold(&ListRow::cold(
                            &stub.list_fields(),
                            &stub_path,
                        )));
                    }
                } else if let Some(envelope) = archive.envelope.as_deref() {
                    let Ok(envelope) = load_archive_envelope(envelope) else {
                        continue;
                    };
                    let field = |name: &str| {
                        envelope
                            .json
                            .get(name)
                            .and_then(|v| v.as_str())
                            .map(str::to_owned)
                    };
                    let row = ListRow::archived(
                        &envelope.capsule,
                        &archive.archive_path,
                        field("active_path").as_deref(),
                        field("archived_at").as_deref(),
                        at,
                        self.options.retention_archive_days,
                    );
                    rows.push(PreparedRow::of_capsule(&row, &envelope.capsule));
                }
            }
        }
        let all: Vec<&PreparedRow> = prepared.iter().map(Arc::as_ref).chain(&rows).collect();
        Ok(list_body(&request, &all, at))
    }

    /// The prepared rows of the tiers a list shows (the order does not matter: both of a
    /// list's orders are total over distinct subjects and tiers). Rows by revision from the
    /// cache; the others prepared from their capsules, the capsules not in memory fetched in
    /// one go. The same pointers (the store's unchanged cached ones) give the same rows: a
    /// tenant's last complete answer is kept and given again while they are unchanged.
    async fn listed_rows(
        &self,
        caller: &Caller,
        subjects: &Arc<[Pointers]>,
        include_fallback: bool,
        at: time::OffsetDateTime,
    ) -> Result<Arc<[Arc<PreparedRow>]>, Error> {
        let key = (caller.tenant.clone(), include_fallback);
        if let Some(memo) = self.listed.get(&key)
            && Arc::ptr_eq(&memo.pointers, subjects)
        {
            return Ok(Arc::clone(&memo.rows));
        }
        let mut complete = true;
        let mut prepared: Vec<Arc<PreparedRow>> = Vec::with_capacity(subjects.len());
        let mut missing = Vec::new();
        for (i, s) in subjects.iter().enumerate() {
            let fallback = s.fallback.as_ref().filter(|_| include_fallback);
            let shown = s
                .active
                .iter()
                .map(|p| (p, ArtifactState::Active))
                .chain(fallback.map(|p| (p, ArtifactState::Fallback)));
            for ((sequence, id), state) in shown {
                match self.row_cache(state).get(id.as_str()) {
                    Some(row) => prepared.push(row),
                    None => missing.push((i, *sequence, id.as_str(), state)),
                }
            }
        }
        if !missing.is_empty() {
            let wanted: Vec<_> = missing
                .iter()
                .filter(|(_, _, id, _)| self.capsules.get(*id).is_none())
                .map(|(i, sequence, _, _)| {
                    let s = &subjects[*i];
                    (s.subject_kind.clone(), s.subject_key.clone(), *sequence)
                })
                .collect();
            for (_, _, revision) in self.store.revisions(&caller.tenant, &wanted).await? {
                self.load(&revision.revision_id, &revision.capsule);
            }
            for (i, _, id, state) in missing {
                let s = &subjects[i];
                let Some(kind) = SubjectKind::parse(&s.subject_kind) else {
                    continue;
                };
                let key = SubjectKey {
                    kind,
                    key: s.subject_key.clone(),
                };
                match self.list_row(id, state, &key, at) {
                    Some(row) => prepared.push(row),
                    None => complete = false,
                }
            }
        }
        let prepared: Arc<[Arc<PreparedRow>]> = prepared.into();
        if complete {
            let memo = ListedRows {
                pointers: Arc::clone(subjects),
                rows: Arc::clone(&prepared),
            };
            self.listed.insert(key, Arc::new(memo));
        }
        Ok(prepared)
    }

    /// The prepared list row of a revision in a tier, from the cache, else from its loaded
    /// capsule (`None` if it was not loaded or does not load: the row is left out).
    fn list_row(
        &self,
        revision_id: &str,
        state: ArtifactState,
        subject: &SubjectKey,
        at: time::OffsetDateTime,
    ) -> Option<Arc<PreparedRow>> {
        if let Some(row) = self.row_cache(state).get(revision_id) {
            return Some(row);
        }
        let loaded = self.capsules.get(revision_id)?;
        let (capsule, _) = loaded.loaded.as_ref().ok()?;
        let row = match state {
            ArtifactState::Fallback => ListRow::fallback(capsule, &subject.fallback_path(), at),
            _ => ListRow::active(capsule, &subject.active_path(), at),
        };
        let row = Arc::new(PreparedRow::of_capsule(&row, capsule));
        self.row_cache(state)
            .insert(revision_id.to_owned(), Arc::clone(&row));
        Some(row)
    }

    /// The prepared rows of a tier (active or fallback), by revision id.
    fn row_cache(&self, state: ArtifactState) -> &RowCache {
        match state {
            ArtifactState::Fallback => &self.fallback_rows,
            _ => &self.active_rows,
        }
    }

    /// `POST /v1/continuity/compare`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn compare(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = CompareRequest::from_json(&parse_body(body)?)?;
        caller.require(READ)?;
        let subject = subject_of(request.subject_kind, &request.subject_id)?;
        caller.require_read_path(&subject.active_path())?;
        crate::domain::verify::check_compare(&request)?;
        let row = self.store.subject(&caller.tenant, &subject).await?;
        let stored = row
            .as_ref()
            .and_then(|r| r.active.as_ref())
            .map(|a| StoredCapsule::new(a.capsule.as_slice()));
        let outcome = compare(&request, stored.as_ref())?;
        Ok(bytes_of(&outcome.response()))
    }

    /// A subject's revisions newest first, before sequence `before` (`None`: from the
    /// newest), with whether they form an intact chain.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn history(
        &self,
        caller: &Caller,
        kind: &str,
        subject_id: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<History, Error> {
        caller.require(READ)?;
        let kind = SubjectKind::parse(kind).ok_or_else(|| {
            crate::domain::error::ContinuityError::invalid(format!(
                "subject_kind must be one of user, peer, thread, task, not {kind:?}"
            ))
        })?;
        let subject = subject_of(kind, subject_id)?;
        caller.require_read_path(&subject.active_path())?;
        let limit = limit.clamp(1, 200);
        // One more than asked says whether a page follows.
        let mut revisions = self
            .store
            .history(
                &caller.tenant,
                &subject,
                before.unwrap_or(i64::MAX),
                limit + 1,
            )
            .await?;
        let next = if revisions.len() > limit as usize {
            revisions.truncate(limit as usize);
            revisions.last().map(|r| r.sequence)
        } else {
            None
        };
        let stored: Vec<StoredRevision> = revisions
            .iter()
            .map(|r| StoredRevision {
                revision_id: r.revision_id.clone(),
                previous: r.previous_id.clone(),
                sequence: r.sequence,
                operation: r.operation.clone(),
                capsule_sha256: r.capsule_sha256.clone(),
                capsule: r.capsule.clone(),
            })
            .collect();
        let chain_intact = chain_intact(&caller.tenant, &subject, &stored);
        Ok(History {
            revisions,
            next,
            chain_intact,
        })
    }
}

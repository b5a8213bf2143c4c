//! Context retrieval and snapshots (digest §10, issue 16): load what the bundle needs (the
//! selected capsules, the graph anchor's artifacts, memory, evidence, tasks, schedule), ask
//! `domain::context`, answer. Reads only; a snapshot is one audited write.
//!
//! Memory files, search hits, tasks and schedule items come through [`ContextInputs`]
//! (`ops/context_inputs.rs` reads them from the continuity store's memory, task and schedule
//! tables), so the bundle's rules see plain inputs.

use serde_json::json;
use time::OffsetDateTime;

use super::{Continuity, audit, bytes_of, now};
use crate::domain::access::{Caller, Need, READ, WRITE};
use crate::domain::context::bundle::{
    BundleParts, CORE_MEMORY_PATHS, MemoryDocument, core_memory, mixed_recent_relevant,
    pack_recent_relevant, retrieve_response,
};
use crate::domain::context::graph::{
    self, CONTEXT_GRAPH_CAPS, CapsuleLink, GraphCaps, TaskLink, derive_graph, empty_graph,
};
use crate::domain::context::request::{ContinuityMode, RetrieveRequest, SnapshotRequest};
use crate::domain::context::schedule::{self, ScheduleEntry, schedule_context};
use crate::domain::context::selection::{Selection, effective_selectors};
use crate::domain::context::snapshot::{
    self, check_snapshot_id, create_response, new_snapshot, resolve_as_of, snapshot_core_memory,
};
use crate::domain::context::state::{SelectorSource, continuity_state, empty_state};
use crate::domain::error::ContinuityError;
use crate::domain::json::Json;
use crate::domain::model::{Capsule, SubjectKind};
use crate::domain::plans::load_archive_envelope;
use crate::domain::request::parse_body;
use crate::domain::subject::SubjectKey;
use crate::error::Error;
use crate::store::{SnapshotWrite, Write};

/// `POST /v1/context/retrieve` needs the original's `search` scope (or Noema's
/// `continuity:read`).
pub const SEARCH: Need = Need {
    noema: "continuity:read",
    cognirelay: "search",
};

/// The mismatch details the read path uses, so a foreign capsule is the same 400.
const ACTIVE_MISMATCH: &str = "Continuity capsule subject does not match requested subject";
const FALLBACK_MISMATCH: &str =
    "Continuity fallback snapshot subject does not match requested subject";

/// A search the evidence list asks for (the search store answers it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub query: String,
    pub limit: usize,
    pub include_types: Vec<String>,
    /// `None`: any age.
    pub time_window_days: Option<i64>,
}

/// What a context bundle reads beyond continuity capsules, per tenant. Each answer is the
/// tenant's own data only; namespace checks are applied by the caller of these methods.
#[tonic::async_trait]
pub trait ContextInputs: Send + Sync {
    /// The memory files among `paths` that exist, in the order of `paths`.
    async fn memory_documents(
        &self,
        tenant: &str,
        paths: &[String],
    ) -> Result<Vec<MemoryDocument>, Error>;
    /// Ranked evidence rows `{path, type, snippet, score, …}` for a query.
    async fn search(&self, tenant: &str, query: &SearchQuery) -> Result<Vec<Json>, Error>;
    /// The shared tasks (open and done), as the graph reads them.
    async fn tasks(&self, tenant: &str) -> Result<Vec<TaskLink>, Error>;
    /// The scheduled items, as the schedule context reads them.
    async fn schedule(&self, tenant: &str) -> Result<Vec<ScheduleEntry>, Error>;
}

fn readable(caller: &Caller, path: &str) -> Result<bool, ContinuityError> {
    match caller.require_read_path(path) {
        Ok(()) => Ok(true),
        Err(ContinuityError::Forbidden { .. }) => Ok(false),
        Err(other) => Err(other),
    }
}

fn is_cold_path(path: &str) -> bool {
    path.starts_with("memory/continuity/cold/")
}

impl Continuity {
    /// `POST /v1/context/retrieve`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn retrieve(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = RetrieveRequest::from_json(&parse_body(body)?)?;
        caller.require(SEARCH)?;
        let at = now();
        let core = self.core_memory(caller).await?;
        let state = if request.continuity_mode == ContinuityMode::Off {
            empty_state(request.max_tokens_estimate)
        } else {
            let selection = effective_selectors(&request)?;
            let sources = self.selector_sources(caller, &selection).await?;
            continuity_state(&request, &selection, sources, at)?
        };
        let recent = self.recent_relevant(caller, &request).await?;
        let graph_context = self.graph_context(caller, &request).await?;
        let scheduled =
            if request.primary_subject().is_some() || !request.continuity_selectors.is_empty() {
                let scopes = schedule::scopes(
                    request
                        .primary_subject()
                        .map(|(k, id)| (k, id.to_owned()))
                        .into_iter()
                        .chain(
                            request
                                .continuity_selectors
                                .iter()
                                .map(|s| (s.subject_kind, s.subject_id.clone())),
                        ),
                );
                Some(self.schedule_context(caller, &scopes, at).await?)
            } else {
                None
            };
        let response = retrieve_response(
            &request,
            at,
            BundleParts {
                core_memory: core,
                recent_relevant: recent,
                continuity_state: state,
                graph_context,
                schedule_context: scheduled,
            },
        );
        Ok(bytes_of(&response))
    }

    /// The readable core memory files.
    async fn core_memory(&self, caller: &Caller) -> Result<Json, Error> {
        let documents = self.core_documents(caller).await?;
        Ok(core_memory(&documents))
    }

    async fn core_documents(&self, caller: &Caller) -> Result<Vec<MemoryDocument>, Error> {
        let mut paths = Vec::new();
        for path in CORE_MEMORY_PATHS {
            if readable(caller, path)? {
                paths.push(path.to_owned());
            }
        }
        self.inputs.memory_documents(&caller.tenant, &paths).await
    }

    /// Each selector's active capsule and (when that cannot be used) fallback, as the caller
    /// may see them.
    async fn selector_sources(
        &self,
        caller: &Caller,
        selection: &Selection,
    ) -> Result<Vec<SelectorSource>, Error> {
        let mut sources = Vec::new();
        for selector in &selection.selectors {
            let subject = SubjectKey::new(selector.kind, &selector.subject_id)?;
            let active_readable = readable(caller, &subject.active_path())?;
            let mut source = SelectorSource {
                selector: selector.clone(),
                active_readable,
                active: None,
                fallback_readable: false,
                fallback: None,
            };
            if !active_readable {
                sources.push(source);
                continue;
            }
            let row = self.store.subject(&caller.tenant, &subject).await?;
            source.active = row.as_ref().and_then(|r| r.active.as_ref()).map(|a| {
                self.load_as(
                    &a.revision_id,
                    &a.capsule,
                    selector.kind,
                    &selector.subject_id,
                    ACTIVE_MISMATCH,
                )
            });
            if !matches!(source.active, Some(Ok(_))) {
                source.fallback_readable = readable(caller, &subject.fallback_path())?;
                if source.fallback_readable
                    && let Some((sequence, _)) = row.as_ref().and_then(|r| r.fallback.clone())
                    && let Some(revision) = self
                        .store
                        .revision(&caller.tenant, &subject, sequence)
                        .await?
                {
                    source.fallback = Some(self.load_as(
                        &revision.revision_id,
                        &revision.capsule,
                        selector.kind,
                        &selector.subject_id,
                        FALLBACK_MISMATCH,
                    ));
                }
            }
            sources.push(source);
        }
        Ok(sources)
    }

    /// `recent_relevant`: for a thread/task subject, its capsule's supporting documents and
    /// the search hits for its id (the original reads the capsule as `/v1/continuity/read`
    /// does, so that route's scope and namespace refusals apply); otherwise the search hits for
    /// the task text, readable and outside the cold tier, packed.
    async fn recent_relevant(
        &self,
        caller: &Caller,
        request: &RetrieveRequest,
    ) -> Result<Vec<Json>, Error> {
        let tenant = &caller.tenant;
        if let Some((kind @ (SubjectKind::Thread | SubjectKind::Task), id)) =
            request.primary_subject()
        {
            caller.require(READ)?;
            let subject = SubjectKey::new(kind, id)?;
            caller.require_read_path(&subject.active_path())?;
            let row = self.store.subject(tenant, &subject).await?;
            let capsule = match row.as_ref().and_then(|r| r.active.as_ref()) {
                Some(a) => Some(
                    self.load_as(&a.revision_id, &a.capsule, kind, id, ACTIVE_MISMATCH)
                        .map(|(c, _)| c)?,
                ),
                None => None,
            };
            let mut supporting = Vec::new();
            if let Some(capsule) = &capsule {
                let mut paths = Vec::new();
                for path in related_document_paths(capsule) {
                    if caller.require(READ).is_ok() && readable(caller, &path)? {
                        paths.push(path);
                    }
                }
                supporting = self.inputs.memory_documents(tenant, &paths).await?;
            }
            let hits = self
                .inputs
                .search(
                    tenant,
                    &SearchQuery {
                        query: id.to_owned(),
                        limit: request.limit,
                        include_types: Vec::new(),
                        time_window_days: None,
                    },
                )
                .await
                .unwrap_or_default();
            let hits = self.visible_hits(caller, hits, false)?;
            return Ok(mixed_recent_relevant(&supporting, hits, request.limit));
        }
        let hits = self
            .inputs
            .search(
                tenant,
                &SearchQuery {
                    query: request.task.clone(),
                    limit: request.limit,
                    include_types: request.include_types.clone(),
                    time_window_days: Some(request.time_window_days),
                },
            )
            .await?;
        let hits = self.visible_hits(caller, hits, true)?;
        Ok(pack_recent_relevant(hits, request.limit))
    }

    /// Evidence rows the token may read (and, for the task search, none of the cold tier).
    fn visible_hits(
        &self,
        caller: &Caller,
        hits: Vec<Json>,
        drop_cold: bool,
    ) -> Result<Vec<Json>, Error> {
        let mut out = Vec::new();
        for hit in hits {
            let path = hit.get("path").and_then(Json::as_str).unwrap_or_default();
            if !readable(caller, path)? || (drop_cold && is_cold_path(path)) {
                continue;
            }
            out.push(hit);
        }
        Ok(out)
    }

    /// `graph_context`: suppressed with continuity off; anchored at the primary subject when
    /// it is a thread or task, else at the first thread/task selector.
    async fn graph_context(
        &self,
        caller: &Caller,
        request: &RetrieveRequest,
    ) -> Result<Json, Error> {
        let caps = CONTEXT_GRAPH_CAPS;
        if request.continuity_mode == ContinuityMode::Off {
            return Ok(empty_graph(
                caps,
                None,
                vec![graph::suppressed_by_continuity_mode()],
            ));
        }
        let mut unsupported: Option<SubjectKind> = None;
        let mut anchor = None;
        let candidates = request
            .primary_subject()
            .map(|(k, id)| (k, id.to_owned()))
            .into_iter()
            .chain(
                request
                    .continuity_selectors
                    .iter()
                    .map(|s| (s.subject_kind, s.subject_id.clone())),
            );
        for (kind, id) in candidates {
            match kind {
                SubjectKind::Thread | SubjectKind::Task => {
                    anchor = Some((kind, id));
                    break;
                }
                other => {
                    unsupported.get_or_insert(other);
                }
            }
        }
        match anchor {
            Some((kind, id)) => self.derive_graph(caller, kind, &id, caps).await,
            None => Ok(empty_graph(
                caps,
                None,
                vec![match unsupported {
                    Some(kind) => graph::anchor_not_supported(Some(kind)),
                    None => graph::anchor_not_provided(),
                }],
            )),
        }
    }

    /// The graph around a thread or task: its tasks and its capsules in every hot tier.
    pub(super) async fn derive_graph(
        &self,
        caller: &Caller,
        kind: SubjectKind,
        subject_id: &str,
        caps: GraphCaps,
    ) -> Result<Json, Error> {
        let tasks = self.inputs.tasks(&caller.tenant).await?;
        let mut capsules = Vec::new();
        if let Ok(subject) = SubjectKey::new(kind, subject_id) {
            let row = self.store.subject(&caller.tenant, &subject).await?;
            if let Some(active) = row.as_ref().and_then(|r| r.active.as_ref())
                && let Some(capsule) = self.capsule(&active.revision_id, &active.capsule)
            {
                capsules.push(capsule_link(&subject.active_path(), &capsule));
            }
            if let Some((sequence, _)) = row.as_ref().and_then(|r| r.fallback.clone())
                && let Some(revision) = self
                    .store
                    .revision(&caller.tenant, &subject, sequence)
                    .await?
                && let Some(capsule) = self.capsule(&revision.revision_id, &revision.capsule)
            {
                capsules.push(capsule_link(&subject.fallback_path(), &capsule));
            }
            for archive in self
                .store
                .archives(&caller.tenant, Some(&subject), None, Some("archived"))
                .await?
            {
                if let Some(envelope) = archive.envelope.as_deref()
                    && let Ok(envelope) = load_archive_envelope(envelope)
                {
                    capsules.push(capsule_link(&archive.archive_path, &envelope.capsule));
                }
            }
        }
        let can_read = |path: &str| caller.require_read_path(path).is_ok();
        Ok(derive_graph(
            kind,
            subject_id,
            &tasks,
            &capsules,
            caller.require(READ).is_ok(),
            &can_read,
            caps,
        ))
    }

    /// The schedule context of some subjects, at `at`.
    pub(super) async fn schedule_context(
        &self,
        caller: &Caller,
        scopes: &[(SubjectKind, String)],
        at: OffsetDateTime,
    ) -> Result<Json, Error> {
        let entries = if scopes.is_empty() {
            Vec::new()
        } else {
            self.inputs.schedule(&caller.tenant).await?
        };
        Ok(schedule_context(
            &entries,
            scopes,
            at.unix_timestamp(),
            Vec::new(),
        ))
    }

    /// `POST /v1/context/snapshot`: needs `search` and `write:projects`.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn create_snapshot(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let request = SnapshotRequest::from_json(&parse_body(body)?)?;
        caller.require(SEARCH)?;
        caller.require(WRITE)?;
        let as_of = resolve_as_of(&request.as_of.mode, request.as_of.value.as_deref())?;
        let at = now();
        let core = if request.include_core {
            snapshot_core_memory(&self.core_documents(caller).await?)
        } else {
            Json::Array(vec![])
        };
        let hits = self
            .inputs
            .search(
                &caller.tenant,
                &SearchQuery {
                    query: request.task.clone(),
                    limit: request.limit,
                    include_types: request.include_types.clone(),
                    time_window_days: None,
                },
            )
            .await?;
        let mut items = self.visible_hits(caller, hits, false)?;
        items.sort_by(|a, b| {
            let score = |r: &Json| match r.get("score") {
                Some(Json::Number(n)) => n.as_f64().unwrap_or(0.0),
                _ => 0.0,
            };
            let path = |r: &Json| {
                r.get("path")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            score(b).total_cmp(&score(a)).then(path(a).cmp(&path(b)))
        });
        items.truncate(request.limit);
        let snapshot = new_snapshot(&request, as_of, at, core, items, env!("CARGO_PKG_VERSION"))?;
        caller.require_write_path(&snapshot.path)?;
        let write = SnapshotWrite {
            tenant: caller.tenant.clone(),
            snapshot_id: snapshot.snapshot_id.clone(),
            content_id: snapshot.content_id.clone(),
            body: snapshot.body.clone(),
            actor: caller.peer_id().to_owned(),
            created_at: snapshot.created_at.clone(),
            at,
            audit: audit(
                caller,
                "context_snapshot_create",
                &snapshot.path,
                json!({
                    "snapshot_id": snapshot.snapshot_id,
                    "content_id": snapshot.content_id,
                    "as_of_mode": "working_tree",
                    "items": snapshot.item_count,
                }),
            ),
        };
        // The id is derived from the content: a refusal means these very bytes are stored.
        let committed = self
            .store
            .write(Write::Snapshot(Box::new(write)))
            .await?
            .is_ok();
        Ok(bytes_of(&create_response(&snapshot, committed)))
    }

    /// `GET /v1/context/snapshot/{id}`: the snapshot's stored bytes.
    #[tracing::instrument(skip_all, fields(tenant = %caller.tenant))]
    pub async fn read_snapshot(
        &self,
        caller: &Caller,
        snapshot_id: &str,
    ) -> Result<Vec<u8>, Error> {
        caller.require(READ)?;
        check_snapshot_id(snapshot_id)?;
        caller.require_read_path(&format!("{}/{snapshot_id}.json", snapshot::SNAPSHOT_DIR))?;
        let row = self
            .store
            .snapshot(&caller.tenant, snapshot_id)
            .await?
            .ok_or_else(|| {
                ContinuityError::not_found(format!("Snapshot not found: {snapshot_id}"))
            })?;
        Ok(snapshot::read_response(&row.content_id, &row.body)?)
    }
}

/// `continuity.related_documents[].path`, the non-empty ones, in order.
fn related_document_paths(capsule: &Capsule) -> Vec<String> {
    capsule
        .continuity
        .related_documents
        .as_ref()
        .and_then(|v| v.as_array())
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| e.get("path").and_then(|p| p.as_str()))
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn capsule_link(path: &str, capsule: &Capsule) -> CapsuleLink {
    CapsuleLink {
        path: path.to_owned(),
        subject_kind: capsule.subject_kind.as_str().to_owned(),
        subject_id: capsule.subject_id.clone(),
        related_documents: related_document_paths(capsule),
        superseded_by: capsule
            .thread_descriptor
            .as_ref()
            .and_then(|td| td.superseded_by.clone()),
    }
}

//! What a context bundle reads beyond capsules, from the continuity store's own memory,
//! task and schedule tables: the tenant's data only, namespace checks left to the caller
//! (`ops/context.rs`), as [`ContextInputs`] promises.

use super::context::{ContextInputs, SearchQuery};
use super::memory::hit;
use super::now;
use super::tasks::task_of;
use crate::domain::context::bundle::MemoryDocument;
use crate::domain::context::graph::TaskLink;
use crate::domain::context::schedule::ScheduleEntry;
use crate::domain::json::Json;
use crate::domain::memory;
use crate::error::Error;
use crate::store::{ContinuityStore, HitQuery, TaskFilter};

/// [`ContextInputs`] over a [`ContinuityStore`].
#[derive(Debug, Clone)]
pub struct StoreInputs {
    store: ContinuityStore,
}

impl StoreInputs {
    pub fn new(store: ContinuityStore) -> Self {
        StoreInputs { store }
    }
}

#[tonic::async_trait]
impl ContextInputs for StoreInputs {
    async fn memory_documents(
        &self,
        tenant: &str,
        paths: &[String],
    ) -> Result<Vec<MemoryDocument>, Error> {
        Ok(self
            .store
            .memory_documents_at(tenant, paths)
            .await?
            .into_iter()
            .map(|document| MemoryDocument {
                path: document.path,
                text: document.content,
            })
            .collect())
    }

    async fn search(&self, tenant: &str, query: &SearchQuery) -> Result<Vec<Json>, Error> {
        let terms = memory::query_terms(&query.query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let q = HitQuery {
            terms,
            types: memory::type_filter(&query.include_types),
            since_micros: memory::window_start(now(), None, query.time_window_days),
            by_recency: false,
            limit: i64::try_from(query.limit).unwrap_or(i64::MAX),
            namespaces: None,
        };
        let mut hits: Vec<_> = self
            .store
            .memory_hits(tenant, &q)
            .await?
            .into_iter()
            .map(|row| hit(row, true))
            .collect();
        memory::rank_by_score(&mut hits);
        Ok(hits.iter().map(|h| h.to_json()).collect())
    }

    async fn tasks(&self, tenant: &str) -> Result<Vec<TaskLink>, Error> {
        let mut links = Vec::new();
        for row in self.store.tasks(tenant, &TaskFilter::default()).await? {
            let task = task_of(&row)?;
            links.push(TaskLink {
                path: task.path(),
                blocked_by: task.blocked_by(),
                thread_id: task.thread_id.clone(),
                task_id: Some(task.task_id),
            });
        }
        Ok(links)
    }

    async fn schedule(&self, tenant: &str) -> Result<Vec<ScheduleEntry>, Error> {
        let at = now();
        Ok(self
            .store
            .schedule_items(tenant, true)
            .await?
            .into_iter()
            .map(|item| ScheduleEntry {
                item: item.to_json(at),
                schedule_id: item.schedule_id,
                status: item.status,
                subject_kind: item.subject_kind,
                subject_id: item.subject_id,
                thread_id: item.thread_id,
                task_id: item.task_id,
                due_at_ts: item.due_at_ts,
            })
            .collect())
    }
}

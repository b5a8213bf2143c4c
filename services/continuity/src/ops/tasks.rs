//! Tasks (CogniRelay's `/v1/tasks*`): create, update, query, in the caller's tenant, with the
//! original's scopes and namespace checks on the task's path.

use serde_json::json;

use super::{Continuity, WRITE_ATTEMPTS, audit, bytes_of, now};
use crate::domain::access::{Caller, READ, WRITE};
use crate::domain::error::{ConflictKind, ContinuityError};
use crate::domain::json::{Json, to_py_json};
use crate::domain::request::parse_body;
use crate::domain::tasks::{self, Task, TaskQuery};
use crate::domain::timestamp::whole_seconds;
use crate::error::Error;
use crate::store::{TaskFilter, TaskRow, TaskWrite};

/// A stored task's document, or `Corrupt` when the row does not hold one.
pub(super) fn task_of(row: &TaskRow) -> Result<Task, Error> {
    match Json::parse(row.document.as_bytes()) {
        Ok(Json::Object(document)) => Ok(Task::from_document(document)),
        _ => Err(Error::Corrupt(format!(
            "task {} is not a JSON object",
            row.task_id
        ))),
    }
}

/// The revision id of a task document: it names the previous revision, so a task's writes
/// chain like the original's commits.
fn revision(previous: Option<&str>, task: &Task, document: &str) -> String {
    crate::domain::memory::revision_id(previous, &task.path(), document)
}

impl Continuity {
    /// `POST /v1/tasks`.
    pub async fn create_task(&self, caller: &Caller, body: &[u8]) -> Result<Vec<u8>, Error> {
        let body = parse_body(body)?;
        // The original stamps tasks in whole seconds (`iso_now`).
        let at = whole_seconds(now());
        let task = tasks::create(&body, at)?;
        caller.require(WRITE)?;
        if self
            .store()
            .task(&caller.tenant, &task.task_id)
            .await?
            .is_some()
        {
            return Err(exists(&task.task_id).into());
        }
        caller.require_write_path(&task.path())?;
        let document = to_py_json(&Json::Object(task.document.clone()));
        let revision_id = revision(None, &task, &document);
        let landed = self
            .store()
            .task_write(TaskWrite {
                tenant: caller.tenant.clone(),
                task_id: task.task_id.clone(),
                status: task.status.clone(),
                owner_peer: task.owner_peer.clone(),
                thread_id: task.thread_id.clone(),
                updated_at: task.updated_at.clone(),
                document,
                revision_id: revision_id.clone(),
                expected_version: None,
                at,
                audit: audit(
                    caller,
                    "tasks.create",
                    &task.path(),
                    json!({"task_id": task.task_id, "status": task.status}),
                ),
            })
            .await?;
        if !landed {
            return Err(exists(&task.task_id).into());
        }
        Ok(bytes_of(&tasks::created_body(&task, &revision_id)))
    }

    /// `PATCH /v1/tasks/{task_id}`: the set fields replace the stored ones; a writer that
    /// changed the task meanwhile makes this one read it again and re-apply.
    pub async fn update_task(
        &self,
        caller: &Caller,
        task_id: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let patch = tasks::check_update(&parse_body(body)?)?;
        caller.require(WRITE)?;
        for _ in 0..WRITE_ATTEMPTS {
            let row = self
                .store()
                .task(&caller.tenant, task_id)
                .await?
                .ok_or_else(|| ContinuityError::not_found(format!("Task not found: {task_id}")))?;
            let before = task_of(&row)?;
            let at = whole_seconds(now());
            let after = tasks::update(&before, &patch, at)?;
            caller.require_write_path(&after.path())?;
            let document = to_py_json(&Json::Object(after.document.clone()));
            // The same bytes (nothing set, within the second): the original's git has
            // nothing to commit, and so nothing is written here.
            if document == row.document {
                return Ok(bytes_of(&tasks::unchanged_body(&after, &row.revision_id)));
            }
            let revision_id = revision(Some(&row.revision_id), &after, &document);
            let landed = self
                .store()
                .task_write(TaskWrite {
                    tenant: caller.tenant.clone(),
                    task_id: after.task_id.clone(),
                    status: after.status.clone(),
                    owner_peer: after.owner_peer.clone(),
                    thread_id: after.thread_id.clone(),
                    updated_at: after.updated_at.clone(),
                    document,
                    revision_id: revision_id.clone(),
                    expected_version: Some(row.version),
                    at,
                    audit: audit(
                        caller,
                        "tasks.update",
                        &after.path(),
                        json!({"task_id": after.task_id, "status": after.status}),
                    ),
                })
                .await?;
            if landed {
                return Ok(bytes_of(&tasks::updated_body(
                    &before,
                    &after,
                    &revision_id,
                )));
            }
        }
        Err(ContinuityError::lock_timeout(&format!("task_{task_id}"), WRITE_ATTEMPTS).into())
    }

    /// `GET /v1/tasks/query` (the query string as an object of strings).
    pub async fn query_tasks(&self, caller: &Caller, params: &[u8]) -> Result<Vec<u8>, Error> {
        let query = TaskQuery::from_json(&parse_body(params)?)?;
        caller.require(READ)?;
        caller.require_read_path("tasks/open/x.json")?;
        caller.require_read_path("tasks/done/x.json")?;
        let found = self.tasks_of(&caller.tenant, &query).await?;
        Ok(bytes_of(&tasks::query_body(&found)))
    }

    /// The tenant's tasks matching `query`, newest first (for queries and for context
    /// retrieval, which derives blockers from their `blocked_by`).
    pub async fn tasks_of(&self, tenant: &str, query: &TaskQuery) -> Result<Vec<Task>, Error> {
        let filter = TaskFilter {
            status: query.status.clone(),
            owner_peer: query.owner_peer.clone(),
            thread_id: query.thread_id.clone(),
        };
        let mut out = Vec::new();
        for row in self.store().tasks(tenant, &filter).await? {
            let task = task_of(&row)?;
            if query.keeps(&task) {
                out.push(task);
            }
            if out.len() >= query.limit {
                break;
            }
        }
        Ok(out)
    }
}

fn exists(task_id: &str) -> ContinuityError {
    ContinuityError::Conflict {
        kind: ConflictKind::State,
        detail: format!("Task already exists: {task_id}"),
    }
}

//! CogniRelay's task routes (`POST /v1/tasks`, `PATCH /v1/tasks/{task_id}`,
//! `GET /v1/tasks/query`), served by the continuity service per tenant. Bodies pass through
//! as the caller's bytes; the query string goes on as a JSON object of its strings, which the
//! service validates as FastAPI validates query parameters.

use axum::extract::Path;
use noema_proto::continuity::v1 as pb;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::continuity::{COGNIRELAY, Document, Original, Passed, body, call, request_models};
use crate::forward::{Caller, LastQuery};
use crate::route::{Route, Verb};

request_models! {
    TaskCreate => noema_continuity::domain::tasks::TASK_CREATE_REQUEST;
    TaskUpdate => noema_continuity::domain::tasks::TASK_UPDATE_REQUEST;
}

/// `GET /v1/tasks/query` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskQueryParams {
    /// open, in_progress, blocked or done
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub owner_peer: Option<String>,
    /// A peer listed in the task's collaborators
    #[serde(default)]
    pub collaborator: Option<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
    /// 1-500 (100)
    #[serde(default)]
    pub limit: Option<String>,
}

async fn create(caller: Caller, document: Document<TaskCreate>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.create_task(request).await?.into_inner().body,
    ))
}

async fn update(
    caller: Caller,
    Path(task_id): Path<String>,
    document: Document<TaskUpdate>,
) -> Passed {
    let message = pb::TaskUpdateRequest {
        task_id,
        body: document.bytes.to_vec(),
    };
    let (mut client, request) = call(&caller, message);
    Ok(Original(
        client.update_task(request).await?.into_inner().body,
    ))
}

async fn query(caller: Caller, LastQuery(params): LastQuery<TaskQueryParams>) -> Passed {
    let mut object = Map::new();
    for (key, value) in [
        ("status", params.status),
        ("owner_peer", params.owner_peer),
        ("collaborator", params.collaborator),
        ("thread_id", params.thread_id),
        ("limit", params.limit),
    ] {
        if let Some(value) = value {
            object.insert(key.to_owned(), Value::String(value));
        }
    }
    let message = pb::JsonRequest {
        body: serde_json::to_vec(&Value::Object(object)).unwrap_or_else(|_| b"{}".to_vec()),
    };
    let (mut client, request) = call(&caller, message);
    Ok(Original(
        client.query_tasks(request).await?.into_inner().body,
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    vec![
        r.route(
            Verb::Post,
            "/v1/tasks",
            "tasksCreate",
            "CogniRelay: create a shared task record",
            create,
        )
        .calls("CreateTask")
        .tool("tasks.create", "Create a shared task record")
        .status(409, "Task already exists"),
        r.route(
            Verb::Patch,
            "/v1/tasks/{task_id}",
            "tasksUpdate",
            "CogniRelay: update a task (status moves by the original's table; done is final)",
            update,
        )
        .calls("UpdateTask")
        .tool("tasks.update", "Update an existing task record")
        .status(404, "Task not found")
        .status(409, "Invalid task status transition"),
        r.route(
            Verb::Get,
            "/v1/tasks/query",
            "tasksQuery",
            "CogniRelay: the tenant's tasks, newest first, by status, owner, collaborator or thread",
            query,
        )
        .query_model(&noema_continuity::domain::tasks::TASK_QUERY)
        .calls("QueryTasks")
        .tool("tasks.query", "Query shared task records"),
    ]
}

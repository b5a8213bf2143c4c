//! CogniRelay's one-shot schedule routes (`/v1/schedule/items*`), served by the continuity
//! service per tenant. Bodies pass through as the caller's bytes; the item id travels beside
//! them; the list's query string goes on as a JSON object of its strings. A create answers
//! 201, or 200 when it replays an existing item exactly, as the original does.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use noema_proto::continuity::v1 as pb;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::continuity::{COGNIRELAY, Document, Original, Passed, body, call, request_models};
use crate::error::ApiError;
use crate::forward::{Caller, LastQuery};
use crate::route::{OperationDoc, Reply, ResponseDoc, Route, Routes, Schemas, Verb, param_grammar};

// Schedule bodies, passed on as the caller's bytes (possibly empty), documented by the
// service's models of what its checks accept.
request_models! {
    ScheduleCreate => noema_continuity::domain::schedule::CREATE_REQUEST;
    ScheduleUpdate => noema_continuity::domain::schedule::UPDATE_REQUEST;
    ScheduleAcknowledge => noema_continuity::domain::schedule::ACKNOWLEDGE_REQUEST;
    ScheduleRetire => noema_continuity::domain::schedule::RETIRE_REQUEST;
}

/// `GET /v1/schedule/items` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ScheduleListParams {
    /// pending, acknowledged, done or retired
    #[serde(default)]
    pub status: Option<String>,
    /// true: pending items whose time has come; false: pending items still ahead
    #[serde(default)]
    pub due: Option<String>,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
    #[serde(default)]
    pub subject_kind: Option<String>,
    #[serde(default)]
    pub subject_id: Option<String>,
    #[serde(default)]
    pub include_retired: Option<String>,
    /// 1-200 (50)
    #[serde(default)]
    pub limit: Option<String>,
    /// 0-10000 (0)
    #[serde(default)]
    pub offset: Option<String>,
}

/// The service's answer to a create: 201 for a new item, 200 for an exact replay.
pub struct Created {
    body: Vec<u8>,
    created: bool,
}

impl IntoResponse for Created {
    fn into_response(self) -> Response {
        let status = if self.created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        (status, [(CONTENT_TYPE, "application/json")], self.body).into_response()
    }
}

impl Reply for Created {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        for (status, description) in [
            (201, "The new item (CogniRelay's document)"),
            (200, "An exact replay of an existing item"),
        ] {
            doc.responses.push(ResponseDoc {
                status,
                description,
                content: Some((
                    "application/json",
                    serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
                )),
            });
        }
    }
}

fn item<M>(id: String, document: &Document<M>) -> pb::ItemRequest {
    pb::ItemRequest {
        id,
        body: document.bytes.to_vec(),
    }
}

async fn create(caller: Caller, document: Document<ScheduleCreate>) -> Result<Created, ApiError> {
    let (mut client, request) = call(&caller, body(&document.bytes));
    let answer = client.create_schedule_item(request).await?.into_inner();
    Ok(Created {
        body: answer.body,
        created: answer.created,
    })
}

async fn get(caller: Caller, Path(id): Path<String>) -> Passed {
    let (mut client, request) = call(
        &caller,
        pb::ItemRequest {
            id,
            body: Vec::new(),
        },
    );
    Ok(Original(
        client.get_schedule_item(request).await?.into_inner().body,
    ))
}

async fn list(caller: Caller, LastQuery(params): LastQuery<ScheduleListParams>) -> Passed {
    let mut object = Map::new();
    for (key, value) in [
        ("status", params.status),
        ("due", params.due),
        ("task_id", params.task_id),
        ("thread_id", params.thread_id),
        ("subject_kind", params.subject_kind),
        ("subject_id", params.subject_id),
        ("include_retired", params.include_retired),
        ("limit", params.limit),
        ("offset", params.offset),
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
        client.list_schedule_items(request).await?.into_inner().body,
    ))
}

async fn update(
    caller: Caller,
    Path(id): Path<String>,
    document: Document<ScheduleUpdate>,
) -> Passed {
    let (mut client, request) = call(&caller, item(id, &document));
    Ok(Original(
        client
            .update_schedule_item(request)
            .await?
            .into_inner()
            .body,
    ))
}

async fn acknowledge(
    caller: Caller,
    Path(id): Path<String>,
    document: Document<ScheduleAcknowledge>,
) -> Passed {
    let (mut client, request) = call(&caller, item(id, &document));
    Ok(Original(
        client
            .acknowledge_schedule_item(request)
            .await?
            .into_inner()
            .body,
    ))
}

async fn retire(
    caller: Caller,
    Path(id): Path<String>,
    document: Document<ScheduleRetire>,
) -> Passed {
    let (mut client, request) = call(&caller, item(id, &document));
    Ok(Original(
        client
            .retire_schedule_item(request)
            .await?
            .into_inner()
            .body,
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r: Routes = COGNIRELAY;
    let routes = vec![
        r.route(
            Verb::Post,
            "/v1/schedule/items",
            "scheduleCreate",
            "CogniRelay: create a one-shot reminder or task nudge (no scheduler loop runs it)",
            create,
        )
        .calls("CreateScheduleItem")
        .tool(
            "schedule.create",
            "Create a one-shot reminder or task nudge",
        )
        .feature(crate::features::SCHEDULE_REMINDERS)
        .describe("due_at must be in the future (422 otherwise).")
        .status(409, "schedule_id or idempotency_key taken by another item")
        .status(422, "Invalid item"),
        r.route(
            Verb::Get,
            "/v1/schedule/items/{schedule_id}",
            "scheduleGet",
            "CogniRelay: one scheduled item",
            get,
        )
        .calls("GetScheduleItem")
        .tool("schedule.get", "Read one scheduled item")
        .status(404, "No such item"),
        r.route(
            Verb::Get,
            "/v1/schedule/items",
            "scheduleList",
            "CogniRelay: scheduled items, earliest due first, with filters",
            list,
        )
        .query_model(&noema_continuity::domain::schedule::LIST_QUERY)
        .describe("subject_kind and subject_id are given together or not at all (422 otherwise).")
        .calls("ListScheduleItems")
        .tool("schedule.list", "List scheduled items"),
        r.route(
            Verb::Patch,
            "/v1/schedule/items/{schedule_id}",
            "scheduleUpdate",
            "CogniRelay: change a pending item at its version",
            update,
        )
        .calls("UpdateScheduleItem")
        .tool("schedule.update", "Patch a pending scheduled item")
        .describe("expected_version is a JSON integer without a fraction: 7.0 is refused (422).")
        .status(404, "No such item")
        .status(409, "Version or status conflict"),
        r.route(
            Verb::Post,
            "/v1/schedule/items/{schedule_id}/acknowledge",
            "scheduleAcknowledge",
            "CogniRelay: mark an item acknowledged or done",
            acknowledge,
        )
        .calls("AcknowledgeScheduleItem")
        .tool(
            "schedule.acknowledge",
            "Acknowledge or complete a scheduled item",
        )
        .describe("expected_version is a JSON integer without a fraction: 7.0 is refused (422).")
        .status(404, "No such item")
        .status(409, "Version or status conflict"),
        r.route(
            Verb::Post,
            "/v1/schedule/items/{schedule_id}/retire",
            "scheduleRetire",
            "CogniRelay: retire an item without deleting it",
            retire,
        )
        .calls("RetireScheduleItem")
        .tool("schedule.retire", "Retire a scheduled item")
        .describe("expected_version is a JSON integer without a fraction: 7.0 is refused (422).")
        .status(404, "No such item")
        .status(409, "Version or status conflict"),
    ];
    param_grammar(
        routes,
        "schedule_id",
        &serde_json::json!({
            "type": "string",
            "pattern": noema_continuity::domain::rules::SCHEDULE_ID_PATTERN,
        }),
    )
}

//! Tasks: CogniRelay's shared planning records (`POST /v1/tasks`, `PATCH /v1/tasks/{id}`,
//! `GET /v1/tasks/query`), with no I/O.
//!
//! A task is the original's JSON document (its key order: the request model's fields, then
//! `created_at`, `updated_at`), kept per tenant. Its path is the original's
//! (`tasks/open/<id>.json`, `tasks/done/<id>.json` once done), which is what namespaces are
//! checked against. Status moves follow the original's table (`done` is final). Unlike the
//! original, a task id must be one path segment: `../x` would put its file outside `tasks/`.

use time::OffsetDateTime;

use super::error::{ContinuityError, Loc, LocPart};
use super::json::{Json, JsonObject};
use super::schema::{Field, Model, Ty, validate_at, validate_body};
use super::timestamp::format_iso;

pub const STATUSES: &[&str] = &["open", "in_progress", "blocked", "done"];

const ANY_STR: Ty = Ty::Str { min: 0, max: None };
const STRINGS: Ty = Ty::List {
    item: &ANY_STR,
    min: None,
    max: None,
};

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

pub static TASK_CREATE_REQUEST: Model = Model {
    name: "TaskCreateRequest",
    fields: &[
        field(
            "task_id",
            Ty::Documented(&ANY_STR, super::rules::task_id),
            true,
        ),
        field("title", ANY_STR, true),
        field("description", ANY_STR, false),
        field("status", Ty::Literal(STATUSES), false),
        field("owner_peer", ANY_STR, true),
        field("collaborators", STRINGS, false),
        field("thread_id", Ty::Nullable(&ANY_STR), false),
        field("blocked_by", STRINGS, false),
        field("due_at", Ty::Nullable(&ANY_STR), false),
        field("metadata", Ty::Dict, false),
    ],
    forbid_extra: false,
    after: None,
};

pub static TASK_UPDATE_REQUEST: Model = Model {
    name: "TaskUpdateRequest",
    fields: &[
        field("status", Ty::Nullable(&Ty::Literal(STATUSES)), false),
        field("title", Ty::Nullable(&ANY_STR), false),
        field("description", Ty::Nullable(&ANY_STR), false),
        field("owner_peer", Ty::Nullable(&ANY_STR), false),
        field("collaborators", Ty::Nullable(&STRINGS), false),
        field("thread_id", Ty::Nullable(&ANY_STR), false),
        field("blocked_by", Ty::Nullable(&STRINGS), false),
        field("due_at", Ty::Nullable(&ANY_STR), false),
        field("metadata", Ty::Nullable(&Ty::Dict), false),
    ],
    forbid_extra: false,
    after: None,
};

pub static TASK_QUERY: Model = Model {
    name: "TaskQuery",
    fields: &[
        field("status", Ty::Nullable(&ANY_STR), false),
        field("owner_peer", Ty::Nullable(&ANY_STR), false),
        field("collaborator", Ty::Nullable(&ANY_STR), false),
        field("thread_id", Ty::Nullable(&ANY_STR), false),
        field(
            "limit",
            Ty::Int {
                ge: Some(1),
                le: Some(500),
            },
            false,
        ),
    ],
    forbid_extra: false,
    after: None,
};

/// A task as stored and answered: the original's document, and the columns queries filter on.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub task_id: String,
    pub status: String,
    pub owner_peer: String,
    pub thread_id: Option<String>,
    pub updated_at: String,
    pub document: JsonObject,
}

impl Task {
    /// The task's document from its stored form.
    pub fn from_document(document: JsonObject) -> Task {
        let text = |key: &str| document.get(key).and_then(Json::as_str).map(str::to_owned);
        Task {
            task_id: text("task_id").unwrap_or_default(),
            status: text("status").unwrap_or_else(|| "open".to_owned()),
            owner_peer: text("owner_peer").unwrap_or_default(),
            thread_id: text("thread_id"),
            updated_at: text("updated_at").unwrap_or_default(),
            document,
        }
    }

    /// Peers named in `collaborators`.
    pub fn collaborators(&self) -> Vec<String> {
        strings(self.document.get("collaborators"))
    }

    /// Task ids named in `blocked_by`.
    pub fn blocked_by(&self) -> Vec<String> {
        strings(self.document.get("blocked_by"))
    }

    /// The original's path for this task in its status bucket.
    pub fn path(&self) -> String {
        task_path(&self.task_id, &self.status)
    }
}

fn strings(value: Option<&Json>) -> Vec<String> {
    value
        .and_then(Json::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Json::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `tasks/open/<id>.json`, or `tasks/done/<id>.json` for a done task.
pub fn task_path(task_id: &str, status: &str) -> String {
    let bucket = if status == "done" { "done" } else { "open" };
    format!("tasks/{bucket}/{task_id}.json")
}

/// A task id must name one file in its bucket.
pub fn check_task_id(task_id: &str) -> Result<(), ContinuityError> {
    if task_id.is_empty()
        || task_id == "."
        || task_id == ".."
        || task_id.contains(['/', '\\', '\0'])
    {
        return Err(ContinuityError::invalid(format!(
            "Invalid task_id: {task_id}"
        )));
    }
    Ok(())
}

/// The task a create request makes at `now` (the original's `model_dump()` plus the times).
pub fn create(body: &Json, now: OffsetDateTime) -> Result<Task, ContinuityError> {
    let coerced = validate_body(&TASK_CREATE_REQUEST, body).map_err(ContinuityError::Validation)?;
    let get = |key: &str| coerced.get(key).cloned();
    let mut doc = JsonObject::new();
    doc.insert("task_id", get("task_id").unwrap_or(Json::from("")));
    doc.insert("title", get("title").unwrap_or(Json::from("")));
    doc.insert("description", get("description").unwrap_or(Json::from("")));
    doc.insert("status", get("status").unwrap_or(Json::from("open")));
    doc.insert("owner_peer", get("owner_peer").unwrap_or(Json::from("")));
    doc.insert(
        "collaborators",
        get("collaborators").unwrap_or(Json::Array(Vec::new())),
    );
    doc.insert("thread_id", get("thread_id").unwrap_or(Json::Null));
    doc.insert(
        "blocked_by",
        get("blocked_by").unwrap_or(Json::Array(Vec::new())),
    );
    doc.insert("due_at", get("due_at").unwrap_or(Json::Null));
    doc.insert(
        "metadata",
        get("metadata").unwrap_or(Json::Object(JsonObject::new())),
    );
    let stamp = Json::from(format_iso(now));
    doc.insert("created_at", stamp.clone());
    doc.insert("updated_at", stamp);
    let task = Task::from_document(doc);
    check_task_id(&task.task_id)?;
    Ok(task)
}

/// An update request, validated (422) before anything is loaded.
pub fn check_update(body: &Json) -> Result<Json, ContinuityError> {
    validate_body(&TASK_UPDATE_REQUEST, body).map_err(ContinuityError::Validation)
}

/// Whether `from` may move to `to` (the original's `TASK_STATUS_TRANSITIONS`).
fn transition_allowed(from: &str, to: &str) -> bool {
    match from {
        "done" => to == "done",
        "open" | "in_progress" | "blocked" => STATUSES.contains(&to),
        other => other == to,
    }
}

/// `task` after `update` (validated) at `now`: the fields set to non-null values replace the
/// stored ones, the status moves only as the table allows (409 otherwise).
pub fn update(task: &Task, update: &Json, now: OffsetDateTime) -> Result<Task, ContinuityError> {
    let current = task.status.clone();
    let requested = update
        .get("status")
        .and_then(Json::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| current.clone());
    if !transition_allowed(&current, &requested) {
        return Err(ContinuityError::Conflict {
            kind: super::error::ConflictKind::State,
            detail: format!("Invalid task status transition: {current} -> {requested}"),
        });
    }
    let mut doc = task.document.clone();
    if let Some(fields) = update.as_object() {
        for (key, value) in fields.iter() {
            if !value.is_null() && TASK_UPDATE_REQUEST.field(key).is_some() {
                doc.insert(key.clone(), value.clone());
            }
        }
    }
    doc.insert("status", Json::from(requested));
    doc.insert("updated_at", Json::from(format_iso(now)));
    doc.insert("task_id", Json::from(task.task_id.as_str()));
    Ok(Task::from_document(doc))
}

/// `GET /v1/tasks/query` parameters (the query string as an object of strings).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskQuery {
    pub status: Option<String>,
    pub owner_peer: Option<String>,
    pub collaborator: Option<String>,
    pub thread_id: Option<String>,
    pub limit: usize,
}

impl TaskQuery {
    pub fn from_json(params: &Json) -> Result<TaskQuery, ContinuityError> {
        let loc = Loc(vec![LocPart::Key("query".to_owned())]);
        let coerced =
            validate_at(&TASK_QUERY, params, &loc).map_err(ContinuityError::Validation)?;
        let text = |key: &str| {
            coerced
                .get(key)
                .and_then(Json::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let limit = coerced
            .get("limit")
            .and_then(|l| l.to_value().as_u64())
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(100);
        Ok(TaskQuery {
            status: text("status"),
            owner_peer: text("owner_peer"),
            collaborator: text("collaborator"),
            thread_id: text("thread_id"),
            limit,
        })
    }

    /// The filters the store does not apply: collaborator.
    pub fn keeps(&self, task: &Task) -> bool {
        self.collaborator
            .as_ref()
            .is_none_or(|c| task.collaborators().contains(c))
    }
}

/// `{ok, task, path, committed, latest_commit}` for a create.
pub fn created_body(task: &Task, revision_id: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("task", Json::Object(task.document.clone()));
    o.insert("path", Json::from(task.path()));
    o.insert("committed", Json::Bool(true));
    o.insert("latest_commit", Json::from(revision_id));
    Json::Object(o)
}

/// `{ok, task, path, committed_files, latest_commit}` for an update (the old path too when
/// the task moved buckets).
pub fn updated_body(before: &Task, after: &Task, revision_id: &str) -> Json {
    let mut files = vec![Json::from(after.path())];
    if before.path() != after.path() {
        files.push(Json::from(before.path()));
    }
    update_answer(after, files, revision_id)
}

/// An update that left the task's bytes as they were: nothing committed, the head as it was.
pub fn unchanged_body(task: &Task, revision_id: &str) -> Json {
    update_answer(task, Vec::new(), revision_id)
}

/// `{ok, task, path, committed_files, latest_commit}`.
fn update_answer(task: &Task, committed_files: Vec<Json>, revision_id: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("task", Json::Object(task.document.clone()));
    o.insert("path", Json::from(task.path()));
    o.insert("committed_files", Json::Array(committed_files));
    o.insert("latest_commit", Json::from(revision_id));
    Json::Object(o)
}

/// `{ok, count, tasks}`.
pub fn query_body(tasks: &[Task]) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("count", Json::from(tasks.len()));
    o.insert(
        "tasks",
        Json::Array(
            tasks
                .iter()
                .map(|t| Json::Object(t.document.clone()))
                .collect(),
        ),
    );
    Json::Object(o)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::json::to_py_json;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-11-25 23:17:45 UTC);

    /// The original's answers (CogniRelay 1.4.15) for the same requests.
    #[test]
    fn a_created_task_is_the_originals_document() {
        let body = Json::parse(
            br#"{"task_id":"t-1","title":"Tag whales","owner_peer":"peer-1","collaborators":["peer-2"],"blocked_by":["t-0"],"metadata":{"b":1,"a":2}}"#,
        )
        .unwrap();
        let task = create(&body, NOW).unwrap();
        assert_eq!(
            to_py_json(&created_body(&task, "REV")),
            r#"{"ok":true,"task":{"task_id":"t-1","title":"Tag whales","description":"","status":"open","owner_peer":"peer-1","collaborators":["peer-2"],"thread_id":null,"blocked_by":["t-0"],"due_at":null,"metadata":{"b":1,"a":2},"created_at":"2026-11-25T23:17:45Z","updated_at":"2026-11-25T23:17:45Z"},"path":"tasks/open/t-1.json","committed":true,"latest_commit":"REV"}"#
        );
        assert_eq!(task.blocked_by(), vec!["t-0".to_owned()]);
        let err = create(
            &Json::parse(br#"{"task_id":"t-3","title":"x"}"#).unwrap(),
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"missing","loc":["body","owner_peer"],"msg":"Field required","input":{"task_id":"t-3","title":"x"}}]}"#
        );
        let err = create(
            &Json::parse(br#"{"task_id":"t-4","title":"x","owner_peer":"p","status":"nope"}"#)
                .unwrap(),
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"literal_error","loc":["body","status"],"msg":"Input should be 'open', 'in_progress', 'blocked' or 'done'","input":"nope","ctx":{"expected":"'open', 'in_progress', 'blocked' or 'done'"}}]}"#
        );
        // The original writes this one to tasks/x.json, outside tasks/open.
        let err = create(
            &Json::parse(br#"{"task_id":"../x","title":"x","owner_peer":"p"}"#).unwrap(),
            NOW,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "Invalid task_id: ../x");
    }

    #[test]
    fn updates_replace_set_fields_and_follow_the_status_table() {
        let task = create(
            &Json::parse(br#"{"task_id":"t-1","title":"Tag whales","owner_peer":"peer-1"}"#)
                .unwrap(),
            NOW,
        )
        .unwrap();
        let later = NOW + time::Duration::seconds(1);
        let patch = check_update(
            &Json::parse(br#"{"status":"in_progress","title":null,"description":"more"}"#).unwrap(),
        )
        .unwrap();
        let moved = update(&task, &patch, later).unwrap();
        assert_eq!(
            to_py_json(&Json::Object(moved.document.clone())),
            r#"{"task_id":"t-1","title":"Tag whales","description":"more","status":"in_progress","owner_peer":"peer-1","collaborators":[],"thread_id":null,"blocked_by":[],"due_at":null,"metadata":{},"created_at":"2026-11-25T23:17:45Z","updated_at":"2026-11-25T23:17:46Z"}"#
        );
        let done = update(
            &moved,
            &check_update(&Json::parse(br#"{"status":"done"}"#).unwrap()).unwrap(),
            later,
        )
        .unwrap();
        assert_eq!(done.path(), "tasks/done/t-1.json");
        assert!(
            to_py_json(&updated_body(&moved, &done, "R"))
                .contains(r#""committed_files":["tasks/done/t-1.json","tasks/open/t-1.json"]"#)
        );
        let err = update(
            &done,
            &check_update(&Json::parse(br#"{"status":"open"}"#).unwrap()).unwrap(),
            later,
        )
        .unwrap_err();
        assert_eq!(
            (err.http_status(), err.to_string()),
            (
                409,
                "Invalid task status transition: done -> open".to_owned()
            )
        );
    }

    #[test]
    fn query_parameters_are_validated_as_fastapi_does() {
        let err = TaskQuery::from_json(&Json::parse(br#"{"limit":"0"}"#).unwrap()).unwrap_err();
        assert_eq!(
            to_py_json(&err.body()),
            r#"{"detail":[{"type":"greater_than_equal","loc":["query","limit"],"msg":"Input should be greater than or equal to 1","input":"0","ctx":{"ge":1}}]}"#
        );
        let q = TaskQuery::from_json(&Json::parse(br#"{"limit":"5","status":"done"}"#).unwrap())
            .unwrap();
        assert_eq!((q.limit, q.status.as_deref()), (5, Some("done")));
    }
}

//! One-shot scheduled items: CogniRelay's reminders and task nudges (`/v1/schedule/items*`),
//! with no I/O. No scheduler loop runs them (the seed defers it): an item is `due` once its
//! time has passed, until someone acknowledges, completes or retires it.
//!
//! The original validates these bodies by hand, not with pydantic, and answers a bad one with
//! 422 `{"detail":{"code","field","message"}}`; every rule and message here is its own, in its
//! order (unknown keys first, then required fields, then each field).

use time::OffsetDateTime;

use super::error::ContinuityError;
use super::json::{Json, JsonObject, canonical_json, sha256_hex};
use super::rules;
use super::schema::{Field, Model, Ty};
use super::text::{py_len, py_strip};
use super::timestamp::format_iso;

pub const KINDS: &[&str] = &["reminder", "task_nudge"];
pub const STATUSES: &[&str] = &["pending", "acknowledged", "done", "retired"];
const SUBJECT_KINDS: &[&str] = &["user", "peer", "thread", "task"];
const CREATE_KEYS: &[&str] = &[
    "schedule_id",
    "idempotency_key",
    "kind",
    "title",
    "note",
    "due_at",
    "task_id",
    "thread_id",
    "subject_kind",
    "subject_id",
    "metadata",
];
const PATCH_KEYS: &[&str] = &[
    "expected_version",
    "kind",
    "title",
    "note",
    "due_at",
    "task_id",
    "thread_id",
    "subject_kind",
    "subject_id",
    "metadata",
];
const ACK_KEYS: &[&str] = &["expected_version", "status", "reason"];
const RETIRE_KEYS: &[&str] = &["expected_version", "reason"];
const LIST_KEYS: &[&str] = &[
    "status",
    "due",
    "task_id",
    "thread_id",
    "subject_kind",
    "subject_id",
    "include_retired",
    "limit",
    "offset",
];
const ANY_STR: Ty = Ty::Str { min: 0, max: None };
const ID: Ty = Ty::Nullable(&Ty::Documented(&ANY_STR, rules::schedule_id));
const KIND: Ty = Ty::Literal(KINDS);
const TITLE: Ty = Ty::Documented(&ANY_STR, rules::stripped::<160>);
const NOTE: Ty = Ty::Nullable(&Ty::Documented(&ANY_STR, rules::at_most::<1000>));
const DUE_AT: Ty = Ty::Documented(&ANY_STR, rules::due_at);
const LINK: Ty = Ty::Nullable(&Ty::Documented(&ANY_STR, rules::stripped::<200>));
const SUBJECT_KIND: Ty = Ty::Nullable(&Ty::Literal(SUBJECT_KINDS));
const METADATA: Ty = Ty::Nullable(&Ty::Documented(&Ty::Dict, rules::flat_object));
const VERSION: Ty = Ty::Documented(&Ty::Any, rules::integer::<1, { i64::MAX }>);
const REASON: Ty = Ty::Nullable(&Ty::Documented(&ANY_STR, rules::at_most::<500>));
const QUERY_BOOL: Ty = Ty::Documented(&ANY_STR, rules::schedule_query_bool);

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

// The bodies and the list's query as models, for the document only: `create`, `patch`,
// `acknowledge`, `retire` and `ListQuery::from_json` check them by hand (the original's
// messages), and a test holds each model's fields to the keys those accept.

pub static CREATE_REQUEST: Model = Model {
    name: "ScheduleCreateRequest",
    fields: &[
        field("schedule_id", ID, false),
        field("idempotency_key", LINK, false),
        field("kind", KIND, true),
        field("title", TITLE, true),
        field("note", NOTE, false),
        field("due_at", DUE_AT, true),
        field("task_id", LINK, false),
        field("thread_id", LINK, false),
        field("subject_kind", SUBJECT_KIND, false),
        field("subject_id", LINK, false),
        field("metadata", METADATA, false),
    ],
    forbid_extra: true,
    after: None,
};

pub static UPDATE_REQUEST: Model = Model {
    name: "ScheduleUpdateRequest",
    fields: &[
        field("expected_version", VERSION, true),
        field("kind", KIND, false),
        field("title", TITLE, false),
        field("note", NOTE, false),
        field("due_at", DUE_AT, false),
        field("task_id", LINK, false),
        field("thread_id", LINK, false),
        field("subject_kind", SUBJECT_KIND, false),
        field("subject_id", LINK, false),
        field("metadata", METADATA, false),
    ],
    forbid_extra: true,
    after: None,
};

pub static ACKNOWLEDGE_REQUEST: Model = Model {
    name: "ScheduleAcknowledgeRequest",
    fields: &[
        field("expected_version", Ty::Nullable(&VERSION), false),
        field("status", Ty::Literal(&["acknowledged", "done"]), false),
        field("reason", REASON, false),
    ],
    forbid_extra: true,
    after: None,
};

pub static RETIRE_REQUEST: Model = Model {
    name: "ScheduleRetireRequest",
    fields: &[
        field("expected_version", Ty::Nullable(&VERSION), false),
        field("reason", REASON, false),
    ],
    forbid_extra: true,
    after: None,
};

pub static LIST_QUERY: Model = Model {
    name: "ScheduleListQuery",
    fields: &[
        field("status", Ty::Nullable(&Ty::Literal(STATUSES)), false),
        field("due", QUERY_BOOL, false),
        field("task_id", LINK, false),
        field("thread_id", LINK, false),
        field("subject_kind", SUBJECT_KIND, false),
        field("subject_id", LINK, false),
        field("include_retired", QUERY_BOOL, false),
        field(
            "limit",
            Ty::Documented(&Ty::Any, rules::integer::<1, 200>),
            false,
        ),
        field(
            "offset",
            Ty::Documented(&Ty::Any, rules::integer::<0, 10_000>),
            false,
        ),
    ],
    forbid_extra: true,
    after: None,
};

/// The path namespaces are checked against (the original's schedule database).
pub const SCHEDULE_PATH: &str = "memory/schedule/schedule.db";

/// 422 `{"detail":{"code","field","message"}}`.
pub fn invalid(code: &str, field: &str, message: impl Into<String>) -> ContinuityError {
    detailed(422, code, field, message.into())
}

/// 409 with the same shape.
pub fn conflict(code: &str, field: &str, message: &str) -> ContinuityError {
    detailed(409, code, field, message.to_owned())
}

fn detailed(status: u16, code: &str, field: &str, message: String) -> ContinuityError {
    let mut detail = JsonObject::new();
    detail.insert("code", Json::from(code));
    detail.insert("field", Json::from(field));
    detail.insert("message", Json::from(message));
    ContinuityError::Object {
        status,
        detail: Json::Object(detail),
    }
}

/// 404 `{"detail":{"code":"schedule_not_found","schedule_id","warnings":[]}}`.
pub fn not_found(schedule_id: &str) -> ContinuityError {
    let mut detail = JsonObject::new();
    detail.insert("code", Json::from("schedule_not_found"));
    detail.insert("schedule_id", Json::from(schedule_id));
    detail.insert("warnings", Json::Array(Vec::new()));
    ContinuityError::Object {
        status: 404,
        detail: Json::Object(detail),
    }
}

pub fn status_conflict() -> ContinuityError {
    conflict(
        "schedule_status_conflict",
        "status",
        "schedule status does not allow this transition",
    )
}

pub fn version_conflict() -> ContinuityError {
    conflict(
        "schedule_version_conflict",
        "expected_version",
        "expected_version does not match current version",
    )
}

fn version_required() -> ContinuityError {
    invalid(
        "invalid_schedule_version",
        "expected_version",
        "expected_version must be a positive integer",
    )
}

/// The body as an object, or the original's 422 (an empty body is `{}`).
pub fn body_object(bytes: &[u8]) -> Result<JsonObject, ContinuityError> {
    if bytes.is_empty() {
        return Ok(JsonObject::new());
    }
    match Json::parse(bytes) {
        Ok(Json::Object(o)) => Ok(o),
        Ok(_) => Err(invalid(
            "invalid_schedule_payload",
            "body",
            "body must be a JSON object",
        )),
        Err(_) => Err(invalid(
            "invalid_schedule_payload",
            "body",
            "body must be valid JSON",
        )),
    }
}

fn reject_unknown(payload: &JsonObject, allowed: &[&str]) -> Result<(), ContinuityError> {
    match payload.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(invalid(
            "invalid_schedule_payload",
            key,
            format!("unexpected field: {key}"),
        )),
        None => Ok(()),
    }
}

/// `^sched_[a-z0-9][a-z0-9_-]{0,57}$`.
fn schedule_id_shaped(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("sched_") else {
        return false;
    };
    let mut chars = rest.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok
        && rest.len() <= 58
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A schedule id from a path or body (`required`: a missing one is refused).
pub fn schedule_id(
    value: Option<&Json>,
    required: bool,
) -> Result<Option<String>, ContinuityError> {
    match value {
        None | Some(Json::Null) if required => Err(invalid(
            "invalid_schedule_payload",
            "schedule_id",
            "schedule_id is required",
        )),
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) if schedule_id_shaped(py_strip(s)) => {
            Ok(Some(py_strip(s).to_owned()))
        }
        Some(_) => Err(invalid(
            "invalid_schedule_id",
            "schedule_id",
            "schedule_id must match ^sched_[a-z0-9][a-z0-9_-]{0,57}$",
        )),
    }
}

/// The original's `_trim_optional_string` (nullable).
fn optional_string(
    payload: &JsonObject,
    field: &str,
    max: usize,
    min: usize,
    code: &str,
    empty_to_null: bool,
) -> Result<Option<String>, ContinuityError> {
    let bad = || {
        if min == 1 {
            invalid(code, field, format!("{field} must be 1-{max} characters"))
        } else {
            invalid(
                code,
                field,
                format!("{field} must be at most {max} characters"),
            )
        }
    };
    match payload.get(field) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => {
            let out = py_strip(s);
            if empty_to_null && out.is_empty() {
                return Ok(None);
            }
            let n = py_len(out);
            if n < min || n > max {
                return Err(bad());
            }
            Ok(Some(out.to_owned()))
        }
        Some(_) => Err(if min > 0 {
            invalid(
                code,
                field,
                format!("{field} must be {min}-{max} characters"),
            )
        } else {
            invalid(
                code,
                field,
                format!("{field} must be at most {max} characters"),
            )
        }),
    }
}

/// The original's `_trim_required_string`.
fn required_string(
    payload: &JsonObject,
    field: &str,
    max: usize,
    code: &str,
    message: &str,
) -> Result<String, ContinuityError> {
    match payload.get(field) {
        None => Err(invalid(
            "invalid_schedule_payload",
            field,
            format!("{field} is required"),
        )),
        Some(Json::Null) => Err(invalid(
            "invalid_schedule_payload",
            field,
            format!("{field} cannot be null"),
        )),
        Some(Json::String(s)) if (1..=max).contains(&py_len(py_strip(s))) => {
            Ok(py_strip(s).to_owned())
        }
        Some(_) => Err(invalid(code, field, message)),
    }
}

fn kind(payload: &JsonObject) -> Result<String, ContinuityError> {
    match payload.get("kind") {
        None | Some(Json::Null) => Err(invalid(
            "invalid_schedule_payload",
            "kind",
            "kind cannot be null",
        )),
        Some(Json::String(s)) if KINDS.contains(&py_strip(s)) => Ok(py_strip(s).to_owned()),
        Some(_) => Err(invalid(
            "invalid_schedule_kind",
            "kind",
            "kind must be reminder or task_nudge",
        )),
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` → the text and its Unix seconds.
pub fn due_at(value: Option<&Json>) -> Result<(String, i64), ContinuityError> {
    let form = || {
        invalid(
            "invalid_schedule_due_at",
            "due_at",
            "due_at must use YYYY-MM-DDTHH:MM:SSZ",
        )
    };
    let raw = match value {
        None | Some(Json::Null) => {
            return Err(invalid(
                "invalid_schedule_payload",
                "due_at",
                "due_at cannot be null",
            ));
        }
        Some(Json::String(s)) => py_strip(s),
        Some(_) => return Err(form()),
    };
    let b = raw.as_bytes();
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    let shaped = b.len() == 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'Z';
    if !shaped {
        if looks_offset(raw) {
            return Err(invalid(
                "invalid_schedule_due_at",
                "due_at",
                "due_at must be UTC in YYYY-MM-DDTHH:MM:SSZ form",
            ));
        }
        return Err(form());
    }
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    let parsed = time::PrimitiveDateTime::parse(raw, &format).map_err(|_| form())?;
    Ok((raw.to_owned(), parsed.assume_utc().unix_timestamp()))
}

/// `\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2})?` in full.
fn looks_offset(raw: &str) -> bool {
    let b = raw.as_bytes();
    if b.len() < 19 {
        return false;
    }
    let digits = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    let head = digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !head {
        return false;
    }
    let mut rest = &raw[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    if rest.is_empty() {
        return true;
    }
    let r = rest.as_bytes();
    r.len() == 6
        && (r[0] == b'+' || r[0] == b'-')
        && r[1].is_ascii_digit()
        && r[2].is_ascii_digit()
        && r[3] == b':'
        && r[4].is_ascii_digit()
        && r[5].is_ascii_digit()
}

fn subject(payload: &JsonObject) -> Result<(Option<String>, Option<String>), ContinuityError> {
    let has = payload.contains_key("subject_kind") || payload.contains_key("subject_id");
    let kind = match payload.get("subject_kind") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) if SUBJECT_KINDS.contains(&py_strip(s)) => {
            Some(py_strip(s).to_owned())
        }
        Some(_) => {
            return Err(invalid(
                "invalid_schedule_subject",
                "subject_kind",
                "subject_kind must be user, peer, thread, or task",
            ));
        }
    };
    let id = match payload.get("subject_id") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) if (1..=200).contains(&py_len(py_strip(s))) => {
            Some(py_strip(s).to_owned())
        }
        Some(_) => {
            return Err(invalid(
                "invalid_schedule_payload",
                "subject_id",
                "subject_id must be 1-200 characters",
            ));
        }
    };
    if has && kind.is_none() != id.is_none() {
        return Err(invalid(
            "invalid_schedule_subject",
            "subject_kind",
            "subject_kind and subject_id must be supplied or cleared together",
        ));
    }
    Ok((kind, id))
}

/// A flat metadata object (scalars only) whose canonical JSON is at most 2048 bytes; its
/// canonical JSON is what is stored (keys sorted, as the original stores it).
fn metadata(value: Option<&Json>) -> Result<String, ContinuityError> {
    let bad = || {
        invalid(
            "invalid_schedule_metadata",
            "metadata",
            "metadata must be a flat object with canonical JSON <= 2048 bytes",
        )
    };
    let object = match value {
        None | Some(Json::Null) => return Ok("{}".to_owned()),
        Some(Json::Object(o)) => o,
        Some(_) => return Err(bad()),
    };
    if object
        .iter()
        .any(|(_, v)| matches!(v, Json::Array(_) | Json::Object(_)))
    {
        return Err(bad());
    }
    let raw = canonical_json(&Json::Object(object.clone()));
    if raw.len() > 2048 {
        return Err(bad());
    }
    Ok(raw)
}

fn link_missing(kind: &str, task: &Option<String>, thread: &Option<String>, subject: bool) -> bool {
    kind == "task_nudge" && task.is_none() && thread.is_none() && !subject
}

fn link_refusal() -> ContinuityError {
    invalid(
        "invalid_schedule_link",
        "kind",
        "task_nudge requires task_id, thread_id, or subject_kind plus subject_id",
    )
}

/// A stored item: the original's `scheduled_items` row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Item {
    pub schedule_id: String,
    pub kind: String,
    pub status: String,
    pub title: String,
    pub note: Option<String>,
    pub due_at: String,
    pub due_at_ts: i64,
    pub created_at: String,
    pub updated_at: String,
    pub created_by: String,
    pub updated_by: String,
    pub terminal_at: Option<String>,
    pub terminal_by: Option<String>,
    pub terminal_reason: Option<String>,
    pub task_id: Option<String>,
    pub thread_id: Option<String>,
    pub subject_kind: Option<String>,
    pub subject_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub identity_sha256: String,
    pub identity_json: String,
    /// Canonical JSON of the flat metadata object.
    pub metadata: String,
    pub version: i64,
}

fn opt(value: &Option<String>) -> Json {
    value.as_deref().map_or(Json::Null, Json::from)
}

impl Item {
    /// `scheduled`, `due` (its time has come, still pending) or `terminal`.
    pub fn derived_state(&self, now: OffsetDateTime) -> &'static str {
        if self.status != "pending" {
            "terminal"
        } else if self.due_at_ts <= now.unix_timestamp() {
            "due"
        } else {
            "scheduled"
        }
    }

    /// The item as the original answers it, at `now`.
    pub fn to_json(&self, now: OffsetDateTime) -> Json {
        let mut o = JsonObject::new();
        o.insert("schedule_id", Json::from(self.schedule_id.as_str()));
        o.insert("kind", Json::from(self.kind.as_str()));
        o.insert("status", Json::from(self.status.as_str()));
        o.insert("derived_state", Json::from(self.derived_state(now)));
        o.insert("title", Json::from(self.title.as_str()));
        o.insert("note", opt(&self.note));
        o.insert("due_at", Json::from(self.due_at.as_str()));
        o.insert("created_at", Json::from(self.created_at.as_str()));
        o.insert("updated_at", Json::from(self.updated_at.as_str()));
        o.insert("created_by", Json::from(self.created_by.as_str()));
        o.insert("updated_by", Json::from(self.updated_by.as_str()));
        o.insert("terminal_at", opt(&self.terminal_at));
        o.insert("terminal_by", opt(&self.terminal_by));
        o.insert("terminal_reason", opt(&self.terminal_reason));
        o.insert("task_id", opt(&self.task_id));
        o.insert("thread_id", opt(&self.thread_id));
        o.insert("subject_kind", opt(&self.subject_kind));
        o.insert("subject_id", opt(&self.subject_id));
        o.insert("idempotency_key", opt(&self.idempotency_key));
        o.insert(
            "metadata",
            Json::parse(self.metadata.as_bytes()).unwrap_or(Json::Object(JsonObject::new())),
        );
        o.insert("version", Json::from(self.version));
        Json::Object(o)
    }

    /// Whether this item is scoped to the subject (its subject, or its thread/task link).
    pub fn concerns(&self, kind: &str, id: &str) -> bool {
        (self.subject_kind.as_deref() == Some(kind) && self.subject_id.as_deref() == Some(id))
            || (kind == "thread" && self.thread_id.as_deref() == Some(id))
            || (kind == "task" && self.task_id.as_deref() == Some(id))
    }
}

/// A create request made into the item it would store for `actor` at `now` (its time not
/// yet checked against `now`: an exact replay of a past item still answers).
pub fn create(
    payload: &JsonObject,
    actor: &str,
    now: OffsetDateTime,
) -> Result<Item, ContinuityError> {
    reject_unknown(payload, CREATE_KEYS)?;
    for field in ["kind", "title", "due_at"] {
        if !payload.contains_key(field) {
            return Err(invalid(
                "invalid_schedule_payload",
                field,
                format!("{field} is required"),
            ));
        }
    }
    let given_id = schedule_id(payload.get("schedule_id"), false)?;
    let idempotency_key = optional_string(
        payload,
        "idempotency_key",
        200,
        1,
        "invalid_schedule_payload",
        false,
    )?;
    let kind = kind(payload)?;
    let title = required_string(
        payload,
        "title",
        160,
        "invalid_schedule_title",
        "title must be 1-160 characters",
    )?;
    let note = optional_string(payload, "note", 1000, 0, "invalid_schedule_note", false)?;
    let (due_at, due_at_ts) = due_at(payload.get("due_at"))?;
    let task_id = optional_string(
        payload,
        "task_id",
        200,
        1,
        "invalid_schedule_payload",
        false,
    )?;
    let thread_id = optional_string(
        payload,
        "thread_id",
        200,
        1,
        "invalid_schedule_payload",
        false,
    )?;
    let (subject_kind, subject_id) = subject(payload)?;
    let metadata = metadata(payload.get("metadata"))?;
    if link_missing(
        &kind,
        &task_id,
        &thread_id,
        subject_kind.is_some() && subject_id.is_some(),
    ) {
        return Err(link_refusal());
    }
    let mut identity = serde_json::Map::new();
    let text = |v: &Option<String>| {
        v.clone()
            .map_or(serde_json::Value::Null, serde_json::Value::String)
    };
    identity.insert("kind".into(), kind.clone().into());
    identity.insert("title".into(), title.clone().into());
    identity.insert("note".into(), text(&note));
    identity.insert("due_at".into(), due_at.clone().into());
    identity.insert("task_id".into(), text(&task_id));
    identity.insert("thread_id".into(), text(&thread_id));
    identity.insert("subject_kind".into(), text(&subject_kind));
    identity.insert("subject_id".into(), text(&subject_id));
    identity.insert("idempotency_key".into(), text(&idempotency_key));
    identity.insert(
        "metadata".into(),
        serde_json::from_str(&metadata).unwrap_or_default(),
    );
    identity.insert("created_by".into(), actor.into());
    let identity_json = canonical_json(&serde_json::Value::Object(identity));
    let identity_sha256 = sha256_hex(identity_json.as_bytes());
    let stamp = format_iso(super::timestamp::whole_seconds(now));
    Ok(Item {
        schedule_id: given_id.unwrap_or_else(|| format!("sched_{}", &identity_sha256[..32])),
        kind,
        status: "pending".into(),
        title,
        note,
        due_at,
        due_at_ts,
        created_at: stamp.clone(),
        updated_at: stamp,
        created_by: actor.to_owned(),
        updated_by: actor.to_owned(),
        task_id,
        thread_id,
        subject_kind,
        subject_id,
        idempotency_key,
        identity_sha256,
        identity_json,
        metadata,
        version: 1,
        ..Item::default()
    })
}

pub fn due_not_future() -> ContinuityError {
    invalid(
        "due_at_not_future",
        "due_at",
        "due_at must be in the future",
    )
}

/// A validated patch: the expected version and the changed fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub expected_version: i64,
    pub fields: JsonObject,
}

fn expected_version(value: Option<&Json>, required: bool) -> Result<Option<i64>, ContinuityError> {
    match value {
        None | Some(Json::Null) if required => Err(version_required()),
        None | Some(Json::Null) => Ok(None),
        Some(Json::Number(n)) => match n.as_i64() {
            Some(v) if v >= 1 => Ok(Some(v)),
            _ => Err(version_required()),
        },
        Some(_) => Err(version_required()),
    }
}

pub fn patch(payload: &JsonObject) -> Result<Patch, ContinuityError> {
    reject_unknown(payload, PATCH_KEYS)?;
    let expected = expected_version(payload.get("expected_version"), true)?.unwrap_or(0);
    if payload.keys().all(|k| k == "expected_version") {
        return Err(invalid(
            "invalid_schedule_payload",
            "body",
            "patch must include at least one mutable field",
        ));
    }
    let mut fields = JsonObject::new();
    let text = |v: Option<String>| v.map_or(Json::Null, Json::from);
    if payload.contains_key("kind") {
        fields.insert("kind", Json::from(kind(payload)?));
    }
    if payload.contains_key("title") {
        fields.insert(
            "title",
            Json::from(required_string(
                payload,
                "title",
                160,
                "invalid_schedule_title",
                "title must be 1-160 characters",
            )?),
        );
    }
    if payload.contains_key("note") {
        fields.insert(
            "note",
            text(optional_string(
                payload,
                "note",
                1000,
                0,
                "invalid_schedule_note",
                false,
            )?),
        );
    }
    if payload.contains_key("due_at") {
        let (due, ts) = due_at(payload.get("due_at"))?;
        fields.insert("due_at", Json::from(due));
        fields.insert("due_at_ts", Json::from(ts));
    }
    for field in ["task_id", "thread_id"] {
        if payload.contains_key(field) {
            fields.insert(
                field,
                text(optional_string(
                    payload,
                    field,
                    200,
                    1,
                    "invalid_schedule_payload",
                    false,
                )?),
            );
        }
    }
    if payload.contains_key("subject_kind") || payload.contains_key("subject_id") {
        let (k, i) = subject(payload)?;
        fields.insert("subject_kind", text(k));
        fields.insert("subject_id", text(i));
    }
    if payload.contains_key("metadata") {
        fields.insert("metadata", Json::from(metadata(payload.get("metadata"))?));
    }
    Ok(Patch {
        expected_version: expected,
        fields,
    })
}

/// `item` with `patch` applied (not yet checked for a change), or the original's refusals.
pub fn apply_patch(
    item: &Item,
    patch: &Patch,
    now: OffsetDateTime,
) -> Result<(Item, bool), ContinuityError> {
    if item.version != patch.expected_version {
        return Err(version_conflict());
    }
    if item.status != "pending" {
        return Err(status_conflict());
    }
    let mut next = item.clone();
    let text = |v: &Json| v.as_str().map(str::to_owned);
    for (key, value) in patch.fields.iter() {
        match key.as_str() {
            "kind" => next.kind = text(value).unwrap_or_default(),
            "title" => next.title = text(value).unwrap_or_default(),
            "note" => next.note = text(value),
            "due_at" => next.due_at = text(value).unwrap_or_default(),
            "due_at_ts" => next.due_at_ts = value.to_value().as_i64().unwrap_or_default(),
            "task_id" => next.task_id = text(value),
            "thread_id" => next.thread_id = text(value),
            "subject_kind" => next.subject_kind = text(value),
            "subject_id" => next.subject_id = text(value),
            "metadata" => next.metadata = text(value).unwrap_or_else(|| "{}".into()),
            _ => {}
        }
    }
    if patch.fields.contains_key("due_at_ts") && next.due_at_ts <= now.unix_timestamp() {
        return Err(due_not_future());
    }
    let subject = next.subject_kind.is_some() && next.subject_id.is_some();
    if link_missing(&next.kind, &next.task_id, &next.thread_id, subject) {
        return Err(link_refusal());
    }
    let changed = next != *item;
    Ok((next, changed))
}

fn reason(payload: &JsonObject) -> Result<Option<String>, ContinuityError> {
    optional_string(payload, "reason", 500, 0, "invalid_schedule_reason", true)
}

/// An acknowledge request: expected version, target status, reason.
pub fn acknowledge(
    payload: &JsonObject,
) -> Result<(Option<i64>, String, Option<String>), ContinuityError> {
    reject_unknown(payload, ACK_KEYS)?;
    let expected = expected_version(payload.get("expected_version"), false)?;
    let status = match payload.get("status") {
        None => "acknowledged".to_owned(),
        Some(Json::Null) => {
            return Err(invalid(
                "invalid_schedule_payload",
                "status",
                "status cannot be null",
            ));
        }
        Some(Json::String(s)) if matches!(py_strip(s), "acknowledged" | "done") => {
            py_strip(s).to_owned()
        }
        Some(_) => {
            return Err(invalid(
                "invalid_schedule_status",
                "status",
                "status must be acknowledged or done",
            ));
        }
    };
    Ok((expected, status, reason(payload)?))
}

/// A retire request: expected version, reason.
pub fn retire(payload: &JsonObject) -> Result<(Option<i64>, Option<String>), ContinuityError> {
    reject_unknown(payload, RETIRE_KEYS)?;
    Ok((
        expected_version(payload.get("expected_version"), false)?,
        reason(payload)?,
    ))
}

/// `item` moved to terminal `status` by `actor` (acknowledge, done, retire), or `None` when
/// it is already there with the same reason (the original answers `updated: false`).
pub fn terminate(
    item: &Item,
    status: &str,
    expected: Option<i64>,
    reason: Option<String>,
    actor: &str,
    now: OffsetDateTime,
) -> Result<Option<Item>, ContinuityError> {
    let retiring = status == "retired";
    let open = if retiring {
        item.status != "retired"
    } else {
        item.status == "pending"
    };
    if open {
        let expected = expected.ok_or_else(version_required)?;
        if item.version != expected {
            return Err(version_conflict());
        }
    } else {
        if expected.is_some_and(|v| v != item.version) {
            return Err(version_conflict());
        }
        if (retiring || item.status == status) && item.terminal_reason == reason {
            return Ok(None);
        }
        return Err(status_conflict());
    }
    let stamp = format_iso(super::timestamp::whole_seconds(now));
    let mut next = item.clone();
    next.status = status.to_owned();
    next.terminal_at = Some(stamp.clone());
    next.terminal_by = Some(actor.to_owned());
    next.terminal_reason = reason;
    next.updated_at = stamp;
    next.updated_by = actor.to_owned();
    next.version = item.version + 1;
    Ok(Some(next))
}

/// `GET /v1/schedule/items` parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub status: Option<String>,
    pub due: Option<bool>,
    pub task_id: Option<String>,
    pub thread_id: Option<String>,
    pub subject_kind: Option<String>,
    pub subject_id: Option<String>,
    pub include_retired: bool,
    pub limit: usize,
    pub offset: usize,
}

fn query_bool(value: Option<&Json>, field: &str) -> Result<Option<bool>, ContinuityError> {
    match value {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Bool(b)) => Ok(Some(*b)),
        Some(Json::String(s)) => match py_strip(s).to_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Some(true)),
            "false" | "0" | "no" | "off" => Ok(Some(false)),
            _ => Err(invalid(
                "invalid_schedule_query",
                &format!("query.{field}"),
                format!("{field} must be a boolean"),
            )),
        },
        Some(_) => Err(invalid(
            "invalid_schedule_query",
            &format!("query.{field}"),
            format!("{field} must be a boolean"),
        )),
    }
}

fn query_int(
    value: Option<&Json>,
    field: &str,
    default: usize,
    min: i64,
    max: i64,
) -> Result<usize, ContinuityError> {
    let bad = || {
        invalid(
            "invalid_schedule_query",
            &format!("query.{field}"),
            format!("{field} must be an integer between {min} and {max}"),
        )
    };
    let n = match value {
        None | Some(Json::Null) => return Ok(default),
        Some(Json::String(s)) => py_strip(s).parse::<i64>().map_err(|_| bad())?,
        Some(Json::Number(n)) => n.as_i64().ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    if n < min || n > max {
        return Err(bad());
    }
    usize::try_from(n).map_err(|_| bad())
}

fn query_text(
    value: Option<&Json>,
    field: &str,
    code: &str,
) -> Result<Option<String>, ContinuityError> {
    match value {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) if (1..=200).contains(&py_len(py_strip(s))) => {
            Ok(Some(py_strip(s).to_owned()))
        }
        Some(_) => Err(invalid(
            code,
            &format!("query.{field}"),
            format!("{field} must be 1-200 characters"),
        )),
    }
}

impl ListQuery {
    pub fn from_json(query: &JsonObject) -> Result<ListQuery, ContinuityError> {
        reject_unknown(query, LIST_KEYS)?;
        let status = match query.get("status") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) if STATUSES.contains(&s.as_str()) => Some(s.clone()),
            Some(_) => {
                return Err(invalid(
                    "invalid_schedule_status",
                    "query.status",
                    "status must be pending, acknowledged, done, or retired",
                ));
            }
        };
        let due = query_bool(query.get("due"), "due")?;
        let task_id = query_text(query.get("task_id"), "task_id", "invalid_schedule_query")?;
        let thread_id = query_text(
            query.get("thread_id"),
            "thread_id",
            "invalid_schedule_query",
        )?;
        let subject_kind = match query.get("subject_kind") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) if SUBJECT_KINDS.contains(&s.as_str()) => Some(s.clone()),
            Some(_) => {
                return Err(invalid(
                    "invalid_schedule_subject",
                    "query.subject_kind",
                    "subject_kind must be user, peer, thread, or task",
                ));
            }
        };
        let subject_id = query_text(
            query.get("subject_id"),
            "subject_id",
            "invalid_schedule_query",
        )?;
        if subject_kind.is_none() != subject_id.is_none() {
            return Err(invalid(
                "invalid_schedule_subject",
                "query.subject_kind",
                "subject_kind and subject_id must be supplied or cleared together",
            ));
        }
        let include_retired = query_bool(query.get("include_retired"), "include_retired")?;
        Ok(ListQuery {
            status,
            due,
            task_id,
            thread_id,
            subject_kind,
            subject_id,
            include_retired: include_retired.unwrap_or(false),
            limit: query_int(query.get("limit"), "limit", 50, 1, 200)?,
            offset: query_int(query.get("offset"), "offset", 0, 0, 10_000)?,
        })
    }

    /// Whether `item` is listed at `now`.
    pub fn keeps(&self, item: &Item, now: OffsetDateTime) -> bool {
        let status_ok = match &self.status {
            Some(s) => item.status == *s,
            None => self.include_retired || item.status != "retired",
        };
        let due_ok = match self.due {
            Some(true) => item.status == "pending" && item.derived_state(now) == "due",
            Some(false) => item.status == "pending" && item.derived_state(now) == "scheduled",
            None => true,
        };
        let eq = |want: &Option<String>, have: &Option<String>| want.is_none() || want == have;
        status_ok
            && due_ok
            && eq(&self.task_id, &item.task_id)
            && eq(&self.thread_id, &item.thread_id)
            && eq(&self.subject_kind, &item.subject_kind)
            && eq(&self.subject_id, &item.subject_id)
    }
}

/// `{ok, created, item, warnings}`.
pub fn created_body(item: &Item, created: bool, now: OffsetDateTime) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("created", Json::Bool(created));
    o.insert("item", item.to_json(now));
    o.insert("warnings", Json::Array(Vec::new()));
    Json::Object(o)
}

/// `{ok, updated, item, warnings}`.
pub fn updated_body(item: &Item, updated: bool, now: OffsetDateTime) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("updated", Json::Bool(updated));
    o.insert("item", item.to_json(now));
    o.insert("warnings", Json::Array(Vec::new()));
    Json::Object(o)
}

/// `{ok, item, warnings}`.
pub fn item_body(item: &Item, now: OffsetDateTime) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("item", item.to_json(now));
    o.insert("warnings", Json::Array(Vec::new()));
    Json::Object(o)
}

/// `{ok, count, total, limit, offset, items, warnings}`.
pub fn list_body(items: &[Item], total: usize, q: &ListQuery, now: OffsetDateTime) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("count", Json::from(items.len()));
    o.insert("total", Json::from(total));
    o.insert("limit", Json::from(q.limit));
    o.insert("offset", Json::from(q.offset));
    o.insert(
        "items",
        Json::Array(items.iter().map(|i| i.to_json(now)).collect()),
    );
    o.insert("warnings", Json::Array(Vec::new()));
    Json::Object(o)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::json::to_py_json;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-11-25 23:19:00 UTC);

    fn object(text: &str) -> JsonObject {
        body_object(text.as_bytes()).unwrap()
    }

    fn refusal(err: ContinuityError) -> (u16, String) {
        (err.http_status(), to_py_json(&err.body()))
    }

    /// The original's answer (CogniRelay 1.4.15) for the same request, byte for byte.
    #[test]
    fn a_created_item_is_the_originals() {
        let item = create(
            &object(r#"{"kind":"reminder","title":"Check whales","due_at":"2026-11-26T09:00:00Z","note":"n","subject_kind":"thread","subject_id":"th-1","metadata":{"b":1}}"#),
            "peer-1",
            NOW,
        )
        .unwrap();
        assert_eq!(
            to_py_json(&created_body(&item, true, NOW)),
            r#"{"ok":true,"created":true,"item":{"schedule_id":"sched_2f0530645afc79386682f4a4a4dd49e5","kind":"reminder","status":"pending","derived_state":"scheduled","title":"Check whales","note":"n","due_at":"2026-11-26T09:00:00Z","created_at":"2026-11-25T23:19:00Z","updated_at":"2026-11-25T23:19:00Z","created_by":"peer-1","updated_by":"peer-1","terminal_at":null,"terminal_by":null,"terminal_reason":null,"task_id":null,"thread_id":null,"subject_kind":"thread","subject_id":"th-1","idempotency_key":null,"metadata":{"b":1},"version":1},"warnings":[]}"#
        );
        assert!(item.concerns("thread", "th-1"));
        assert_eq!(
            item.derived_state(time::macros::datetime!(2026-11-26 09:00 UTC)),
            "due"
        );
    }

    #[test]
    fn bad_bodies_get_the_originals_object_details() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"kind":"task_nudge","title":"Nudge","due_at":"2026-11-20T09:00:00Z","task_id":"t-2","schedule_id":"sch-a"}"#,
                r#"{"detail":{"code":"invalid_schedule_id","field":"schedule_id","message":"schedule_id must match ^sched_[a-z0-9][a-z0-9_-]{0,57}$"}}"#,
            ),
            (
                r#"{"kind":"reminder","title":"x","due_at":"2026-11-20T09:00:00","extra":1}"#,
                r#"{"detail":{"code":"invalid_schedule_payload","field":"extra","message":"unexpected field: extra"}}"#,
            ),
            (
                r#"{"kind":"reminder","title":"x","due_at":"2026-11-20T09:00:00"}"#,
                r#"{"detail":{"code":"invalid_schedule_due_at","field":"due_at","message":"due_at must be UTC in YYYY-MM-DDTHH:MM:SSZ form"}}"#,
            ),
            (
                r#"{"kind":"reminder","title":"x","due_at":"tomorrow"}"#,
                r#"{"detail":{"code":"invalid_schedule_due_at","field":"due_at","message":"due_at must use YYYY-MM-DDTHH:MM:SSZ"}}"#,
            ),
            (
                r#"{"kind":"task_nudge","title":"x","due_at":"2026-12-01T00:00:00Z"}"#,
                r#"{"detail":{"code":"invalid_schedule_link","field":"kind","message":"task_nudge requires task_id, thread_id, or subject_kind plus subject_id"}}"#,
            ),
            (
                r#"{"title":"x","due_at":"2026-12-01T00:00:00Z"}"#,
                r#"{"detail":{"code":"invalid_schedule_payload","field":"kind","message":"kind is required"}}"#,
            ),
            (
                r#"{"kind":"reminder","title":"x","due_at":"2026-12-01T00:00:00Z","metadata":{"a":[1]}}"#,
                r#"{"detail":{"code":"invalid_schedule_metadata","field":"metadata","message":"metadata must be a flat object with canonical JSON <= 2048 bytes"}}"#,
            ),
        ];
        for (body, expected) in cases {
            let err = create(&object(body), "peer-1", NOW).unwrap_err();
            assert_eq!(refusal(err), (422, (*expected).to_owned()), "{body}");
        }
        assert_eq!(
            refusal(body_object(b"[1]").unwrap_err()).1,
            r#"{"detail":{"code":"invalid_schedule_payload","field":"body","message":"body must be a JSON object"}}"#
        );
    }

    #[test]
    fn acknowledge_and_retire_follow_the_originals_rules() {
        let item = create(
            &object(r#"{"kind":"reminder","title":"x","due_at":"2026-12-01T00:00:00Z"}"#),
            "p",
            NOW,
        )
        .unwrap();
        let (expected, status, reason) =
            acknowledge(&object(r#"{"status":"done","reason":" ok "}"#)).unwrap();
        // A pending item needs the version it is at.
        assert_eq!(
            refusal(terminate(&item, &status, expected, reason.clone(), "p", NOW).unwrap_err()),
            (422, r#"{"detail":{"code":"invalid_schedule_version","field":"expected_version","message":"expected_version must be a positive integer"}}"#.to_owned())
        );
        let done = terminate(&item, &status, Some(1), reason.clone(), "p", NOW)
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                done.status.as_str(),
                done.version,
                done.terminal_reason.as_deref()
            ),
            ("done", 2, Some("ok"))
        );
        // The same again changes nothing; another status is a conflict.
        assert!(
            terminate(&done, "done", None, reason, "p", NOW)
                .unwrap()
                .is_none()
        );
        assert_eq!(
            refusal(
                terminate(&done, "acknowledged", None, Some("ok".into()), "p", NOW).unwrap_err()
            )
            .0,
            409
        );
        let retired = terminate(&done, "retired", None, None, "p", NOW);
        assert_eq!(refusal(retired.unwrap_err()).0, 422);
        let retired = terminate(&done, "retired", Some(2), None, "p", NOW)
            .unwrap()
            .unwrap();
        assert_eq!(retired.status, "retired");
        let q = ListQuery::from_json(&object(r#"{"include_retired":"yes"}"#)).unwrap();
        assert!(q.keeps(&retired, NOW));
        assert!(
            !ListQuery::from_json(&JsonObject::new())
                .unwrap()
                .keeps(&retired, NOW)
        );
        assert_eq!(
            refusal(ListQuery::from_json(&object(r#"{"limit":"0"}"#)).unwrap_err()).1,
            r#"{"detail":{"code":"invalid_schedule_query","field":"query.limit","message":"limit must be an integer between 1 and 200"}}"#
        );
    }

    #[test]
    fn a_patch_changes_a_pending_item_at_its_version() {
        let item = create(
            &object(r#"{"kind":"reminder","title":"x","due_at":"2026-12-01T00:00:00Z"}"#),
            "p",
            NOW,
        )
        .unwrap();
        let p = patch(&object(
            r#"{"expected_version":1,"title":"y","due_at":"2026-12-02T00:00:00Z"}"#,
        ))
        .unwrap();
        let (next, changed) = apply_patch(&item, &p, NOW).unwrap();
        assert!(changed);
        assert_eq!(
            (next.title.as_str(), next.due_at.as_str()),
            ("y", "2026-12-02T00:00:00Z")
        );
        let stale = patch(&object(r#"{"expected_version":2,"title":"y"}"#)).unwrap();
        assert_eq!(refusal(apply_patch(&item, &stale, NOW).unwrap_err()).0, 409);
        let past = patch(&object(
            r#"{"expected_version":1,"due_at":"2020-01-01T00:00:00Z"}"#,
        ))
        .unwrap();
        assert_eq!(
            refusal(apply_patch(&item, &past, NOW).unwrap_err()).1,
            r#"{"detail":{"code":"due_at_not_future","field":"due_at","message":"due_at must be in the future"}}"#
        );
        assert_eq!(
            refusal(patch(&object(r#"{"expected_version":1}"#)).unwrap_err()).1,
            r#"{"detail":{"code":"invalid_schedule_payload","field":"body","message":"patch must include at least one mutable field"}}"#
        );
    }

    /// The document's models name exactly the keys the hand-written checks accept.
    #[test]
    fn the_models_name_the_accepted_keys() {
        let names = |model: &Model| model.fields.iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(names(&CREATE_REQUEST), CREATE_KEYS);
        assert_eq!(names(&UPDATE_REQUEST), PATCH_KEYS);
        assert_eq!(names(&ACKNOWLEDGE_REQUEST), ACK_KEYS);
        assert_eq!(names(&RETIRE_REQUEST), RETIRE_KEYS);
        assert_eq!(names(&LIST_QUERY), LIST_KEYS);
        for model in [
            &CREATE_REQUEST,
            &UPDATE_REQUEST,
            &ACKNOWLEDGE_REQUEST,
            &RETIRE_REQUEST,
        ] {
            assert!(model.forbid_extra, "{}", model.name);
        }
    }
}

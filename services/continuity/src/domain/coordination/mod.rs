//! Coordination between the agents of one tenant (digest §11): the peer registry and the
//! three artifacts (handoffs, shared artifacts, reconciliations), with no I/O.
//!
//! In Noema a CogniRelay instance is a tenant: a collaborator is a token issued with the
//! tenant and its own peer id, so the registry and every artifact belong to one tenant and
//! another tenant's artifact answers exactly as a missing one. Each artifact is the
//! original's JSON document in its model's key order; its `path` is the original's
//! (`memory/coordination/<dir>/<id>.json`), which is what namespaces are checked against.

pub mod handoff;
pub mod peers;
pub mod reconciliation;
pub mod report;
pub mod shared;
pub mod signing;

use super::access::{ADMIN, Caller};
use super::error::{ConflictKind, ContinuityError, Loc, LocPart};
use super::json::{Json, JsonObject};
use super::schema::{Field, Model, Ty, validate_at, validate_body};

/// A server-generated timestamp as the original writes it: UTC, `Z`, whole seconds.
pub fn utc_now_text(now: time::OffsetDateTime) -> String {
    super::timestamp::format_iso(super::timestamp::whole_seconds(now))
}

/// Whether the caller bypasses the peer-scoped visibility rules (the original's
/// `admin:peers`; in Noema also `continuity:admin` and a superuser).
pub fn is_admin(caller: &Caller) -> bool {
    caller.require(ADMIN).is_ok()
}

/// 400 `detail` unless `value` is `prefix` followed by 32 lowercase hex digits.
pub fn check_id(value: &str, prefix: &str, detail: &str) -> Result<(), ContinuityError> {
    let valid = value.strip_prefix(prefix).is_some_and(|hex| {
        hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    });
    if valid {
        Ok(())
    } else {
        Err(ContinuityError::invalid(detail))
    }
}

/// 400 `Invalid artifact id for locking` for an id other than lowercase letters, digits and
/// `_` (the original's per-artifact lock file name, taken before a shared update reads its id).
pub fn check_lock_id(value: &str) -> Result<(), ContinuityError> {
    let safe = !value.is_empty()
        && value
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'));
    if safe {
        Ok(())
    } else {
        Err(ContinuityError::invalid("Invalid artifact id for locking"))
    }
}

/// 400 `Value too long in coordination_<kind>.commit_message` over 120 code points.
pub fn check_commit_message(body: &Json, kind: &str) -> Result<(), ContinuityError> {
    let long = body
        .get("commit_message")
        .and_then(Json::as_str)
        .is_some_and(|m| m.chars().count() > 120);
    if long {
        return Err(ContinuityError::invalid(format!(
            "Value too long in coordination_{kind}.commit_message"
        )));
    }
    Ok(())
}

/// 403 with the original's detail (a visibility or ownership rule, not a namespace).
pub fn forbidden(detail: &str) -> ContinuityError {
    ContinuityError::Forbidden {
        detail: detail.to_owned(),
        namespace: false,
    }
}

/// 409 with the original's detail.
pub fn conflict(detail: impl Into<String>) -> ContinuityError {
    ContinuityError::Conflict {
        kind: ConflictKind::State,
        detail: detail.into(),
    }
}

/// A request body validated against its model (422 as FastAPI answers).
pub fn validated(model: &'static Model, body: &Json) -> Result<JsonObject, ContinuityError> {
    match validate_body(model, body).map_err(ContinuityError::Validation)? {
        Json::Object(object) => Ok(object),
        _ => Ok(JsonObject::new()),
    }
}

/// Query parameters (an object of strings) validated against their declaration (422 with
/// `loc` under `query`).
pub fn validated_query(
    model: &'static Model,
    params: &Json,
) -> Result<JsonObject, ContinuityError> {
    let loc = Loc(vec![LocPart::Key("query".to_owned())]);
    match validate_at(model, params, &loc).map_err(ContinuityError::Validation)? {
        Json::Object(object) => Ok(object),
        _ => Ok(JsonObject::new()),
    }
}

/// The original's 400 for query filters over `max` characters: its request model
/// (`model`), built from the parameters, raises for each such filter in field order, and the
/// route reports pydantic's text after `prefix`.
pub fn filters_too_long(
    prefix: &str,
    model: &str,
    filters: &[(&str, &Option<String>)],
    max: usize,
) -> Result<(), ContinuityError> {
    let too_long: Vec<report::Failure> = filters
        .iter()
        .filter_map(|(name, value)| {
            let value = value.as_deref()?;
            (value.chars().count() > max)
                .then(|| report::Failure::string_too_long(name, value, max))
        })
        .collect();
    if too_long.is_empty() {
        return Ok(());
    }
    Err(ContinuityError::invalid(format!(
        "{prefix}: {}",
        report::validation_error(model, &too_long)
    )))
}

/// A string field of a validated object (`None` when absent or null).
pub fn text(object: &JsonObject, key: &str) -> Option<String> {
    object.get(key).and_then(Json::as_str).map(str::to_owned)
}

/// A string field, or JSON null.
pub fn text_or_null(object: &JsonObject, key: &str) -> Json {
    object
        .get(key)
        .and_then(Json::as_str)
        .map_or(Json::Null, Json::from)
}

/// A list-of-strings field (empty when absent).
pub fn strings(object: &JsonObject, key: &str) -> Vec<String> {
    object
        .get(key)
        .and_then(Json::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Json::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub fn string_array(items: &[String]) -> Json {
    Json::Array(items.iter().map(|s| Json::from(s.as_str())).collect())
}

/// An integer field.
pub fn integer(object: &JsonObject, key: &str) -> Option<i64> {
    object.get(key).and_then(|v| v.to_value().as_i64())
}

/// `offset` (≥ 0, 0) and `limit` (1–100, 20) of a validated query.
pub fn paging(object: &JsonObject) -> (usize, usize) {
    let offset = integer(object, "offset")
        .and_then(|o| usize::try_from(o).ok())
        .unwrap_or(0);
    let limit = integer(object, "limit")
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(20);
    (offset, limit)
}

/// A write's `commit_message`: any text to pydantic, then at most 120 characters
/// (`check_commit_message`).
pub const COMMIT_MESSAGE: Ty = Ty::Nullable(&Ty::Documented(
    &Ty::Str { min: 0, max: None },
    super::rules::at_most::<120>,
));

/// The `offset` field every coordination query declares (≥ 0, default 0).
pub const OFFSET: Field = Field {
    name: "offset",
    ty: Ty::Int {
        ge: Some(0),
        le: None,
    },
    required: false,
};

/// The `limit` field every coordination query declares (1–100, default 20).
pub const LIMIT: Field = Field {
    name: "limit",
    ty: Ty::Int {
        ge: Some(1),
        le: Some(100),
    },
    required: false,
};

/// `{ok, count, total_matches, warnings, <key>}`: one page of `matches` (already ordered),
/// counted before paging.
pub fn query_body(key: &str, matches: Vec<Json>, offset: usize, limit: usize) -> Json {
    let total = matches.len();
    let page: Vec<Json> = matches.into_iter().skip(offset).take(limit).collect();
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("count", Json::from(page.len()));
    o.insert("total_matches", Json::from(total));
    o.insert("warnings", Json::Array(Vec::new()));
    o.insert(key, Json::Array(page));
    Json::Object(o)
}

/// `{ok, <key>: artifact, path}` (a read).
pub fn read_body(key: &str, artifact: &JsonObject, path: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert(key, Json::Object(artifact.clone()));
    o.insert("path", Json::from(path));
    Json::Object(o)
}

/// `{ok, <key>: artifact, path, <flag>: value, latest_commit}` (a create or an update).
pub fn written_body(
    key: &str,
    artifact: &JsonObject,
    path: &str,
    flag: &str,
    value: bool,
    latest_commit: &str,
) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert(key, Json::Object(artifact.clone()));
    o.insert("path", Json::from(path));
    o.insert(flag, Json::Bool(value));
    o.insert("latest_commit", Json::from(latest_commit));
    Json::Object(o)
}

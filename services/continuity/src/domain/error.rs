//! Continuity's failures as data, in the shapes the original answers with.
//!
//! - [`ContinuityError::Validation`]: a request model failed; FastAPI answers 422
//!   `{"detail": [<FieldError>…]}` with pydantic v2's `type`, `loc`, `msg`, `input`, `ctx`.
//! - `Invalid` / `NotFound` / `Conflict`: the service's own checks, 400 / 404 / 409 with a
//!   string `detail`.
//! - `Unhandled`: what the original lets escape as an exception: its handler of last resort
//!   answers 500 `{ok: false, operation: "unhandled", error: {code, detail}}` with the
//!   exception's class name and text.

use noema_core::{ErrorCode, Reason, ServiceError};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

use super::json::{Json, to_py_json};

/// One step of a pydantic `loc`: a field name or a list index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocPart {
    Key(String),
    Index(usize),
}

impl Serialize for LocPart {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            LocPart::Key(k) => s.serialize_str(k),
            LocPart::Index(i) => s.serialize_u64(*i as u64),
        }
    }
}

/// A `loc` path, rendered as the JSON list FastAPI sends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loc(pub Vec<LocPart>);

impl Loc {
    /// FastAPI's root for a JSON body.
    pub fn body() -> Loc {
        Loc(vec![LocPart::Key("body".to_owned())])
    }

    pub fn key(&self, key: &str) -> Loc {
        let mut parts = self.0.clone();
        parts.push(LocPart::Key(key.to_owned()));
        Loc(parts)
    }

    pub fn index(&self, index: usize) -> Loc {
        let mut parts = self.0.clone();
        parts.push(LocPart::Index(index));
        Loc(parts)
    }

    /// `body.capsule.continuity` style, for logs and assertions.
    pub fn dotted(&self) -> String {
        self.0
            .iter()
            .map(|p| match p {
                LocPart::Key(k) => k.clone(),
                LocPart::Index(i) => i.to_string(),
            })
            .collect::<Vec<_>>()
            .join(".")
    }
}

impl Serialize for Loc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for part in &self.0 {
            seq.serialize_element(part)?;
        }
        seq.end()
    }
}

/// One item of a 422 `detail` list, in FastAPI's key order.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// pydantic's error type (`missing`, `string_too_long`, …).
    pub kind: &'static str,
    pub loc: Loc,
    pub msg: String,
    /// The offending input, echoed back.
    pub input: Json,
    /// pydantic's context, in its order (`{"field_type","max_length","actual_length"}`).
    pub ctx: Vec<(&'static str, Json)>,
}

impl Serialize for FieldError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", self.kind)?;
        map.serialize_entry("loc", &self.loc)?;
        map.serialize_entry("msg", &self.msg)?;
        map.serialize_entry("input", &self.input)?;
        if !self.ctx.is_empty() {
            map.serialize_entry("ctx", &Ctx(&self.ctx))?;
        }
        map.end()
    }
}

struct Ctx<'a>(&'a [(&'static str, Json)]);

impl Serialize for Ctx<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Which 409 the write got, so callers need not read the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictKind {
    /// The incoming `updated_at` is older than the stored one.
    Stale,
    /// Same `updated_at`, different content.
    SameTimestamp,
    /// Anything else the original answers 409 (an archive already present, …).
    State,
}

impl ConflictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictKind::Stale => "stale",
            ConflictKind::SameTimestamp => "same_timestamp",
            ConflictKind::State => "state",
        }
    }
}

pub const STALE_WRITE_DETAIL: &str =
    "Incoming continuity capsule is older than the current stored capsule";
pub const TIMESTAMP_CONFLICT_DETAIL: &str =
    "Incoming continuity capsule conflicts with the current stored capsule timestamp";

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ContinuityError {
    /// 422: the request body does not fit the request model.
    #[error("request validation failed: {}", summary(.0))]
    Validation(Vec<FieldError>),
    /// 400 with the original's detail.
    #[error("{0}")]
    Invalid(String),
    /// 400 with the original's detail, as `Invalid`: a stored capsule names another subject
    /// than the one asked for. Apart from `Invalid` because a read refuses it where it
    /// falls back from other invalid capsules.
    #[error("{0}")]
    SubjectMismatch(String),
    /// 404 with the original's detail.
    #[error("{0}")]
    NotFound(String),
    /// 409 with the original's detail.
    #[error("{detail}")]
    Conflict { kind: ConflictKind, detail: String },
    /// 500 `{"ok":false,"operation":"unhandled","error":{"code":<class>,"detail":<text>}}`.
    #[error("{code}: {detail}")]
    Unhandled { code: String, detail: String },
    /// 403 with the original's detail: a missing CogniRelay scope (`Missing scope: <s>`) or a
    /// path outside the token's namespaces.
    #[error("{detail}")]
    Forbidden { detail: String, namespace: bool },
    /// 409 `{"ok":false,"operation":"continuity","error":{"code":
    /// "continuity_source_lock_timeout","detail":…}}`: concurrent writers to the subject kept
    /// moving it while this write retried its merge.
    #[error("{detail}")]
    LockTimeout { detail: String },
    /// 409: an `idempotency_key` used before with another body.
    #[error("{0}")]
    IdempotencyConflict(String),
    /// 503 with the original's detail (a journal append to another day's file).
    #[error("{0}")]
    Unavailable(String),
    /// 413 with the original's detail (a write or append over the payload limit).
    #[error("{0}")]
    TooLarge(String),
    /// 401 with the original's detail (a signed envelope that does not verify).
    #[error("{0}")]
    Unauthorized(String),
    /// A refusal whose `detail` is an object (the schedule's `{code, field, message}`), with
    /// its status (404, 409 or 422).
    #[error("{}", object_summary(*.status, .detail))]
    Object { status: u16, detail: Json },
}

fn object_summary(status: u16, detail: &Json) -> String {
    let text = |key: &str| {
        detail
            .get(key)
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    format!("{status} {}: {}", text("code"), text("message"))
}

fn summary(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| format!("{} ({})", e.loc.dotted(), e.kind))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ContinuityError {
    pub fn invalid(detail: impl Into<String>) -> Self {
        ContinuityError::Invalid(detail.into())
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        ContinuityError::NotFound(detail.into())
    }

    pub fn stale_write() -> Self {
        ContinuityError::Conflict {
            kind: ConflictKind::Stale,
            detail: STALE_WRITE_DETAIL.to_owned(),
        }
    }

    pub fn timestamp_conflict() -> Self {
        ContinuityError::Conflict {
            kind: ConflictKind::SameTimestamp,
            detail: TIMESTAMP_CONFLICT_DETAIL.to_owned(),
        }
    }

    /// `Missing scope: <scope>`.
    pub fn missing_scope(scope: &str) -> Self {
        ContinuityError::Forbidden {
            detail: format!("Missing scope: {scope}"),
            namespace: false,
        }
    }

    /// A namespace refusal with the original's detail.
    pub fn namespace(detail: impl Into<String>) -> Self {
        ContinuityError::Forbidden {
            detail: detail.into(),
            namespace: true,
        }
    }

    /// The lock-timeout conflict for the subject lock `lock_id`.
    pub fn lock_timeout(lock_id: &str, attempts: u32) -> Self {
        ContinuityError::LockTimeout {
            detail: format!(
                "Lock timed out for {lock_id}: concurrent writers moved it during {attempts} attempts"
            ),
        }
    }

    /// The HTTP status the original answers with.
    pub fn http_status(&self) -> u16 {
        match self {
            ContinuityError::Validation(_) => 422,
            ContinuityError::Invalid(_) | ContinuityError::SubjectMismatch(_) => 400,
            ContinuityError::Forbidden { .. } => 403,
            ContinuityError::NotFound(_) => 404,
            ContinuityError::Conflict { .. }
            | ContinuityError::LockTimeout { .. }
            | ContinuityError::IdempotencyConflict(_) => 409,
            ContinuityError::Unhandled { .. } => 500,
            ContinuityError::Unavailable(_) => 503,
            ContinuityError::TooLarge(_) => 413,
            ContinuityError::Unauthorized(_) => 401,
            ContinuityError::Object { status, .. } => *status,
        }
    }

    /// The original's response body for this error.
    pub fn body(&self) -> Json {
        let mut body = super::json::JsonObject::new();
        match self {
            ContinuityError::Validation(errors) => {
                let detail: Json = serde_json::from_str(&to_py_json(errors)).unwrap_or(Json::Null);
                body.insert("detail", detail);
            }
            ContinuityError::Invalid(d)
            | ContinuityError::SubjectMismatch(d)
            | ContinuityError::NotFound(d)
            | ContinuityError::IdempotencyConflict(d)
            | ContinuityError::Unavailable(d)
            | ContinuityError::TooLarge(d)
            | ContinuityError::Unauthorized(d)
            | ContinuityError::Forbidden { detail: d, .. }
            | ContinuityError::Conflict { detail: d, .. } => {
                body.insert("detail", Json::String(d.clone()));
            }
            ContinuityError::LockTimeout { detail } => {
                let mut error = super::json::JsonObject::new();
                error.insert("code", Json::from("continuity_source_lock_timeout"));
                error.insert("detail", Json::String(detail.clone()));
                let mut inner = super::json::JsonObject::new();
                inner.insert("ok", Json::Bool(false));
                inner.insert("operation", Json::from("continuity"));
                inner.insert("error", Json::Object(error));
                body.insert("detail", Json::Object(inner));
            }
            ContinuityError::Object { detail, .. } => {
                body.insert("detail", detail.clone());
            }
            ContinuityError::Unhandled { code, detail } => {
                // The original's handler of last resort answers the envelope itself, not
                // under `detail` as an HTTPException would.
                let mut error = super::json::JsonObject::new();
                error.insert("code", Json::String(code.clone()));
                error.insert("detail", Json::String(detail.clone()));
                body.insert("ok", Json::Bool(false));
                body.insert("operation", Json::from("unhandled"));
                body.insert("error", Json::Object(error));
            }
        }
        Json::Object(body)
    }
}

/// `ErrorInfo.metadata` key: the HTTP status CogniRelay answers with (decimal).
pub const HTTP_STATUS_KEY: &str = noema_core::error::ORIGINAL_STATUS_KEY;
/// `ErrorInfo.metadata` key: CogniRelay's exact JSON error body.
pub const BODY_KEY: &str = noema_core::error::ORIGINAL_BODY_KEY;

impl ServiceError for ContinuityError {
    fn code(&self) -> ErrorCode {
        match self {
            // FailedPrecondition is the code that travels as HTTP 422.
            ContinuityError::Validation(_) => ErrorCode::FailedPrecondition,
            ContinuityError::Invalid(_) | ContinuityError::SubjectMismatch(_) => {
                ErrorCode::InvalidArgument
            }
            ContinuityError::Forbidden { .. } => ErrorCode::PermissionDenied,
            ContinuityError::NotFound(_) => ErrorCode::NotFound,
            ContinuityError::Conflict { .. }
            | ContinuityError::LockTimeout { .. }
            | ContinuityError::IdempotencyConflict(_) => ErrorCode::AlreadyExists,
            ContinuityError::Unhandled { .. } => ErrorCode::Internal,
            ContinuityError::Unavailable(_) => ErrorCode::Unavailable,
            ContinuityError::TooLarge(_) => ErrorCode::ResourceExhausted,
            ContinuityError::Unauthorized(_) => ErrorCode::Unauthenticated,
            ContinuityError::Object { status, .. } => match status {
                404 => ErrorCode::NotFound,
                409 => ErrorCode::AlreadyExists,
                // FailedPrecondition is the code that travels as HTTP 422.
                _ => ErrorCode::FailedPrecondition,
            },
        }
    }

    fn reason(&self) -> Reason {
        match self {
            ContinuityError::Validation(_) => Reason::RequestModelInvalid,
            ContinuityError::Conflict {
                kind: ConflictKind::Stale,
                ..
            } => Reason::StaleWrite,
            ContinuityError::Conflict {
                kind: ConflictKind::SameTimestamp,
                ..
            } => Reason::TimestampConflict,
            ContinuityError::LockTimeout { .. } => Reason::LockTimeout,
            ContinuityError::IdempotencyConflict(_) => Reason::IdempotencyKeyReused,
            ContinuityError::Forbidden {
                namespace: true, ..
            } => Reason::NamespaceDenied,
            other => Reason::generic(other.code()),
        }
    }

    /// The original's status and body travel whole, so a REST front sends them byte for
    /// byte without reading the message.
    fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![
            (HTTP_STATUS_KEY, self.http_status().to_string()),
            (BODY_KEY, to_py_json(&self.body())),
        ]
    }

    fn public_message(&self) -> String {
        match self {
            // The original shows its exception text; it names no internals of ours.
            ContinuityError::Unhandled { detail, .. } => detail.clone(),
            _ => self.to_string(),
        }
    }
}

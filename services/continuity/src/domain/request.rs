//! The continuity request bodies (digest §3–§9): their pydantic declarations and typed forms.
//!
//! `XRequest::from_json(&body)` is FastAPI's step: validate the whole body against the model
//! (422 with every error) and hand the coerced values to the rules.

use serde::Deserialize;

use super::error::ContinuityError;
use super::json::Json;
use super::model::{
    CONTINUITY_CAPSULE, Capsule, LIFECYCLES, Lifecycle, NEGATIVE_DECISION, NegativeDecision,
    RATIONALE_ENTRY, RationaleEntry, SIGNAL_KINDS, SUBJECT_KINDS, SignalKind, SubjectKind,
    from_coerced,
};
use super::schema::{Field, Model, Ty, validate_body};

const ANY_STR: Ty = Ty::Str { min: 0, max: None };
/// 1–200 characters, normalising to a subject key (`subject::normalize_subject_id`).
const SUBJECT_ID: Ty = Ty::Documented(
    &Ty::Str {
        min: 1,
        max: Some(200),
    },
    super::rules::subject_id,
);
/// Read by `timestamp::require_utc`.
const UTC_TIMESTAMP: Ty = Ty::Documented(&ANY_STR, super::rules::utc_timestamp);
const SUBJECT_KIND: Ty = Ty::Literal(SUBJECT_KINDS);

const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: true,
    }
}

const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        required: false,
    }
}

macro_rules! nullable_max {
    ($max:expr) => {
        Ty::Nullable(&Ty::Str {
            min: 0,
            max: Some($max),
        })
    };
}

const COMMIT_MESSAGE: Ty = nullable_max!(240);
const SUPERSEDED_BY: Ty = Ty::Nullable(&Ty::Str {
    min: 1,
    max: Some(200),
});
/// `lifecycle_transition` / `transition` values.
pub const TRANSITIONS: &[&str] = &["suspend", "resume", "conclude", "supersede"];

/// The request body as JSON, or FastAPI's 422 `json_invalid` when it is not JSON (`loc`
/// names the byte offset of the error; the original's decoder words `ctx.error` its own way).
pub fn parse_body(bytes: &[u8]) -> Result<Json, ContinuityError> {
    // FastAPI reads no body at all from an empty one: the required body is missing.
    if bytes.is_empty() {
        return Err(ContinuityError::Validation(vec![
            super::error::FieldError {
                kind: "missing",
                loc: super::error::Loc::body(),
                msg: "Field required".to_owned(),
                input: Json::Null,
                ctx: Vec::new(),
            },
        ]));
    }
    Json::parse(bytes).map_err(|err| {
        let offset = if err.classify() == serde_json::error::Category::Eof {
            eof_position(bytes)
        } else {
            bytes
                .split(|b| *b == b'\n')
                .take(err.line().saturating_sub(1))
                .map(|line| line.len() + 1)
                .sum::<usize>()
                + err.column().saturating_sub(1)
        };
        // Python counts characters of the decoded text; serde_json counts bytes.
        let position = String::from_utf8_lossy(bytes.get(..offset).unwrap_or(bytes))
            .chars()
            .count();
        ContinuityError::Validation(vec![super::error::FieldError {
            kind: "json_invalid",
            loc: super::error::Loc::body().index(position),
            msg: "JSON decode error".to_owned(),
            input: Json::Object(super::json::JsonObject::new()),
            ctx: vec![(
                "error",
                Json::String(python_json_error(&err, bytes.get(offset)).to_owned()),
            )],
        }])
    })
}

/// Where Python's decoder places an error at the end of the text: the opening quote of a
/// string left open ("Unterminated string starting at"), else the end (serde_json points
/// at the last byte it read).
fn eof_position(bytes: &[u8]) -> usize {
    let mut open = None;
    let mut escaped = false;
    for (at, byte) in bytes.iter().enumerate() {
        match (open, byte) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), b'\\') => escaped = true,
            (Some(_), b'"') => open = None,
            (None, b'"') => open = Some(at),
            _ => {}
        }
    }
    open.unwrap_or(bytes.len())
}

/// What Python's `json` module (3.12) says for the failure serde_json found, as FastAPI puts
/// it into `ctx.error`.
/// `at` is the byte where serde_json stopped (after a trailing comma: the closing bracket).
fn python_json_error(err: &serde_json::Error, at: Option<&u8>) -> &'static str {
    let text = err.to_string();
    let says = |prefix: &str| text.starts_with(prefix);
    if says("key must be a string") || (says("trailing comma") && at == Some(&b'}')) {
        "Expecting property name enclosed in double quotes"
    } else if says("expected `:`") {
        "Expecting ':' delimiter"
    } else if says("expected `,` or")
        || says("EOF while parsing an object")
        || says("EOF while parsing a list")
    {
        "Expecting ',' delimiter"
    } else if says("EOF while parsing a string") {
        "Unterminated string starting at"
    } else if says("control character") {
        "Invalid control character at"
    } else if says("invalid escape") {
        "Invalid \\escape"
    } else if says("invalid unicode code point")
        || says("lone leading surrogate")
        || says("unexpected end of hex escape")
    {
        "Invalid \\uXXXX escape"
    } else if says("trailing characters") {
        "Extra data"
    } else {
        "Expecting value"
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    model: &'static Model,
    body: &Json,
) -> Result<T, ContinuityError> {
    let coerced = validate_body(model, body).map_err(ContinuityError::Validation)?;
    from_coerced(&coerced)
}

/// A lifecycle transition (§5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transition {
    Suspend,
    Resume,
    Conclude,
    Supersede,
}

impl Transition {
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Suspend => "suspend",
            Transition::Resume => "resume",
            Transition::Conclude => "conclude",
            Transition::Supersede => "supersede",
        }
    }

    /// The state a transition leads to.
    pub fn target(self) -> Lifecycle {
        match self {
            Transition::Suspend => Lifecycle::Suspended,
            Transition::Resume => Lifecycle::Active,
            Transition::Conclude => Lifecycle::Concluded,
            Transition::Supersede => Lifecycle::Superseded,
        }
    }
}

impl std::fmt::Display for Transition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// --- upsert --------------------------------------------------------------------------------

pub static SESSION_END_SNAPSHOT: Model = Model {
    name: "SessionEndSnapshot",
    fields: &[
        req(
            "open_loops",
            Ty::List {
                item: &ANY_STR,
                min: None,
                max: Some(8),
            },
        ),
        req(
            "top_priorities",
            Ty::List {
                item: &ANY_STR,
                min: None,
                max: Some(8),
            },
        ),
        req(
            "active_constraints",
            Ty::List {
                item: &ANY_STR,
                min: None,
                max: Some(8),
            },
        ),
        req(
            "stance_summary",
            Ty::Str {
                min: 0,
                max: Some(240),
            },
        ),
        opt(
            "negative_decisions",
            Ty::Nullable(&Ty::List {
                item: &Ty::Model(&NEGATIVE_DECISION),
                min: None,
                max: Some(4),
            }),
        ),
        opt(
            "session_trajectory",
            Ty::Nullable(&Ty::List {
                item: &ANY_STR,
                min: None,
                max: Some(5),
            }),
        ),
        opt(
            "rationale_entries",
            Ty::Nullable(&Ty::List {
                item: &Ty::Model(&RATIONALE_ENTRY),
                min: None,
                max: Some(6),
            }),
        ),
    ],
    forbid_extra: false,
    after: None,
};

pub static UPSERT_REQUEST: Model = Model {
    name: "ContinuityUpsertRequest",
    fields: &[
        req("subject_kind", SUBJECT_KIND),
        req("subject_id", SUBJECT_ID),
        req("capsule", Ty::Model(&CONTINUITY_CAPSULE)),
        opt("commit_message", COMMIT_MESSAGE),
        opt("idempotency_key", nullable_max!(200)),
        opt(
            "session_end_snapshot",
            Ty::Nullable(&Ty::Model(&SESSION_END_SNAPSHOT)),
        ),
        opt(
            "lifecycle_transition",
            Ty::Nullable(&Ty::Literal(TRANSITIONS)),
        ),
        opt("superseded_by", SUPERSEDED_BY),
        opt("merge_mode", Ty::Literal(&["replace", "preserve"])),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SessionEndSnapshot {
    pub open_loops: Vec<String>,
    pub top_priorities: Vec<String>,
    pub active_constraints: Vec<String>,
    pub stance_summary: String,
    #[serde(default)]
    pub negative_decisions: Option<Vec<NegativeDecision>>,
    #[serde(default)]
    pub session_trajectory: Option<Vec<String>>,
    #[serde(default)]
    pub rationale_entries: Option<Vec<RationaleEntry>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeMode {
    #[default]
    Replace,
    Preserve,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct UpsertRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub capsule: Capsule,
    #[serde(default)]
    pub commit_message: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub session_end_snapshot: Option<SessionEndSnapshot>,
    #[serde(default)]
    pub lifecycle_transition: Option<Transition>,
    #[serde(default)]
    pub superseded_by: Option<String>,
    #[serde(default)]
    pub merge_mode: MergeMode,
    /// The body as sent, kept when `merge_mode` is literally `"preserve"` (the original caches
    /// it only then): preserve mode judges field intent on it (§4.1).
    #[serde(skip)]
    pub raw_body: Option<Json>,
}

impl UpsertRequest {
    pub fn from_json(body: &Json) -> Result<UpsertRequest, ContinuityError> {
        let mut request: UpsertRequest = parse(&UPSERT_REQUEST, body)?;
        if body.get("merge_mode").and_then(Json::as_str) == Some("preserve") {
            request.raw_body = Some(body.clone());
        }
        // Explicit `"related_documents": null` is kept as a fact the rules need (pydantic's
        // `model_fields_set`); serde folds it into `None`.
        if body
            .get("capsule")
            .and_then(|c| c.get("continuity"))
            .and_then(|c| c.get("related_documents"))
            .is_some_and(Json::is_null)
        {
            request.capsule.continuity.related_documents = Some(serde_json::Value::Null);
        }
        Ok(request)
    }
}

// --- patch ---------------------------------------------------------------------------------

/// Patch targets, in the original's `Literal` order.
pub const PATCH_TARGETS: &[&str] = &[
    "continuity.open_loops",
    "continuity.top_priorities",
    "continuity.active_constraints",
    "continuity.active_concerns",
    "continuity.drift_signals",
    "continuity.working_hypotheses",
    "continuity.long_horizon_commitments",
    "continuity.session_trajectory",
    "continuity.trailing_notes",
    "continuity.curiosity_queue",
    "continuity.negative_decisions",
    "continuity.rationale_entries",
    "stable_preferences",
    "thread_descriptor.keywords",
    "thread_descriptor.scope_anchors",
    "thread_descriptor.identity_anchors",
];

pub static PATCH_OPERATION: Model = Model {
    name: "PatchOperation",
    fields: &[
        req("target", Ty::Literal(PATCH_TARGETS)),
        req("action", Ty::Literal(&["append", "remove", "replace_at"])),
        opt("value", Ty::Any),
        opt("match", Ty::Nullable(&ANY_STR)),
        opt("index", Ty::Nullable(&Ty::Int { ge: None, le: None })),
    ],
    forbid_extra: false,
    after: None,
};

pub static PATCH_REQUEST: Model = Model {
    name: "ContinuityPatchRequest",
    fields: &[
        req("subject_kind", SUBJECT_KIND),
        req("subject_id", SUBJECT_ID),
        req("updated_at", UTC_TIMESTAMP),
        req(
            "operations",
            Ty::List {
                item: &Ty::Model(&PATCH_OPERATION),
                min: Some(1),
                max: Some(10),
            },
        ),
        opt("commit_message", COMMIT_MESSAGE),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatchAction {
    Append,
    Remove,
    ReplaceAt,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PatchOperation {
    pub target: String,
    pub action: PatchAction,
    /// `None` for an absent or `null` value (pydantic's `Any = None`).
    #[serde(default)]
    pub value: Option<serde_json::Value>,
    #[serde(default, rename = "match")]
    pub match_: Option<String>,
    #[serde(default)]
    pub index: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PatchRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub updated_at: String,
    pub operations: Vec<PatchOperation>,
    #[serde(default)]
    pub commit_message: Option<String>,
}

impl PatchRequest {
    pub fn from_json(body: &Json) -> Result<PatchRequest, ContinuityError> {
        let mut request: PatchRequest = parse(&PATCH_REQUEST, body)?;
        // serde reads `"value": null` as `Some(Null)`; the original sees `None` either way.
        for op in request.operations.iter_mut() {
            if op.value.as_ref().is_some_and(serde_json::Value::is_null) {
                op.value = None;
            }
        }
        Ok(request)
    }
}

// --- lifecycle -----------------------------------------------------------------------------

pub static LIFECYCLE_REQUEST: Model = Model {
    name: "ContinuityLifecycleRequest",
    fields: &[
        req("subject_kind", Ty::Literal(&["thread", "task"])),
        req("subject_id", SUBJECT_ID),
        req("transition", Ty::Literal(TRANSITIONS)),
        opt("superseded_by", SUPERSEDED_BY),
        req("updated_at", UTC_TIMESTAMP),
        opt("commit_message", COMMIT_MESSAGE),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LifecycleRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub transition: Transition,
    #[serde(default)]
    pub superseded_by: Option<String>,
    pub updated_at: String,
    #[serde(default)]
    pub commit_message: Option<String>,
}

impl LifecycleRequest {
    pub fn from_json(body: &Json) -> Result<LifecycleRequest, ContinuityError> {
        parse(&LIFECYCLE_REQUEST, body)
    }
}

// --- read / list ---------------------------------------------------------------------------

pub static READ_REQUEST: Model = Model {
    name: "ContinuityReadRequest",
    fields: &[
        req("subject_kind", SUBJECT_KIND),
        req("subject_id", SUBJECT_ID),
        opt("allow_fallback", Ty::Bool),
        opt("view", Ty::Nullable(&Ty::Literal(&["startup"]))),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReadRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    #[serde(default)]
    pub allow_fallback: bool,
    /// `Some("startup")` or `None`.
    #[serde(default)]
    pub view: Option<String>,
}

impl ReadRequest {
    pub fn from_json(body: &Json) -> Result<ReadRequest, ContinuityError> {
        parse(&READ_REQUEST, body)
    }

    pub fn startup_view(&self) -> bool {
        self.view.as_deref() == Some("startup")
    }
}

pub static LIST_REQUEST: Model = Model {
    name: "ContinuityListRequest",
    fields: &[
        opt("subject_kind", Ty::Nullable(&SUBJECT_KIND)),
        opt(
            "limit",
            Ty::Int {
                ge: Some(1),
                le: Some(200),
            },
        ),
        opt("include_fallback", Ty::Bool),
        opt("include_archived", Ty::Bool),
        opt("include_cold", Ty::Bool),
        opt("lifecycle", Ty::Nullable(&Ty::Literal(LIFECYCLES))),
        opt("scope_anchor", nullable_max!(200)),
        opt("keyword", nullable_max!(40)),
        opt("label_exact", nullable_max!(120)),
        opt("anchor_kind", nullable_max!(40)),
        opt("anchor_value", nullable_max!(200)),
        opt("sort", Ty::Nullable(&Ty::Literal(&["default", "salience"]))),
    ],
    forbid_extra: false,
    after: None,
};

fn default_list_limit() -> i64 {
    50
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ListRequest {
    #[serde(default)]
    pub subject_kind: Option<SubjectKind>,
    #[serde(default = "default_list_limit")]
    pub limit: i64,
    #[serde(default)]
    pub include_fallback: bool,
    #[serde(default)]
    pub include_archived: bool,
    #[serde(default)]
    pub include_cold: bool,
    #[serde(default)]
    pub lifecycle: Option<Lifecycle>,
    #[serde(default)]
    pub scope_anchor: Option<String>,
    #[serde(default)]
    pub keyword: Option<String>,
    #[serde(default)]
    pub label_exact: Option<String>,
    #[serde(default)]
    pub anchor_kind: Option<String>,
    #[serde(default)]
    pub anchor_value: Option<String>,
    /// `"default"` (also when absent), `"salience"`, or `None` for an explicit null.
    #[serde(default)]
    pub sort: Option<String>,
}

impl ListRequest {
    pub fn from_json(body: &Json) -> Result<ListRequest, ContinuityError> {
        let mut request: ListRequest = parse(&LIST_REQUEST, body)?;
        if body.get("sort").is_none() {
            request.sort = Some("default".to_owned());
        }
        Ok(request)
    }

    pub fn salience(&self) -> bool {
        self.sort.as_deref() == Some("salience")
    }

    /// Whether any thread-identity filter was given.
    pub fn has_thread_filters(&self) -> bool {
        self.lifecycle.is_some()
            || self.scope_anchor.is_some()
            || self.keyword.is_some()
            || self.label_exact.is_some()
            || self.anchor_kind.is_some()
            || self.anchor_value.is_some()
    }
}

// --- plans ---------------------------------------------------------------------------------

pub static REFRESH_PLAN_REQUEST: Model = Model {
    name: "ContinuityRefreshPlanRequest",
    fields: &[
        opt("subject_kind", Ty::Nullable(&SUBJECT_KIND)),
        opt(
            "limit",
            Ty::Int {
                ge: Some(1),
                le: Some(100),
            },
        ),
        opt("include_healthy", Ty::Bool),
    ],
    forbid_extra: false,
    after: None,
};

fn default_plan_limit() -> i64 {
    25
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RefreshPlanRequest {
    #[serde(default)]
    pub subject_kind: Option<SubjectKind>,
    #[serde(default = "default_plan_limit")]
    pub limit: i64,
    #[serde(default)]
    pub include_healthy: bool,
}

impl RefreshPlanRequest {
    pub fn from_json(body: &Json) -> Result<RefreshPlanRequest, ContinuityError> {
        parse(&REFRESH_PLAN_REQUEST, body)
    }
}

pub static RETENTION_PLAN_REQUEST: Model = Model {
    name: "ContinuityRetentionPlanRequest",
    fields: &[
        opt("subject_kind", Ty::Nullable(&SUBJECT_KIND)),
        opt(
            "limit",
            Ty::Int {
                ge: Some(1),
                le: Some(100),
            },
        ),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RetentionPlanRequest {
    #[serde(default)]
    pub subject_kind: Option<SubjectKind>,
    #[serde(default = "default_plan_limit")]
    pub limit: i64,
}

impl RetentionPlanRequest {
    pub fn from_json(body: &Json) -> Result<RetentionPlanRequest, ContinuityError> {
        parse(&RETENTION_PLAN_REQUEST, body)
    }
}

// --- archive / delete / cold ---------------------------------------------------------------

const REASON_3_240: Ty = Ty::Str {
    min: 3,
    max: Some(240),
};

pub static ARCHIVE_REQUEST: Model = Model {
    name: "ContinuityArchiveRequest",
    fields: &[
        req("subject_kind", SUBJECT_KIND),
        req("subject_id", SUBJECT_ID),
        req("reason", REASON_3_240),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ArchiveRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub reason: String,
}

impl ArchiveRequest {
    pub fn from_json(body: &Json) -> Result<ArchiveRequest, ContinuityError> {
        parse(&ARCHIVE_REQUEST, body)
    }
}

fn any_delete_flag(fields: &super::json::JsonObject) -> Option<&'static str> {
    let set = |name: &str| matches!(fields.get(name), Some(Json::Bool(true)));
    if set("delete_active") || set("delete_archive") || set("delete_fallback") {
        None
    } else {
        Some("at least one delete flag must be true")
    }
}

pub static DELETE_REQUEST: Model = Model {
    name: "ContinuityDeleteRequest",
    fields: &[
        req("subject_kind", SUBJECT_KIND),
        req("subject_id", SUBJECT_ID),
        opt("delete_active", Ty::Bool),
        opt("delete_archive", Ty::Bool),
        opt("delete_fallback", Ty::Bool),
        req("reason", REASON_3_240),
    ],
    forbid_extra: false,
    after: Some(any_delete_flag),
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DeleteRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    #[serde(default)]
    pub delete_active: bool,
    #[serde(default)]
    pub delete_archive: bool,
    #[serde(default)]
    pub delete_fallback: bool,
    pub reason: String,
}

impl DeleteRequest {
    pub fn from_json(body: &Json) -> Result<DeleteRequest, ContinuityError> {
        parse(&DELETE_REQUEST, body)
    }
}

pub static COLD_STORE_REQUEST: Model = Model {
    name: "ContinuityColdStoreRequest",
    fields: &[req(
        "source_archive_path",
        Ty::Str {
            min: 1,
            max: Some(400),
        },
    )],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ColdStoreRequest {
    pub source_archive_path: String,
}

impl ColdStoreRequest {
    pub fn from_json(body: &Json) -> Result<ColdStoreRequest, ContinuityError> {
        parse(&COLD_STORE_REQUEST, body)
    }
}

fn exactly_one_selector(fields: &super::json::JsonObject) -> Option<&'static str> {
    let given = |name: &str| matches!(fields.get(name), Some(Json::String(s)) if !s.is_empty());
    if given("source_archive_path") == given("cold_stub_path") {
        Some("exactly one of source_archive_path or cold_stub_path is required")
    } else {
        None
    }
}

pub static COLD_REHYDRATE_REQUEST: Model = Model {
    name: "ContinuityColdRehydrateRequest",
    fields: &[
        opt("source_archive_path", nullable_max!(400)),
        opt("cold_stub_path", nullable_max!(400)),
    ],
    forbid_extra: false,
    after: Some(exactly_one_selector),
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ColdRehydrateRequest {
    #[serde(default)]
    pub source_archive_path: Option<String>,
    #[serde(default)]
    pub cold_stub_path: Option<String>,
}

impl ColdRehydrateRequest {
    pub fn from_json(body: &Json) -> Result<ColdRehydrateRequest, ContinuityError> {
        parse(&COLD_REHYDRATE_REQUEST, body)
    }
}

pub static RETENTION_APPLY_REQUEST: Model = Model {
    name: "ContinuityRetentionApplyRequest",
    fields: &[req(
        "source_archive_paths",
        Ty::List {
            item: &ANY_STR,
            min: Some(1),
            max: Some(100),
        },
    )],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RetentionApplyRequest {
    pub source_archive_paths: Vec<String>,
}

impl RetentionApplyRequest {
    pub fn from_json(body: &Json) -> Result<RetentionApplyRequest, ContinuityError> {
        parse(&RETENTION_APPLY_REQUEST, body)
    }
}

// --- compare / revalidate ------------------------------------------------------------------

pub static VERIFICATION_SIGNAL: Model = Model {
    name: "ContinuityVerificationSignal",
    fields: &[
        req("kind", Ty::Literal(SIGNAL_KINDS)),
        req(
            "source_ref",
            Ty::Str {
                min: 1,
                max: Some(200),
            },
        ),
        req("observed_at", UTC_TIMESTAMP),
        req(
            "summary",
            Ty::Str {
                min: 1,
                max: Some(240),
            },
        ),
    ],
    forbid_extra: false,
    after: None,
};

const SIGNALS: Ty = Ty::List {
    item: &Ty::Model(&VERIFICATION_SIGNAL),
    min: Some(1),
    max: Some(8),
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VerificationSignal {
    pub kind: SignalKind,
    pub source_ref: String,
    pub observed_at: String,
    pub summary: String,
}

pub static COMPARE_REQUEST: Model = Model {
    name: "ContinuityCompareRequest",
    fields: &[
        req("subject_kind", SUBJECT_KIND),
        req("subject_id", SUBJECT_ID),
        req("candidate_capsule", Ty::Model(&CONTINUITY_CAPSULE)),
        req("signals", SIGNALS),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CompareRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub candidate_capsule: Capsule,
    pub signals: Vec<VerificationSignal>,
}

impl CompareRequest {
    pub fn from_json(body: &Json) -> Result<CompareRequest, ContinuityError> {
        parse(&COMPARE_REQUEST, body)
    }
}

pub static REVALIDATE_REQUEST: Model = Model {
    name: "ContinuityRevalidateRequest",
    fields: &[
        req("subject_kind", SUBJECT_KIND),
        req("subject_id", SUBJECT_ID),
        req(
            "outcome",
            Ty::Literal(&["confirm", "correct", "degrade", "conflict"]),
        ),
        req("signals", SIGNALS),
        opt(
            "candidate_capsule",
            Ty::Nullable(&Ty::Model(&CONTINUITY_CAPSULE)),
        ),
        opt(
            "reason",
            Ty::Nullable(&Ty::Str {
                min: 1,
                max: Some(120),
            }),
        ),
    ],
    forbid_extra: false,
    after: None,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Confirm,
    Correct,
    Degrade,
    Conflict,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Confirm => "confirm",
            Outcome::Correct => "correct",
            Outcome::Degrade => "degrade",
            Outcome::Conflict => "conflict",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RevalidateRequest {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
    pub outcome: Outcome,
    pub signals: Vec<VerificationSignal>,
    #[serde(default)]
    pub candidate_capsule: Option<Capsule>,
    #[serde(default)]
    pub reason: Option<String>,
}

impl RevalidateRequest {
    pub fn from_json(body: &Json) -> Result<RevalidateRequest, ContinuityError> {
        parse(&REVALIDATE_REQUEST, body)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod json_error_tests {
    use super::*;

    fn said(body: &str) -> String {
        let ContinuityError::Validation(errors) = parse_body(body.as_bytes()).unwrap_err() else {
            panic!("not a validation error");
        };
        format!("{} {:?}", errors[0].loc.dotted(), errors[0].ctx[0].1)
    }

    /// Python 3.12's `json` messages, as CogniRelay 1.4.15 answered these bodies.
    #[test]
    fn json_decode_errors_are_worded_as_pythons() {
        assert_eq!(
            said("{bad"),
            "body.1 String(\"Expecting property name enclosed in double quotes\")"
        );
        assert_eq!(said("[1,]"), "body.3 String(\"Expecting value\")");
        assert_eq!(
            said("{\"a\":1,}"),
            "body.7 String(\"Expecting property name enclosed in double quotes\")"
        );
        assert_eq!(
            said("{\"a\" 1}"),
            "body.5 String(\"Expecting ':' delimiter\")"
        );
        assert_eq!(
            said("{\"a\":1 \"b\""),
            "body.7 String(\"Expecting ',' delimiter\")"
        );
        assert_eq!(said("{} x"), "body.3 String(\"Extra data\")");
    }

    /// Positions as Python 3.12's `json.loads` reports them (checked with it): at the end of
    /// the text, a string left open at its quote, and in characters, not bytes.
    #[test]
    fn json_decode_error_positions_are_pythons() {
        let at = |body: &str| said(body).split(' ').next().unwrap_or_default().to_owned();
        assert_eq!(at("{\"recipient_peer\": "), "body.19");
        assert_eq!(at("{\"a\": 1"), "body.7");
        assert_eq!(at("{"), "body.1");
        assert_eq!(at("{\"a\""), "body.4");
        assert_eq!(at("[1, 2"), "body.5");
        assert_eq!(at("   "), "body.3");
        assert_eq!(at("{\"a\": \"abc"), "body.6");
        assert_eq!(at("{\"a\": \"é\\\"x"), "body.6");
        assert_eq!(at("{\"é\": \"ü"), "body.6");
        assert_eq!(at("{\"é\": x}"), "body.6");
    }
}

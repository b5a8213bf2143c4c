//! The context request bodies (`ContextRetrieveRequest`, `ContextSnapshotRequest`): their
//! pydantic declarations (422 with every error, as the other continuity routes) and typed
//! forms.

use serde::Deserialize;

use crate::domain::error::ContinuityError;
use crate::domain::json::Json;
use crate::domain::model::{SUBJECT_KINDS, SubjectKind, from_coerced};
use crate::domain::schema::{Field, Model, Ty, validate_body};

/// `CONTEXT_RETRIEVE_DEFAULT_MAX_TOKENS` and its bounds.
pub const DEFAULT_MAX_TOKENS: i64 = 12_000;
pub const MIN_MAX_TOKENS: i64 = 256;
pub const MAX_MAX_TOKENS: i64 = 100_000;

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

const ANY_STR: Ty = Ty::Str { min: 0, max: None };

pub static CONTINUITY_SELECTOR: Model = Model {
    name: "ContinuitySelector",
    fields: &[
        field("subject_kind", Ty::Literal(SUBJECT_KINDS), true),
        field(
            "subject_id",
            Ty::Str {
                min: 1,
                max: Some(200),
            },
            true,
        ),
    ],
    forbid_extra: false,
    after: None,
};

pub static CONTEXT_RETRIEVE_REQUEST: Model = Model {
    name: "ContextRetrieveRequest",
    fields: &[
        field("task", ANY_STR, true),
        field(
            "subject_kind",
            Ty::Nullable(&Ty::Literal(SUBJECT_KINDS)),
            false,
        ),
        field(
            "subject_id",
            Ty::Nullable(&Ty::Str {
                min: 0,
                max: Some(200),
            }),
            false,
        ),
        field(
            "continuity_mode",
            Ty::Literal(&["auto", "required", "off"]),
            false,
        ),
        field(
            "continuity_verification_policy",
            Ty::Literal(&["allow_degraded", "prefer_healthy", "require_healthy"]),
            false,
        ),
        field(
            "continuity_resilience_policy",
            Ty::Literal(&["allow_fallback", "prefer_active", "require_active"]),
            false,
        ),
        field(
            "continuity_selectors",
            Ty::List {
                item: &Ty::Model(&CONTINUITY_SELECTOR),
                min: None,
                max: Some(4),
            },
            false,
        ),
        field(
            "continuity_max_capsules",
            Ty::Int {
                ge: Some(1),
                le: Some(4),
            },
            false,
        ),
        field(
            "max_tokens_estimate",
            Ty::Int {
                ge: Some(MIN_MAX_TOKENS),
                le: Some(MAX_MAX_TOKENS),
            },
            false,
        ),
        field(
            "include_types",
            Ty::List {
                item: &ANY_STR,
                min: None,
                max: None,
            },
            false,
        ),
        field(
            "time_window_days",
            Ty::Int {
                ge: Some(1),
                le: Some(3650),
            },
            false,
        ),
        field(
            "limit",
            Ty::Int {
                ge: Some(1),
                le: Some(100),
            },
            false,
        ),
    ],
    forbid_extra: false,
    after: None,
};

/// `continuity_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContinuityMode {
    #[default]
    Auto,
    Required,
    Off,
}

/// `continuity_verification_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationPolicy {
    #[default]
    AllowDegraded,
    PreferHealthy,
    RequireHealthy,
}

/// `continuity_resilience_policy` (`allow_fallback` and `prefer_active` behave the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResiliencePolicy {
    #[default]
    AllowFallback,
    PreferActive,
    RequireActive,
}

/// One entry of `continuity_selectors`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SelectorInput {
    pub subject_kind: SubjectKind,
    pub subject_id: String,
}

/// `continuity_max_capsules` when the body leaves it out.
pub const DEFAULT_MAX_CAPSULES: usize = 1;

fn default_max_capsules() -> usize {
    DEFAULT_MAX_CAPSULES
}
fn default_max_tokens() -> i64 {
    DEFAULT_MAX_TOKENS
}
fn default_time_window_days() -> i64 {
    30
}
fn default_limit() -> usize {
    10
}

/// `POST /v1/context/retrieve`'s body, validated and with its defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RetrieveRequest {
    pub task: String,
    #[serde(default)]
    pub subject_kind: Option<SubjectKind>,
    #[serde(default)]
    pub subject_id: Option<String>,
    #[serde(default)]
    pub continuity_mode: ContinuityMode,
    #[serde(default)]
    pub continuity_verification_policy: VerificationPolicy,
    #[serde(default)]
    pub continuity_resilience_policy: ResiliencePolicy,
    #[serde(default)]
    pub continuity_selectors: Vec<SelectorInput>,
    #[serde(default = "default_max_capsules")]
    pub continuity_max_capsules: usize,
    #[serde(default = "default_max_tokens")]
    pub max_tokens_estimate: i64,
    #[serde(default)]
    pub include_types: Vec<String>,
    #[serde(default = "default_time_window_days")]
    pub time_window_days: i64,
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// `continuity_selectors` was in the body (pydantic's `model_fields_set`): with a
    /// non-empty list, warnings name their selector.
    #[serde(skip)]
    pub selectors_field_set: bool,
}

impl RetrieveRequest {
    pub fn from_json(body: &Json) -> Result<RetrieveRequest, ContinuityError> {
        let coerced =
            validate_body(&CONTEXT_RETRIEVE_REQUEST, body).map_err(ContinuityError::Validation)?;
        let mut request: RetrieveRequest = from_coerced(&coerced)?;
        request.selectors_field_set = body.get("continuity_selectors").is_some();
        Ok(request)
    }

    /// The primary subject when both halves are non-empty (Python truthiness).
    pub fn primary_subject(&self) -> Option<(SubjectKind, &str)> {
        match (self.subject_kind, self.subject_id.as_deref()) {
            (Some(kind), Some(id)) if !id.is_empty() => Some((kind, id)),
            _ => None,
        }
    }

    /// `_warning_mode_is_multi`: selectors were given explicitly and are not empty.
    pub fn multi_warning_mode(&self) -> bool {
        self.selectors_field_set && !self.continuity_selectors.is_empty()
    }
}

static SNAPSHOT_AS_OF: Model = Model {
    name: "SnapshotAsOfRequest",
    fields: &[
        field(
            "mode",
            Ty::Literal(&["working_tree", "commit", "timestamp"]),
            false,
        ),
        field("value", Ty::Nullable(&ANY_STR), false),
    ],
    forbid_extra: false,
    after: None,
};

pub static CONTEXT_SNAPSHOT_REQUEST: Model = Model {
    name: "ContextSnapshotRequest",
    fields: &[
        field("task", ANY_STR, true),
        field("as_of", Ty::Model(&SNAPSHOT_AS_OF), false),
        field(
            "include_types",
            Ty::List {
                item: &ANY_STR,
                min: None,
                max: None,
            },
            false,
        ),
        field(
            "limit",
            Ty::Int {
                ge: Some(1),
                le: Some(200),
            },
            false,
        ),
        field("include_core", Ty::Bool, false),
    ],
    forbid_extra: false,
    after: None,
};

/// `as_of` of a snapshot request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AsOf {
    #[serde(default = "default_as_of_mode")]
    pub mode: String,
    #[serde(default)]
    pub value: Option<String>,
}

fn default_as_of_mode() -> String {
    "working_tree".to_owned()
}

impl Default for AsOf {
    fn default() -> Self {
        AsOf {
            mode: default_as_of_mode(),
            value: None,
        }
    }
}

fn default_snapshot_limit() -> usize {
    20
}
fn default_true() -> bool {
    true
}

/// `POST /v1/context/snapshot`'s body.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SnapshotRequest {
    pub task: String,
    #[serde(default)]
    pub as_of: AsOf,
    #[serde(default)]
    pub include_types: Vec<String>,
    #[serde(default = "default_snapshot_limit")]
    pub limit: usize,
    #[serde(default = "default_true")]
    pub include_core: bool,
}

impl SnapshotRequest {
    pub fn from_json(body: &Json) -> Result<SnapshotRequest, ContinuityError> {
        let coerced =
            validate_body(&CONTEXT_SNAPSHOT_REQUEST, body).map_err(ContinuityError::Validation)?;
        from_coerced(&coerced)
    }
}

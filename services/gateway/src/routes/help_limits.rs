//! CogniRelay's validation-limit table (`GET /v1/help/limits`, `/v1/help/limits/{field_path}`):
//! the original's field paths, in its order and groups, with its bodies, whose numbers are
//! read from the declarations the continuity service validates with (its request models,
//! the patch target sizes, the retrieve bounds, the capsule byte cap). Only what has no
//! declaration to read (prose, patterns, per-item lengths checked inline) is written here.
//! Noema's own three limits follow the original's paths.

use std::sync::LazyLock;

use serde::Serialize;
use serde_json::Value;

use noema_continuity::domain::context::graph::{CONTEXT_GRAPH_CAPS, GraphCaps, STARTUP_GRAPH_CAPS};
use noema_continuity::domain::context::request::{
    CONTEXT_RETRIEVE_REQUEST, CONTINUITY_SELECTOR, DEFAULT_MAX_CAPSULES, DEFAULT_MAX_TOKENS,
    MAX_MAX_TOKENS, MIN_MAX_TOKENS,
};
use noema_continuity::domain::model::{
    ATTENTION_POLICY, CONFIDENCE, CONTINUITY_CAPSULE, CONTINUITY_SOURCE, CONTINUITY_STATE,
    FRESHNESS, IDENTITY_ANCHOR, RATIONALE_ENTRY, RELATIONSHIP_MODEL, RETRIEVAL_HINTS,
    STABLE_PREFERENCE, SUBJECT_KINDS, THREAD_DESCRIPTOR,
};
use noema_continuity::domain::patch::{PATCH_MAX_OPERATIONS, target_max_length};
use noema_continuity::domain::request::{
    PATCH_OPERATION, PATCH_REQUEST, PATCH_TARGETS, SESSION_END_SNAPSHOT, UPSERT_REQUEST,
};
use noema_continuity::domain::schema::{Model, Ty};
use noema_continuity::domain::validation::{
    CAPSULE_SIZE_LIMIT_BYTES, INTERACTION_BOUNDARY_KINDS, METADATA_MAX_KEYS,
    RELATED_DOCUMENTS_MAX_ENTRIES, RELATED_DOCUMENTS_RELEVANCE, RELATED_DOCUMENTS_REQUIRED,
    RELATED_DOCUMENTS_RESERVED,
};

use crate::key_order::OrderedMap;
use crate::mcp;

/// The index's groups, in the original's order: id, title, purpose. A limit belongs to the
/// group its category names.
const GROUPS: [(&str, &str, &str); 7] = [
    (
        "continuity_orientation",
        "Continuity Orientation",
        "Startup-critical continuity orientation fields.",
    ),
    (
        "session_end_snapshot",
        "Session-End Snapshot",
        "Bounded session-end snapshot helper fields.",
    ),
    (
        "patch_targets",
        "Patch Targets",
        "Continuity patch operation and target limits.",
    ),
    (
        "retrieval_budget",
        "Retrieval Budget",
        "Context retrieval budget and capsule-count limits.",
    ),
    (
        "response_orientation_caps",
        "Response Orientation Caps",
        "Derived graph response caps separate from validation limits and the 20 KB capsule write cap.",
    ),
    (
        "capsule_write_cap",
        "Capsule Write Cap",
        "Serialized continuity capsule write cap.",
    ),
    (
        "continuity_payload",
        "Continuity Payload",
        "Additional public continuity/context payload limits.",
    ),
];

// Per-item lengths the capsule validation checks inline (`domain::validation`), as the
// original's table states them.
const ITEM_160: usize = 160;
const ITEM_120: usize = 120;
const ITEM_80: usize = 80;
const ITEM_40: usize = 40;
const ITEM_200: usize = 200;
const NEGATIVE_DECISION_DECISION: usize = 160;
const NEGATIVE_DECISION_RATIONALE: usize = 240;
const RELATED_DOCUMENT_PATH: usize = 240;
const RELATED_DOCUMENT_KIND: usize = 32;
const RELATED_DOCUMENT_LABEL: usize = 120;
const RELATED_DOCUMENT_RELEVANCE: usize = 32;
const SCOPE_ANCHOR_PATTERN: &str = "^(user|peer|thread|task):[a-z0-9._-]{1,120}$";
const SCOPE_ANCHOR_VALUE_MAX: usize = 120;
const SCOPE_ANCHOR_VALUE_PATTERN: &str = "^[a-z0-9._-]{1,120}$";
const IDENTITY_ANCHOR_KIND_PATTERN: &str = "^[a-z][a-z0-9_-]{0,39}$";
/// The subject kinds a stable preference may be kept for.
const STABLE_PREFERENCE_SUBJECT_KINDS: [&str; 2] = ["user", "peer"];

/// A JSON value of a limit's `subfield_limits`, objects in the original's key order.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Sub {
    Value(Value),
    Object(OrderedMap<Sub>),
}

fn val(value: impl Into<Value>) -> Sub {
    Sub::Value(value.into())
}

fn obj(entries: Vec<(&'static str, Sub)>) -> Sub {
    Sub::Object(OrderedMap(entries))
}

fn strings(values: &[&str]) -> Sub {
    val(values.iter().map(|v| Value::from(*v)).collect::<Vec<_>>())
}

/// One limit of the original's table, its keys in the original's order.
#[derive(Debug, Serialize)]
pub struct Limit {
    pub field_path: &'static str,
    pub category: &'static str,
    pub value_type: &'static str,
    pub max_items: Option<usize>,
    pub max_length: Option<usize>,
    pub per_item_max_length: Option<usize>,
    pub subfield_limits: OrderedMap<Sub>,
    pub applies_to: Vec<&'static str>,
    pub correction_guidance: String,
    pub reference: &'static str,
}

/// A limit this gateway enforces itself (Noema's shape, as before the original's table).
#[derive(Debug, Clone, Serialize)]
pub struct NoemaLimit {
    pub description: &'static str,
    pub field_path: &'static str,
    pub maximum: u64,
}

/// An entry of the served table.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Entry {
    Original(&'static Limit),
    Noema(NoemaLimit),
}

impl Entry {
    pub fn field_path(&self) -> &'static str {
        match self {
            Entry::Original(limit) => limit.field_path,
            Entry::Noema(limit) => limit.field_path,
        }
    }
}

/// Noema's own limits' paths. They come after the original's in `field_paths` so that a
/// client reading the original's list sees it unchanged, in its order; they belong to no
/// group, and their answers keep Noema's `{description, field_path, maximum}`.
pub const NOEMA_PATHS: [&str; 3] = [
    "request.body_bytes",
    "mcp.tools_list.page_size",
    "ledger.list.limit",
];

/// The limits this gateway enforces itself (the services' own validation answers with
/// its reason and message).
fn noema_limits(max_body_bytes: usize) -> [NoemaLimit; 3] {
    [
        NoemaLimit {
            description: "Largest REST (and MCP) request body, in bytes",
            field_path: NOEMA_PATHS[0],
            maximum: u64::try_from(max_body_bytes).unwrap_or(u64::MAX),
        },
        NoemaLimit {
            description: "Tools per MCP tools/list page",
            field_path: NOEMA_PATHS[1],
            maximum: u64::try_from(mcp::PAGE_SIZE).unwrap_or(u64::MAX),
        },
        NoemaLimit {
            description: "Items per open-cognition list (limit; default 50)",
            field_path: NOEMA_PATHS[2],
            maximum: u64::from(crate::routes::ledger::MAX_LIST_LIMIT),
        },
    ]
}

/// The served table: the original's limits, then Noema's (`max_body_bytes` is the
/// gateway's request body cap).
pub fn table(max_body_bytes: usize) -> Vec<Entry> {
    let mut entries: Vec<Entry> = original().iter().map(Entry::Original).collect();
    entries.extend(noema_limits(max_body_bytes).into_iter().map(Entry::Noema));
    entries
}

/// Every served field path, in the table's order.
pub fn field_paths() -> Vec<&'static str> {
    let mut paths: Vec<&'static str> = original().iter().map(|l| l.field_path).collect();
    paths.extend(NOEMA_PATHS);
    paths
}

/// The index body's groups: `{id, title, purpose, field_paths}` of the original's limits.
pub fn groups() -> Vec<Value> {
    let limits = original();
    GROUPS
        .iter()
        .map(|(id, title, purpose)| {
            let paths: Vec<Value> = limits
                .iter()
                .filter(|l| l.category == *id)
                .map(|l| Value::from(l.field_path))
                .collect();
            serde_json::json!({
                "field_paths": paths,
                "id": id,
                "purpose": purpose,
                "title": title,
            })
        })
        .collect()
}

// --- reading the declarations ----------------------------------------------------------------

/// The declared type of `model.name`, past `Optional` and document-only wrappers.
fn ty(model: &'static Model, name: &str) -> Option<&'static Ty> {
    let mut ty = &model.field(name)?.ty;
    loop {
        match ty {
            Ty::Nullable(inner) | Ty::Documented(inner, _) => ty = *inner,
            other => return Some(other),
        }
    }
}

/// A list's `max_length`, or a string's.
fn max_length(model: &'static Model, name: &str) -> Option<usize> {
    match ty(model, name)? {
        Ty::List { max, .. } | Ty::Str { max, .. } => *max,
        _ => None,
    }
}

/// A list's `min_length`, or a string's (0 is no constraint).
fn min_length(model: &'static Model, name: &str) -> Option<usize> {
    match ty(model, name)? {
        Ty::List { min, .. } => *min,
        Ty::Str { min, .. } => (*min > 0).then_some(*min),
        _ => None,
    }
}

/// A number's `ge` and `le`, as JSON (an `int` field's as integers, a `float`'s as floats).
fn bounds(model: &'static Model, name: &str) -> (Option<Value>, Option<Value>) {
    match ty(model, name) {
        Some(Ty::Int { ge, le }) => (ge.map(Value::from), le.map(Value::from)),
        Some(Ty::Float { ge, le }) => (ge.map(Value::from), le.map(Value::from)),
        _ => (None, None),
    }
}

fn literal(model: &'static Model, name: &str) -> &'static [&'static str] {
    match ty(model, name) {
        Some(Ty::Literal(values)) => values,
        _ => &[],
    }
}

fn max_length_of(model: &'static Model, name: &str) -> Sub {
    obj(vec![("max_length", val(max_length(model, name)))])
}

fn min_max_length_of(model: &'static Model, name: &str) -> Sub {
    obj(vec![
        ("min_length", val(min_length(model, name))),
        ("max_length", val(max_length(model, name))),
    ])
}

// --- the original's builders (`_field_limit`, `_limit`, `_correction_guidance`) ---------------

/// `_limit`: a limit with the applies_to and reference its path implies unless given.
#[allow(clippy::too_many_arguments)]
fn limit(
    field_path: &'static str,
    category: &'static str,
    value_type: &'static str,
    max_items: Option<usize>,
    max_length: Option<usize>,
    per_item_max_length: Option<usize>,
    subfield_limits: Vec<(&'static str, Sub)>,
    applies_to: Option<Vec<&'static str>>,
    reference: Option<&'static str>,
) -> Limit {
    let patch = field_path.starts_with("patch.") || field_path.starts_with("continuity.patch.");
    let applies_to = applies_to.unwrap_or_else(|| {
        if field_path.starts_with("session_end_snapshot.") {
            vec!["POST /v1/continuity/upsert", "continuity.upsert"]
        } else if patch {
            vec!["POST /v1/continuity/patch", "continuity.patch"]
        } else if field_path.starts_with("context.retrieve.") {
            vec!["POST /v1/context/retrieve", "context.retrieve"]
        } else if field_path == "continuity.capsule_serialized_utf8" {
            vec![
                "POST /v1/continuity/upsert",
                "continuity.upsert",
                "POST /v1/continuity/patch",
                "continuity.patch",
            ]
        } else {
            vec!["POST /v1/continuity/upsert", "continuity.upsert"]
        }
    });
    let reference = reference.unwrap_or(if field_path.starts_with("session_end_snapshot.") {
        "docs/payload-reference.md#session-end-snapshot-helper"
    } else if patch {
        "docs/payload-reference.md#patch--post-v1continuitypatch"
    } else if field_path.starts_with("context.retrieve.") {
        "docs/payload-reference.md#retrieve--post-v1contextretrieve"
    } else if field_path == "continuity.capsule_serialized_utf8" {
        "app.continuity.constants.CAPSULE_SIZE_LIMIT_BYTES"
    } else {
        "docs/payload-reference.md"
    });
    let mut guidance = correction_guidance(
        field_path,
        value_type,
        max_items,
        max_length,
        per_item_max_length,
        &subfield_limits,
    );
    if matches!(
        field_path,
        "session_end_snapshot.negative_decisions"
            | "session_end_snapshot.session_trajectory"
            | "session_end_snapshot.rationale_entries"
    ) {
        guidance.push_str(" Use null only when preserving the existing capsule value is intended.");
    }
    Limit {
        field_path,
        category,
        value_type,
        max_items,
        max_length,
        per_item_max_length,
        subfield_limits: OrderedMap(subfield_limits),
        applies_to,
        correction_guidance: guidance,
        reference,
    }
}

/// A plain `_limit` with the default applies_to and reference.
fn simple(
    field_path: &'static str,
    category: &'static str,
    value_type: &'static str,
    max_items: Option<usize>,
    per_item_max_length: Option<usize>,
    subfield_limits: Vec<(&'static str, Sub)>,
) -> Limit {
    limit(
        field_path,
        category,
        value_type,
        max_items,
        None,
        per_item_max_length,
        subfield_limits,
        None,
        None,
    )
}

/// `_field_limit`: a limit whose bounds are the declared field's.
#[allow(clippy::too_many_arguments)]
fn field_limit(
    field_path: &'static str,
    category: &'static str,
    value_type: &'static str,
    model: &'static Model,
    field: &str,
    per_item_max_length: Option<usize>,
    mut subfields: Vec<(&'static str, Sub)>,
    applies_to: Option<Vec<&'static str>>,
) -> Limit {
    let lists = matches!(value_type, "string_list" | "object_list");
    let texts = matches!(value_type, "string" | "serialized_bytes");
    let max_items = if lists {
        max_length(model, field)
    } else {
        None
    };
    let max_len = if texts {
        max_length(model, field)
    } else {
        None
    };
    if value_type == "string"
        && let Some(min) = min_length(model, field)
    {
        subfields.push(("min_length", val(min)));
    }
    if matches!(value_type, "number" | "integer_budget") {
        let (ge, le) = bounds(model, field);
        if value_type == "integer_budget"
            && let Some(default) = declared_default(model, field)
        {
            subfields.push(("default", val(default)));
        }
        if let Some(ge) = ge {
            subfields.push(("minimum", val(ge)));
        }
        if let Some(le) = le {
            subfields.push(("maximum", val(le)));
        }
    }
    if value_type == "enum" {
        subfields.push(("allowed_values", strings(literal(model, field))));
    }
    limit(
        field_path,
        category,
        value_type,
        max_items,
        max_len,
        per_item_max_length,
        subfields,
        applies_to,
        None,
    )
}

/// The defaults the typed requests fill in for the integer budgets.
fn declared_default(model: &'static Model, field: &str) -> Option<usize> {
    (std::ptr::eq(model, &CONTEXT_RETRIEVE_REQUEST) && field == "continuity_max_capsules")
        .then_some(DEFAULT_MAX_CAPSULES)
}

fn utc_timestamp(field_path: &'static str, applies_to: Option<Vec<&'static str>>) -> Limit {
    limit(
        field_path,
        "continuity_payload",
        "string",
        None,
        None,
        None,
        vec![
            ("require_utc_timestamp", val(true)),
            ("deterministic", val(true)),
            ("timezone", val("UTC")),
        ],
        applies_to,
        None,
    )
}

fn lookup<'a>(subfields: &'a [(&'static str, Sub)], key: &str) -> Option<&'a Value> {
    subfields.iter().find_map(|(k, v)| match v {
        Sub::Value(value) if *k == key => Some(value),
        _ => None,
    })
}

fn has_pattern_or_suffix(subfields: &[(&'static str, Sub)]) -> bool {
    subfields.iter().any(|(key, value)| {
        matches!(*key, "pattern" | "suffix" | "suffix_pattern" | "anchor_value")
            || matches!(value, Sub::Object(OrderedMap(inner)) if inner.iter().any(|(k, _)| *k == "pattern"))
    })
}

fn shown(value: Option<impl std::fmt::Display>) -> String {
    value.map_or_else(|| "None".to_owned(), |v| v.to_string())
}

fn shown_value(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "None".to_owned(),
    }
}

/// `_correction_guidance`.
fn correction_guidance(
    field_path: &str,
    value_type: &str,
    max_items: Option<usize>,
    max_length: Option<usize>,
    per_item_max_length: Option<usize>,
    subfields: &[(&'static str, Sub)],
) -> String {
    let retry = format!("retry with field_path \"{field_path}\".");
    let items = shown(max_items);
    match value_type {
        "string" if lookup(subfields, "require_utc_timestamp").is_some() => {
            format!("Use an explicit deterministic UTC timestamp and {retry}")
        }
        "string" => format!(
            "Shorten this value to at most {} characters and {retry}",
            shown(max_length)
        ),
        "string_list" if per_item_max_length.is_some() => format!(
            "Keep at most {items} items, shorten each item to at most {} characters, and {retry}",
            shown(per_item_max_length)
        ),
        "string_list" if has_pattern_or_suffix(subfields) => format!(
            "Keep at most {items} items, make each item match the documented pattern and subfield metadata, and {retry}"
        ),
        "string_list" => format!("Keep at most {items} items and {retry}"),
        "object_list" => {
            format!("Keep at most {items} items, apply the documented subfield limits, and {retry}")
        }
        "operation_list" => format!(
            "Send between {} and {items} patch operations and {retry}",
            shown_value(lookup(subfields, "min_items"))
        ),
        "integer_budget" => format!(
            "Use a value between {} and {} and {retry}",
            shown_value(lookup(subfields, "minimum")),
            shown_value(lookup(subfields, "maximum"))
        ),
        "serialized_bytes" => format!(
            "Reduce the serialized capsule below {} ({} bytes) and {retry}",
            shown_value(lookup(subfields, "label")),
            shown(max_length)
        ),
        "enum" => format!("Use one of the allowed values in subfield_limits and {retry}"),
        "number" => format!("Use a value within the documented numeric bounds and {retry}"),
        _ => format!("Apply the documented nested field limits and {retry}"),
    }
}

// --- shared subfield sets -------------------------------------------------------------------

fn timestamps() -> Sub {
    obj(vec![("require_utc_when_present", val(true))])
}

fn negative_decision() -> Vec<(&'static str, Sub)> {
    vec![
        (
            "decision",
            obj(vec![("max_length", val(NEGATIVE_DECISION_DECISION))]),
        ),
        (
            "rationale",
            obj(vec![("max_length", val(NEGATIVE_DECISION_RATIONALE))]),
        ),
        ("timestamps", timestamps()),
    ]
}

fn rationale_entry() -> Vec<(&'static str, Sub)> {
    let m = &RATIONALE_ENTRY;
    vec![
        ("tag", max_length_of(m, "tag")),
        (
            "kind",
            obj(vec![("allowed_values", strings(literal(m, "kind")))]),
        ),
        (
            "status",
            obj(vec![("allowed_values", strings(literal(m, "status")))]),
        ),
        ("summary", max_length_of(m, "summary")),
        ("reasoning", max_length_of(m, "reasoning")),
        (
            "alternatives_considered",
            obj(vec![
                ("max_items", val(max_length(m, "alternatives_considered"))),
                ("per_item_max_length", val(ITEM_160)),
            ]),
        ),
        (
            "depends_on",
            obj(vec![
                ("max_items", val(max_length(m, "depends_on"))),
                ("per_item_max_length", val(ITEM_120)),
            ]),
        ),
        ("supersedes", max_length_of(m, "supersedes")),
        ("timestamps", timestamps()),
    ]
}

fn scope_anchor() -> Vec<(&'static str, Sub)> {
    vec![
        ("pattern", val(SCOPE_ANCHOR_PATTERN)),
        (
            "prefix",
            obj(vec![("allowed_values", strings(SUBJECT_KINDS))]),
        ),
        (
            "anchor_value",
            obj(vec![
                ("min_length", val(1)),
                ("max_length", val(SCOPE_ANCHOR_VALUE_MAX)),
                ("pattern", val(SCOPE_ANCHOR_VALUE_PATTERN)),
            ]),
        ),
    ]
}

fn identity_anchor() -> Vec<(&'static str, Sub)> {
    vec![
        (
            "kind",
            obj(vec![
                ("max_length", val(max_length(&IDENTITY_ANCHOR, "kind"))),
                ("pattern", val(IDENTITY_ANCHOR_KIND_PATTERN)),
            ]),
        ),
        ("value", max_length_of(&IDENTITY_ANCHOR, "value")),
        ("match_key", val("kind:value")),
    ]
}

fn related_documents() -> Vec<(&'static str, Sub)> {
    let mut reserved = RELATED_DOCUMENTS_RESERVED;
    reserved.sort_unstable();
    vec![
        (
            "path",
            obj(vec![
                ("max_length", val(RELATED_DOCUMENT_PATH)),
                ("pattern", val("repo_relative_lexical_path")),
            ]),
        ),
        (
            "kind",
            obj(vec![
                ("max_length", val(RELATED_DOCUMENT_KIND)),
                ("pattern", val("^[a-z][a-z0-9_]*$")),
            ]),
        ),
        (
            "label",
            obj(vec![("max_length", val(RELATED_DOCUMENT_LABEL))]),
        ),
        (
            "relevance",
            obj(vec![
                ("max_length", val(RELATED_DOCUMENT_RELEVANCE)),
                ("allowed_values", strings(&RELATED_DOCUMENTS_RELEVANCE)),
            ]),
        ),
        ("required", strings(&RELATED_DOCUMENTS_REQUIRED)),
        ("additional_properties", val(false)),
        ("reserved_embedded_content_keys", strings(&reserved)),
    ]
}

fn with_match_key(
    mut subfields: Vec<(&'static str, Sub)>,
    key: &'static str,
) -> Vec<(&'static str, Sub)> {
    subfields.push(("match_key", val(key)));
    subfields
}

fn response_cap(field_path: &'static str, cap: usize, applies_to: [&'static str; 2]) -> Limit {
    limit(
        field_path,
        "response_orientation_caps",
        "response_cap",
        Some(cap),
        None,
        None,
        vec![("default", val(cap))],
        Some(applies_to.to_vec()),
        Some("docs/payload-reference.md#graph-runtime-sections"),
    )
}

fn graph_caps(
    prefix: &'static [&'static str; 4],
    caps: GraphCaps,
    applies_to: [&'static str; 2],
) -> [Limit; 4] {
    [
        response_cap(prefix[0], caps.nodes, applies_to),
        response_cap(prefix[1], caps.edges, applies_to),
        response_cap(prefix[2], caps.related_documents, applies_to),
        response_cap(prefix[3], caps.blockers, applies_to),
    ]
}

// --- the table ------------------------------------------------------------------------------

/// A limit read from a declared field: path, category, value type, model, field, per-item
/// length.
type DeclaredField = (
    &'static str,
    &'static str,
    &'static str,
    &'static Model,
    &'static str,
    Option<usize>,
);

/// The orientation and session-end snapshot fields read from a declaration: path, category,
/// value type, model, field, per-item length. `continuity.related_documents` (validated by
/// rule, not declared) follows `continuity.rationale_entries`.
#[rustfmt::skip]
static ORIENTATION_FIELDS: [DeclaredField; 14] = [
    ("continuity.top_priorities", ORIENTATION, "string_list", &CONTINUITY_STATE, "top_priorities", Some(ITEM_160)),
    ("continuity.open_loops", ORIENTATION, "string_list", &CONTINUITY_STATE, "open_loops", Some(ITEM_160)),
    ("continuity.active_constraints", ORIENTATION, "string_list", &CONTINUITY_STATE, "active_constraints", Some(ITEM_160)),
    ("continuity.session_trajectory", ORIENTATION, "string_list", &CONTINUITY_STATE, "session_trajectory", Some(ITEM_80)),
    ("continuity.negative_decisions", ORIENTATION, "object_list", &CONTINUITY_STATE, "negative_decisions", None),
    ("continuity.rationale_entries", ORIENTATION, "object_list", &CONTINUITY_STATE, "rationale_entries", None),
    ("continuity.stance_summary", ORIENTATION, "string", &CONTINUITY_STATE, "stance_summary", None),
    ("session_end_snapshot.open_loops", SNAPSHOT, "string_list", &SESSION_END_SNAPSHOT, "open_loops", Some(ITEM_160)),
    ("session_end_snapshot.top_priorities", SNAPSHOT, "string_list", &SESSION_END_SNAPSHOT, "top_priorities", Some(ITEM_160)),
    ("session_end_snapshot.active_constraints", SNAPSHOT, "string_list", &SESSION_END_SNAPSHOT, "active_constraints", Some(ITEM_160)),
    ("session_end_snapshot.stance_summary", SNAPSHOT, "string", &SESSION_END_SNAPSHOT, "stance_summary", None),
    ("session_end_snapshot.negative_decisions", SNAPSHOT, "object_list", &SESSION_END_SNAPSHOT, "negative_decisions", None),
    ("session_end_snapshot.session_trajectory", SNAPSHOT, "string_list", &SESSION_END_SNAPSHOT, "session_trajectory", Some(ITEM_80)),
    ("session_end_snapshot.rationale_entries", SNAPSHOT, "object_list", &SESSION_END_SNAPSHOT, "rationale_entries", None),
];

const ORIENTATION: &str = "continuity_orientation";
const SNAPSHOT: &str = "session_end_snapshot";

/// The limit of one patch target (`PATCH_TARGETS`, the original's order); `None` for a
/// target this table does not know (a test checks there is none).
fn patch_target(target: &'static str) -> Option<Limit> {
    let path = match PATCH_TARGETS.iter().position(|t| *t == target) {
        Some(at) => PATCH_TARGET_PATHS[at],
        None => return None,
    };
    let max_items = target_max_length(target);
    let list = |per_item| {
        simple(
            path,
            "patch_targets",
            "string_list",
            max_items,
            Some(per_item),
            Vec::new(),
        )
    };
    let objects = |subfields| {
        simple(
            path,
            "patch_targets",
            "object_list",
            max_items,
            None,
            subfields,
        )
    };
    Some(match target {
        "continuity.session_trajectory" => list(ITEM_80),
        "continuity.curiosity_queue" => list(ITEM_120),
        "thread_descriptor.keywords" => list(ITEM_40),
        "continuity.negative_decisions" => objects(with_match_key(negative_decision(), "decision")),
        "continuity.rationale_entries" => objects(with_match_key(rationale_entry(), "tag")),
        "stable_preferences" => objects(vec![
            ("tag", max_length_of(&STABLE_PREFERENCE, "tag")),
            ("content", max_length_of(&STABLE_PREFERENCE, "content")),
            ("match_key", val("tag")),
            ("timestamps", timestamps()),
            (
                "subject_kind",
                obj(vec![(
                    "allowed_values",
                    strings(&STABLE_PREFERENCE_SUBJECT_KINDS),
                )]),
            ),
        ]),
        "thread_descriptor.scope_anchors" => simple(
            path,
            "patch_targets",
            "string_list",
            max_items,
            None,
            scope_anchor(),
        ),
        "thread_descriptor.identity_anchors" => objects(identity_anchor()),
        _ => list(ITEM_160),
    })
}

/// `patch.target.<target>` for each of `PATCH_TARGETS` (the paths are `&'static str`).
const PATCH_TARGET_PATHS: [&str; 16] = [
    "patch.target.continuity.open_loops",
    "patch.target.continuity.top_priorities",
    "patch.target.continuity.active_constraints",
    "patch.target.continuity.active_concerns",
    "patch.target.continuity.drift_signals",
    "patch.target.continuity.working_hypotheses",
    "patch.target.continuity.long_horizon_commitments",
    "patch.target.continuity.session_trajectory",
    "patch.target.continuity.trailing_notes",
    "patch.target.continuity.curiosity_queue",
    "patch.target.continuity.negative_decisions",
    "patch.target.continuity.rationale_entries",
    "patch.target.stable_preferences",
    "patch.target.thread_descriptor.keywords",
    "patch.target.thread_descriptor.scope_anchors",
    "patch.target.thread_descriptor.identity_anchors",
];

/// The original's table, built once: it depends on nothing but the declarations.
static ORIGINAL: LazyLock<Vec<Limit>> = LazyLock::new(build_original);

/// `_validation_limits_table()`: the first part in its order, then the additional limits
/// sorted by field path.
pub fn original() -> &'static [Limit] {
    &ORIGINAL
}

fn build_original() -> Vec<Limit> {
    let mut limits = Vec::new();
    for &(path, category, value_type, model, field, per_item) in &ORIENTATION_FIELDS {
        let subfields = match value_type {
            "object_list" if field == "negative_decisions" => negative_decision(),
            "object_list" => rationale_entry(),
            _ => Vec::new(),
        };
        limits.push(field_limit(
            path, category, value_type, model, field, per_item, subfields, None,
        ));
        if path == "continuity.rationale_entries" {
            limits.push(limit(
                "continuity.related_documents",
                ORIENTATION,
                "object_list",
                Some(RELATED_DOCUMENTS_MAX_ENTRIES),
                None,
                None,
                related_documents(),
                None,
                Some("docs/payload-reference.md#continuityrelated_documents"),
            ));
        }
    }
    limits.push(simple(
        "patch.operations",
        "patch_targets",
        "operation_list",
        max_length(&PATCH_REQUEST, "operations"),
        None,
        vec![
            ("min_items", val(min_length(&PATCH_REQUEST, "operations"))),
            ("max_items", val(PATCH_MAX_OPERATIONS)),
            ("actions", strings(literal(&PATCH_OPERATION, "action"))),
        ],
    ));
    limits.extend(PATCH_TARGETS.iter().filter_map(|t| patch_target(t)));
    limits.extend([
        simple(
            "context.retrieve.max_tokens_estimate",
            "retrieval_budget",
            "integer_budget",
            None,
            None,
            vec![
                ("default", val(DEFAULT_MAX_TOKENS)),
                ("minimum", val(MIN_MAX_TOKENS)),
                ("maximum", val(MAX_MAX_TOKENS)),
            ],
        ),
        field_limit(
            "context.retrieve.continuity_max_capsules",
            "retrieval_budget",
            "integer_budget",
            &CONTEXT_RETRIEVE_REQUEST,
            "continuity_max_capsules",
            None,
            Vec::new(),
            None,
        ),
    ]);
    limits.extend(graph_caps(
        &[
            "context.retrieve.graph_context.nodes",
            "context.retrieve.graph_context.edges",
            "context.retrieve.graph_context.related_documents",
            "context.retrieve.graph_context.blockers",
        ],
        CONTEXT_GRAPH_CAPS,
        ["POST /v1/context/retrieve", "context.retrieve"],
    ));
    limits.extend(graph_caps(
        &[
            "continuity.read.startup.graph_summary.nodes",
            "continuity.read.startup.graph_summary.edges",
            "continuity.read.startup.graph_summary.related_documents",
            "continuity.read.startup.graph_summary.blockers",
        ],
        STARTUP_GRAPH_CAPS,
        ["POST /v1/continuity/read", "continuity.read"],
    ));
    limits.push(limit(
        "continuity.capsule_serialized_utf8",
        "capsule_write_cap",
        "serialized_bytes",
        None,
        Some(CAPSULE_SIZE_LIMIT_BYTES),
        None,
        vec![
            (
                "label",
                val(format!("{} KB", CAPSULE_SIZE_LIMIT_BYTES / 1024)),
            ),
            ("serialization", val("canonical_json_utf8")),
        ],
        None,
        None,
    ));
    let mut additional = additional();
    additional.sort_by_key(|l| l.field_path);
    limits.extend(additional);
    limits
}

/// The payload's string lists read from a declaration: path, model, field, per-item length.
#[rustfmt::skip]
static PAYLOAD_LISTS: [(&str, &Model, &str, Option<usize>); 17] = [
    ("continuity.active_concerns", &CONTINUITY_STATE, "active_concerns", Some(ITEM_160)),
    ("continuity.attention_policy.early_load", &ATTENTION_POLICY, "early_load", None),
    ("continuity.attention_policy.presence_bias_overrides", &ATTENTION_POLICY, "presence_bias_overrides", Some(ITEM_160)),
    ("continuity.curiosity_queue", &CONTINUITY_STATE, "curiosity_queue", Some(ITEM_120)),
    ("continuity.drift_signals", &CONTINUITY_STATE, "drift_signals", Some(ITEM_160)),
    ("continuity.long_horizon_commitments", &CONTINUITY_STATE, "long_horizon_commitments", Some(ITEM_160)),
    ("continuity.relationship_model.preferred_style", &RELATIONSHIP_MODEL, "preferred_style", Some(ITEM_80)),
    ("continuity.relationship_model.sensitivity_notes", &RELATIONSHIP_MODEL, "sensitivity_notes", Some(ITEM_120)),
    ("continuity.retrieval_hints.avoid", &RETRIEVAL_HINTS, "avoid", Some(ITEM_160)),
    ("continuity.retrieval_hints.must_include", &RETRIEVAL_HINTS, "must_include", Some(ITEM_160)),
    ("continuity.source.inputs", &CONTINUITY_SOURCE, "inputs", Some(ITEM_200)),
    ("continuity.thread_descriptor.keywords", &THREAD_DESCRIPTOR, "keywords", Some(ITEM_40)),
    ("continuity.trailing_notes", &CONTINUITY_STATE, "trailing_notes", Some(ITEM_160)),
    ("continuity.working_hypotheses", &CONTINUITY_STATE, "working_hypotheses", Some(ITEM_160)),
    // Lists of repository-relative paths.
    ("continuity.canonical_sources", &CONTINUITY_CAPSULE, "canonical_sources", None),
    ("continuity.retrieval_hints.load_next", &RETRIEVAL_HINTS, "load_next", None),
    ("continuity.thread_descriptor.scope_anchors", &THREAD_DESCRIPTOR, "scope_anchors", None),
];

/// The payload's scalars read from a declaration: path, value type, model, field.
#[rustfmt::skip]
static PAYLOAD_SCALARS: [(&str, &str, &Model, &str); 34] = [
    ("context.retrieve.continuity_mode", "enum", &CONTEXT_RETRIEVE_REQUEST, "continuity_mode"),
    ("context.retrieve.continuity_resilience_policy", "enum", &CONTEXT_RETRIEVE_REQUEST, "continuity_resilience_policy"),
    ("context.retrieve.continuity_selectors.subject_id", "string", &CONTINUITY_SELECTOR, "subject_id"),
    ("context.retrieve.continuity_selectors.subject_kind", "enum", &CONTINUITY_SELECTOR, "subject_kind"),
    ("context.retrieve.continuity_verification_policy", "enum", &CONTEXT_RETRIEVE_REQUEST, "continuity_verification_policy"),
    ("context.retrieve.limit", "number", &CONTEXT_RETRIEVE_REQUEST, "limit"),
    ("context.retrieve.subject_id", "string", &CONTEXT_RETRIEVE_REQUEST, "subject_id"),
    ("context.retrieve.subject_kind", "enum", &CONTEXT_RETRIEVE_REQUEST, "subject_kind"),
    ("context.retrieve.time_window_days", "number", &CONTEXT_RETRIEVE_REQUEST, "time_window_days"),
    ("continuity.confidence.continuity", "number", &CONFIDENCE, "continuity"),
    ("continuity.confidence.relationship_model", "number", &CONFIDENCE, "relationship_model"),
    ("continuity.freshness.freshness_class", "enum", &FRESHNESS, "freshness_class"),
    ("continuity.freshness.stale_after_seconds", "number", &FRESHNESS, "stale_after_seconds"),
    ("continuity.relationship_model.trust_level", "enum", &RELATIONSHIP_MODEL, "trust_level"),
    ("continuity.schema_version", "enum", &CONTINUITY_CAPSULE, "schema_version"),
    ("continuity.source.producer", "string", &CONTINUITY_SOURCE, "producer"),
    ("continuity.source.update_reason", "enum", &CONTINUITY_SOURCE, "update_reason"),
    ("continuity.subject_id", "string", &CONTINUITY_CAPSULE, "subject_id"),
    ("continuity.subject_kind", "enum", &CONTINUITY_CAPSULE, "subject_kind"),
    ("continuity.thread_descriptor.label", "string", &THREAD_DESCRIPTOR, "label"),
    ("continuity.upsert.commit_message", "string", &UPSERT_REQUEST, "commit_message"),
    ("continuity.upsert.idempotency_key", "string", &UPSERT_REQUEST, "idempotency_key"),
    ("continuity.upsert.lifecycle_transition", "enum", &UPSERT_REQUEST, "lifecycle_transition"),
    ("continuity.upsert.merge_mode", "enum", &UPSERT_REQUEST, "merge_mode"),
    ("continuity.upsert.subject_id", "string", &UPSERT_REQUEST, "subject_id"),
    ("continuity.upsert.subject_kind", "enum", &UPSERT_REQUEST, "subject_kind"),
    ("continuity.upsert.superseded_by", "string", &UPSERT_REQUEST, "superseded_by"),
    ("continuity.verification_kind", "enum", &CONTINUITY_CAPSULE, "verification_kind"),
    ("continuity.patch.commit_message", "string", &PATCH_REQUEST, "commit_message"),
    ("continuity.patch.subject_id", "string", &PATCH_REQUEST, "subject_id"),
    ("continuity.patch.subject_kind", "enum", &PATCH_REQUEST, "subject_kind"),
    ("continuity.freshness.expires_at", "utc_timestamp", &FRESHNESS, "expires_at"),
    ("continuity.updated_at", "utc_timestamp", &CONTINUITY_CAPSULE, "updated_at"),
    ("continuity.verified_at", "utc_timestamp", &CONTINUITY_CAPSULE, "verified_at"),
];

/// The original's `additional` limits (the rest of the public continuity and context
/// payload), before sorting.
fn additional() -> Vec<Limit> {
    const P: &str = "continuity_payload";
    let mut limits: Vec<Limit> = PAYLOAD_LISTS
        .iter()
        .map(|&(path, model, field, per_item)| {
            let subfields = match field {
                "canonical_sources" | "load_next" => vec![("pattern", val("repo_relative_path"))],
                "scope_anchors" => scope_anchor(),
                _ => Vec::new(),
            };
            field_limit(
                path,
                P,
                "string_list",
                model,
                field,
                per_item,
                subfields,
                None,
            )
        })
        .collect();
    limits.extend(PAYLOAD_SCALARS.iter().map(
        |&(path, value_type, model, field)| match value_type {
            "utc_timestamp" => utc_timestamp(path, None),
            _ => field_limit(path, P, value_type, model, field, None, Vec::new(), None),
        },
    ));
    limits.extend([
        simple(
            "context.retrieve.continuity_selectors",
            P,
            "object_list",
            max_length(&CONTEXT_RETRIEVE_REQUEST, "continuity_selectors"),
            None,
            vec![
                (
                    "subject_kind",
                    obj(vec![(
                        "allowed_values",
                        strings(literal(&CONTINUITY_SELECTOR, "subject_kind")),
                    )]),
                ),
                (
                    "subject_id",
                    min_max_length_of(&CONTINUITY_SELECTOR, "subject_id"),
                ),
            ],
        ),
        simple(
            "continuity.metadata",
            P,
            "object",
            Some(METADATA_MAX_KEYS),
            None,
            vec![
                ("max_items", val(METADATA_MAX_KEYS)),
                ("values", obj(vec![("scalar_only", val(true))])),
                (
                    "interaction_boundary_kind",
                    obj(vec![(
                        "allowed_values",
                        strings(INTERACTION_BOUNDARY_KINDS),
                    )]),
                ),
            ],
        ),
        simple(
            "continuity.stable_preferences",
            P,
            "object_list",
            max_length(&CONTINUITY_CAPSULE, "stable_preferences"),
            None,
            vec![
                ("tag", min_max_length_of(&STABLE_PREFERENCE, "tag")),
                ("content", min_max_length_of(&STABLE_PREFERENCE, "content")),
                ("timestamps", timestamps()),
                (
                    "subject_kind",
                    obj(vec![(
                        "allowed_values",
                        strings(&STABLE_PREFERENCE_SUBJECT_KINDS),
                    )]),
                ),
            ],
        ),
        field_limit(
            "continuity.thread_descriptor.identity_anchors",
            P,
            "object_list",
            &THREAD_DESCRIPTOR,
            "identity_anchors",
            None,
            identity_anchor(),
            None,
        ),
        utc_timestamp(
            "continuity.patch.updated_at",
            Some(vec!["POST /v1/continuity/patch", "continuity.patch"]),
        ),
    ]);
    limits
}

/// Every patch target has its `patch.target.*` limit, at its path (the original raises at
/// start-up if its table drifts from `PATCH_ALL_TARGETS`; here a test checks it).
pub fn covers_patch_targets() -> bool {
    PATCH_TARGETS.len() == PATCH_TARGET_PATHS.len()
        && PATCH_TARGETS
            .iter()
            .zip(PATCH_TARGET_PATHS)
            .all(|(target, path)| {
                path.strip_prefix("patch.target.") == Some(*target)
                    && patch_target(target).is_some_and(|l| l.field_path == path)
            })
}

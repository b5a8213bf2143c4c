//! The service-level capsule checks (digest §1, §9 path rule): the 400s the original raises
//! after pydantic accepted the body, in the original's order (the first failure is reported).

use serde_json::{Map, Value};

use super::error::ContinuityError;
use super::model::{Capsule, HealthStatus, RationaleStatus, SubjectKind, VerificationStatus};
use super::subject::{ALLOWED_TOP_LEVEL, normalize_subject_id};
use super::text::{dollar_body, posix_normpath, py_len, py_strip};
use super::timestamp::{LEGACY_TIMESTAMP_FLOOR, format_iso, parse_iso, require_utc};

/// Canonical JSON of a capsule may not exceed this many UTF-8 bytes.
pub const CAPSULE_SIZE_LIMIT_BYTES: usize = 20 * 1024;
pub const CAPSULE_SIZE_LIMIT_DETAIL: &str = "Continuity capsule exceeds 20 KB serialized UTF-8";

/// `metadata.interaction_boundary_kind` values.
pub const INTERACTION_BOUNDARY_KINDS: &[&str] = &[
    "person_switch",
    "thread_switch",
    "task_switch",
    "public_reply",
    "manual_checkpoint",
];

pub const RELATED_DOCUMENTS_MAX_ENTRIES: usize = 8;
const RELATED_DOCUMENTS_KEY_ORDER: [&str; 4] = ["path", "kind", "label", "relevance"];
pub const RELATED_DOCUMENTS_REQUIRED: [&str; 3] = ["path", "kind", "label"];
/// Keys that would embed a document's content in the entry.
pub const RELATED_DOCUMENTS_RESERVED: [&str; 7] = [
    "content", "body", "text", "excerpt", "markdown", "html", "payload",
];
pub const RELATED_DOCUMENTS_RELEVANCE: [&str; 3] = ["primary", "supporting", "background"];

/// At most this many `metadata` keys.
pub const METADATA_MAX_KEYS: usize = 12;

pub const RELATED_DOCUMENTS_TYPE_DETAIL: &str =
    "Invalid value type in continuity.related_documents[]";

fn invalid(detail: impl Into<String>) -> ContinuityError {
    ContinuityError::invalid(detail)
}

/// Python's `str(value)` for the scalars the legacy upgrade looks at.
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Null => "None".to_owned(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() => super::json::py_float_repr(f),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// Python truthiness.
pub(crate) fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// The original's `_upgrade_legacy_structured_entry_timestamps`, applied to every stored capsule
/// it loads: schema 1.0 (or none) becomes 1.1; `updated_at`/`verified_at` are re-printed in
/// `Z` form, borrowed from each other when one is missing, or set to the 1970 floor; legacy
/// `set_at` on structured entries becomes `created_at`/`updated_at`, and entries without
/// timestamps get the capsule's `updated_at`.
pub fn upgrade_legacy(payload: &Value) -> Value {
    let mut upgraded = payload.clone();
    let Some(object) = upgraded.as_object_mut() else {
        return upgraded;
    };
    let schema_version = if truthy(object.get("schema_version")) {
        py_strip(&py_str(&object["schema_version"])).to_owned()
    } else {
        String::new()
    };
    if schema_version.is_empty() || super::model::SCHEMA_VERSIONS.contains(&schema_version.as_str())
    {
        object.insert(
            "schema_version".into(),
            Value::from(super::model::SCHEMA_VERSION),
        );
    }

    enum State {
        Missing,
        Invalid,
        Valid(String),
    }
    let state = |object: &Map<String, Value>, field: &str| match object.get(field) {
        None | Some(Value::Null) => State::Missing,
        Some(raw) => {
            let text = py_str(raw);
            let text = py_strip(&text);
            if text.is_empty() {
                State::Missing
            } else {
                match parse_iso(text) {
                    Some(at) => State::Valid(format_iso(at)),
                    None => State::Invalid,
                }
            }
        }
    };
    let updated = state(object, "updated_at");
    let verified = state(object, "verified_at");
    let normalized_updated = match &updated {
        State::Valid(v) => Some(v.clone()),
        _ => None,
    };
    let resolved_updated = match (&updated, &verified) {
        (State::Valid(v), _) => v.clone(),
        (State::Missing, State::Valid(v)) => v.clone(),
        _ => LEGACY_TIMESTAMP_FLOOR.to_owned(),
    };
    let resolved_verified = match (&verified, &updated) {
        (State::Valid(v), _) => v.clone(),
        (State::Missing, State::Valid(v)) => v.clone(),
        _ => LEGACY_TIMESTAMP_FLOOR.to_owned(),
    };
    object.insert("updated_at".into(), Value::String(resolved_updated));
    object.insert("verified_at".into(), Value::String(resolved_verified));

    let upgrade_entry = |entry: &mut Value| {
        let Some(entry) = entry.as_object_mut() else {
            return;
        };
        if let Some(set_at) = entry.remove("set_at")
            && !set_at.is_null()
        {
            entry.entry("created_at").or_insert_with(|| set_at.clone());
            entry.entry("updated_at").or_insert(set_at);
        }
        if let Some(at) = &normalized_updated {
            entry
                .entry("created_at")
                .or_insert_with(|| Value::String(at.clone()));
            entry
                .entry("updated_at")
                .or_insert_with(|| Value::String(at.clone()));
        }
    };
    if let Some(continuity) = object.get_mut("continuity").and_then(Value::as_object_mut) {
        for field in ["negative_decisions", "rationale_entries"] {
            if let Some(items) = continuity.get_mut(field).and_then(Value::as_array_mut) {
                items.iter_mut().for_each(upgrade_entry);
            }
        }
    }
    if let Some(items) = object
        .get_mut("stable_preferences")
        .and_then(Value::as_array_mut)
    {
        items.iter_mut().for_each(upgrade_entry);
    }
    upgraded
}

/// §9's path rule for `canonical_sources` and `retrieval_hints.load_next`.
pub fn validate_repo_relative_paths(paths: &[String], field: &str) -> Result<(), ContinuityError> {
    for rel in paths {
        let body = dollar_body(rel);
        let pattern_ok = !body.is_empty()
            && body
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'));
        if rel.is_empty() || !pattern_ok {
            return Err(invalid(format!("Invalid repo-relative path in {field}")));
        }
        if let Err(reason) = safe_path(rel) {
            return Err(invalid(format!(
                "Invalid repo-relative path in {field}: {reason}"
            )));
        }
    }
    Ok(())
}

/// The original's `safe_path` checks, lexically (Noema has no repository directory).
pub fn safe_path(rel: &str) -> Result<(), String> {
    if rel.is_empty() || rel.starts_with('/') {
        return Err("Path must be a non-empty relative path".to_owned());
    }
    // pathlib's parts: empty and "." components dropped.
    let parts: Vec<&str> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if let Some(first) = parts.first()
        && !ALLOWED_TOP_LEVEL.contains(first)
    {
        return Err(format!("Top-level path not allowed: {first}"));
    }
    let mut depth: i64 = 0;
    for part in &parts {
        depth += if *part == ".." { -1 } else { 1 };
        if depth < 0 {
            return Err("Path escapes repository root".to_owned());
        }
    }
    Ok(())
}

fn contains_reserved_key(value: &Value) -> bool {
    match value {
        Value::Object(o) => o.iter().any(|(k, v)| {
            RELATED_DOCUMENTS_RESERVED.contains(&k.as_str()) || contains_reserved_key(v)
        }),
        Value::Array(items) => items.iter().any(contains_reserved_key),
        _ => false,
    }
}

fn is_valid_related_document_path(value: &str) -> bool {
    let body = dollar_body(value);
    if body.is_empty()
        || !body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
    {
        return false;
    }
    if value.starts_with('/') || value.contains("..") {
        return false;
    }
    let normalized = posix_normpath(value);
    !(normalized == ".." || normalized.starts_with("../") || normalized.starts_with('/'))
}

fn is_valid_kind(value: &str) -> bool {
    let body = dollar_body(value);
    let mut chars = body.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Every failure of a `related_documents` value with its precedence key (§1.4).
fn related_documents_failures(value: &Value) -> Vec<(Vec<i64>, String)> {
    let mut failures: Vec<(Vec<i64>, String)> = Vec::new();
    let mut fail = |key: Vec<i64>, detail: &str| failures.push((key, detail.to_owned()));
    if contains_reserved_key(value) {
        fail(
            vec![1],
            "Embedded content is not allowed in continuity.related_documents[]",
        );
    }
    let Value::Array(entries) = value else {
        fail(vec![3, -1], RELATED_DOCUMENTS_TYPE_DETAIL);
        return failures;
    };
    if entries.len() > RELATED_DOCUMENTS_MAX_ENTRIES {
        fail(vec![11], "Too many entries in continuity.related_documents");
    }
    type EntryKey = (String, String, String, Option<String>);
    let mut seen: Vec<(EntryKey, i64)> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let index = index as i64;
        let Value::Object(entry) = entry else {
            fail(
                vec![3, index, RELATED_DOCUMENTS_KEY_ORDER.len() as i64],
                RELATED_DOCUMENTS_TYPE_DETAIL,
            );
            continue;
        };
        let unknown = entry.keys().any(|k| {
            !RELATED_DOCUMENTS_KEY_ORDER.contains(&k.as_str())
                && !RELATED_DOCUMENTS_RESERVED.contains(&k.as_str())
        });
        if unknown {
            fail(
                vec![2, index, 0],
                "Unknown key in continuity.related_documents[]",
            );
        }
        for (rank, key) in RELATED_DOCUMENTS_REQUIRED.iter().enumerate() {
            if !entry.contains_key(*key) {
                fail(
                    vec![4, index, rank as i64],
                    "Missing required key in continuity.related_documents[]",
                );
            }
        }
        let mut candidate = true;
        let mut parts: Vec<String> = Vec::new();
        for (rank, key) in RELATED_DOCUMENTS_KEY_ORDER.iter().enumerate() {
            let rank = rank as i64;
            let Some(raw) = entry.get(*key) else {
                if *key == "relevance" {
                    parts.push(String::new());
                } else {
                    candidate = false;
                }
                continue;
            };
            let Value::String(raw) = raw else {
                fail(vec![3, index, rank], RELATED_DOCUMENTS_TYPE_DETAIL);
                candidate = false;
                continue;
            };
            if raw.is_empty() {
                fail(
                    vec![7, index, rank],
                    "Value too short in continuity.related_documents[]",
                );
                candidate = false;
                continue;
            }
            if raw != py_strip(raw) || py_strip(raw).is_empty() {
                fail(
                    vec![8, index, rank],
                    "Leading or trailing whitespace is not allowed in continuity.related_documents[]",
                );
                candidate = false;
                continue;
            }
            let len = py_len(raw);
            let rejected = match *key {
                "path" if len > 240 => {
                    Some((9, "Value too long in continuity.related_documents[].path"))
                }
                "path" if !is_valid_related_document_path(raw) => {
                    Some((5, "Invalid path in continuity.related_documents[].path"))
                }
                "kind" if len > 32 => {
                    Some((9, "Value too long in continuity.related_documents[].kind"))
                }
                "kind" if !is_valid_kind(raw) => {
                    Some((6, "Invalid kind format in continuity.related_documents[]"))
                }
                "label" if len > 120 => {
                    Some((9, "Value too long in continuity.related_documents[].label"))
                }
                "relevance" if len > 32 => Some((
                    9,
                    "Value too long in continuity.related_documents[].relevance",
                )),
                "relevance" if !RELATED_DOCUMENTS_RELEVANCE.contains(&raw.as_str()) => {
                    Some((6, "Invalid relevance in continuity.related_documents[]"))
                }
                _ => None,
            };
            if let Some((category, detail)) = rejected {
                fail(vec![category, index, rank], detail);
                candidate = false;
            }
            parts.push(raw.clone());
        }
        if candidate && parts.len() == 4 {
            let relevance = entry.contains_key("relevance").then(|| parts[3].clone());
            let key = (
                parts[0].clone(),
                parts[1].clone(),
                parts[2].clone(),
                relevance,
            );
            match seen.iter().find(|(k, _)| *k == key) {
                Some((_, first)) => {
                    fail(vec![10, index, *first], "Duplicate related_documents entry")
                }
                None => seen.push((key, index)),
            }
        }
    }
    failures
}

/// Write-time check of `continuity.related_documents` (present in the body): the failure
/// with the smallest (category, entry, key) wins.
pub fn validate_related_documents(value: &Value) -> Result<(), ContinuityError> {
    let failures = related_documents_failures(value);
    if let Some((_, detail)) = failures.into_iter().min_by(|a, b| a.0.cmp(&b.0)) {
        return Err(invalid(detail));
    }
    if value.is_null() {
        return Err(invalid(RELATED_DOCUMENTS_TYPE_DETAIL));
    }
    Ok(())
}

/// Read-time handling of a malformed stored `related_documents`: dropped, with a recovery
/// warning saying whether it carried embedded content.
pub fn sanitize_related_documents_on_read(payload: &Value) -> (Value, Vec<String>) {
    let Some(value) = payload
        .get("continuity")
        .and_then(Value::as_object)
        .and_then(|c| c.get("related_documents"))
    else {
        return (payload.clone(), Vec::new());
    };
    if related_documents_failures(value).is_empty() {
        return (payload.clone(), Vec::new());
    }
    let warning = if contains_reserved_key(value) {
        "related_documents_omitted_non_metadata"
    } else {
        "related_documents_omitted_invalid"
    };
    let mut sanitized = payload.clone();
    if let Some(continuity) = sanitized
        .get_mut("continuity")
        .and_then(Value::as_object_mut)
    {
        continuity.remove("related_documents");
    }
    (sanitized, vec![warning.to_owned()])
}

fn too_long(values: &[String], max: usize, detail: &str) -> Result<(), ContinuityError> {
    if values.iter().any(|v| py_len(v) > max) {
        return Err(invalid(detail));
    }
    Ok(())
}

fn bounded(values: &[String], max: usize, field: &str) -> Result<(), ContinuityError> {
    for value in values {
        let len = py_len(value);
        if len < 1 {
            return Err(invalid(format!("Value too short in {field}")));
        }
        if len > max {
            return Err(invalid(format!("Value too long in {field}")));
        }
    }
    Ok(())
}

fn bounded_one(value: &str, max: usize, field: &str) -> Result<(), ContinuityError> {
    bounded(std::slice::from_ref(&value.to_owned()), max, field)
}

fn optional_utc(value: &Option<String>, field: &str) -> Result<(), ContinuityError> {
    if let Some(value) = value {
        require_utc(value, field)?;
    }
    Ok(())
}

/// trailing_notes, curiosity_queue, negative_decisions and rationale_entries: the per-item
/// bounds the original checks in the service (400) rather than in the model.
fn validate_low_commitment_fields(capsule: &Capsule) -> Result<(), ContinuityError> {
    let c = &capsule.continuity;
    bounded(&c.trailing_notes, 160, "continuity.trailing_notes")?;
    bounded(&c.curiosity_queue, 120, "continuity.curiosity_queue")?;
    let mut seen: Vec<&str> = Vec::new();
    for nd in &c.negative_decisions {
        bounded_one(&nd.decision, 160, "continuity.negative_decisions.decision")?;
        bounded_one(
            &nd.rationale,
            240,
            "continuity.negative_decisions.rationale",
        )?;
        optional_utc(&nd.created_at, "continuity.negative_decisions[].created_at")?;
        optional_utc(&nd.updated_at, "continuity.negative_decisions[].updated_at")?;
        optional_utc(
            &nd.last_confirmed_at,
            "continuity.negative_decisions[].last_confirmed_at",
        )?;
        if seen.contains(&nd.decision.as_str()) {
            return Err(invalid(format!(
                "Duplicate negative_decisions decision: {}",
                nd.decision
            )));
        }
        seen.push(&nd.decision);
    }
    for entry in &c.rationale_entries {
        bounded_one(&entry.tag, 80, "continuity.rationale_entries[].tag")?;
        bounded_one(
            &entry.summary,
            320,
            "continuity.rationale_entries[].summary",
        )?;
        bounded_one(
            &entry.reasoning,
            560,
            "continuity.rationale_entries[].reasoning",
        )?;
        bounded(
            &entry.alternatives_considered,
            160,
            "continuity.rationale_entries[].alternatives_considered",
        )?;
        bounded(
            &entry.depends_on,
            120,
            "continuity.rationale_entries[].depends_on",
        )?;
        optional_utc(
            &entry.created_at,
            "continuity.rationale_entries[].created_at",
        )?;
        optional_utc(
            &entry.updated_at,
            "continuity.rationale_entries[].updated_at",
        )?;
        optional_utc(
            &entry.last_confirmed_at,
            "continuity.rationale_entries[].last_confirmed_at",
        )?;
    }
    Ok(())
}

/// `^(user|peer|thread|task):[a-z0-9._-]{1,120}$`.
fn is_scope_anchor(anchor: &str) -> bool {
    let body = dollar_body(anchor);
    let Some((kind, rest)) = body.split_once(':') else {
        return false;
    };
    SubjectKind::parse(kind).is_some()
        && (1..=120).contains(&rest.chars().count())
        && rest
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// `^[a-z][a-z0-9_-]{0,39}$`.
fn is_anchor_kind(kind: &str) -> bool {
    let body = dollar_body(kind);
    let mut chars = body.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && body.chars().count() <= 40
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// The descriptor rules; normalises keywords and identity anchors in place as the original does.
fn validate_thread_descriptor(capsule: &mut Capsule) -> Result<(), ContinuityError> {
    let kind = capsule.subject_kind;
    let Some(td) = capsule.thread_descriptor.as_mut() else {
        return Ok(());
    };
    if !kind.is_thread_like() {
        return Err(invalid(
            "thread_descriptor is only allowed for thread and task capsules",
        ));
    }
    let mut keywords: Vec<String> = Vec::new();
    for kw in &td.keywords {
        let kw = py_strip(&kw.to_lowercase()).to_owned();
        if !kw.is_empty() && !keywords.contains(&kw) {
            keywords.push(kw);
        }
    }
    td.keywords = keywords;
    if td.keywords.iter().any(|kw| py_len(kw) > 40) {
        return Err(invalid("Keyword must be 1-40 characters"));
    }
    for anchor in &td.scope_anchors {
        if !is_scope_anchor(anchor) {
            return Err(invalid(format!("Invalid scope_anchor format: {anchor}")));
        }
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    for anchor in td.identity_anchors.iter_mut() {
        anchor.kind = py_strip(&anchor.kind.to_lowercase()).to_owned();
        anchor.value = py_strip(&anchor.value).to_owned();
        if !is_anchor_kind(&anchor.kind) {
            return Err(invalid(format!(
                "Invalid identity_anchor kind: {}",
                anchor.kind
            )));
        }
        if !(1..=200).contains(&py_len(&anchor.value)) {
            return Err(invalid("identity_anchor value must be 1-200 characters"));
        }
        let key = (anchor.kind.clone(), anchor.value.clone());
        if seen.contains(&key) {
            return Err(invalid(format!(
                "Duplicate identity_anchor: ({}, {})",
                anchor.kind, anchor.value
            )));
        }
        seen.push(key);
    }
    Ok(())
}

/// The original's `_validate_capsule`: every service-level rule in its order, the in-place
/// normalisations it makes (schema 1.1, descriptor keywords and anchors), then the 20 KB cap.
/// Returns the canonical JSON.
pub fn validate_capsule(capsule: &mut Capsule) -> Result<String, ContinuityError> {
    capsule.schema_version = super::model::SCHEMA_VERSION.to_owned();
    require_utc(&capsule.updated_at, "updated_at")?;
    require_utc(&capsule.verified_at, "verified_at")?;
    if let Some(expires_at) = capsule
        .freshness
        .as_ref()
        .and_then(|f| f.expires_at.as_ref())
        && !expires_at.is_empty()
    {
        require_utc(expires_at, "freshness.expires_at")?;
    }
    too_long(
        &capsule.source.inputs,
        200,
        "Value too long in source.inputs",
    )?;
    let c = &capsule.continuity;
    for (field, values) in [
        ("top_priorities", &c.top_priorities),
        ("active_concerns", &c.active_concerns),
        ("active_constraints", &c.active_constraints),
        ("open_loops", &c.open_loops),
        ("drift_signals", &c.drift_signals),
        ("working_hypotheses", &c.working_hypotheses),
        ("long_horizon_commitments", &c.long_horizon_commitments),
    ] {
        too_long(values, 160, &format!("Value too long in {field}"))?;
    }
    too_long(
        &c.session_trajectory,
        80,
        "Value too long in continuity.session_trajectory",
    )?;
    validate_low_commitment_fields(capsule)?;
    let c = &capsule.continuity;
    if py_len(&c.stance_summary) > 240 {
        return Err(invalid("Value too long in continuity.stance_summary"));
    }
    if let Some(rm) = &c.relationship_model {
        too_long(
            &rm.preferred_style,
            80,
            "Value too long in relationship_model.preferred_style",
        )?;
        too_long(
            &rm.sensitivity_notes,
            120,
            "Value too long in relationship_model.sensitivity_notes",
        )?;
    }
    if let Some(ap) = &capsule.attention_policy {
        too_long(
            &ap.presence_bias_overrides,
            160,
            "Value too long in attention_policy.presence_bias_overrides",
        )?;
    }
    if let Some(hints) = &c.retrieval_hints {
        too_long(
            &hints.must_include,
            160,
            "Value too long in retrieval_hints.must_include",
        )?;
        too_long(&hints.avoid, 160, "Value too long in retrieval_hints.avoid")?;
        validate_repo_relative_paths(&hints.load_next, "retrieval_hints.load_next")?;
    }
    validate_repo_relative_paths(&capsule.canonical_sources, "canonical_sources")?;
    if capsule.metadata.len() > METADATA_MAX_KEYS {
        return Err(invalid("Too many metadata keys"));
    }
    if capsule
        .metadata
        .values()
        .any(|v| v.is_object() || v.is_array())
    {
        return Err(invalid("Metadata values must be scalar"));
    }
    match capsule
        .metadata
        .get("interaction_boundary_kind")
        .filter(|v| !v.is_null())
    {
        Some(kind) => {
            if capsule.source.update_reason != super::model::UpdateReason::InteractionBoundary {
                return Err(invalid(
                    "metadata.interaction_boundary_kind requires source.update_reason=interaction_boundary",
                ));
            }
            if !kind
                .as_str()
                .is_some_and(|k| INTERACTION_BOUNDARY_KINDS.contains(&k))
            {
                return Err(invalid("Invalid metadata.interaction_boundary_kind"));
            }
        }
        None if capsule.source.update_reason == super::model::UpdateReason::InteractionBoundary => {
            return Err(invalid(
                "metadata.interaction_boundary_kind is required when source.update_reason=interaction_boundary",
            ));
        }
        None => {}
    }
    if !capsule.stable_preferences.is_empty() {
        if !matches!(capsule.subject_kind, SubjectKind::User | SubjectKind::Peer) {
            return Err(invalid(
                "stable_preferences is only allowed for user and peer capsules",
            ));
        }
        let mut seen: Vec<&str> = Vec::new();
        for pref in &capsule.stable_preferences {
            optional_utc(&pref.created_at, "stable_preferences[].created_at")?;
            optional_utc(&pref.updated_at, "stable_preferences[].updated_at")?;
            optional_utc(
                &pref.last_confirmed_at,
                "stable_preferences[].last_confirmed_at",
            )?;
            if seen.contains(&pref.tag.as_str()) {
                return Err(invalid(format!(
                    "Duplicate stable_preferences tag: {}",
                    pref.tag
                )));
            }
            seen.push(&pref.tag);
        }
    }
    let entries = &capsule.continuity.rationale_entries;
    let mut seen: Vec<&str> = Vec::new();
    for entry in entries {
        if seen.contains(&entry.tag.as_str()) {
            return Err(invalid(format!(
                "Duplicate rationale_entries tag: {}",
                entry.tag
            )));
        }
        seen.push(&entry.tag);
    }
    for entry in entries {
        if let Some(target) = &entry.supersedes {
            if *target == entry.tag {
                return Err(invalid(format!(
                    "rationale_entries[].supersedes must not reference its own tag '{}'",
                    entry.tag
                )));
            }
            // The original indexes by tag with the last entry winning.
            let found = entries.iter().rev().find(|e| e.tag == *target);
            if found.is_none_or(|e| e.status != RationaleStatus::Superseded) {
                return Err(invalid(format!(
                    "rationale_entries[].supersedes references tag '{target}' which does not exist with status 'superseded'"
                )));
            }
        }
    }
    if let Some(docs) = &capsule.continuity.related_documents {
        validate_related_documents(docs)?;
    }
    validate_thread_descriptor(capsule)?;
    let canonical = capsule.canonical_json();
    if canonical.len() > CAPSULE_SIZE_LIMIT_BYTES {
        return Err(invalid(CAPSULE_SIZE_LIMIT_DETAIL));
    }
    Ok(canonical)
}

/// Rules for the revalidation-owned fields, checked on a final capsule that carries them.
pub fn validate_verification_state_and_health(capsule: &Capsule) -> Result<(), ContinuityError> {
    if let Some(state) = &capsule.verification_state {
        require_utc(
            &state.last_revalidated_at,
            "verification_state.last_revalidated_at",
        )?;
        too_long(
            &state.evidence_refs,
            200,
            "Value too long in verification_state.evidence_refs",
        )?;
        if state.status == VerificationStatus::Conflicted
            && state.conflict_summary.as_deref().is_none_or(str::is_empty)
        {
            return Err(invalid(
                "verification_state.conflict_summary is required when status=conflicted",
            ));
        }
    }
    if let Some(health) = &capsule.capsule_health {
        require_utc(&health.last_checked_at, "capsule_health.last_checked_at")?;
        too_long(
            &health.reasons,
            120,
            "Value too long in capsule_health.reasons",
        )?;
        if matches!(
            health.status,
            HealthStatus::Degraded | HealthStatus::Conflicted
        ) && health.reasons.is_empty()
        {
            return Err(invalid(
                "capsule_health.reasons is required when status is degraded or conflicted",
            ));
        }
    }
    Ok(())
}

/// Both checks together (`_final_capsule_payload` / `_normalize_compare_payload`); returns the
/// canonical JSON.
pub fn validate_final_capsule(capsule: &mut Capsule) -> Result<String, ContinuityError> {
    let canonical = validate_capsule(capsule)?;
    validate_verification_state_and_health(capsule)?;
    Ok(canonical)
}

/// A candidate capsule must name the request's subject (kind equal, keys equal).
pub fn validate_candidate_subject(
    kind: SubjectKind,
    subject_id: &str,
    candidate: &Capsule,
) -> Result<(), ContinuityError> {
    let mismatch = || invalid("Candidate capsule subject does not match request subject");
    if candidate.subject_kind != kind {
        return Err(mismatch());
    }
    if normalize_subject_id(&candidate.subject_id)? != normalize_subject_id(subject_id)? {
        return Err(mismatch());
    }
    Ok(())
}

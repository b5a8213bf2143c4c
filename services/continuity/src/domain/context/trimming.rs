//! Capsule trimming to a token budget (digest §10.1): phase 1 drops whole optional fields in a
//! fixed order, phase 2 truncates the orientation fields; each step runs only while the whole
//! capsule is still over budget, and every removal is recorded by its dotted path.

use crate::domain::json::{Json, JsonObject};

use super::render::estimate_tokens;

/// Phase 1: dropped whole, in this order.
pub const PHASE1_DROPS: [&str; 14] = [
    "metadata",
    "canonical_sources",
    "freshness",
    "attention_policy.presence_bias_overrides",
    "continuity.relationship_model.sensitivity_notes",
    "continuity.relationship_model.preferred_style",
    "continuity.retrieval_hints.avoid",
    "continuity.retrieval_hints.load_next",
    "continuity.trailing_notes",
    "continuity.curiosity_queue",
    "continuity.rationale_entries",
    "continuity.negative_decisions",
    "continuity.working_hypotheses",
    "stable_preferences",
];

/// Phase 2: truncated, in this order (fields of `continuity`).
const PHASE2_STEPS: [&str; 9] = [
    "retrieval_hints.must_include",
    "relationship_model",
    "long_horizon_commitments",
    "stance_summary",
    "drift_signals",
    "open_loops",
    "active_constraints",
    "active_concerns",
    "top_priorities",
];

/// Orientation lists kept as `[]` once phase 2 has visited them.
const KEPT_AS_EMPTY: [&str; 5] = [
    "drift_signals",
    "open_loops",
    "active_constraints",
    "active_concerns",
    "top_priorities",
];

/// A capsule is worth returning only with one of these non-empty.
const MINIMUM_FIELDS: [&str; 6] = [
    "top_priorities",
    "active_concerns",
    "active_constraints",
    "open_loops",
    "drift_signals",
    "stance_summary",
];

/// What trimming made of a capsule.
#[derive(Debug, Clone, PartialEq)]
pub struct Trimmed {
    /// The trimmed capsule, `None` when it cannot be returned within the budget.
    pub capsule: Option<JsonObject>,
    /// Dotted paths of what was dropped or truncated, in order.
    pub trimmed_fields: Vec<String>,
}

/// `_truncate_string`: `""` for no budget, unchanged when it fits `4t` characters, dots when
/// `4t ≤ 3`, else the first `4t − 3` characters and `...`.
pub fn truncate_string(value: &str, max_tokens: i64) -> String {
    if max_tokens <= 0 {
        return String::new();
    }
    let max_chars = (max_tokens * 4) as usize;
    if value.chars().count() <= max_chars {
        return value.to_owned();
    }
    if max_chars <= 3 {
        return ".".repeat(max_chars);
    }
    let mut out: String = value.chars().take(max_chars - 3).collect();
    out.push_str("...");
    out
}

/// `_truncate_list`: pops items from the end until the rendered list fits; then (as the
/// original does, though it can no longer be over budget) shortens the last item.
pub fn truncate_list(items: &[Json], max_tokens: i64) -> Vec<Json> {
    if max_tokens <= 0 {
        return Vec::new();
    }
    let mut out = items.to_vec();
    let fits = |list: &Vec<Json>| estimate_tokens(&Json::Array(list.clone())) <= max_tokens;
    while !out.is_empty() && !fits(&out) {
        out.pop();
    }
    while !out.is_empty() && !fits(&out) {
        let last = out.last().and_then(Json::as_str).unwrap_or_default();
        let shortened = truncate_string(last, max_tokens);
        if shortened.is_empty() || shortened == last {
            out.pop();
        } else if let Some(slot) = out.last_mut() {
            *slot = Json::String(shortened);
        }
    }
    out
}

fn fits(payload: &JsonObject, max_tokens: i64) -> bool {
    estimate_tokens(&Json::Object(payload.clone())) <= max_tokens
}

/// The object at a dotted path's parent, if every step is an object.
fn parent_mut<'a>(
    payload: &'a mut JsonObject,
    dotted: &'a str,
) -> Option<(&'a mut JsonObject, &'a str)> {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let last = parts.pop()?;
    let mut cur = payload;
    for part in parts {
        match cur.get_mut(part) {
            Some(Json::Object(next)) => cur = next,
            _ => return None,
        }
    }
    Some((cur, last))
}

fn drop_nested(payload: &mut JsonObject, dotted: &str) -> bool {
    match parent_mut(payload, dotted) {
        Some((parent, key)) => parent.remove(key).is_some(),
        None => false,
    }
}

fn truthy(value: Option<&Json>) -> bool {
    match value {
        None | Some(Json::Null) | Some(Json::Bool(false)) => false,
        Some(Json::String(s)) => !s.is_empty(),
        Some(Json::Array(items)) => !items.is_empty(),
        Some(Json::Object(o)) => !o.is_empty(),
        Some(Json::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        Some(Json::Bool(true)) => true,
    }
}

/// `_trim_capsule`: trims a capsule dump to `max_tokens` (which may be negative when the trust
/// and salience blocks already exceed the allocation).
pub fn trim_capsule(capsule: &JsonObject, max_tokens: i64) -> Trimmed {
    let mut payload = capsule.clone();
    let mut dropped: Vec<String> = Vec::new();
    for dotted in PHASE1_DROPS {
        if fits(&payload, max_tokens) {
            break;
        }
        if drop_nested(&mut payload, dotted) {
            dropped.push(dotted.to_owned());
        }
    }
    if !matches!(payload.get("continuity"), Some(Json::Object(_))) {
        return Trimmed {
            capsule: None,
            trimmed_fields: dropped,
        };
    }
    // Python's floor division, then at least one token.
    let item_budget = max_tokens.div_euclid(4).max(1);
    for field in PHASE2_STEPS {
        if fits(&payload, max_tokens) {
            break;
        }
        let Some(Json::Object(continuity)) = payload.get_mut("continuity") else {
            break;
        };
        phase2_step(continuity, field, item_budget, &mut dropped);
        if KEPT_AS_EMPTY.contains(&field) && !truthy(continuity.get(field)) {
            continuity.insert(field, Json::Array(Vec::new()));
        }
    }
    let Some(Json::Object(continuity)) = payload.get("continuity") else {
        return Trimmed {
            capsule: None,
            trimmed_fields: dropped,
        };
    };
    let minimum = MINIMUM_FIELDS
        .iter()
        .any(|name| truthy(continuity.get(name)));
    if !minimum || !fits(&payload, max_tokens) {
        return Trimmed {
            capsule: None,
            trimmed_fields: dropped,
        };
    }
    Trimmed {
        capsule: Some(payload),
        trimmed_fields: dropped,
    }
}

fn phase2_step(continuity: &mut JsonObject, field: &str, budget: i64, dropped: &mut Vec<String>) {
    let dotted = format!("continuity.{field}");
    match field {
        "retrieval_hints.must_include" => {
            let Some(Json::Object(hints)) = continuity.get_mut("retrieval_hints") else {
                return;
            };
            let before = match hints.get("must_include") {
                Some(Json::Array(items)) => items.clone(),
                _ => Vec::new(),
            };
            let after = truncate_list(&before, budget);
            if after.is_empty() {
                hints.remove("must_include");
                if !before.is_empty() {
                    dropped.push(dotted);
                }
            } else {
                let shorter = after.len() < before.len();
                hints.insert("must_include", Json::Array(after));
                if shorter {
                    dropped.push(dotted);
                }
            }
        }
        "relationship_model" => {
            let Some(Json::Object(model)) = continuity.get_mut("relationship_model") else {
                return;
            };
            if model.get("trust_level").is_some_and(|v| !v.is_null()) {
                model.remove("trust_level");
                dropped.push("continuity.relationship_model.trust_level".to_owned());
            } else if let Some(first) = model.keys().min().cloned() {
                model.remove(&first);
                dropped.push(format!("continuity.relationship_model.{first}"));
            }
            if model.is_empty() {
                continuity.remove("relationship_model");
            }
        }
        "long_horizon_commitments" => {
            let Some(Json::Array(current)) = continuity.get(field) else {
                return;
            };
            let before = current.len();
            let after = truncate_list(current, budget);
            if after.len() < before {
                dropped.push(dotted);
            }
            if after.is_empty() {
                continuity.remove(field);
            } else {
                continuity.insert(field, Json::Array(after));
            }
        }
        "stance_summary" => {
            let before = match continuity.get(field) {
                None => String::new(),
                Some(Json::String(s)) => s.clone(),
                Some(other) => super::render::py_str(other),
            };
            let after = truncate_string(&before, budget);
            if after != before {
                dropped.push(dotted);
            }
            continuity.insert(field, Json::String(after));
        }
        _ => {
            let Some(Json::Array(current)) = continuity.get(field) else {
                return;
            };
            let before = current.len();
            let after = truncate_list(current, budget);
            if after.len() < before {
                dropped.push(dotted);
            }
            continuity.insert(field, Json::Array(after));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<Json> {
        items.iter().map(|s| Json::from(*s)).collect()
    }

    #[test]
    fn strings_truncate_to_four_characters_per_token() {
        assert_eq!(truncate_string("abcdefghij", 0), "");
        assert_eq!(truncate_string("abcdefgh", 2), "abcdefgh");
        assert_eq!(truncate_string("abcdefghij", 2), "abcde...");
        assert_eq!(truncate_string("abcdefghij", 1), "a...");
    }

    #[test]
    fn lists_pop_from_the_end_until_they_fit() {
        // "- aaaa\n- bbbb\n- cccc" is 20 chars (5 tokens); two items are 13 chars (4 tokens).
        let items = strings(&["aaaa", "bbbb", "cccc"]);
        assert_eq!(truncate_list(&items, 5), items);
        assert_eq!(truncate_list(&items, 4), strings(&["aaaa", "bbbb"]));
        assert_eq!(truncate_list(&items, 2), strings(&["aaaa"]));
        assert_eq!(
            truncate_list(&strings(&["a much longer item"]), 1),
            Vec::<Json>::new()
        );
    }
}

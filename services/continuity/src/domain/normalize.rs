//! Write-path normalisation (digest §4.2) and structured-entry timestamp stamping (§1.6).

use serde_json::Value;

use super::model::{Capsule, NegativeDecision, RationaleEntry, StablePreference};
use super::text::py_strip;
use super::validation::upgrade_legacy;

/// The continuity string lists that are trimmed, emptied and de-duplicated, in order.
pub const NORMALIZABLE_STRING_LISTS: [&str; 10] = [
    "top_priorities",
    "active_concerns",
    "active_constraints",
    "open_loops",
    "drift_signals",
    "working_hypotheses",
    "long_horizon_commitments",
    "session_trajectory",
    "trailing_notes",
    "curiosity_queue",
];

/// The named continuity string list of a capsule.
pub fn string_list_mut<'a>(capsule: &'a mut Capsule, field: &str) -> Option<&'a mut Vec<String>> {
    let c = &mut capsule.continuity;
    Some(match field {
        "top_priorities" => &mut c.top_priorities,
        "active_concerns" => &mut c.active_concerns,
        "active_constraints" => &mut c.active_constraints,
        "open_loops" => &mut c.open_loops,
        "drift_signals" => &mut c.drift_signals,
        "working_hypotheses" => &mut c.working_hypotheses,
        "long_horizon_commitments" => &mut c.long_horizon_commitments,
        "session_trajectory" => &mut c.session_trajectory,
        "trailing_notes" => &mut c.trailing_notes,
        "curiosity_queue" => &mut c.curiosity_queue,
        _ => return None,
    })
}

/// strip → drop empties → first-wins dedup on one list, reporting each step that changed it.
fn normalize_strings(items: &mut Vec<String>, target: &str, applied: &mut Vec<String>) {
    let stripped: Vec<String> = items.iter().map(|s| py_strip(s).to_owned()).collect();
    if stripped != *items {
        applied.push(format!("strip:{target}"));
        *items = stripped;
    }
    let before = items.len();
    items.retain(|s| !s.is_empty());
    if items.len() != before {
        applied.push(format!("drop_empty:{target}"));
    }
    let mut seen: Vec<String> = Vec::with_capacity(items.len());
    let before = items.len();
    items.retain(|s| {
        if seen.contains(s) {
            false
        } else {
            seen.push(s.clone());
            true
        }
    });
    if items.len() != before {
        applied.push(format!("dedup:{target}"));
    }
}

/// Keeps the last item of each identity, at its original position (the original's
/// `dict[identity] = index` then `sorted(indices)`).
fn dedup_last_wins<T: Clone>(items: &mut Vec<T>, identity: impl Fn(&T) -> String) -> bool {
    let keys: Vec<String> = items.iter().map(&identity).collect();
    let keep: Vec<bool> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| !keys[i + 1..].contains(k))
        .collect();
    if keep.iter().all(|k| *k) {
        return false;
    }
    let mut index = 0;
    items.retain(|_| {
        let kept = keep[index];
        index += 1;
        kept
    });
    true
}

/// The original's `_normalize_capsule_fields`: mutates the capsule and returns
/// `normalizations_applied` in the order the checks run.
pub fn normalize_capsule(capsule: &mut Capsule) -> Vec<String> {
    let mut applied = Vec::new();
    for field in NORMALIZABLE_STRING_LISTS {
        if let Some(items) = string_list_mut(capsule, field) {
            normalize_strings(items, &format!("continuity.{field}"), &mut applied);
        }
    }
    if !capsule.canonical_sources.is_empty() {
        normalize_strings(
            &mut capsule.canonical_sources,
            "canonical_sources",
            &mut applied,
        );
    }
    if !capsule.stable_preferences.is_empty() {
        let mut stripped = false;
        for pref in capsule.stable_preferences.iter_mut() {
            let tag = py_strip(&pref.tag).to_owned();
            let content = py_strip(&pref.content).to_owned();
            if tag != pref.tag || content != pref.content {
                pref.tag = tag;
                pref.content = content;
                stripped = true;
            }
        }
        if stripped {
            applied.push("strip:stable_preferences".to_owned());
        }
        if dedup_last_wins(&mut capsule.stable_preferences, |p| p.tag.clone()) {
            applied.push("dedup:stable_preferences".to_owned());
        }
    }
    let c = &mut capsule.continuity;
    if !c.rationale_entries.is_empty() {
        let mut stripped = false;
        for entry in c.rationale_entries.iter_mut() {
            let tag = py_strip(&entry.tag).to_owned();
            if tag != entry.tag {
                entry.tag = tag;
                stripped = true;
            }
        }
        if stripped {
            applied.push("strip:rationale_entries.tag".to_owned());
        }
        if dedup_last_wins(&mut c.rationale_entries, |e| e.tag.clone()) {
            applied.push("dedup:rationale_entries".to_owned());
        }
    }
    if !c.negative_decisions.is_empty() {
        let mut stripped = false;
        for nd in c.negative_decisions.iter_mut() {
            let decision = py_strip(&nd.decision).to_owned();
            let rationale = py_strip(&nd.rationale).to_owned();
            if decision != nd.decision || rationale != nd.rationale {
                nd.decision = decision;
                nd.rationale = rationale;
                stripped = true;
            }
        }
        if stripped {
            applied.push("strip:negative_decisions".to_owned());
        }
        if dedup_last_wins(&mut c.negative_decisions, |n| n.decision.clone()) {
            applied.push("dedup:negative_decisions".to_owned());
        }
    }
    applied
}

/// A structured entry's timestamps and the fields that decide whether it changed.
trait Stamped {
    fn identity(&self) -> &str;
    /// The content fields, compared as JSON values.
    fn content(&self) -> Vec<Value>;
    fn stamps(
        &mut self,
    ) -> (
        &mut Option<String>,
        &mut Option<String>,
        &mut Option<String>,
    );
}

impl Stamped for StablePreference {
    fn identity(&self) -> &str {
        &self.tag
    }
    fn content(&self) -> Vec<Value> {
        vec![self.tag.clone().into(), self.content.clone().into()]
    }
    fn stamps(
        &mut self,
    ) -> (
        &mut Option<String>,
        &mut Option<String>,
        &mut Option<String>,
    ) {
        (
            &mut self.created_at,
            &mut self.updated_at,
            &mut self.last_confirmed_at,
        )
    }
}

impl Stamped for RationaleEntry {
    fn identity(&self) -> &str {
        &self.tag
    }
    fn content(&self) -> Vec<Value> {
        vec![
            self.tag.clone().into(),
            self.kind.as_str().into(),
            self.status.as_str().into(),
            self.summary.clone().into(),
            self.reasoning.clone().into(),
            self.alternatives_considered.clone().into(),
            self.depends_on.clone().into(),
            self.supersedes.clone().map_or(Value::Null, Value::from),
        ]
    }
    fn stamps(
        &mut self,
    ) -> (
        &mut Option<String>,
        &mut Option<String>,
        &mut Option<String>,
    ) {
        (
            &mut self.created_at,
            &mut self.updated_at,
            &mut self.last_confirmed_at,
        )
    }
}

impl Stamped for NegativeDecision {
    fn identity(&self) -> &str {
        &self.decision
    }
    fn content(&self) -> Vec<Value> {
        vec![self.decision.clone().into(), self.rationale.clone().into()]
    }
    fn stamps(
        &mut self,
    ) -> (
        &mut Option<String>,
        &mut Option<String>,
        &mut Option<String>,
    ) {
        (
            &mut self.created_at,
            &mut self.updated_at,
            &mut self.last_confirmed_at,
        )
    }
}

/// A stored entry read back raw (the original reads the stored JSON, not a model).
struct StoredEntry<'a>(&'a serde_json::Map<String, Value>);

impl StoredEntry<'_> {
    fn text(&self, field: &str) -> Option<String> {
        match self.0.get(field) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        }
    }

    fn field(&self, field: &str) -> Value {
        self.0.get(field).cloned().unwrap_or(Value::Null)
    }
}

fn stamp_list<T: Stamped>(
    items: &mut [T],
    stored: &[Value],
    content_fields: &[&str],
    identity_field: &str,
    at: &str,
) {
    let mut by_identity: Vec<(String, StoredEntry<'_>)> = Vec::new();
    for entry in stored.iter().filter_map(Value::as_object) {
        if let Some(Value::String(identity)) = entry.get(identity_field)
            && !identity.is_empty()
        {
            // Later stored entries with the same identity replace earlier ones.
            by_identity.retain(|(k, _)| k != identity);
            by_identity.push((identity.clone(), StoredEntry(entry)));
        }
    }
    for item in items.iter_mut() {
        let stored = by_identity
            .iter()
            .find(|(k, _)| k == item.identity())
            .map(|(_, e)| e);
        let changed = match stored {
            None => true,
            Some(stored) => {
                let incoming = item.content();
                let previous: Vec<Value> = content_fields.iter().map(|f| stored.field(f)).collect();
                !incoming
                    .iter()
                    .zip(&previous)
                    .all(|(a, b)| super::json::py_eq(a, b))
            }
        };
        let created = match stored {
            Some(stored) => stored
                .text("created_at")
                .or_else(|| stored.text("updated_at"))
                .unwrap_or_else(|| at.to_owned()),
            None => at.to_owned(),
        };
        let updated = if changed {
            at.to_owned()
        } else {
            stored
                .and_then(|s| s.text("updated_at"))
                .unwrap_or_else(|| created.clone())
        };
        let (created_at, updated_at, last_confirmed_at) = item.stamps();
        let confirmed = match last_confirmed_at.take() {
            Some(explicit) => Some(explicit),
            None => stored.and_then(|s| match s.0.get("last_confirmed_at") {
                Some(Value::String(v)) => Some(v.clone()),
                _ => None,
            }),
        };
        *created_at = Some(created);
        *updated_at = Some(updated);
        *last_confirmed_at = confirmed;
    }
}

/// §1.6: stamps `created_at`/`updated_at`/`last_confirmed_at` on stable preferences, rationale
/// entries and negative decisions against the stored capsule (raw, legacy-upgraded), with
/// `at` the capsule's new `updated_at`. Caller-sent created/updated values are overwritten.
pub fn stamp_structured_entries(capsule: &mut Capsule, stored: Option<&Value>, at: &str) {
    let stored = upgrade_legacy(stored.unwrap_or(&Value::Object(Default::default())));
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let stored_continuity = stored.get("continuity").filter(|c| c.is_object());
    stamp_list(
        &mut capsule.stable_preferences,
        &list(stored.get("stable_preferences")),
        &["tag", "content"],
        "tag",
        at,
    );
    stamp_list(
        &mut capsule.continuity.rationale_entries,
        &list(stored_continuity.and_then(|c| c.get("rationale_entries"))),
        &[
            "tag",
            "kind",
            "status",
            "summary",
            "reasoning",
            "alternatives_considered",
            "depends_on",
            "supersedes",
        ],
        "tag",
        at,
    );
    stamp_list(
        &mut capsule.continuity.negative_decisions,
        &list(stored_continuity.and_then(|c| c.get("negative_decisions"))),
        &["decision", "rationale"],
        "decision",
        at,
    );
}

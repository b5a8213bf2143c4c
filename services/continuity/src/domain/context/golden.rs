//! Golden tests of the retrieve algorithm (issue 16's Done-when). Every expected value is
//! derived by hand from the digest's rules (§7.1, §8.1, §10, §10.1); the arithmetic is written
//! next to each case so a reader can check it without running anything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use time::OffsetDateTime;
use time::macros::datetime;

use crate::domain::error::ContinuityError;
use crate::domain::json::{Json, JsonObject};
use crate::domain::model::{Capsule, SubjectKind};

use super::render::{estimate_tokens, render};
use super::request::RetrieveRequest;
use super::selection::{Resolution, Selection, Selector};
use super::state::{SelectorSource, continuity_state};
use super::trimming::trim_capsule;

const NOW: OffsetDateTime = datetime!(2026-01-02 00:00:00 UTC);

fn object(text: &str) -> JsonObject {
    match Json::parse(text.as_bytes()).unwrap() {
        Json::Object(o) => o,
        _ => panic!("not an object"),
    }
}

fn strings(value: &[&str]) -> Vec<String> {
    value.iter().map(|s| s.to_string()).collect()
}

// ---- §10.1 trimming, phase 1 ----

/// `metadata: k: vvvvvvvv` 21, `canonical_sources: - docs/a.md` 30,
/// `freshness: freshness_class: durable` 35, and the continuity line
/// `continuity: top_priorities: - aaaa\n- bbbb\nstance_summary: ssssssss\nopen_loops: - oooo`
/// 12+16+13+1+24+1+18 = 85; with 3 separating newlines 174 chars = 44 tokens.
/// Without metadata (21+1) 152 = 38; without canonical_sources (30+1) 121 = 31; without
/// freshness (35+1) 85 = 22.
const PHASE1: &str = r#"{"metadata":{"k":"vvvvvvvv"},"canonical_sources":["docs/a.md"],
    "freshness":{"freshness_class":"durable"},
    "continuity":{"top_priorities":["aaaa","bbbb"],"stance_summary":"ssssssss","open_loops":["oooo"]}}"#;

#[test]
fn phase1_drops_optional_fields_one_at_a_time_until_the_capsule_fits() {
    let capsule = object(PHASE1);
    assert_eq!(estimate_tokens(&Json::Object(capsule.clone())), 44);
    let at = |budget| trim_capsule(&capsule, budget);

    let fits = at(44);
    assert_eq!(fits.capsule.as_ref(), Some(&capsule));
    assert!(fits.trimmed_fields.is_empty());

    let one = at(38);
    assert_eq!(one.trimmed_fields, strings(&["metadata"]));
    assert!(!one.capsule.unwrap().contains_key("metadata"));

    assert_eq!(
        at(31).trimmed_fields,
        strings(&["metadata", "canonical_sources"])
    );
    let three = at(22);
    assert_eq!(
        three.trimmed_fields,
        strings(&["metadata", "canonical_sources", "freshness"])
    );
    assert_eq!(
        render(&Json::Object(three.capsule.unwrap())),
        "continuity: top_priorities: - aaaa\n- bbbb\nstance_summary: ssssssss\nopen_loops: - oooo"
    );
}

/// At 21 tokens phase 1 has nothing left after freshness (22 tokens), so phase 2 runs with
/// b = max(1, 21 // 4) = 5: stance (8 chars ≤ 20) and the short lists are unchanged, but each
/// visited orientation list that is missing is set to `[]`, which adds
/// `\ndrift_signals: ` 16, `\nactive_constraints: ` 21, `\nactive_concerns: ` 18: 85 + 55
/// = 140 chars = 35 tokens > 21, so the capsule is refused; only the phase-1 drops were
/// recorded.
#[test]
fn phase2_keeps_orientation_lists_as_empty_lists_even_when_that_grows_the_capsule() {
    let trimmed = trim_capsule(&object(PHASE1), 21);
    assert_eq!(trimmed.capsule, None);
    assert_eq!(
        trimmed.trimmed_fields,
        strings(&["metadata", "canonical_sources", "freshness"])
    );
}

/// Every phase-1 field present, then a budget of 1 token (b = 1): all fourteen drops in the
/// digest's order, the emptied relationship_model removed without a record, and in phase 2
/// `top_priorities` (`- pppp`, 2 tokens > 1) popped to `[]` and recorded. `stance_summary`
/// `s` keeps the capsule worth returning, but it cannot fit one token: refused.
#[test]
fn each_trimming_step_runs_in_the_digests_order() {
    let capsule = object(
        r#"{"metadata":{"a":1},"canonical_sources":["x"],"freshness":{"freshness_class":"durable"},
        "attention_policy":{"early_load":[],"presence_bias_overrides":["p"]},
        "continuity":{"relationship_model":{"sensitivity_notes":["n"],"preferred_style":["s"]},
          "retrieval_hints":{"avoid":["a"],"load_next":["l"]},"trailing_notes":["t"],
          "curiosity_queue":["c"],"rationale_entries":[{"tag":"r"}],"negative_decisions":[{"decision":"d"}],
          "working_hypotheses":["w"],"top_priorities":["pppp"],"stance_summary":"s"},
        "stable_preferences":[{"tag":"x"}]}"#,
    );
    let trimmed = trim_capsule(&capsule, 1);
    assert_eq!(trimmed.capsule, None);
    assert_eq!(
        trimmed.trimmed_fields,
        strings(&[
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
            "continuity.top_priorities",
        ])
    );
}

// ---- §10.1 trimming, phase 2 ----

/// `continuity: ` 12 + `retrieval_hints: must_include: - mmmm\n- nnnn` 44 +
/// `\nrelationship_model: trust_level: t\npreferred_style: - x` 56 +
/// `\nlong_horizon_commitments: - llll` 33 + `\nstance_summary: ` + 20×s 37 +
/// `\ndrift_signals: ` 16 + `\nopen_loops: ` 13 + `\nactive_constraints: ` 21 +
/// `\nactive_concerns: ` 18 + `\ntop_priorities: - pppp` 23 = 273 chars = 69 tokens.
const PHASE2: &str = r#"{"continuity":{"retrieval_hints":{"must_include":["mmmm","nnnn"]},
    "relationship_model":{"trust_level":"t","preferred_style":["x"]},
    "long_horizon_commitments":["llll"],"stance_summary":"ssssssssssssssssssss",
    "drift_signals":[],"open_loops":[],"active_constraints":[],"active_concerns":[],
    "top_priorities":["pppp"]}}"#;

#[test]
fn phase1_runs_before_phase2_and_phase2_removes_trust_level_first() {
    let capsule = object(PHASE2);
    assert_eq!(estimate_tokens(&Json::Object(capsule.clone())), 69);
    // Budget 65: phase 1's `continuity.relationship_model.preferred_style`
    // (`\npreferred_style: - x`, 21 chars) leaves 252 chars = 63 tokens: fits, done.
    let trimmed = trim_capsule(&capsule, 65);
    assert_eq!(
        trimmed.trimmed_fields,
        strings(&["continuity.relationship_model.preferred_style"])
    );
    let kept = Json::Object(trimmed.capsule.unwrap());
    let continuity = kept.get("continuity").unwrap();
    assert_eq!(
        continuity.get("relationship_model").unwrap(),
        &Json::Object(object(r#"{"trust_level":"t"}"#))
    );
    // Budget 62, b = 15: 63 > 62 after phase 1; must_include (13 chars, 4 tokens) is kept;
    // trust_level goes, and the emptied relationship_model with it
    // (`\nrelationship_model: trust_level: t`, 35 chars): 217 chars = 55 tokens, fits.
    let trimmed = trim_capsule(&capsule, 62);
    assert_eq!(
        trimmed.trimmed_fields,
        strings(&[
            "continuity.relationship_model.preferred_style",
            "continuity.relationship_model.trust_level"
        ])
    );
    let kept = Json::Object(trimmed.capsule.unwrap());
    assert_eq!(
        kept.get("continuity").unwrap().get("relationship_model"),
        None
    );
    assert_eq!(estimate_tokens(&kept), 55);
}

#[test]
fn phase2_truncates_lists_and_strings_to_a_quarter_of_the_budget() {
    // Budget 8: phase 1 drops preferred_style; then b = 2 (8 chars): must_include
    // `- mmmm\n- nnnn` (4 tokens) → `["mmmm"]` (2 tokens); trust_level removed; long_horizon
    // `- llll` (2 tokens) kept; stance 20 chars → 5 chars + `...`; the empty lists stay;
    // top_priorities fits. Still far over 8: refused, the four changes recorded in order.
    let trimmed = trim_capsule(&object(PHASE2), 8);
    assert_eq!(trimmed.capsule, None);
    assert_eq!(
        trimmed.trimmed_fields,
        strings(&[
            "continuity.relationship_model.preferred_style",
            "continuity.retrieval_hints.must_include",
            "continuity.relationship_model.trust_level",
            "continuity.stance_summary",
        ])
    );
}

#[test]
fn phase2_removes_the_alphabetically_first_relationship_key_without_a_trust_level() {
    let capsule = object(
        r#"{"continuity":{"relationship_model":{"zeta":["z"],"beta":["b"]},"top_priorities":["pppp"],
        "stance_summary":"ssssssssssssssssssssssssssssssssssssssssssssssss"}}"#,
    );
    let trimmed = trim_capsule(&capsule, 4);
    assert_eq!(
        trimmed.trimmed_fields.first().map(String::as_str),
        Some("continuity.relationship_model.beta")
    );
}

// ---- §10 continuity_state ----

/// The minimal capsule; its dump (model order, defaults kept) renders to 544 chars:
/// 136 tokens.
fn capsule(kind: &str, id: &str, extra: &str) -> Capsule {
    let text = format!(
        r#"{{"schema_version":"1.1","subject_kind":"{kind}","subject_id":"{id}",
        "updated_at":"2026-01-01T00:00:00Z","verified_at":"2026-01-01T00:00:00Z",
        "source":{{"producer":"p","update_reason":"manual","inputs":[]}},
        "continuity":{{"top_priorities":["alpha"],"active_concerns":[],"active_constraints":[],
          "open_loops":[],"stance_summary":"s","drift_signals":[]}},
        "confidence":{{"continuity":0.5,"relationship_model":0.5}}{extra}}}"#
    );
    Capsule::from_stored(&serde_json::from_str(&text).unwrap()).unwrap()
}

const MINIMAL_RENDER: &str = "schema_version: 1.1\nsubject_kind: thread\nsubject_id: t1\n\
updated_at: 2026-01-01T00:00:00Z\nverified_at: 2026-01-01T00:00:00Z\n\
source: producer: p\nupdate_reason: manual\ninputs: \n\
continuity: top_priorities: - alpha\nactive_concerns: \nactive_constraints: \nopen_loops: \n\
stance_summary: s\ndrift_signals: \nworking_hypotheses: \nlong_horizon_commitments: \n\
session_trajectory: \nnegative_decisions: \ntrailing_notes: \ncuriosity_queue: \n\
rationale_entries: \nconfidence: continuity: 0.5\nrelationship_model: 0.5\n\
canonical_sources: \nmetadata: \nstable_preferences: ";

fn request(body: &str, max_tokens: i64) -> RetrieveRequest {
    let mut r = RetrieveRequest::from_json(&Json::parse(body.as_bytes()).unwrap()).unwrap();
    // Below the request model's minimum on purpose: the rules take any budget.
    r.max_tokens_estimate = max_tokens;
    r
}

fn selector(kind: SubjectKind, id: &str) -> Selector {
    Selector {
        kind,
        subject_id: id.to_owned(),
        resolution: Resolution::Explicit,
    }
}

fn active(selector: Selector, capsule: Option<Capsule>) -> SelectorSource {
    SelectorSource {
        selector,
        active_readable: true,
        active: capsule.map(|c| Ok((Arc::new(c), Vec::new()))),
        fallback_readable: true,
        fallback: None,
    }
}

fn selection(selectors: &[Selector]) -> Selection {
    Selection {
        selectors: selectors.to_vec(),
        requested: selectors.iter().map(Selector::label).collect(),
        omitted: Vec::new(),
    }
}

fn strs(value: Option<&Json>) -> Vec<String> {
    value
        .and_then(Json::as_array)
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

fn single(max_tokens: i64) -> Json {
    let r = request(
        r#"{"task":"x","subject_kind":"thread","subject_id":"t1"}"#,
        max_tokens,
    );
    let s = selector(SubjectKind::Thread, "t1");
    continuity_state(
        &r,
        &selection(std::slice::from_ref(&s)),
        vec![active(s, Some(capsule("thread", "t1", "")))],
        NOW,
    )
    .unwrap()
}

#[test]
fn the_minimal_capsule_renders_as_python_would() {
    let dump = capsule("thread", "t1", "").to_json();
    assert_eq!(render(&dump), MINIMAL_RENDER);
    assert_eq!(MINIMAL_RENDER.len(), 544);
}

/// Allocation 400: full signals (445 chars, 112 tokens) < 400; salience (140 chars, 35);
/// the capsule fits 400 − 112 − 35 = 253. Returned: 544 + `\nsource_state: active` 21 +
/// `\ntrust_signals: ` 16 + 445 = 1026 chars = 257 tokens, + 35 ≤ 400 keeps salience.
/// Used: 1026 + `\nsalience: ` 11 + 140 = 1177 chars = 295 tokens.
#[test]
fn a_roomy_budget_returns_full_trust_signals_and_salience() {
    let state = single(400);
    assert_eq!(state.get("present"), Some(&Json::Bool(true)));
    let capsule = &state.get("capsules").unwrap().as_array().unwrap()[0];
    let signals = capsule.get("trust_signals").unwrap();
    assert_eq!(signals.get("compact"), None);
    assert_eq!(
        signals.get("completeness").unwrap().get("trimmed"),
        Some(&Json::Bool(false))
    );
    assert_eq!(
        capsule.get("salience").unwrap().get("rank"),
        Some(&Json::from(1i64))
    );
    assert_eq!(
        state.get("budget").unwrap().get("continuity_tokens_used"),
        Some(&Json::from(295i64))
    );
    assert_eq!(strs(state.get("selection_order")), ["explicit:thread:t1"]);
    assert!(strs(state.get("recovery_warnings")).is_empty());
    let metadata = state.get("salience_metadata").unwrap();
    assert_eq!(metadata.get("capsule_count"), Some(&Json::from(1i64)));
    assert_eq!(
        metadata.get("best_lifecycle_rank"),
        Some(&Json::from(99i64))
    );
    assert_eq!(
        metadata.get("all_resume_adequate"),
        Some(&Json::Bool(false))
    );
    let aggregate = state.get("trust_signals").unwrap();
    assert_eq!(
        aggregate.get("scope_match").unwrap().get("all_returned"),
        Some(&Json::Bool(true))
    );
}

/// Allocation 246: full (112) chosen; the capsule gets 246 − 112 − 35 = 99 tokens. Phase 1
/// drops metadata (−11 chars), canonical_sources (−20), trailing_notes (−17),
/// curiosity_queue (−18), rationale_entries (−20), negative_decisions (−21),
/// working_hypotheses (−21), stable_preferences (−21): 544 − 149 = 395 chars = 99 tokens.
/// The full signals then list eight trimmed fields (+203 chars, `True` −1): 647 chars = 162
/// tokens; the capsule with source_state is 416 chars = 104; 104 + 162 > 246 but 104 + 43
/// (compact, 171 chars) ≤ 246: compact, with `trust_signals_compact`. Salience still fits:
/// 416 + 16 + 171 = 603 chars = 151, + 35 ≤ 246. Used: 603 + 11 + 140 = 754 chars = 189.
#[test]
fn recorded_trimming_that_outgrows_the_budget_switches_to_compact_signals() {
    let state = single(246);
    let capsule = &state.get("capsules").unwrap().as_array().unwrap()[0];
    let signals = capsule.get("trust_signals").unwrap();
    assert_eq!(signals.get("compact"), Some(&Json::Bool(true)));
    assert_eq!(
        signals.get("completeness").unwrap().get("trimmed"),
        Some(&Json::Bool(true))
    );
    assert_eq!(
        strs(state.get("recovery_warnings")),
        ["trust_signals_compact"]
    );
    assert_eq!(
        state.get("budget").unwrap().get("continuity_tokens_used"),
        Some(&Json::from(189i64))
    );
    assert!(capsule.get("metadata").is_none());
    assert!(!capsule.get("salience").unwrap().is_null());
    let aggregate = state.get("trust_signals").unwrap();
    assert_eq!(
        aggregate.get("completeness").unwrap().get("any_trimmed"),
        Some(&Json::Bool(true))
    );
    // Compact signals carry no ages.
    assert_eq!(
        aggregate
            .get("recency")
            .unwrap()
            .get("oldest_updated_age_seconds"),
        Some(&Json::Null)
    );
}

/// Allocation 40: full (112) and compact (43) are not < 40: no signals (cost 5). The capsule
/// gets 40 − 5 − 35 = 0, then without salience 40 − 5 − 4 = 31: it needs at least 92 (phase 2
/// also removes the empty long_horizon_commitments): omitted, truncated to zero.
#[test]
fn a_budget_below_the_compact_signals_truncates_the_capsule_to_zero() {
    let state = single(40);
    assert_eq!(state.get("present"), Some(&Json::Bool(false)));
    assert_eq!(
        strs(state.get("warnings")),
        ["continuity_truncated_to_zero"]
    );
    assert_eq!(strs(state.get("omitted_selectors")), ["thread:t1"]);
    assert_eq!(state.get("trust_signals"), Some(&Json::Null));
    assert_eq!(state.get("salience_metadata"), Some(&Json::Null));
    assert_eq!(
        state.get("budget").unwrap().get("continuity_tokens_used"),
        Some(&Json::from(0i64))
    );
}

/// Two selectors, 801 tokens: 401 and 400. `thread:t1` resolves, `thread:gone` has neither
/// an active capsule nor a fallback. Multi mode (continuity_selectors given) suffixes every
/// warning; the truncation warning keeps its multi name.
#[test]
fn warnings_name_their_selector_in_multi_mode() {
    let r = request(
        r#"{"task":"x","continuity_selectors":[{"subject_kind":"thread","subject_id":"t1"},
            {"subject_kind":"thread","subject_id":"gone"},{"subject_kind":"user","subject_id":"tiny"}],
            "continuity_max_capsules":3}"#,
        801,
    );
    let (a, b, c) = (
        selector(SubjectKind::Thread, "t1"),
        selector(SubjectKind::Thread, "gone"),
        selector(SubjectKind::User, "tiny"),
    );
    let degraded = capsule(
        "user",
        "tiny",
        r#","capsule_health":{"status":"degraded","reasons":["r"],"last_checked_at":"2026-01-01T00:00:00Z"}"#,
    );
    let state = continuity_state(
        &r,
        &selection(&[a.clone(), b.clone(), c.clone()]),
        vec![
            active(a, Some(capsule("thread", "t1", ""))),
            active(b, None),
            active(c, Some(degraded)),
        ],
        NOW,
    )
    .unwrap();
    assert_eq!(
        strs(state.get("recovery_warnings")),
        [
            "continuity_active_missing:thread:gone",
            "continuity_fallback_missing:thread:gone"
        ]
    );
    assert_eq!(strs(state.get("omitted_selectors")), ["thread:gone"]);
    // Salience: healthy t1 (health rank 0) before degraded tiny (1).
    assert_eq!(
        strs(state.get("selection_order")),
        ["explicit:thread:t1", "explicit:user:tiny"]
    );
    assert_eq!(
        strs(state.get("warnings")),
        ["continuity_degraded:user:tiny"]
    );
}

#[test]
fn the_same_warnings_are_bare_in_single_mode() {
    let r = request(
        r#"{"task":"x","subject_kind":"thread","subject_id":"gone"}"#,
        400,
    );
    let s = selector(SubjectKind::Thread, "gone");
    let state = continuity_state(
        &r,
        &selection(std::slice::from_ref(&s)),
        vec![active(s, None)],
        NOW,
    )
    .unwrap();
    assert_eq!(
        strs(state.get("recovery_warnings")),
        ["continuity_active_missing", "continuity_fallback_missing"]
    );
}

#[test]
fn a_fallback_is_used_when_the_active_capsule_is_missing() {
    let r = request(r#"{"task":"thread:t1"}"#, 400);
    let s = Selector {
        resolution: Resolution::Inferred,
        ..selector(SubjectKind::Thread, "t1")
    };
    let source = SelectorSource {
        fallback: Some(Ok((Arc::new(capsule("thread", "t1", "")), Vec::new()))),
        ..active(s.clone(), None)
    };
    let state = continuity_state(&r, &selection(&[s]), vec![source], NOW).unwrap();
    assert_eq!(
        strs(state.get("recovery_warnings")),
        ["continuity_active_missing", "continuity_fallback_used"]
    );
    assert_eq!(state.get("fallback_used"), Some(&Json::Bool(true)));
    assert_eq!(strs(state.get("selection_order")), ["inferred:thread:t1"]);
    let capsule = &state.get("capsules").unwrap().as_array().unwrap()[0];
    assert_eq!(capsule.get("source_state"), Some(&Json::from("fallback")));
    assert_eq!(
        capsule
            .get("trust_signals")
            .unwrap()
            .get("scope_match")
            .unwrap()
            .get("exact"),
        Some(&Json::Bool(false))
    );
}

#[test]
fn require_active_omits_a_missing_capsule_and_owner_only_marks_a_denied_one() {
    let r = request(
        r#"{"task":"x","continuity_resilience_policy":"require_active",
            "continuity_selectors":[{"subject_kind":"thread","subject_id":"gone"},
            {"subject_kind":"thread","subject_id":"secret"}],"continuity_max_capsules":2}"#,
        400,
    );
    let (a, b) = (
        selector(SubjectKind::Thread, "gone"),
        selector(SubjectKind::Thread, "secret"),
    );
    let denied = SelectorSource {
        active_readable: false,
        ..active(b.clone(), None)
    };
    let state = continuity_state(
        &r,
        &selection(&[a.clone(), b]),
        vec![active(a, None), denied],
        NOW,
    )
    .unwrap();
    assert_eq!(
        strs(state.get("recovery_warnings")),
        [
            "continuity_active_missing:thread:gone",
            "continuity_active_missing:thread:secret (owner only)"
        ]
    );
    assert_eq!(
        strs(state.get("omitted_selectors")),
        ["thread:gone", "thread:secret"]
    );
}

/// A capsule verified 31 days before NOW with the situational default (30 days): age
/// 2,678,400 s ≤ 1.5 × 2,592,000 → stale_soft, with its warning; one verified 61 days before
/// (> 2×) is expired_by_age: omitted with `continuity_expired`.
#[test]
fn freshness_phases_warn_and_expired_capsules_are_omitted() {
    let aged = |days: i64, id: &str| {
        let at = NOW - time::Duration::days(days);
        let ts = crate::domain::timestamp::format_iso(at);
        let text = serde_json::to_string(&capsule("thread", id, "").to_json().to_value())
            .unwrap()
            .replace("2026-01-01T00:00:00Z", &ts);
        Capsule::from_stored(&serde_json::from_str(&text).unwrap()).unwrap()
    };
    let r = request(
        r#"{"task":"x","continuity_selectors":[{"subject_kind":"thread","subject_id":"soft"},
            {"subject_kind":"thread","subject_id":"old"}],"continuity_max_capsules":2}"#,
        1000,
    );
    let (a, b) = (
        selector(SubjectKind::Thread, "soft"),
        selector(SubjectKind::Thread, "old"),
    );
    let state = continuity_state(
        &r,
        &selection(&[a.clone(), b.clone()]),
        vec![
            active(a, Some(aged(31, "soft"))),
            active(b, Some(aged(61, "old"))),
        ],
        NOW,
    )
    .unwrap();
    assert_eq!(
        strs(state.get("warnings")),
        [
            "continuity_stale_soft:thread:soft",
            "continuity_expired:thread:old"
        ]
    );
    assert_eq!(strs(state.get("omitted_selectors")), ["thread:old"]);
    assert_eq!(strs(state.get("selection_order")), ["explicit:thread:soft"]);
}

#[test]
fn required_mode_with_nothing_resolvable_is_not_found() {
    let not_found = ContinuityError::not_found("Continuity capsule not found");
    // No selector at all.
    let r = request(
        r#"{"task":"nothing here","continuity_mode":"required"}"#,
        400,
    );
    assert_eq!(
        continuity_state(&r, &Selection::default(), vec![], NOW).unwrap_err(),
        not_found
    );
    // A selector that loads nothing.
    let r = request(
        r#"{"task":"x","subject_kind":"thread","subject_id":"gone","continuity_mode":"required"}"#,
        400,
    );
    let s = selector(SubjectKind::Thread, "gone");
    assert_eq!(
        continuity_state(
            &r,
            &selection(std::slice::from_ref(&s)),
            vec![active(s, None)],
            NOW
        )
        .unwrap_err(),
        not_found
    );
    // A capsule truncated to zero.
    let r = request(
        r#"{"task":"x","subject_kind":"thread","subject_id":"t1","continuity_mode":"required"}"#,
        40,
    );
    let s = selector(SubjectKind::Thread, "t1");
    assert_eq!(
        continuity_state(
            &r,
            &selection(std::slice::from_ref(&s)),
            vec![active(s, Some(capsule("thread", "t1", "")))],
            NOW
        )
        .unwrap_err(),
        not_found
    );
}

#[test]
fn an_invalid_single_capsule_without_fallback_is_the_reads_400() {
    let r = request(
        r#"{"task":"x","subject_kind":"thread","subject_id":"bad"}"#,
        400,
    );
    let s = selector(SubjectKind::Thread, "bad");
    let invalid = ContinuityError::invalid(
        "Invalid continuity capsule: 1 validation error for ContinuityCapsule",
    );
    let source = SelectorSource {
        active: Some(Err(invalid.clone())),
        ..active(s.clone(), None)
    };
    assert_eq!(
        continuity_state(&r, &selection(&[s]), vec![source], NOW).unwrap_err(),
        invalid
    );
}

/// Multi mode: an invalid active capsule without a fallback is omitted with
/// `continuity_invalid_capsule:<kind>:<id>` (in `warnings`), a fallback used names its
/// selector, and a conflicted capsule warns `continuity_conflicted:<kind>:<id>`.
#[test]
fn invalid_fallback_and_conflicted_capsules_in_multi_mode() {
    let r = request(
        r#"{"task":"x","continuity_selectors":[{"subject_kind":"thread","subject_id":"bad"},
            {"subject_kind":"thread","subject_id":"old"},{"subject_kind":"peer","subject_id":"p"}],
            "continuity_max_capsules":3}"#,
        1200,
    );
    let (a, b, c) = (
        selector(SubjectKind::Thread, "bad"),
        selector(SubjectKind::Thread, "old"),
        selector(SubjectKind::Peer, "p"),
    );
    let invalid = SelectorSource {
        active: Some(Err(ContinuityError::invalid(
            "Invalid continuity capsule: x",
        ))),
        ..active(a.clone(), None)
    };
    let fallback = SelectorSource {
        fallback: Some(Ok((Arc::new(capsule("thread", "old", "")), Vec::new()))),
        ..active(b.clone(), None)
    };
    let conflicted = capsule(
        "peer",
        "p",
        r#","capsule_health":{"status":"conflicted","reasons":[],"last_checked_at":"2026-01-01T00:00:00Z"}"#,
    );
    let state = continuity_state(
        &r,
        &selection(&[a, b, c.clone()]),
        vec![invalid, fallback, active(c, Some(conflicted))],
        NOW,
    )
    .unwrap();
    assert_eq!(
        strs(state.get("recovery_warnings")),
        [
            "continuity_active_invalid:thread:bad",
            "continuity_active_missing:thread:old",
            "continuity_fallback_used:thread:old"
        ]
    );
    assert_eq!(
        strs(state.get("warnings")),
        [
            "continuity_invalid_capsule:thread:bad",
            "continuity_conflicted:peer:p"
        ]
    );
    assert_eq!(strs(state.get("omitted_selectors")), ["thread:bad"]);
    // Salience: the healthy fallback (health 0) before the conflicted peer (2).
    assert_eq!(
        strs(state.get("selection_order")),
        ["explicit:thread:old", "explicit:peer:p"]
    );
    let aggregate = state
        .get("trust_signals")
        .unwrap()
        .get("integrity")
        .unwrap();
    assert_eq!(
        aggregate.get("worst_health"),
        Some(&Json::from("conflicted"))
    );
    assert_eq!(aggregate.get("any_fallback"), Some(&Json::Bool(true)));
}

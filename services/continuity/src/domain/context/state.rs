//! `continuity_state` of a retrieve bundle (digest §10 steps 2–7): per-selector loading with
//! the resilience policy and its fallbacks, the verification policy, the salience sort, the
//! budget split, per-capsule trust signals and salience blocks, trimming, and the aggregates.
//!
//! The operations layer loads each selector's stored capsules (and whether the token may read
//! their paths); everything from there is decided here, without I/O.

use std::sync::Arc;

use time::OffsetDateTime;

use crate::domain::error::ContinuityError;
use crate::domain::json::{Json, JsonObject};
use crate::domain::listing::{SalienceKey, salience_key};
use crate::domain::model::{Capsule, HealthStatus, Lifecycle};
use crate::domain::read::Loaded;
use crate::domain::trust::{
    Phase, SignalSummary, SourceState, aggregate_trust_signals, compact_trust_signals,
    phase_checked, trust_signals,
};
use crate::domain::write::health_summary;

use super::budget::{SALIENCE_NULL_COST, TrustForm, budget_block, choose_trust_form, split};
use super::render::estimate_tokens;
use super::request::{ResiliencePolicy, RetrieveRequest, VerificationPolicy};
use super::selection::{Selection, Selector, TRUNCATED_MULTI, qualify};
use super::trimming::trim_capsule;

const NOT_FOUND: &str = "Continuity capsule not found";
const ACTIVE_MISSING: &str = "continuity_active_missing";
const ACTIVE_INVALID: &str = "continuity_active_invalid";
const FALLBACK_USED: &str = "continuity_fallback_used";
const FALLBACK_MISSING: &str = "continuity_fallback_missing";
const INVALID_CAPSULE: &str = "continuity_invalid_capsule";
const DEGRADED: &str = "continuity_degraded";
const CONFLICTED: &str = "continuity_conflicted";
const SALIENCE_OMITTED: &str = "continuity_salience_omitted";
const TRUST_SIGNALS_COMPACT: &str = "trust_signals_compact";
const OWNER_ONLY: &str = " (owner only)";

/// What the store holds for one selector, as the caller may see it.
#[derive(Debug, Clone)]
pub struct SelectorSource {
    pub selector: Selector,
    /// The token may read the active capsule's path.
    pub active_readable: bool,
    /// The active capsule loaded for reading; `None` when there is none.
    pub active: Option<Loaded>,
    /// The token may read the fallback snapshot's path.
    pub fallback_readable: bool,
    /// The fallback snapshot's capsule (asked only when the active one cannot be used).
    pub fallback: Option<Loaded>,
}

/// A capsule that loaded and is not expired.
#[derive(Debug, Clone)]
pub struct LoadedRow {
    pub selector: Selector,
    pub capsule: Arc<Capsule>,
    pub source_state: SourceState,
    pub health: HealthStatus,
}

/// The state being built, in the original's key order.
#[derive(Debug, Clone, Default)]
struct State {
    requested: Vec<String>,
    omitted: Vec<String>,
    capsules: Vec<Json>,
    selection_order: Vec<String>,
    used: i64,
    warnings: Vec<String>,
    fallback_used: bool,
    recovery_warnings: Vec<String>,
    trust_signals: Option<Json>,
    salience_metadata: Option<Json>,
}

fn strings(items: &[String]) -> Json {
    Json::Array(items.iter().map(|s| Json::from(s.as_str())).collect())
}

impl State {
    fn to_json(&self, max_tokens: i64) -> Json {
        let mut state = JsonObject::new();
        state.insert("present", Json::Bool(!self.capsules.is_empty()));
        state.insert("requested_selectors", strings(&self.requested));
        state.insert("omitted_selectors", strings(&self.omitted));
        state.insert("capsules", Json::Array(self.capsules.clone()));
        state.insert("selection_order", strings(&self.selection_order));
        state.insert("budget", budget_block(max_tokens, self.used));
        state.insert("warnings", strings(&self.warnings));
        state.insert("fallback_used", Json::Bool(self.fallback_used));
        state.insert("recovery_warnings", strings(&self.recovery_warnings));
        state.insert(
            "trust_signals",
            self.trust_signals.clone().unwrap_or(Json::Null),
        );
        state.insert(
            "salience_metadata",
            self.salience_metadata.clone().unwrap_or(Json::Null),
        );
        Json::Object(state)
    }
}

/// The empty state (`continuity_mode: "off"`).
pub fn empty_state(max_tokens: i64) -> Json {
    State::default().to_json(max_tokens)
}

/// Builds `continuity_state` from the selection and what the store holds for each selector
/// (in selection order). `required` with nothing returned is the original's 404.
pub fn continuity_state(
    request: &RetrieveRequest,
    selection: &Selection,
    sources: Vec<SelectorSource>,
    now: OffsetDateTime,
) -> Result<Json, ContinuityError> {
    let required = request.continuity_mode == super::request::ContinuityMode::Required;
    let not_found = || ContinuityError::not_found(NOT_FOUND);
    let max_tokens = request.max_tokens_estimate;
    let multi = request.multi_warning_mode();
    let mut state = State {
        requested: selection.requested.clone(),
        omitted: selection.omitted.clone(),
        ..State::default()
    };
    if selection.selectors.is_empty() {
        return if required {
            Err(not_found())
        } else {
            Ok(state.to_json(max_tokens))
        };
    }
    let count = sources.len();
    let mut rows = Vec::new();
    for source in sources {
        if let Some(row) = load_selector(
            source,
            request.continuity_resilience_policy,
            count,
            multi,
            now,
            &mut state,
        )? {
            rows.push(row);
        }
    }
    let rows = apply_verification_policy(rows, request.continuity_verification_policy, &mut state);
    if rows.is_empty() {
        return if required {
            Err(not_found())
        } else {
            Ok(state.to_json(max_tokens))
        };
    }
    let mut keyed: Vec<(SalienceKey, LoadedRow)> = rows
        .into_iter()
        .map(|row| {
            let key = salience_key(
                &row.capsule,
                now,
                row.selector.kind.as_str(),
                &row.selector.subject_id,
            );
            (key, row)
        })
        .collect();
    crate::domain::listing::salience_order(&mut keyed);
    let survivors = trim_and_attach(&keyed, max_tokens, multi, now, &mut state);
    if survivors.is_empty() {
        return if required {
            Err(not_found())
        } else {
            Ok(state.to_json(max_tokens))
        };
    }
    let summaries: Vec<SignalSummary> = state
        .capsules
        .iter()
        .filter_map(|c| c.get("trust_signals"))
        .filter(|s| !s.is_null())
        .filter_map(SignalSummary::from_signals)
        .collect();
    state.trust_signals = aggregate_trust_signals(
        &summaries,
        state.requested.len(),
        state.capsules.len(),
        state.omitted.len(),
    );
    state.salience_metadata = Some(salience_metadata(&survivors));
    state.used = state.capsules.iter().map(estimate_tokens).sum();
    Ok(state.to_json(max_tokens))
}

/// Step 2 for one selector: namespace denial, the active capsule, the resilience policy's
/// fallback, the superseded warning and the freshness phase. `None`: omitted.
fn load_selector(
    source: SelectorSource,
    policy: ResiliencePolicy,
    selector_count: usize,
    multi: bool,
    now: OffsetDateTime,
    state: &mut State,
) -> Result<Option<LoadedRow>, ContinuityError> {
    let selector = source.selector;
    let (kind, id) = (selector.kind, selector.subject_id.clone());
    let q = |warning: &str| qualify(warning, kind, &id, multi);
    if !source.active_readable {
        state
            .recovery_warnings
            .push(format!("{}{OWNER_ONLY}", q(ACTIVE_MISSING)));
        state.omitted.push(selector.label());
        return Ok(None);
    }
    let active = source
        .active
        .unwrap_or_else(|| Err(ContinuityError::not_found(NOT_FOUND)));
    let (capsule, source_state) = match active {
        Ok((capsule, warnings)) => {
            state.recovery_warnings.extend(warnings);
            (capsule, SourceState::Active)
        }
        Err(error) => {
            let active_missing = match &error {
                ContinuityError::NotFound(_) => true,
                ContinuityError::Invalid(_) => false,
                // A capsule of another subject (`SubjectMismatch`) is refused, not fallen
                // back from.
                _ => return Err(error),
            };
            state.recovery_warnings.push(q(if active_missing {
                ACTIVE_MISSING
            } else {
                ACTIVE_INVALID
            }));
            if policy == ResiliencePolicy::RequireActive {
                state.omitted.push(selector.label());
                return Ok(None);
            }
            if !source.fallback_readable {
                state
                    .recovery_warnings
                    .push(format!("{}{OWNER_ONLY}", q(FALLBACK_MISSING)));
                state.omitted.push(selector.label());
                return Ok(None);
            }
            let fallback = source
                .fallback
                .unwrap_or_else(|| Err(ContinuityError::not_found(NOT_FOUND)));
            match fallback {
                Ok((capsule, warnings)) => {
                    state.recovery_warnings.push(q(FALLBACK_USED));
                    state.recovery_warnings.extend(warnings);
                    state.fallback_used = true;
                    (capsule, SourceState::Fallback)
                }
                Err(
                    ContinuityError::Invalid(_)
                    | ContinuityError::SubjectMismatch(_)
                    | ContinuityError::NotFound(_),
                ) => {
                    if active_missing {
                        state.recovery_warnings.push(q(FALLBACK_MISSING));
                        state.omitted.push(selector.label());
                        return Ok(None);
                    }
                    if selector_count > 1 {
                        state.warnings.push(q(INVALID_CAPSULE));
                        state.omitted.push(selector.label());
                        return Ok(None);
                    }
                    // A single invalid capsule without a fallback is the active read's 400.
                    return Err(error);
                }
                Err(other) => return Err(other),
            }
        }
    };
    if let Some(td) = capsule
        .thread_descriptor
        .as_ref()
        .filter(|td| td.lifecycle == Some(Lifecycle::Superseded))
    {
        let superseded = format!(
            "continuity_capsule_superseded:thread:{}\u{2192}{}",
            capsule.subject_id,
            td.superseded_by.as_deref().unwrap_or("unknown")
        );
        state.recovery_warnings.push(q(&superseded));
    }
    // A loaded capsule's verified_at is a valid UTC timestamp; the original's phase would
    // raise otherwise, which cannot happen here.
    let phase = phase_checked(&capsule, now).unwrap_or(Phase::Expired);
    if let Some(warning) = phase.warning() {
        state.warnings.push(q(warning));
    }
    if matches!(phase, Phase::Expired | Phase::ExpiredByAge) {
        state.omitted.push(selector.label());
        return Ok(None);
    }
    let health = health_summary(&capsule).0;
    Ok(Some(LoadedRow {
        selector,
        capsule,
        source_state,
        health,
    }))
}

/// Step 3: `require_healthy` omits unhealthy capsules; `prefer_healthy` orders by health
/// (which the salience sort, health being its second key, refines anyway).
fn apply_verification_policy(
    mut rows: Vec<LoadedRow>,
    policy: VerificationPolicy,
    state: &mut State,
) -> Vec<LoadedRow> {
    match policy {
        VerificationPolicy::AllowDegraded => rows,
        VerificationPolicy::PreferHealthy => {
            rows.sort_by_key(|row| row.health.rank());
            rows
        }
        VerificationPolicy::RequireHealthy => {
            let mut kept = Vec::new();
            for row in rows {
                if row.health == HealthStatus::Healthy {
                    kept.push(row);
                } else {
                    state.omitted.push(row.selector.label());
                }
            }
            kept
        }
    }
}

/// Steps 5–6: allocations, trust form, salience block, trimming, and the survivors' extra keys
/// (`source_state`, `trust_signals`, `salience`). Returns the surviving rows' salience keys.
fn trim_and_attach(
    rows: &[(SalienceKey, LoadedRow)],
    reserve: i64,
    multi: bool,
    now: OffsetDateTime,
    state: &mut State,
) -> Vec<SalienceKey> {
    let allocations = split(reserve, rows.len());
    let mut survivors = Vec::new();
    let mut rank = 0usize;
    for ((key, row), allocation) in rows.iter().zip(allocations) {
        let (kind, id) = (row.selector.kind, row.selector.subject_id.as_str());
        let q = |warning: &str| qualify(warning, kind, id, multi);
        let full = trust_signals(&row.capsule, now, row.source_state, &[]);
        let compact = compact_trust_signals(&row.capsule, now, row.source_state, false);
        let (form, trust_cost) = choose_trust_form(
            estimate_tokens(&full),
            estimate_tokens(&compact),
            allocation,
        );

        let mut with_salience = true;
        let mut salience_cost = estimate_tokens(&key.block(0));
        let dump = match row.capsule.to_json() {
            Json::Object(o) => o,
            _ => JsonObject::new(),
        };
        let mut trimmed = trim_capsule(&dump, allocation - trust_cost - salience_cost);
        if trimmed.capsule.is_none() {
            // Salience is a soft cost: retry without it before giving the capsule up.
            trimmed = trim_capsule(&dump, allocation - trust_cost - SALIENCE_NULL_COST);
            if trimmed.capsule.is_some() {
                with_salience = false;
                salience_cost = SALIENCE_NULL_COST;
                state.recovery_warnings.push(q(SALIENCE_OMITTED));
            }
        }
        let Some(mut capsule) = trimmed.capsule else {
            state.omitted.push(row.selector.label());
            state.warnings.push(q(TRUNCATED_MULTI));
            continue;
        };
        let fields = trimmed.trimmed_fields;
        rank += 1;
        capsule.insert("source_state", Json::from(row.source_state.as_str()));

        let signals = match form {
            TrustForm::Omitted => Json::Null,
            TrustForm::Compact => {
                state.recovery_warnings.push(q(TRUST_SIGNALS_COMPACT));
                compact_trust_signals(&row.capsule, now, row.source_state, !fields.is_empty())
            }
            TrustForm::Full => {
                let updated = trust_signals(&row.capsule, now, row.source_state, &fields);
                let updated_cost = estimate_tokens(&updated);
                if updated_cost > trust_cost {
                    // The recorded trimmed_fields made the block grow: switch to the compact
                    // form when only that still fits.
                    let compact = compact_trust_signals(
                        &row.capsule,
                        now,
                        row.source_state,
                        !fields.is_empty(),
                    );
                    let compact_cost = estimate_tokens(&compact);
                    let capsule_cost = estimate_tokens(&Json::Object(capsule.clone()));
                    if capsule_cost + updated_cost > allocation
                        && capsule_cost + compact_cost <= allocation
                    {
                        state.recovery_warnings.push(q(TRUST_SIGNALS_COMPACT));
                        compact
                    } else {
                        updated
                    }
                } else {
                    updated
                }
            }
        };
        capsule.insert("trust_signals", signals);

        if with_salience {
            let total = estimate_tokens(&Json::Object(capsule.clone())) + salience_cost;
            if total > allocation {
                capsule.insert("salience", Json::Null);
                state.recovery_warnings.push(q(SALIENCE_OMITTED));
            } else {
                capsule.insert("salience", key.block(rank));
            }
        } else {
            capsule.insert("salience", Json::Null);
        }

        state.capsules.push(Json::Object(capsule));
        state.selection_order.push(format!(
            "{}:{}:{}",
            row.selector.resolution.as_str(),
            kind.as_str(),
            id
        ));
        survivors.push(key.clone());
        match row.health {
            HealthStatus::Degraded => state.warnings.push(q(DEGRADED)),
            HealthStatus::Conflicted => state.warnings.push(q(CONFLICTED)),
            HealthStatus::Healthy => {}
        }
    }
    survivors
}

/// `salience_metadata` over the returned capsules.
fn salience_metadata(keys: &[SalienceKey]) -> Json {
    let best_lifecycle = keys.iter().map(|k| k.lifecycle_rank).fold(99u8, u8::min);
    let worst_health = keys.iter().map(|k| k.health_rank).fold(0u8, u8::max);
    let worst_freshness = keys.iter().map(|k| k.freshness_rank).fold(0u8, u8::max);
    let all_adequate = keys.iter().all(|k| k.resume_rank == 0);
    let mut metadata = JsonObject::new();
    metadata.insert("sort_applied", Json::Bool(true));
    metadata.insert("capsule_count", Json::from(keys.len()));
    metadata.insert("best_lifecycle_rank", Json::from(i64::from(best_lifecycle)));
    metadata.insert("worst_health_rank", Json::from(i64::from(worst_health)));
    metadata.insert(
        "worst_freshness_rank",
        Json::from(i64::from(worst_freshness)),
    );
    metadata.insert("all_resume_adequate", Json::Bool(all_adequate));
    Json::Object(metadata)
}

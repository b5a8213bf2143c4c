//! Read-side derivations (digest §7): freshness phase, `trust_signals` (full, compact,
//! aggregate) and the startup view's `startup_summary`.

use time::OffsetDateTime;

use super::json::{Json, JsonObject};
use super::model::{Capsule, FreshnessClass, HealthStatus, RationaleStatus};
use super::timestamp::{LEGACY_TIMESTAMP_FLOOR, parse_iso, require_utc, total_seconds};
use super::upsert::RESUME_STANCE_MIN_LEN;
use super::write::{health_summary, verification_status};

/// A capsule's freshness phase, ordered by severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    Fresh,
    StaleSoft,
    StaleHard,
    ExpiredByAge,
    Expired,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Fresh => "fresh",
            Phase::StaleSoft => "stale_soft",
            Phase::StaleHard => "stale_hard",
            Phase::ExpiredByAge => "expired_by_age",
            Phase::Expired => "expired",
        }
    }

    /// `CONTINUITY_PHASE_SEVERITY`: 0 (fresh) … 4 (expired).
    pub fn severity(self) -> u8 {
        self as u8
    }

    pub fn parse(text: &str) -> Option<Phase> {
        [
            Phase::Fresh,
            Phase::StaleSoft,
            Phase::StaleHard,
            Phase::ExpiredByAge,
            Phase::Expired,
        ]
        .into_iter()
        .find(|p| p.as_str() == text)
    }

    /// The read warning a phase carries (`continuity_stale_soft`, …), if any.
    pub fn warning(self) -> Option<&'static str> {
        match self {
            Phase::Fresh => None,
            Phase::StaleSoft => Some("continuity_stale_soft"),
            Phase::StaleHard => Some("continuity_stale_hard"),
            Phase::ExpiredByAge | Phase::Expired => Some("continuity_expired"),
        }
    }
}

/// Default stale thresholds by freshness class (`persistent` never goes stale).
pub fn default_stale_seconds(class: FreshnessClass) -> Option<i64> {
    match class {
        FreshnessClass::Persistent => None,
        FreshnessClass::Durable => Some(15_552_000),
        FreshnessClass::Situational => Some(2_592_000),
        FreshnessClass::Ephemeral => Some(259_200),
    }
}

/// `stale_after_seconds` when set, else the class default (`situational` when unset).
pub fn effective_stale_seconds(capsule: &Capsule) -> Option<i64> {
    let freshness = capsule.freshness.as_ref();
    if let Some(explicit) = freshness.and_then(|f| f.stale_after_seconds) {
        return Some(explicit);
    }
    default_stale_seconds(
        freshness
            .and_then(|f| f.freshness_class)
            .unwrap_or(FreshnessClass::Situational),
    )
}

/// The original's `_continuity_phase`; `None` where it raises (verified_at not a UTC
/// timestamp), which its callers turn into `expired`.
pub fn phase_checked(capsule: &Capsule, now: OffsetDateTime) -> Option<Phase> {
    PhaseClock::of(capsule).map(|clock| clock.at(now))
}

/// What a capsule's phase depends on besides the time, parsed once: a list shows the phase
/// of every capsule on every call, and parsing its timestamps each time was most of the cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseClock {
    verified_at: OffsetDateTime,
    expires_at: Option<OffsetDateTime>,
    stale_seconds: Option<i64>,
}

impl PhaseClock {
    /// `None` where the original raises (verified_at not a UTC timestamp).
    pub fn of(capsule: &Capsule) -> Option<PhaseClock> {
        let verified_at = require_utc(&capsule.verified_at, "verified_at").ok()?;
        let expires_at = capsule
            .freshness
            .as_ref()
            .and_then(|f| f.expires_at.as_deref())
            .filter(|e| !e.is_empty())
            .and_then(parse_iso);
        Some(PhaseClock {
            verified_at,
            expires_at,
            stale_seconds: effective_stale_seconds(capsule),
        })
    }

    /// The phase at `now`.
    pub fn at(&self, now: OffsetDateTime) -> Phase {
        if let Some(expires_at) = self.expires_at
            && now > expires_at
        {
            return Phase::Expired;
        }
        let Some(stale) = self.stale_seconds else {
            return Phase::Fresh;
        };
        let stale = stale as f64;
        let age = total_seconds(now, self.verified_at).max(0.0);
        if age <= stale {
            Phase::Fresh
        } else if age <= stale * 1.5 {
            Phase::StaleSoft
        } else if age <= stale * 2.0 {
            Phase::StaleHard
        } else {
            Phase::ExpiredByAge
        }
    }
}

/// The phase trust signals and salience use: `expired` when it cannot be computed or when
/// `verified_at` is the legacy floor.
pub fn phase(capsule: &Capsule, now: OffsetDateTime) -> Phase {
    if capsule.verified_at == LEGACY_TIMESTAMP_FLOOR {
        return Phase::Expired;
    }
    phase_checked(capsule, now).unwrap_or(Phase::Expired)
}

/// `max(0, int((now - ts).total_seconds()))`, `None` for an unparseable timestamp.
pub fn age_seconds(timestamp: &str, now: OffsetDateTime) -> Option<i64> {
    let at = parse_iso(timestamp)?;
    Some((total_seconds(now, at).trunc() as i64).max(0))
}

/// Whether the capsule is resume-adequate (§7.1 `orientation_adequate`).
pub fn orientation_adequate(capsule: &Capsule) -> bool {
    super::upsert::resume_adequate(capsule)
}

/// The orientation fields reported empty, in the original's order.
pub fn empty_orientation_fields(capsule: &Capsule) -> Vec<&'static str> {
    let c = &capsule.continuity;
    let mut empty = Vec::new();
    if c.top_priorities.is_empty() {
        empty.push("top_priorities");
    }
    if c.active_constraints.is_empty() {
        empty.push("active_constraints");
    }
    if c.open_loops.is_empty() {
        empty.push("open_loops");
    }
    if c.active_concerns.is_empty() {
        empty.push("active_concerns");
    }
    if c.stance_summary.chars().count() < RESUME_STANCE_MIN_LEN {
        empty.push("stance_summary");
    }
    if c.drift_signals.is_empty() {
        empty.push("drift_signals");
    }
    empty
}

/// Where a returned capsule came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceState {
    Active,
    Fallback,
    Missing,
}

impl SourceState {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceState::Active => "active",
            SourceState::Fallback => "fallback",
            SourceState::Missing => "missing",
        }
    }
}

fn strings(items: &[impl AsRef<str>]) -> Json {
    Json::Array(items.iter().map(|s| Json::from(s.as_ref())).collect())
}

fn opt_int(value: Option<i64>) -> Json {
    value.map_or(Json::Null, Json::from)
}

/// The full `trust_signals` block (§7.1), keys in the original's order. `trimmed_fields` is
/// empty on read; retrieval passes what trimming removed.
pub fn trust_signals(
    capsule: &Capsule,
    now: OffsetDateTime,
    source_state: SourceState,
    trimmed_fields: &[String],
) -> Json {
    let updated_age = age_seconds(&capsule.updated_at, now);
    let mut verified_age = age_seconds(&capsule.verified_at, now);
    if capsule.verified_at == LEGACY_TIMESTAMP_FLOOR {
        verified_age = None;
    }
    let mut recency = JsonObject::new();
    recency.insert("updated_age_seconds", opt_int(updated_age));
    recency.insert("verified_age_seconds", opt_int(verified_age));
    recency.insert("phase", Json::from(phase(capsule, now).as_str()));
    recency.insert(
        "freshness_class",
        capsule
            .freshness
            .as_ref()
            .and_then(|f| f.freshness_class)
            .map_or(Json::Null, |c| Json::from(c.as_str())),
    );
    recency.insert(
        "stale_threshold_seconds",
        opt_int(effective_stale_seconds(capsule)),
    );

    let mut completeness = JsonObject::new();
    completeness.insert(
        "orientation_adequate",
        Json::Bool(orientation_adequate(capsule)),
    );
    completeness.insert(
        "empty_orientation_fields",
        strings(&empty_orientation_fields(capsule)),
    );
    completeness.insert("trimmed", Json::Bool(!trimmed_fields.is_empty()));
    completeness.insert("trimmed_fields", strings(trimmed_fields));

    let (health, reasons) = health_summary(capsule);
    let mut integrity = JsonObject::new();
    integrity.insert("source_state", Json::from(source_state.as_str()));
    integrity.insert("health_status", Json::from(health.as_str()));
    integrity.insert("health_reasons", strings(&reasons));
    integrity.insert(
        "verification_status",
        Json::from(verification_status(capsule).as_str()),
    );

    let mut scope = JsonObject::new();
    scope.insert("exact", Json::Bool(source_state == SourceState::Active));

    let mut signals = JsonObject::new();
    signals.insert("recency", Json::Object(recency));
    signals.insert("completeness", Json::Object(completeness));
    signals.insert("integrity", Json::Object(integrity));
    signals.insert("scope_match", Json::Object(scope));
    Json::Object(signals)
}

/// The compact form retrieval falls back to under a tight budget.
pub fn compact_trust_signals(
    capsule: &Capsule,
    now: OffsetDateTime,
    source_state: SourceState,
    trimmed: bool,
) -> Json {
    let object = |pairs: Vec<(&str, Json)>| {
        Json::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    };
    object(vec![
        ("compact", Json::Bool(true)),
        (
            "recency",
            object(vec![("phase", Json::from(phase(capsule, now).as_str()))]),
        ),
        (
            "completeness",
            object(vec![
                (
                    "orientation_adequate",
                    Json::Bool(orientation_adequate(capsule)),
                ),
                ("trimmed", Json::Bool(trimmed)),
            ]),
        ),
        (
            "integrity",
            object(vec![
                ("source_state", Json::from(source_state.as_str())),
                (
                    "health_status",
                    Json::from(health_summary(capsule).0.as_str()),
                ),
            ]),
        ),
        (
            "scope_match",
            object(vec![(
                "exact",
                Json::Bool(source_state == SourceState::Active),
            )]),
        ),
    ])
}

/// One capsule's signals as the aggregate reads them (full or compact).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalSummary {
    pub phase: Phase,
    pub updated_age_seconds: Option<i64>,
    pub verified_age_seconds: Option<i64>,
    pub orientation_adequate: bool,
    pub trimmed: bool,
    pub source_state: SourceState,
    pub health: HealthStatus,
}

impl SignalSummary {
    /// Reads a full or compact `trust_signals` block back (compact blocks have no ages).
    pub fn from_signals(signals: &Json) -> Option<SignalSummary> {
        let section = |name: &str| signals.get(name);
        let age = |name: &str| match section("recency")?.get(name)? {
            Json::Number(n) => n.as_i64(),
            _ => None,
        };
        let flag = |sec: &str, name: &str| {
            matches!(
                section(sec).and_then(|s| s.get(name)),
                Some(Json::Bool(true))
            )
        };
        let integrity = section("integrity")?;
        Some(SignalSummary {
            phase: Phase::parse(section("recency")?.get("phase")?.as_str()?)?,
            updated_age_seconds: age("updated_age_seconds"),
            verified_age_seconds: age("verified_age_seconds"),
            orientation_adequate: flag("completeness", "orientation_adequate"),
            trimmed: flag("completeness", "trimmed"),
            source_state: match integrity.get("source_state")?.as_str()? {
                "active" => SourceState::Active,
                "fallback" => SourceState::Fallback,
                _ => SourceState::Missing,
            },
            health: HealthStatus::parse(integrity.get("health_status")?.as_str()?)?,
        })
    }
}

/// The aggregate block over the capsules that have signals (`None` for none, the original's
/// empty case).
pub fn aggregate_trust_signals(
    signals: &[SignalSummary],
    selectors_requested: usize,
    selectors_returned: usize,
    selectors_omitted: usize,
) -> Option<Json> {
    let first = signals.first()?;
    let mut worst_phase = first.phase;
    let mut worst_health = first.health;
    for s in &signals[1..] {
        if s.phase > worst_phase {
            worst_phase = s.phase;
        }
        if s.health.rank() > worst_health.rank() {
            worst_health = s.health;
        }
    }
    let oldest = |f: fn(&SignalSummary) -> Option<i64>| opt_int(signals.iter().filter_map(f).max());
    let adequate = signals.iter().filter(|s| s.orientation_adequate).count();
    let object = |pairs: Vec<(&str, Json)>| {
        Json::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    };
    Some(object(vec![
        (
            "recency",
            object(vec![
                ("worst_phase", Json::from(worst_phase.as_str())),
                (
                    "oldest_updated_age_seconds",
                    oldest(|s| s.updated_age_seconds),
                ),
                (
                    "oldest_verified_age_seconds",
                    oldest(|s| s.verified_age_seconds),
                ),
            ]),
        ),
        (
            "completeness",
            object(vec![
                ("all_adequate", Json::Bool(adequate == signals.len())),
                ("adequate_count", Json::from(adequate)),
                ("total_count", Json::from(signals.len())),
                ("any_trimmed", Json::Bool(signals.iter().any(|s| s.trimmed))),
            ]),
        ),
        (
            "integrity",
            object(vec![
                ("worst_health", Json::from(worst_health.as_str())),
                (
                    "any_fallback",
                    Json::Bool(
                        signals
                            .iter()
                            .any(|s| s.source_state == SourceState::Fallback),
                    ),
                ),
                (
                    "any_degraded",
                    Json::Bool(signals.iter().any(|s| s.health == HealthStatus::Degraded)),
                ),
                (
                    "any_conflicted",
                    Json::Bool(signals.iter().any(|s| s.health == HealthStatus::Conflicted)),
                ),
            ]),
        ),
        (
            "scope_match",
            object(vec![
                ("selectors_requested", Json::from(selectors_requested)),
                ("selectors_returned", Json::from(selectors_returned)),
                ("selectors_omitted", Json::from(selectors_omitted)),
                (
                    "all_returned",
                    Json::Bool(
                        selectors_requested == selectors_returned && selectors_requested > 0,
                    ),
                ),
            ]),
        ),
    ]))
}

impl HealthStatus {
    /// `CONTINUITY_HEALTH_ORDER`: healthy 0 < degraded 1 < conflicted 2.
    pub fn rank(self) -> u8 {
        match self {
            HealthStatus::Healthy => 0,
            HealthStatus::Degraded => 1,
            HealthStatus::Conflicted => 2,
        }
    }
}

/// The startup view's `startup_summary` (§7.2): recovery, orientation, context tiers.
pub fn startup_summary(
    capsule: Option<&Capsule>,
    source_state: SourceState,
    recovery_warnings: &[String],
    trust_signals: &Json,
) -> Json {
    let mut warnings: Vec<String> = recovery_warnings.to_vec();
    if let Some(c) = capsule
        && c.subject_kind.is_thread_like()
        && c.thread_descriptor.is_none()
    {
        warnings.push(format!(
            "continuity_thread_descriptor_missing:thread:{}",
            c.subject_id
        ));
    }
    let mut recovery = JsonObject::new();
    recovery.insert("source_state", Json::from(source_state.as_str()));
    recovery.insert("recovery_warnings", strings(&warnings));
    let health = capsule.and_then(|c| c.capsule_health.as_ref());
    recovery.insert(
        "capsule_health_status",
        health.map_or(Json::Null, |h| Json::from(h.status.as_str())),
    );
    recovery.insert(
        "capsule_health_reasons",
        health.map_or(Json::Array(vec![]), |h| strings(&h.reasons)),
    );

    let mut summary = JsonObject::new();
    summary.insert("recovery", Json::Object(recovery));
    match capsule.filter(|_| source_state != SourceState::Missing) {
        None => {
            for key in [
                "orientation",
                "context",
                "updated_at",
                "trust_signals",
                "stable_preferences",
            ] {
                let value = if key == "trust_signals" {
                    trust_signals.clone()
                } else {
                    Json::Null
                };
                summary.insert(key, value);
            }
        }
        Some(c) => {
            let dumped = c.to_json();
            let continuity = dumped.get("continuity").cloned().unwrap_or(Json::Null);
            let field = |name: &str| continuity.get(name).cloned().unwrap_or(Json::Array(vec![]));
            let active_rationale: Vec<Json> = c
                .continuity
                .rationale_entries
                .iter()
                .zip(
                    field("rationale_entries")
                        .as_array()
                        .cloned()
                        .unwrap_or_default(),
                )
                .filter(|(entry, _)| entry.status == RationaleStatus::Active)
                .map(|(_, json)| json)
                .collect();
            let mut orientation = JsonObject::new();
            orientation.insert("top_priorities", field("top_priorities"));
            orientation.insert("active_constraints", field("active_constraints"));
            orientation.insert("open_loops", field("open_loops"));
            orientation.insert("negative_decisions", field("negative_decisions"));
            orientation.insert("rationale_entries", Json::Array(active_rationale));
            let mut context = JsonObject::new();
            context.insert("session_trajectory", field("session_trajectory"));
            context.insert(
                "stance_summary",
                Json::from(c.continuity.stance_summary.as_str()),
            );
            context.insert("active_concerns", field("active_concerns"));
            summary.insert("orientation", Json::Object(orientation));
            summary.insert("context", Json::Object(context));
            summary.insert("updated_at", Json::from(c.updated_at.as_str()));
            summary.insert("trust_signals", trust_signals.clone());
            summary.insert(
                "stable_preferences",
                dumped
                    .get("stable_preferences")
                    .cloned()
                    .unwrap_or(Json::Array(vec![])),
            );
        }
    }
    Json::Object(summary)
}

//! `POST /v1/continuity/list` (digest §8): summary rows, thread-identity filters, the default
//! order and the salience order (§8.1) with `salience_rank` as the original's code has it.

use std::cmp::Ordering;

use time::OffsetDateTime;

use super::json::{Json, JsonObject};
use super::model::{Capsule, Lifecycle, SignalKind, ThreadDescriptor};
use super::request::ListRequest;
use super::text::py_strip;
use super::timestamp::{parse_iso, total_seconds};
use super::trust::{Phase, PhaseClock, phase_checked};
use super::upsert::resume_adequate;
use super::write::{health_summary, verification_status};

/// Archives older than this many days are `archive_stale`.
pub const RETENTION_ARCHIVE_DAYS: i64 = 90;
/// Salience rank of a capsule without a descriptor lifecycle.
pub const NO_DESCRIPTOR_RANK: u8 = 99;
/// `updated_age_seconds` of a capsule without a usable `updated_at`.
pub const MISSING_AGE: i64 = 2_147_483_647;

/// The tiers a row can come from, in the default order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ArtifactState {
    Active,
    Fallback,
    Archived,
    Cold,
}

impl ArtifactState {
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactState::Active => "active",
            ArtifactState::Fallback => "fallback",
            ArtifactState::Archived => "archived",
            ArtifactState::Cold => "cold",
        }
    }
}

/// Whether an archive written at `archived_at` is past the retention window.
pub fn is_archive_stale(
    archived_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
    days: i64,
) -> bool {
    archived_at.is_some_and(|at| total_seconds(now, at) > (days * 86_400) as f64)
}

/// The §8.1 salience key, compared as the original's tuple (ascending).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SalienceKey {
    pub lifecycle_rank: u8,
    pub health_rank: u8,
    pub freshness_rank: u8,
    /// 0 when resume-adequate.
    pub resume_rank: u8,
    /// The verification rank negated, so stronger sorts first.
    pub neg_verification_rank: i8,
    pub updated_age_seconds: i64,
    pub subject_kind: String,
    pub subject_id: String,
}

impl SalienceKey {
    /// The per-capsule `salience.sort_key` block (natural directions).
    pub fn block(&self, rank: usize) -> Json {
        let mut key = JsonObject::new();
        key.insert("lifecycle_rank", Json::from(i64::from(self.lifecycle_rank)));
        key.insert("health_rank", Json::from(i64::from(self.health_rank)));
        key.insert("freshness_rank", Json::from(i64::from(self.freshness_rank)));
        key.insert("resume_adequate", Json::Bool(self.resume_rank == 0));
        key.insert(
            "verification_rank",
            Json::from(-i64::from(self.neg_verification_rank)),
        );
        key.insert("updated_age_seconds", Json::from(self.updated_age_seconds));
        let mut block = JsonObject::new();
        block.insert("rank", Json::from(rank));
        block.insert("sort_key", Json::Object(key));
        Json::Object(block)
    }
}

/// Salience rank of a lifecycle (`None`: no descriptor or no lifecycle).
pub fn lifecycle_rank(lifecycle: Option<Lifecycle>) -> u8 {
    match lifecycle {
        Some(Lifecycle::Active) => 0,
        Some(Lifecycle::Suspended) => 1,
        Some(Lifecycle::Concluded) => 2,
        Some(Lifecycle::Superseded) => 3,
        None => NO_DESCRIPTOR_RANK,
    }
}

/// `floor(now - updated_at)` clamped at 0, or [`MISSING_AGE`].
pub fn updated_age_for_salience(updated_at: Option<&str>, now: OffsetDateTime) -> i64 {
    updated_at
        .filter(|s| !s.is_empty())
        .and_then(parse_iso)
        .map_or(MISSING_AGE, |at| {
            (total_seconds(now, at).floor() as i64).max(0)
        })
}

/// The salience key of a loaded capsule (retrieval names the subject by its selector; list by
/// the capsule's own fields).
pub fn salience_key(
    capsule: &Capsule,
    now: OffsetDateTime,
    subject_kind: &str,
    subject_id: &str,
) -> SalienceKey {
    SalienceKey {
        lifecycle_rank: lifecycle_rank(
            capsule.thread_descriptor.as_ref().and_then(|t| t.lifecycle),
        ),
        health_rank: health_summary(capsule).0.rank(),
        freshness_rank: phase_checked(capsule, now)
            .unwrap_or(Phase::Expired)
            .severity(),
        resume_rank: u8::from(!resume_adequate(capsule)),
        // `verification_state.kind` does not exist on the model; the original falls back to
        // `verification_kind` (digest §15).
        neg_verification_rank: -(capsule.verification_kind.map_or(0, SignalKind::rank) as i8),
        updated_age_seconds: updated_age_for_salience(Some(&capsule.updated_at), now),
        subject_kind: subject_kind.to_owned(),
        subject_id: subject_id.to_owned(),
    }
}

/// One summary row with what filtering and ordering need.
#[derive(Debug, Clone, PartialEq)]
pub struct ListRow {
    pub subject_kind: String,
    pub subject_id: String,
    pub path: String,
    pub artifact_state: ArtifactState,
    pub thread_descriptor: Option<ThreadDescriptor>,
    /// Present on active, fallback and archived rows (salience inputs).
    salience: Option<SalienceKey>,
    /// The row as the original shows it, without `salience_rank`.
    pub json: JsonObject,
}

impl ListRow {
    fn from_capsule(
        capsule: &Capsule,
        path: &str,
        now: OffsetDateTime,
        artifact_state: ArtifactState,
        retention_class: &str,
    ) -> ListRow {
        let phase = phase_checked(capsule, now).unwrap_or(Phase::Expired);
        let (health, reasons) = health_summary(capsule);
        let adequate = resume_adequate(capsule);
        let descriptor = capsule.thread_descriptor.clone();
        let mut row = JsonObject::new();
        row.insert("subject_kind", Json::from(capsule.subject_kind.as_str()));
        row.insert("subject_id", Json::from(capsule.subject_id.as_str()));
        row.insert("path", Json::from(path));
        row.insert("updated_at", Json::from(capsule.updated_at.as_str()));
        row.insert("verified_at", Json::from(capsule.verified_at.as_str()));
        row.insert(
            "verification_kind",
            capsule
                .verification_kind
                .map_or(Json::Null, |k| Json::from(k.as_str())),
        );
        row.insert(
            "freshness_class",
            capsule
                .freshness
                .as_ref()
                .and_then(|f| f.freshness_class)
                .map_or(Json::Null, |c| Json::from(c.as_str())),
        );
        row.insert("phase", Json::from(phase.as_str()));
        row.insert(
            "verification_status",
            Json::from(verification_status(capsule).as_str()),
        );
        row.insert("health_status", Json::from(health.as_str()));
        row.insert(
            "health_reasons",
            Json::Array(reasons.iter().map(|r| Json::from(r.as_str())).collect()),
        );
        row.insert("artifact_state", Json::from(artifact_state.as_str()));
        row.insert("retention_class", Json::from(retention_class));
        row.insert(
            "stable_preference_count",
            Json::from(capsule.stable_preferences.len()),
        );
        row.insert(
            "rationale_entry_count",
            Json::from(capsule.continuity.rationale_entries.len()),
        );
        row.insert(
            "thread_descriptor",
            descriptor.as_ref().map_or(Json::Null, |td| {
                serde_json::from_str(&super::json::to_py_json(td)).unwrap_or(Json::Null)
            }),
        );
        row.insert("resume_adequate", Json::Bool(adequate));
        let salience = SalienceKey {
            lifecycle_rank: lifecycle_rank(descriptor.as_ref().and_then(|t| t.lifecycle)),
            health_rank: health.rank(),
            freshness_rank: phase.severity(),
            resume_rank: u8::from(!adequate),
            neg_verification_rank: -(capsule.verification_kind.map_or(0, SignalKind::rank) as i8),
            updated_age_seconds: updated_age_for_salience(Some(&capsule.updated_at), now),
            subject_kind: capsule.subject_kind.as_str().to_owned(),
            subject_id: capsule.subject_id.clone(),
        };
        ListRow {
            subject_kind: capsule.subject_kind.as_str().to_owned(),
            subject_id: capsule.subject_id.clone(),
            path: path.to_owned(),
            artifact_state,
            thread_descriptor: descriptor,
            salience: Some(salience),
            json: row,
        }
    }

    /// An active capsule's row.
    pub fn active(capsule: &Capsule, path: &str, now: OffsetDateTime) -> ListRow {
        ListRow::from_capsule(capsule, path, now, ArtifactState::Active, "active")
    }

    /// A fallback snapshot's row (`path` is the fallback file).
    pub fn fallback(capsule: &Capsule, path: &str, now: OffsetDateTime) -> ListRow {
        ListRow::from_capsule(capsule, path, now, ArtifactState::Fallback, "fallback")
    }

    /// An archive envelope's row: `path` is the envelope's `active_path` (else the archive
    /// path), plus `archive_path` and `archived_at`.
    pub fn archived(
        capsule: &Capsule,
        archive_path: &str,
        active_path: Option<&str>,
        archived_at: Option<&str>,
        now: OffsetDateTime,
        retention_days: i64,
    ) -> ListRow {
        let stale = is_archive_stale(archived_at.and_then(parse_iso), now, retention_days);
        let class = if stale {
            "archive_stale"
        } else {
            "archive_recent"
        };
        let path = active_path
            .filter(|p| !p.is_empty())
            .unwrap_or(archive_path);
        let mut row = ListRow::from_capsule(capsule, path, now, ArtifactState::Archived, class);
        row.json.insert("archive_path", Json::from(archive_path));
        row.json
            .insert("archived_at", archived_at.map_or(Json::Null, Json::from));
        row
    }

    /// A cold stub's row from its front matter.
    pub fn cold(stub: &ColdStub, stub_path: &str) -> ListRow {
        let or_null = |s: &str| {
            if s.is_empty() {
                Json::Null
            } else {
                Json::from(s)
            }
        };
        let mut row = JsonObject::new();
        row.insert("subject_kind", Json::from(stub.subject_kind.as_str()));
        row.insert("subject_id", Json::from(stub.subject_id.as_str()));
        row.insert("path", Json::from(stub_path));
        row.insert(
            "source_archive_path",
            Json::from(stub.source_archive_path.as_str()),
        );
        row.insert("updated_at", Json::Null);
        row.insert("verified_at", Json::Null);
        row.insert("verification_kind", or_null(&stub.verification_kind));
        row.insert("freshness_class", or_null(&stub.freshness_class));
        row.insert("phase", Json::from(stub.phase.as_str()));
        row.insert(
            "verification_status",
            Json::from(stub.verification_status.as_str()),
        );
        row.insert("health_status", Json::from(stub.health_status.as_str()));
        row.insert("health_reasons", Json::Array(vec![]));
        row.insert("artifact_state", Json::from("cold"));
        row.insert("retention_class", Json::from("cold"));
        row.insert("cold_stub_path", Json::from(stub_path));
        row.insert(
            "cold_storage_path",
            Json::from(stub.cold_storage_path.as_str()),
        );
        row.insert("archived_at", Json::from(stub.archived_at.as_str()));
        row.insert("cold_stored_at", Json::from(stub.cold_stored_at.as_str()));
        row.insert("stable_preference_count", Json::Null);
        row.insert("rationale_entry_count", Json::Null);
        row.insert("thread_descriptor", Json::Null);
        ListRow {
            subject_kind: stub.subject_kind.clone(),
            subject_id: stub.subject_id.clone(),
            path: stub_path.to_owned(),
            artifact_state: ArtifactState::Cold,
            thread_descriptor: None,
            salience: None,
            json: row,
        }
    }

    fn default_key(&self) -> (&str, &str, ArtifactState, &str) {
        (
            &self.subject_kind,
            &self.subject_id,
            self.artifact_state,
            &self.path,
        )
    }
}

/// The front-matter fields of a cold stub a list row shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ColdStub {
    pub subject_kind: String,
    pub subject_id: String,
    pub source_archive_path: String,
    pub cold_storage_path: String,
    pub archived_at: String,
    pub cold_stored_at: String,
    pub verification_kind: String,
    pub verification_status: String,
    pub health_status: String,
    pub freshness_class: String,
    pub phase: String,
}

/// Whether a row passes every thread-identity filter of the request (conjunctive).
pub fn matches_thread_filters(row: &ListRow, request: &ListRequest) -> bool {
    descriptor_matches(row.thread_descriptor.as_ref(), request)
}

/// Whether a thread descriptor passes every thread-identity filter of the request; a row
/// without one passes none.
fn descriptor_matches(td: Option<&ThreadDescriptor>, request: &ListRequest) -> bool {
    let Some(td) = td else {
        return false;
    };
    if let Some(lifecycle) = request.lifecycle
        && td.lifecycle != Some(lifecycle)
    {
        return false;
    }
    if let Some(scope) = &request.scope_anchor {
        let scope = py_strip(&scope.to_lowercase()).to_owned();
        if !td.scope_anchors.contains(&scope) {
            return false;
        }
    }
    if let Some(keyword) = &request.keyword {
        let keyword = py_strip(&keyword.to_lowercase()).to_owned();
        if !td
            .keywords
            .iter()
            .any(|k| py_strip(&k.to_lowercase()) == keyword)
        {
            return false;
        }
    }
    if let Some(label) = &request.label_exact
        && td.label != *label
    {
        return false;
    }
    if request.anchor_kind.is_some() || request.anchor_value.is_some() {
        let kind = request
            .anchor_kind
            .as_ref()
            .map(|k| py_strip(&k.to_lowercase()).to_owned());
        let matched = td.identity_anchors.iter().any(|a| {
            kind.as_ref().is_none_or(|k| a.kind == *k)
                && request.anchor_value.as_ref().is_none_or(|v| a.value == *v)
        });
        if !matched {
            return false;
        }
    }
    true
}

/// Filters, orders and cuts the rows the caller may see (already restricted to the request's
/// `subject_kind` and tiers); returns the response body `{ok, count, capsules, unique_match}`.
pub fn list_response(request: &ListRequest, rows: Vec<ListRow>) -> Json {
    let filtered = request.has_thread_filters();
    let mut rows: Vec<ListRow> = if filtered {
        rows.into_iter()
            .filter(|r| matches_thread_filters(r, request))
            .collect()
    } else {
        rows
    };
    let matched = rows.len();
    let mut out: Vec<Json> = Vec::with_capacity(rows.len());
    if request.salience() {
        let (mut active, mut others): (Vec<ListRow>, Vec<ListRow>) = rows
            .into_iter()
            .partition(|r| r.artifact_state == ArtifactState::Active);
        active.sort_by(|a, b| a.salience.cmp(&b.salience));
        others.sort_by(|a, b| a.default_key().cmp(&b.default_key()));
        for (i, mut row) in active.into_iter().enumerate() {
            row.json.insert("salience_rank", Json::from(i + 1));
            out.push(Json::Object(row.json));
        }
        for mut row in others {
            row.json.insert("salience_rank", Json::Null);
            out.push(Json::Object(row.json));
        }
    } else {
        rows.sort_by(|a, b| a.default_key().cmp(&b.default_key()));
        out.extend(rows.into_iter().map(|r| Json::Object(r.json)));
    }
    out.truncate(usize::try_from(request.limit).unwrap_or(0));
    let mut body = JsonObject::new();
    body.insert("ok", Json::Bool(true));
    body.insert("count", Json::from(out.len()));
    body.insert("capsules", Json::Array(out));
    body.insert("unique_match", Json::Bool(filtered && matched == 1));
    Json::Object(body)
}

/// Sorts loaded capsules by salience (stable for equal keys, which the total key rules out
/// except for the same subject twice).
pub fn salience_order<T>(items: &mut [(SalienceKey, T)]) {
    items.sort_by(|a, b| a.0.cmp(&b.0).then(Ordering::Equal));
}

/// A list row prepared once per stored revision and tier: everything that does not depend on
/// the time already serialised. A list of 1,000 capsules then computes only each phase and
/// salience age, sorts, and copies the bytes of the rows it shows (the same bytes
/// [`list_response`] gives, see [`list_body`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedRow {
    subject_kind: String,
    subject_id: String,
    path: String,
    artifact_state: ArtifactState,
    thread_descriptor: Option<ThreadDescriptor>,
    timing: Timing,
    /// `{` and the members before `phase` (a cold row: every member).
    head: String,
    /// The members after `phase`, each with its leading comma (a cold row: nothing).
    tail: String,
}

/// The time-dependent part of a row.
#[derive(Debug, Clone, PartialEq)]
enum Timing {
    /// A cold stub's row: its phase is the stub's, fixed.
    Fixed,
    /// A capsule's row: the phase and the salience age are computed at the list's time.
    Clocked {
        /// `None`: `verified_at` is not a UTC timestamp, so the phase is `expired`.
        phase: Option<PhaseClock>,
        updated_at: Option<OffsetDateTime>,
        /// The key's parts that do not move with time.
        lifecycle_rank: u8,
        health_rank: u8,
        resume_rank: u8,
        neg_verification_rank: i8,
    },
}

/// A [`SalienceKey`] at a list's time, borrowing the subject from its row (same fields, same
/// order, so it compares the same).
type SalienceAt<'a> = (u8, u8, u8, u8, i8, i64, &'a str, &'a str);

/// Keeps the `count` first of `items` by `order` (a total order), sorted.
fn sort_first<T>(items: &mut Vec<T>, count: usize, mut order: impl FnMut(&T, &T) -> Ordering) {
    if count == 0 {
        items.clear();
        return;
    }
    if items.len() > count {
        items.select_nth_unstable_by(count - 1, &mut order);
        items.truncate(count);
    }
    items.sort_unstable_by(order);
}

/// A string's first eight bytes (zero-padded) and its length capped at nine: ordered as the
/// strings are, and equal only for equal strings of up to eight bytes (wherever the padded
/// bytes agree, the shorter string is a prefix of the longer one, and sorts first).
type StringPrefix = (u64, u8);

/// A salience key's numbers with the prefixes of its subject kind and id, compared before the
/// whole key: most comparisons of a sort then read no row's strings. The id's prefix counts
/// only where the kind's prefix is the whole kind (else two kinds with the same first bytes
/// would be ordered by their ids), so the prefix never contradicts the whole key.
fn sort_prefix(key: &SalienceAt<'_>) -> (u8, u8, u8, u8, i8, i64, StringPrefix, StringPrefix) {
    fn prefix(s: &str) -> StringPrefix {
        let mut bytes = [0u8; 8];
        let n = s.len().min(8);
        bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
        (u64::from_be_bytes(bytes), s.len().min(9) as u8)
    }
    let (lifecycle, health, phase, resume, verification, age, kind, id) = *key;
    let kind = prefix(kind);
    let id = if kind.1 <= 8 { prefix(id) } else { (0, 0) };
    (
        lifecycle,
        health,
        phase,
        resume,
        verification,
        age,
        kind,
        id,
    )
}

/// Where a row stands in the answer's `salience_rank`.
#[derive(Debug, Clone, Copy)]
enum Rank {
    /// Not a salience list: no `salience_rank` member.
    Absent,
    /// A salience list's row outside the active tier.
    Null,
    Ranked(usize),
}

/// Compact JSON of an object's members without its braces (empty for no members).
fn members(object: JsonObject) -> String {
    let text = super::json::to_py_json(&Json::Object(object));
    text.get(1..text.len().saturating_sub(1))
        .unwrap_or_default()
        .to_owned()
}

impl PreparedRow {
    /// A capsule's row (`row` built from `capsule` by [`ListRow`]'s constructors).
    pub fn of_capsule(row: &ListRow, capsule: &Capsule) -> PreparedRow {
        let salience = row.salience.as_ref();
        let timing = Timing::Clocked {
            phase: PhaseClock::of(capsule),
            updated_at: Some(capsule.updated_at.as_str())
                .filter(|s| !s.is_empty())
                .and_then(parse_iso),
            lifecycle_rank: salience.map_or(NO_DESCRIPTOR_RANK, |k| k.lifecycle_rank),
            health_rank: salience.map_or(0, |k| k.health_rank),
            resume_rank: salience.map_or(0, |k| k.resume_rank),
            neg_verification_rank: salience.map_or(0, |k| k.neg_verification_rank),
        };
        PreparedRow::split(row, timing)
    }

    /// A cold stub's row (everything fixed).
    pub fn of_cold(row: &ListRow) -> PreparedRow {
        PreparedRow::split(row, Timing::Fixed)
    }

    fn split(row: &ListRow, timing: Timing) -> PreparedRow {
        let (mut before, mut after) = (JsonObject::new(), JsonObject::new());
        let mut past_phase = false;
        for (key, value) in row.json.iter() {
            let clocked_phase = key == "phase" && matches!(timing, Timing::Clocked { .. });
            if clocked_phase {
                past_phase = true;
            } else if past_phase {
                after.insert(key.as_str(), value.clone());
            } else {
                before.insert(key.as_str(), value.clone());
            }
        }
        let after = members(after);
        PreparedRow {
            subject_kind: row.subject_kind.clone(),
            subject_id: row.subject_id.clone(),
            path: row.path.clone(),
            artifact_state: row.artifact_state,
            thread_descriptor: row.thread_descriptor.clone(),
            timing,
            head: format!("{{{}", members(before)),
            tail: if after.is_empty() {
                after
            } else {
                format!(",{after}")
            },
        }
    }

    fn default_key(&self) -> (&str, &str, ArtifactState, &str) {
        (
            &self.subject_kind,
            &self.subject_id,
            self.artifact_state,
            &self.path,
        )
    }

    fn phase(&self, now: OffsetDateTime) -> Phase {
        match &self.timing {
            Timing::Clocked { phase, .. } => phase.map_or(Phase::Expired, |c| c.at(now)),
            Timing::Fixed => Phase::Expired,
        }
    }

    /// The §8.1 key at `now`, compared as [`SalienceKey`] is (a cold row has none).
    fn salience(&self, now: OffsetDateTime) -> Option<SalienceAt<'_>> {
        let Timing::Clocked {
            updated_at,
            lifecycle_rank,
            health_rank,
            resume_rank,
            neg_verification_rank,
            ..
        } = &self.timing
        else {
            return None;
        };
        let age = updated_at.map_or(MISSING_AGE, |at| {
            (total_seconds(now, at).floor() as i64).max(0)
        });
        Some((
            *lifecycle_rank,
            *health_rank,
            self.phase(now).severity(),
            *resume_rank,
            *neg_verification_rank,
            age,
            &self.subject_kind,
            &self.subject_id,
        ))
    }

    fn write(&self, out: &mut String, now: OffsetDateTime, rank: Rank) {
        out.push_str(&self.head);
        if let Timing::Clocked { .. } = self.timing {
            out.push_str(",\"phase\":\"");
            out.push_str(self.phase(now).as_str());
            out.push('"');
        }
        out.push_str(&self.tail);
        match rank {
            Rank::Absent => {}
            Rank::Null => out.push_str(",\"salience_rank\":null"),
            Rank::Ranked(n) => {
                out.push_str(",\"salience_rank\":");
                out.push_str(&n.to_string());
            }
        }
        out.push('}');
    }
}

/// [`list_response`] over prepared rows at `now`, as the compact bytes the original sends:
/// filters, orders and cuts the rows (in the order the store gave them, which breaks ties
/// the same way), and serialises only the rows the answer shows.
pub fn list_body(request: &ListRequest, rows: &[&PreparedRow], now: OffsetDateTime) -> Vec<u8> {
    let filtered = request.has_thread_filters();
    let rows: Vec<&PreparedRow> = if filtered {
        rows.iter()
            .copied()
            .filter(|r| descriptor_matches(r.thread_descriptor.as_ref(), request))
            .collect()
    } else {
        rows.to_vec()
    };
    let matched = rows.len();
    let limit = usize::try_from(request.limit).unwrap_or(0);
    let mut out: Vec<(&PreparedRow, Rank)> = Vec::with_capacity(rows.len().min(limit));
    if request.salience() {
        let (active, mut others): (Vec<&PreparedRow>, Vec<&PreparedRow>) = rows
            .into_iter()
            .partition(|r| r.artifact_state == ArtifactState::Active);
        // Both keys are total over a list's rows (each subject has one active row; a path
        // names one row), so an unstable sort gives the one order, and only the rows the
        // limit keeps need sorting.
        let mut active: Vec<_> = active
            .into_iter()
            .map(|r| (r.salience(now).map(|key| (sort_prefix(&key), key)), r))
            .collect();
        sort_first(&mut active, limit, |a, b| {
            a.0.cmp(&b.0).then_with(|| a.1.path.cmp(&b.1.path))
        });
        sort_first(&mut others, limit.saturating_sub(active.len()), |a, b| {
            a.default_key().cmp(&b.default_key())
        });
        out.extend(
            active
                .into_iter()
                .enumerate()
                .map(|(i, (_, row))| (row, Rank::Ranked(i + 1))),
        );
        out.extend(others.into_iter().map(|row| (row, Rank::Null)));
    } else {
        let mut rows = rows;
        sort_first(&mut rows, limit, |a, b| {
            a.default_key().cmp(&b.default_key())
        });
        out.extend(rows.into_iter().map(|row| (row, Rank::Absent)));
    }
    out.truncate(limit);
    let mut body = String::with_capacity(
        64 + out
            .iter()
            .map(|(r, _)| r.head.len() + r.tail.len() + 48)
            .sum::<usize>(),
    );
    body.push_str("{\"ok\":true,\"count\":");
    body.push_str(&out.len().to_string());
    body.push_str(",\"capsules\":[");
    for (i, (row, rank)) in out.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        row.write(&mut body, now, *rank);
    }
    body.push_str("],\"unique_match\":");
    body.push_str(if filtered && matched == 1 {
        "true"
    } else {
        "false"
    });
    body.push('}');
    body.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(age: i64, kind: &str, id: &str) -> (u8, u8, u8, u8, i8, i64, String, String) {
        (1, 2, 3, 0, -1, age, kind.to_owned(), id.to_owned())
    }

    proptest! {
        /// The first `count` of a total order, sorted, as a whole sort would give them.
        #[test]
        fn sort_first_keeps_what_a_whole_sort_puts_first(
            items in proptest::collection::vec(any::<u16>(), 0..64),
            count in 0usize..80,
        ) {
            let mut whole = items.clone();
            whole.sort_unstable();
            whole.truncate(count);
            let mut first = items;
            sort_first(&mut first, count, Ord::cmp);
            prop_assert_eq!(first, whole);
        }

        /// Where two prefixes differ they order as the whole keys do.
        #[test]
        fn a_sort_prefix_never_contradicts_its_key(
            ages in (0i64..3, 0i64..3),
            kinds in ("[yz\\x00]{0,10}", "[yz\\x00]{0,10}"),
            ids in ("[ab\\x00é]{0,12}", "[ab\\x00é]{0,12}"),
        ) {
            let a = key(ages.0, &kinds.0, &ids.0);
            let b = key(ages.1, &kinds.1, &ids.1);
            let view = |k: &(u8, u8, u8, u8, i8, i64, String, String)| {
                sort_prefix(&(k.0, k.1, k.2, k.3, k.4, k.5, k.6.as_str(), k.7.as_str()))
            };
            let (pa, pb) = (view(&a), view(&b));
            if pa != pb {
                prop_assert_eq!(pa.cmp(&pb), a.cmp(&b));
            }
        }
    }
}

//! Reconciliations (digest §11): an agent records a disagreement between claims made on
//! handoffs and shared artifacts it can see, and resolves it once (`advisory_only`,
//! `conflicted` or `rejected`) at the version it read; resolving again the same way is a
//! replay (`updated: false`).
//!
//! Opening checks, in the original's order: text bounds, structure (two claims at least, a
//! task or thread, unique claims, `observed_version` for shared claims only, the trigger
//! matching the claims' source kinds), claimants registered and trusted, then each source
//! loaded, visible to the opener, naming its claimant, and (shared) at a version no older
//! than the claim observed.

use time::OffsetDateTime;

use super::super::error::ContinuityError;
use super::super::json::{Json, JsonObject};
use super::super::schema::{Field, Model, Ty};
use super::utc_now_text;
use super::{
    COMMIT_MESSAGE, LIMIT, OFFSET, forbidden, integer, string_array, strings, text, text_or_null,
};

pub const DIR: &str = "memory/coordination/reconciliations";
pub const PREFIX: &str = "recon_";
pub const INVALID_ID: &str = "Invalid reconciliation artifact id";
pub const NOT_FOUND: &str = "Reconciliation artifact not found";

pub const CLASSIFICATIONS: &[&str] = &[
    "contradictory",
    "stale_observation",
    "frame_conflict",
    "concurrent_race",
];
pub const TRIGGERS: &[&str] = &[
    "handoff_vs_handoff",
    "shared_vs_shared",
    "handoff_vs_shared",
    "concurrent_mutation_race",
];
const OUTCOMES: &[&str] = &["advisory_only", "conflicted", "rejected"];
const EPISTEMIC: &[&str] = &[
    "frame_present",
    "frame_absent_evidence_confirms",
    "frame_status_unknown",
];

const ANY_STR: Ty = Ty::Str { min: 0, max: None };
const OPTIONAL_200: Ty = Ty::Nullable(&Ty::Str {
    min: 0,
    max: Some(200),
});

/// `check_open`'s and `resolve`'s bounds, beyond the model's.
const TITLE: Ty = Ty::Documented(&ANY_STR, super::super::rules::chars::<1, 120>);
const SUMMARY: Ty = Ty::Documented(&ANY_STR, super::super::rules::chars::<1, 240>);
const EVIDENCE: Ty = Ty::Documented(&ANY_STR, super::super::rules::chars::<1, 160>);
/// `check_open`: two claims at least (the model allows fewer), no two the same.
fn two_claims() -> serde_json::Value {
    serde_json::json!({"minItems": 2, "uniqueItems": true})
}

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

pub static CLAIM: Model = Model {
    name: "CoordinationReconciliationClaim",
    fields: &[
        field("source_kind", Ty::Literal(&["handoff", "shared"]), true),
        field(
            "source_id",
            Ty::Str {
                min: 1,
                max: Some(64),
            },
            true,
        ),
        field(
            "claimant_peer",
            Ty::Str {
                min: 1,
                max: Some(200),
            },
            true,
        ),
        field("claim_summary", SUMMARY, true),
        field("epistemic_status", Ty::Literal(EPISTEMIC), true),
        field(
            "evidence_refs",
            Ty::List {
                item: &EVIDENCE,
                min: None,
                max: Some(4),
            },
            false,
        ),
        field(
            "observed_version",
            Ty::Nullable(&Ty::Int {
                ge: Some(1),
                le: None,
            }),
            false,
        ),
    ],
    forbid_extra: true,
    after: None,
};

pub static OPEN_REQUEST: Model = Model {
    name: "CoordinationReconciliationOpenRequest",
    fields: &[
        field("task_id", OPTIONAL_200, false),
        field("thread_id", OPTIONAL_200, false),
        field("title", TITLE, true),
        field("summary", Ty::Nullable(&SUMMARY), false),
        field("classification", Ty::Literal(CLASSIFICATIONS), true),
        field("trigger", Ty::Literal(TRIGGERS), true),
        field(
            "claims",
            Ty::Documented(
                &Ty::List {
                    item: &Ty::Model(&CLAIM),
                    min: None,
                    max: Some(4),
                },
                two_claims,
            ),
            false,
        ),
        field("commit_message", COMMIT_MESSAGE, false),
        super::signing::REQUEST_FIELD,
    ],
    forbid_extra: true,
    after: None,
};

pub static RESOLVE_REQUEST: Model = Model {
    name: "CoordinationReconciliationResolveRequest",
    fields: &[
        field(
            "expected_version",
            Ty::Int {
                ge: Some(1),
                le: None,
            },
            true,
        ),
        field("outcome", Ty::Literal(OUTCOMES), true),
        field("resolution_summary", Ty::Nullable(&SUMMARY), false),
        field("commit_message", COMMIT_MESSAGE, false),
        super::signing::REQUEST_FIELD,
    ],
    forbid_extra: true,
    after: None,
};

pub static QUERY: Model = Model {
    name: "CoordinationReconciliationQuery",
    fields: &[
        field("owner_peer", Ty::Nullable(&ANY_STR), false),
        field("claimant_peer", Ty::Nullable(&ANY_STR), false),
        field(
            "status",
            Ty::Nullable(&Ty::Literal(&["open", "resolved"])),
            false,
        ),
        field(
            "classification",
            Ty::Nullable(&Ty::Literal(CLASSIFICATIONS)),
            false,
        ),
        field("task_id", Ty::Nullable(&ANY_STR), false),
        field("thread_id", Ty::Nullable(&ANY_STR), false),
        OFFSET,
        LIMIT,
    ],
    forbid_extra: false,
    after: None,
};

/// `memory/coordination/reconciliations/<id>.json`.
pub fn path(reconciliation_id: &str) -> String {
    format!("{DIR}/{reconciliation_id}.json")
}

/// One claim of an open request, as validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub source_kind: String,
    pub source_id: String,
    pub claimant_peer: String,
    pub observed_version: Option<i64>,
    /// The claim as the artifact stores it (the model's key order).
    pub document: JsonObject,
}

/// A validated open request.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRequest {
    pub body: JsonObject,
    pub claims: Vec<Claim>,
}

fn too(what: &str, field: &str) -> ContinuityError {
    ContinuityError::invalid(format!(
        "Value too {what} in coordination_reconciliation.{field}"
    ))
}

fn bounded(value: &str, min: usize, max: usize, name: &str) -> Result<(), ContinuityError> {
    match value.chars().count() {
        n if n < min => Err(too("short", name)),
        n if n > max => Err(too("long", name)),
        _ => Ok(()),
    }
}

/// An open request: the model (422), then the original's text bounds and structure (400).
pub fn check_open(body: &Json) -> Result<OpenRequest, ContinuityError> {
    let body = super::validated(&OPEN_REQUEST, body)?;
    let claims: Vec<Claim> = body
        .get("claims")
        .and_then(Json::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Json::as_object)
                .map(|c| {
                    let mut d = JsonObject::new();
                    for name in [
                        "source_kind",
                        "source_id",
                        "claimant_peer",
                        "claim_summary",
                        "epistemic_status",
                    ] {
                        d.insert(name, text_or_null(c, name));
                    }
                    d.insert("evidence_refs", string_array(&strings(c, "evidence_refs")));
                    d.insert(
                        "observed_version",
                        integer(c, "observed_version").map_or(Json::Null, Json::from),
                    );
                    Claim {
                        source_kind: text(c, "source_kind").unwrap_or_default(),
                        source_id: text(c, "source_id").unwrap_or_default(),
                        claimant_peer: text(c, "claimant_peer").unwrap_or_default(),
                        observed_version: integer(c, "observed_version"),
                        document: d,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    // Text bounds.
    bounded(&text(&body, "title").unwrap_or_default(), 1, 120, "title")?;
    if let Some(summary) = text(&body, "summary") {
        bounded(&summary, 1, 240, "summary")?;
    }
    super::check_commit_message(&Json::Object(body.clone()), "reconciliation")?;
    for claim in &claims {
        let summary = text(&claim.document, "claim_summary").unwrap_or_default();
        bounded(&summary, 1, 240, "claim_summary")?;
        for evidence in strings(&claim.document, "evidence_refs") {
            bounded(&evidence, 1, 160, "evidence_refs")?;
        }
    }
    // Structure.
    if claims.len() < 2 {
        return Err(ContinuityError::invalid(
            "Reconciliation must include at least two claims",
        ));
    }
    if text(&body, "task_id").is_none() && text(&body, "thread_id").is_none() {
        return Err(ContinuityError::invalid("task_id or thread_id is required"));
    }
    let mut seen: Vec<(&str, &str, &str)> = Vec::new();
    let (mut handoffs, mut shared) = (false, false);
    for claim in &claims {
        let key = (
            claim.source_kind.as_str(),
            claim.source_id.as_str(),
            claim.claimant_peer.as_str(),
        );
        if seen.contains(&key) {
            return Err(ContinuityError::invalid(
                "Reconciliation claims must be unique",
            ));
        }
        seen.push(key);
        match claim.source_kind.as_str() {
            "shared" => {
                shared = true;
                if claim.observed_version.is_none() {
                    return Err(ContinuityError::invalid(
                        "observed_version is required for shared claims",
                    ));
                }
            }
            _ => {
                handoffs = true;
                if claim.observed_version.is_some() {
                    return Err(ContinuityError::invalid(
                        "observed_version is not allowed for handoff claims",
                    ));
                }
            }
        }
    }
    let matches = match text(&body, "trigger").as_deref() {
        Some("handoff_vs_handoff") => handoffs && !shared,
        Some("shared_vs_shared" | "concurrent_mutation_race") => shared && !handoffs,
        Some("handoff_vs_shared") => handoffs && shared,
        _ => false,
    };
    if !matches {
        return Err(ContinuityError::invalid(
            "trigger does not match claim source kinds",
        ));
    }
    Ok(OpenRequest { body, claims })
}

/// 400 `Referenced source artifact is invalid: <id>` unless the id fits its kind.
pub fn check_source_id(claim: &Claim) -> Result<(), ContinuityError> {
    let prefix = if claim.source_kind == "shared" {
        super::shared::PREFIX
    } else {
        super::handoff::PREFIX
    };
    super::check_id(
        &claim.source_id,
        prefix,
        &format!("Referenced source artifact is invalid: {}", claim.source_id),
    )
}

/// A source a claim names, as loaded.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Handoff(super::handoff::Handoff),
    Shared(super::shared::Shared),
}

/// The checks of one loaded source: the opener sees it (403), the claimant takes part in it
/// (400), a shared claim observed no newer version than stored (400).
pub fn check_source(
    claim: &Claim,
    source: &Source,
    opener: &str,
    admin: bool,
) -> Result<(), ContinuityError> {
    let (visible, member, kind) = match source {
        Source::Handoff(h) => (
            h.visible_to(opener, admin),
            h.has_party(&claim.claimant_peer),
            "handoff",
        ),
        Source::Shared(s) => (
            s.visible_to(opener, admin),
            s.has_party(&claim.claimant_peer),
            "shared",
        ),
    };
    if !visible {
        return Err(forbidden(
            "Referenced source artifact not visible to caller",
        ));
    }
    if !member {
        return Err(ContinuityError::invalid(format!(
            "Claimant peer is not recognized on referenced {kind} artifact"
        )));
    }
    if let (Source::Shared(s), Some(observed)) = (source, claim.observed_version)
        && observed > s.version()
    {
        return Err(ContinuityError::invalid(
            "observed_version exceeds stored shared version",
        ));
    }
    Ok(())
}

/// A stored reconciliation.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciliation {
    pub document: JsonObject,
}

impl Reconciliation {
    pub fn id(&self) -> String {
        text(&self.document, "reconciliation_id").unwrap_or_default()
    }
    pub fn owner(&self) -> String {
        text(&self.document, "owner_peer").unwrap_or_default()
    }
    pub fn participants(&self) -> Vec<String> {
        strings(&self.document, "participant_peers")
    }
    pub fn status(&self) -> String {
        text(&self.document, "status").unwrap_or_else(|| "open".to_owned())
    }
    pub fn classification(&self) -> String {
        text(&self.document, "classification").unwrap_or_default()
    }
    pub fn version(&self) -> i64 {
        integer(&self.document, "version").unwrap_or(0)
    }
    pub fn created_at(&self) -> String {
        text(&self.document, "created_at").unwrap_or_default()
    }
    pub fn updated_at(&self) -> String {
        text(&self.document, "updated_at").unwrap_or_default()
    }
    pub fn path(&self) -> String {
        path(&self.id())
    }

    /// Peers that made a claim in it.
    pub fn claimants(&self) -> Vec<String> {
        self.document
            .get("claims")
            .and_then(Json::as_array)
            .map(|claims| {
                claims
                    .iter()
                    .filter_map(|c| c.get("claimant_peer").and_then(Json::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn visible_to(&self, peer: &str, admin: bool) -> bool {
        admin || peer == self.owner() || self.participants().iter().any(|p| p == peer)
    }

    /// Owner, participant or admin (403 otherwise).
    pub fn check_visible(&self, peer: &str, admin: bool) -> Result<(), ContinuityError> {
        if self.visible_to(peer, admin) {
            Ok(())
        } else {
            Err(forbidden("Reconciliation artifact not visible to caller"))
        }
    }
}

/// The reconciliation an open request makes.
pub fn open(
    request: &OpenRequest,
    reconciliation_id: &str,
    owner: &str,
    now: OffsetDateTime,
) -> Reconciliation {
    let stamp = utc_now_text(now);
    let mut participants: Vec<String> = Vec::new();
    for claim in &request.claims {
        if claim.claimant_peer != owner && !participants.contains(&claim.claimant_peer) {
            participants.push(claim.claimant_peer.clone());
        }
    }
    let body = &request.body;
    let mut d = JsonObject::new();
    d.insert(
        "schema_type",
        Json::from("coordination_reconciliation_record"),
    );
    d.insert("schema_version", Json::from("1.0"));
    d.insert("reconciliation_id", Json::from(reconciliation_id));
    d.insert("created_at", Json::from(stamp.as_str()));
    d.insert("updated_at", Json::from(stamp));
    d.insert("opened_by", Json::from(owner));
    d.insert("owner_peer", Json::from(owner));
    d.insert("participant_peers", string_array(&participants));
    d.insert("task_id", text_or_null(body, "task_id"));
    d.insert("thread_id", text_or_null(body, "thread_id"));
    d.insert("title", text_or_null(body, "title"));
    d.insert("summary", text_or_null(body, "summary"));
    d.insert("classification", text_or_null(body, "classification"));
    d.insert("trigger", text_or_null(body, "trigger"));
    d.insert(
        "claims",
        Json::Array(
            request
                .claims
                .iter()
                .map(|c| Json::Object(c.document.clone()))
                .collect(),
        ),
    );
    d.insert("status", Json::from("open"));
    d.insert("resolution_outcome", Json::Null);
    d.insert("resolution_summary", Json::Null);
    d.insert("resolved_at", Json::Null);
    d.insert("resolved_by", Json::Null);
    d.insert("version", Json::from(1_i64));
    d.insert("last_updated_by", Json::from(owner));
    Reconciliation { document: d }
}

/// A resolve request, validated (422) before anything is loaded.
pub fn check_resolve(body: &Json) -> Result<JsonObject, ContinuityError> {
    super::validated(&RESOLVE_REQUEST, body)
}

/// What a resolve request does.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Already resolved the same way: nothing to write.
    Replay,
    Updated(Reconciliation),
}

/// `record` resolved by `peer` at `now`: owner or admin (403), a summary (400), once (409),
/// at the version read (409).
pub fn resolve(
    record: &Reconciliation,
    request: &JsonObject,
    peer: &str,
    admin: bool,
    now: OffsetDateTime,
) -> Result<Resolved, ContinuityError> {
    if peer != record.owner() && !admin {
        return Err(forbidden(
            "Only the owner may resolve this reconciliation artifact",
        ));
    }
    let summary = text(request, "resolution_summary").ok_or_else(|| {
        ContinuityError::invalid("resolution_summary is required for reconciliation resolve")
    })?;
    bounded(&summary, 1, 240, "resolution_summary")?;
    super::check_commit_message(&Json::Object(request.clone()), "reconciliation")?;
    let outcome = text(request, "outcome").unwrap_or_default();
    if record.status() == "resolved" {
        let same = text(&record.document, "resolution_outcome").as_deref() == Some(&outcome)
            && text(&record.document, "resolution_summary").as_deref() == Some(&summary);
        if same {
            return Ok(Resolved::Replay);
        }
        return Err(super::conflict("Reconciliation has already been resolved"));
    }
    let current = record.version();
    if integer(request, "expected_version") != Some(current) {
        return Err(super::conflict("Reconciliation version conflict"));
    }
    let stamp = utc_now_text(now);
    let mut d = record.document.clone();
    d.insert("status", Json::from("resolved"));
    d.insert("resolution_outcome", Json::from(outcome));
    d.insert("resolution_summary", Json::from(summary));
    d.insert("resolved_at", Json::from(stamp.as_str()));
    d.insert("resolved_by", Json::from(peer));
    d.insert("updated_at", Json::from(stamp));
    d.insert("last_updated_by", Json::from(peer));
    d.insert("version", Json::from(current + 1));
    Ok(Resolved::Updated(Reconciliation { document: d }))
}

/// The longest query filter the original's model takes.
const FILTER_CHARS: usize = 200;

/// A reconciliation query: its filters and page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciliationQuery {
    pub owner_peer: Option<String>,
    pub claimant_peer: Option<String>,
    pub status: Option<String>,
    pub classification: Option<String>,
    pub task_id: Option<String>,
    pub thread_id: Option<String>,
    pub offset: usize,
    pub limit: usize,
}

impl ReconciliationQuery {
    /// The parameters (422), one filter at least (400), then the identity rule (403): a
    /// non-admin names itself as owner or claimant and no one else.
    pub fn from_json(params: &Json, peer: &str, admin: bool) -> Result<Self, ContinuityError> {
        let q = super::validated_query(&QUERY, params)?;
        let (offset, limit) = super::paging(&q);
        let query = ReconciliationQuery {
            owner_peer: text(&q, "owner_peer"),
            claimant_peer: text(&q, "claimant_peer"),
            status: text(&q, "status"),
            classification: text(&q, "classification"),
            task_id: text(&q, "task_id"),
            thread_id: text(&q, "thread_id"),
            offset,
            limit,
        };
        super::filters_too_long(
            "Invalid reconciliation query",
            "CoordinationReconciliationQueryRequest",
            &[
                ("owner_peer", &query.owner_peer),
                ("claimant_peer", &query.claimant_peer),
                ("task_id", &query.task_id),
                ("thread_id", &query.thread_id),
            ],
            FILTER_CHARS,
        )?;
        let none = [
            &query.owner_peer,
            &query.claimant_peer,
            &query.status,
            &query.classification,
            &query.task_id,
            &query.thread_id,
        ]
        .iter()
        .all(|f| f.is_none());
        if none {
            return Err(ContinuityError::invalid(
                "At least one reconciliation query filter is required",
            ));
        }
        if !admin {
            let me = Some(peer.to_owned());
            let names_self = query.owner_peer == me || query.claimant_peer == me;
            let names_other = query.owner_peer.as_ref().is_some_and(|p| p != peer)
                || query.claimant_peer.as_ref().is_some_and(|p| p != peer);
            if !names_self || names_other {
                return Err(forbidden(
                    "Non-admin callers may query only their own reconciliation identity",
                ));
            }
        }
        Ok(query)
    }

    /// The filters the store does not apply: claimant and classification.
    pub fn keeps(&self, record: &Reconciliation) -> bool {
        self.claimant_peer
            .as_ref()
            .is_none_or(|c| record.claimants().contains(c))
            && self
                .classification
                .as_ref()
                .is_none_or(|c| *c == record.classification())
    }
}

/// The visible matches, most recently updated first (then by id), as one page.
pub fn query_body(mut found: Vec<Reconciliation>, query: &ReconciliationQuery) -> Json {
    found.sort_by(|a, b| {
        b.updated_at()
            .cmp(&a.updated_at())
            .then_with(|| a.id().cmp(&b.id()))
    });
    super::query_body(
        "reconciliations",
        found
            .into_iter()
            .map(|r| Json::Object(r.document))
            .collect(),
        query.offset,
        query.limit,
    )
}

//! Handoffs (digest §11): one sender hands one recipient the shareable part of an active
//! capsule (`active_constraints`, `drift_signals`) with a summary of its state; the recipient
//! alone consumes it once (`accepted_advisory`, `deferred` or `rejected`), and consuming it
//! again the same way is a replay (`updated: false`).

use time::OffsetDateTime;

use super::super::error::ContinuityError;
use super::super::json::{Json, JsonObject};
use super::super::model::{Capsule, SUBJECT_KINDS};
use super::super::schema::{Field, Model, Ty};
use super::super::write::{health_summary, verification_status};
use super::report::{Failure, validation_error};
use super::utc_now_text;
use super::{COMMIT_MESSAGE, LIMIT, OFFSET, forbidden, string_array, text, text_or_null};

pub const DIR: &str = "memory/coordination/handoffs";
pub const PREFIX: &str = "handoff_";
pub const INVALID_ID: &str = "Invalid handoff artifact id";
pub const NOT_FOUND: &str = "Handoff artifact not found";
pub const STATUSES: &[&str] = &["pending", "accepted_advisory", "deferred", "rejected"];
const CONSUME_STATUSES: &[&str] = &["accepted_advisory", "deferred", "rejected"];
/// How many constraints and drift signals the artifact's model admits.
const SHARED_ITEMS: usize = 5;
/// The longest peer id a query names, in characters.
const PEER_CHARS: usize = 200;

const ANY_STR: Ty = Ty::Str { min: 0, max: None };
const PEER: Ty = Ty::Str {
    min: 1,
    max: Some(200),
};
const OPTIONAL_200: Ty = Ty::Nullable(&Ty::Str {
    min: 0,
    max: Some(200),
});
/// A peer a query names: at most 200 characters (`HandoffQuery::from_json`).
const QUERY_PEER: Ty = Ty::Nullable(&Ty::Documented(
    &ANY_STR,
    super::super::rules::at_most::<PEER_CHARS>,
));
const OPTIONAL_240: Ty = Ty::Nullable(&Ty::Str {
    min: 0,
    max: Some(240),
});

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

pub static CREATE_REQUEST: Model = Model {
    name: "CoordinationHandoffCreateRequest",
    fields: &[
        field("recipient_peer", PEER, true),
        field("subject_kind", Ty::Literal(SUBJECT_KINDS), true),
        field("subject_id", PEER, true),
        field("task_id", OPTIONAL_200, false),
        field("thread_id", OPTIONAL_200, false),
        field("note", OPTIONAL_240, false),
        field("commit_message", COMMIT_MESSAGE, false),
        super::signing::REQUEST_FIELD,
    ],
    forbid_extra: false,
    after: None,
};

pub static CONSUME_REQUEST: Model = Model {
    name: "CoordinationHandoffConsumeRequest",
    fields: &[
        field("status", Ty::Literal(CONSUME_STATUSES), true),
        field("reason", OPTIONAL_240, false),
    ],
    forbid_extra: false,
    after: None,
};

pub static QUERY: Model = Model {
    name: "CoordinationHandoffQuery",
    fields: &[
        field("recipient_peer", QUERY_PEER, false),
        field("sender_peer", QUERY_PEER, false),
        field("status", Ty::Nullable(&Ty::Literal(STATUSES)), false),
        OFFSET,
        LIMIT,
    ],
    forbid_extra: false,
    after: None,
};

/// `memory/coordination/handoffs/<id>.json`.
pub fn path(handoff_id: &str) -> String {
    format!("{DIR}/{handoff_id}.json")
}

/// A stored handoff.
#[derive(Debug, Clone, PartialEq)]
pub struct Handoff {
    pub document: JsonObject,
}

impl Handoff {
    pub fn id(&self) -> String {
        text(&self.document, "handoff_id").unwrap_or_default()
    }
    pub fn sender(&self) -> String {
        text(&self.document, "sender_peer").unwrap_or_default()
    }
    pub fn recipient(&self) -> String {
        text(&self.document, "recipient_peer").unwrap_or_default()
    }
    pub fn status(&self) -> String {
        text(&self.document, "recipient_status").unwrap_or_else(|| "pending".to_owned())
    }
    pub fn created_at(&self) -> String {
        text(&self.document, "created_at").unwrap_or_default()
    }
    pub fn path(&self) -> String {
        path(&self.id())
    }

    /// Sender, recipient or admin (403 otherwise).
    pub fn check_visible(&self, peer: &str, admin: bool) -> Result<(), ContinuityError> {
        if self.visible_to(peer, admin) {
            Ok(())
        } else {
            Err(forbidden("Handoff artifact not visible to caller"))
        }
    }

    pub fn visible_to(&self, peer: &str, admin: bool) -> bool {
        admin || peer == self.sender() || peer == self.recipient()
    }

    /// Whether `peer` takes part in it (the reconciliation claimant rule).
    pub fn has_party(&self, peer: &str) -> bool {
        peer == self.sender() || peer == self.recipient()
    }
}

/// A create request, validated (422) before anything is loaded.
pub fn check_create(body: &Json) -> Result<JsonObject, ContinuityError> {
    super::validated(&CREATE_REQUEST, body)
}

/// The handoff `request` makes from the active `capsule` at `source_path`.
pub fn create(
    request: &JsonObject,
    handoff_id: &str,
    sender: &str,
    capsule: &Capsule,
    source_path: &str,
    now: OffsetDateTime,
) -> Result<Handoff, ContinuityError> {
    let constraints = &capsule.continuity.active_constraints;
    let drift = &capsule.continuity.drift_signals;
    // The original's artifact model refuses more than five, uncaught (a 500). A capsule
    // admits up to eight constraints but only five drift signals.
    let too_long: Vec<Failure> = [
        ("shared_continuity.active_constraints", constraints),
        ("shared_continuity.drift_signals", drift),
    ]
    .into_iter()
    .filter(|(_, items)| items.len() > SHARED_ITEMS)
    .map(|(loc, items)| Failure::list_too_long(loc, items, SHARED_ITEMS))
    .collect();
    if !too_long.is_empty() {
        return Err(ContinuityError::Unhandled {
            code: "ValidationError".to_owned(),
            detail: validation_error("CoordinationHandoffArtifact", &too_long),
        });
    }
    let mut selector = JsonObject::new();
    selector.insert("subject_kind", text_or_null(request, "subject_kind"));
    selector.insert("subject_id", text_or_null(request, "subject_id"));
    let mut summary = JsonObject::new();
    summary.insert("path", Json::from(source_path));
    summary.insert("updated_at", Json::from(capsule.updated_at.as_str()));
    summary.insert("verified_at", Json::from(capsule.verified_at.as_str()));
    summary.insert(
        "verification_status",
        Json::from(verification_status(capsule).as_str()),
    );
    summary.insert(
        "health_status",
        Json::from(health_summary(capsule).0.as_str()),
    );
    let mut shared = JsonObject::new();
    shared.insert("active_constraints", string_array(constraints));
    shared.insert("drift_signals", string_array(drift));
    let mut d = JsonObject::new();
    d.insert("schema_type", Json::from("continuity_handoff"));
    d.insert("schema_version", Json::from("1.0"));
    d.insert("handoff_id", Json::from(handoff_id));
    d.insert("created_at", Json::from(utc_now_text(now)));
    d.insert("created_by", Json::from(sender));
    d.insert("sender_peer", Json::from(sender));
    d.insert("recipient_peer", text_or_null(request, "recipient_peer"));
    d.insert("source_selector", Json::Object(selector));
    d.insert("source_summary", Json::Object(summary));
    d.insert("task_id", text_or_null(request, "task_id"));
    d.insert("thread_id", text_or_null(request, "thread_id"));
    d.insert("note", text_or_null(request, "note"));
    d.insert("shared_continuity", Json::Object(shared));
    d.insert("recipient_status", Json::from("pending"));
    d.insert("recipient_reason", Json::Null);
    d.insert("consumed_at", Json::Null);
    d.insert("consumed_by", Json::Null);
    Ok(Handoff { document: d })
}

/// What a consume request does to a handoff.
#[derive(Debug, Clone, PartialEq)]
pub enum Consumed {
    /// The same status and reason as stored: nothing to write.
    Replay,
    Updated(Handoff),
}

/// A consume request, validated (422) before anything is loaded.
pub fn check_consume(body: &Json) -> Result<JsonObject, ContinuityError> {
    super::validated(&CONSUME_REQUEST, body)
}

/// `handoff` consumed by `peer` at `now`: recipient only (403), once (409), a replay of the
/// stored outcome changes nothing.
pub fn consume(
    handoff: &Handoff,
    request: &JsonObject,
    peer: &str,
    now: OffsetDateTime,
) -> Result<Consumed, ContinuityError> {
    if peer != handoff.recipient() {
        return Err(forbidden(
            "Only the intended recipient may consume this handoff",
        ));
    }
    let status = text(request, "status").unwrap_or_default();
    let reason = text_or_null(request, "reason");
    let stored_reason = handoff
        .document
        .get("recipient_reason")
        .cloned()
        .unwrap_or(Json::Null);
    if handoff.status() == status && stored_reason == reason {
        return Ok(Consumed::Replay);
    }
    if handoff.status() != "pending" {
        return Err(super::conflict("Handoff has already been consumed"));
    }
    let mut d = handoff.document.clone();
    d.insert("recipient_status", Json::from(status));
    d.insert("recipient_reason", reason);
    d.insert("consumed_at", Json::from(utc_now_text(now)));
    d.insert("consumed_by", Json::from(peer));
    Ok(Consumed::Updated(Handoff { document: d }))
}

/// A handoff query: its filters (one identity at least) and page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffQuery {
    pub recipient_peer: Option<String>,
    pub sender_peer: Option<String>,
    pub status: Option<String>,
    pub offset: usize,
    pub limit: usize,
}

impl HandoffQuery {
    /// The query parameters (422 as FastAPI validates them), then the original's rules: an
    /// identity is required (400), and a non-admin may name only itself (403).
    pub fn from_json(params: &Json, peer: &str, admin: bool) -> Result<Self, ContinuityError> {
        let q = super::validated_query(&QUERY, params)?;
        let (offset, limit) = super::paging(&q);
        let query = HandoffQuery {
            recipient_peer: text(&q, "recipient_peer"),
            sender_peer: text(&q, "sender_peer"),
            status: text(&q, "status"),
            offset,
            limit,
        };
        super::filters_too_long(
            "Invalid coordination handoff query",
            "CoordinationHandoffQueryRequest",
            &[
                ("recipient_peer", &query.recipient_peer),
                ("sender_peer", &query.sender_peer),
            ],
            PEER_CHARS,
        )?;
        if query.recipient_peer.is_none() && query.sender_peer.is_none() {
            return Err(ContinuityError::invalid(
                "recipient_peer or sender_peer is required",
            ));
        }
        let own = |v: &Option<String>| admin || v.as_ref().is_none_or(|v| v == peer);
        if !own(&query.recipient_peer) || !own(&query.sender_peer) {
            return Err(forbidden(
                "Non-admin callers may query only their own handoff identity",
            ));
        }
        Ok(query)
    }
}

/// The visible matches, newest first (then by id), as one page.
pub fn query_body(mut found: Vec<Handoff>, query: &HandoffQuery) -> Json {
    found.sort_by(|a, b| {
        b.created_at()
            .cmp(&a.created_at())
            .then_with(|| a.id().cmp(&b.id()))
    });
    super::query_body(
        "handoffs",
        found
            .into_iter()
            .map(|h| Json::Object(h.document))
            .collect(),
        query.offset,
        query.limit,
    )
}

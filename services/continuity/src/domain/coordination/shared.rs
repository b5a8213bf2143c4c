//! Shared artifacts (digest §11): coordination state one owner writes for up to eight
//! registered participants. The owner alone updates it, naming the version it read
//! (`expected_version`; 409 `Shared coordination version conflict` otherwise); each update
//! replaces the state wholesale and keeps the superseded version in the artifact's history.

use time::OffsetDateTime;

use super::super::error::ContinuityError;
use super::super::json::{Json, JsonObject};
use super::super::schema::{Field, Model, Ty};
use super::utc_now_text;
use super::{
    COMMIT_MESSAGE, LIMIT, OFFSET, forbidden, integer, string_array, strings, text, text_or_null,
};

pub const DIR: &str = "memory/coordination/shared";
pub const PREFIX: &str = "shared_";
pub const INVALID_ID: &str = "Invalid shared coordination artifact id";
pub const NOT_FOUND: &str = "Shared coordination artifact not found";
pub const VERSION_CONFLICT: &str = "Shared coordination version conflict";

const ANY_STR: Ty = Ty::Str { min: 0, max: None };
const PEER: Ty = Ty::Str {
    min: 1,
    max: Some(200),
};
const OPTIONAL_200: Ty = Ty::Nullable(&Ty::Str {
    min: 0,
    max: Some(200),
});
/// `check_state`'s bounds, beyond the model's.
const TITLE: Ty = Ty::Documented(&ANY_STR, super::super::rules::chars::<1, 120>);
const SUMMARY: Ty = Ty::Nullable(&Ty::Documented(
    &ANY_STR,
    super::super::rules::chars::<1, 240>,
));
const ITEM: Ty = Ty::Documented(&ANY_STR, super::super::rules::chars::<1, 160>);
const ITEMS: Ty = Ty::List {
    item: &ITEM,
    min: None,
    max: Some(8),
};

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

pub static CREATE_REQUEST: Model = Model {
    name: "CoordinationSharedCreateRequest",
    fields: &[
        // Required here: the original's request model defaults it to `[]` without checking
        // the default, then fails building the artifact (which needs one) with a 500.
        field(
            "participant_peers",
            Ty::List {
                item: &PEER,
                min: Some(1),
                max: Some(8),
            },
            true,
        ),
        field("task_id", OPTIONAL_200, false),
        field("thread_id", OPTIONAL_200, false),
        field("title", TITLE, true),
        field("summary", SUMMARY, false),
        field("constraints", ITEMS, false),
        field("drift_signals", ITEMS, false),
        field("coordination_alerts", ITEMS, false),
        field("commit_message", COMMIT_MESSAGE, false),
        super::signing::REQUEST_FIELD,
    ],
    forbid_extra: false,
    after: None,
};

pub static UPDATE_REQUEST: Model = Model {
    name: "CoordinationSharedUpdateRequest",
    fields: &[
        field(
            "expected_version",
            Ty::Int {
                ge: Some(1),
                le: None,
            },
            true,
        ),
        field("title", TITLE, true),
        field("summary", SUMMARY, false),
        field("constraints", ITEMS, false),
        field("drift_signals", ITEMS, false),
        field("coordination_alerts", ITEMS, false),
        field("commit_message", COMMIT_MESSAGE, false),
        super::signing::REQUEST_FIELD,
    ],
    forbid_extra: true,
    after: None,
};

pub static QUERY: Model = Model {
    name: "CoordinationSharedQuery",
    fields: &[
        field("owner_peer", Ty::Nullable(&ANY_STR), false),
        field("participant_peer", Ty::Nullable(&ANY_STR), false),
        field("task_id", Ty::Nullable(&ANY_STR), false),
        field("thread_id", Ty::Nullable(&ANY_STR), false),
        OFFSET,
        LIMIT,
    ],
    forbid_extra: false,
    after: None,
};

/// `memory/coordination/shared/<id>.json`.
pub fn path(shared_id: &str) -> String {
    format!("{DIR}/{shared_id}.json")
}

/// A stored shared artifact.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared {
    pub document: JsonObject,
}

impl Shared {
    pub fn id(&self) -> String {
        text(&self.document, "shared_id").unwrap_or_default()
    }
    pub fn owner(&self) -> String {
        text(&self.document, "owner_peer").unwrap_or_default()
    }
    pub fn participants(&self) -> Vec<String> {
        strings(&self.document, "participant_peers")
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
    pub fn task_id(&self) -> Option<String> {
        text(&self.document, "task_id")
    }
    pub fn thread_id(&self) -> Option<String> {
        text(&self.document, "thread_id")
    }
    pub fn path(&self) -> String {
        path(&self.id())
    }

    /// Whether `peer` owns it or takes part in it.
    pub fn has_party(&self, peer: &str) -> bool {
        peer == self.owner() || self.participants().iter().any(|p| p == peer)
    }

    pub fn visible_to(&self, peer: &str, admin: bool) -> bool {
        admin || self.has_party(peer)
    }

    /// Owner, participant or admin (403 otherwise).
    pub fn check_visible(&self, peer: &str, admin: bool) -> Result<(), ContinuityError> {
        if self.visible_to(peer, admin) {
            Ok(())
        } else {
            Err(forbidden(
                "Shared coordination artifact not visible to caller",
            ))
        }
    }
}

fn too(what: &str, field: &str) -> ContinuityError {
    ContinuityError::invalid(format!("Value too {what} in coordination_shared.{field}"))
}

/// The original's service-level checks of a create or update body (400s).
fn check_state(request: &JsonObject) -> Result<(), ContinuityError> {
    let title = text(request, "title").unwrap_or_default();
    match title.chars().count() {
        0 => return Err(too("short", "title")),
        n if n > 120 => return Err(too("long", "title")),
        _ => {}
    }
    if let Some(summary) = text(request, "summary") {
        match summary.chars().count() {
            0 => return Err(too("short", "summary")),
            n if n > 240 => return Err(too("long", "summary")),
            _ => {}
        }
    }
    let mut any = false;
    for name in ["constraints", "drift_signals", "coordination_alerts"] {
        for item in strings(request, name) {
            any = true;
            match item.chars().count() {
                0 => return Err(too("short", name)),
                n if n > 160 => return Err(too("long", name)),
                _ => {}
            }
        }
    }
    if !any {
        return Err(ContinuityError::invalid(
            "Shared coordination state must include at least one shared item",
        ));
    }
    super::check_commit_message(&Json::Object(request.clone()), "shared")
}

fn state(request: &JsonObject) -> Json {
    let mut s = JsonObject::new();
    for name in ["constraints", "drift_signals", "coordination_alerts"] {
        s.insert(name, string_array(&strings(request, name)));
    }
    Json::Object(s)
}

/// A create request, validated (422) before anything is loaded.
pub fn check_create(body: &Json) -> Result<JsonObject, ContinuityError> {
    super::validated(&CREATE_REQUEST, body)
}

/// The check of the `index`th participant a create names, before its registry check (the
/// original checks each in turn: not the owner, not named before, registered, trusted).
pub fn check_participant(
    named: &[String],
    index: usize,
    owner: &str,
) -> Result<(), ContinuityError> {
    let Some(peer) = named.get(index) else {
        return Ok(());
    };
    if peer == owner {
        return Err(ContinuityError::invalid(
            "participant_peers must not include owner_peer",
        ));
    }
    if named.iter().take(index).any(|p| p == peer) {
        return Err(ContinuityError::invalid(
            "participant_peers must not contain duplicates",
        ));
    }
    Ok(())
}

/// The participants a create names.
pub fn participants(request: &JsonObject) -> Vec<String> {
    strings(request, "participant_peers")
}

/// The service-level checks of a create, after the participants passed the registry.
pub fn check_create_state(request: &JsonObject) -> Result<(), ContinuityError> {
    check_state(request)
}

/// The artifact a create request makes.
pub fn create(request: &JsonObject, shared_id: &str, owner: &str, now: OffsetDateTime) -> Shared {
    let stamp = utc_now_text(now);
    let mut d = JsonObject::new();
    d.insert("schema_type", Json::from("coordination_shared_state"));
    d.insert("schema_version", Json::from("1.0"));
    d.insert("shared_id", Json::from(shared_id));
    d.insert("created_at", Json::from(stamp.as_str()));
    d.insert("updated_at", Json::from(stamp));
    d.insert("created_by", Json::from(owner));
    d.insert("owner_peer", Json::from(owner));
    d.insert(
        "participant_peers",
        string_array(&strings(request, "participant_peers")),
    );
    d.insert("task_id", text_or_null(request, "task_id"));
    d.insert("thread_id", text_or_null(request, "thread_id"));
    d.insert("title", text_or_null(request, "title"));
    d.insert("summary", text_or_null(request, "summary"));
    d.insert("shared_state", state(request));
    d.insert("version", Json::from(1_i64));
    d.insert("last_updated_by", Json::from(owner));
    Shared { document: d }
}

/// An update request, validated (422) before anything is loaded.
pub fn check_update(body: &Json) -> Result<JsonObject, ContinuityError> {
    super::validated(&UPDATE_REQUEST, body)
}

/// `shared` after an update by `peer` at `now`: owner only (403), the state checked (400),
/// at the version read (409).
pub fn update(
    shared: &Shared,
    request: &JsonObject,
    peer: &str,
    now: OffsetDateTime,
) -> Result<Shared, ContinuityError> {
    if peer != shared.owner() {
        return Err(forbidden(
            "Only the owner may update this shared coordination artifact",
        ));
    }
    check_state(request)?;
    let current = shared.version();
    if integer(request, "expected_version") != Some(current) {
        return Err(super::conflict(VERSION_CONFLICT));
    }
    let mut d = shared.document.clone();
    d.insert("title", text_or_null(request, "title"));
    d.insert("summary", text_or_null(request, "summary"));
    d.insert("shared_state", state(request));
    d.insert("updated_at", Json::from(utc_now_text(now)));
    d.insert("version", Json::from(current + 1));
    d.insert("last_updated_by", Json::from(peer));
    Ok(Shared { document: d })
}

/// The longest query filter the original's model takes.
const FILTER_CHARS: usize = 200;

/// A shared query: its filters and page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedQuery {
    pub owner_peer: Option<String>,
    pub participant_peer: Option<String>,
    pub task_id: Option<String>,
    pub thread_id: Option<String>,
    pub offset: usize,
    pub limit: usize,
}

impl SharedQuery {
    /// The parameters (422), one filter at least (400), then the identity rules (403): a
    /// non-admin names itself as owner or participant and no one else.
    pub fn from_json(params: &Json, peer: &str, admin: bool) -> Result<Self, ContinuityError> {
        let q = super::validated_query(&QUERY, params)?;
        let (offset, limit) = super::paging(&q);
        let query = SharedQuery {
            owner_peer: text(&q, "owner_peer"),
            participant_peer: text(&q, "participant_peer"),
            task_id: text(&q, "task_id"),
            thread_id: text(&q, "thread_id"),
            offset,
            limit,
        };
        super::filters_too_long(
            "Invalid shared coordination query",
            "CoordinationSharedQueryRequest",
            &[
                ("owner_peer", &query.owner_peer),
                ("participant_peer", &query.participant_peer),
                ("task_id", &query.task_id),
                ("thread_id", &query.thread_id),
            ],
            FILTER_CHARS,
        )?;
        if query.owner_peer.is_none()
            && query.participant_peer.is_none()
            && query.task_id.is_none()
            && query.thread_id.is_none()
        {
            return Err(ContinuityError::invalid(no_filter_detail(offset, limit)));
        }
        let me = Some(peer.to_owned());
        if !admin && query.owner_peer != me && query.participant_peer != me {
            return Err(forbidden(
                "Non-admin callers must include their own shared coordination identity",
            ));
        }
        let own = |v: &Option<String>| admin || v.as_ref().is_none_or(|v| v == peer);
        if !own(&query.owner_peer) || !own(&query.participant_peer) {
            return Err(forbidden(
                "Non-admin callers may query only their own shared coordination identity",
            ));
        }
        Ok(query)
    }

    /// The filter the store does not apply: the participant.
    pub fn keeps(&self, shared: &Shared) -> bool {
        self.participant_peer
            .as_ref()
            .is_none_or(|p| shared.participants().contains(p))
    }
}

/// The original's 400 for a shared query without a filter: pydantic's report of its model
/// validator, the input shown as Python's repr cut to 25 + 24 characters around `...`.
fn no_filter_detail(offset: usize, limit: usize) -> String {
    let input = format!(
        "{{'owner_peer': None, 'participant_peer': None, 'task_id': None, 'thread_id': None, 'offset': {offset}, 'limit': {limit}}}"
    );
    let chars: Vec<char> = input.chars().collect();
    let shown = if chars.len() > 50 {
        let head: String = chars.iter().take(25).collect();
        let tail: String = chars.iter().skip(chars.len() - 24).collect();
        format!("{head}...{tail}")
    } else {
        input
    };
    format!(
        "Invalid shared coordination query: 1 validation error for CoordinationSharedQueryRequest\n  \
         Value error, owner_peer, participant_peer, task_id, or thread_id is required \
         [type=value_error, input_value={shown}, input_type=dict]\n    \
         For further information visit https://errors.pydantic.dev/2.14/v/value_error"
    )
}

/// The visible matches, most recently updated first (then by id), as one page.
pub fn query_body(mut found: Vec<Shared>, query: &SharedQuery) -> Json {
    found.sort_by(|a, b| {
        b.updated_at()
            .cmp(&a.updated_at())
            .then_with(|| a.id().cmp(&b.id()))
    });
    super::query_body(
        "shared_artifacts",
        found
            .into_iter()
            .map(|s| Json::Object(s.document))
            .collect(),
        query.offset,
        query.limit,
    )
}

/// `{ok, shared, path, updated, latest_commit, warnings}` for an update.
pub fn updated_body(shared: &Shared, latest_commit: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("shared", Json::Object(shared.document.clone()));
    o.insert("path", Json::from(shared.path()));
    o.insert("updated", Json::Bool(true));
    o.insert("latest_commit", Json::from(latest_commit));
    o.insert("warnings", Json::Array(Vec::new()));
    Json::Object(o)
}

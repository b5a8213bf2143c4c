//! The peer registry (`GET /v1/peers`, `POST /v1/peers/register`,
//! `POST /v1/peers/{peer_id}/trust`): one record per peer of the tenant, in the original's key
//! order, with its trust level and the history of its transitions.
//!
//! Trust moves by the original's default policy: `untrusted → restricted`,
//! `restricted → trusted | untrusted`, `trusted → restricted`; a move needs a reason, and a
//! trusted peer needs a public key fingerprint. Coordination writes name peers that must be
//! registered (404 `Peer not found: <p>`) and not untrusted (409 `Peer is untrusted: <p>`).

use noema_core::content_id::ContentId;
use time::OffsetDateTime;

use super::super::error::ContinuityError;
use super::super::json::{Json, JsonObject};
use super::super::schema::{Field, Model, Ty};
use super::utc_now_text;
use super::{conflict, strings, text, validated};

/// The registry's path in the original (what namespaces are checked against).
pub const REGISTRY_PATH: &str = "peers/registry.json";

pub const TRUST_LEVELS: &[&str] = &["trusted", "restricted", "untrusted"];

const ANY_STR: Ty = Ty::Str { min: 0, max: None };

const fn field(name: &'static str, ty: Ty, required: bool) -> Field {
    Field { name, ty, required }
}

pub static PEER_REGISTER_REQUEST: Model = Model {
    name: "PeerRegisterRequest",
    fields: &[
        field("peer_id", ANY_STR, true),
        field("base_url", ANY_STR, true),
        field("public_key", Ty::Nullable(&ANY_STR), false),
        field("capabilities_url", ANY_STR, false),
        field("trust_level", Ty::Literal(TRUST_LEVELS), false),
        field(
            "allowed_scopes",
            Ty::List {
                item: &ANY_STR,
                min: None,
                max: None,
            },
            false,
        ),
        field(
            "expected_public_key_fingerprint",
            Ty::Nullable(&ANY_STR),
            false,
        ),
        field("transition_reason", Ty::Nullable(&ANY_STR), false),
    ],
    forbid_extra: false,
    after: None,
};

pub static PEER_TRUST_TRANSITION_REQUEST: Model = Model {
    name: "PeerTrustTransitionRequest",
    fields: &[
        field("trust_level", Ty::Literal(TRUST_LEVELS), true),
        field(
            "reason",
            Ty::Str {
                min: 3,
                max: Some(500),
            },
            true,
        ),
        field(
            "expected_public_key_fingerprint",
            Ty::Nullable(&ANY_STR),
            false,
        ),
    ],
    forbid_extra: false,
    after: None,
};

/// A registered peer: its id and its record (the original's keys, without `peer_id`).
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub peer_id: String,
    pub record: JsonObject,
}

impl Peer {
    /// The record's trust level (`untrusted` when it has none, as the original reads it).
    pub fn trust_level(&self) -> String {
        text(&self.record, "trust_level")
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "untrusted".to_owned())
    }

    pub fn updated_at(&self) -> String {
        text(&self.record, "updated_at").unwrap_or_default()
    }

    /// `{peer_id, ...record}`.
    pub fn view(&self) -> Json {
        let mut o = JsonObject::new();
        o.insert("peer_id", Json::from(self.peer_id.as_str()));
        for (key, value) in self.record.iter() {
            if key != "peer_id" {
                o.insert(key.clone(), value.clone());
            }
        }
        Json::Object(o)
    }

    /// The digest part of the stored fingerprint.
    fn fingerprint(&self) -> Option<String> {
        fingerprint_digest(text(&self.record, "public_key_fingerprint").as_deref())
    }
}

/// The check every coordination write makes of a peer it names.
pub fn require_usable(peer_id: &str, peer: Option<&Peer>) -> Result<(), ContinuityError> {
    match peer {
        None => Err(ContinuityError::not_found(format!(
            "Peer not found: {peer_id}"
        ))),
        Some(peer) if peer.trust_level() == "untrusted" => {
            Err(conflict(format!("Peer is untrusted: {peer_id}")))
        }
        Some(_) => Ok(()),
    }
}

/// `sha256:<hex>` of a public key's text.
pub fn public_key_fingerprint(public_key: &str) -> String {
    ContentId::of_bytes(public_key.as_bytes()).into_string()
}

/// What a fingerprint says without its optional `sha256:` prefix (`None` when empty): the
/// original prefixes a bare one before comparing, so two fingerprints agree exactly when
/// these agree.
fn fingerprint_digest(value: Option<&str>) -> Option<String> {
    let value = value?.trim();
    if value.is_empty() {
        return None;
    }
    Some(ContentId::without_prefix(value).to_owned())
}

/// The original's default transition policy.
fn transition_allowed(from: &str, to: &str) -> bool {
    matches!(
        (from, to),
        ("untrusted", "restricted")
            | ("restricted", "trusted")
            | ("restricted", "untrusted")
            | ("trusted", "restricted")
    )
}

fn check_transition(from: &str, to: &str, reason: Option<&str>) -> Result<(), ContinuityError> {
    if from == to {
        return Ok(());
    }
    if !transition_allowed(from, to) {
        return Err(conflict(format!(
            "Trust transition not allowed: {from} -> {to}"
        )));
    }
    if reason.is_none_or(|r| r.trim().is_empty()) {
        return Err(ContinuityError::invalid(
            "Trust transition reason is required",
        ));
    }
    Ok(())
}

fn history_entry(at: &str, from: &str, to: &str, reason: &str, by: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("at", Json::from(at));
    o.insert("from", Json::from(from));
    o.insert("to", Json::from(to));
    o.insert("reason", Json::from(reason));
    o.insert("by", Json::from(by));
    Json::Object(o)
}

/// A register request, validated (422) before anything is loaded.
pub fn check_register(body: &Json) -> Result<JsonObject, ContinuityError> {
    validated(&PEER_REGISTER_REQUEST, body)
}

/// A trust transition request, validated (422) before anything is loaded.
pub fn check_transition_request(body: &Json) -> Result<JsonObject, ContinuityError> {
    validated(&PEER_TRUST_TRANSITION_REQUEST, body)
}

/// The peer a register request makes of `previous` (if registered) at `now`, by `by`.
pub fn register(
    request: &JsonObject,
    previous: Option<&Peer>,
    by: &str,
    now: OffsetDateTime,
) -> Result<Peer, ContinuityError> {
    let peer_id = text(request, "peer_id").unwrap_or_default();
    let public_key = text(request, "public_key");
    let target = text(request, "trust_level").unwrap_or_else(|| "restricted".to_owned());
    let reason = text(request, "transition_reason");
    let current = previous.map_or_else(|| "untrusted".to_owned(), Peer::trust_level);
    let provided = public_key
        .as_deref()
        .filter(|k| !k.is_empty())
        .map(public_key_fingerprint);
    let expected = fingerprint_digest(text(request, "expected_public_key_fingerprint").as_deref());
    let previous_fp = previous
        .and_then(|p| text(&p.record, "public_key_fingerprint"))
        .filter(|fp| !fp.is_empty());
    if let (Some(expected), Some(provided)) = (&expected, &provided)
        && Some(expected) != fingerprint_digest(Some(provided)).as_ref()
    {
        return Err(ContinuityError::invalid("public_key fingerprint mismatch"));
    }
    if let (Some(expected), None, Some(previous_fp)) = (&expected, &provided, &previous_fp)
        && Some(expected) != fingerprint_digest(Some(previous_fp)).as_ref()
    {
        return Err(ContinuityError::invalid(
            "existing peer fingerprint does not match expected fingerprint",
        ));
    }
    if previous.is_some() {
        check_transition(&current, &target, reason.as_deref())?;
    }
    let fingerprint = provided.or(previous_fp);
    if target == "trusted" && fingerprint.is_none() {
        return Err(ContinuityError::invalid(
            "public_key fingerprint is required for trusted peers",
        ));
    }
    let stamp = utc_now_text(now);
    let created_at = previous
        .and_then(|p| text(&p.record, "created_at"))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| stamp.clone());
    let mut history: Vec<Json> = previous
        .and_then(|p| p.record.get("trust_history"))
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    if current != target {
        history.push(history_entry(
            &stamp,
            &current,
            &target,
            reason.as_deref().unwrap_or("register_update"),
            by,
        ));
    }
    let mut record = JsonObject::new();
    record.insert(
        "base_url",
        request.get("base_url").cloned().unwrap_or(Json::from("")),
    );
    record.insert("public_key", public_key.map_or(Json::Null, Json::from));
    record.insert(
        "public_key_fingerprint",
        fingerprint.map_or(Json::Null, Json::from),
    );
    record.insert(
        "capabilities_url",
        Json::from(text(request, "capabilities_url").unwrap_or_else(|| "/v1/manifest".to_owned())),
    );
    record.insert("trust_level", Json::from(target));
    record.insert(
        "allowed_scopes",
        super::string_array(&strings(request, "allowed_scopes")),
    );
    record.insert("created_at", Json::from(created_at));
    record.insert("updated_at", Json::from(stamp));
    record.insert("trust_history", Json::Array(history));
    // Noema's agent binding is not the original's: a re-registration keeps it.
    if let Some(binding) = previous.and_then(|p| p.record.get(super::signing::BINDING)) {
        record.insert(super::signing::BINDING, binding.clone());
    }
    Ok(Peer { peer_id, record })
}

/// `peer` after a trust transition request at `now`, by `by`.
pub fn transition(
    peer: &Peer,
    request: &JsonObject,
    by: &str,
    now: OffsetDateTime,
) -> Result<Peer, ContinuityError> {
    let current = peer.trust_level();
    let target = text(request, "trust_level").unwrap_or_default();
    let reason = text(request, "reason").unwrap_or_default();
    check_transition(&current, &target, Some(&reason))?;
    let expected = fingerprint_digest(text(request, "expected_public_key_fingerprint").as_deref());
    if let Some(expected) = expected
        && Some(expected) != peer.fingerprint()
    {
        return Err(conflict("Peer fingerprint mismatch for trust transition"));
    }
    let stamp = utc_now_text(now);
    let mut history: Vec<Json> = peer
        .record
        .get("trust_history")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    history.push(history_entry(&stamp, &current, &target, &reason, by));
    let mut record = peer.record.clone();
    record.insert("trust_level", Json::from(target));
    record.insert("updated_at", Json::from(stamp));
    record.insert("trust_history", Json::Array(history));
    Ok(Peer {
        peer_id: peer.peer_id.clone(),
        record,
    })
}

/// `{ok, count, peers, updated_at}` (`updated_at`: the registry's last write, null when empty).
pub fn list_body(peers: &[Peer]) -> Json {
    let updated_at = peers.iter().map(Peer::updated_at).max();
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("count", Json::from(peers.len()));
    o.insert("peers", Json::Array(peers.iter().map(Peer::view).collect()));
    o.insert("updated_at", updated_at.map_or(Json::Null, Json::from));
    Json::Object(o)
}

/// `{ok, peer, created, committed, latest_commit}`.
pub fn registered_body(peer: &Peer, created: bool, latest_commit: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("peer", peer.view());
    o.insert("created", Json::Bool(created));
    o.insert("committed", Json::Bool(true));
    o.insert("latest_commit", Json::from(latest_commit));
    Json::Object(o)
}

/// `{ok, peer, committed, latest_commit}`.
pub fn transitioned_body(peer: &Peer, latest_commit: &str) -> Json {
    let mut o = JsonObject::new();
    o.insert("ok", Json::Bool(true));
    o.insert("peer", peer.view());
    o.insert("committed", Json::Bool(true));
    o.insert("latest_commit", Json::from(latest_commit));
    Json::Object(o)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::json::to_py_json;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-11-26 01:00:00 UTC);

    #[test]
    fn a_fingerprint_matches_with_or_without_its_prefix() {
        let full = public_key_fingerprint("key");
        assert!(full.starts_with("sha256:") && full.len() == 71, "{full}");
        let bare = full.trim_start_matches("sha256:");
        assert_eq!(
            fingerprint_digest(Some(&full)),
            fingerprint_digest(Some(bare))
        );
        assert_eq!(fingerprint_digest(Some(" ")), None);
        assert_ne!(
            fingerprint_digest(Some(&bare.to_uppercase())),
            fingerprint_digest(Some(bare))
        );
    }

    fn body(text: &str) -> JsonObject {
        check_register(&Json::parse(text.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn a_new_peer_is_restricted_with_the_original_key_order() {
        let peer = register(
            &body(r#"{"peer_id":"b","base_url":"http://b"}"#),
            None,
            "a",
            NOW,
        )
        .unwrap();
        assert_eq!(
            to_py_json(&peer.view()),
            r#"{"peer_id":"b","base_url":"http://b","public_key":null,"public_key_fingerprint":null,"capabilities_url":"/v1/manifest","trust_level":"restricted","allowed_scopes":[],"created_at":"2026-11-26T01:00:00Z","updated_at":"2026-11-26T01:00:00Z","trust_history":[{"at":"2026-11-26T01:00:00Z","from":"untrusted","to":"restricted","reason":"register_update","by":"a"}]}"#
        );
        require_usable("b", Some(&peer)).unwrap();
    }

    #[test]
    fn trust_moves_by_the_policy() {
        let peer = register(&body(r#"{"peer_id":"b","base_url":"u"}"#), None, "a", NOW).unwrap();
        let request =
            |t: &str| check_transition_request(&Json::parse(t.as_bytes()).unwrap()).unwrap();
        let trusted = transition(
            &peer,
            &request(r#"{"trust_level":"trusted","reason":"ok!"}"#),
            "a",
            NOW,
        );
        // restricted → trusted is allowed; the fingerprint rule is register's only.
        assert!(trusted.is_ok());
        let untrusted = transition(
            &peer,
            &request(r#"{"trust_level":"untrusted","reason":"bad"}"#),
            "a",
            NOW,
        )
        .unwrap();
        assert_eq!(
            require_usable("b", Some(&untrusted))
                .unwrap_err()
                .to_string(),
            "Peer is untrusted: b"
        );
        let err = transition(
            &untrusted,
            &request(r#"{"trust_level":"trusted","reason":"bad"}"#),
            "a",
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Trust transition not allowed: untrusted -> trusted"
        );
        assert_eq!(err.http_status(), 409);
        assert_eq!(
            require_usable("zz", None).unwrap_err().to_string(),
            "Peer not found: zz"
        );
        let needs_key = register(
            &body(r#"{"peer_id":"c","base_url":"u","trust_level":"trusted"}"#),
            None,
            "a",
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            needs_key.to_string(),
            "public_key fingerprint is required for trusted peers"
        );
        let again = register(
            &body(r#"{"peer_id":"b","base_url":"u","trust_level":"untrusted"}"#),
            Some(&peer),
            "a",
            NOW,
        )
        .unwrap_err();
        assert_eq!(again.to_string(), "Trust transition reason is required");
    }
}

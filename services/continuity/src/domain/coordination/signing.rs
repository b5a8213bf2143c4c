//! Signed coordination writes (Noema's, beyond the original): a peer bound to an agent
//! registered in identity may sign what it writes with that agent's Ed25519 key, so a
//! recipient can prove who said what. With no new field sent, every shape is the original's.
//!
//! - **Binding.** `POST /v1/peers/{peer_id}/trust` takes two optional fields: `agent_id`
//!   (an agent identity knows, checked there when set; `null` unbinds) and
//!   `require_signed_writes` (a flag on the binding). The peer record then carries
//!   `agent_binding: {agent_id, require_signed_writes, bound_at, bound_by}`.
//! - **What is signed.** The RFC 8785 (JCS) bytes of [`signed_object`]: the request body
//!   exactly as sent, minus its `sender_signature` member, canonicalized by `noema_core::jcs`
//!   and verified by `noema_core::keys`. For a handoff create, a shared create and a
//!   reconciliation open that is all (their id is assigned by the server). A shared update
//!   and a reconciliation resolve name their target only in the path, so the signed object
//!   adds it: `{"shared_id": <path id>, …body}` and `{"reconciliation_id": <path id>, …body}`.
//!   A signature made for one artifact thus fails on another (400), even at the same version
//!   (`expected_version` ties it to one version of that artifact). The body may carry that
//!   member itself only with the path's id (another → 400); it is taken off before the
//!   original's validation, which forbids extra members. The CLI signs through the same
//!   function. Consume, the only other write on a path id, takes no signature.
//! - **Where it travels.** One optional body member, `sender_signature: {public_key,
//!   signature}`: the key as `ed25519:<base64>` or bare standard base64 of 32 bytes, the
//!   signature as standard base64 of 64 bytes. No CogniRelay body has such a member.
//! - **Rules** (each refusal writes nothing): a malformed signature or one that does not
//!   verify over those bytes → 400 (`INVALID_ARGUMENT`); a signature from a peer that is not
//!   registered or not bound → 403; a key that identity does not confirm as the bound agent's
//!   registered key (another key, another agent's key, an agent identity does not know) →
//!   403 (`PERMISSION_DENIED`); identity refusing to answer (the token lacks
//!   `identity:read`) → 403; identity unreachable → 503 (`UNAVAILABLE`): nothing is written
//!   on trust alone. A peer whose binding requires signed writes has an unsigned write
//!   refused with 403.
//! - **What is stored and read back.** The artifact gains `sender_signature: {agent_id,
//!   public_key, fingerprint, algorithm, canonicalization, signature, signed_body,
//!   verified_at}`; `signed_body` is the object whose JCS bytes were signed, so a reader
//!   re-verifies offline with the key and checks the key against identity. A shared update
//!   replaces it (each superseded version keeps its own in the history); a consume keeps
//!   the handoff's. Reconciliations follow the same rules: an open stores `sender_signature`,
//!   a resolve stores its own as `resolver_signature` beside it.

use noema_core::jcs;
use noema_core::keys::{self, PublicKey, Signature};
use time::OffsetDateTime;

use super::super::error::ContinuityError;
use super::super::json::{Json, JsonObject};
use super::super::schema::{Field, Model, Ty};
use super::{forbidden, text, utc_now_text};

/// The request and artifact member that carries a signature.
pub const FIELD: &str = "sender_signature";
/// The member a reconciliation's resolve stores its signature in (beside the opener's).
pub const RESOLVER_FIELD: &str = "resolver_signature";
/// The peer record member that binds a peer to an agent.
pub const BINDING: &str = "agent_binding";
/// The trust-transition request's binding fields.
pub const AGENT_ID: &str = "agent_id";
pub const REQUIRE_SIGNED: &str = "require_signed_writes";

const ALGORITHM: &str = "ed25519";
const CANONICALIZATION: &str = "jcs-rfc8785";
const MAX_AGENT_ID: usize = 200;

const ANY_STR: Ty = Ty::Str { min: 0, max: None };

/// The signature member as a request carries it, for the document: [`take`] takes it off the
/// body before the write's own model validates the rest (its 400 when malformed).
pub static PRESENTED: Model = Model {
    name: "SenderSignature",
    fields: &[
        Field {
            name: "public_key",
            ty: ANY_STR,
            required: true,
        },
        Field {
            name: "signature",
            ty: ANY_STR,
            required: true,
        },
    ],
    forbid_extra: false,
    after: None,
};

/// The optional `sender_signature` field every signed write's model declares.
pub const REQUEST_FIELD: Field = Field {
    name: FIELD,
    ty: Ty::Model(&PRESENTED),
    required: false,
};

/// A signature as a request carries it, not yet checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Presented {
    pub public_key: String,
    pub signature: String,
}

/// Takes the signature member off a request body: the body as signed, and the signature if
/// one was sent (400 when the member is not `{public_key, signature}` of strings).
pub fn take(body: Json) -> Result<(Json, Option<Presented>), ContinuityError> {
    let Json::Object(mut object) = body else {
        return Ok((body, None));
    };
    let Some(member) = object.remove(FIELD) else {
        return Ok((Json::Object(object), None));
    };
    let field = |key: &str| member.get(key).and_then(Json::as_str).map(str::to_owned);
    let (Some(public_key), Some(signature)) = (field("public_key"), field("signature")) else {
        return Err(ContinuityError::invalid(
            "sender_signature must be an object with string members public_key and signature",
        ));
    };
    Ok((
        Json::Object(object),
        Some(Presented {
            public_key,
            signature,
        }),
    ))
}

/// The member a shared update's signed object names its artifact under (the id is in the path).
pub const SHARED_TARGET: &str = "shared_id";
/// The member a reconciliation resolve's signed object names its reconciliation under.
pub const RECONCILIATION_TARGET: &str = "reconciliation_id";

/// The object a sender signs and the artifact stores as `signed_body`: the body without
/// `sender_signature`, plus, for a write whose target id is only in its path, that id under
/// `target`'s member, so a signature made for one artifact does not verify on another. 400
/// when the body is not an object or already names another id under that member. The
/// server verifies with it and the CLI signs with it.
pub fn signed_object(body: Json, target: Option<(&str, &str)>) -> Result<Json, ContinuityError> {
    let Json::Object(mut object) = body else {
        return Err(ContinuityError::invalid(
            "sender_signature: the request body must be a JSON object",
        ));
    };
    object.remove(FIELD);
    let Some((member, id)) = target else {
        return Ok(Json::Object(object));
    };
    match object.get(member) {
        Some(Json::String(sent)) if sent == id => {}
        Some(_) => return Err(ContinuityError::invalid(target_mismatch(member, id))),
        None => {
            let mut targeted = JsonObject::new();
            targeted.insert(member, Json::from(id));
            for (key, value) in object.iter() {
                targeted.insert(key.clone(), value.clone());
            }
            object = targeted;
        }
    }
    Ok(Json::Object(object))
}

fn target_mismatch(member: &str, id: &str) -> String {
    format!("sender_signature: the body's {member} is not the {member} of the path ({id})")
}

/// For a write whose target id is in its path (`member`: `id`): the body the original
/// validates and the object a signature covers. A signed write may carry the member itself
/// (the path's id, else 400); it is taken off before validation, which forbids it. An
/// unsigned write is left as the original's.
pub fn bind_target(
    body: Json,
    signed: bool,
    member: &str,
    id: &str,
) -> Result<(Json, Json), ContinuityError> {
    if !signed {
        return Ok((body.clone(), body));
    }
    let covered = signed_object(body, Some((member, id)))?;
    let mut validated = covered.clone();
    if let Json::Object(object) = &mut validated {
        object.remove(member);
    }
    Ok((validated, covered))
}

/// The bytes a sender signs: the JCS form of [`signed_object`].
pub fn signing_bytes(signed_body: &Json) -> Result<Vec<u8>, ContinuityError> {
    jcs::canonicalize(&signed_body.to_value()).map_err(|e| {
        ContinuityError::invalid(format!(
            "sender_signature: body is not JCS-canonicalizable: {e}"
        ))
    })
}

/// A signature that verifies over the body it came with (under the key it names).
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    pub public_key: PublicKey,
    pub signature: Signature,
    pub message: Vec<u8>,
    pub signed_body: Json,
}

/// 400 unless `presented` is a well-formed Ed25519 signature that verifies over the JCS bytes
/// of `signed_body` under the key it names.
pub fn verify(presented: &Presented, signed_body: Json) -> Result<Verified, ContinuityError> {
    let public_key = PublicKey::parse(presented.public_key.trim())
        .map_err(|e| ContinuityError::invalid(format!("sender_signature.public_key: {e}")))?;
    let signature = Signature::from_base64(presented.signature.trim())
        .map_err(|e| ContinuityError::invalid(format!("sender_signature.signature: {e}")))?;
    let message = signing_bytes(&signed_body)?;
    if public_key.is_weak() || !keys::verify(&public_key, &message, &signature) {
        return Err(ContinuityError::invalid(
            "sender_signature does not verify: it must be an Ed25519 signature by public_key \
             over the JCS (RFC 8785) bytes of the request body without sender_signature \
             (for a shared update or a reconciliation resolve, with the path's shared_id or \
             reconciliation_id added)",
        ));
    }
    Ok(Verified {
        public_key,
        signature,
        message,
        signed_body,
    })
}

/// A peer's binding to an agent registered in identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub agent_id: String,
    pub require_signed_writes: bool,
}

/// The binding a peer record carries, if any.
pub fn binding_of(record: &JsonObject) -> Option<Binding> {
    let binding = record.get(BINDING)?.as_object()?;
    let agent_id = text(binding, AGENT_ID).filter(|a| !a.is_empty())?;
    let require_signed_writes = matches!(binding.get(REQUIRE_SIGNED), Some(Json::Bool(true)));
    Some(Binding {
        agent_id,
        require_signed_writes,
    })
}

/// What a write must do about signatures, from the writing peer's binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Unsigned, as the original writes.
    Nothing,
    /// Signed: identity must confirm the key as this agent's registered key.
    AgentKey(String),
}

/// The rule for a write by `peer_id` (its binding, whether a signature came): a signature
/// needs a bound peer; a binding that requires signatures refuses an unsigned write.
pub fn need(
    peer_id: &str,
    binding: Option<&Binding>,
    signed: bool,
) -> Result<Need, ContinuityError> {
    match (binding, signed) {
        (Some(binding), true) => Ok(Need::AgentKey(binding.agent_id.clone())),
        (None, true) => Err(forbidden(&format!(
            "Peer is not bound to an agent: {peer_id}; a signed coordination write needs its \
             sender's peer bound to an agent (POST /v1/peers/{{peer_id}}/trust with agent_id)"
        ))),
        (Some(binding), false) if binding.require_signed_writes => Err(forbidden(&format!(
            "Peer requires signed coordination writes: {peer_id}; send sender_signature"
        ))),
        _ => Ok(Need::Nothing),
    }
}

/// What identity says of a key for an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStatus {
    /// The agent's registered key.
    Registered,
    /// The agent has no registered key (or identity does not know it).
    Unregistered,
    /// Another key than the agent's registered one.
    Mismatch,
}

/// 403 unless identity confirmed the signature valid under the agent's registered key.
pub fn check_identity(
    agent_id: &str,
    valid: bool,
    status: KeyStatus,
) -> Result<(), ContinuityError> {
    match (valid, status) {
        (true, KeyStatus::Registered) => Ok(()),
        (_, KeyStatus::Unregistered) => Err(forbidden(&format!(
            "sender_signature refused: agent {agent_id} has no key registered in identity"
        ))),
        _ => Err(forbidden(&format!(
            "sender_signature refused: public_key is not the registered key of agent {agent_id}"
        ))),
    }
}

/// The `sender_signature` an artifact stores for a verified write.
pub fn record(verified: &Verified, agent_id: &str, now: OffsetDateTime) -> Json {
    let mut o = JsonObject::new();
    o.insert(AGENT_ID, Json::from(agent_id));
    o.insert("public_key", Json::from(verified.public_key.to_prefixed()));
    o.insert("fingerprint", Json::from(verified.public_key.fingerprint()));
    o.insert("algorithm", Json::from(ALGORITHM));
    o.insert("canonicalization", Json::from(CANONICALIZATION));
    o.insert("signature", Json::from(verified.signature.to_base64()));
    o.insert("signed_body", verified.signed_body.clone());
    o.insert("verified_at", Json::from(utc_now_text(now)));
    Json::Object(o)
}

/// `document` with the signature of the write that produced it (none: any earlier one
/// removed, as it signed another version).
pub fn stamp(document: &mut JsonObject, signature: Option<Json>) {
    stamp_as(document, FIELD, signature);
}

/// `document` with `signature` as its `field` member (none: any earlier one removed).
pub fn stamp_as(document: &mut JsonObject, field: &str, signature: Option<Json>) {
    document.remove(field);
    if let Some(signature) = signature {
        document.insert(field, signature);
    }
}

/// What a trust-transition request asks of the binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingChange {
    /// Neither field sent: the binding stays as it is.
    Keep,
    /// `agent_id: null`: the peer is unbound.
    Unbind,
    /// Bind to `agent_id` (identity must know it); the flag as sent, else as before for the
    /// same agent, else off.
    Bind {
        agent_id: String,
        require_signed_writes: Option<bool>,
    },
    /// Only the flag, for the agent already bound.
    Flag(bool),
}

/// The binding change a trust-transition body asks for (400 when malformed or impossible).
pub fn binding_change(body: &Json) -> Result<BindingChange, ContinuityError> {
    let flag = match body.get(REQUIRE_SIGNED) {
        None | Some(Json::Null) => None,
        Some(Json::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(ContinuityError::invalid(
                "require_signed_writes must be a boolean",
            ));
        }
    };
    match body.get(AGENT_ID) {
        None => Ok(flag.map_or(BindingChange::Keep, BindingChange::Flag)),
        Some(Json::Null) if flag == Some(true) => Err(ContinuityError::invalid(
            "require_signed_writes needs a peer bound to an agent (agent_id)",
        )),
        Some(Json::Null) => Ok(BindingChange::Unbind),
        Some(Json::String(agent_id)) => {
            let agent_id = agent_id.trim();
            if agent_id.is_empty() || agent_id.chars().count() > MAX_AGENT_ID {
                return Err(ContinuityError::invalid(format!(
                    "agent_id must be 1 to {MAX_AGENT_ID} characters"
                )));
            }
            Ok(BindingChange::Bind {
                agent_id: agent_id.to_owned(),
                require_signed_writes: flag,
            })
        }
        Some(_) => Err(ContinuityError::invalid(
            "agent_id must be a string or null",
        )),
    }
}

/// `record` after `change` by `by` at `now` (400 when only the flag is sent to an unbound
/// peer).
pub fn apply_binding(
    record: &mut JsonObject,
    change: &BindingChange,
    by: &str,
    now: OffsetDateTime,
) -> Result<(), ContinuityError> {
    let current = binding_of(record);
    let (agent_id, require) = match (change, &current) {
        (BindingChange::Keep, _) => return Ok(()),
        (BindingChange::Unbind, _) => {
            record.remove(BINDING);
            return Ok(());
        }
        (BindingChange::Flag(_), None) => {
            return Err(ContinuityError::invalid(
                "require_signed_writes needs a peer bound to an agent (agent_id)",
            ));
        }
        (BindingChange::Flag(flag), Some(current)) => (current.agent_id.clone(), *flag),
        (
            BindingChange::Bind {
                agent_id,
                require_signed_writes,
            },
            current,
        ) => {
            let kept = current
                .as_ref()
                .filter(|c| &c.agent_id == agent_id)
                .is_some_and(|c| c.require_signed_writes);
            (agent_id.clone(), require_signed_writes.unwrap_or(kept))
        }
    };
    let mut binding = JsonObject::new();
    binding.insert(AGENT_ID, Json::from(agent_id));
    binding.insert(REQUIRE_SIGNED, Json::Bool(require));
    binding.insert("bound_at", Json::from(utc_now_text(now)));
    binding.insert("bound_by", Json::from(by));
    record.insert(BINDING, Json::Object(binding));
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use noema_core::keys::SigningKeyPair;

    use super::*;

    const NOW: OffsetDateTime = time::macros::datetime!(2026-11-26 05:00:00 UTC);

    fn json(text: &str) -> Json {
        Json::parse(text.as_bytes()).unwrap()
    }

    fn signed(pair: &SigningKeyPair, body: &str) -> Json {
        let bare = json(body);
        let message = signing_bytes(&bare).unwrap();
        let Json::Object(mut o) = bare else { panic!() };
        let mut s = JsonObject::new();
        s.insert("public_key", Json::from(pair.public_key().to_prefixed()));
        s.insert("signature", Json::from(pair.sign(&message).to_base64()));
        o.insert(FIELD, Json::Object(s));
        Json::Object(o)
    }

    #[test]
    fn a_signature_over_the_jcs_bytes_verifies_whatever_the_key_order() {
        let pair = SigningKeyPair::from_seed(&[7; 32]);
        let body = signed(
            &pair,
            r#"{"title":"t","constraints":["a"],"expected_version":2}"#,
        );
        let (bare, presented) = take(body).unwrap();
        assert!(bare.get(FIELD).is_none());
        let verified = verify(&presented.unwrap(), bare).unwrap();
        assert_eq!(
            String::from_utf8(verified.message.clone()).unwrap(),
            r#"{"constraints":["a"],"expected_version":2,"title":"t"}"#
        );
        let stored = record(&verified, "agent:a", NOW);
        assert_eq!(
            stored.get("agent_id").and_then(Json::as_str),
            Some("agent:a")
        );
        assert_eq!(
            stored.get("public_key").and_then(Json::as_str),
            Some(pair.public_key().to_prefixed().as_str())
        );
        // What a reader gets back re-verifies offline.
        let again = Presented {
            public_key: stored
                .get("public_key")
                .and_then(Json::as_str)
                .unwrap()
                .to_owned(),
            signature: stored
                .get("signature")
                .and_then(Json::as_str)
                .unwrap()
                .to_owned(),
        };
        verify(&again, stored.get("signed_body").unwrap().clone()).unwrap();
    }

    #[test]
    fn a_tampered_body_a_wrong_key_or_a_malformed_member_is_400() {
        let pair = SigningKeyPair::from_seed(&[7; 32]);
        let body = signed(&pair, r#"{"title":"t"}"#);
        let Json::Object(mut tampered) = body.clone() else {
            panic!()
        };
        tampered.insert("title", Json::from("T"));
        let (bare, presented) = take(Json::Object(tampered)).unwrap();
        let err = verify(&presented.unwrap(), bare).unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert!(
            err.to_string()
                .starts_with("sender_signature does not verify"),
            "{err}"
        );

        let (bare, presented) = take(body).unwrap();
        let mut other = presented.unwrap();
        other.public_key = SigningKeyPair::from_seed(&[8; 32]).public_key().to_base64();
        assert_eq!(verify(&other, bare.clone()).unwrap_err().http_status(), 400);
        other.public_key = "ed25519:AAAA".to_owned();
        assert!(
            verify(&other, bare)
                .unwrap_err()
                .to_string()
                .starts_with("sender_signature.public_key")
        );
        let err = take(json(r#"{"title":"t","sender_signature":"x"}"#)).unwrap_err();
        assert_eq!(err.http_status(), 400);
        let (unsigned, none) = take(json(r#"{"title":"t"}"#)).unwrap();
        assert_eq!(none, None);
        assert_eq!(unsigned, json(r#"{"title":"t"}"#));
    }

    #[test]
    fn the_path_id_is_signed_so_a_signature_for_one_artifact_fails_on_another() {
        let pair = SigningKeyPair::from_seed(&[7; 32]);
        let body = json(r#"{"expected_version":1,"title":"t"}"#);
        let target = |id| Some((SHARED_TARGET, id));
        let covered = signed_object(body.clone(), target("shared_a")).unwrap();
        let message = signing_bytes(&covered).unwrap();
        assert_eq!(
            String::from_utf8(message.clone()).unwrap(),
            r#"{"expected_version":1,"shared_id":"shared_a","title":"t"}"#
        );
        let presented = Presented {
            public_key: pair.public_key().to_prefixed(),
            signature: pair.sign(&message).to_base64(),
        };
        let (validated, on_a) = bind_target(body.clone(), true, SHARED_TARGET, "shared_a").unwrap();
        assert_eq!(validated, body);
        let verified = verify(&presented, on_a).unwrap();
        // The stored signed body names the artifact.
        let stored = record(&verified, "agent:a", NOW);
        assert_eq!(
            stored
                .get("signed_body")
                .and_then(|b| b.get(SHARED_TARGET))
                .and_then(Json::as_str),
            Some("shared_a")
        );
        // The same body and signature replayed onto another artifact.
        let (_, on_b) = bind_target(body.clone(), true, SHARED_TARGET, "shared_b").unwrap();
        let err = verify(&presented, on_b).unwrap_err();
        assert_eq!(err.http_status(), 400);
        assert!(
            err.to_string()
                .starts_with("sender_signature does not verify"),
            "{err}"
        );
        // A body naming the artifact itself: the path's id is taken off for validation, another is 400.
        let named = json(r#"{"shared_id":"shared_a","expected_version":1,"title":"t"}"#);
        let (validated, covered) =
            bind_target(named.clone(), true, SHARED_TARGET, "shared_a").unwrap();
        assert_eq!(validated, body);
        verify(&presented, covered).unwrap();
        let err = bind_target(named.clone(), true, SHARED_TARGET, "shared_b").unwrap_err();
        assert_eq!(err.http_status(), 400);
        let err = signed_object(named.clone(), target("shared_b")).unwrap_err();
        assert_eq!(err.http_status(), 400);
        // Unsigned writes are the original's; creates sign the bare body.
        assert_eq!(
            bind_target(named.clone(), false, SHARED_TARGET, "shared_b").unwrap(),
            (named.clone(), named)
        );
        assert_eq!(signed_object(body.clone(), None).unwrap(), body);
    }

    #[test]
    fn signatures_need_a_binding_and_a_binding_may_require_them() {
        let loose = Binding {
            agent_id: "agent:a".into(),
            require_signed_writes: false,
        };
        let strict = Binding {
            require_signed_writes: true,
            ..loose.clone()
        };
        assert_eq!(need("p", None, false).unwrap(), Need::Nothing);
        assert_eq!(need("p", Some(&loose), false).unwrap(), Need::Nothing);
        assert_eq!(
            need("p", Some(&strict), true).unwrap(),
            Need::AgentKey("agent:a".into())
        );
        let unsigned = need("p", Some(&strict), false).unwrap_err();
        assert_eq!(unsigned.http_status(), 403);
        assert!(
            unsigned
                .to_string()
                .starts_with("Peer requires signed coordination writes: p")
        );
        let unbound = need("p", None, true).unwrap_err();
        assert_eq!(unbound.http_status(), 403);
        assert!(
            unbound
                .to_string()
                .starts_with("Peer is not bound to an agent: p")
        );
    }

    #[test]
    fn identity_must_confirm_the_registered_key() {
        check_identity("a", true, KeyStatus::Registered).unwrap();
        for (valid, status) in [
            (false, KeyStatus::Registered),
            (true, KeyStatus::Mismatch),
            (true, KeyStatus::Unregistered),
        ] {
            assert_eq!(
                check_identity("a", valid, status)
                    .unwrap_err()
                    .http_status(),
                403
            );
        }
    }

    #[test]
    fn a_binding_is_set_flagged_kept_and_removed() {
        let mut record = JsonObject::new();
        let change = |t: &str| binding_change(&json(t)).unwrap();
        assert_eq!(change(r#"{"trust_level":"trusted"}"#), BindingChange::Keep);
        apply_binding(&mut record, &change("{}"), "admin", NOW).unwrap();
        assert!(record.get(BINDING).is_none());
        let flag_only = apply_binding(
            &mut record,
            &change(r#"{"require_signed_writes":true}"#),
            "admin",
            NOW,
        );
        assert_eq!(flag_only.unwrap_err().http_status(), 400);
        apply_binding(
            &mut record,
            &change(r#"{"agent_id":"agent:a","require_signed_writes":true}"#),
            "admin",
            NOW,
        )
        .unwrap();
        assert_eq!(
            binding_of(&record),
            Some(Binding {
                agent_id: "agent:a".into(),
                require_signed_writes: true
            })
        );
        // Rebinding the same agent keeps the flag unless it is sent.
        apply_binding(
            &mut record,
            &change(r#"{"agent_id":"agent:a"}"#),
            "admin",
            NOW,
        )
        .unwrap();
        assert!(binding_of(&record).unwrap().require_signed_writes);
        apply_binding(
            &mut record,
            &change(r#"{"agent_id":"agent:b"}"#),
            "admin",
            NOW,
        )
        .unwrap();
        assert!(!binding_of(&record).unwrap().require_signed_writes);
        apply_binding(&mut record, &change(r#"{"agent_id":null}"#), "admin", NOW).unwrap();
        assert_eq!(binding_of(&record), None);
        for bad in [
            r#"{"agent_id":""}"#,
            r#"{"agent_id":3}"#,
            r#"{"agent_id":null,"require_signed_writes":true}"#,
            r#"{"agent_id":"a","require_signed_writes":"yes"}"#,
        ] {
            assert_eq!(
                binding_change(&json(bad)).unwrap_err().http_status(),
                400,
                "{bad}"
            );
        }
    }
}

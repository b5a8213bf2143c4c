//! Lifecycle events (seed §10) and the replay fold that rebuilds a request from them.
//!
//! Every transition of [`super::state::TRANSITIONS`] is recorded as an [`Event`]
//! (`event_type, entity_id, prev_state, next_state, meta`); the objects a step creates
//! are referenced from `meta.object_id` by content id, so the events alone say what a
//! request is and where each of its objects lives. [`Replay`] folds a request's events,
//! oldest first, into a [`RequestView`]; it refuses any event that does not continue the
//! state it has reached, so a stored history that replays is one the machine allows.
//!
//! Events are hash-chained by the store; this module defines the bytes that are hashed
//! ([`StoredEvent::canonical_bytes_into`]): the RFC 8785 form of `{entity_id, event_type,
//! meta, next_state, prev_hash, prev_state, seq, ts}`, the event with its sequence number,
//! time and the previous event's hash.

use noema_core::content_id::ContentId;
use noema_core::jcs::{self, JcsError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::state::{State, TRANSITIONS};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// A request was created (`meta.actor`: the plan's source).
    Received,
    /// Its plan was stored (`meta.object_id`: the plan).
    Planned,
    /// Its risk report was stored (`meta.object_id`: the report).
    Risked,
    /// It waits for approval (`meta.approvals_required`).
    ApprovalRequested,
    /// An approving approval was recorded (`meta.object_id`: the approval).
    ApprovalRecorded,
    /// A rejecting approval was recorded (`meta.object_id`: the approval).
    ApprovalRejected,
    /// It was refused (`meta.reasons`).
    Blocked,
    /// Its steps ran.
    Executed,
    /// Its trace was stored (`meta.object_id`: the trace).
    Traced,
    /// An evaluation was stored (`meta.object_id`: the evaluation).
    Evaluated,
    /// Its reward update was stored (`meta.object_id`: the update).
    Rewarded,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Received => "received",
            EventType::Planned => "planned",
            EventType::Risked => "risked",
            EventType::ApprovalRequested => "approval_requested",
            EventType::ApprovalRecorded => "approval_recorded",
            EventType::ApprovalRejected => "approval_rejected",
            EventType::Blocked => "blocked",
            EventType::Executed => "executed",
            EventType::Traced => "traced",
            EventType::Evaluated => "evaluated",
            EventType::Rewarded => "rewarded",
        }
    }

    /// The type named `text` (as [`EventType::as_str`] writes it).
    pub fn parse(text: &str) -> Option<EventType> {
        Some(match text {
            "received" => EventType::Received,
            "planned" => EventType::Planned,
            "risked" => EventType::Risked,
            "approval_requested" => EventType::ApprovalRequested,
            "approval_recorded" => EventType::ApprovalRecorded,
            "approval_rejected" => EventType::ApprovalRejected,
            "blocked" => EventType::Blocked,
            "executed" => EventType::Executed,
            "traced" => EventType::Traced,
            "evaluated" => EventType::Evaluated,
            "rewarded" => EventType::Rewarded,
            _ => return None,
        })
    }

    /// Whether the event stores an object, referenced by `meta.object_id`.
    pub fn carries_object(self) -> bool {
        matches!(
            self,
            EventType::Planned
                | EventType::Risked
                | EventType::ApprovalRecorded
                | EventType::ApprovalRejected
                | EventType::Traced
                | EventType::Evaluated
                | EventType::Rewarded
        )
    }
}

/// Why an event cannot be made or replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("event {index}: {event_type:?} cannot move a request from {from} to {to}")]
    ForbiddenTransition {
        index: u64,
        event_type: EventType,
        from: String,
        to: State,
    },
    #[error("event {index}: prev_state is {found} but the request is {expected}")]
    StateMismatch {
        index: u64,
        expected: String,
        found: String,
    },
    #[error("event {index} belongs to request {found}, not {expected}")]
    WrongEntity {
        index: u64,
        expected: String,
        found: String,
    },
    #[error("event {index}: {event_type:?} needs meta.object_id (a content id)")]
    MissingObject { index: u64, event_type: EventType },
    #[error("no events to replay")]
    Empty,
}

/// One lifecycle event (seed §10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub event_type: EventType,
    /// The request id.
    pub entity_id: String,
    /// `None` only for [`EventType::Received`].
    pub prev_state: Option<State>,
    pub next_state: State,
    pub meta: Map<String, Value>,
}

fn state_text(state: Option<State>) -> String {
    state.map_or_else(|| "(none)".to_owned(), |s| s.as_str().to_owned())
}

impl Event {
    /// An event for an allowed transition; anything else is refused.
    pub fn new(
        event_type: EventType,
        entity_id: impl Into<String>,
        prev_state: Option<State>,
        next_state: State,
        meta: Map<String, Value>,
    ) -> Result<Event, EventError> {
        let event = Event {
            event_type,
            entity_id: entity_id.into(),
            prev_state,
            next_state,
            meta,
        };
        event.check(0)?;
        Ok(event)
    }

    /// The content id this event references, if any.
    pub fn object_id(&self) -> Option<ContentId> {
        self.meta
            .get("object_id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
    }

    fn check(&self, index: u64) -> Result<(), EventError> {
        let allowed = TRANSITIONS.iter().any(|t| {
            t.from == self.prev_state && t.to == self.next_state && t.event == self.event_type
        });
        if !allowed {
            return Err(EventError::ForbiddenTransition {
                index,
                event_type: self.event_type,
                from: state_text(self.prev_state),
                to: self.next_state,
            });
        }
        if self.event_type.carries_object() && self.object_id().is_none() {
            return Err(EventError::MissingObject {
                index,
                event_type: self.event_type,
            });
        }
        Ok(())
    }
}

/// Builders for each event's `meta`, so every writer records the same keys.
pub mod meta {
    use super::*;

    pub fn received(actor: &str) -> Map<String, Value> {
        object(json!({"actor": actor}))
    }

    /// An event that stores an object: its content id and schema name, plus `extra`.
    pub fn stored(object_id: &ContentId, object_type: &str, extra: Value) -> Map<String, Value> {
        let mut map = object(extra);
        map.insert("object_id".into(), Value::String(object_id.to_string()));
        map.insert("object_type".into(), Value::String(object_type.to_owned()));
        map
    }

    pub fn approval_requested(approvals_required: u8) -> Map<String, Value> {
        object(json!({"approvals_required": approvals_required}))
    }

    pub fn blocked(reasons: &[String]) -> Map<String, Value> {
        object(json!({"reasons": reasons}))
    }

    pub fn empty() -> Map<String, Value> {
        Map::new()
    }

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }
}

/// The `prev_hash` of the first event of a chain.
pub const CHAIN_START: &str = "";

/// An event placed in the chain as the store keeps it: its meta canonicalised once, and
/// that text both stored and hashed: the hash is the SHA-256 of the bytes
/// [`StoredEvent::canonical_bytes_into`] writes and replay checks, without building the
/// event's JSON a second time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedEvent {
    pub entity_id: String,
    pub event_type: EventType,
    pub prev_state: Option<State>,
    pub next_state: State,
    /// The RFC 8785 text of the event's meta.
    pub meta: String,
    pub seq: u64,
    /// RFC 3339, UTC.
    pub ts: String,
    pub prev_hash: String,
    pub hash: String,
}

impl SealedEvent {
    /// Places `event` after the event hashed `prev_hash`; `scratch` is reused for the
    /// hashed bytes.
    pub fn seal(
        event: Event,
        seq: u64,
        ts: &str,
        prev_hash: String,
        scratch: &mut String,
    ) -> Result<SealedEvent, JcsError> {
        let Event {
            event_type,
            entity_id,
            prev_state,
            next_state,
            meta,
        } = event;
        let meta = jcs::canonical_string(&Value::Object(meta))?;
        let mut sealed = SealedEvent {
            entity_id,
            event_type,
            prev_state,
            next_state,
            meta,
            seq,
            ts: ts.to_owned(),
            prev_hash,
            hash: String::new(),
        };
        sealed.stored().canonical_bytes_into(scratch);
        sealed.hash = ContentId::of_bytes(scratch.as_bytes()).into_string();
        Ok(sealed)
    }

    /// The event as its stored text ([`StoredEvent::hash`] as sealed).
    pub fn stored(&self) -> StoredEvent<'_> {
        StoredEvent {
            entity_id: &self.entity_id,
            event_type: self.event_type.as_str(),
            meta: &self.meta,
            next_state: self.next_state.as_str(),
            prev_hash: &self.prev_hash,
            prev_state: self.prev_state.map(State::as_str),
            seq: self.seq,
            ts: &self.ts,
            hash: &self.hash,
        }
    }
}

/// Where the first broken link of an event chain is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error("event {seq} was edited: its hash does not match its fields")]
    HashMismatch { seq: u64 },
    #[error("event {seq} does not follow the previous event (removed or reordered)")]
    BrokenLink { seq: u64 },
    #[error("events jump from {after} to {next}")]
    Gap { after: u64, next: u64 },
}

/// An event as the store keeps it: its fields as text, its meta already in RFC 8785 form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredEvent<'a> {
    pub entity_id: &'a str,
    pub event_type: &'a str,
    /// The RFC 8785 text of the meta object.
    pub meta: &'a str,
    pub next_state: &'a str,
    pub prev_hash: &'a str,
    pub prev_state: Option<&'a str>,
    pub seq: u64,
    pub ts: &'a str,
    pub hash: &'a str,
}

impl StoredEvent<'_> {
    /// Writes the hashed bytes into `out` (cleared first): the RFC 8785 JSON of the event,
    /// written straight from the stored text — the keys in their RFC 8785 order, the meta
    /// text as stored (the tests check it against the JSON built and canonicalised). A meta that is not in canonical
    /// form gives other bytes, so its event does not verify.
    pub fn canonical_bytes_into(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.clear();
        out.push_str("{\"entity_id\":");
        jcs::write_string(out, self.entity_id);
        out.push_str(",\"event_type\":");
        jcs::write_string(out, self.event_type);
        out.push_str(",\"meta\":");
        out.push_str(self.meta);
        out.push_str(",\"next_state\":");
        jcs::write_string(out, self.next_state);
        out.push_str(",\"prev_hash\":");
        jcs::write_string(out, self.prev_hash);
        out.push_str(",\"prev_state\":");
        match self.prev_state {
            Some(state) => jcs::write_string(out, state),
            None => out.push_str("null"),
        }
        // Writing to a String cannot fail.
        let _ = write!(out, ",\"seq\":{}", self.seq);
        out.push_str(",\"ts\":");
        jcs::write_string(out, self.ts);
        out.push('}');
    }

    /// Checks that this event continues the chain after `(prev_seq, prev_hash)`: the next
    /// sequence number, the previous hash, and its own hash over its stored text. `scratch`
    /// is reused for the hashed bytes.
    pub fn verify_after(
        &self,
        prev_seq: u64,
        prev_hash: &str,
        scratch: &mut String,
    ) -> Result<(), ChainBreak> {
        if self.seq != prev_seq + 1 {
            return Err(ChainBreak::Gap {
                after: prev_seq,
                next: self.seq,
            });
        }
        if self.prev_hash != prev_hash {
            return Err(ChainBreak::BrokenLink { seq: self.seq });
        }
        self.canonical_bytes_into(scratch);
        if ContentId::of_bytes(scratch.as_bytes()).as_str() != self.hash {
            return Err(ChainBreak::HashMismatch { seq: self.seq });
        }
        Ok(())
    }
}

/// A request as its events describe it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestView {
    pub request_id: String,
    pub state: State,
    /// The plan's source: whose reputation the request affects.
    pub actor: String,
    pub plan: Option<ContentId>,
    pub risk_report: Option<ContentId>,
    /// Approvals in the order they were recorded (rejections included).
    pub approvals: Vec<ContentId>,
    pub trace: Option<ContentId>,
    pub evaluations: Vec<ContentId>,
    pub reward: Option<ContentId>,
    /// How many events were folded.
    pub events: u64,
}

/// The replay fold: feed a request's events oldest first.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    view: Option<RequestView>,
}

impl Replay {
    pub fn new() -> Replay {
        Replay::default()
    }

    /// Folds one event; refuses one that does not continue the request.
    pub fn apply(&mut self, event: &Event) -> Result<&RequestView, EventError> {
        let index = self.view.as_ref().map_or(0, |v| v.events);
        let current = self.view.as_ref().map(|v| v.state);
        if let Some(view) = &self.view
            && view.request_id != event.entity_id
        {
            return Err(EventError::WrongEntity {
                index,
                expected: view.request_id.clone(),
                found: event.entity_id.clone(),
            });
        }
        if event.prev_state != current {
            return Err(EventError::StateMismatch {
                index,
                expected: state_text(current),
                found: state_text(event.prev_state),
            });
        }
        event.check(index)?;
        let object = event.object_id();
        let view = self.view.get_or_insert_with(|| RequestView {
            request_id: event.entity_id.clone(),
            state: event.next_state,
            actor: event
                .meta
                .get("actor")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            plan: None,
            risk_report: None,
            approvals: Vec::new(),
            trace: None,
            evaluations: Vec::new(),
            reward: None,
            events: 0,
        });
        match event.event_type {
            EventType::Planned => view.plan = object,
            EventType::Risked => view.risk_report = object,
            EventType::ApprovalRecorded | EventType::ApprovalRejected => {
                view.approvals.extend(object)
            }
            EventType::Traced => view.trace = object,
            EventType::Evaluated => view.evaluations.extend(object),
            EventType::Rewarded => view.reward = object,
            EventType::Received
            | EventType::ApprovalRequested
            | EventType::Blocked
            | EventType::Executed => {}
        }
        view.state = event.next_state;
        view.events += 1;
        Ok(view)
    }

    pub fn view(&self) -> Option<&RequestView> {
        self.view.as_ref()
    }

    pub fn into_view(self) -> Option<RequestView> {
        self.view
    }
}

/// Rebuilds a request from all its events.
pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<RequestView, EventError> {
    let mut fold = Replay::new();
    for event in events {
        fold.apply(event)?;
    }
    fold.into_view().ok_or(EventError::Empty)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    // The chain as the seed defines it, built from typed events: the oracle the stored
    // forms (`SealedEvent`, `StoredEvent`) are checked against.
    /// An event placed in the store's hash chain.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct ChainedEvent {
        pub seq: u64,
        /// RFC 3339, UTC.
        pub ts: String,
        pub event: Event,
        pub prev_hash: String,
        pub hash: String,
    }

    impl ChainedEvent {
        /// Places `event` after the event hashed `prev_hash`.
        pub fn chain(
            event: Event,
            seq: u64,
            ts: impl Into<String>,
            prev_hash: impl Into<String>,
        ) -> Result<ChainedEvent, JcsError> {
            let mut chained = ChainedEvent {
                seq,
                ts: ts.into(),
                event,
                prev_hash: prev_hash.into(),
                hash: String::new(),
            };
            chained.hash = chained.compute_hash()?;
            Ok(chained)
        }

        /// The hashed bytes: RFC 8785 JSON of `{entity_id, event_type, meta, next_state,
        /// prev_hash, prev_state, seq, ts}` (`prev_state` null for a creation).
        pub fn canonical_bytes(&self) -> Result<Vec<u8>, JcsError> {
            jcs::canonicalize(&json!({
                "entity_id": self.event.entity_id,
                "event_type": self.event.event_type.as_str(),
                "meta": self.event.meta,
                "next_state": self.event.next_state.as_str(),
                "prev_hash": self.prev_hash,
                "prev_state": self.event.prev_state.map(State::as_str),
                "seq": self.seq,
                "ts": self.ts,
            }))
        }

        pub fn compute_hash(&self) -> Result<String, JcsError> {
            Ok(ContentId::of_bytes(&self.canonical_bytes()?).into_string())
        }
    }

    /// Checks chained events given oldest first, continuing from `(prev_seq, prev_hash)`.
    pub fn verify_chain<'a>(
        mut prev_seq: u64,
        mut prev_hash: String,
        events: impl IntoIterator<Item = &'a ChainedEvent>,
    ) -> Result<(u64, String), ChainBreak> {
        for e in events {
            if e.seq != prev_seq + 1 {
                return Err(ChainBreak::Gap {
                    after: prev_seq,
                    next: e.seq,
                });
            }
            if e.prev_hash != prev_hash {
                return Err(ChainBreak::BrokenLink { seq: e.seq });
            }
            if e.compute_hash().ok().as_deref() != Some(e.hash.as_str()) {
                return Err(ChainBreak::HashMismatch { seq: e.seq });
            }
            prev_seq = e.seq;
            prev_hash = e.hash.clone();
        }
        Ok((prev_seq, prev_hash))
    }

    fn cid(n: u8) -> ContentId {
        ContentId::of_bytes(&[n])
    }

    fn ev(t: EventType, prev: Option<State>, next: State, meta: Map<String, Value>) -> Event {
        Event::new(t, "req-1", prev, next, meta).unwrap()
    }

    /// A sealed event hashes to what the typed chain computes, and its stored text
    /// verifies on replay; an edited meta does not.
    #[test]
    fn sealed_events_hash_as_the_chain_and_verify_from_their_text() {
        let mut prev = CHAIN_START.to_owned();
        let mut scratch = String::new();
        for (n, event) in lifecycle().into_iter().enumerate() {
            let seq = n as u64 + 1;
            let mut event = event;
            event.meta.insert(
                "note".into(),
                json!({"é": 1.5, "a": [null, "\u{1F600}\n"], "b": 1e21}),
            );
            let chained =
                ChainedEvent::chain(event.clone(), seq, "2026-01-01T00:00:00Z", prev.clone())
                    .unwrap();
            let sealed = SealedEvent::seal(
                event,
                seq,
                "2026-01-01T00:00:00Z",
                prev.clone(),
                &mut scratch,
            )
            .unwrap();
            assert_eq!(sealed.hash, chained.hash);
            assert_eq!(
                scratch.as_bytes(),
                chained.canonical_bytes().unwrap().as_slice()
            );
            sealed
                .stored()
                .verify_after(seq - 1, &prev, &mut scratch)
                .unwrap();
            let edited = sealed.meta.replace("1.5", "2.5");
            let stored = StoredEvent {
                meta: &edited,
                ..sealed.stored()
            };
            assert_eq!(
                stored.verify_after(seq - 1, &prev, &mut scratch),
                Err(ChainBreak::HashMismatch { seq })
            );
            prev = sealed.hash;
        }
    }

    /// A complete L2 lifecycle with two evaluations.
    fn lifecycle() -> Vec<Event> {
        use EventType as E;
        use State as S;
        vec![
            ev(
                E::Received,
                None,
                S::Received,
                meta::received("agent:alice"),
            ),
            ev(
                E::Planned,
                Some(S::Received),
                S::Planned,
                meta::stored(&cid(1), "plan", json!({})),
            ),
            ev(
                E::Risked,
                Some(S::Planned),
                S::Risked,
                meta::stored(&cid(2), "risk_report", json!({"risk_level": "L2"})),
            ),
            ev(
                E::ApprovalRequested,
                Some(S::Risked),
                S::ApprovalPending,
                meta::approval_requested(1),
            ),
            ev(
                E::ApprovalRecorded,
                Some(S::ApprovalPending),
                S::ApprovalPending,
                meta::stored(&cid(3), "approval", json!({})),
            ),
            ev(
                E::Executed,
                Some(S::ApprovalPending),
                S::Executed,
                meta::empty(),
            ),
            ev(
                E::Traced,
                Some(S::Executed),
                S::Traced,
                meta::stored(&cid(4), "exec_trace", json!({"status": "success"})),
            ),
            ev(
                E::Evaluated,
                Some(S::Traced),
                S::Evaluated,
                meta::stored(&cid(5), "eval_result", json!({})),
            ),
            ev(
                E::Evaluated,
                Some(S::Evaluated),
                S::Evaluated,
                meta::stored(&cid(6), "eval_result", json!({})),
            ),
            ev(
                E::Rewarded,
                Some(S::Evaluated),
                S::Rewarded,
                meta::stored(&cid(7), "reward_update", json!({})),
            ),
        ]
    }

    #[test]
    fn replay_rebuilds_the_request() {
        let view = replay(&lifecycle()).unwrap();
        assert_eq!(view.state, State::Rewarded);
        assert_eq!(view.actor, "agent:alice");
        assert_eq!(view.plan, Some(cid(1)));
        assert_eq!(view.risk_report, Some(cid(2)));
        assert_eq!(view.approvals, [cid(3)]);
        assert_eq!(view.trace, Some(cid(4)));
        assert_eq!(view.evaluations, [cid(5), cid(6)]);
        assert_eq!(view.reward, Some(cid(7)));
        assert_eq!(view.events, 10);

        // Every prefix replays to the state its last event reached.
        let events = lifecycle();
        for n in 1..=events.len() {
            let view = replay(&events[..n]).unwrap();
            assert_eq!(view.state, events[n - 1].next_state);
        }
        assert_eq!(replay(&[]), Err(EventError::Empty));
    }

    #[test]
    fn events_for_forbidden_transitions_cannot_be_made() {
        use EventType as E;
        use State as S;
        // RECEIVED → EXECUTED, skipping RISKED, the wrong event for a move.
        for (t, prev, next) in [
            (E::Executed, Some(S::Received), S::Executed),
            (E::Executed, Some(S::Planned), S::Executed),
            (E::ApprovalRequested, Some(S::Planned), S::ApprovalPending),
            (E::Traced, Some(S::Risked), S::Traced),
            (E::Rewarded, Some(S::Traced), S::Rewarded),
            (E::Evaluated, Some(S::Rewarded), S::Evaluated),
            (E::Blocked, Some(S::Executed), S::Blocked),
            (E::Planned, Some(S::Planned), S::Risked),
            (E::Received, Some(S::Received), S::Received),
        ] {
            let err = Event::new(t, "r", prev, next, meta::stored(&cid(0), "x", json!({})));
            assert!(
                matches!(err, Err(EventError::ForbiddenTransition { .. })),
                "{t:?} {prev:?} → {next}"
            );
        }
        // An object event without its object.
        assert!(matches!(
            Event::new(
                E::Planned,
                "r",
                Some(S::Received),
                S::Planned,
                meta::empty()
            ),
            Err(EventError::MissingObject { .. })
        ));
    }

    #[test]
    fn replay_refuses_histories_the_machine_does_not_allow() {
        let events = lifecycle();
        // A dropped event.
        let mut gap = events.clone();
        gap.remove(2);
        assert!(matches!(
            replay(&gap),
            Err(EventError::StateMismatch { index: 2, .. })
        ));
        // Reordered events.
        let mut swapped = events.clone();
        swapped.swap(5, 6);
        assert!(replay(&swapped).is_err());
        // An event of another request.
        let mut other = events.clone();
        other[3].entity_id = "req-2".into();
        assert!(matches!(
            replay(&other),
            Err(EventError::WrongEntity { index: 3, .. })
        ));
        // A stored event edited to skip a state (deserialized, so `Event::new` was not
        // there to refuse it).
        let mut forged = events[..3].to_vec();
        forged.push(Event {
            event_type: EventType::Executed,
            entity_id: "req-1".into(),
            prev_state: Some(State::Risked),
            next_state: State::Traced,
            meta: Map::new(),
        });
        assert!(matches!(
            replay(&forged),
            Err(EventError::ForbiddenTransition { index: 3, .. })
        ));
        // History must start with the creation.
        assert!(matches!(
            replay(&events[1..]),
            Err(EventError::StateMismatch { index: 0, .. })
        ));
    }

    #[test]
    fn stored_events_verify_from_their_stored_text() {
        let events = vec![
            Event::new(
                EventType::Received,
                "req_1",
                None,
                State::Received,
                meta::received("agent:\"a\"\u{1}é"),
            )
            .unwrap(),
            Event::new(
                EventType::Planned,
                "req_1",
                Some(State::Received),
                State::Planned,
                meta::stored(
                    &cid(1),
                    "plan",
                    json!({"plan_id": "p", "n": 1.5, "z": [1, null]}),
                ),
            )
            .unwrap(),
        ];
        let mut prev = (0, CHAIN_START.to_owned());
        let mut scratch = String::new();
        for (n, event) in events.into_iter().enumerate() {
            let seq = u64::try_from(n).unwrap() + 1;
            let chained =
                ChainedEvent::chain(event, seq, "2025-01-01T00:00:00Z", prev.1.clone()).unwrap();
            let meta = jcs::canonical_string(&Value::Object(chained.event.meta.clone())).unwrap();
            let stored = StoredEvent {
                entity_id: &chained.event.entity_id,
                event_type: chained.event.event_type.as_str(),
                meta: &meta,
                next_state: chained.event.next_state.as_str(),
                prev_hash: &chained.prev_hash,
                prev_state: chained.event.prev_state.map(State::as_str),
                seq: chained.seq,
                ts: &chained.ts,
                hash: &chained.hash,
            };
            stored.canonical_bytes_into(&mut scratch);
            assert_eq!(scratch.as_bytes(), chained.canonical_bytes().unwrap());
            stored.verify_after(prev.0, &prev.1, &mut scratch).unwrap();
            // Meta in another form than RFC 8785's, edited fields and broken links fail.
            let spaced = meta.replacen(':', ": ", 1);
            let edited = [
                StoredEvent {
                    meta: &spaced,
                    ..stored
                },
                StoredEvent {
                    ts: "2025-01-01T00:00:01Z",
                    ..stored
                },
                StoredEvent {
                    next_state: "EXECUTED",
                    ..stored
                },
            ];
            for e in edited {
                assert_eq!(
                    e.verify_after(prev.0, &prev.1, &mut scratch),
                    Err(ChainBreak::HashMismatch { seq: stored.seq })
                );
            }
            assert_eq!(
                stored.verify_after(prev.0, "sha256:00", &mut scratch),
                Err(ChainBreak::BrokenLink { seq: stored.seq })
            );
            assert_eq!(
                stored.verify_after(prev.0 + 1, &prev.1, &mut scratch),
                Err(ChainBreak::Gap {
                    after: prev.0 + 1,
                    next: stored.seq
                })
            );
            prev = (chained.seq, chained.hash.clone());
        }
        for t in [
            EventType::Received,
            EventType::ApprovalRecorded,
            EventType::Rewarded,
        ] {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EventType::parse("nope"), None);
    }

    #[test]
    fn chained_events_hash_their_canonical_bytes() {
        let events = lifecycle();
        let mut chain = Vec::new();
        let mut prev = CHAIN_START.to_owned();
        for (i, e) in events.iter().enumerate() {
            let c =
                ChainedEvent::chain(e.clone(), i as u64 + 1, "2026-02-14T10:00:00Z", prev).unwrap();
            prev = c.hash.clone();
            chain.push(c);
        }
        let bytes = String::from_utf8(chain[0].canonical_bytes().unwrap()).unwrap();
        assert_eq!(
            bytes,
            "{\"entity_id\":\"req-1\",\"event_type\":\"received\",\"meta\":{\"actor\":\"agent:alice\"},\
             \"next_state\":\"RECEIVED\",\"prev_hash\":\"\",\"prev_state\":null,\"seq\":1,\
             \"ts\":\"2026-02-14T10:00:00Z\"}"
        );
        assert_eq!(
            chain[0].hash,
            ContentId::of_bytes(bytes.as_bytes()).to_string()
        );
        assert_eq!(
            verify_chain(0, CHAIN_START.into(), &chain),
            Ok((10, prev.clone()))
        );

        let mut edited = chain.clone();
        edited[4]
            .event
            .meta
            .insert("object_id".into(), json!(cid(9).to_string()));
        assert_eq!(
            verify_chain(0, CHAIN_START.into(), &edited),
            Err(ChainBreak::HashMismatch { seq: 5 })
        );
        let mut removed = chain.clone();
        removed.remove(4);
        assert_eq!(
            verify_chain(0, CHAIN_START.into(), &removed),
            Err(ChainBreak::Gap { after: 4, next: 6 })
        );
        let mut relinked = chain.clone();
        relinked[5].prev_hash = chain[3].hash.clone();
        assert_eq!(
            verify_chain(0, CHAIN_START.into(), &relinked),
            Err(ChainBreak::BrokenLink { seq: 6 })
        );
    }

    #[test]
    fn events_serialize_with_the_seeds_field_names() {
        let e = &lifecycle()[1];
        let v = serde_json::to_value(e).unwrap();
        assert_eq!(v["event_type"], "planned");
        assert_eq!(v["entity_id"], "req-1");
        assert_eq!(v["prev_state"], "RECEIVED");
        assert_eq!(v["next_state"], "PLANNED");
        assert_eq!(v["meta"]["object_type"], "plan");
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(&back, e);
    }
}

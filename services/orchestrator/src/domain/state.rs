//! The request state machine (seed §2, issue 18 item 3):
//!
//! ```text
//! RECEIVED → PLANNED → RISKED → (APPROVAL_PENDING) → EXECUTED | BLOCKED → TRACED → EVALUATED → REWARDED
//! ```
//!
//! Every allowed move is listed in [`TRANSITIONS`], with the call that makes it; every
//! other move is refused, so there is no RECEIVED → EXECUTED and no way around RISKED.
//! The few moves that stay in place are deliberate: an approving Approval leaves a
//! request in APPROVAL_PENDING until `execute`, and a traced request takes one
//! evaluation after another until its reward is computed. A RISKED request whose level
//! makes an approval optional (L1's "optional single confirm", seed §4) may take one too:
//! an approving one is recorded and leaves it RISKED (executable), a rejecting one
//! blocks it.
//!
//! A request is created RECEIVED and planned in the same `POST /plan`; a `POST /risk`
//! passes through RISKED and, in the same call, moves on to APPROVAL_PENDING when the
//! plan needs an approval or to BLOCKED when it is forbidden; `POST /execute` moves to
//! EXECUTED (or BLOCKED when the execution is refused) and to TRACED in the same call,
//! since every execution, refused ones included, emits its trace.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    Received,
    Planned,
    Risked,
    ApprovalPending,
    Executed,
    Blocked,
    Traced,
    Evaluated,
    Rewarded,
}

impl State {
    pub const ALL: [State; 9] = [
        State::Received,
        State::Planned,
        State::Risked,
        State::ApprovalPending,
        State::Executed,
        State::Blocked,
        State::Traced,
        State::Evaluated,
        State::Rewarded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Received => "RECEIVED",
            State::Planned => "PLANNED",
            State::Risked => "RISKED",
            State::ApprovalPending => "APPROVAL_PENDING",
            State::Executed => "EXECUTED",
            State::Blocked => "BLOCKED",
            State::Traced => "TRACED",
            State::Evaluated => "EVALUATED",
            State::Rewarded => "REWARDED",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// The calls that may act on a request in this state (what a 409 lists).
    pub fn allowed_calls(self) -> &'static [Call] {
        match self {
            State::Planned => &[Call::Risk],
            State::Risked => &[Call::Approve, Call::Execute],
            State::ApprovalPending => &[Call::Approve, Call::Execute],
            State::Blocked => &[Call::Execute],
            State::Traced => &[Call::Evaluate],
            State::Evaluated => &[Call::Evaluate, Call::RewardUpdate],
            // RECEIVED and EXECUTED only exist inside one call; REWARDED is final.
            State::Received | State::Executed | State::Rewarded => &[],
        }
    }

    /// Whether a request in this state may take `call`.
    pub fn check_call(self, call: Call) -> Result<(), WrongState> {
        if self.allowed_calls().contains(&call) {
            Ok(())
        } else {
            Err(WrongState { state: self, call })
        }
    }

    /// Whether the machine allows the move `self → next`.
    pub fn can_move_to(self, next: State) -> bool {
        TRANSITIONS
            .iter()
            .any(|t| t.from == Some(self) && t.to == next)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state-changing calls of the API (seed §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    Plan,
    Risk,
    Approve,
    Execute,
    Evaluate,
    RewardUpdate,
}

impl Call {
    pub const ALL: [Call; 6] = [
        Call::Plan,
        Call::Risk,
        Call::Approve,
        Call::Execute,
        Call::Evaluate,
        Call::RewardUpdate,
    ];

    /// The REST route of the call.
    pub fn route(self) -> &'static str {
        match self {
            Call::Plan => "POST /plan",
            Call::Risk => "POST /risk",
            Call::Approve => "POST /approve",
            Call::Execute => "POST /execute",
            Call::Evaluate => "POST /evaluate",
            Call::RewardUpdate => "POST /reward/update",
        }
    }

    /// The gRPC-style name (`risk`, `reward_update`).
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Plan => "plan",
            Call::Risk => "risk",
            Call::Approve => "approve",
            Call::Execute => "execute",
            Call::Evaluate => "evaluate",
            Call::RewardUpdate => "reward_update",
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.route())
    }
}

/// A call the request's state does not allow: the 409 with the current state and the
/// calls that would be accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{call} is not allowed for a request in state {state}; allowed next: {}", allowed_text(*.state))]
pub struct WrongState {
    pub state: State,
    pub call: Call,
}

impl WrongState {
    pub fn allowed(&self) -> &'static [Call] {
        self.state.allowed_calls()
    }
}

fn allowed_text(state: State) -> String {
    let calls = state.allowed_calls();
    if calls.is_empty() {
        "none".to_owned()
    } else {
        calls
            .iter()
            .map(|c| c.route())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One allowed move, the call that makes it, and the event that records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// `None` for the creation of a request.
    pub from: Option<State>,
    pub to: State,
    pub call: Call,
    pub event: super::events::EventType,
}

/// Every move the machine allows. Anything not listed is refused.
pub const TRANSITIONS: &[Transition] = {
    use super::events::EventType as E;
    use Call as C;
    use State as S;
    const fn t(from: Option<State>, to: State, call: Call, event: E) -> Transition {
        Transition {
            from,
            to,
            call,
            event,
        }
    }
    &[
        t(None, S::Received, C::Plan, E::Received),
        t(Some(S::Received), S::Planned, C::Plan, E::Planned),
        t(Some(S::Planned), S::Risked, C::Risk, E::Risked),
        t(
            Some(S::Risked),
            S::ApprovalPending,
            C::Risk,
            E::ApprovalRequested,
        ),
        t(Some(S::Risked), S::Blocked, C::Risk, E::Blocked),
        t(Some(S::Risked), S::Risked, C::Approve, E::ApprovalRecorded),
        t(Some(S::Risked), S::Blocked, C::Approve, E::ApprovalRejected),
        t(
            Some(S::ApprovalPending),
            S::ApprovalPending,
            C::Approve,
            E::ApprovalRecorded,
        ),
        t(
            Some(S::ApprovalPending),
            S::Blocked,
            C::Approve,
            E::ApprovalRejected,
        ),
        t(Some(S::Risked), S::Executed, C::Execute, E::Executed),
        t(Some(S::Risked), S::Blocked, C::Execute, E::Blocked),
        t(
            Some(S::ApprovalPending),
            S::Executed,
            C::Execute,
            E::Executed,
        ),
        t(Some(S::ApprovalPending), S::Blocked, C::Execute, E::Blocked),
        t(Some(S::Executed), S::Traced, C::Execute, E::Traced),
        t(Some(S::Blocked), S::Traced, C::Execute, E::Traced),
        t(Some(S::Traced), S::Evaluated, C::Evaluate, E::Evaluated),
        t(Some(S::Evaluated), S::Evaluated, C::Evaluate, E::Evaluated),
        t(
            Some(S::Evaluated),
            S::Rewarded,
            C::RewardUpdate,
            E::Rewarded,
        ),
    ]
};

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The seed's machine, written out independently of [`TRANSITIONS`]: the test fails
    /// if either gains or loses a move.
    const EXPECTED: &[(State, State)] = &[
        (State::Received, State::Planned),
        (State::Planned, State::Risked),
        (State::Risked, State::ApprovalPending),
        (State::Risked, State::Risked),
        (State::Risked, State::Executed),
        (State::Risked, State::Blocked),
        (State::ApprovalPending, State::ApprovalPending),
        (State::ApprovalPending, State::Executed),
        (State::ApprovalPending, State::Blocked),
        (State::Executed, State::Traced),
        (State::Blocked, State::Traced),
        (State::Traced, State::Evaluated),
        (State::Evaluated, State::Evaluated),
        (State::Evaluated, State::Rewarded),
    ];

    #[test]
    fn exactly_the_seeds_moves_are_allowed_and_every_other_is_refused() {
        let expected: BTreeSet<_> = EXPECTED.iter().copied().collect();
        let mut refused = 0;
        for from in State::ALL {
            for to in State::ALL {
                assert_eq!(
                    from.can_move_to(to),
                    expected.contains(&(from, to)),
                    "{from} → {to}"
                );
                if !from.can_move_to(to) {
                    refused += 1;
                }
            }
        }
        // 81 ordered pairs, 14 allowed.
        assert_eq!(refused, 67);
        // The seed's explicit prohibitions.
        assert!(!State::Received.can_move_to(State::Executed));
        assert!(!State::Planned.can_move_to(State::Executed));
        assert!(!State::Planned.can_move_to(State::ApprovalPending));
        assert!(!State::Received.can_move_to(State::Risked));
        assert!(!State::Executed.can_move_to(State::Evaluated));
        assert!(!State::Blocked.can_move_to(State::Executed));
        assert!(!State::Rewarded.can_move_to(State::Evaluated));
        // Only creation enters RECEIVED.
        assert!(
            TRANSITIONS
                .iter()
                .filter(|t| t.to == State::Received)
                .all(|t| t.from.is_none())
        );
    }

    #[test]
    fn every_call_outside_the_allowed_list_is_refused_with_the_list() {
        for state in State::ALL {
            for call in Call::ALL {
                let allowed = state.allowed_calls().contains(&call);
                assert_eq!(state.check_call(call).is_ok(), allowed, "{state} {call}");
                // A call is allowed exactly where a transition starting there uses it,
                // except for the moves that continue the call that entered the state.
                let has_move = TRANSITIONS
                    .iter()
                    .any(|t| t.from == Some(state) && t.call == call);
                let continuation = matches!(
                    (state, call),
                    (State::Received, Call::Plan)
                        | (State::Risked, Call::Risk)
                        | (State::Executed, Call::Execute)
                );
                assert_eq!(
                    allowed,
                    has_move && !continuation,
                    "{state} {call}: allowed {allowed}, move {has_move}"
                );
            }
        }
        let err = State::Traced.check_call(Call::Approve).unwrap_err();
        assert_eq!(err.allowed(), &[Call::Evaluate]);
        assert_eq!(
            err.to_string(),
            "POST /approve is not allowed for a request in state TRACED; allowed next: POST /evaluate"
        );
        assert_eq!(
            State::Rewarded
                .check_call(Call::Evaluate)
                .unwrap_err()
                .to_string(),
            "POST /evaluate is not allowed for a request in state REWARDED; allowed next: none"
        );
        assert!(State::ApprovalPending.check_call(Call::Execute).is_ok());
    }

    #[test]
    fn names_round_trip() {
        for state in State::ALL {
            assert_eq!(State::parse(state.as_str()), Some(state));
            assert_eq!(
                serde_json::to_value(state).ok(),
                Some(serde_json::Value::String(state.as_str().to_owned()))
            );
        }
        assert_eq!(State::parse("approval_pending"), None);
    }
}

//! The retrieve budget (digest §10 steps 5–6): the whole `max_tokens_estimate` is reserved for
//! continuity and split evenly over the capsules (the first `reserve % n` get one more); each
//! capsule then spends its allocation on trust signals (full, compact or none), its salience
//! block and the trimmed capsule.

use crate::domain::json::{Json, JsonObject};

/// What a capsule's absent trust signals cost (`_TRUST_SIGNALS_NULL_OVERHEAD_TOKENS`).
pub const TRUST_SIGNALS_NULL_COST: i64 = 5;
/// What an absent salience block costs (`_SALIENCE_NULL_OVERHEAD_TOKENS`).
pub const SALIENCE_NULL_COST: i64 = 4;

/// Per-capsule allocations: `reserve // n` each, the first `reserve % n` one more.
pub fn split(reserve: i64, capsules: usize) -> Vec<i64> {
    if capsules == 0 {
        return Vec::new();
    }
    let n = capsules as i64;
    let (base, remainder) = (reserve.div_euclid(n), reserve.rem_euclid(n));
    (0..n).map(|i| base + i64::from(i < remainder)).collect()
}

/// Which trust signals a capsule carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustForm {
    Full,
    Compact,
    Omitted,
}

/// Full signals if they cost less than the allocation, else compact ones if those do, else
/// none (which still costs [`TRUST_SIGNALS_NULL_COST`]).
pub fn choose_trust_form(full_cost: i64, compact_cost: i64, allocation: i64) -> (TrustForm, i64) {
    if full_cost < allocation {
        (TrustForm::Full, full_cost)
    } else if compact_cost < allocation {
        (TrustForm::Compact, compact_cost)
    } else {
        (TrustForm::Omitted, TRUST_SIGNALS_NULL_COST)
    }
}

/// `continuity_state.budget`: the whole request is both the hint and the reservation.
pub fn budget_block(requested_max_tokens: i64, used: i64) -> Json {
    let mut budget = JsonObject::new();
    budget.insert(
        "requested_max_tokens_estimate",
        Json::from(requested_max_tokens),
    );
    budget.insert("token_budget_hint", Json::from(requested_max_tokens));
    budget.insert(
        "continuity_tokens_reserved",
        Json::from(requested_max_tokens),
    );
    budget.insert("continuity_tokens_used", Json::from(used));
    Json::Object(budget)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_remainder_goes_to_the_first_capsules() {
        assert_eq!(split(1000, 1), [1000]);
        assert_eq!(split(1000, 3), [334, 333, 333]);
        assert_eq!(split(1001, 4), [251, 250, 250, 250]);
        assert_eq!(split(1003, 4), [251, 251, 251, 250]);
        assert!(split(1000, 0).is_empty());
    }

    #[test]
    fn trust_signals_must_cost_strictly_less_than_the_allocation() {
        assert_eq!(choose_trust_form(40, 20, 41), (TrustForm::Full, 40));
        assert_eq!(choose_trust_form(40, 20, 40), (TrustForm::Compact, 20));
        assert_eq!(choose_trust_form(40, 20, 20), (TrustForm::Omitted, 5));
    }
}

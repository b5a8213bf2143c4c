//! Gold calibration, anti-abuse screening and the reward formula (seed §8–§9, issue 18
//! item 8). `docs/orchestrator.md` walks through these rules with worked numbers; the
//! tests below pin the same numbers.
//!
//! **Influence.** An evaluator's influence is its gold accuracy (matches / gold tasks
//! judged), multiplied by `mismatch_decay` for each consecutive gold mismatch it is on.
//! With no gold record it is 0, so an evaluator's confidence alone never moves anyone's
//! reputation (§8).
//!
//! **Inputs.** For a request's reward, each evaluation adds its evaluator's influence to
//! `correct` when it passed the gate and to `incorrect` when it failed; each evaluation
//! suppressed by an anti-abuse rule counts for neither and adds 1 to `noise`.
//!
//! **Formula.** `rep_next = clamp(rep + alpha*correct - beta*incorrect - gamma*noise, 0,
//! rep_cap)` (§9), rounded to six decimals so a stored reputation reads back exactly.
//!
//! **Anti-abuse** (each firing recorded in `reason_codes`): a vote cast less than the
//! cooldown after the same evaluator's previous vote is suppressed
//! (`duplicate_vote_cooldown`); an evaluator's votes on one submission beyond
//! `max_votes_per_submission` are suppressed (`repeated_vote_suppressed`); an evaluator
//! casting more than `burst_max_votes` votes within the burst window is penalised: the
//! votes past the limit are suppressed and count as noise (`anomalous_burst`).

use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use super::objects::{EvalResult, RewardInputs};
use super::policy::{AntiAbuseParams, RewardParams};

/// Stable reason codes of reward updates and screened votes.
pub mod codes {
    pub const DUPLICATE_VOTE_COOLDOWN: &str = "duplicate_vote_cooldown";
    pub const REPEATED_VOTE_SUPPRESSED: &str = "repeated_vote_suppressed";
    pub const ANOMALOUS_BURST: &str = "anomalous_burst";
    /// An evaluation that passed the gate added its evaluator's influence to `correct`.
    pub const GATE_PASSED: &str = "gate_passed";
    /// An evaluation that failed the gate added its evaluator's influence to `incorrect`.
    pub const GATE_FAILED: &str = "gate_failed";
    /// An evaluator without gold performance counted for nothing.
    pub const NO_GOLD_RECORD: &str = "no_gold_record";
    pub const CLAMPED_TO_CAP: &str = "clamped_to_cap";
    pub const CLAMPED_TO_ZERO: &str = "clamped_to_zero";
}

/// Rounds to six decimals: reputations are stored and compared as these.
pub fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

// ---------------------------------------------------------------------------------------
// Gold calibration

/// The known answer of a gold task.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GoldAnswer {
    pub pass: bool,
    /// The scores a correct judgement may give, inclusive.
    pub min_score: f64,
    pub max_score: f64,
}

/// Whether an evaluation of a gold task agrees with its known answer.
pub fn gold_matches(eval: &EvalResult, answer: &GoldAnswer) -> bool {
    eval.pass == answer.pass && eval.score >= answer.min_score && eval.score <= answer.max_score
}

/// Whether the next item served to an evaluator is a gold task: `draw` is a uniform
/// random number in [0, 1) from the service, so the evaluator cannot predict it.
pub fn serve_gold(draw: f64, ratio: f64) -> bool {
    draw < ratio
}

/// An evaluator's gold performance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoldRecord {
    pub attempts: u32,
    pub matches: u32,
    /// Mismatches since the last match.
    pub consecutive_mismatches: u32,
}

impl GoldRecord {
    /// The record after one more judged gold task.
    pub fn record(self, matched: bool) -> GoldRecord {
        GoldRecord {
            attempts: self.attempts.saturating_add(1),
            matches: self.matches.saturating_add(u32::from(matched)),
            consecutive_mismatches: if matched {
                0
            } else {
                self.consecutive_mismatches.saturating_add(1)
            },
        }
    }

    /// Influence in [0, 1]: accuracy × decay^consecutive mismatches; 0 with no record.
    pub fn influence(&self, mismatch_decay: f64) -> f64 {
        if self.attempts == 0 {
            return 0.0;
        }
        let accuracy = f64::from(self.matches) / f64::from(self.attempts);
        let streak = i32::try_from(self.consecutive_mismatches).unwrap_or(i32::MAX);
        (accuracy * mismatch_decay.powi(streak)).clamp(0.0, 1.0)
    }
}

// ---------------------------------------------------------------------------------------
// Anti-abuse screening

/// A vote an evaluator cast earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorVote {
    pub submission_id: String,
    pub at: OffsetDateTime,
}

/// The result of screening a vote; `reason_codes` lists every rule that fired.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Screening {
    pub suppressed: bool,
    pub reason_codes: Vec<String>,
}

/// What screening needs to know about an evaluator's votes before this one (a store
/// counts them; [`screen_vote`] counts them from a list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VoteHistory {
    /// The evaluator's latest vote at or before this one, on anything.
    pub last_vote_at: Option<OffsetDateTime>,
    /// Its votes within the burst window ending at this vote (`at - window < v.at <= at`).
    pub votes_in_window: usize,
    /// Its votes on this vote's submission so far.
    pub votes_on_submission: usize,
}

impl VoteHistory {
    /// Counts `history` (any order; only votes at or before `at` count).
    pub fn of(
        history: &[PriorVote],
        submission_id: &str,
        at: OffsetDateTime,
        params: &AntiAbuseParams,
    ) -> VoteHistory {
        let earlier: Vec<&PriorVote> = history.iter().filter(|v| v.at <= at).collect();
        let window = seconds(params.burst_window_seconds);
        VoteHistory {
            last_vote_at: earlier.iter().map(|v| v.at).max(),
            votes_in_window: earlier.iter().filter(|v| at - v.at < window).count(),
            votes_on_submission: earlier
                .iter()
                .filter(|v| v.submission_id == submission_id)
                .count(),
        }
    }
}

/// Screens a vote on `submission_id` at `at` against the same evaluator's earlier votes
/// (`history`, any order; only votes at or before `at` count).
pub fn screen_vote(
    history: &[PriorVote],
    submission_id: &str,
    at: OffsetDateTime,
    params: &AntiAbuseParams,
) -> Screening {
    screen(
        &VoteHistory::of(history, submission_id, at, params),
        at,
        params,
    )
}

/// Screens a vote cast at `at` by an evaluator whose earlier votes `history` counts.
pub fn screen(history: &VoteHistory, at: OffsetDateTime, params: &AntiAbuseParams) -> Screening {
    let mut reason_codes = Vec::new();
    let cooldown = seconds(params.duplicate_vote_cooldown_seconds);
    if cooldown > Duration::ZERO
        && history
            .last_vote_at
            .is_some_and(|last| at - last < cooldown)
    {
        reason_codes.push(codes::DUPLICATE_VOTE_COOLDOWN.to_owned());
    }
    if history.votes_on_submission
        >= usize::try_from(params.max_votes_per_submission).unwrap_or(usize::MAX)
    {
        reason_codes.push(codes::REPEATED_VOTE_SUPPRESSED.to_owned());
    }
    if history.votes_in_window + 1 > usize::try_from(params.burst_max_votes).unwrap_or(usize::MAX) {
        reason_codes.push(codes::ANOMALOUS_BURST.to_owned());
    }
    Screening {
        suppressed: !reason_codes.is_empty(),
        reason_codes,
    }
}

/// The time `s` seconds long.
pub fn seconds(s: u64) -> Duration {
    Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX))
}

// ---------------------------------------------------------------------------------------
// Reward

/// One evaluation of the request, as the reward sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredEvaluation {
    pub evaluator_id: String,
    pub gate_passed: bool,
    /// Suppressed by an anti-abuse rule when it was screened.
    pub screening: Screening,
    /// The evaluator's influence (from its gold record) when the reward is computed.
    pub influence: f64,
}

/// A computed reward: the formula's inputs, the result and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Reward {
    pub inputs: RewardInputs,
    pub rep_before: f64,
    pub rep_after: f64,
    pub delta: f64,
    pub reason_codes: Vec<String>,
}

/// The formula: `clamp(rep + alpha*correct - beta*incorrect - gamma*noise, 0, rep_cap)`.
pub fn apply_formula(rep: f64, inputs: &RewardInputs) -> f64 {
    (rep + inputs.alpha * inputs.correct
        - inputs.beta * inputs.incorrect
        - inputs.gamma * inputs.noise)
        .clamp(0.0, inputs.rep_cap)
}

/// The actor's reward from its request's evaluations.
pub fn compute_reward(
    rep_before: f64,
    evaluations: &[ScoredEvaluation],
    params: &RewardParams,
) -> Reward {
    let mut correct = 0.0;
    let mut incorrect = 0.0;
    let mut noise = 0.0;
    let mut reason_codes: Vec<String> = Vec::new();
    let mut note = |code: &str| {
        if !reason_codes.iter().any(|c| c == code) {
            reason_codes.push(code.to_owned());
        }
    };
    for e in evaluations {
        if e.screening.suppressed {
            noise += 1.0;
            for code in &e.screening.reason_codes {
                note(code);
            }
            continue;
        }
        let influence = e.influence.clamp(0.0, 1.0);
        if influence == 0.0 {
            note(codes::NO_GOLD_RECORD);
            continue;
        }
        if e.gate_passed {
            correct += influence;
            note(codes::GATE_PASSED);
        } else {
            incorrect += influence;
            note(codes::GATE_FAILED);
        }
    }
    let inputs = RewardInputs {
        correct,
        incorrect,
        noise,
        alpha: params.alpha,
        beta: params.beta,
        gamma: params.gamma,
        rep_cap: params.rep_cap,
    };
    let rep_before = rep_before.clamp(0.0, params.rep_cap);
    let unclamped =
        rep_before + params.alpha * correct - params.beta * incorrect - params.gamma * noise;
    if unclamped > params.rep_cap {
        note(codes::CLAMPED_TO_CAP);
    } else if unclamped < 0.0 {
        note(codes::CLAMPED_TO_ZERO);
    }
    let rep_after = round6(apply_formula(rep_before, &inputs));
    Reward {
        inputs,
        rep_before,
        rep_after,
        delta: round6(rep_after - rep_before),
        reason_codes,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::objects::SCHEMA_VERSION;
    use time::macros::datetime;

    fn params() -> RewardParams {
        RewardParams {
            alpha: 1.0,
            beta: 1.2,
            gamma: 0.5,
            rep_cap: 100.0,
            initial_rep: 0.0,
        }
    }

    fn counted(evaluator: &str, gate_passed: bool, influence: f64) -> ScoredEvaluation {
        ScoredEvaluation {
            evaluator_id: evaluator.into(),
            gate_passed,
            screening: Screening::default(),
            influence,
        }
    }

    fn suppressed(evaluator: &str, code: &str) -> ScoredEvaluation {
        ScoredEvaluation {
            evaluator_id: evaluator.into(),
            gate_passed: true,
            screening: Screening {
                suppressed: true,
                reason_codes: vec![code.into()],
            },
            influence: 1.0,
        }
    }

    fn gold(record: &[bool]) -> GoldRecord {
        record
            .iter()
            .fold(GoldRecord::default(), |r, m| r.record(*m))
    }

    /// docs/orchestrator.md, "Influence".
    #[test]
    fn worked_influence_numbers() {
        assert_eq!(GoldRecord::default().influence(0.5), 0.0);
        // 10 of 10: full influence.
        assert_eq!(gold(&[true; 10]).influence(0.5), 1.0);
        // 4 of 5, last one a match: 0.8.
        assert_eq!(gold(&[false, true, true, true, true]).influence(0.5), 0.8);
        // 9 of 10, the last one a mismatch: 0.9 × 0.5 = 0.45.
        let mut nine = vec![true; 9];
        nine.push(false);
        assert_eq!(round6(gold(&nine).influence(0.5)), 0.45);
        // A second mismatch in a row: 9/11 × 0.25 = 0.204545.
        nine.push(false);
        assert_eq!(round6(gold(&nine).influence(0.5)), 0.204545);
        // A match ends the streak: 10/12 = 0.833333.
        nine.push(true);
        let r = gold(&nine);
        assert_eq!(
            (r.attempts, r.matches, r.consecutive_mismatches),
            (12, 10, 0)
        );
        assert_eq!(round6(r.influence(0.5)), 0.833333);
        // Repeated mismatch only ever lowers influence.
        let mut record = gold(&[true; 5]);
        let mut last = record.influence(0.5);
        for _ in 0..6 {
            record = record.record(false);
            let now = record.influence(0.5);
            assert!(now < last, "{now} !< {last}");
            last = now;
        }
    }

    /// docs/orchestrator.md, "Worked example 1".
    #[test]
    fn worked_example_gain() {
        let r = compute_reward(
            50.0,
            &[
                counted("eval:a", true, 1.0),
                counted("eval:b", true, 0.8),
                counted("eval:c", true, 0.0), // no gold record: confident, but counts nothing
            ],
            &params(),
        );
        assert_eq!(
            (r.inputs.correct, r.inputs.incorrect, r.inputs.noise),
            (1.8, 0.0, 0.0)
        );
        assert_eq!(r.rep_after, 51.8);
        assert_eq!(r.delta, 1.8);
        assert_eq!(r.reason_codes, [codes::GATE_PASSED, codes::NO_GOLD_RECORD]);
    }

    /// docs/orchestrator.md, "Worked example 2".
    #[test]
    fn worked_example_loss_with_noise() {
        let r = compute_reward(
            10.0,
            &[
                counted("eval:a", false, 0.9),
                suppressed("eval:b", codes::DUPLICATE_VOTE_COOLDOWN),
                suppressed("eval:d", codes::ANOMALOUS_BURST),
            ],
            &params(),
        );
        // 10 + 1.0×0 − 1.2×0.9 − 0.5×2 = 10 − 1.08 − 1 = 7.92
        assert_eq!(
            (r.inputs.correct, r.inputs.incorrect, r.inputs.noise),
            (0.0, 0.9, 2.0)
        );
        assert_eq!(r.rep_after, 7.92);
        assert_eq!(r.delta, -2.08);
        assert_eq!(
            r.reason_codes,
            [
                codes::GATE_FAILED,
                codes::DUPLICATE_VOTE_COOLDOWN,
                codes::ANOMALOUS_BURST
            ]
        );
    }

    /// docs/orchestrator.md, "Worked example 3": the clamp at both ends.
    #[test]
    fn worked_example_clamps() {
        let up = compute_reward(99.5, &[counted("a", true, 1.0)], &params());
        assert_eq!((up.rep_after, up.delta), (100.0, 0.5));
        assert!(up.reason_codes.contains(&codes::CLAMPED_TO_CAP.to_owned()));
        let down = compute_reward(0.3, &[counted("a", false, 1.0)], &params());
        assert_eq!((down.rep_after, down.delta), (0.0, -0.3));
        assert!(
            down.reason_codes
                .contains(&codes::CLAMPED_TO_ZERO.to_owned())
        );
    }

    #[test]
    fn the_formula_uses_each_parameter() {
        let inputs = RewardInputs {
            correct: 2.0,
            incorrect: 1.0,
            noise: 4.0,
            alpha: 1.0,
            beta: 1.2,
            gamma: 0.5,
            rep_cap: 100.0,
        };
        // 20 + 2 − 1.2 − 2 = 18.8
        assert_eq!(round6(apply_formula(20.0, &inputs)), 18.8);
        let other = RewardInputs {
            alpha: 2.0,
            beta: 0.0,
            gamma: 1.0,
            rep_cap: 21.0,
            ..inputs
        };
        // 20 + 4 − 0 − 4 = 20
        assert_eq!(apply_formula(20.0, &other), 20.0);
        let capped = RewardInputs {
            gamma: 0.0,
            ..other
        };
        assert_eq!(apply_formula(20.0, &capped), 21.0);
    }

    #[test]
    fn confidence_without_gold_never_raises_reputation() {
        let many_confident: Vec<_> = (0..50)
            .map(|i| counted(&format!("e{i}"), true, 0.0))
            .collect();
        let r = compute_reward(42.0, &many_confident, &params());
        assert_eq!((r.rep_after, r.delta), (42.0, 0.0));
        assert_eq!(r.reason_codes, [codes::NO_GOLD_RECORD]);
    }

    fn anti_abuse() -> AntiAbuseParams {
        AntiAbuseParams {
            duplicate_vote_cooldown_seconds: 60,
            max_votes_per_submission: 1,
            burst_window_seconds: 600,
            burst_max_votes: 3,
        }
    }

    fn vote(submission: &str, at: OffsetDateTime) -> PriorVote {
        PriorVote {
            submission_id: submission.into(),
            at,
        }
    }

    /// docs/orchestrator.md, "Anti-abuse": each rule with its numbers.
    #[test]
    fn worked_anti_abuse_rules() {
        let t0 = datetime!(2026-02-14 10:00:00 UTC);
        let p = anti_abuse();

        // First vote: nothing fires.
        assert_eq!(screen_vote(&[], "req-1", t0, &p), Screening::default());

        // Cooldown: a vote 59 s after the previous one (another submission) is
        // suppressed; at 60 s it is not.
        let history = [vote("req-1", t0)];
        let s = screen_vote(&history, "req-2", t0 + Duration::seconds(59), &p);
        assert!(s.suppressed);
        assert_eq!(s.reason_codes, [codes::DUPLICATE_VOTE_COOLDOWN]);
        assert!(!screen_vote(&history, "req-2", t0 + Duration::seconds(60), &p).suppressed);

        // Repeated vote on one submission, an hour later: suppressed.
        let s = screen_vote(&history, "req-1", t0 + Duration::hours(1), &p);
        assert_eq!(s.reason_codes, [codes::REPEATED_VOTE_SUPPRESSED]);

        // Burst: with at most 3 votes per 600 s, the 4th within the window is penalised.
        let burst = [
            vote("req-1", t0),
            vote("req-2", t0 + Duration::seconds(100)),
            vote("req-3", t0 + Duration::seconds(200)),
        ];
        let s = screen_vote(&burst, "req-4", t0 + Duration::seconds(300), &p);
        assert_eq!(s.reason_codes, [codes::ANOMALOUS_BURST]);
        // At 600 s the first vote has left the window: 3 in window, allowed.
        assert!(!screen_vote(&burst, "req-4", t0 + Duration::seconds(600), &p).suppressed);

        // Several rules at once are all recorded.
        let s = screen_vote(&burst, "req-3", t0 + Duration::seconds(210), &p);
        assert_eq!(
            s.reason_codes,
            [
                codes::DUPLICATE_VOTE_COOLDOWN,
                codes::REPEATED_VOTE_SUPPRESSED,
                codes::ANOMALOUS_BURST
            ]
        );

        // Votes after the one screened do not count against it.
        let future = [vote("req-1", t0 + Duration::seconds(5))];
        assert!(!screen_vote(&future, "req-1", t0, &p).suppressed);

        // A cooldown of 0 disables that rule.
        let no_cooldown = AntiAbuseParams {
            duplicate_vote_cooldown_seconds: 0,
            ..p
        };
        assert!(
            !screen_vote(&history, "req-2", t0 + Duration::seconds(1), &no_cooldown).suppressed
        );
    }

    #[test]
    fn gold_answers_and_sampling() {
        let answer = GoldAnswer {
            pass: true,
            min_score: 0.7,
            max_score: 1.0,
        };
        let eval = |score: f64, pass: bool| EvalResult {
            schema_version: SCHEMA_VERSION.into(),
            id: "e".into(),
            ts: "2026-02-14T10:00:00Z".into(),
            source: "x".into(),
            suite: "default".into(),
            score,
            pass,
            regression: false,
            findings: vec![],
        };
        assert!(gold_matches(&eval(0.7, true), &answer));
        assert!(gold_matches(&eval(1.0, true), &answer));
        assert!(!gold_matches(&eval(0.69, true), &answer));
        assert!(!gold_matches(&eval(0.9, false), &answer));
        // With ratio 0.10, exactly the draws below 0.10 serve gold: over an even grid of
        // 1,000 draws that is 100 (10 %).
        let served = (0..1000)
            .filter(|i| serve_gold(f64::from(*i) / 1000.0, 0.10))
            .count();
        assert_eq!(served, 100);
    }
}

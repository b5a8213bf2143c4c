//! The evaluation gate (seed §7, issue 18 item 7).
//!
//! The gate passes when `pass == true && regression == false && score >=
//! gate_min_score`. `regression` is not only taken from the evaluator: the server also
//! computes it against the suite's baseline — the best score that passed the gate so
//! far — minus the policy's tolerance, and either flag makes it a regression. An
//! evaluation for a suite the policy does not declare is refused (fail closed).

use serde::Serialize;

use super::objects::EvalResult;
use super::policy::{RiskPolicy, SuiteSpec};

/// Slack for comparing decimal scores held as doubles: a score exactly at the gate or
/// exactly at `baseline - tolerance` is on the passing side.
const EPSILON: f64 = 1e-9;

/// Why an evaluation is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error("eval suite {suite:?} is not declared in the risk policy (declared: {})", .declared.join(", "))]
    UnknownSuite {
        suite: String,
        declared: Vec<String>,
    },
}

/// The suite an evaluation names, if the policy declares it.
pub fn declared_suite<'p>(policy: &'p RiskPolicy, suite: &str) -> Result<&'p SuiteSpec, EvalError> {
    policy.suite(suite).ok_or_else(|| EvalError::UnknownSuite {
        suite: suite.to_owned(),
        declared: policy
            .document()
            .eval
            .suites
            .iter()
            .map(|s| s.name.clone())
            .collect(),
    })
}

/// The gate's decision for one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateOutcome {
    pub gate_passed: bool,
    /// The evaluator's flag or the server's finding.
    pub regression: bool,
    /// What the server found against the baseline.
    pub regression_computed: bool,
    pub baseline: Option<f64>,
    /// The suite's baseline after this evaluation.
    pub next_baseline: Option<f64>,
    pub reasons: Vec<String>,
}

/// Decides the gate for `eval` in `suite`, whose baseline so far is `baseline`.
pub fn gate(
    eval: &EvalResult,
    suite: &SuiteSpec,
    baseline: Option<f64>,
    tolerance: f64,
) -> GateOutcome {
    let mut reasons = Vec::new();
    let regression_computed = match baseline {
        Some(best) if eval.score < best - tolerance - EPSILON => {
            reasons.push(format!(
                "regression: score {} is below the suite's baseline {best} minus tolerance {tolerance}",
                eval.score
            ));
            true
        }
        _ => false,
    };
    if eval.regression {
        reasons.push("the evaluator reported a regression".to_owned());
    }
    if !eval.pass {
        reasons.push("the evaluator reported pass = false".to_owned());
    }
    let meets_minimum = eval.score + EPSILON >= suite.gate_min_score;
    if !meets_minimum {
        reasons.push(format!(
            "score {} is below the gate minimum {}",
            eval.score, suite.gate_min_score
        ));
    }
    let regression = eval.regression || regression_computed;
    let gate_passed = eval.pass && !regression && meets_minimum;
    if gate_passed {
        reasons.push(format!(
            "gate passed: pass, no regression, score {} ≥ {}",
            eval.score, suite.gate_min_score
        ));
    }
    let next_baseline = match (gate_passed, baseline) {
        (true, Some(best)) => Some(best.max(eval.score)),
        (true, None) => Some(eval.score),
        (false, best) => best,
    };
    GateOutcome {
        gate_passed,
        regression,
        regression_computed,
        baseline,
        next_baseline,
        reasons,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::objects::SCHEMA_VERSION;

    fn suite(min: f64) -> SuiteSpec {
        SuiteSpec {
            name: "default".into(),
            gate_min_score: min,
            required: true,
            description: None,
        }
    }

    fn eval(score: f64, pass: bool, regression: bool) -> EvalResult {
        EvalResult {
            schema_version: SCHEMA_VERSION.into(),
            id: "e".into(),
            ts: "2026-02-14T10:00:00Z".into(),
            source: "agent:eve".into(),
            suite: "default".into(),
            score,
            pass,
            regression,
            findings: vec![],
        }
    }

    #[test]
    fn the_gate_contract() {
        // (score, pass, reported regression, baseline) → (gate, regression)
        let rows = [
            (0.90, true, false, None, true, false),
            (0.80, true, false, None, true, false), // exactly the minimum
            (0.79, true, false, None, false, false),
            (0.95, false, false, None, false, false),
            (0.95, true, true, None, false, true),
            (0.88, true, false, Some(0.90), true, false), // exactly baseline − tolerance
            (0.87, true, false, Some(0.90), false, true), // below it: server-found
            (0.99, true, false, Some(0.90), true, false),
        ];
        for (score, pass, reported, baseline, passed, regression) in rows {
            let out = gate(&eval(score, pass, reported), &suite(0.8), baseline, 0.02);
            assert_eq!(
                (out.gate_passed, out.regression),
                (passed, regression),
                "{score} {pass} {reported} {baseline:?}: {:?}",
                out.reasons
            );
        }
    }

    #[test]
    fn the_server_finds_regressions_the_evaluator_did_not_report() {
        let out = gate(&eval(0.85, true, false), &suite(0.8), Some(0.95), 0.02);
        assert!(out.regression_computed && out.regression && !out.gate_passed);
        assert!(
            out.reasons[0].starts_with("regression: score 0.85 is below the suite's baseline 0.95")
        );
        assert_eq!(out.next_baseline, Some(0.95));
    }

    #[test]
    fn the_baseline_is_the_best_passing_score() {
        let s = suite(0.5);
        let mut baseline = None;
        for (score, pass) in [
            (0.6, true),
            (0.9, true),
            (0.7, false),
            (0.89, true),
            (0.95, false),
        ] {
            baseline = gate(&eval(score, pass, false), &s, baseline, 0.02).next_baseline;
        }
        // 0.9 passed; 0.7 failed (pass = false) and does not lower it; 0.89 passed within
        // tolerance without raising it; 0.95 did not pass and does not count.
        assert_eq!(baseline, Some(0.9));
    }

    #[test]
    fn undeclared_suites_are_refused() {
        let policy = RiskPolicy::default_policy().unwrap();
        assert_eq!(
            declared_suite(&policy, "default").unwrap().gate_min_score,
            0.8
        );
        let err = declared_suite(&policy, "made-up").unwrap_err();
        assert_eq!(
            err.to_string(),
            "eval suite \"made-up\" is not declared in the risk policy (declared: default)"
        );
    }
}

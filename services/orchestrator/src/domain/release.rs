//! The release checklist (seed §12): a release is blocked while any of seven items fails.
//!
//! The service gathers [`ReleaseFacts`] from its store (with the helpers below, which
//! decide per request) and [`check_release`] evaluates every item, naming each failing
//! one with its details. `noema release check` exits non-zero and `GET /release/check`
//! answers `ok: false` when any item fails.

use std::collections::BTreeMap;

use serde::Serialize;

use super::approval::{self, Refusal};
use super::events::RequestView;
use super::objects::{ExecTrace, Plan, RiskLevel, RiskReport, SCHEMA_VERSION, TraceStatus};
use super::policy::{ApprovalRules, RiskPolicy};
use super::schema::SchemaName;
use super::state::State;
use super::timestamp;

/// The seven blockers, in the seed's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocker {
    SchemaVersionMismatch,
    RiskMatrixNotLoaded,
    ApprovalBypassDetected,
    MissingExecutionTrace,
    EvalGateFailed,
    RegressionSuiteFailed,
    RollbackPathUnavailable,
}

impl Blocker {
    pub const ALL: [Blocker; 7] = [
        Blocker::SchemaVersionMismatch,
        Blocker::RiskMatrixNotLoaded,
        Blocker::ApprovalBypassDetected,
        Blocker::MissingExecutionTrace,
        Blocker::EvalGateFailed,
        Blocker::RegressionSuiteFailed,
        Blocker::RollbackPathUnavailable,
    ];

    /// The stable machine name (`risk_matrix_not_loaded`).
    pub fn as_str(self) -> &'static str {
        match self {
            Blocker::SchemaVersionMismatch => "schema_version_mismatch",
            Blocker::RiskMatrixNotLoaded => "risk_matrix_not_loaded",
            Blocker::ApprovalBypassDetected => "approval_bypass_detected",
            Blocker::MissingExecutionTrace => "missing_execution_trace",
            Blocker::EvalGateFailed => "eval_gate_failed",
            Blocker::RegressionSuiteFailed => "regression_suite_failed",
            Blocker::RollbackPathUnavailable => "rollback_path_unavailable",
        }
    }

    /// The seed's words.
    pub fn title(self) -> &'static str {
        match self {
            Blocker::SchemaVersionMismatch => "Schema version mismatch",
            Blocker::RiskMatrixNotLoaded => "Risk matrix not loaded",
            Blocker::ApprovalBypassDetected => "Approval flow bypass detected",
            Blocker::MissingExecutionTrace => "Missing execution trace",
            Blocker::EvalGateFailed => "Eval gate failed",
            Blocker::RegressionSuiteFailed => "Regression suite failed",
            Blocker::RollbackPathUnavailable => "Rollback path unavailable",
        }
    }
}

/// The latest evaluation of a suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatestEvaluation {
    pub request_id: String,
    pub eval_id: String,
    /// `pass == true && score >= gate_min_score`: the gate without its regression term.
    pub passed_minimum: bool,
    /// The evaluator's flag or the server's finding against the baseline.
    pub regression: bool,
}

impl LatestEvaluation {
    /// The whole gate (seed §7): passed, met the minimum, and no regression.
    pub fn gate_passed(&self) -> bool {
        self.passed_minimum && !self.regression
    }
}

/// What the service found.
#[derive(Debug, Clone, Default)]
pub struct ReleaseFacts<'a> {
    /// Stored objects (or inputs) with a `schema_version` this server does not know.
    pub schema_mismatches: Vec<String>,
    /// The loaded policy; `None` when it is not loaded.
    pub policy: Option<&'a RiskPolicy>,
    /// Why the policy (file) does not load: when none is loaded, or when the last reload
    /// failed and the previous policy still runs.
    pub policy_error: Option<String>,
    /// Requests that ran without what their report required ([`approval_bypass`]).
    pub approval_bypasses: Vec<String>,
    /// Requests that executed without a trace ([`missing_trace`]).
    pub missing_traces: Vec<String>,
    /// The latest evaluation of each suite, by suite name.
    pub latest_evaluations: BTreeMap<String, LatestEvaluation>,
    /// Requests whose rollback path is unavailable ([`rollback_gap`]).
    pub rollback_gaps: Vec<String>,
}

/// One item's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseItem {
    pub item: Blocker,
    pub title: &'static str,
    pub ok: bool,
    pub details: Vec<String>,
}

/// The whole checklist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseReport {
    pub ok: bool,
    pub items: Vec<ReleaseItem>,
}

impl ReleaseReport {
    pub fn failing(&self) -> impl Iterator<Item = &ReleaseItem> {
        self.items.iter().filter(|i| !i.ok)
    }
}

/// Evaluates all seven items.
pub fn check_release(facts: &ReleaseFacts<'_>) -> ReleaseReport {
    let mut items = Vec::with_capacity(Blocker::ALL.len());
    let mut push = |item: Blocker, details: Vec<String>| {
        items.push(ReleaseItem {
            item,
            title: item.title(),
            ok: details.is_empty(),
            details,
        });
    };

    let mut schema = shipped_schema_mismatches();
    schema.extend(facts.schema_mismatches.iter().cloned());
    if let Some(policy) = facts.policy
        && policy.document().schema_version != SCHEMA_VERSION
    {
        schema.push(format!(
            "the risk policy has schema_version {:?}",
            policy.document().schema_version
        ));
    }
    push(Blocker::SchemaVersionMismatch, schema);

    // A policy file that no longer loads fails the item even while the last good policy
    // still runs: the next start would refuse it.
    push(
        Blocker::RiskMatrixNotLoaded,
        match (facts.policy, &facts.policy_error) {
            (_, Some(error)) => vec![error.clone()],
            (Some(_), None) => Vec::new(),
            (None, None) => vec!["risk matrix not loaded: no policy".to_owned()],
        },
    );
    push(
        Blocker::ApprovalBypassDetected,
        facts.approval_bypasses.clone(),
    );
    push(Blocker::MissingExecutionTrace, facts.missing_traces.clone());

    let mut gate = Vec::new();
    let mut regression = Vec::new();
    match facts.policy {
        None => {
            gate.push("no policy is loaded, so the required suites are unknown".to_owned());
            regression.push("no policy is loaded, so the required suites are unknown".to_owned());
        }
        Some(policy) => {
            for suite in policy.document().eval.suites.iter().filter(|s| s.required) {
                match facts.latest_evaluations.get(&suite.name) {
                    None => gate.push(format!("required suite {} has no evaluation", suite.name)),
                    Some(latest) => {
                        // A regression is item 6's to name: item 5 is the gate's pass and
                        // score terms, so each item can fail on its own.
                        if !latest.passed_minimum {
                            gate.push(format!(
                                "required suite {}: latest evaluation {} (request {}) failed the gate (pass or score)",
                                suite.name, latest.eval_id, latest.request_id
                            ));
                        }
                        if latest.regression {
                            regression.push(format!(
                                "required suite {}: latest evaluation {} (request {}) is a regression",
                                suite.name, latest.eval_id, latest.request_id
                            ));
                        }
                    }
                }
            }
        }
    }
    push(Blocker::EvalGateFailed, gate);
    push(Blocker::RegressionSuiteFailed, regression);
    push(
        Blocker::RollbackPathUnavailable,
        facts.rollback_gaps.clone(),
    );

    ReleaseReport {
        ok: items.iter().all(|i| i.ok),
        items,
    }
}

/// Embedded schemas whose `schema_version` is not the server's: a build inconsistency.
pub fn shipped_schema_mismatches() -> Vec<String> {
    SchemaName::ALL
        .into_iter()
        .filter_map(|name| {
            let doc: serde_json::Value = serde_json::from_str(name.text()).ok()?;
            let version = doc["properties"]["schema_version"]["const"].as_str();
            (version != Some(SCHEMA_VERSION)).then(|| {
                format!(
                    "schema {} declares schema_version {version:?}, the server {SCHEMA_VERSION:?}",
                    name.file_name()
                )
            })
        })
        .collect()
}

/// Whether a request ran without what its risk report required: it was forbidden, or it
/// needed approvals that did not authorize it at the time of its trace.
pub fn approval_bypass(
    request_id: &str,
    plan: &Plan,
    report: &RiskReport,
    approvals: &[super::objects::Approval],
    trace: &ExecTrace,
    rules: &ApprovalRules,
) -> Option<String> {
    if trace.status == TraceStatus::Blocked {
        return None;
    }
    let Some(at) = timestamp::parse(&trace.ts) else {
        return Some(format!(
            "request {request_id}: trace {} has an unreadable ts",
            trace.trace_id
        ));
    };
    match approval::authorize_execution(plan, report, approvals, rules, at) {
        Ok(_) => None,
        Err(Refusal::Forbidden { .. }) => Some(format!(
            "request {request_id} executed although its plan is forbidden ({})",
            report.risk_level
        )),
        Err(Refusal::Approval(err)) => Some(format!(
            "request {request_id} executed without a valid approval: {err}"
        )),
    }
}

/// Whether a request that executed (or was refused) lacks its trace.
pub fn missing_trace(view: &RequestView) -> Option<String> {
    let executed = matches!(
        view.state,
        State::Executed | State::Traced | State::Evaluated | State::Rewarded
    );
    (executed && view.trace.is_none()).then(|| {
        format!(
            "request {} is {} without an execution trace",
            view.request_id, view.state
        )
    })
}

/// Whether a request's rollback path is unavailable: a step failed and no rollback
/// restored the state, or a plan with effects (L1 or higher) ran without declaring any
/// rollback path.
pub fn rollback_gap(
    request_id: &str,
    plan: &Plan,
    report: &RiskReport,
    trace: &ExecTrace,
) -> Option<String> {
    match trace.status {
        TraceStatus::Blocked => None,
        TraceStatus::Failed => Some(format!(
            "request {request_id}: a step failed and no rollback restored the state (trace {})",
            trace.trace_id
        )),
        TraceStatus::Success | TraceStatus::RolledBack => (report.risk_level >= RiskLevel::L1
            && plan.rollback_plan.trim().is_empty()
            && plan.rollback_steps.as_ref().is_none_or(Vec::is_empty))
        .then(|| {
            format!(
                "request {request_id}: a {} plan ran without declaring a rollback path",
                report.risk_level
            )
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::domain::objects::{Approval, Decision, Step};
    use crate::domain::policy::ApprovalMode;
    use noema_core::content_id::ContentId;

    fn latest(passed_minimum: bool, regression: bool) -> LatestEvaluation {
        LatestEvaluation {
            request_id: "req-9".into(),
            eval_id: "e-9".into(),
            passed_minimum,
            regression,
        }
    }

    fn healthy(policy: &RiskPolicy) -> ReleaseFacts<'_> {
        ReleaseFacts {
            policy: Some(policy),
            latest_evaluations: [("default".to_owned(), latest(true, false))].into(),
            ..ReleaseFacts::default()
        }
    }

    fn failing_items(report: &ReleaseReport) -> Vec<Blocker> {
        report.failing().map(|i| i.item).collect()
    }

    #[test]
    fn passes_when_nothing_is_broken() {
        let policy = RiskPolicy::default_policy().unwrap();
        let report = check_release(&healthy(&policy));
        assert!(report.ok, "{report:?}");
        assert_eq!(report.items.len(), 7);
        assert_eq!(
            report.items.iter().map(|i| i.item).collect::<Vec<_>>(),
            Blocker::ALL
        );
        assert!(shipped_schema_mismatches().is_empty());
    }

    /// Each item fails alone when its fact is broken, and names itself.
    #[test]
    fn each_item_fails_when_broken() {
        let policy = RiskPolicy::default_policy().unwrap();
        type Breaks = Box<dyn Fn(&mut ReleaseFacts<'_>)>;
        let cases: Vec<(Blocker, Breaks)> = vec![
            (
                Blocker::SchemaVersionMismatch,
                Box::new(|f| {
                    f.schema_mismatches
                        .push("plan p has schema_version 0.2".into())
                }),
            ),
            (
                Blocker::ApprovalBypassDetected,
                Box::new(|f| f.approval_bypasses.push("request r ran unapproved".into())),
            ),
            (
                Blocker::MissingExecutionTrace,
                Box::new(|f| f.missing_traces.push("request r has no trace".into())),
            ),
            (
                Blocker::EvalGateFailed,
                Box::new(|f| {
                    f.latest_evaluations
                        .insert("default".into(), latest(false, false));
                }),
            ),
            (
                Blocker::RegressionSuiteFailed,
                Box::new(|f| {
                    f.latest_evaluations
                        .insert("default".into(), latest(true, true));
                }),
            ),
            (
                Blocker::RollbackPathUnavailable,
                Box::new(|f| f.rollback_gaps.push("request r failed".into())),
            ),
        ];
        for (blocker, breaks) in cases {
            let mut facts = healthy(&policy);
            breaks(&mut facts);
            let report = check_release(&facts);
            assert!(!report.ok);
            assert_eq!(failing_items(&report), [blocker]);
        }

        // No policy: the matrix is not loaded, and the suites cannot be checked.
        let mut facts = healthy(&policy);
        facts.policy = None;
        facts.policy_error = Some("risk matrix not loaded: policy file /x does not exist".into());
        let report = check_release(&facts);
        assert_eq!(
            failing_items(&report),
            [
                Blocker::RiskMatrixNotLoaded,
                Blocker::EvalGateFailed,
                Blocker::RegressionSuiteFailed
            ]
        );
        assert_eq!(
            report.items[1].details,
            ["risk matrix not loaded: policy file /x does not exist"]
        );

        // A policy file that stopped loading, while the last good policy runs: item 2 alone.
        let mut facts = healthy(&policy);
        facts.policy_error = Some("risk matrix not loaded: field levels".into());
        assert_eq!(
            failing_items(&check_release(&facts)),
            [Blocker::RiskMatrixNotLoaded]
        );

        // A regression alone fails the regression item alone; with a failed pass or
        // score as well, both.
        let mut facts = healthy(&policy);
        facts
            .latest_evaluations
            .insert("default".into(), latest(true, true));
        assert!(!facts.latest_evaluations["default"].gate_passed());
        assert_eq!(
            failing_items(&check_release(&facts)),
            [Blocker::RegressionSuiteFailed]
        );
        facts
            .latest_evaluations
            .insert("default".into(), latest(false, true));
        assert_eq!(
            failing_items(&check_release(&facts)),
            [Blocker::EvalGateFailed, Blocker::RegressionSuiteFailed]
        );

        // A required suite never run fails the gate.
        let mut facts = healthy(&policy);
        facts.latest_evaluations.clear();
        let report = check_release(&facts);
        assert_eq!(failing_items(&report), [Blocker::EvalGateFailed]);
        assert_eq!(
            report.items[4].details,
            ["required suite default has no evaluation"]
        );
    }

    fn plan(rollback_plan: &str) -> Plan {
        Plan {
            schema_version: SCHEMA_VERSION.into(),
            id: "plan-1".into(),
            ts: "2026-02-14T10:00:00Z".into(),
            source: "agent:alice".into(),
            goal: "g".into(),
            steps: vec![Step {
                step_id: "s1".into(),
                action: String::new(),
                tool: "notify.webhook".into(),
                expected_output: String::new(),
                scope: Some(vec!["notify".into()]),
                args: None,
            }],
            assumptions: vec![],
            rollback_plan: rollback_plan.into(),
            rollback_steps: None,
        }
    }

    fn report(level: RiskLevel, requires_approval: bool, forbidden: bool) -> RiskReport {
        RiskReport {
            schema_version: SCHEMA_VERSION.into(),
            id: "rr-1".into(),
            ts: "2026-02-14T10:00:01Z".into(),
            source: "orchestrator".into(),
            plan_id: "plan-1".into(),
            risk_level: level,
            reasons: vec![],
            required_permission: String::new(),
            requires_approval,
            forbidden,
            policy_version: "p".into(),
            policy_hash: ContentId::from_digest(&[0; 32]).into_string(),
            approvals_required: u8::from(requires_approval),
            required_scope: vec![],
            steps: vec![],
        }
    }

    fn trace(status: TraceStatus, ts: &str) -> ExecTrace {
        ExecTrace {
            schema_version: SCHEMA_VERSION.into(),
            id: "tr-1".into(),
            ts: ts.into(),
            source: "orchestrator".into(),
            trace_id: "tr-1".into(),
            plan_id: "plan-1".into(),
            risk_report_id: "rr-1".into(),
            request_id: Some("req-1".into()),
            approval_ids: None,
            blocked_reasons: None,
            tool_calls: vec![],
            artifacts: vec![],
            status,
        }
    }

    #[test]
    fn bypass_detection() {
        let rules = ApprovalRules {
            mode: ApprovalMode::Single,
            ttl_seconds: 3600,
            max_clock_skew_seconds: 60,
            allow_self_approval: false,
        };
        let approval = Approval {
            schema_version: SCHEMA_VERSION.into(),
            id: "a1".into(),
            ts: "2026-02-14T10:00:00Z".into(),
            source: "human:bob".into(),
            decision: Decision::Approve,
            approver: "human:bob".into(),
            reason: "ok".into(),
            scope: vec!["notify".into()],
        };
        let p = plan("undo");
        let l2 = report(RiskLevel::L2, true, false);
        let ran = trace(TraceStatus::Success, "2026-02-14T10:10:00Z");
        // Approved in time: no bypass.
        assert_eq!(
            approval_bypass(
                "req-1",
                &p,
                &l2,
                std::slice::from_ref(&approval),
                &ran,
                &rules
            ),
            None
        );
        // Ran with no approval.
        assert!(
            approval_bypass("req-1", &p, &l2, &[], &ran, &rules)
                .unwrap()
                .contains("without a valid approval")
        );
        // Ran after the approval expired.
        let late = trace(TraceStatus::Success, "2026-02-14T11:00:00Z");
        assert!(
            approval_bypass(
                "req-1",
                &p,
                &l2,
                std::slice::from_ref(&approval),
                &late,
                &rules
            )
            .is_some()
        );
        // An L3 plan that ran at all.
        let l3 = report(RiskLevel::L3, false, true);
        assert!(
            approval_bypass("req-1", &p, &l3, &[], &ran, &rules)
                .unwrap()
                .contains("forbidden (L3)")
        );
        // Refused executions ran nothing.
        let refused = trace(TraceStatus::Blocked, "2026-02-14T10:10:00Z");
        assert_eq!(
            approval_bypass("req-1", &p, &l3, &[], &refused, &rules),
            None
        );
    }

    #[test]
    fn missing_traces_and_rollback_gaps() {
        let view = |state: State, trace: bool| RequestView {
            request_id: "req-1".into(),
            state,
            actor: "agent:alice".into(),
            plan: None,
            risk_report: None,
            approvals: vec![],
            trace: trace.then(|| ContentId::of_bytes(b"t")),
            evaluations: vec![],
            reward: None,
            events: 0,
        };
        assert!(missing_trace(&view(State::Evaluated, false)).is_some());
        assert!(missing_trace(&view(State::Executed, false)).is_some());
        assert_eq!(missing_trace(&view(State::Evaluated, true)), None);
        assert_eq!(missing_trace(&view(State::ApprovalPending, false)), None);

        let l1 = report(RiskLevel::L1, false, false);
        let ok = trace(TraceStatus::Success, "2026-02-14T10:10:00Z");
        assert_eq!(
            rollback_gap("req-1", &plan("delete the object"), &l1, &ok),
            None
        );
        assert!(rollback_gap("req-1", &plan("  "), &l1, &ok).is_some());
        assert_eq!(
            rollback_gap(
                "req-1",
                &plan(""),
                &report(RiskLevel::L0, false, false),
                &ok
            ),
            None
        );
        let failed = trace(TraceStatus::Failed, "2026-02-14T10:10:00Z");
        assert!(rollback_gap("req-1", &plan("undo"), &l1, &failed).is_some());
        let rolled = trace(TraceStatus::RolledBack, "2026-02-14T10:10:00Z");
        assert_eq!(rollback_gap("req-1", &plan("undo"), &l1, &rolled), None);
    }
}

//! The release checklist (seed §12) over the store: the facts each of the seven items needs,
//! judged by `domain::release`.

use std::collections::BTreeMap;

use super::Orchestrator;
use crate::domain::objects::{ExecTrace, Plan, RiskReport, SCHEMA_VERSION};
use crate::domain::release::{self, LatestEvaluation, ReleaseFacts, ReleaseReport};
use crate::error::OrchestratorError;

/// Mismatched objects named in full.
const NAMED: u32 = 20;

impl Orchestrator {
    /// `GET /release/check`.
    pub async fn check_release(&self) -> Result<ReleaseReport, OrchestratorError> {
        let loaded = self.policy();
        let rules = &loaded.policy.document().approval;

        let schema_mismatches = self
            .store
            .schema_mismatches(SCHEMA_VERSION, NAMED)
            .await?
            .into_iter()
            .map(|(cid, kind, version)| {
                format!("stored {kind} {cid} has schema_version {version:?}")
            })
            .collect();

        let mut approval_bypasses = Vec::new();
        for row in self.store.ran_under_approval_rules().await? {
            let (Some(risk), Some(trace)) = (&row.risk_object, &row.trace_object) else {
                continue;
            };
            let plan: Plan = self.object(&row.plan_object).await?;
            let report: RiskReport = self.object(risk).await?;
            let trace: ExecTrace = self.object(trace).await?;
            let approvals = self.recorded_approvals(&row.request_id).await?;
            approval_bypasses.extend(release::approval_bypass(
                &row.request_id,
                &plan,
                &report,
                &approvals,
                &trace,
                rules,
            ));
        }

        let missing_traces = self
            .store
            .untraced_executions()
            .await?
            .into_iter()
            .map(|row| {
                format!(
                    "request {} is {} without an execution trace",
                    row.request_id, row.state
                )
            })
            .collect();

        let mut rollback_gaps = Vec::new();
        for row in self.store.rollback_candidates().await? {
            let (Some(risk), Some(trace)) = (&row.risk_object, &row.trace_object) else {
                continue;
            };
            let plan: Plan = self.object(&row.plan_object).await?;
            let report: RiskReport = self.object(risk).await?;
            let trace: ExecTrace = self.object(trace).await?;
            rollback_gaps.extend(release::rollback_gap(
                &row.request_id,
                &plan,
                &report,
                &trace,
            ));
        }

        let latest_evaluations: BTreeMap<String, LatestEvaluation> = self
            .store
            .suites()
            .await?
            .into_iter()
            .map(|s| {
                (
                    s.suite,
                    LatestEvaluation {
                        request_id: s.latest_request_id,
                        eval_id: s.latest_eval_id,
                        passed_minimum: s.latest_passed_minimum,
                        regression: s.latest_regression,
                    },
                )
            })
            .collect();

        Ok(release::check_release(&ReleaseFacts {
            schema_mismatches,
            policy: Some(&loaded.policy),
            policy_error: self.policy.last_error(),
            approval_bypasses,
            missing_traces,
            latest_evaluations,
            rollback_gaps,
        }))
    }
}

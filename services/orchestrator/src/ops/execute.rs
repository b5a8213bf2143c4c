//! `execute`: refuse with a blocked trace, or claim the execution, run the steps (and the
//! rollback steps when one fails) and record the trace.
//!
//! The claim (→ EXECUTED) is committed before any tool runs, expecting the request at the
//! version read: of two callers — two replicas — racing on one request, exactly one claim
//! commits and the other finds the request moved (409, nothing run). The trace is
//! committed after the steps (→ TRACED). A process that dies in between leaves the
//! request EXECUTED without a trace, which the release check reports.

use serde_json::json;

use super::{ATTEMPTS, Caller, Orchestrator, audit_events, back_off, chain, new_id, now, stored};
use crate::domain::approval::{self, Authorization, Refusal};
use crate::domain::events::{Event, EventType, meta};
use crate::domain::objects::{Approval, ExecTrace, Plan, RiskReport};
use crate::domain::risk;
use crate::domain::schema::SchemaName;
use crate::domain::state::{Call, State};
use crate::domain::timestamp;
use crate::domain::trace::{self, TraceBuilder, TraceHeader};
use crate::error::OrchestratorError;
use crate::ops::policy::LoadedPolicy;
use crate::store::{Expect, ObjectRow, RequestRow, RequestWrite, Unit, micros};

/// An execution's outcome: the request is TRACED.
#[derive(Debug, Clone)]
pub struct Executed {
    pub request_id: String,
    pub state: State,
    pub trace: ObjectRow,
}

/// What a claimed execution runs with.
struct Claim {
    row: RequestRow,
    plan: Plan,
    report: RiskReport,
    authorization: Authorization,
    loaded: std::sync::Arc<LoadedPolicy>,
}

impl Orchestrator {
    /// `POST /execute`.
    pub async fn execute(
        &self,
        caller: &Caller,
        request_id: &str,
    ) -> Result<Executed, OrchestratorError> {
        let claim = match self.claim(caller, request_id).await? {
            Ok(claim) => claim,
            Err(blocked) => return Ok(blocked),
        };
        let trace = self.run(caller, request_id, &claim).await;
        self.record_trace(caller, request_id, claim, trace).await
    }

    /// Claims the execution, or records its refusal (`Err`, with the blocked trace).
    async fn claim(
        &self,
        caller: &Caller,
        request_id: &str,
    ) -> Result<Result<Claim, Executed>, OrchestratorError> {
        for attempt in 0..ATTEMPTS {
            let (row, state) = self.load_for(request_id, Call::Execute, attempt).await?;
            let plan: Plan = self.object(&row.plan_object).await?;
            let Some(risk_object) = &row.risk_object else {
                return Err(OrchestratorError::Corrupt(format!(
                    "request {request_id} is {state} without a risk report"
                )));
            };
            let report: RiskReport = self.object(risk_object).await?;
            let approvals = if row.approval_count == 0 {
                Vec::new()
            } else {
                self.recorded_approvals(request_id).await?
            };
            let loaded = self.policy();
            let at = now();
            let decision = authorize(caller, &plan, &report, &approvals, &loaded, at);
            let decision = match (state, decision) {
                // Blocked by its assessment or a rejection: the refusal's trace only.
                (State::Blocked, Ok(_)) => Err(vec!["the request was blocked".to_owned()]),
                (_, decision) => decision,
            };
            match decision {
                Err(reasons) => {
                    if let Some(done) = self
                        .record_refusal(caller, &row, state, &plan, &report, reasons)
                        .await?
                    {
                        return Ok(Err(done));
                    }
                }
                Ok(authorization) => {
                    let ts = timestamp::format(at);
                    let event = Event::new(
                        EventType::Executed,
                        request_id,
                        Some(state),
                        State::Executed,
                        json!({"approval_ids": authorization.approval_ids})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    )?;
                    let (events, head) = chain(row.version, &row.head_hash, vec![event], &ts)?;
                    let next = RequestRow {
                        state: State::Executed.as_str().to_owned(),
                        version: row.version + 1,
                        head_hash: head,
                        waiting_since: None,
                        updated_at: micros(at),
                        ..row.clone()
                    };
                    let unit = Unit {
                        expect: vec![Expect::Request {
                            request_id: request_id.to_owned(),
                            version: row.version,
                        }],
                        request: Some(RequestWrite {
                            row: next.clone(),
                            insert: false,
                        }),
                        audit: audit_events(caller.actor(), &events),
                        events,
                        at: Some(at),
                        ..Unit::default()
                    };
                    if self.commit(unit).await? {
                        return Ok(Ok(Claim {
                            row: next,
                            plan,
                            report,
                            authorization,
                            loaded,
                        }));
                    }
                }
            }
            back_off(attempt).await;
        }
        Err(OrchestratorError::Contended(format!(
            "request {request_id}"
        )))
    }

    /// Records a refused execution: → BLOCKED (unless it is already) → TRACED with a
    /// blocked trace. `None` when the request moved meanwhile.
    async fn record_refusal(
        &self,
        caller: &Caller,
        row: &RequestRow,
        state: State,
        plan: &Plan,
        report: &RiskReport,
        reasons: Vec<String>,
    ) -> Result<Option<Executed>, OrchestratorError> {
        let request_id = row.request_id.as_str();
        let at = now();
        let ts = timestamp::format(at);
        let trace = trace::blocked(self.header(request_id, plan, report, &ts)?, reasons.clone());
        let trace_row = stored(&trace, at)?;
        let mut events = Vec::new();
        if state != State::Blocked {
            events.push(Event::new(
                EventType::Blocked,
                request_id,
                Some(state),
                State::Blocked,
                meta::blocked(&reasons),
            )?);
        }
        events.push(traced_event(request_id, &trace, &trace_row)?);
        let (events, head) = chain(row.version, &row.head_hash, events, &ts)?;
        let next = traced_row(row, &trace, &trace_row, &events, head, at);
        self.anchor_objects(caller, request_id, std::slice::from_ref(&trace_row))
            .await?;
        let unit = Unit {
            expect: vec![Expect::Request {
                request_id: request_id.to_owned(),
                version: row.version,
            }],
            request: Some(RequestWrite {
                row: next,
                insert: false,
            }),
            audit: audit_events(caller.actor(), &events),
            events,
            objects: vec![trace_row.clone()],
            at: Some(at),
            ..Unit::default()
        };
        Ok(self.commit(unit).await?.then(|| Executed {
            request_id: request_id.to_owned(),
            state: State::Traced,
            trace: trace_row,
        }))
    }

    pub(super) fn header(
        &self,
        request_id: &str,
        plan: &Plan,
        report: &RiskReport,
        ts: &str,
    ) -> Result<TraceHeader, OrchestratorError> {
        Ok(TraceHeader {
            id: new_id("tr")?,
            ts: ts.to_owned(),
            source: "orchestrator".into(),
            request_id: request_id.to_owned(),
            plan_id: plan.id.clone(),
            risk_report_id: report.id.clone(),
        })
    }

    /// Runs the plan's steps in order until one fails; then its rollback steps, all of
    /// them. Every call is in the trace.
    async fn run(
        &self,
        caller: &Caller,
        request_id: &str,
        claim: &Claim,
    ) -> Result<ExecTrace, OrchestratorError> {
        let started = timestamp::format(now());
        let header = self.header(request_id, &claim.plan, &claim.report, &started)?;
        let execution = header.id.clone();
        let run = self.start_run(caller, &claim.plan.source, &claim.loaded.policy, &execution);
        let mut builder = TraceBuilder::new(header, claim.authorization.approval_ids.clone());
        for step in &claim.plan.steps {
            let started = timestamp::format(now());
            let result = self.run_step(&run, step).await;
            if let Ok(value) = &result
                && step.tool == "noema.put_canonical"
            {
                builder.artifact(json!({"step_id": step.step_id, "ledger": value}));
            }
            builder.record(step, false, started, timestamp::format(now()), result);
            if builder.step_failed() {
                break;
            }
        }
        if builder.step_failed() {
            for step in claim.plan.rollback_steps.iter().flatten() {
                let started = timestamp::format(now());
                let result = self.run_step(&run, step).await;
                builder.record(step, true, started, timestamp::format(now()), result);
            }
        }
        self.finish_run(run).await;
        let trace = builder.finish();
        tracing::debug!(%request_id, status = ?trace.status, calls = trace.tool_calls.len(), "execution finished");
        Ok(trace)
    }

    /// Records the trace of a claimed execution (→ TRACED).
    async fn record_trace(
        &self,
        caller: &Caller,
        request_id: &str,
        claim: Claim,
        trace: Result<ExecTrace, OrchestratorError>,
    ) -> Result<Executed, OrchestratorError> {
        let trace = trace?;
        let at = now();
        let ts = timestamp::format(at);
        let row = claim.row;
        let trace_row = stored(&trace, at)?;
        let events = vec![traced_event(request_id, &trace, &trace_row)?];
        let (events, head) = chain(row.version, &row.head_hash, events, &ts)?;
        let next = traced_row(&row, &trace, &trace_row, &events, head, at);
        self.anchor_objects(caller, request_id, std::slice::from_ref(&trace_row))
            .await?;
        let unit = Unit {
            expect: vec![Expect::Request {
                request_id: request_id.to_owned(),
                version: row.version,
            }],
            request: Some(RequestWrite {
                row: next,
                insert: false,
            }),
            audit: audit_events(caller.actor(), &events),
            events,
            objects: vec![trace_row.clone()],
            at: Some(at),
            ..Unit::default()
        };
        if !self.commit(unit).await? {
            return Err(OrchestratorError::Corrupt(format!(
                "request {request_id} moved while its claimed execution ran"
            )));
        }
        Ok(Executed {
            request_id: request_id.to_owned(),
            state: State::Traced,
            trace: trace_row,
        })
    }
}

/// Whether the execution may go ahead, or why not: the approvals the report requires,
/// checked now; the plan re-assessed under the policy in force (a stricter policy since the
/// assessment refuses); and the caller's token holding every tool's permission.
fn authorize(
    caller: &Caller,
    plan: &Plan,
    report: &RiskReport,
    approvals: &[Approval],
    loaded: &LoadedPolicy,
    at: time::OffsetDateTime,
) -> Result<Authorization, Vec<String>> {
    let policy = &loaded.policy;
    let authorization =
        approval::authorize_execution(plan, report, approvals, &policy.document().approval, at)
            .map_err(|refusal| match refusal {
                Refusal::Forbidden { reasons } => reasons,
                Refusal::Approval(_) => refusal.reasons(),
            })?;
    if policy.hash().as_str() != report.policy_hash {
        let now = risk::assess(plan, policy);
        if now.forbidden {
            let mut reasons = vec![format!(
                "the policy in force ({}) forbids the plan since it was assessed",
                policy.hash()
            )];
            reasons.extend(now.reasons);
            return Err(reasons);
        }
        if now.approvals_required > report.approvals_required {
            return Err(vec![format!(
                "the policy in force ({}) needs {} approval(s); the request was assessed needing {}",
                policy.hash(),
                now.approvals_required,
                report.approvals_required
            )]);
        }
    }
    let mut missing = Vec::new();
    for (step, _) in plan.all_steps() {
        if let Some(tool) = policy.tool(&step.tool)
            && !caller.principal.allows(&tool.permission)
        {
            missing.push(format!(
                "step {}: tool {} needs the permission {}, which the caller's token lacks",
                step.step_id, step.tool, tool.permission
            ));
        }
    }
    if missing.is_empty() {
        Ok(authorization)
    } else {
        Err(missing)
    }
}

pub(super) fn traced_event(
    request_id: &str,
    trace: &ExecTrace,
    trace_row: &ObjectRow,
) -> Result<Event, OrchestratorError> {
    let cid = trace_row
        .content_id
        .parse()
        .map_err(|_| OrchestratorError::Corrupt("a content id does not parse".into()))?;
    let status = serde_json::to_value(trace.status).unwrap_or_default();
    let from = if trace.status == crate::domain::objects::TraceStatus::Blocked {
        State::Blocked
    } else {
        State::Executed
    };
    Ok(Event::new(
        EventType::Traced,
        request_id,
        Some(from),
        State::Traced,
        meta::stored(
            &cid,
            SchemaName::ExecTrace.as_str(),
            json!({"trace_id": trace.trace_id, "status": status}),
        ),
    )?)
}

fn traced_row(
    row: &RequestRow,
    trace: &ExecTrace,
    trace_row: &ObjectRow,
    events: &[crate::store::EventRow],
    head: String,
    at: time::OffsetDateTime,
) -> RequestRow {
    RequestRow {
        state: State::Traced.as_str().to_owned(),
        version: row.version + i64::try_from(events.len()).unwrap_or(0),
        head_hash: head,
        trace_object: Some(trace_row.content_id.clone()),
        trace_id: Some(trace.trace_id.clone()),
        trace_status: serde_json::to_value(trace.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned)),
        waiting_since: None,
        updated_at: micros(at),
        ..row.clone()
    }
}

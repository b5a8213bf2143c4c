//! gRPC adapter: proto ⇄ the operations, nothing else.

use std::sync::Arc;

use noema_proto::common::v1 as common;
use noema_proto::orchestrator::v1 as pb;
use noema_proto::orchestrator::v1::orchestrator_service_server::OrchestratorService;
use noema_runtime::auth::principal;
use noema_runtime::convert::{list_audit, page_size, timestamp};
use tonic::{Request, Response, Status};

use crate::domain::eval::GateOutcome;
use crate::domain::release::ReleaseReport;
use crate::domain::reputation::{GoldAnswer, Screening};
use crate::domain::schema::SchemaName;
use crate::domain::state::State;
use crate::error::OrchestratorError;
use crate::ops::{Caller, LoadedPolicy, Orchestrator, ReplayCheck};
use crate::store::{EventRow, ObjectRow, RequestRow, from_micros};

#[derive(Clone)]
pub struct OrchestratorApi {
    orchestrator: Arc<Orchestrator>,
}

impl OrchestratorApi {
    pub fn new(orchestrator: Arc<Orchestrator>) -> Self {
        OrchestratorApi { orchestrator }
    }
}

/// The caller of `request`: its principal and its token, for calls on its behalf.
fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    Ok(Caller {
        principal: principal(request)?.clone(),
        authorization: request.metadata().get("authorization").cloned(),
    })
}

fn status(err: OrchestratorError) -> Status {
    noema_core::to_status(&err)
}

fn allowed(state: State) -> Vec<String> {
    state
        .allowed_calls()
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect()
}

fn body(object: &ObjectRow) -> Vec<u8> {
    object.body.as_bytes().to_vec()
}

fn micros_timestamp(us: i64) -> Option<prost_types::Timestamp> {
    Some(timestamp(from_micros(us)))
}

fn event_to_proto(e: EventRow) -> pb::Event {
    pb::Event {
        seq: u64::try_from(e.seq).unwrap_or_default(),
        event_type: e.event_type,
        entity_id: e.request_id,
        prev_state: e.prev_state.unwrap_or_default(),
        next_state: e.next_state,
        meta: e.meta.into_bytes(),
        ts: e.ts,
        prev_hash: e.prev_hash,
        hash: e.hash,
    }
}

fn gate_to_proto(gate: GateOutcome, gate_min_score: f64) -> pb::Gate {
    pb::Gate {
        gate_passed: gate.gate_passed,
        regression: gate.regression,
        regression_computed: gate.regression_computed,
        baseline: gate.baseline,
        gate_min_score,
        reasons: gate.reasons,
    }
}

fn screening_to_proto(s: Screening) -> pb::Screening {
    pb::Screening {
        suppressed: s.suppressed,
        reason_codes: s.reason_codes,
    }
}

fn summary(row: RequestRow) -> pb::RequestSummary {
    pb::RequestSummary {
        event_count: u64::try_from(row.version).unwrap_or_default(),
        created_at: micros_timestamp(row.created_at),
        updated_at: micros_timestamp(row.updated_at),
        risk_level: row.risk_level.unwrap_or_default(),
        request_id: row.request_id,
        state: row.state,
        actor: row.actor,
    }
}

fn release_to_proto(report: ReleaseReport) -> pb::ReleaseReport {
    pb::ReleaseReport {
        ok: report.ok,
        items: report
            .items
            .into_iter()
            .map(|i| pb::ReleaseItem {
                item: i.item.as_str().to_owned(),
                title: i.title.to_owned(),
                ok: i.ok,
                details: i.details,
            })
            .collect(),
    }
}

fn policy_to_proto(loaded: &LoadedPolicy, last_reload_error: Option<String>) -> pb::PolicyInfo {
    pb::PolicyInfo {
        policy_version: loaded.policy.version().to_owned(),
        policy_hash: loaded.policy.hash().to_string(),
        source: loaded.source.clone(),
        loaded_at: Some(timestamp(loaded.loaded_at)),
        document: serde_json::to_vec(&loaded.document).unwrap_or_default(),
        last_reload_error: last_reload_error.unwrap_or_default(),
    }
}

fn replay_to_proto(check: ReplayCheck) -> pb::ReplayCheck {
    pb::ReplayCheck {
        matches: check.matches(),
        differences: check.differences,
    }
}

/// A cursor that must be a number (an event's seq).
fn seq_token(token: &str) -> Result<i64, Status> {
    if token.is_empty() {
        return Ok(0);
    }
    token.parse::<i64>().map_err(|_| {
        status(OrchestratorError::Invalid(
            "page_token is not a token returned by a previous call".into(),
        ))
    })
}

#[tonic::async_trait]
impl OrchestratorService for OrchestratorApi {
    async fn plan(
        &self,
        request: Request<pb::PlanRequest>,
    ) -> Result<Response<pb::PlanResponse>, Status> {
        let caller = caller(&request)?;
        let planned = self
            .orchestrator
            .plan(&caller, &request.into_inner().plan)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::PlanResponse {
            allowed_next: allowed(planned.state),
            request_id: planned.request_id,
            state: planned.state.as_str().to_owned(),
            plan: body(&planned.plan),
        }))
    }

    async fn risk(
        &self,
        request: Request<pb::RiskRequest>,
    ) -> Result<Response<pb::RiskResponse>, Status> {
        let caller = caller(&request)?;
        let risked = self
            .orchestrator
            .risk(&caller, &request.into_inner().request_id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::RiskResponse {
            allowed_next: allowed(risked.state),
            request_id: risked.request_id,
            state: risked.state.as_str().to_owned(),
            risk_report: body(&risked.risk_report),
        }))
    }

    async fn approve(
        &self,
        request: Request<pb::ApproveRequest>,
    ) -> Result<Response<pb::ApproveResponse>, Status> {
        let caller = caller(&request)?;
        let r = request.into_inner();
        let approved = self
            .orchestrator
            .approve(
                &caller,
                &r.request_id,
                &r.approval,
                &r.signature,
                &r.public_key,
            )
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ApproveResponse {
            allowed_next: allowed(approved.state),
            request_id: approved.request_id,
            state: approved.state.as_str().to_owned(),
            approval: body(&approved.approval),
            valid_approvers: u32::from(approved.valid_approvers),
            approvals_required: u32::from(approved.approvals_required),
        }))
    }

    async fn execute(
        &self,
        request: Request<pb::ExecuteRequest>,
    ) -> Result<Response<pb::ExecuteResponse>, Status> {
        let caller = caller(&request)?;
        let executed = self
            .orchestrator
            .execute(&caller, &request.into_inner().request_id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ExecuteResponse {
            allowed_next: allowed(executed.state),
            request_id: executed.request_id,
            state: executed.state.as_str().to_owned(),
            exec_trace: body(&executed.trace),
        }))
    }

    async fn get_trace(
        &self,
        request: Request<pb::GetTraceRequest>,
    ) -> Result<Response<pb::TraceResponse>, Status> {
        let view = self
            .orchestrator
            .get_trace(&request.into_inner().id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::TraceResponse {
            request_id: view.request_id,
            exec_trace: body(&view.exec_trace),
        }))
    }

    async fn evaluate(
        &self,
        request: Request<pb::EvaluateRequest>,
    ) -> Result<Response<pb::EvaluateResponse>, Status> {
        let caller = caller(&request)?;
        let r = request.into_inner();
        let evaluated = self
            .orchestrator
            .evaluate(&caller, &r.request_id, &r.evaluator_id, &r.eval_result)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::EvaluateResponse {
            allowed_next: allowed(evaluated.state),
            request_id: evaluated.request_id,
            state: evaluated.state.as_str().to_owned(),
            eval_result: body(&evaluated.eval_result),
            gate: Some(gate_to_proto(evaluated.gate, evaluated.gate_min_score)),
            screening: Some(screening_to_proto(evaluated.screening)),
        }))
    }

    async fn update_reward(
        &self,
        request: Request<pb::UpdateRewardRequest>,
    ) -> Result<Response<pb::UpdateRewardResponse>, Status> {
        let caller = caller(&request)?;
        let rewarded = self
            .orchestrator
            .update_reward(&caller, &request.into_inner().request_id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::UpdateRewardResponse {
            allowed_next: allowed(rewarded.state),
            request_id: rewarded.request_id,
            state: rewarded.state.as_str().to_owned(),
            reward_update: body(&rewarded.reward_update),
        }))
    }

    async fn get_request(
        &self,
        request: Request<pb::GetRequestRequest>,
    ) -> Result<Response<pb::RequestDetail>, Status> {
        let r = request.into_inner();
        let d = self
            .orchestrator
            .get_request(&r.request_id, r.from_events, r.limit)
            .await
            .map_err(status)?;
        let opt = |o: &Option<Arc<ObjectRow>>| o.as_deref().map(body).unwrap_or_default();
        Ok(Response::new(pb::RequestDetail {
            allowed_next: allowed(d.state),
            state: d.state.as_str().to_owned(),
            plan: body(&d.plan),
            risk_report: opt(&d.risk_report),
            approvals: d.approvals.iter().map(|a| body(a)).collect(),
            exec_trace: opt(&d.exec_trace),
            evaluations: d.evaluations.iter().map(|e| body(e)).collect(),
            evaluation_count: d.evaluation_count,
            reward_update: opt(&d.reward_update),
            event_count: u64::try_from(d.row.version).unwrap_or_default(),
            head_hash: d.row.head_hash.clone(),
            events: d.events.into_iter().map(event_to_proto).collect(),
            events_next_page_token: d
                .more_events_after
                .map(|seq| seq.to_string())
                .unwrap_or_default(),
            created_at: micros_timestamp(d.row.created_at),
            updated_at: micros_timestamp(d.row.updated_at),
            replay: d.replay.map(replay_to_proto),
            request_id: d.row.request_id,
            actor: d.row.actor,
        }))
    }

    async fn list_requests(
        &self,
        request: Request<pb::ListRequestsRequest>,
    ) -> Result<Response<pb::ListRequestsResponse>, Status> {
        let r = request.into_inner();
        let state = if r.state.is_empty() {
            None
        } else {
            Some(State::parse(&r.state).ok_or_else(|| {
                status(OrchestratorError::Invalid(format!(
                    "state {:?} is not one of RECEIVED, PLANNED, RISKED, APPROVAL_PENDING, \
                     EXECUTED, BLOCKED, TRACED, EVALUATED, REWARDED",
                    r.state
                )))
            })?)
        };
        let page = r.page.unwrap_or_default();
        let (rows, next) = self
            .orchestrator
            .list_requests(state, &page.page_token, page_size(page.page_size))
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListRequestsResponse {
            requests: rows.into_iter().map(summary).collect(),
            page: Some(common::PageResponse {
                next_page_token: next.unwrap_or_default(),
            }),
        }))
    }

    async fn list_events(
        &self,
        request: Request<pb::ListEventsRequest>,
    ) -> Result<Response<pb::ListEventsResponse>, Status> {
        let r = request.into_inner();
        let page = r.page.unwrap_or_default();
        let after = seq_token(&page.page_token)?;
        let (events, next) = self
            .orchestrator
            .list_events(&r.request_id, after, page_size(page.page_size))
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListEventsResponse {
            events: events.into_iter().map(event_to_proto).collect(),
            page: Some(common::PageResponse {
                next_page_token: next.map(|s| s.to_string()).unwrap_or_default(),
            }),
        }))
    }

    async fn list_pending_approvals(
        &self,
        request: Request<pb::ListPendingApprovalsRequest>,
    ) -> Result<Response<pb::ListPendingApprovalsResponse>, Status> {
        let page = request.into_inner().page.unwrap_or_default();
        let (pending, next) = self
            .orchestrator
            .pending_approvals(&page.page_token, page_size(page.page_size))
            .await
            .map_err(status)?;
        Ok(Response::new(pb::ListPendingApprovalsResponse {
            pending: pending
                .into_iter()
                .map(|p| pb::PendingApproval {
                    waiting_since: p.row.waiting_since.and_then(micros_timestamp),
                    risk_level: p.row.risk_level.clone().unwrap_or_default(),
                    approvals_required: u32::from(p.approvals_required),
                    valid_approvers: u32::from(p.valid_approvers),
                    required_scope: p.required_scope,
                    plan: body(&p.plan),
                    risk_report: body(&p.risk_report),
                    request_id: p.row.request_id,
                    actor: p.row.actor,
                })
                .collect(),
            page: Some(common::PageResponse {
                next_page_token: next.unwrap_or_default(),
            }),
        }))
    }

    async fn next_evaluation(
        &self,
        request: Request<pb::NextEvaluationRequest>,
    ) -> Result<Response<pb::EvaluationItem>, Status> {
        let caller = caller(&request)?;
        let item = self
            .orchestrator
            .next_evaluation(&caller, &request.into_inner().evaluator_id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::EvaluationItem {
            item_id: item.item_id,
            request_id: item.request_id,
            plan: body(&item.plan),
            risk_report: item.risk_report.as_ref().map(body).unwrap_or_default(),
            exec_trace: body(&item.exec_trace),
            served_at: Some(timestamp(item.served_at)),
        }))
    }

    async fn add_gold_task(
        &self,
        request: Request<pb::AddGoldTaskRequest>,
    ) -> Result<Response<pb::GoldTask>, Status> {
        let caller = caller(&request)?;
        let r = request.into_inner();
        let answer = r.answer.ok_or_else(|| {
            status(OrchestratorError::Invalid(
                "answer is required (pass, min_score, max_score)".into(),
            ))
        })?;
        let answer = GoldAnswer {
            pass: answer.pass,
            min_score: answer.min_score,
            max_score: answer.max_score,
        };
        let task = self
            .orchestrator
            .add_gold_task(
                &caller,
                &r.from_request_id,
                (&r.plan, &r.risk_report, &r.exec_trace),
                answer,
            )
            .await
            .map_err(status)?;
        Ok(Response::new(pb::GoldTask {
            gold_id: task.gold_id,
            answer: Some(pb::GoldAnswer {
                pass: task.answer_pass,
                min_score: task.min_score,
                max_score: task.max_score,
            }),
            created_at: micros_timestamp(task.created_at),
        }))
    }

    async fn get_evaluator(
        &self,
        request: Request<pb::GetEvaluatorRequest>,
    ) -> Result<Response<pb::EvaluatorStanding>, Status> {
        let (row, influence) = self
            .orchestrator
            .evaluator_standing(&request.into_inner().evaluator_id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::EvaluatorStanding {
            evaluator_id: row.evaluator_id,
            votes: u64::try_from(row.votes).unwrap_or_default(),
            gold_attempts: u32::try_from(row.gold_attempts).unwrap_or(u32::MAX),
            gold_matches: u32::try_from(row.gold_matches).unwrap_or(u32::MAX),
            consecutive_mismatches: u32::try_from(row.consecutive_mismatches).unwrap_or(u32::MAX),
            influence,
        }))
    }

    async fn get_reputation(
        &self,
        request: Request<pb::GetReputationRequest>,
    ) -> Result<Response<pb::Reputation>, Status> {
        let (row, rep_cap) = self
            .orchestrator
            .reputation(&request.into_inner().actor_id)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::Reputation {
            updates: u64::try_from(row.version).unwrap_or_default(),
            updated_at: (row.updated_at > 0)
                .then(|| micros_timestamp(row.updated_at))
                .flatten(),
            actor_id: row.actor_id,
            rep: row.rep,
            rep_cap,
            last_reward_id: row.last_reward_id,
        }))
    }

    async fn check_release(
        &self,
        _request: Request<pb::CheckReleaseRequest>,
    ) -> Result<Response<pb::ReleaseReport>, Status> {
        let report = self.orchestrator.check_release().await.map_err(status)?;
        Ok(Response::new(release_to_proto(report)))
    }

    async fn list_schemas(
        &self,
        _request: Request<pb::ListSchemasRequest>,
    ) -> Result<Response<pb::ListSchemasResponse>, Status> {
        Ok(Response::new(pb::ListSchemasResponse {
            names: SchemaName::ALL.iter().map(|s| s.file_name()).collect(),
        }))
    }

    async fn get_schema(
        &self,
        request: Request<pb::GetSchemaRequest>,
    ) -> Result<Response<pb::SchemaDocument>, Status> {
        let name = request.into_inner().name;
        let schema = SchemaName::parse(&name).ok_or_else(|| {
            status(OrchestratorError::NotFound(format!(
                "no schema {name:?}; the schemas are {}",
                SchemaName::ALL
                    .iter()
                    .map(|s| s.file_name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        })?;
        Ok(Response::new(pb::SchemaDocument {
            name: schema.as_str().to_owned(),
            file_name: schema.file_name(),
            document: schema.text().as_bytes().to_vec(),
        }))
    }

    async fn get_policy(
        &self,
        _request: Request<pb::GetPolicyRequest>,
    ) -> Result<Response<pb::PolicyInfo>, Status> {
        let holder = self.orchestrator.policy_holder();
        Ok(Response::new(policy_to_proto(
            &holder.current(),
            holder.last_error(),
        )))
    }

    async fn reload_policy(
        &self,
        request: Request<pb::ReloadPolicyRequest>,
    ) -> Result<Response<pb::PolicyInfo>, Status> {
        let caller = caller(&request)?;
        let loaded = self
            .orchestrator
            .reload_policy(caller.actor())
            .await
            .map_err(status)?;
        Ok(Response::new(policy_to_proto(&loaded, None)))
    }

    async fn replay_all(
        &self,
        _request: Request<pb::ReplayAllRequest>,
    ) -> Result<Response<pb::ReplayReport>, Status> {
        let report = self.orchestrator.replay_all().await.map_err(status)?;
        Ok(Response::new(pb::ReplayReport {
            requests: report.requests,
            events: report.events,
            ok: report.mismatched == 0,
            mismatched: report.mismatched,
            mismatches: report
                .mismatches
                .into_iter()
                .map(|(request_id, differences)| pb::ReplayMismatch {
                    request_id,
                    differences,
                })
                .collect(),
        }))
    }

    async fn list_audit(
        &self,
        request: Request<common::ListAuditRequest>,
    ) -> Result<Response<common::ListAuditResponse>, Status> {
        let response =
            list_audit(self.orchestrator.store().database(), request.into_inner()).await?;
        Ok(Response::new(response))
    }
}

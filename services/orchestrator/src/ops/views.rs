//! Reads: a request with its objects and events (live, or rebuilt from its events), the
//! listings, traces, the approval queue, reputations and evaluator standings.

use std::sync::Arc;

use noema_core::content_id::ContentId;

use super::replay::ReplayCheck;
use super::{Orchestrator, not_found, state_of};
use crate::domain::approval::{ApprovalError, Refusal};
use crate::domain::objects::RiskReport;
use crate::domain::reputation::GoldRecord;
use crate::domain::state::State;
use crate::error::OrchestratorError;
use crate::store::{EvaluatorRow, EventRow, ObjectRow, ReputationRow, RequestRow};

/// Most events and evaluations a request view carries; the rest page through the events.
pub const MAX_VIEW_ITEMS: u32 = 1000;
/// What a request view carries when the caller does not say.
pub const DEFAULT_VIEW_ITEMS: u32 = 100;

/// A request with its objects and (the first of) its events.
#[derive(Debug, Clone)]
pub struct RequestDetail {
    pub row: RequestRow,
    pub state: State,
    pub plan: Arc<ObjectRow>,
    pub risk_report: Option<Arc<ObjectRow>>,
    pub approvals: Vec<Arc<ObjectRow>>,
    pub exec_trace: Option<Arc<ObjectRow>>,
    pub evaluations: Vec<Arc<ObjectRow>>,
    pub evaluation_count: u64,
    pub reward_update: Option<Arc<ObjectRow>>,
    pub events: Vec<EventRow>,
    /// The seq after which the events continue (when there are more).
    pub more_events_after: Option<i64>,
    /// Set when the request was rebuilt from its events.
    pub replay: Option<ReplayCheck>,
}

/// A trace and its request.
#[derive(Debug, Clone)]
pub struct TraceView {
    pub request_id: String,
    pub exec_trace: Arc<ObjectRow>,
}

/// A request waiting for approval.
#[derive(Debug, Clone)]
pub struct PendingApproval {
    pub row: RequestRow,
    pub plan: Arc<ObjectRow>,
    pub risk_report: Arc<ObjectRow>,
    pub required_scope: Vec<String>,
    pub approvals_required: u8,
    pub valid_approvers: u8,
}

impl Orchestrator {
    async fn required_object(&self, content_id: &str) -> Result<Arc<ObjectRow>, OrchestratorError> {
        self.store.object(content_id).await?.ok_or_else(|| {
            OrchestratorError::Corrupt(format!("object {content_id} is referenced but not stored"))
        })
    }

    /// Objects that must be stored, in the order given, read together.
    async fn required_objects(
        &self,
        content_ids: impl Iterator<Item = &str>,
    ) -> Result<Vec<Arc<ObjectRow>>, OrchestratorError> {
        let ids: Vec<&str> = content_ids.collect();
        let rows = self.store.objects(&ids).await?;
        ids.iter()
            .zip(rows)
            .map(|(id, row)| {
                row.ok_or_else(|| {
                    OrchestratorError::Corrupt(format!("object {id} is referenced but not stored"))
                })
            })
            .collect()
    }

    async fn optional_object(
        &self,
        content_id: Option<&str>,
    ) -> Result<Option<Arc<ObjectRow>>, OrchestratorError> {
        match content_id {
            Some(id) => Ok(Some(self.required_object(id).await?)),
            None => Ok(None),
        }
    }

    /// `GET /requests/{id}`: the live state, or (`from_events`) the state its events
    /// rebuild, compared with the live one.
    pub async fn get_request(
        &self,
        request_id: &str,
        from_events: bool,
        limit: u32,
    ) -> Result<RequestDetail, OrchestratorError> {
        let limit = match limit {
            0 => DEFAULT_VIEW_ITEMS,
            n => n.min(MAX_VIEW_ITEMS),
        };
        let row = self.load(request_id).await?;
        let events = self.store.events(request_id, 0, limit + 1).await?;
        let (events, more_events_after) = page(events, limit, |e| e.seq);
        if from_events {
            return self.rebuilt(row, events, more_events_after, limit).await;
        }
        let approvals = if row.approval_count == 0 {
            Vec::new()
        } else {
            let rows = self.store.approvals(request_id).await?;
            self.required_objects(rows.iter().map(|a| a.approval_object.as_str()))
                .await?
        };
        let evaluations = if row.evaluation_count == 0 {
            Vec::new()
        } else {
            let votes = self.store.votes_on(request_id, 0, limit).await?;
            self.required_objects(votes.iter().map(|v| v.eval_object.as_str()))
                .await?
        };
        Ok(RequestDetail {
            state: state_of(&row)?,
            plan: self.required_object(&row.plan_object).await?,
            risk_report: self.optional_object(row.risk_object.as_deref()).await?,
            approvals,
            exec_trace: self.optional_object(row.trace_object.as_deref()).await?,
            evaluations,
            evaluation_count: u64::try_from(row.evaluation_count).unwrap_or_default(),
            reward_update: self.optional_object(row.reward_object.as_deref()).await?,
            events,
            more_events_after,
            replay: None,
            row,
        })
    }

    /// The request as its events describe it (objects by the ids the events name).
    async fn rebuilt(
        &self,
        row: RequestRow,
        events: Vec<EventRow>,
        more_events_after: Option<i64>,
        limit: u32,
    ) -> Result<RequestDetail, OrchestratorError> {
        let fold = self.fold_request(&row.request_id).await?;
        let check = ReplayCheck {
            differences: fold.compare(&row),
        };
        let view = fold.view().map_err(|e| {
            OrchestratorError::Corrupt(format!("request {} does not replay: {e}", row.request_id))
        })?;
        let id = |c: &Option<ContentId>| c.as_ref().map(ToString::to_string);
        let Some(plan) = id(&view.plan) else {
            return Err(OrchestratorError::Corrupt(format!(
                "request {} has no plan event",
                row.request_id
            )));
        };
        let approvals = self
            .required_objects(view.approvals.iter().map(ContentId::as_str))
            .await?;
        let evaluations = self
            .required_objects(
                view.evaluations
                    .iter()
                    .take(limit as usize)
                    .map(ContentId::as_str),
            )
            .await?;
        let replayed = RequestRow {
            state: view.state.as_str().to_owned(),
            actor: view.actor.clone(),
            version: i64::try_from(view.events).unwrap_or(i64::MAX),
            head_hash: fold.head().to_owned(),
            plan_object: plan.clone(),
            risk_object: id(&view.risk_report),
            trace_object: id(&view.trace),
            reward_object: id(&view.reward),
            approval_count: i64::try_from(view.approvals.len()).unwrap_or(i64::MAX),
            evaluation_count: i64::try_from(view.evaluations.len()).unwrap_or(i64::MAX),
            ..row
        };
        Ok(RequestDetail {
            state: view.state,
            plan: self.required_object(&plan).await?,
            risk_report: self
                .optional_object(replayed.risk_object.as_deref())
                .await?,
            approvals,
            exec_trace: self
                .optional_object(replayed.trace_object.as_deref())
                .await?,
            evaluations,
            evaluation_count: u64::try_from(view.evaluations.len()).unwrap_or_default(),
            reward_update: self
                .optional_object(replayed.reward_object.as_deref())
                .await?,
            events,
            more_events_after,
            replay: Some(check),
            row: replayed,
        })
    }

    /// `GET /requests/{id}/events`: events after `after_seq`, oldest first.
    pub async fn list_events(
        &self,
        request_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<(Vec<EventRow>, Option<i64>), OrchestratorError> {
        let limit = limit.clamp(1, MAX_VIEW_ITEMS);
        if self.store.request(request_id).await?.is_none() {
            return Err(not_found(request_id));
        }
        let events = self.store.events(request_id, after_seq, limit + 1).await?;
        Ok(page(events, limit, |e| e.seq))
    }

    /// `GET /requests?state=…`: requests after `after` (id order), in `state` if given.
    pub async fn list_requests(
        &self,
        state: Option<State>,
        after: &str,
        limit: u32,
    ) -> Result<(Vec<RequestRow>, Option<String>), OrchestratorError> {
        let limit = limit.clamp(1, MAX_VIEW_ITEMS);
        let rows = self
            .store
            .list_requests(state.map(State::as_str), after, limit + 1)
            .await?;
        Ok(page(rows, limit, |r| r.request_id.clone()))
    }

    /// `GET /trace/{id}`: by trace id or request id.
    pub async fn get_trace(&self, id: &str) -> Result<TraceView, OrchestratorError> {
        let row = match self.store.request_by_trace(id).await? {
            Some(row) => row,
            None => self.store.request(id).await?.ok_or_else(|| {
                OrchestratorError::NotFound(format!("no trace or request {id:?}"))
            })?,
        };
        let Some(trace) = &row.trace_object else {
            return Err(OrchestratorError::NotFound(format!(
                "request {} has no trace yet (state {})",
                row.request_id, row.state
            )));
        };
        Ok(TraceView {
            exec_trace: self.required_object(trace).await?,
            request_id: row.request_id,
        })
    }

    /// `GET /approvals/pending`: what waits for approval, since when, and how far along.
    pub async fn pending_approvals(
        &self,
        after: &str,
        limit: u32,
    ) -> Result<(Vec<PendingApproval>, Option<String>), OrchestratorError> {
        let (rows, next) = self
            .list_requests(Some(State::ApprovalPending), after, limit)
            .await?;
        let loaded = self.policy();
        let now = super::now();
        let mut pending = Vec::with_capacity(rows.len());
        for row in rows {
            let plan_row = self.required_object(&row.plan_object).await?;
            let Some(risk) = &row.risk_object else {
                continue;
            };
            let risk_row = self.required_object(risk).await?;
            let plan: crate::domain::objects::Plan = super::parse_stored(&plan_row)?;
            let report: RiskReport = super::parse_stored(&risk_row)?;
            let recorded = self.recorded_approvals(&row.request_id).await?;
            let valid = crate::domain::approval::authorize_execution(
                &plan,
                &report,
                &recorded,
                &loaded.policy.document().approval,
                now,
            )
            .map_or_else(
                |refusal| match refusal {
                    Refusal::Approval(ApprovalError::NotEnoughApprovers { valid, .. }) => {
                        usize::from(valid)
                    }
                    _ => 0,
                },
                |a| a.approval_ids.len(),
            );
            pending.push(PendingApproval {
                required_scope: report.required_scope.clone(),
                approvals_required: report.approvals_required,
                valid_approvers: u8::try_from(valid).unwrap_or(u8::MAX),
                plan: plan_row,
                risk_report: risk_row,
                row,
            });
        }
        Ok((pending, next))
    }

    /// `GET /reputation/{actor_id}`; an actor never rewarded has the initial reputation.
    pub async fn reputation(
        &self,
        actor_id: &str,
    ) -> Result<(ReputationRow, f64), OrchestratorError> {
        let params = self.policy().policy.document().reward;
        let row = self
            .store
            .reputation(actor_id)
            .await?
            .unwrap_or(ReputationRow {
                actor_id: actor_id.to_owned(),
                version: 0,
                rep: params.initial_rep,
                last_reward_id: String::new(),
                updated_at: 0,
            });
        Ok((row, params.rep_cap))
    }

    /// An evaluator's standing: its counters and influence now.
    pub async fn evaluator_standing(
        &self,
        evaluator_id: &str,
    ) -> Result<(EvaluatorRow, f64), OrchestratorError> {
        let row = self.store.evaluator(evaluator_id).await?.ok_or_else(|| {
            OrchestratorError::NotFound(format!("evaluator {evaluator_id:?} has not voted"))
        })?;
        let record = GoldRecord {
            attempts: u32::try_from(row.gold_attempts).unwrap_or(u32::MAX),
            matches: u32::try_from(row.gold_matches).unwrap_or(u32::MAX),
            consecutive_mismatches: u32::try_from(row.consecutive_mismatches).unwrap_or(u32::MAX),
        };
        let influence = record.influence(self.policy().policy.document().gold.mismatch_decay);
        Ok((row, influence))
    }
}

/// The first `limit` of `rows` (fetched one more), and the cursor after them when more
/// follow.
fn page<T, C>(mut rows: Vec<T>, limit: u32, cursor: impl Fn(&T) -> C) -> (Vec<T>, Option<C>) {
    if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        let next = rows.last().map(cursor);
        (rows, next)
    } else {
        (rows, None)
    }
}

//! `plan`, `risk` and `approve`: a request from its creation to the point where it may
//! execute.

use noema_core::keys::{self, PublicKey, Signature};
use noema_proto::identity::v1::{KeyStatus, VerifyRequest};
use serde_json::{Value, json};

use super::{
    ATTEMPTS, Caller, Orchestrator, audit_events, back_off, chain, new_id, not_found, now, stored,
};
use crate::domain::approval::{self, ApprovalError, Context, Submission, Verdict};
use crate::domain::events::{CHAIN_START, Event, EventType, meta};
use crate::domain::objects::{Approval, Decision, Plan, RiskReport};
use crate::domain::policy::ApprovalNeed;
use crate::domain::risk;
use crate::domain::schema::{self, ObjectError, SchemaName};
use crate::domain::state::{Call, State};
use crate::domain::timestamp;
use crate::error::OrchestratorError;
use crate::store::{ApprovalRow, Expect, ObjectRow, RequestRow, RequestWrite, Unit, micros};

/// A new request.
#[derive(Debug, Clone)]
pub struct Planned {
    pub request_id: String,
    pub state: State,
    pub plan: ObjectRow,
}

/// A request assessed.
#[derive(Debug, Clone)]
pub struct Risked {
    pub request_id: String,
    pub state: State,
    pub risk_report: ObjectRow,
}

/// An approval recorded.
#[derive(Debug, Clone)]
pub struct Approved {
    pub request_id: String,
    pub state: State,
    pub approval: ObjectRow,
    pub valid_approvers: u8,
    pub approvals_required: u8,
}

/// A document sent as JSON text.
pub(super) fn json_document(name: SchemaName, bytes: &[u8]) -> Result<Value, OrchestratorError> {
    serde_json::from_slice(bytes).map_err(|e| {
        OrchestratorError::Object(ObjectError::invalid(
            name,
            "(object)",
            format!("not JSON: {e}"),
        ))
    })
}

impl Orchestrator {
    /// `POST /plan`: a request is created RECEIVED and planned in the same transaction.
    pub async fn plan(&self, caller: &Caller, plan: &[u8]) -> Result<Planned, OrchestratorError> {
        let plan: Plan = schema::parse_plan(&json_document(SchemaName::Plan, plan)?)?;
        let request_id = new_id("req")?;
        let at = now();
        let ts = timestamp::format(at);
        let plan_row = stored(&plan, at)?;
        let plan_cid = plan_row
            .content_id
            .parse()
            .map_err(|_| OrchestratorError::Corrupt("a content id does not parse".into()))?;
        let events = vec![
            Event::new(
                EventType::Received,
                &request_id,
                None,
                State::Received,
                meta::received(&plan.source),
            )?,
            Event::new(
                EventType::Planned,
                &request_id,
                Some(State::Received),
                State::Planned,
                meta::stored(
                    &plan_cid,
                    SchemaName::Plan.as_str(),
                    json!({"plan_id": plan.id}),
                ),
            )?,
        ];
        let (events, head) = chain(0, CHAIN_START, events, &ts)?;
        let rollback_declared = !plan.rollback_plan.trim().is_empty()
            || plan.rollback_steps.as_ref().is_some_and(|s| !s.is_empty());
        let row = RequestRow {
            request_id: request_id.clone(),
            state: State::Planned.as_str().to_owned(),
            actor: plan.source.clone(),
            version: 2,
            head_hash: head,
            plan_object: plan_row.content_id.clone(),
            rollback_declared,
            risk_object: None,
            risk_level: None,
            forbidden: None,
            approvals_required: None,
            trace_object: None,
            trace_id: None,
            trace_status: None,
            reward_object: None,
            approval_count: 0,
            evaluation_count: 0,
            waiting_since: None,
            created_at: micros(at),
            updated_at: micros(at),
        };
        self.anchor_objects(caller, &request_id, std::slice::from_ref(&plan_row))
            .await?;
        let unit = Unit {
            expect: vec![Expect::Request {
                request_id: request_id.clone(),
                version: 0,
            }],
            request: Some(RequestWrite { row, insert: true }),
            audit: audit_events(caller.actor(), &events),
            events,
            objects: vec![plan_row.clone()],
            at: Some(at),
            ..Unit::default()
        };
        if !self.commit(unit).await? {
            return Err(OrchestratorError::Corrupt(format!(
                "new request id {request_id} is taken"
            )));
        }
        tracing::debug!(%request_id, "request planned");
        Ok(Planned {
            request_id,
            state: State::Planned,
            plan: plan_row,
        })
    }

    /// `POST /risk`: the plan assessed under the policy in force; RISKED, then
    /// APPROVAL_PENDING when it needs approval or BLOCKED when it is forbidden.
    pub async fn risk(
        &self,
        caller: &Caller,
        request_id: &str,
    ) -> Result<Risked, OrchestratorError> {
        for attempt in 0..ATTEMPTS {
            let (row, _) = self.load_for(request_id, Call::Risk, attempt).await?;
            let plan: Plan = self.object(&row.plan_object).await?;
            let loaded = self.policy();
            let at = now();
            let ts = timestamp::format(at);
            let report = risk::assess(&plan, &loaded.policy).into_report(
                new_id("rr")?,
                &ts,
                "orchestrator",
                &plan.id,
            );
            let report_row = stored(&report, at)?;
            let cid = report_row
                .content_id
                .parse()
                .map_err(|_| OrchestratorError::Corrupt("a content id does not parse".into()))?;
            let mut events = vec![Event::new(
                EventType::Risked,
                request_id,
                Some(State::Planned),
                State::Risked,
                meta::stored(
                    &cid,
                    SchemaName::RiskReport.as_str(),
                    json!({"risk_level": report.risk_level, "policy_hash": report.policy_hash}),
                ),
            )?];
            let state = if report.forbidden {
                events.push(Event::new(
                    EventType::Blocked,
                    request_id,
                    Some(State::Risked),
                    State::Blocked,
                    meta::blocked(&report.reasons),
                )?);
                State::Blocked
            } else if report.requires_approval {
                events.push(Event::new(
                    EventType::ApprovalRequested,
                    request_id,
                    Some(State::Risked),
                    State::ApprovalPending,
                    meta::approval_requested(report.approvals_required),
                )?);
                State::ApprovalPending
            } else {
                State::Risked
            };
            let (events, head) = chain(row.version, &row.head_hash, events, &ts)?;
            let next = RequestRow {
                state: state.as_str().to_owned(),
                version: row.version + i64::try_from(events.len()).unwrap_or(0),
                head_hash: head,
                risk_object: Some(report_row.content_id.clone()),
                risk_level: Some(report.risk_level.as_str().to_owned()),
                forbidden: Some(report.forbidden),
                approvals_required: Some(i64::from(report.approvals_required)),
                waiting_since: (state == State::ApprovalPending).then(|| micros(at)),
                updated_at: micros(at),
                ..row.clone()
            };
            self.anchor_objects(caller, request_id, std::slice::from_ref(&report_row))
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
                objects: vec![report_row.clone()],
                at: Some(at),
                ..Unit::default()
            };
            if self.commit(unit).await? {
                return Ok(Risked {
                    request_id: request_id.to_owned(),
                    state,
                    risk_report: report_row,
                });
            }
            back_off(attempt).await;
        }
        Err(OrchestratorError::Contended(format!(
            "request {request_id}"
        )))
    }

    /// `POST /approve`: an Approval signed by the approver's registered key, bound to this
    /// request. An approving one leaves the request where it is (APPROVAL_PENDING, or
    /// RISKED where the approval is optional); a rejecting one blocks it.
    pub async fn approve(
        &self,
        caller: &Caller,
        request_id: &str,
        approval: &[u8],
        signature: &str,
        public_key: &str,
    ) -> Result<Approved, OrchestratorError> {
        let approval: Approval =
            schema::parse_object(&json_document(SchemaName::Approval, approval)?)?;
        if !self.request_exists(request_id).await? {
            return Err(not_found(request_id));
        }
        let registered = self
            .approver_key_registered(caller, &approval, request_id, signature, public_key)
            .await?;
        for attempt in 0..ATTEMPTS {
            let (row, state) = self.load_for(request_id, Call::Approve, attempt).await?;
            let plan: Plan = self.object(&row.plan_object).await?;
            let Some(risk_object) = &row.risk_object else {
                return Err(OrchestratorError::Corrupt(format!(
                    "request {request_id} is {state} without a risk report"
                )));
            };
            let report: RiskReport = self.object(risk_object).await?;
            let recorded = if row.approval_count == 0 {
                Vec::new()
            } else {
                self.recorded_approvals(request_id).await?
            };
            let loaded = self.policy();
            let rules = &loaded.policy.document().approval;
            let optional = state == State::Risked
                && loaded
                    .policy
                    .document()
                    .levels
                    .rule(report.risk_level)
                    .approval
                    == ApprovalNeed::Optional;
            let at = now();
            let verdict = approval::check_submission(
                Submission {
                    approval: &approval,
                    signature,
                    public_key,
                },
                Context {
                    request_id,
                    plan: &plan,
                    report: &report,
                    recorded: &recorded,
                    key_registered_to_approver: registered,
                    approval_optional: optional,
                    rules,
                    now: at,
                },
            )?;
            let approval_row = stored(&approval, at)?;
            let cid = approval_row
                .content_id
                .parse()
                .map_err(|_| OrchestratorError::Corrupt("a content id does not parse".into()))?;
            let extra = json!({"approver": approval.approver, "approval_id": approval.id});
            let (event, next_state) = match verdict {
                Verdict::Approved { .. } => (
                    Event::new(
                        EventType::ApprovalRecorded,
                        request_id,
                        Some(state),
                        state,
                        meta::stored(&cid, SchemaName::Approval.as_str(), extra),
                    )?,
                    state,
                ),
                Verdict::Rejected => (
                    Event::new(
                        EventType::ApprovalRejected,
                        request_id,
                        Some(state),
                        State::Blocked,
                        meta::stored(&cid, SchemaName::Approval.as_str(), extra),
                    )?,
                    State::Blocked,
                ),
            };
            let ts = timestamp::format(at);
            let (events, head) = chain(row.version, &row.head_hash, vec![event], &ts)?;
            let next = RequestRow {
                state: next_state.as_str().to_owned(),
                version: row.version + 1,
                head_hash: head,
                approval_count: row.approval_count + 1,
                waiting_since: if next_state == State::ApprovalPending {
                    row.waiting_since
                } else {
                    None
                },
                updated_at: micros(at),
                ..row.clone()
            };
            let record = ApprovalRow {
                request_id: request_id.to_owned(),
                seq: row.version + 1,
                approval_object: approval_row.content_id.clone(),
                approval_id: approval.id.clone(),
                approver: approval.approver.clone(),
                decision: match approval.decision {
                    Decision::Approve => "approve".into(),
                    Decision::Reject => "reject".into(),
                },
                signature: signature.to_owned(),
                public_key: public_key.to_owned(),
                submitted_by: caller.actor().to_owned(),
                recorded_at: micros(at),
            };
            self.anchor_objects(caller, request_id, std::slice::from_ref(&approval_row))
                .await?;
            let unit = Unit {
                expect: vec![
                    Expect::Request {
                        request_id: request_id.to_owned(),
                        version: row.version,
                    },
                    Expect::SignatureUnused {
                        signature: signature.to_owned(),
                    },
                ],
                request: Some(RequestWrite {
                    row: next,
                    insert: false,
                }),
                audit: audit_events(caller.actor(), &events),
                events,
                objects: vec![approval_row.clone()],
                approval: Some(record),
                at: Some(at),
                ..Unit::default()
            };
            match self.store.commit(unit).await? {
                Ok(()) => {
                    let (valid_approvers, approvals_required) = match verdict {
                        Verdict::Approved {
                            valid_approvers,
                            required,
                        } => (valid_approvers, required),
                        Verdict::Rejected => (0, report.approvals_required),
                    };
                    self.store.remember(std::slice::from_ref(&approval_row));
                    return Ok(Approved {
                        request_id: request_id.to_owned(),
                        state: next_state,
                        approval: approval_row,
                        valid_approvers,
                        approvals_required,
                    });
                }
                Err(crate::store::Rejection::SignatureUsed) => {
                    return Err(ApprovalError::Replayed {
                        approval_id: approval.id.clone(),
                    }
                    .into());
                }
                Err(_) => back_off(attempt).await,
            }
        }
        Err(OrchestratorError::Contended(format!(
            "request {request_id}"
        )))
    }

    /// The approvals recorded on a request, oldest first.
    pub(super) async fn recorded_approvals(
        &self,
        request_id: &str,
    ) -> Result<Vec<Approval>, OrchestratorError> {
        let mut approvals = Vec::new();
        for row in self.store.approvals(request_id).await? {
            approvals.push(self.object(&row.approval_object).await?);
        }
        Ok(approvals)
    }

    /// Identity's answer: is `public_key` the key registered to the approver? Asked only
    /// for a signature that verifies (anything else fails on its own), with the caller's
    /// token. Identity's refusals fail the approval closed.
    async fn approver_key_registered(
        &self,
        caller: &Caller,
        approval: &Approval,
        request_id: &str,
        signature: &str,
        public_key: &str,
    ) -> Result<bool, OrchestratorError> {
        let (Ok(key), Ok(sig)) = (
            PublicKey::from_base64(public_key),
            Signature::from_base64(signature),
        ) else {
            return Ok(false);
        };
        let Ok(message) = approval::signing_bytes(approval, request_id) else {
            return Ok(false);
        };
        if key.is_weak() || !keys::verify(&key, &message, &sig) {
            return Ok(false);
        }
        let mut request = tonic::Request::new(VerifyRequest {
            agent_id: approval.approver.clone(),
            message,
            signature: signature.to_owned(),
            public_key: public_key.to_owned(),
        });
        if let Some(value) = &caller.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        let answer = self
            .identity
            .clone()
            .verify(request)
            .await
            .map_err(|status| {
                OrchestratorError::Identity(noema_core::Failure::from_status(&status))
            })?
            .into_inner();
        Ok(answer.valid && answer.key_status == KeyStatus::Registered as i32)
    }
}

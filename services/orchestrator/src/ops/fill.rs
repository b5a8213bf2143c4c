//! Long histories for benchmarks (`noema bench orchestrator-fill`): requests written
//! straight through the store as the calls record them — the objects, the chained events,
//! the live row, the votes and an audit entry per event — but many events per write and
//! many writes per transaction, so a million events take seconds to write rather than the
//! hours the API would take. Not reachable through the API.

use futures::{StreamExt, TryStreamExt};
use serde_json::json;

use super::evaluation::vote_row;
use super::execute::traced_event;
use super::{Orchestrator, audit_events, chain, new_id, now, stored};
use crate::domain::eval;
use crate::domain::events::{CHAIN_START, Event, EventType, meta};
use crate::domain::objects::{EvalResult, Plan, SCHEMA_VERSION};
use crate::domain::reputation::Screening;
use crate::domain::risk;
use crate::domain::schema::{self, SchemaName};
use crate::domain::state::State;
use crate::domain::timestamp;
use crate::domain::trace::TraceBuilder;
use crate::error::OrchestratorError;
use crate::store::{Expect, ObjectRow, RequestRow, RequestWrite, Unit, VoteRow, micros};

/// Most events one write of a fill carries.
const EVENTS_PER_UNIT: usize = 1000;
/// Events of a request before its evaluations: received, planned, risked, executed,
/// traced.
const LIFECYCLE_EVENTS: i64 = 5;
/// Who the fill's audit entries name.
const FILLER: &str = "bench:fill";

/// What a fill wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filled {
    pub requests: u64,
    pub events: u64,
    /// The last request written.
    pub last_request: Option<String>,
}

/// One event of a request being filled, with what it stores.
struct Pending {
    event: Event,
    object: Option<ObjectRow>,
    vote: Option<VoteRow>,
}

impl Orchestrator {
    /// Writes `requests` requests, `in_flight` at a time: each planned (one `noema.noop`
    /// step), risked, executed and traced, then evaluated `evaluations` times by distinct
    /// evaluators, as the calls would record them.
    pub async fn fill(
        &self,
        requests: u64,
        evaluations: u64,
        in_flight: usize,
    ) -> Result<Filled, OrchestratorError> {
        futures::stream::iter(0..requests)
            .map(|n| self.fill_request(n, evaluations))
            .buffer_unordered(in_flight.max(1))
            .try_fold(Filled::default(), |mut filled, (id, events)| async move {
                filled.requests += 1;
                filled.events += events;
                filled.last_request = Some(id);
                Ok(filled)
            })
            .await
    }

    /// One request of a fill: its id and its number of events.
    async fn fill_request(
        &self,
        n: u64,
        evaluations: u64,
    ) -> Result<(String, u64), OrchestratorError> {
        let request_id = new_id("req")?;
        let at = now();
        let ts = timestamp::format(at);
        let actor = format!("bench:filler-{}", n % 64);
        let plan: Plan = schema::parse_plan(&json!({
            "schema_version": SCHEMA_VERSION, "id": new_id("plan")?, "ts": ts,
            "source": actor, "goal": "a long history",
            "steps": [{"step_id": "s1", "action": "nothing", "tool": "noema.noop",
                       "expected_output": "nothing"}],
            "assumptions": [], "rollback_plan": "nothing to undo"
        }))?;
        let loaded = self.policy();
        let report = risk::assess(&plan, &loaded.policy).into_report(
            new_id("rr")?,
            &ts,
            "orchestrator",
            &plan.id,
        );
        let mut trace = TraceBuilder::new(self.header(&request_id, &plan, &report, &ts)?, vec![]);
        for step in &plan.steps {
            trace.record(step, false, ts.clone(), ts.clone(), Ok(json!({})));
        }
        let trace = trace.finish();
        let (plan_row, report_row, trace_row) = (
            stored(&plan, at)?,
            stored(&report, at)?,
            stored(&trace, at)?,
        );
        let cid = |row: &ObjectRow| {
            row.content_id
                .parse()
                .map_err(|_| OrchestratorError::Corrupt("a content id does not parse".into()))
        };
        let event = |event_type, prev, next, meta| {
            Event::new(event_type, &request_id, prev, next, meta).map_err(OrchestratorError::from)
        };
        let mut pending = vec![
            Pending {
                event: event(
                    EventType::Received,
                    None,
                    State::Received,
                    meta::received(&actor),
                )?,
                object: None,
                vote: None,
            },
            Pending {
                event: event(
                    EventType::Planned,
                    Some(State::Received),
                    State::Planned,
                    meta::stored(
                        &cid(&plan_row)?,
                        SchemaName::Plan.as_str(),
                        json!({"plan_id": plan.id}),
                    ),
                )?,
                object: Some(plan_row.clone()),
                vote: None,
            },
            Pending {
                event: event(
                    EventType::Risked,
                    Some(State::Planned),
                    State::Risked,
                    meta::stored(
                        &cid(&report_row)?,
                        SchemaName::RiskReport.as_str(),
                        json!({"risk_level": report.risk_level,
                               "policy_hash": report.policy_hash}),
                    ),
                )?,
                object: Some(report_row.clone()),
                vote: None,
            },
            Pending {
                event: event(
                    EventType::Executed,
                    Some(State::Risked),
                    State::Executed,
                    json!({"approval_ids": []})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                )?,
                object: None,
                vote: None,
            },
            Pending {
                event: traced_event(&request_id, &trace, &trace_row)?,
                object: Some(trace_row.clone()),
                vote: None,
            },
        ];
        let document = loaded.policy.document();
        let suite = eval::declared_suite(&loaded.policy, "default")?;
        for k in 0..evaluations {
            let evaluator = format!("bench:evaluator-{k}");
            let result = EvalResult {
                schema_version: SCHEMA_VERSION.to_owned(),
                id: format!("{request_id}-eval-{k}"),
                ts: ts.clone(),
                source: evaluator.clone(),
                suite: suite.name.clone(),
                score: 0.9,
                pass: true,
                regression: false,
                findings: vec![],
            };
            let gate = eval::gate(&result, suite, None, document.eval.regression_tolerance);
            let screening = Screening::default();
            let eval_row = stored(&result, at)?;
            let seq = LIFECYCLE_EVENTS + i64::try_from(k).unwrap_or(i64::MAX) + 1;
            let prev = if k == 0 {
                State::Traced
            } else {
                State::Evaluated
            };
            pending.push(Pending {
                event: event(
                    EventType::Evaluated,
                    Some(prev),
                    State::Evaluated,
                    meta::stored(
                        &cid(&eval_row)?,
                        SchemaName::EvalResult.as_str(),
                        json!({"evaluator_id": evaluator, "suite": suite.name,
                               "gate_passed": gate.gate_passed, "regression": gate.regression,
                               "suppressed": screening.suppressed}),
                    ),
                )?,
                vote: Some(vote_row(
                    &evaluator,
                    &request_id,
                    Some(seq),
                    &result,
                    &eval_row,
                    &gate,
                    &screening,
                    None,
                    at,
                )?),
                object: Some(eval_row),
            });
        }
        // The live row after `version` events.
        let row_at = |version: i64, head: String| RequestRow {
            request_id: request_id.clone(),
            state: match version {
                ..=1 => State::Received,
                2 => State::Planned,
                3 => State::Risked,
                4 => State::Executed,
                5 => State::Traced,
                _ => State::Evaluated,
            }
            .as_str()
            .to_owned(),
            actor: actor.clone(),
            version,
            head_hash: head,
            plan_object: plan_row.content_id.clone(),
            rollback_declared: true,
            risk_object: (version >= 3).then(|| report_row.content_id.clone()),
            risk_level: (version >= 3).then(|| report.risk_level.as_str().to_owned()),
            forbidden: (version >= 3).then_some(report.forbidden),
            approvals_required: (version >= 3).then_some(i64::from(report.approvals_required)),
            trace_object: (version >= 5).then(|| trace_row.content_id.clone()),
            trace_id: (version >= 5).then(|| trace.trace_id.clone()),
            trace_status: (version >= 5).then(|| {
                serde_json::to_value(trace.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            }),
            reward_object: None,
            approval_count: 0,
            evaluation_count: (version - LIFECYCLE_EVENTS).max(0),
            waiting_since: None,
            created_at: micros(at),
            updated_at: micros(at),
        };
        let total = pending.len() as u64;
        let (mut version, mut head) = (0i64, CHAIN_START.to_owned());
        let mut rest = pending.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk: Vec<Pending> = rest.by_ref().take(EVENTS_PER_UNIT).collect();
            let mut events = Vec::with_capacity(chunk.len());
            let mut objects = Vec::new();
            let mut votes = Vec::new();
            for p in chunk {
                events.push(p.event);
                objects.extend(p.object);
                votes.extend(p.vote);
            }
            let (events, next_head) = chain(version, &head, events, &ts)?;
            let next_version = version + i64::try_from(events.len()).unwrap_or(0);
            let unit = Unit {
                expect: vec![Expect::Request {
                    request_id: request_id.clone(),
                    version,
                }],
                request: Some(RequestWrite {
                    row: row_at(next_version, next_head.clone()),
                    insert: version == 0,
                }),
                audit: audit_events(FILLER, &events),
                events,
                objects,
                votes,
                at: Some(at),
                ..Unit::default()
            };
            self.store
                .commit(unit)
                .await?
                .map_err(|r| OrchestratorError::Corrupt(format!("fill: {r}")))?;
            (version, head) = (next_version, next_head);
        }
        Ok((request_id, total))
    }
}

//! Evaluations (seed §7–§9): the gate, anti-abuse screening, gold tasks mixed into what
//! evaluators are served, and gold judgements.
//!
//! A gold task looks like a traced request to the evaluator: it is served with the same
//! fields (its id is shaped like a request id, its trace names it), answered through the
//! same `evaluate` with the same checks, screening and reply. Its judgement updates the
//! evaluator's gold record instead of a request.

use noema_core::audit::AuditDraft;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::lifecycle::json_document;
use super::{
    ATTEMPTS, Caller, Orchestrator, audit_events, back_off, chain, new_id, not_found, now, stored,
};
use crate::domain::eval::{self, GateOutcome};
use crate::domain::events::{Event, EventType, meta};
use crate::domain::objects::{EvalResult, ExecTrace, Plan, RiskReport};
use crate::domain::policy::{AntiAbuseParams, SuiteSpec};
use crate::domain::reputation::{self, GoldAnswer, GoldRecord, Screening, VoteHistory};
use crate::domain::schema::{self, SchemaName};
use crate::domain::state::{Call, State};
use crate::domain::timestamp;
use crate::error::OrchestratorError;
use crate::store::{
    EvaluatorRow, Expect, GoldTaskRow, ItemRow, ObjectRow, RequestRow, RequestWrite, SuiteUpdate,
    Unit, VoteRow, from_micros, micros,
};

/// Longest evaluator id accepted, in characters (as the OpenAPI document's `maxLength`
/// counts them).
const MAX_EVALUATOR_ID: usize = 256;
/// Slack for comparing scores held as doubles (as the gate does).
const EPSILON: f64 = 1e-9;

/// An evaluation recorded (or a gold judgement, which answers the same).
#[derive(Debug, Clone)]
pub struct Evaluated {
    pub request_id: String,
    pub state: State,
    pub eval_result: ObjectRow,
    pub gate: GateOutcome,
    pub gate_min_score: f64,
    pub screening: Screening,
}

/// An item served to an evaluator.
#[derive(Debug, Clone)]
pub struct ServedItem {
    pub item_id: String,
    pub request_id: String,
    pub plan: ObjectRow,
    pub risk_report: Option<ObjectRow>,
    pub exec_trace: ObjectRow,
    pub served_at: OffsetDateTime,
}

/// Who may evaluate as `evaluator_id`: the evaluator itself, or an admin on its behalf.
/// An evaluator id's form: 1 to [`MAX_EVALUATOR_ID`] characters, not all of them space.
fn check_evaluator_id(evaluator_id: &str) -> Result<(), OrchestratorError> {
    if evaluator_id.trim().is_empty() || evaluator_id.chars().count() > MAX_EVALUATOR_ID {
        return Err(OrchestratorError::Invalid(format!(
            "evaluator_id must be 1 to {MAX_EVALUATOR_ID} characters"
        )));
    }
    Ok(())
}

fn check_evaluator(caller: &Caller, evaluator_id: &str) -> Result<(), OrchestratorError> {
    check_evaluator_id(evaluator_id)?;
    if evaluator_id != caller.actor() && !caller.principal.allows("orchestrator:admin") {
        return Err(OrchestratorError::NotPermitted(format!(
            "evaluator_id {evaluator_id:?} is not the caller ({}); only orchestrator:admin \
             evaluates on another's behalf",
            caller.actor()
        )));
    }
    Ok(())
}

/// `pass == true && score >= gate_min_score`: the gate without its regression term.
fn passed_minimum(eval: &EvalResult, suite: &SuiteSpec) -> bool {
    eval.pass && eval.score + EPSILON >= suite.gate_min_score
}

impl Orchestrator {
    /// `POST /evaluate`.
    pub async fn evaluate(
        &self,
        caller: &Caller,
        request_id: &str,
        evaluator_id: &str,
        eval_result: &[u8],
    ) -> Result<Evaluated, OrchestratorError> {
        check_evaluator(caller, evaluator_id)?;
        let eval: EvalResult =
            schema::parse_object(&json_document(SchemaName::EvalResult, eval_result)?)?;
        if !self.request_exists(request_id).await? {
            return match self.store.gold_task(request_id).await? {
                Some(gold) if self.store.served(evaluator_id, request_id).await? => {
                    self.judge_gold(caller, evaluator_id, gold, eval).await
                }
                _ => Err(not_found(request_id)),
            };
        }
        for attempt in 0..ATTEMPTS {
            let (row, state) = self.load_for(request_id, Call::Evaluate, attempt).await?;
            if row.actor == evaluator_id {
                return Err(OrchestratorError::NotPermitted(format!(
                    "{evaluator_id} is the request's actor; an actor does not evaluate its own request"
                )));
            }
            let loaded = self.policy();
            let document = loaded.policy.document();
            let suite = eval::declared_suite(&loaded.policy, &eval.suite)?;
            let at = now();
            let (baseline, screening) = self
                .vote_inputs(
                    evaluator_id,
                    request_id,
                    &suite.name,
                    at,
                    &document.anti_abuse,
                )
                .await?;
            let gate = eval::gate(&eval, suite, baseline, document.eval.regression_tolerance);
            let evaluator = self.evaluator_row(evaluator_id, at, attempt).await?;
            let eval_row = stored(&eval, at)?;
            let cid = eval_row
                .content_id
                .parse()
                .map_err(|_| OrchestratorError::Corrupt("a content id does not parse".into()))?;
            let event = Event::new(
                EventType::Evaluated,
                request_id,
                Some(state),
                State::Evaluated,
                meta::stored(
                    &cid,
                    SchemaName::EvalResult.as_str(),
                    json!({"evaluator_id": evaluator_id, "suite": suite.name,
                           "gate_passed": gate.gate_passed, "regression": gate.regression,
                           "suppressed": screening.suppressed}),
                ),
            )?;
            let ts = timestamp::format(at);
            let (events, head) = chain(row.version, &row.head_hash, vec![event], &ts)?;
            let next = RequestRow {
                state: State::Evaluated.as_str().to_owned(),
                version: row.version + 1,
                head_hash: head,
                evaluation_count: row.evaluation_count + 1,
                updated_at: micros(at),
                ..row.clone()
            };
            let vote = vote_row(
                evaluator_id,
                request_id,
                Some(row.version + 1),
                &eval,
                &eval_row,
                &gate,
                &screening,
                None,
                at,
            )?;
            // A suppressed vote is noise: it moves neither the baseline nor the release
            // check's latest evaluation.
            let suite_update = (!screening.suppressed).then(|| SuiteUpdate {
                suite: suite.name.clone(),
                passing_score: gate.gate_passed.then_some(eval.score),
                request_id: request_id.to_owned(),
                eval_id: eval.id.clone(),
                gate_passed: gate.gate_passed,
                passed_minimum: passed_minimum(&eval, suite),
                regression: gate.regression,
            });
            self.anchor_objects(caller, request_id, std::slice::from_ref(&eval_row))
                .await?;
            let unit = Unit {
                expect: vec![
                    Expect::Request {
                        request_id: request_id.to_owned(),
                        version: row.version,
                    },
                    Expect::Evaluator {
                        evaluator_id: evaluator_id.to_owned(),
                        version: evaluator.version - 1,
                    },
                ],
                request: Some(RequestWrite {
                    row: next,
                    insert: false,
                }),
                audit: audit_events(caller.actor(), &events),
                events,
                objects: vec![eval_row.clone()],
                votes: vec![vote],
                evaluator: Some(evaluator),
                suite: suite_update,
                at: Some(at),
                ..Unit::default()
            };
            if self.commit(unit).await? {
                return Ok(Evaluated {
                    request_id: request_id.to_owned(),
                    state: State::Evaluated,
                    eval_result: eval_row,
                    gate_min_score: suite.gate_min_score,
                    gate,
                    screening,
                });
            }
            back_off(attempt).await;
        }
        Err(OrchestratorError::Contended(format!(
            "request {request_id} or evaluator {evaluator_id}"
        )))
    }

    /// A judgement of a gold task: the same checks, screening and reply as an evaluation;
    /// it updates the evaluator's gold record (unless suppressed) and nothing else.
    async fn judge_gold(
        &self,
        caller: &Caller,
        evaluator_id: &str,
        gold: GoldTaskRow,
        eval: EvalResult,
    ) -> Result<Evaluated, OrchestratorError> {
        for attempt in 0..ATTEMPTS {
            let loaded = self.policy();
            let document = loaded.policy.document();
            let suite = eval::declared_suite(&loaded.policy, &eval.suite)?;
            let at = now();
            let (baseline, screening) = self
                .vote_inputs(
                    evaluator_id,
                    &gold.gold_id,
                    &suite.name,
                    at,
                    &document.anti_abuse,
                )
                .await?;
            let gate = eval::gate(&eval, suite, baseline, document.eval.regression_tolerance);
            let matched = reputation::gold_matches(
                &eval,
                &GoldAnswer {
                    pass: gold.answer_pass,
                    min_score: gold.min_score,
                    max_score: gold.max_score,
                },
            );
            let mut evaluator = self.evaluator_row(evaluator_id, at, attempt).await?;
            if !screening.suppressed {
                let record = GoldRecord {
                    attempts: u32::try_from(evaluator.gold_attempts).unwrap_or(u32::MAX),
                    matches: u32::try_from(evaluator.gold_matches).unwrap_or(u32::MAX),
                    consecutive_mismatches: u32::try_from(evaluator.consecutive_mismatches)
                        .unwrap_or(u32::MAX),
                }
                .record(matched);
                evaluator.gold_attempts = i64::from(record.attempts);
                evaluator.gold_matches = i64::from(record.matches);
                evaluator.consecutive_mismatches = i64::from(record.consecutive_mismatches);
            }
            let eval_row = stored(&eval, at)?;
            let vote = vote_row(
                evaluator_id,
                &gold.gold_id,
                None,
                &eval,
                &eval_row,
                &gate,
                &screening,
                Some(matched),
                at,
            )?;
            let unit = Unit {
                expect: vec![Expect::Evaluator {
                    evaluator_id: evaluator_id.to_owned(),
                    version: evaluator.version - 1,
                }],
                audit: vec![AuditDraft {
                    actor: caller.actor().to_owned(),
                    action: "gold.judged".into(),
                    target_id: Some(gold.gold_id.clone()),
                    target_type: Some("gold_task".into()),
                    detail: Some(json!({"evaluator_id": evaluator_id, "matched": matched,
                                        "suppressed": screening.suppressed})),
                }],
                objects: vec![eval_row.clone()],
                votes: vec![vote],
                evaluator: Some(evaluator),
                at: Some(at),
                ..Unit::default()
            };
            if self.commit(unit).await? {
                return Ok(Evaluated {
                    request_id: gold.gold_id.clone(),
                    state: State::Evaluated,
                    eval_result: eval_row,
                    gate_min_score: suite.gate_min_score,
                    gate,
                    screening,
                });
            }
            back_off(attempt).await;
        }
        Err(OrchestratorError::Contended(format!(
            "evaluator {evaluator_id}"
        )))
    }

    /// What a vote by `evaluator_id` on `target_id` at `at` is judged against, read
    /// together: the suite's baseline, and the anti-abuse rules applied to the vote.
    async fn vote_inputs(
        &self,
        evaluator_id: &str,
        target_id: &str,
        suite: &str,
        at: OffsetDateTime,
        params: &AntiAbuseParams,
    ) -> Result<(Option<f64>, Screening), OrchestratorError> {
        let window_start = at - reputation::seconds(params.burst_window_seconds);
        let counts = self
            .store
            .vote_counts(
                evaluator_id,
                target_id,
                suite,
                micros(window_start),
                micros(at),
            )
            .await?;
        let history = VoteHistory {
            last_vote_at: counts.last_vote_at.map(from_micros),
            votes_in_window: usize::try_from(counts.in_window).unwrap_or(usize::MAX),
            votes_on_submission: usize::try_from(counts.on_target).unwrap_or(usize::MAX),
        };
        Ok((counts.baseline, reputation::screen(&history, at, params)))
    }

    /// The evaluator's row after one more vote (its version one past the one read): on the
    /// first attempt read from the row this process committed last, if any (a hint: the
    /// vote expects its version).
    async fn evaluator_row(
        &self,
        evaluator_id: &str,
        at: OffsetDateTime,
        attempt: u32,
    ) -> Result<EvaluatorRow, OrchestratorError> {
        let current = match (attempt, self.store.written_evaluator(evaluator_id)) {
            (0, Some(row)) => Some(row),
            _ => self.store.evaluator(evaluator_id).await?,
        };
        Ok(match current {
            Some(row) => EvaluatorRow {
                version: row.version + 1,
                votes: row.votes + 1,
                updated_at: micros(at),
                ..row
            },
            None => EvaluatorRow {
                evaluator_id: evaluator_id.to_owned(),
                version: 1,
                votes: 1,
                gold_attempts: 0,
                gold_matches: 0,
                consecutive_mismatches: 0,
                updated_at: micros(at),
            },
        })
    }

    /// `GET /evaluations/next`: at the gold ratio a gold task the evaluator has not seen,
    /// otherwise the oldest traced request it may judge. Serving is recorded.
    pub async fn next_evaluation(
        &self,
        caller: &Caller,
        evaluator_id: &str,
    ) -> Result<ServedItem, OrchestratorError> {
        check_evaluator(caller, evaluator_id)?;
        for attempt in 0..ATTEMPTS {
            let ratio = self.policy().policy.document().gold.ratio;
            let gold = if reputation::serve_gold(draw()?, ratio) {
                self.store.unserved_gold(evaluator_id).await?
            } else {
                None
            };
            let (target, is_gold) = match gold {
                Some(id) => (id, true),
                None => match self.store.next_real_target(evaluator_id).await? {
                    Some(id) => (id, false),
                    None => {
                        return Err(OrchestratorError::NotFound(format!(
                            "nothing to evaluate for evaluator {evaluator_id:?}"
                        )));
                    }
                },
            };
            let (plan, risk, trace) = if is_gold {
                let Some(task) = self.store.gold_task(&target).await? else {
                    continue;
                };
                (task.plan_object, task.risk_object, task.trace_object)
            } else {
                let row = self.load(&target).await?;
                let Some(trace) = row.trace_object else {
                    continue;
                };
                (row.plan_object, row.risk_object, trace)
            };
            let at = now();
            let item = ItemRow {
                item_id: new_id("it")?,
                evaluator_id: evaluator_id.to_owned(),
                target_id: target.clone(),
                gold: is_gold,
                served_at: micros(at),
            };
            let unit = Unit {
                expect: vec![Expect::NotServed {
                    evaluator_id: evaluator_id.to_owned(),
                    target_id: target.clone(),
                }],
                audit: vec![AuditDraft {
                    actor: caller.actor().to_owned(),
                    action: "evaluation.served".into(),
                    target_id: Some(item.item_id.clone()),
                    target_type: Some("evaluation_item".into()),
                    detail: Some(json!({"evaluator_id": evaluator_id, "target_id": target,
                                        "gold": is_gold})),
                }],
                item: Some(item.clone()),
                at: Some(at),
                ..Unit::default()
            };
            match self.store.commit(unit).await? {
                Ok(()) => {
                    let object = |id: String| async move {
                        self.store
                            .object(&id)
                            .await?
                            .map(|o| (*o).clone())
                            .ok_or_else(|| {
                                OrchestratorError::Corrupt(format!("object {id} is not stored"))
                            })
                    };
                    let risk_report = match risk {
                        Some(id) => Some(object(id).await?),
                        None => None,
                    };
                    return Ok(ServedItem {
                        item_id: item.item_id,
                        request_id: target,
                        plan: object(plan).await?,
                        risk_report,
                        exec_trace: object(trace).await?,
                        served_at: at,
                    });
                }
                Err(_) => back_off(attempt).await,
            }
        }
        Err(OrchestratorError::Contended(format!(
            "evaluator {evaluator_id}"
        )))
    }

    /// `POST /gold`: a gold task from a traced request (copied) or from given objects. Its
    /// trace is re-issued under a fresh trace id naming the gold task, so the served item
    /// reads like any other.
    pub async fn add_gold_task(
        &self,
        caller: &Caller,
        from_request_id: &str,
        objects: (&[u8], &[u8], &[u8]),
        answer: GoldAnswer,
    ) -> Result<GoldTaskRow, OrchestratorError> {
        if !(0.0..=1.0).contains(&answer.min_score)
            || !(0.0..=1.0).contains(&answer.max_score)
            || answer.min_score > answer.max_score
        {
            return Err(OrchestratorError::Invalid(
                "answer: min_score and max_score must satisfy 0 ≤ min ≤ max ≤ 1".into(),
            ));
        }
        let (plan, report, trace): (Plan, Option<RiskReport>, ExecTrace) =
            if from_request_id.is_empty() {
                let (plan, report, trace) = objects;
                let report = if report.is_empty() {
                    None
                } else {
                    Some(schema::parse_object(&json_document(
                        SchemaName::RiskReport,
                        report,
                    )?)?)
                };
                (
                    schema::parse_plan(&json_document(SchemaName::Plan, plan)?)?,
                    report,
                    schema::parse_object(&json_document(SchemaName::ExecTrace, trace)?)?,
                )
            } else {
                let row = self.load(from_request_id).await?;
                let Some(trace) = &row.trace_object else {
                    return Err(OrchestratorError::Invalid(format!(
                        "request {from_request_id} has no trace yet"
                    )));
                };
                let report = match &row.risk_object {
                    Some(id) => Some(self.object(id).await?),
                    None => None,
                };
                (
                    self.object(&row.plan_object).await?,
                    report,
                    self.object(trace).await?,
                )
            };
        let gold_id = new_id("req")?;
        let trace_id = new_id("tr")?;
        let trace = ExecTrace {
            id: trace_id.clone(),
            trace_id,
            request_id: Some(gold_id.clone()),
            ..trace
        };
        let at = now();
        let plan_row = stored(&plan, at)?;
        let report_row = report.as_ref().map(|r| stored(r, at)).transpose()?;
        let trace_row = stored(&trace, at)?;
        let task = GoldTaskRow {
            gold_id: gold_id.clone(),
            plan_object: plan_row.content_id.clone(),
            risk_object: report_row.as_ref().map(|r| r.content_id.clone()),
            trace_object: trace_row.content_id.clone(),
            answer_pass: answer.pass,
            min_score: answer.min_score,
            max_score: answer.max_score,
            created_by: caller.actor().to_owned(),
            created_at: micros(at),
        };
        let mut objects = vec![plan_row, trace_row];
        objects.extend(report_row);
        let unit = Unit {
            audit: vec![AuditDraft {
                actor: caller.actor().to_owned(),
                action: "gold.added".into(),
                target_id: Some(gold_id),
                target_type: Some("gold_task".into()),
                detail: Some(
                    json!({"answer": {"pass": answer.pass, "min_score": answer.min_score,
                                               "max_score": answer.max_score},
                                    "from_request_id": from_request_id}),
                ),
            }],
            objects,
            gold_task: Some(task.clone()),
            at: Some(at),
            ..Unit::default()
        };
        self.commit(unit).await?;
        Ok(task)
    }
}

/// A uniform draw in [0, 1) the evaluator cannot predict.
fn draw() -> Result<f64, OrchestratorError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| OrchestratorError::Invalid(format!("no randomness: {e}")))?;
    // 53 random bits, the precision of a double.
    Ok((u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn vote_row(
    evaluator_id: &str,
    target_id: &str,
    seq: Option<i64>,
    eval: &EvalResult,
    eval_row: &ObjectRow,
    gate: &GateOutcome,
    screening: &Screening,
    gold_matched: Option<bool>,
    at: OffsetDateTime,
) -> Result<VoteRow, OrchestratorError> {
    Ok(VoteRow {
        vote_id: new_id("vt")?,
        target_id: target_id.to_owned(),
        gold: gold_matched.is_some(),
        seq,
        evaluator_id: evaluator_id.to_owned(),
        eval_object: eval_row.content_id.clone(),
        suite: eval.suite.clone(),
        score: eval.score,
        gate_passed: gate.gate_passed,
        regression: gate.regression,
        suppressed: screening.suppressed,
        reason_codes: Value::from(screening.reason_codes.clone()).to_string(),
        gold_matched,
        voted_at: micros(at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evaluator_id_is_1_to_256_characters() {
        assert!(check_evaluator_id("agent:a").is_ok());
        // Characters, not bytes: 256 four-byte characters are accepted, 257 are not.
        assert!(check_evaluator_id(&"\u{10348}".repeat(256)).is_ok());
        assert!(matches!(
            check_evaluator_id(&"\u{10348}".repeat(257)),
            Err(OrchestratorError::Invalid(message))
                if message == "evaluator_id must be 1 to 256 characters"
        ));
        assert!(check_evaluator_id(&"a".repeat(257)).is_err());
        assert!(check_evaluator_id("").is_err());
        assert!(check_evaluator_id("  ").is_err());
    }
}

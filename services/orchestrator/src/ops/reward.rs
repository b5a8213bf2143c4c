//! `reward/update` (seed §9): the actor's RewardUpdate from the request's evaluations, each
//! weighted by its evaluator's influence (gold calibration) at reward time, suppressed
//! votes counted as noise.

use serde_json::json;

use super::{ATTEMPTS, Caller, Orchestrator, audit_events, back_off, chain, new_id, now, stored};
use crate::domain::events::{Event, EventType, meta};
use crate::domain::objects::{RewardUpdate, SCHEMA_VERSION};
use crate::domain::reputation::{self, GoldRecord, ScoredEvaluation, Screening};
use crate::domain::schema::SchemaName;
use crate::domain::state::{Call, State};
use crate::domain::timestamp;
use crate::error::OrchestratorError;
use crate::store::{
    Expect, ObjectRow, ReputationRow, RequestRow, RequestWrite, Unit, VoteRow, micros,
};

/// Votes read per page.
const PAGE: u32 = 1000;

/// A reward computed and recorded.
#[derive(Debug, Clone)]
pub struct Rewarded {
    pub request_id: String,
    pub state: State,
    pub reward_update: ObjectRow,
}

/// A stored vote's screening.
fn screening(vote: &VoteRow) -> Screening {
    Screening {
        suppressed: vote.suppressed,
        reason_codes: serde_json::from_str(&vote.reason_codes).unwrap_or_default(),
    }
}

impl Orchestrator {
    /// `POST /reward/update`.
    pub async fn update_reward(
        &self,
        caller: &Caller,
        request_id: &str,
    ) -> Result<Rewarded, OrchestratorError> {
        for attempt in 0..ATTEMPTS {
            let (row, _) = self
                .load_for(request_id, Call::RewardUpdate, attempt)
                .await?;
            let scored = self.scored_votes(request_id, row.evaluation_count).await?;
            let loaded = self.policy();
            let params = loaded.policy.document().reward;
            // The reputation this process committed last is a hint on the first attempt:
            // the update expects its version.
            let current = match (attempt, self.store.written_reputation(&row.actor)) {
                (0, Some(written)) => Some(written),
                _ => self.store.reputation(&row.actor).await?,
            };
            let (rep_before, version) = current
                .as_ref()
                .map_or((params.initial_rep, 0), |r| (r.rep, r.version));
            let reward = reputation::compute_reward(rep_before, &scored, &params);
            let at = now();
            let ts = timestamp::format(at);
            let update = RewardUpdate {
                schema_version: SCHEMA_VERSION.to_owned(),
                id: new_id("rw")?,
                ts: ts.clone(),
                source: "orchestrator".into(),
                request_id: Some(request_id.to_owned()),
                actor_id: row.actor.clone(),
                rep_before: reward.rep_before,
                rep_after: reward.rep_after,
                delta: reward.delta,
                reason_codes: reward.reason_codes,
                inputs: reward.inputs,
            };
            let update_row = stored(&update, at)?;
            let cid = update_row
                .content_id
                .parse()
                .map_err(|_| OrchestratorError::Corrupt("a content id does not parse".into()))?;
            let event = Event::new(
                EventType::Rewarded,
                request_id,
                Some(State::Evaluated),
                State::Rewarded,
                meta::stored(
                    &cid,
                    SchemaName::RewardUpdate.as_str(),
                    json!({"actor_id": row.actor, "delta": update.delta}),
                ),
            )?;
            let (events, head) = chain(row.version, &row.head_hash, vec![event], &ts)?;
            let next = RequestRow {
                state: State::Rewarded.as_str().to_owned(),
                version: row.version + 1,
                head_hash: head,
                reward_object: Some(update_row.content_id.clone()),
                updated_at: micros(at),
                ..row.clone()
            };
            self.anchor_objects(caller, request_id, std::slice::from_ref(&update_row))
                .await?;
            let unit = Unit {
                expect: vec![
                    Expect::Request {
                        request_id: request_id.to_owned(),
                        version: row.version,
                    },
                    Expect::Reputation {
                        actor_id: row.actor.clone(),
                        version,
                    },
                ],
                request: Some(RequestWrite {
                    row: next,
                    insert: false,
                }),
                reputation: Some(ReputationRow {
                    actor_id: row.actor.clone(),
                    version: version + 1,
                    rep: update.rep_after,
                    last_reward_id: update.id.clone(),
                    updated_at: micros(at),
                }),
                audit: audit_events(caller.actor(), &events),
                events,
                objects: vec![update_row.clone()],
                at: Some(at),
                ..Unit::default()
            };
            if self.commit(unit).await? {
                return Ok(Rewarded {
                    request_id: request_id.to_owned(),
                    state: State::Rewarded,
                    reward_update: update_row,
                });
            }
            back_off(attempt).await;
        }
        Err(OrchestratorError::Contended(format!(
            "request {request_id}"
        )))
    }

    /// Every evaluation of a request, oldest first, weighted by its evaluator's influence
    /// now (its gold accuracy, decayed by its mismatch streak; 0 without a gold record).
    async fn scored_votes(
        &self,
        request_id: &str,
        evaluations: i64,
    ) -> Result<Vec<ScoredEvaluation>, OrchestratorError> {
        let mut scored = Vec::new();
        if evaluations == 0 {
            return Ok(scored);
        }
        let decay = self.policy().policy.document().gold.mismatch_decay;
        let count = |n: Option<i64>| u32::try_from(n.unwrap_or(0)).unwrap_or(u32::MAX);
        let mut after = 0;
        loop {
            let page = self
                .store
                .votes_with_standing(request_id, after, PAGE)
                .await?;
            let Some(last) = page.last() else { break };
            after = last.vote.seq.unwrap_or(i64::MAX);
            let full = page.len() == PAGE as usize;
            scored.extend(page.into_iter().map(|v| {
                let influence = v.gold_attempts.map_or(0.0, |_| {
                    GoldRecord {
                        attempts: count(v.gold_attempts),
                        matches: count(v.gold_matches),
                        consecutive_mismatches: count(v.consecutive_mismatches),
                    }
                    .influence(decay)
                });
                ScoredEvaluation {
                    gate_passed: v.vote.gate_passed,
                    screening: screening(&v.vote),
                    evaluator_id: v.vote.evaluator_id,
                    influence,
                }
            }));
            if !full {
                break;
            }
        }
        Ok(scored)
    }
}

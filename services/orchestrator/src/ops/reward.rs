//! `reward/update` (seed §9): the actor's RewardUpdate from the request's evaluations, each
//! weighted by its evaluator's influence (gold calibration) at reward time, suppressed
//! votes counted as noise.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::{
    ATTEMPTS, Caller, Orchestrator, audit_events, back_off, chain, new_id, now, state_of, stored,
};
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
            let row = self.load(request_id).await?;
            state_of(&row)?.check_call(Call::RewardUpdate)?;
            let votes = self.all_votes(request_id).await?;
            let influence = self.influences(&votes).await?;
            let scored: Vec<ScoredEvaluation> = votes
                .iter()
                .map(|v| ScoredEvaluation {
                    evaluator_id: v.evaluator_id.clone(),
                    gate_passed: v.gate_passed,
                    screening: screening(v),
                    influence: influence.get(&v.evaluator_id).copied().unwrap_or(0.0),
                })
                .collect();
            let loaded = self.policy();
            let params = loaded.policy.document().reward;
            let current = self.store.reputation(&row.actor).await?;
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

    /// Every evaluation of a request, oldest first.
    pub(super) async fn all_votes(
        &self,
        request_id: &str,
    ) -> Result<Vec<VoteRow>, OrchestratorError> {
        let mut votes = Vec::new();
        let mut after = 0;
        loop {
            let page = self.store.votes_on(request_id, after, PAGE).await?;
            let Some(last) = page.last() else { break };
            after = last.seq.unwrap_or(i64::MAX);
            let full = page.len() == PAGE as usize;
            votes.extend(page);
            if !full {
                break;
            }
        }
        Ok(votes)
    }

    /// Each voter's influence now: its gold accuracy, decayed by its mismatch streak.
    async fn influences(
        &self,
        votes: &[VoteRow],
    ) -> Result<BTreeMap<String, f64>, OrchestratorError> {
        let ids: BTreeSet<&str> = votes.iter().map(|v| v.evaluator_id.as_str()).collect();
        let ids: Vec<&str> = ids.into_iter().collect();
        let decay = self.policy().policy.document().gold.mismatch_decay;
        Ok(self
            .store
            .evaluators(&ids)
            .await?
            .into_iter()
            .map(|e| {
                let record = GoldRecord {
                    attempts: u32::try_from(e.gold_attempts).unwrap_or(u32::MAX),
                    matches: u32::try_from(e.gold_matches).unwrap_or(u32::MAX),
                    consecutive_mismatches: u32::try_from(e.consecutive_mismatches)
                        .unwrap_or(u32::MAX),
                };
                (e.evaluator_id, record.influence(decay))
            })
            .collect())
    }
}

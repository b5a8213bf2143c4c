//! Worlds and their history: creation at turn 0, reads of turns, diffs, events and entity
//! histories, and verification of the hash chain.

use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;

use super::components::jcs_text;
use super::{Caller, Page, World, now};
use crate::domain::attempt::AttemptRecord;
use crate::domain::hash::ContentHash;
use crate::domain::ids::{EntityId, HumanId};
use crate::domain::invocation::SourceInvocation;
use crate::domain::llm_call::LlmCall;
use crate::domain::turn::{ChainBreak, StoredTurn, TurnDiff, TurnRecord, verify_chain};
use crate::domain::workflow::template::format_time;
use crate::domain::world::WorldState;
use crate::error::WorldError;
use crate::store::events::{EntityChange, Event};
use crate::store::invocations::InvocationFilter;
use crate::store::worlds::{NewWorld, TurnRow, WorldRow};

/// A world as served: its head and current state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorldView {
    pub slug: String,
    pub scenario_hash: String,
    pub current_turn: u64,
    pub head_hash: String,
    /// The simulation time of the current turn.
    pub simulation_time: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub state: WorldState,
}

/// A committed turn as served: its record, hash and anchor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnView {
    pub world_slug: String,
    pub turn: u64,
    pub hash: String,
    pub previous_turn_hash: Option<String>,
    pub simulation_time: String,
    pub attempt_id: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub committed_at: OffsetDateTime,
    pub anchor_id: Option<String>,
    /// The record's JCS text: `hash` is SHA-256 of it (not serialised: `record` is).
    #[serde(skip)]
    pub record_jcs: String,
    pub record: Option<TurnRecord>,
}

/// One entity's history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityHistory {
    pub world_slug: String,
    pub entity_id: String,
    /// Its state at turn 0.
    pub initial: Value,
    pub changes: Vec<EntityChange>,
}

/// What verifying a world found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    pub world_slug: String,
    pub ok: bool,
    pub turns_checked: u64,
    pub head_hash: String,
    pub broken_turn: Option<u64>,
    pub problem: Option<String>,
    pub anchors_checked: u64,
}

/// How many turns verification reads at a time.
const VERIFY_BATCH: u32 = 200;

fn parse_slug(slug: &str) -> Result<HumanId, WorldError> {
    HumanId::parse(slug).map_err(|why| WorldError::InvalidArgument(format!("slug: {why}")))
}

fn parse_record(row: &TurnRow) -> Result<TurnRecord, WorldError> {
    serde_json::from_str(&row.record).map_err(|e| {
        WorldError::Internal(format!(
            "stored turn {}/{} is not a turn record: {e}",
            row.world_slug, row.turn
        ))
    })
}

fn turn_view(row: TurnRow, with_record: bool) -> Result<TurnView, WorldError> {
    let record = if with_record {
        Some(parse_record(&row)?)
    } else {
        None
    };
    Ok(TurnView {
        world_slug: row.world_slug,
        turn: row.turn,
        hash: row.turn_hash,
        previous_turn_hash: row.previous_turn_hash,
        simulation_time: row.simulation_time,
        attempt_id: row.attempt_id,
        committed_at: row.committed_at,
        anchor_id: row.anchor_id,
        record_jcs: row.record,
        record,
    })
}

impl World {
    async fn world_row(&self, slug: &str) -> Result<WorldRow, WorldError> {
        self.store
            .get_world(slug)
            .await?
            .ok_or_else(|| WorldError::NotFound(format!("world {slug:?} does not exist")))
    }

    async fn turn_row(&self, slug: &str, turn: u64) -> Result<TurnRow, WorldError> {
        self.world_row(slug).await?;
        self.store.turn(slug, turn).await?.ok_or_else(|| {
            WorldError::NotFound(format!("world {slug:?} has no committed turn {turn}"))
        })
    }

    /// Creates world `slug` at turn 0 from the assembled scenario `scenario`.
    pub async fn create_world(
        &self,
        slug: &str,
        scenario: &ContentHash,
        caller: &Caller,
    ) -> Result<WorldView, WorldError> {
        let slug_id = parse_slug(slug)?;
        let assembled = self.assembled(scenario).await?;
        let record = TurnRecord {
            world_slug: slug_id,
            turn: 0,
            previous_turn_hash: None,
            simulation_time: format_time(assembled.scenario.clock().start),
            state: assembled.initial_world(),
            patches: Vec::new(),
        };
        let hash = record
            .hash()
            .map_err(|e| WorldError::Internal(format!("turn 0: {e}")))?;
        let record_json = serde_json::to_value(&record)
            .map_err(|e| WorldError::Internal(format!("turn 0: {e}")))?;
        let world = NewWorld {
            slug: slug.to_owned(),
            scenario_hash: scenario.clone(),
            turn0_hash: hash,
            turn0_record: jcs_text(&record_json)?,
            simulation_time: record.simulation_time.clone(),
        };
        if !self
            .store
            .create_world(&world, &caller.actor, now())
            .await?
        {
            return Err(WorldError::WorldExists(slug.to_owned()));
        }
        self.get_world(slug).await
    }

    pub async fn get_world(&self, slug: &str) -> Result<WorldView, WorldError> {
        let world = self.world_row(slug).await?;
        let row = self
            .store
            .turn(slug, world.current_turn)
            .await?
            .ok_or_else(|| {
                WorldError::Internal(format!(
                    "world {slug:?} is at turn {}, which is not stored",
                    world.current_turn
                ))
            })?;
        let record = parse_record(&row)?;
        Ok(WorldView {
            slug: world.slug,
            scenario_hash: world.scenario_hash.to_string(),
            current_turn: world.current_turn,
            head_hash: world.head_hash.to_string(),
            simulation_time: record.simulation_time,
            created_at: world.created_at,
            state: record.state,
        })
    }

    pub async fn list_worlds(&self, page: Page) -> Result<Vec<WorldRow>, WorldError> {
        Ok(self.store.list_worlds(page.offset, page.limit).await?)
    }

    pub async fn get_turn(&self, slug: &str, turn: u64) -> Result<TurnView, WorldError> {
        turn_view(self.turn_row(slug, turn).await?, true)
    }

    /// Committed turns from `page.offset` on, without their records.
    pub async fn list_turns(&self, slug: &str, page: Page) -> Result<Vec<TurnView>, WorldError> {
        self.world_row(slug).await?;
        self.store
            .turns(slug, page.offset, page.limit, false)
            .await?
            .into_iter()
            .map(|row| turn_view(row, false))
            .collect()
    }

    /// What turn `turn` changed (turn 0 changed nothing).
    pub async fn turn_diff(&self, slug: &str, turn: u64) -> Result<TurnDiff, WorldError> {
        let record = parse_record(&self.turn_row(slug, turn).await?)?;
        let before = match turn.checked_sub(1) {
            Some(previous) => parse_record(&self.turn_row(slug, previous).await?)?.state,
            None => record.state.clone(),
        };
        Ok(TurnDiff::between(
            turn,
            &before,
            &record.state,
            &record.patches,
        ))
    }

    pub async fn list_events(
        &self,
        slug: &str,
        turn: Option<u64>,
        page: Page,
    ) -> Result<Vec<Event>, WorldError> {
        self.world_row(slug).await?;
        Ok(self
            .store
            .list_events(slug, turn, page.offset, page.limit)
            .await?)
    }

    pub async fn entity_history(
        &self,
        slug: &str,
        entity_id: &str,
    ) -> Result<EntityHistory, WorldError> {
        let id = EntityId::parse(entity_id)
            .map_err(|why| WorldError::InvalidArgument(format!("entity_id: {why}")))?;
        let record = parse_record(&self.turn_row(slug, 0).await?)?;
        let initial = record.state.entity(id.as_str()).ok_or_else(|| {
            WorldError::NotFound(format!("world {slug:?} has no entity {entity_id:?}"))
        })?;
        Ok(EntityHistory {
            world_slug: slug.to_owned(),
            entity_id: entity_id.to_owned(),
            initial: serde_json::to_value(initial)
                .map_err(|e| WorldError::Internal(e.to_string()))?,
            changes: self.store.entity_changes(slug, entity_id).await?,
        })
    }

    /// Re-checks the world's history: the chain of turn records, the world's head, and the
    /// ledger anchors of anchored turns (with the caller's token).
    pub async fn verify_world(
        &self,
        slug: &str,
        caller: &Caller,
    ) -> Result<VerifyReport, WorldError> {
        let world = self.world_row(slug).await?;
        let mut report = VerifyReport {
            world_slug: slug.to_owned(),
            ok: true,
            turns_checked: 0,
            head_hash: world.head_hash.to_string(),
            broken_turn: None,
            problem: None,
            anchors_checked: 0,
        };
        let mut chain: Vec<StoredTurn> = Vec::new();
        let mut rows: Vec<TurnRow> = Vec::new();
        let mut from = 0;
        loop {
            let batch = self.store.turns(slug, from, VERIFY_BATCH, true).await?;
            let full = batch.len() == VERIFY_BATCH as usize;
            from += batch.len() as u64;
            rows.extend(batch);
            if !full {
                break;
            }
        }
        let broken = |turn: u64, problem: String, report: &mut VerifyReport| {
            if report.ok {
                report.ok = false;
                report.broken_turn = Some(turn);
                report.problem = Some(problem);
            }
        };
        for row in &rows {
            let record: TurnRecord = match serde_json::from_str(&row.record) {
                Ok(record) => record,
                Err(e) => {
                    broken(
                        row.turn,
                        format!("turn {}'s record is not a turn record: {e}", row.turn),
                        &mut report,
                    );
                    break;
                }
            };
            if record.turn != row.turn
                || record.world_slug.as_str() != row.world_slug
                || record.previous_turn_hash.as_ref().map(ToString::to_string)
                    != row.previous_turn_hash
                || record.simulation_time != row.simulation_time
            {
                broken(
                    row.turn,
                    format!("turn {}'s row does not match its record", row.turn),
                    &mut report,
                );
                break;
            }
            let Ok(hash) = ContentHash::parse(&row.turn_hash) else {
                broken(
                    row.turn,
                    format!("turn {}'s stored hash is malformed", row.turn),
                    &mut report,
                );
                break;
            };
            // The record as stored must be the record's canonical text: what was hashed.
            if noema_core::content_id::sha256_hex(row.record.as_bytes()) != hash.as_str() {
                broken(
                    row.turn,
                    ChainBreak::HashMismatch { turn: row.turn }.to_string(),
                    &mut report,
                );
                break;
            }
            chain.push(StoredTurn { record, hash });
        }
        if report.ok {
            report.turns_checked = chain.len() as u64;
            if let Err(chain_break) = verify_chain(&chain) {
                let turn = match &chain_break {
                    ChainBreak::Gap { expected, .. } => *expected,
                    ChainBreak::HashMismatch { turn }
                    | ChainBreak::LinkMismatch { turn }
                    | ChainBreak::StateMismatch { turn }
                    | ChainBreak::WrongWorld { turn, .. } => *turn,
                };
                broken(turn, chain_break.to_string(), &mut report);
            }
        }
        if report.ok {
            match chain.last() {
                Some(last)
                    if last.record.turn == world.current_turn && last.hash == world.head_hash => {}
                Some(last) => broken(
                    last.record.turn,
                    format!(
                        "the world's head (turn {}, {}) is not its last stored turn (turn {}, {})",
                        world.current_turn, world.head_hash, last.record.turn, last.hash
                    ),
                    &mut report,
                ),
                None => broken(0, "the world has no stored turn 0".into(), &mut report),
            }
        }
        if report.ok {
            for row in rows.iter().filter(|r| r.anchor_id.is_some()) {
                match self.check_anchor(row, caller).await {
                    Ok(()) => report.anchors_checked += 1,
                    Err(problem) => {
                        broken(row.turn, problem, &mut report);
                        break;
                    }
                }
            }
        }
        Ok(report)
    }

    pub async fn get_attempt(&self, attempt_id: &str) -> Result<AttemptRecord, WorldError> {
        self.store
            .get_attempt(attempt_id)
            .await?
            .ok_or_else(|| WorldError::NotFound(format!("attempt {attempt_id:?} does not exist")))
    }

    pub async fn list_attempts(
        &self,
        slug: &str,
        page: Page,
    ) -> Result<Vec<AttemptRecord>, WorldError> {
        self.world_row(slug).await?;
        Ok(self
            .store
            .list_attempts(slug, page.offset, page.limit)
            .await?)
    }

    pub async fn list_invocations(
        &self,
        filter: &InvocationFilter,
        page: Page,
    ) -> Result<Vec<SourceInvocation>, WorldError> {
        Ok(self
            .store
            .list_invocations(filter, page.offset, page.limit)
            .await?)
    }

    pub async fn get_invocation(&self, id: &str) -> Result<SourceInvocation, WorldError> {
        self.store
            .get_invocation(id)
            .await?
            .ok_or_else(|| WorldError::NotFound(format!("source invocation {id:?} does not exist")))
    }

    pub async fn get_llm_call(&self, id: &str) -> Result<LlmCall, WorldError> {
        self.store
            .get_llm_call(id)
            .await?
            .ok_or_else(|| WorldError::NotFound(format!("LLM call {id:?} does not exist")))
    }

    pub async fn list_llm_calls(
        &self,
        world_slug: Option<&str>,
        attempt_id: Option<&str>,
        page: Page,
    ) -> Result<Vec<LlmCall>, WorldError> {
        Ok(self
            .store
            .list_llm_calls(world_slug, attempt_id, page.offset, page.limit)
            .await?)
    }
}

//! One attempted turn: patches accepted one by one into a working copy of the world (D10,
//! D11), each with its `patch_seq` and honest per-patch transitions (D12); the turn diff;
//! and the committed turn record, content-addressed and chained to the previous turn so a
//! world's history is tamper-evident.
//!
//! Nothing here is canonical until the caller stores the committed record: dropping a
//! [`WorkingTurn`] is how a failed attempt leaves the world at T(N-1).

use std::collections::{BTreeMap, BTreeSet};

use noema_core::jcs::JcsError;
use serde::{Deserialize, Serialize};

use super::hash::ContentHash;
use super::ids::{EntityId, HumanId};
use super::patch::{WorldEffect, WorldPatch, append_memory};
use super::problem::Problem;
use super::scenario::EntityKind;
use super::world::{EntityState, EnvironmentState, WorldState};

/// Which field of which thing an effect changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectField {
    State,
    Memory,
    Content,
}

/// One effect as applied: the value immediately before this effect and after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectTransition {
    /// Index in the patch's `effects`.
    pub effect_index: usize,
    pub op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<EntityId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_label: Option<HumanId>,
    pub field: EffectField,
    pub before: String,
    pub after: String,
}

/// A value before and after something (a patch, or the whole turn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change<T> {
    pub before: T,
    pub after: T,
}

/// An accepted patch. `touched_*` hold each touched thing immediately before this patch was
/// applied to the working world and right after it — not the turn-start state (D12).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppliedPatch {
    pub patch_seq: u32,
    pub subject_entity_id: EntityId,
    pub patch: WorldPatch,
    pub effects: Vec<EffectTransition>,
    pub touched_entities: BTreeMap<EntityId, Change<EntityState>>,
    pub touched_environments: BTreeMap<HumanId, Change<EnvironmentState>>,
}

/// The working world of an attempted turn.
#[derive(Debug, Clone)]
pub struct WorkingTurn {
    attempted_turn: u64,
    start: WorldState,
    working: WorldState,
    patches: Vec<AppliedPatch>,
}

impl WorkingTurn {
    /// Starts attempted turn `attempted_turn` from the committed state T(N-1).
    pub fn begin(previous: WorldState, attempted_turn: u64) -> WorkingTurn {
        WorkingTurn {
            attempted_turn,
            working: previous.clone(),
            start: previous,
            patches: Vec::new(),
        }
    }

    pub fn attempted_turn(&self) -> u64 {
        self.attempted_turn
    }

    /// The live working world: T(N-1) plus every patch accepted so far.
    pub fn world(&self) -> &WorldState {
        &self.working
    }

    pub fn turn_start(&self) -> &WorldState {
        &self.start
    }

    pub fn patches(&self) -> &[AppliedPatch] {
        &self.patches
    }

    /// Validates `patch` against the live working world and, if every effect is valid,
    /// applies all of them; otherwise nothing is applied and the problems (model-content
    /// failures, for the subject's retry lane) come back.
    pub fn accept(
        &mut self,
        subject: &EntityId,
        patch: WorldPatch,
    ) -> Result<&AppliedPatch, Vec<Problem>> {
        match self.working.entity(subject.as_str()) {
            Some(entity) if entity.kind == EntityKind::Agent => {}
            _ => {
                return Err(vec![Problem::new(
                    "",
                    format!(
                        "{:?} is not an agent of this world, so it cannot be a workflow subject",
                        subject.as_str()
                    ),
                )]);
            }
        }
        let problems = patch.problems_against(&self.working);
        if !problems.is_empty() {
            return Err(problems);
        }
        // What the effects touch, as it was: only those, not the whole world, per patch.
        let mut before = WorldState {
            environments: BTreeMap::new(),
            entities: BTreeMap::new(),
        };
        for effect in &patch.effects {
            match effect {
                WorldEffect::SetEntityState { entity_id, .. }
                | WorldEffect::AppendEntityMemory { entity_id, .. } => {
                    if let Some((id, entity)) =
                        self.working.entities.get_key_value(entity_id.as_str())
                    {
                        before.entities.insert(id.clone(), entity.clone());
                    }
                }
                WorldEffect::SetEnvironmentContent {
                    environment_label, ..
                } => {
                    if let Some((label, environment)) = self
                        .working
                        .environments
                        .get_key_value(environment_label.as_str())
                    {
                        before
                            .environments
                            .insert(label.clone(), environment.clone());
                    }
                }
            }
        }
        let effects = patch
            .effects
            .iter()
            .enumerate()
            .map(|(i, effect)| apply_effect(&mut self.working, i, effect))
            .collect::<Vec<_>>();
        let touched: BTreeSet<&EntityId> = effects
            .iter()
            .filter_map(|e| e.entity_id.as_ref())
            .collect();
        let touched_entities = touched
            .into_iter()
            .filter_map(|id| {
                Some((
                    id.clone(),
                    Change {
                        before: before.entities.get(id)?.clone(),
                        after: self.working.entities.get(id)?.clone(),
                    },
                ))
            })
            .collect();
        let touched: BTreeSet<&HumanId> = effects
            .iter()
            .filter_map(|e| e.environment_label.as_ref())
            .collect();
        let touched_environments = touched
            .into_iter()
            .filter_map(|label| {
                Some((
                    label.clone(),
                    Change {
                        before: before.environments.get(label)?.clone(),
                        after: self.working.environments.get(label)?.clone(),
                    },
                ))
            })
            .collect();
        let patch_seq = u32::try_from(self.patches.len() + 1).unwrap_or(u32::MAX);
        self.patches.push(AppliedPatch {
            patch_seq,
            subject_entity_id: subject.clone(),
            patch,
            effects,
            touched_entities,
            touched_environments,
        });
        self.patches
            .last()
            .ok_or_else(|| vec![Problem::new("", "the accepted patch vanished")])
    }

    /// The turn diff: every patch in `patch_seq` order, and the whole-turn change
    /// T(N-1) → working world of every entity and environment that changed.
    pub fn diff(&self) -> TurnDiff {
        TurnDiff::between(
            self.attempted_turn,
            &self.start,
            &self.working,
            &self.patches,
        )
    }

    /// The committed state and the accepted patches, for the turn record.
    pub fn finish(self) -> (WorldState, Vec<AppliedPatch>) {
        (self.working, self.patches)
    }
}

/// Applies one already validated effect. Validation happened against the same world, so
/// the lookups succeed; were they to fail, the transition records an unchanged value.
fn apply_effect(world: &mut WorldState, index: usize, effect: &WorldEffect) -> EffectTransition {
    let transition =
        |entity_id: Option<&str>, label: Option<&str>, field, before: String, after: String| {
            EffectTransition {
                effect_index: index,
                op: effect.op().to_owned(),
                entity_id: entity_id.and_then(|id| EntityId::parse(id).ok()),
                environment_label: label.and_then(|l| HumanId::parse(l).ok()),
                field,
                before,
                after,
            }
        };
    match effect {
        WorldEffect::SetEntityState { entity_id, state } => {
            let slot = world
                .entities
                .get_mut(entity_id.as_str())
                .map(|e| &mut e.state);
            let before = slot.as_ref().map(|s| s.to_string()).unwrap_or_default();
            let after = match slot {
                Some(slot) => {
                    slot.clone_from(state);
                    state.clone()
                }
                None => before.clone(),
            };
            transition(Some(entity_id), None, EffectField::State, before, after)
        }
        WorldEffect::AppendEntityMemory { entity_id, content } => {
            let slot = world
                .entities
                .get_mut(entity_id.as_str())
                .and_then(|e| e.memory.as_mut());
            let before = slot.as_ref().map(|m| m.to_string()).unwrap_or_default();
            let after = match slot {
                Some(slot) => {
                    *slot = append_memory(slot, content);
                    slot.clone()
                }
                None => before.clone(),
            };
            transition(Some(entity_id), None, EffectField::Memory, before, after)
        }
        WorldEffect::SetEnvironmentContent {
            environment_label,
            content,
        } => {
            let slot = world
                .environments
                .get_mut(environment_label.as_str())
                .map(|e| &mut e.content);
            let before = slot.as_ref().map(|c| c.to_string()).unwrap_or_default();
            let after = match slot {
                Some(slot) => {
                    slot.clone_from(content);
                    content.clone()
                }
                None => before.clone(),
            };
            transition(
                None,
                Some(environment_label),
                EffectField::Content,
                before,
                after,
            )
        }
    }
}

/// One patch as a diff shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchDiff {
    pub patch_seq: u32,
    pub subject_entity_id: EntityId,
    pub narration: String,
    pub effects: Vec<EffectTransition>,
}

/// What a turn changed: per patch, and as a whole T(N-1) → T(N).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnDiff {
    pub turn: u64,
    pub patches: Vec<PatchDiff>,
    /// Every entity whose state or memory differs between T(N-1) and T(N).
    pub entities: BTreeMap<EntityId, Change<EntityState>>,
    /// Every environment whose content differs.
    pub environments: BTreeMap<HumanId, Change<EnvironmentState>>,
}

impl TurnDiff {
    pub fn between(
        turn: u64,
        before: &WorldState,
        after: &WorldState,
        patches: &[AppliedPatch],
    ) -> TurnDiff {
        TurnDiff {
            turn,
            patches: patches
                .iter()
                .map(|p| PatchDiff {
                    patch_seq: p.patch_seq,
                    subject_entity_id: p.subject_entity_id.clone(),
                    narration: p.patch.narration.clone(),
                    effects: p.effects.clone(),
                })
                .collect(),
            entities: changed(&before.entities, &after.entities),
            environments: changed(&before.environments, &after.environments),
        }
    }
}

fn changed<K: Ord + Clone, V: PartialEq + Clone>(
    before: &BTreeMap<K, V>,
    after: &BTreeMap<K, V>,
) -> BTreeMap<K, Change<V>> {
    before
        .iter()
        .filter_map(|(key, old)| {
            let new = after.get(key)?;
            (old != new).then(|| {
                (
                    key.clone(),
                    Change {
                        before: old.clone(),
                        after: new.clone(),
                    },
                )
            })
        })
        .collect()
}

/// A committed turn as stored: content-addressed, chained to the previous turn's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRecord {
    pub world_slug: HumanId,
    pub turn: u64,
    /// The hash of turn `turn - 1`'s record; `None` only for turn 0.
    pub previous_turn_hash: Option<ContentHash>,
    /// RFC 3339.
    pub simulation_time: String,
    pub state: WorldState,
    pub patches: Vec<AppliedPatch>,
}

impl TurnRecord {
    /// SHA-256 over the record's JCS bytes.
    pub fn hash(&self) -> Result<ContentHash, JcsError> {
        ContentHash::of_serializable(self)
    }
}

/// A stored turn: its record and the hash stored beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTurn {
    pub record: TurnRecord,
    pub hash: ContentHash,
}

/// The first place a world's stored history does not hold together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    #[error("turn {expected} is missing (found turn {found} in its place)")]
    Gap { expected: u64, found: u64 },
    #[error("turn {turn}'s record does not hash to its stored hash")]
    HashMismatch { turn: u64 },
    #[error("turn {turn} does not name turn {}'s hash as its predecessor", turn.saturating_sub(1))]
    LinkMismatch { turn: u64 },
    #[error("turn {turn}'s state is not turn {}'s state with its patches applied", turn.saturating_sub(1))]
    StateMismatch { turn: u64 },
    #[error("turn {turn} belongs to world {found:?}, not {expected:?}")]
    WrongWorld {
        turn: u64,
        expected: String,
        found: String,
    },
}

/// Checks a world's history from turn 0: consecutive turns, each record hashing to its stored
/// hash, each naming its predecessor's hash, and each state equal to the previous state with
/// the turn's patches replayed onto it.
pub fn verify_chain(turns: &[StoredTurn]) -> Result<(), ChainBreak> {
    let mut previous: Option<&StoredTurn> = None;
    for (expected, stored) in (0u64..).zip(turns) {
        let record = &stored.record;
        if record.turn != expected {
            return Err(ChainBreak::Gap {
                expected,
                found: record.turn,
            });
        }
        if let Some(first) = turns.first()
            && first.record.world_slug != record.world_slug
        {
            return Err(ChainBreak::WrongWorld {
                turn: record.turn,
                expected: first.record.world_slug.to_string(),
                found: record.world_slug.to_string(),
            });
        }
        if record.hash().ok().as_ref() != Some(&stored.hash) {
            return Err(ChainBreak::HashMismatch { turn: record.turn });
        }
        if record.previous_turn_hash.as_ref() != previous.map(|p| &p.hash) {
            return Err(ChainBreak::LinkMismatch { turn: record.turn });
        }
        if let Some(previous) = previous {
            let mut replay = WorkingTurn::begin(previous.record.state.clone(), record.turn);
            for applied in &record.patches {
                if replay
                    .accept(&applied.subject_entity_id, applied.patch.clone())
                    .is_err()
                {
                    return Err(ChainBreak::StateMismatch { turn: record.turn });
                }
            }
            let (state, patches) = replay.finish();
            if state != record.state || patches != record.patches {
                return Err(ChainBreak::StateMismatch { turn: record.turn });
            }
        } else if !record.patches.is_empty() {
            return Err(ChainBreak::StateMismatch { turn: record.turn });
        }
        previous = Some(stored);
    }
    Ok(())
}

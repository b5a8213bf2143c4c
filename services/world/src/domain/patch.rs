//! WorldPatch: the one applyable output (D8). A patch is a narration and effects; only three
//! effects exist. Every effect is validated against the live working world before anything
//! is applied — an unknown entity or environment, memory on a prop, or any other operation is
//! a model-content failure that goes back through the node's retry lane (D13). Ids are
//! compared exactly: nothing is normalised.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::problem::Problem;
use super::scenario::EntityKind;
use super::schema::Builtin;
use super::world::WorldState;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldPatch {
    pub narration: String,
    pub effects: Vec<WorldEffect>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorldEffect {
    SetEntityState {
        entity_id: String,
        state: String,
    },
    AppendEntityMemory {
        entity_id: String,
        content: String,
    },
    SetEnvironmentContent {
        environment_label: String,
        content: String,
    },
}

impl WorldEffect {
    pub fn op(&self) -> &'static str {
        match self {
            WorldEffect::SetEntityState { .. } => "set_entity_state",
            WorldEffect::AppendEntityMemory { .. } => "append_entity_memory",
            WorldEffect::SetEnvironmentContent { .. } => "set_environment_content",
        }
    }
}

impl WorldPatch {
    /// Parses a patch against the built-in WorldPatch contract; problems name the pointer
    /// (`/effects/2/op`). Used for the final output of a node whose final schema is the
    /// WorldPatch schema (assembly guarantees it is).
    pub fn from_json(document: &Value) -> Result<WorldPatch, Vec<Problem>> {
        Builtin::WorldPatch.check(document)?;
        serde_json::from_value(document.clone()).map_err(|e| vec![Problem::new("", e.to_string())])
    }

    /// Every reason this patch cannot apply to `world`, in effect order; empty when it can.
    pub fn problems_against(&self, world: &WorldState) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (i, effect) in self.effects.iter().enumerate() {
            let at = format!("/effects/{i}");
            match effect {
                WorldEffect::SetEntityState { entity_id, .. } => {
                    if world.entity(entity_id).is_none() {
                        problems.push(unknown_entity(&at, entity_id));
                    }
                }
                WorldEffect::AppendEntityMemory { entity_id, .. } => {
                    match world.entity(entity_id) {
                        None => problems.push(unknown_entity(&at, entity_id)),
                        Some(entity) if entity.kind == EntityKind::Prop => {
                            problems.push(Problem::new(
                                format!("{at}/entity_id"),
                                format!("{entity_id:?} is a prop, and a prop has no memory"),
                            ));
                        }
                        Some(_) => {}
                    }
                }
                WorldEffect::SetEnvironmentContent {
                    environment_label, ..
                } => {
                    if world.environment(environment_label).is_none() {
                        problems.push(Problem::new(
                            format!("{at}/environment_label"),
                            format!(
                                "there is no environment {environment_label:?} (environments: {})",
                                world
                                    .environments
                                    .keys()
                                    .map(|l| l.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        problems
    }
}

fn unknown_entity(at: &str, entity_id: &str) -> Problem {
    Problem::new(
        format!("{at}/entity_id"),
        format!("there is no entity {entity_id:?} in this world"),
    )
}

/// Appends `content` to a memory: memories are lines, oldest first.
pub fn append_memory(memory: &str, content: &str) -> String {
    if memory.is_empty() {
        content.to_owned()
    } else {
        format!("{memory}\n{content}")
    }
}

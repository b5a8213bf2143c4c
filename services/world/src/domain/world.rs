//! The world's state at a turn: environments and entities. A committed turn stores one of
//! these; an attempted turn works on a copy (see [`super::turn`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use noema_core::jcs::JcsError;

use super::hash::{ContentHash, HashRef};
use super::ids::{EntityId, HumanId};
use super::scenario::{EntityKind, Scenario};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentState {
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityState {
    pub kind: EntityKind,
    pub environment_label: HumanId,
    pub state: String,
    /// Always present for an agent, never for a prop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cognition_profile_ref: Option<HashRef>,
}

/// Environments by label and entities by id, both in byte order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldState {
    pub environments: BTreeMap<HumanId, EnvironmentState>,
    pub entities: BTreeMap<EntityId, EntityState>,
}

impl WorldState {
    /// Turn 0 of a world created from `scenario`.
    pub fn from_scenario(scenario: &Scenario) -> WorldState {
        WorldState {
            environments: scenario
                .environments
                .iter()
                .map(|e| {
                    (
                        e.label.clone(),
                        EnvironmentState {
                            content: e.content.clone(),
                        },
                    )
                })
                .collect(),
            entities: scenario
                .entities
                .iter()
                .map(|e| {
                    (
                        e.id.clone(),
                        EntityState {
                            kind: e.kind,
                            environment_label: e.environment_label.clone(),
                            state: e.state.clone(),
                            memory: match e.kind {
                                EntityKind::Agent => Some(e.memory.clone().unwrap_or_default()),
                                EntityKind::Prop => None,
                            },
                            cognition_profile_ref: e.cognition_profile_ref.clone(),
                        },
                    )
                })
                .collect(),
        }
    }

    /// The workflow subjects of a turn: every agent, in entity-id byte order.
    pub fn subjects(&self) -> impl Iterator<Item = (&EntityId, &EntityState)> {
        self.entities
            .iter()
            .filter(|(_, entity)| entity.kind == EntityKind::Agent)
    }

    pub fn entity(&self, id: &str) -> Option<&EntityState> {
        self.entities.get(id)
    }

    pub fn environment(&self, label: &str) -> Option<&EnvironmentState> {
        self.environments.get(label)
    }

    /// `/subject` of a template context: the subject's id, kind, environment, state and
    /// memory.
    pub fn subject_facts(&self, id: &str) -> Option<Value> {
        let (id, entity) = self.entities.get_key_value(id)?;
        let mut facts = json!({
            "entity_id": id.as_str(),
            "kind": entity.kind.as_str(),
            "environment_label": entity.environment_label.as_str(),
            "state": entity.state,
        });
        if let (Some(memory), Some(map)) = (&entity.memory, facts.as_object_mut()) {
            map.insert("memory".into(), Value::from(memory.as_str()));
        }
        Some(facts)
    }

    /// The world as a subject is shown it: every environment's content and every entity's
    /// kind, environment and state. Memories are private and not projected.
    pub fn projection(&self) -> Value {
        json!({
            "environments": self.environments.iter().map(|(label, e)| {
                (label.as_str().to_owned(), json!({"content": e.content}))
            }).collect::<serde_json::Map<_, _>>(),
            "entities": self.entities.iter().map(|(id, e)| {
                (id.as_str().to_owned(), json!({
                    "kind": e.kind.as_str(),
                    "environment_label": e.environment_label.as_str(),
                    "state": e.state,
                }))
            }).collect::<serde_json::Map<_, _>>(),
        })
    }

    /// The hash of this state's JSON (what a committed turn records).
    pub fn content_hash(&self) -> Result<ContentHash, JcsError> {
        ContentHash::of_serializable(self)
    }
}

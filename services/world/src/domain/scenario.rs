//! Scenarios and what they hold: environments, entities (agents reference a cognition
//! profile — A1 — props do not), cognition profiles (a workflow reference and nothing else),
//! and the optional simulation clock.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use time::macros::datetime;

use super::hash::HashRef;
use super::ids::{EntityId, HumanId};
use super::problem::Problem;
use super::schema::Builtin;

/// Simulation time at turn 0 when a scenario does not say.
pub const DEFAULT_SIMULATION_START: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// Simulated seconds per turn when a scenario does not say.
pub const DEFAULT_TURN_SECONDS: u64 = 3600;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub label: HumanId,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityKind {
    /// Runs a cognition workflow each turn; has memory.
    Agent,
    /// Only ever changed by patches; has no memory and no workflow.
    Prop,
}

impl EntityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Agent => "agent",
            EntityKind::Prop => "prop",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entity {
    pub id: EntityId,
    pub kind: EntityKind,
    pub environment_label: HumanId,
    pub state: String,
    /// An agent's starting memory (empty when absent); a prop has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cognition_profile_ref: Option<HashRef>,
}

/// A cognition profile: a reference to an explicit workflow, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CognitionProfile {
    pub workflow_ref: HashRef,
}

impl CognitionProfile {
    pub fn from_json(document: &Value) -> Result<CognitionProfile, Vec<Problem>> {
        Builtin::CognitionProfile.check(document)?;
        serde_json::from_value(document.clone()).map_err(|e| vec![Problem::new("", e.to_string())])
    }
}

/// The simulation clock as written; see [`Scenario::clock`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Simulation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub label: HumanId,
    pub environments: Vec<Environment>,
    pub entities: Vec<Entity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulation: Option<Simulation>,
}

/// The simulation clock with its defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimulationClock {
    pub start: OffsetDateTime,
    pub turn_seconds: u64,
}

impl Default for SimulationClock {
    fn default() -> Self {
        SimulationClock {
            start: DEFAULT_SIMULATION_START,
            turn_seconds: DEFAULT_TURN_SECONDS,
        }
    }
}

impl SimulationClock {
    /// The simulation time of attempted turn `n` (n ≥ 1): turn 1 happens at `start`, each
    /// later turn `turn_seconds` after the one before. Turn 0 (the scenario's initial state)
    /// is also at `start`.
    pub fn time_of_turn(&self, attempted_turn: u64) -> OffsetDateTime {
        let steps = attempted_turn.saturating_sub(1);
        let seconds = i64::try_from(steps.saturating_mul(self.turn_seconds)).unwrap_or(i64::MAX);
        self.start
            .checked_add(time::Duration::seconds(seconds))
            .unwrap_or(self.start)
    }
}

impl Scenario {
    /// Parses and checks a scenario document on its own (references to profiles are checked
    /// by assembly): unique labels and ids, entities in existing environments, agents with a
    /// cognition profile, props without a profile or memory, at least one agent.
    pub fn from_json(document: &Value) -> Result<Scenario, Vec<Problem>> {
        Builtin::Scenario.check(document)?;
        let scenario: Scenario = serde_json::from_value(document.clone())
            .map_err(|e| vec![Problem::new("", e.to_string())])?;
        let mut problems = scenario.structure_problems();
        if problems.is_empty() {
            Ok(scenario)
        } else {
            problems.sort();
            Err(problems)
        }
    }

    /// The clock, defaults applied (a malformed start was refused by [`Scenario::from_json`]).
    pub fn clock(&self) -> SimulationClock {
        let defaults = SimulationClock::default();
        let Some(simulation) = &self.simulation else {
            return defaults;
        };
        SimulationClock {
            start: simulation
                .start
                .as_deref()
                .and_then(noema_core::time::parse_rfc3339)
                .unwrap_or(defaults.start),
            turn_seconds: simulation.turn_seconds.unwrap_or(defaults.turn_seconds),
        }
    }

    fn structure_problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut environments: HashMap<&str, usize> = HashMap::new();
        for (i, environment) in self.environments.iter().enumerate() {
            if let Some(first) = environments.insert(environment.label.as_str(), i) {
                environments.insert(environment.label.as_str(), first);
                problems.push(Problem::new(
                    format!("/environments/{i}/label"),
                    format!(
                        "duplicate environment label {:?} (also /environments/{first}/label)",
                        environment.label.as_str()
                    ),
                ));
            }
        }
        let mut entities: HashMap<&str, usize> = HashMap::new();
        for (i, entity) in self.entities.iter().enumerate() {
            let at = format!("/entities/{i}");
            if let Some(first) = entities.insert(entity.id.as_str(), i) {
                entities.insert(entity.id.as_str(), first);
                problems.push(Problem::new(
                    format!("{at}/id"),
                    format!(
                        "duplicate entity id {:?} (also /entities/{first}/id)",
                        entity.id.as_str()
                    ),
                ));
            }
            if !environments.contains_key(entity.environment_label.as_str()) {
                problems.push(Problem::new(
                    format!("{at}/environment_label"),
                    format!(
                        "environment {:?} is not in this scenario",
                        entity.environment_label.as_str()
                    ),
                ));
            }
            match entity.kind {
                EntityKind::Agent if entity.cognition_profile_ref.is_none() => {
                    problems.push(Problem::new(
                        format!("{at}/cognition_profile_ref"),
                        "an agent must reference a cognition profile: there is no default workflow",
                    ));
                }
                EntityKind::Prop if entity.cognition_profile_ref.is_some() => {
                    problems.push(Problem::new(
                        format!("{at}/cognition_profile_ref"),
                        "a prop has no cognition: only agents reference a cognition profile",
                    ));
                }
                _ => {}
            }
            if entity.kind == EntityKind::Prop && entity.memory.is_some() {
                problems.push(Problem::new(format!("{at}/memory"), "a prop has no memory"));
            }
        }
        if !self.entities.iter().any(|e| e.kind == EntityKind::Agent) {
            problems.push(Problem::new(
                "/entities",
                "a scenario needs at least one agent: without a workflow subject nothing can run",
            ));
        }
        problems
    }
}

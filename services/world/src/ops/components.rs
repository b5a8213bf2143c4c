//! Components and scenarios: puts (checked, content-addressed, idempotent), reads, uses,
//! assembly and forks.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{Caller, Page, World, now};
use crate::domain::assembly::{AssembledScenario, ComponentLookup, LookupError, assemble_scenario};
use crate::domain::component::{
    ComponentKind, WORLD_PATCH_SCHEMA_NAME, builtin_components, check_component,
};
use crate::domain::hash::{ContentHash, HashRef};
use crate::domain::ids::{EntityId, HumanId};
use crate::domain::problem::Problem;
use crate::domain::scenario::{CognitionProfile, Entity, Environment, Scenario, Simulation};
use crate::domain::source::ResponseSourceDefinition;
use crate::domain::turn::TurnRecord;
use crate::domain::workflow::template::format_time;
use crate::domain::workflow::{CognitionWorkflow, WorkflowNode};
use crate::error::WorldError;
use crate::store::WorldStore;
use crate::store::components::{
    ComponentRef, ComponentUse, Lineage, NewComponent, StoredComponent,
};

/// Assembly reads stored components through the store.
struct StoreLookup<'a>(&'a WorldStore);

#[async_trait]
impl ComponentLookup for StoreLookup<'_> {
    async fn component(
        &self,
        kind: ComponentKind,
        hash: &ContentHash,
    ) -> Result<Option<Value>, LookupError> {
        let stored = self
            .0
            .get_component(kind, hash)
            .await
            .map_err(|e| LookupError(e.to_string()))?;
        stored
            .map(|c| serde_json::from_str(&c.content).map_err(|e| LookupError(e.to_string())))
            .transpose()
    }
}

/// The JCS text of a document.
pub(crate) fn jcs_text(document: &Value) -> Result<String, WorldError> {
    noema_core::jcs::canonical_string(document).map_err(|e| {
        WorldError::InvalidArgument(format!("the document is not canonicalizable JSON: {e}"))
    })
}

fn reference(kind: ComponentKind, hash: &HashRef, pointer: String) -> ComponentRef {
    ComponentRef {
        kind,
        hash: hash.hash.clone(),
        pointer,
    }
}

/// Every component a workflow references, with where.
fn workflow_references(workflow: &CognitionWorkflow) -> Vec<ComponentRef> {
    let mut refs = Vec::new();
    for (i, binding) in workflow.ambient_sources.iter().enumerate() {
        refs.push(reference(
            ComponentKind::ResponseSource,
            &binding.source_ref,
            format!("/ambient_sources/{i}/source_ref/hash"),
        ));
        if let Some(schema) = &binding.result_schema_ref {
            refs.push(reference(
                ComponentKind::JsonSchema,
                schema,
                format!("/ambient_sources/{i}/result_schema_ref/hash"),
            ));
        }
    }
    for (i, node) in workflow.nodes.iter().enumerate() {
        let WorkflowNode::LlmToolLoop(node) = node;
        refs.push(reference(
            ComponentKind::ResponseSource,
            &node.llm_source_ref,
            format!("/nodes/{i}/llm_source_ref/hash"),
        ));
        refs.push(reference(
            ComponentKind::JsonSchema,
            &node.final_schema_ref,
            format!("/nodes/{i}/final_schema_ref/hash"),
        ));
        for (k, tool) in node.available_tools.iter().enumerate() {
            let at = format!("/nodes/{i}/available_tools/{k}");
            refs.push(reference(
                ComponentKind::ResponseSource,
                &tool.source_ref,
                format!("{at}/source_ref/hash"),
            ));
            refs.push(reference(
                ComponentKind::JsonSchema,
                &tool.arguments_schema_ref,
                format!("{at}/arguments_schema_ref/hash"),
            ));
            if let Some(schema) = &tool.result_schema_ref {
                refs.push(reference(
                    ComponentKind::JsonSchema,
                    schema,
                    format!("{at}/result_schema_ref/hash"),
                ));
            }
        }
    }
    refs
}

fn scenario_references(scenario: &Scenario) -> Vec<ComponentRef> {
    scenario
        .entities
        .iter()
        .enumerate()
        .filter_map(|(i, entity)| {
            Some(reference(
                ComponentKind::CognitionProfile,
                entity.cognition_profile_ref.as_ref()?,
                format!("/entities/{i}/cognition_profile_ref/hash"),
            ))
        })
        .collect()
}

fn invalid(kind: ComponentKind, problems: Vec<Problem>) -> WorldError {
    WorldError::InvalidComponent { kind, problems }
}

impl World {
    /// Stores the built-in components (the WorldPatch schema); run at start-up.
    pub async fn ensure_builtins(&self) -> Result<(), WorldError> {
        let builtins =
            builtin_components().map_err(|p| WorldError::Internal(format!("built-ins: {p}")))?;
        for (kind, hash, document) in builtins {
            if self
                .store
                .builtin_schema(WORLD_PATCH_SCHEMA_NAME)
                .await?
                .is_some()
            {
                continue;
            }
            let component = NewComponent {
                kind,
                hash,
                content: jcs_text(&document)?,
                label: None,
                source_kind: None,
                workflow_hash: None,
                builtin_name: Some(WORLD_PATCH_SCHEMA_NAME.to_owned()),
                references: Vec::new(),
            };
            self.store
                .put_component(&component, None, "system:world", now())
                .await?;
        }
        Ok(())
    }

    /// Checks and stores a component that is not a scenario; `(hash, created)`.
    pub async fn put_component(
        &self,
        kind: ComponentKind,
        document: &Value,
        caller: &Caller,
    ) -> Result<(ContentHash, bool), WorldError> {
        if kind == ComponentKind::Scenario {
            return Err(WorldError::InvalidArgument(
                "scenarios are assembled, not put: use AssembleScenario (POST /scenarios)".into(),
            ));
        }
        let hash = check_component(kind, document, self.sources.kinds())
            .map_err(|problems| invalid(kind, problems))?;
        let mut component = NewComponent {
            kind,
            hash: hash.clone(),
            content: jcs_text(document)?,
            label: None,
            source_kind: None,
            workflow_hash: None,
            builtin_name: None,
            references: Vec::new(),
        };
        match kind {
            ComponentKind::ResponseSource => {
                let definition = ResponseSourceDefinition::from_json(document)
                    .map_err(|problems| invalid(kind, problems))?;
                component.label = Some(definition.label.to_string());
                component.source_kind = Some(definition.kind().to_owned());
            }
            ComponentKind::CognitionWorkflow => {
                let workflow = CognitionWorkflow::from_json(document)
                    .map_err(|problems| invalid(kind, problems))?;
                component.references = workflow_references(&workflow);
            }
            ComponentKind::CognitionProfile => {
                let profile = CognitionProfile::from_json(document)
                    .map_err(|problems| invalid(kind, problems))?;
                let workflow = &profile.workflow_ref.hash;
                if self
                    .store
                    .get_component(ComponentKind::CognitionWorkflow, workflow)
                    .await?
                    .is_none()
                {
                    return Err(invalid(
                        kind,
                        vec![Problem::new(
                            "/workflow_ref/hash",
                            format!("cognition_workflow {workflow} does not exist"),
                        )],
                    ));
                }
                component.workflow_hash = Some(workflow.clone());
                component.references = vec![reference(
                    ComponentKind::CognitionWorkflow,
                    &profile.workflow_ref,
                    "/workflow_ref/hash".into(),
                )];
            }
            ComponentKind::JsonSchema | ComponentKind::Scenario => {}
        }
        let created = self
            .store
            .put_component(&component, None, &caller.actor, now())
            .await?;
        Ok((hash, created))
    }

    pub async fn get_component(
        &self,
        kind: ComponentKind,
        hash: &ContentHash,
    ) -> Result<StoredComponent, WorldError> {
        self.store
            .get_component(kind, hash)
            .await?
            .ok_or_else(|| WorldError::NotFound(format!("{kind} {hash} does not exist")))
    }

    /// A built-in component by name (`world-patch`).
    pub async fn builtin_component(&self, name: &str) -> Result<StoredComponent, WorldError> {
        self.store
            .builtin_schema(name)
            .await?
            .ok_or_else(|| WorldError::NotFound(format!("there is no built-in component {name:?}")))
    }

    pub async fn list_components(
        &self,
        kind: ComponentKind,
        page: Page,
    ) -> Result<Vec<StoredComponent>, WorldError> {
        Ok(self
            .store
            .list_components(kind, page.offset, page.limit)
            .await?)
    }

    pub async fn component_uses(
        &self,
        kind: ComponentKind,
        hash: &ContentHash,
    ) -> Result<Vec<ComponentUse>, WorldError> {
        self.get_component(kind, hash).await?;
        Ok(self.store.component_uses(kind, hash).await?)
    }

    /// Assembles `document` against the stored components and stores it; `(hash, created)`.
    pub async fn assemble_scenario(
        &self,
        document: &Value,
        caller: &Caller,
    ) -> Result<(ContentHash, bool), WorldError> {
        self.store_scenario(document, None, caller).await
    }

    async fn store_scenario(
        &self,
        document: &Value,
        lineage: Option<(&ContentHash, Option<(&str, u64)>)>,
        caller: &Caller,
    ) -> Result<(ContentHash, bool), WorldError> {
        let assembled =
            assemble_scenario(document, &StoreLookup(&self.store), self.sources.kinds()).await?;
        let hash = assembled.scenario_hash.clone();
        let component = NewComponent {
            kind: ComponentKind::Scenario,
            hash: hash.clone(),
            content: jcs_text(document)?,
            label: Some(assembled.scenario.label.to_string()),
            source_kind: None,
            workflow_hash: None,
            builtin_name: None,
            references: scenario_references(&assembled.scenario),
        };
        let lineage = lineage.map(|(parent, from)| Lineage {
            lineage_id: uuid::Uuid::new_v4().to_string(),
            scenario_hash: hash.clone(),
            parent_hash: parent.clone(),
            world_slug: from.map(|(slug, _)| slug.to_owned()),
            turn: from.map(|(_, turn)| turn),
        });
        let created = self
            .store
            .put_component(&component, lineage.as_ref(), &caller.actor, now())
            .await?;
        self.assemblies.put(Arc::new(assembled));
        Ok((hash, created))
    }

    /// The stored scenario `hash`, assembled (from the cache when it was assembled before).
    pub(crate) async fn assembled(
        &self,
        hash: &ContentHash,
    ) -> Result<Arc<AssembledScenario>, WorldError> {
        if let Some(assembled) = self.assemblies.get(hash) {
            return Ok(assembled);
        }
        let stored = self.get_component(ComponentKind::Scenario, hash).await?;
        let document: Value = serde_json::from_str(&stored.content)
            .map_err(|e| WorldError::Internal(format!("stored scenario {hash}: {e}")))?;
        let assembled = Arc::new(
            assemble_scenario(&document, &StoreLookup(&self.store), self.sources.kinds()).await?,
        );
        self.assemblies.put(Arc::clone(&assembled));
        Ok(assembled)
    }

    /// A scenario forked from `parent`: with `from_world`, the world's state at that turn
    /// (it must have been created from `parent`); otherwise the parent's own entities.
    pub async fn fork_scenario(
        &self,
        parent: &ContentHash,
        label: &str,
        from_world: Option<(&str, u64)>,
        caller: &Caller,
    ) -> Result<(ContentHash, bool, Lineage), WorldError> {
        let label = HumanId::parse(label)
            .map_err(|why| WorldError::InvalidArgument(format!("label: {why}")))?;
        let parent_assembled = self.assembled(parent).await?;
        let mut scenario = parent_assembled.scenario.clone();
        scenario.label = label;
        if let Some((slug, turn)) = from_world {
            let world =
                self.store.get_world(slug).await?.ok_or_else(|| {
                    WorldError::NotFound(format!("world {slug:?} does not exist"))
                })?;
            if &world.scenario_hash != parent {
                return Err(WorldError::InvalidArgument(format!(
                    "world {slug:?} was created from scenario {}, not {parent}",
                    world.scenario_hash
                )));
            }
            let row = self.store.turn(slug, turn).await?.ok_or_else(|| {
                WorldError::NotFound(format!("world {slug:?} has no committed turn {turn}"))
            })?;
            let record: TurnRecord = serde_json::from_str(&row.record)
                .map_err(|e| WorldError::Internal(format!("stored turn {slug}/{turn}: {e}")))?;
            scenario.environments = record
                .state
                .environments
                .iter()
                .map(|(label, env)| Environment {
                    label: label.clone(),
                    content: env.content.clone(),
                })
                .collect();
            scenario.entities = record
                .state
                .entities
                .iter()
                .map(|(id, entity)| Entity {
                    id: EntityId::clone(id),
                    kind: entity.kind,
                    environment_label: entity.environment_label.clone(),
                    state: entity.state.clone(),
                    memory: entity.memory.clone(),
                    cognition_profile_ref: entity.cognition_profile_ref.clone(),
                })
                .collect();
            let clock = parent_assembled.scenario.clock();
            scenario.simulation = Some(Simulation {
                start: Some(format_time(clock.time_of_turn(turn.saturating_add(1)))),
                turn_seconds: Some(clock.turn_seconds),
            });
        }
        let document = serde_json::to_value(&scenario)
            .map_err(|e| WorldError::Internal(format!("forked scenario: {e}")))?;
        let (hash, created) = self
            .store_scenario(&document, Some((parent, from_world)), caller)
            .await?;
        let lineage = self
            .store
            .lineage(&hash)
            .await?
            .into_iter()
            .rfind(|l| {
                &l.parent_hash == parent
                    && l.world_slug.as_deref() == from_world.map(|(slug, _)| slug)
                    && l.turn == from_world.map(|(_, turn)| turn)
            })
            .ok_or_else(|| WorldError::Internal("the fork's lineage was not recorded".into()))?;
        Ok((hash, created, lineage))
    }

    pub async fn scenario_lineage(&self, hash: &ContentHash) -> Result<Vec<Lineage>, WorldError> {
        Ok(self.store.lineage(hash).await?)
    }
}

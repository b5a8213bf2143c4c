//! Scenario assembly: resolve every reference of a scenario and run the seed's "Scenario
//! store / assembly validation" list, rejecting a scenario whose workflows could not execute
//! — with every problem named by component and JSON Pointer. Assembly reads components
//! through a [`ComponentLookup`] and calls no source and no LLM.
//!
//! The list, and where it is checked:
//! - every agent's cognition profile exists and has a workflow hash — here (props have none:
//!   [`Scenario::from_json`]);
//! - the workflow hash resolves, the workflow parses, version 1, a supported execution, unique
//!   node and ambient source ids, every ambient field present, supported run modes, valid
//!   scopes and visibilities, `max_generation_attempts ≥ 1`, `max_tool_calls ≥ 0`, every tool
//!   with name, description, source and arguments schema, unique tool names, `apply.from`
//!   naming a node's final output — [`CognitionWorkflow::from_json`];
//! - scopes and visibilities name entities and environments of this scenario — here;
//! - every source reference resolves to a source of a kind this build runs, in the role the
//!   binding needs (LLM chat for a node, JSON for ambient sources and tools) — here;
//! - every schema reference resolves to a valid JSON Schema, tool arguments schemas describe
//!   objects, and the final schema is the WorldPatch schema or structurally equivalent to it
//!   (annotations aside) — here.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::component::ComponentKind;
use super::hash::{ContentHash, HashRef};
use super::ids::EntityId;
use super::problem::Problem;
use super::scenario::{CognitionProfile, Scenario};
use super::schema::{CompiledSchema, is_world_patch_schema};
use super::source::{ResponseSourceDefinition, SourceKinds, SourceRole};
use super::tool_loop::NodeContract;
use super::workflow::{AmbientScope, AmbientVisibility, CognitionWorkflow, WorkflowNode};
use super::world::{EntityState, WorldState};

/// Where assembly reads stored components (the store implements it).
#[async_trait]
pub trait ComponentLookup: Send + Sync {
    /// The stored document of kind `kind` with hash `hash`, if there is one.
    async fn component(
        &self,
        kind: ComponentKind,
        hash: &ContentHash,
    ) -> Result<Option<Value>, LookupError>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("component lookup failed: {0}")]
pub struct LookupError(pub String);

/// One reason a scenario does not assemble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssemblyProblem {
    /// The component holding the offending value.
    pub component: ComponentKind,
    /// Its hash; `None` for the scenario being assembled.
    pub hash: Option<ContentHash>,
    /// JSON Pointer into that component.
    pub pointer: String,
    pub message: String,
}

impl AssemblyProblem {
    /// `scenario/entities/0/cognition_profile_ref` or
    /// `cognition_workflow:<hash>/nodes/0/max_tool_calls`.
    pub fn path(&self) -> String {
        match &self.hash {
            None => format!("{}{}", self.component, self.pointer),
            Some(hash) => format!("{}:{hash}{}", self.component, self.pointer),
        }
    }
}

impl fmt::Display for AssemblyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.hash {
            None => write!(f, "{}", self.component)?,
            Some(hash) => write!(f, "{} {}", self.component, hash.short())?,
        }
        let pointer = if self.pointer.is_empty() {
            " (document)"
        } else {
            &self.pointer
        };
        write!(f, "{pointer}: {}", self.message)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    #[error("the scenario does not assemble: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Rejected(Vec<AssemblyProblem>),
    #[error(transparent)]
    Lookup(#[from] LookupError),
}

/// A scenario with every component it needs, resolved and checked.
#[derive(Debug, Clone)]
pub struct AssembledScenario {
    pub scenario_hash: ContentHash,
    pub scenario: Scenario,
    pub profiles: BTreeMap<ContentHash, CognitionProfile>,
    pub workflows: BTreeMap<ContentHash, CognitionWorkflow>,
    pub sources: BTreeMap<ContentHash, ResponseSourceDefinition>,
    pub schemas: BTreeMap<ContentHash, Arc<CompiledSchema>>,
}

impl AssembledScenario {
    /// Turn 0.
    pub fn initial_world(&self) -> WorldState {
        WorldState::from_scenario(&self.scenario)
    }

    /// An agent's workflow, through its cognition profile.
    pub fn workflow_of(&self, entity: &EntityState) -> Option<(&ContentHash, &CognitionWorkflow)> {
        let profile = self
            .profiles
            .get(&entity.cognition_profile_ref.as_ref()?.hash)?;
        self.workflows.get_key_value(&profile.workflow_ref.hash)
    }

    /// The compiled contracts of a workflow's applied node.
    pub fn node_contract(&self, workflow_hash: &ContentHash) -> Result<NodeContract, Problem> {
        let node = self
            .workflows
            .get(workflow_hash)
            .and_then(CognitionWorkflow::applied_node)
            .ok_or_else(|| {
                Problem::new(
                    "",
                    format!("workflow {workflow_hash} is not part of the assembly"),
                )
            })?;
        NodeContract::new(node, &self.schemas)
    }
}

/// Assembles `document` (a scenario) against stored components.
pub async fn assemble_scenario(
    document: &Value,
    lookup: &dyn ComponentLookup,
    kinds: &SourceKinds,
) -> Result<AssembledScenario, AssemblyError> {
    let mut assembly = Assembly {
        lookup,
        kinds,
        problems: Vec::new(),
        fetched: HashMap::new(),
        profiles: BTreeMap::new(),
        workflows: BTreeMap::new(),
        sources: BTreeMap::new(),
        schemas: BTreeMap::new(),
    };
    let scenario_hash = ContentHash::of_json(document).map_err(|e| {
        AssemblyError::Rejected(vec![AssemblyProblem {
            component: ComponentKind::Scenario,
            hash: None,
            pointer: String::new(),
            message: e.to_string(),
        }])
    })?;
    let scenario = match Scenario::from_json(document) {
        Ok(scenario) => scenario,
        Err(problems) => {
            return Err(AssemblyError::Rejected(
                problems
                    .into_iter()
                    .map(|p| at(ComponentKind::Scenario, None, p))
                    .collect(),
            ));
        }
    };

    // Profiles and their workflows, in entity order.
    let mut workflow_refs: Vec<ContentHash> = Vec::new();
    for (i, entity) in scenario.entities.iter().enumerate() {
        let Some(reference) = &entity.cognition_profile_ref else {
            continue;
        };
        let from = (
            ComponentKind::Scenario,
            None,
            format!("/entities/{i}/cognition_profile_ref/hash"),
        );
        let Some(profile) = assembly.profile(reference, &from).await? else {
            continue;
        };
        let from = (
            ComponentKind::CognitionProfile,
            Some(reference.hash.clone()),
            "/workflow_ref/hash".to_owned(),
        );
        if assembly
            .workflow(&profile.workflow_ref, &from)
            .await?
            .is_some()
            && !workflow_refs.contains(&profile.workflow_ref.hash)
        {
            workflow_refs.push(profile.workflow_ref.hash.clone());
        }
    }

    for hash in &workflow_refs {
        if let Some(workflow) = assembly.workflows.get(hash).cloned() {
            assembly.check_workflow(hash, &workflow, &scenario).await?;
        }
    }

    if !assembly.problems.is_empty() {
        return Err(AssemblyError::Rejected(assembly.problems));
    }
    Ok(AssembledScenario {
        scenario_hash,
        scenario,
        profiles: assembly.profiles,
        workflows: assembly.workflows,
        sources: assembly.sources,
        schemas: assembly.schemas,
    })
}

/// Where a reference sits: component, hash, pointer.
type From = (ComponentKind, Option<ContentHash>, String);

fn at(component: ComponentKind, hash: Option<ContentHash>, problem: Problem) -> AssemblyProblem {
    AssemblyProblem {
        component,
        hash,
        pointer: problem.pointer,
        message: problem.message,
    }
}

struct Assembly<'a> {
    lookup: &'a dyn ComponentLookup,
    kinds: &'a SourceKinds,
    problems: Vec<AssemblyProblem>,
    fetched: HashMap<(ComponentKind, ContentHash), Option<Value>>,
    profiles: BTreeMap<ContentHash, CognitionProfile>,
    workflows: BTreeMap<ContentHash, CognitionWorkflow>,
    sources: BTreeMap<ContentHash, ResponseSourceDefinition>,
    schemas: BTreeMap<ContentHash, Arc<CompiledSchema>>,
}

impl Assembly<'_> {
    fn problem(&mut self, from: &From, message: String) {
        self.problems.push(AssemblyProblem {
            component: from.0,
            hash: from.1.clone(),
            pointer: from.2.clone(),
            message,
        });
    }

    /// The document of a reference, fetched once; a missing one is reported at `from`.
    async fn fetch(
        &mut self,
        kind: ComponentKind,
        reference: &HashRef,
        from: &From,
    ) -> Result<Option<Value>, LookupError> {
        let key = (kind, reference.hash.clone());
        let first_time = !self.fetched.contains_key(&key);
        if first_time {
            let document = self.lookup.component(kind, &reference.hash).await?;
            self.fetched.insert(key.clone(), document);
        }
        let document = self.fetched.get(&key).cloned().flatten();
        if document.is_none() {
            self.problem(from, format!("{kind} {} does not exist", reference.hash));
        }
        Ok(document)
    }

    /// Problems inside a component are reported once, however many references reach it.
    fn report_inside(&mut self, kind: ComponentKind, hash: &ContentHash, problems: Vec<Problem>) {
        let already = self
            .problems
            .iter()
            .any(|p| p.component == kind && p.hash.as_ref() == Some(hash));
        if !already {
            self.problems.extend(
                problems
                    .into_iter()
                    .map(|p| at(kind, Some(hash.clone()), p)),
            );
        }
    }

    async fn profile(
        &mut self,
        reference: &HashRef,
        from: &From,
    ) -> Result<Option<CognitionProfile>, LookupError> {
        if let Some(profile) = self.profiles.get(&reference.hash) {
            return Ok(Some(profile.clone()));
        }
        let Some(document) = self
            .fetch(ComponentKind::CognitionProfile, reference, from)
            .await?
        else {
            return Ok(None);
        };
        match CognitionProfile::from_json(&document) {
            Ok(profile) => {
                self.profiles
                    .insert(reference.hash.clone(), profile.clone());
                Ok(Some(profile))
            }
            Err(problems) => {
                self.report_inside(ComponentKind::CognitionProfile, &reference.hash, problems);
                Ok(None)
            }
        }
    }

    async fn workflow(
        &mut self,
        reference: &HashRef,
        from: &From,
    ) -> Result<Option<()>, LookupError> {
        if self.workflows.contains_key(&reference.hash) {
            return Ok(Some(()));
        }
        let Some(document) = self
            .fetch(ComponentKind::CognitionWorkflow, reference, from)
            .await?
        else {
            return Ok(None);
        };
        match CognitionWorkflow::from_json(&document) {
            Ok(workflow) => {
                self.workflows.insert(reference.hash.clone(), workflow);
                Ok(Some(()))
            }
            Err(problems) => {
                self.report_inside(ComponentKind::CognitionWorkflow, &reference.hash, problems);
                Ok(None)
            }
        }
    }

    async fn source(
        &mut self,
        reference: &HashRef,
        role: SourceRole,
        from: &From,
    ) -> Result<(), LookupError> {
        if !self.sources.contains_key(&reference.hash) {
            let Some(document) = self
                .fetch(ComponentKind::ResponseSource, reference, from)
                .await?
            else {
                return Ok(());
            };
            let checked = ResponseSourceDefinition::from_json(&document).and_then(|definition| {
                self.kinds.check(&definition)?;
                Ok(definition)
            });
            match checked {
                Ok(definition) => {
                    self.sources.insert(reference.hash.clone(), definition);
                }
                Err(problems) => {
                    self.report_inside(ComponentKind::ResponseSource, &reference.hash, problems);
                    return Ok(());
                }
            }
        }
        let kind = self
            .sources
            .get(&reference.hash)
            .and_then(|d| Some((d.kind().to_owned(), self.kinds.get(d.kind())?.role())));
        if let Some((name, actual)) = kind
            && actual != role
        {
            self.problem(
                from,
                format!(
                    "source {} is of kind {name}, {}; this reference needs {}",
                    reference.hash.short(),
                    actual.describe(),
                    role.describe()
                ),
            );
        }
        Ok(())
    }

    async fn schema(
        &mut self,
        reference: &HashRef,
        from: &From,
    ) -> Result<Option<Arc<CompiledSchema>>, LookupError> {
        if let Some(schema) = self.schemas.get(&reference.hash) {
            return Ok(Some(schema.clone()));
        }
        let Some(document) = self
            .fetch(ComponentKind::JsonSchema, reference, from)
            .await?
        else {
            return Ok(None);
        };
        match CompiledSchema::compile(&document) {
            Ok(schema) => {
                let schema = Arc::new(schema);
                self.schemas.insert(reference.hash.clone(), schema.clone());
                Ok(Some(schema))
            }
            Err(problems) => {
                self.report_inside(ComponentKind::JsonSchema, &reference.hash, problems);
                Ok(None)
            }
        }
    }

    async fn check_workflow(
        &mut self,
        hash: &ContentHash,
        workflow: &CognitionWorkflow,
        scenario: &Scenario,
    ) -> Result<(), LookupError> {
        let here = |pointer: String| {
            (
                ComponentKind::CognitionWorkflow,
                Some(hash.clone()),
                pointer,
            )
        };
        for (i, binding) in workflow.ambient_sources.iter().enumerate() {
            let base = format!("/ambient_sources/{i}");
            self.source(
                &binding.source_ref,
                SourceRole::Json,
                &here(format!("{base}/source_ref/hash")),
            )
            .await?;
            if let Some(reference) = &binding.result_schema_ref {
                self.schema(reference, &here(format!("{base}/result_schema_ref/hash")))
                    .await?;
            }
            let (scope_env, scope_entity) = match &binding.scope {
                AmbientScope::Environment { environment_label } => (Some(environment_label), None),
                AmbientScope::Entity { entity_id } => (None, Some(entity_id)),
                AmbientScope::World | AmbientScope::ActingSubject => (None, None),
            };
            self.check_names(
                scenario,
                &here(format!("{base}/scope")),
                scope_env,
                scope_entity,
            );
            let (seen_env, seen_entity) = match &binding.visible_to {
                AmbientVisibility::Environment { environment_label } => {
                    (Some(environment_label), None)
                }
                AmbientVisibility::Entity { entity_id } => (None, Some(entity_id)),
                AmbientVisibility::AllSubjects | AmbientVisibility::ActingSubject => (None, None),
            };
            self.check_names(
                scenario,
                &here(format!("{base}/visible_to")),
                seen_env,
                seen_entity,
            );
        }
        for (i, node) in workflow.nodes.iter().enumerate() {
            let WorkflowNode::LlmToolLoop(node) = node;
            let base = format!("/nodes/{i}");
            self.source(
                &node.llm_source_ref,
                SourceRole::Chat,
                &here(format!("{base}/llm_source_ref/hash")),
            )
            .await?;
            for (k, tool) in node.available_tools.iter().enumerate() {
                let tool_at = format!("{base}/available_tools/{k}");
                self.source(
                    &tool.source_ref,
                    SourceRole::Json,
                    &here(format!("{tool_at}/source_ref/hash")),
                )
                .await?;
                let from = here(format!("{tool_at}/arguments_schema_ref/hash"));
                if let Some(schema) = self.schema(&tool.arguments_schema_ref, &from).await?
                    && !describes_objects(schema.document())
                {
                    self.problem(
                        &from,
                        "a tool's arguments are a JSON object, but this schema's type excludes objects".to_owned(),
                    );
                }
                if let Some(reference) = &tool.result_schema_ref {
                    self.schema(
                        reference,
                        &here(format!("{tool_at}/result_schema_ref/hash")),
                    )
                    .await?;
                }
            }
            let from = here(format!("{base}/final_schema_ref/hash"));
            if let Some(schema) = self.schema(&node.final_schema_ref, &from).await?
                && !is_world_patch_schema(schema.document())
            {
                self.problem(
                    &from,
                    format!(
                        "the final schema must be the WorldPatch schema ({}) or structurally equivalent to it",
                        super::schema::Builtin::WorldPatch
                            .schema()
                            .map(|s| s.hash().to_string())
                            .unwrap_or_default()
                    ),
                );
            }
        }
        Ok(())
    }

    fn check_names(
        &mut self,
        scenario: &Scenario,
        from: &From,
        environment: Option<&super::ids::HumanId>,
        entity: Option<&EntityId>,
    ) {
        if let Some(label) = environment
            && !scenario.environments.iter().any(|e| &e.label == label)
        {
            let from = (
                from.0,
                from.1.clone(),
                format!("{}/environment_label", from.2),
            );
            self.problem(
                &from,
                format!(
                    "scenario {:?} has no environment {:?}",
                    scenario.label.as_str(),
                    label.as_str()
                ),
            );
        }
        if let Some(id) = entity
            && !scenario.entities.iter().any(|e| &e.id == id)
        {
            let from = (from.0, from.1.clone(), format!("{}/entity_id", from.2));
            self.problem(
                &from,
                format!(
                    "scenario {:?} has no entity {:?}",
                    scenario.label.as_str(),
                    id.as_str()
                ),
            );
        }
    }
}

/// Whether a schema can accept a JSON object: no `type`, or a `type` that includes "object".
fn describes_objects(schema: &Value) -> bool {
    match schema.get("type") {
        None => schema != &Value::Bool(false),
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        Some(_) => false,
    }
}

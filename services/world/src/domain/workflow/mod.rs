//! The cognition workflow: a content-addressed JSON document, explicit scenario data. The
//! kernel never invents one (D1) and fills in no value the author left out.
//!
//! Version 1 has ambient source bindings (D3, D19), one `llm_tool_loop` node that may call
//! model-elected tools (D4–D6) and returns the final WorldPatch (D8), and `apply.from`
//! naming that node's final output.

pub mod check;
pub mod prompt;
pub mod template;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chat::ChatMessage;
use super::hash::HashRef;
use super::ids::{EntityId, HumanId};

pub use check::WORKFLOW_VERSION;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CognitionWorkflow {
    pub version: u32,
    pub execution: ExecutionMode,
    pub ambient_sources: Vec<AmbientSourceBinding>,
    pub nodes: Vec<WorkflowNode>,
    pub apply: WorkflowApply,
}

/// How the subjects of one attempted turn run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// One subject after another, each against the working world its predecessors left.
    PerSubjectOrdered,
    /// Subjects' workflows run concurrently against the turn-start world; their patches are
    /// validated and applied in subject order, a patch that no longer validates going back
    /// through that subject's retry lane.
    PerSubjectConcurrent,
}

/// An ambient context source: invoked because the workflow says so, never because a model
/// chose it (D3). Its result is JSON context injected at `inject_as`; it never writes the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmbientSourceBinding {
    pub id: HumanId,
    pub source_ref: HashRef,
    pub run: AmbientRunMode,
    pub scope: AmbientScope,
    pub visible_to: AmbientVisibility,
    /// JSON sent to the source; `{"$from": "/json/pointer"}` objects are replaced from the
    /// turn context (see [`template`]).
    pub request_template: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_schema_ref: Option<HashRef>,
    /// JSON Pointer under `/ambient/` where the result lands in a subject's context.
    pub inject_as: String,
}

/// When an ambient source runs (D19: no cron, no scheduler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AmbientRunMode {
    /// Once per attempted turn, before any subject runs.
    OncePerTurn,
    /// Before each subject's workflow, for every subject it is visible to.
    BeforeSubjectWorkflow,
}

/// What an ambient source is about. JSON: `"world"`, `"acting_subject"`,
/// `{"environment_label": "park"}` or `{"entity_id": "bob_phone"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "ScopeRepr", into = "ScopeRepr")]
pub enum AmbientScope {
    World,
    Environment { environment_label: HumanId },
    Entity { entity_id: EntityId },
    ActingSubject,
}

/// Which subjects see an ambient result. JSON: `"all_subjects"`, `"acting_subject"`,
/// `{"environment_label": "park"}` or `{"entity_id": "bob"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "VisibilityRepr", into = "VisibilityRepr")]
pub enum AmbientVisibility {
    AllSubjects,
    Environment { environment_label: HumanId },
    Entity { entity_id: EntityId },
    ActingSubject,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkflowNode {
    LlmToolLoop(LlmToolLoopNode),
}

impl WorkflowNode {
    pub fn id(&self) -> &HumanId {
        match self {
            WorkflowNode::LlmToolLoop(node) => &node.id,
        }
    }
}

/// The WorldPatch-producing LLM node: generates, may call one permitted tool per generation,
/// and ends with a final patch. `max_generation_attempts` is its one retry lane (D13).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmToolLoopNode {
    pub id: HumanId,
    pub llm_source_ref: HashRef,
    pub prompt_template: PromptTemplate,
    pub available_tools: Vec<AvailableTool>,
    pub max_generation_attempts: u32,
    pub max_tool_calls: u32,
    pub final_schema_ref: HashRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptTemplate {
    pub messages: Vec<ChatMessage>,
}

/// A model-elected tool: runs only when the model emits a valid call to it (D4, D6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AvailableTool {
    pub name: String,
    pub description: String,
    pub source_ref: HashRef,
    pub arguments_schema_ref: HashRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_schema_ref: Option<HashRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowApply {
    /// `<node id>.final`.
    pub from: String,
}

/// The suffix of `apply.from` naming a node's final output.
pub const FINAL_OUTPUT_SUFFIX: &str = ".final";

impl WorkflowApply {
    /// The node whose final output is applied, if `from` has the `<node>.final` form.
    pub fn node_id(&self) -> Option<&str> {
        self.from.strip_suffix(FINAL_OUTPUT_SUFFIX)
    }
}

impl CognitionWorkflow {
    /// The node `apply.from` names (structure checks guarantee it exists in an accepted
    /// workflow).
    pub fn applied_node(&self) -> Option<&LlmToolLoopNode> {
        let id = self.apply.node_id()?;
        self.nodes.iter().find_map(|node| match node {
            WorkflowNode::LlmToolLoop(n) if n.id.as_str() == id => Some(n),
            WorkflowNode::LlmToolLoop(_) => None,
        })
    }
}

// --- the JSON forms of scope and visibility ---------------------------------------------

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvironmentRef {
    environment_label: HumanId,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntityRef {
    entity_id: EntityId,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ScopeWord {
    World,
    ActingSubject,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum ScopeRepr {
    Word(ScopeWord),
    Environment(EnvironmentRef),
    Entity(EntityRef),
}

impl From<ScopeRepr> for AmbientScope {
    fn from(repr: ScopeRepr) -> Self {
        match repr {
            ScopeRepr::Word(ScopeWord::World) => AmbientScope::World,
            ScopeRepr::Word(ScopeWord::ActingSubject) => AmbientScope::ActingSubject,
            ScopeRepr::Environment(e) => AmbientScope::Environment {
                environment_label: e.environment_label,
            },
            ScopeRepr::Entity(e) => AmbientScope::Entity {
                entity_id: e.entity_id,
            },
        }
    }
}

impl From<AmbientScope> for ScopeRepr {
    fn from(scope: AmbientScope) -> Self {
        match scope {
            AmbientScope::World => ScopeRepr::Word(ScopeWord::World),
            AmbientScope::ActingSubject => ScopeRepr::Word(ScopeWord::ActingSubject),
            AmbientScope::Environment { environment_label } => {
                ScopeRepr::Environment(EnvironmentRef { environment_label })
            }
            AmbientScope::Entity { entity_id } => ScopeRepr::Entity(EntityRef { entity_id }),
        }
    }
}

#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum VisibilityWord {
    AllSubjects,
    ActingSubject,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum VisibilityRepr {
    Word(VisibilityWord),
    Environment(EnvironmentRef),
    Entity(EntityRef),
}

impl From<VisibilityRepr> for AmbientVisibility {
    fn from(repr: VisibilityRepr) -> Self {
        match repr {
            VisibilityRepr::Word(VisibilityWord::AllSubjects) => AmbientVisibility::AllSubjects,
            VisibilityRepr::Word(VisibilityWord::ActingSubject) => AmbientVisibility::ActingSubject,
            VisibilityRepr::Environment(e) => AmbientVisibility::Environment {
                environment_label: e.environment_label,
            },
            VisibilityRepr::Entity(e) => AmbientVisibility::Entity {
                entity_id: e.entity_id,
            },
        }
    }
}

impl From<AmbientVisibility> for VisibilityRepr {
    fn from(visibility: AmbientVisibility) -> Self {
        match visibility {
            AmbientVisibility::AllSubjects => VisibilityRepr::Word(VisibilityWord::AllSubjects),
            AmbientVisibility::ActingSubject => VisibilityRepr::Word(VisibilityWord::ActingSubject),
            AmbientVisibility::Environment { environment_label } => {
                VisibilityRepr::Environment(EnvironmentRef { environment_label })
            }
            AmbientVisibility::Entity { entity_id } => {
                VisibilityRepr::Entity(EntityRef { entity_id })
            }
        }
    }
}

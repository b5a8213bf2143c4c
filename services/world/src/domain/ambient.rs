//! Ambient context at run time (D3, D19): which bindings run in a turn and before which
//! subject, who sees each result, and how results are injected at `inject_as`. Results are
//! context only — nothing here can touch the world.
//!
//! Subjects may use different workflows. A `once_per_turn` binding runs once per turn for
//! each workflow in use that declares it, and its result is visible only to subjects of that
//! workflow that its `visible_to` admits. A `before_subject_workflow` binding runs before each
//! such subject's workflow.

use serde_json::{Map, Value};

use super::hash::ContentHash;
use super::ids::EntityId;
use super::problem::{Problem, pointer_tokens};
use super::workflow::{AmbientRunMode, AmbientSourceBinding, AmbientVisibility, CognitionWorkflow};
use super::world::{EntityState, WorldState};

/// One binding of one workflow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindingKey {
    pub workflow_hash: ContentHash,
    /// Index in the workflow's `ambient_sources`.
    pub binding_index: usize,
}

/// What one subject runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectPlan {
    pub entity_id: EntityId,
    pub workflow_hash: ContentHash,
    /// `before_subject_workflow` bindings visible to this subject, in declaration order.
    pub before_subject: Vec<BindingKey>,
}

/// The order of work in one attempted turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPlan {
    /// Every `once_per_turn` binding, workflows in order of their first subject, bindings in
    /// declaration order.
    pub once_per_turn: Vec<BindingKey>,
    /// Every agent, in entity-id byte order.
    pub subjects: Vec<SubjectPlan>,
}

/// Whether a binding's result is visible to `subject`.
pub fn is_visible(
    binding: &AmbientSourceBinding,
    subject_id: &EntityId,
    subject: &EntityState,
) -> bool {
    match &binding.visible_to {
        AmbientVisibility::AllSubjects | AmbientVisibility::ActingSubject => true,
        AmbientVisibility::Environment { environment_label } => {
            &subject.environment_label == environment_label
        }
        AmbientVisibility::Entity { entity_id } => entity_id == subject_id,
    }
}

/// Plans a turn over `world`. `workflow_of` gives a subject's workflow (through its cognition
/// profile); an agent without one is a broken assembly and is reported, never skipped.
pub fn plan_turn<'a>(
    world: &WorldState,
    workflow_of: impl Fn(&EntityId, &EntityState) -> Option<(&'a ContentHash, &'a CognitionWorkflow)>,
) -> Result<TurnPlan, Problem> {
    let mut once_per_turn = Vec::new();
    let mut seen_workflows: Vec<&ContentHash> = Vec::new();
    let mut subjects = Vec::new();
    for (id, entity) in world.subjects() {
        let (hash, workflow) = workflow_of(id, entity).ok_or_else(|| {
            Problem::new(
                format!("/entities/{}", id.as_str()),
                format!(
                    "agent {:?} has no workflow: it cannot be a workflow subject",
                    id.as_str()
                ),
            )
        })?;
        if !seen_workflows.contains(&hash) {
            seen_workflows.push(hash);
            once_per_turn.extend(
                workflow
                    .ambient_sources
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.run == AmbientRunMode::OncePerTurn)
                    .map(|(binding_index, _)| BindingKey {
                        workflow_hash: hash.clone(),
                        binding_index,
                    }),
            );
        }
        subjects.push(SubjectPlan {
            entity_id: id.clone(),
            workflow_hash: hash.clone(),
            before_subject: workflow
                .ambient_sources
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    b.run == AmbientRunMode::BeforeSubjectWorkflow && is_visible(b, id, entity)
                })
                .map(|(binding_index, _)| BindingKey {
                    workflow_hash: hash.clone(),
                    binding_index,
                })
                .collect(),
        });
    }
    Ok(TurnPlan {
        once_per_turn,
        subjects,
    })
}

/// A binding's accepted result.
#[derive(Debug, Clone, PartialEq)]
pub struct AmbientResult {
    pub key: BindingKey,
    pub value: Value,
}

/// The ambient context one subject sees: the `once_per_turn` results of its workflow that
/// are visible to it, then its own `before_subject_workflow` results, each injected at its
/// binding's `inject_as`. Returns the object at `/ambient` (`{}` when nothing is visible).
pub fn subject_ambient(
    workflow_hash: &ContentHash,
    workflow: &CognitionWorkflow,
    subject_id: &EntityId,
    subject: &EntityState,
    turn_results: &[AmbientResult],
    subject_results: &[AmbientResult],
) -> Result<Value, Problem> {
    let mut root = Value::Object(Map::new());
    let visible = turn_results
        .iter()
        .filter(|r| &r.key.workflow_hash == workflow_hash)
        .filter_map(|r| Some((workflow.ambient_sources.get(r.key.binding_index)?, r)))
        .filter(|(binding, _)| is_visible(binding, subject_id, subject));
    for (binding, result) in visible {
        inject(&mut root, &binding.inject_as, result.value.clone())?;
    }
    for result in subject_results
        .iter()
        .filter(|r| &r.key.workflow_hash == workflow_hash)
    {
        if let Some(binding) = workflow.ambient_sources.get(result.key.binding_index) {
            inject(&mut root, &binding.inject_as, result.value.clone())?;
        }
    }
    Ok(root
        .get_mut("ambient")
        .map(Value::take)
        .unwrap_or_else(|| Value::Object(Map::new())))
}

/// Puts `value` at `pointer` in `root`, creating the objects on the way.
pub fn inject(root: &mut Value, pointer: &str, value: Value) -> Result<(), Problem> {
    let tokens = pointer_tokens(pointer)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Problem::new("", format!("inject_as {pointer:?} is not a JSON Pointer")))?;
    let Some((last, parents)) = tokens.split_last() else {
        return Err(Problem::new("", "inject_as must not be the whole context"));
    };
    let mut at = root;
    for token in parents {
        let Value::Object(map) = at else {
            return Err(Problem::new(
                "",
                format!("inject_as {pointer:?} runs through a value that is not an object"),
            ));
        };
        at = map
            .entry(token.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    match at {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        _ => Err(Problem::new(
            "",
            format!("inject_as {pointer:?} runs through a value that is not an object"),
        )),
    }
}

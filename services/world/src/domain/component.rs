//! The content-addressed component kinds and the checks a put runs before storing one.
//! Components are immutable: the hash is the JCS SHA-256 of the document as given, and a
//! put of an existing hash is a no-op.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hash::ContentHash;
use super::problem::Problem;
use super::scenario::{CognitionProfile, Scenario};
use super::schema::{Builtin, CompiledSchema};
use super::source::{ResponseSourceDefinition, SourceKinds};
use super::workflow::CognitionWorkflow;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentKind {
    JsonSchema,
    ResponseSource,
    CognitionWorkflow,
    CognitionProfile,
    Scenario,
}

impl ComponentKind {
    pub const ALL: [ComponentKind; 5] = [
        ComponentKind::JsonSchema,
        ComponentKind::ResponseSource,
        ComponentKind::CognitionWorkflow,
        ComponentKind::CognitionProfile,
        ComponentKind::Scenario,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::JsonSchema => "json_schema",
            ComponentKind::ResponseSource => "response_source",
            ComponentKind::CognitionWorkflow => "cognition_workflow",
            ComponentKind::CognitionProfile => "cognition_profile",
            ComponentKind::Scenario => "scenario",
        }
    }
}

impl fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The checks of a put: the document is a valid component of its kind on its own. (A
/// scenario's references are resolved by assembly, which a scenario put also runs.) Returns
/// the component's hash.
pub fn check_component(
    kind: ComponentKind,
    document: &Value,
    kinds: &SourceKinds,
) -> Result<ContentHash, Vec<Problem>> {
    match kind {
        ComponentKind::JsonSchema => {
            CompiledSchema::compile(document)?;
        }
        ComponentKind::ResponseSource => {
            let definition = ResponseSourceDefinition::from_json(document)?;
            kinds.check(&definition)?;
        }
        ComponentKind::CognitionWorkflow => {
            CognitionWorkflow::from_json(document)?;
        }
        ComponentKind::CognitionProfile => {
            CognitionProfile::from_json(document)?;
        }
        ComponentKind::Scenario => {
            Scenario::from_json(document)?;
        }
    }
    ContentHash::of_json(document).map_err(|e| vec![Problem::new("", e.to_string())])
}

/// The name under which the WorldPatch schema is served (`GET /json-schemas/world-patch`).
pub const WORLD_PATCH_SCHEMA_NAME: &str = "world-patch";

/// Components every store holds from the start: the WorldPatch schema (a workflow's
/// `final_schema_ref` names its hash).
pub fn builtin_components() -> Result<Vec<(ComponentKind, ContentHash, Value)>, Problem> {
    let world_patch = Builtin::WorldPatch.schema()?;
    Ok(vec![(
        ComponentKind::JsonSchema,
        world_patch.hash().clone(),
        world_patch.document().clone(),
    )])
}

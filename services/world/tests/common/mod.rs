//! Fixtures shared by the world kernel's tests: the seed's examples (verbatim) and the park
//! scenario's components, with placeholders replaced by real hashes, and an in-memory
//! component store for assembly.
#![allow(dead_code)] // each test binary uses its own part
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use async_trait::async_trait;
use noema_world::domain::assembly::{
    AssembledScenario, AssemblyError, ComponentLookup, LookupError, assemble_scenario,
};
use noema_world::domain::component::{ComponentKind, builtin_components};
use noema_world::domain::hash::ContentHash;
use noema_world::domain::source::SourceKinds;
use serde_json::{Value, json};

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The text of `tests/fixtures/<dir>/<name>.json`, as written.
pub fn text(dir: &str, name: &str) -> String {
    let path = fixtures_dir().join(dir).join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn seed(name: &str) -> Value {
    serde_json::from_str(&text("seed", name)).unwrap_or_else(|e| panic!("seed/{name}: {e}"))
}

/// `libs/toys/park/<name>.json`: the park's own components (the toys' scenario).
pub fn park(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../libs/toys/park")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("park/{name}: {e}"))
}

/// Every seed example file name (without `.json`).
pub fn seed_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir().join("seed"))
        .unwrap()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".json").map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

/// Components by kind and hash; records what assembly asked for.
#[derive(Default)]
pub struct MemoryLookup {
    components: HashMap<(ComponentKind, ContentHash), Value>,
    pub asked: Mutex<Vec<(ComponentKind, ContentHash)>>,
}

impl MemoryLookup {
    pub fn with_builtins() -> MemoryLookup {
        let mut lookup = MemoryLookup::default();
        for (kind, hash, document) in builtin_components().unwrap() {
            lookup.components.insert((kind, hash), document);
        }
        lookup
    }

    pub fn put(&mut self, kind: ComponentKind, document: &Value) -> ContentHash {
        let hash = ContentHash::of_json(document).unwrap();
        self.components
            .insert((kind, hash.clone()), document.clone());
        hash
    }
}

#[async_trait]
impl ComponentLookup for MemoryLookup {
    async fn component(
        &self,
        kind: ComponentKind,
        hash: &ContentHash,
    ) -> Result<Option<Value>, LookupError> {
        self.asked.lock().unwrap().push((kind, hash.clone()));
        Ok(self.components.get(&(kind, hash.clone())).cloned())
    }
}

/// Replaces every string value `"<name>"` found in `names` by that hash.
pub fn substitute(value: &Value, names: &BTreeMap<String, ContentHash>) -> Value {
    let names = names
        .iter()
        .map(|(name, hash)| (name.clone(), hash.to_string()))
        .collect();
    noema_toys::scenario::substitute(value, &names)
}

/// The kind a park component names.
pub fn kind_named(name: &str) -> ComponentKind {
    ComponentKind::ALL
        .into_iter()
        .find(|k| k.as_str() == name)
        .unwrap_or_else(|| panic!("no component kind {name}"))
}

/// The park: every component of the seed's workflow example, stored, with the placeholder
/// names mapped to their hashes.
pub struct Park {
    pub lookup: MemoryLookup,
    pub names: BTreeMap<String, ContentHash>,
}

impl Park {
    pub fn new() -> Park {
        let mut park = Park {
            lookup: MemoryLookup::with_builtins(),
            names: BTreeMap::new(),
        };
        park.names.insert(
            noema_toys::scenario::WORLD_PATCH_SCHEMA.to_owned(),
            builtin_components().unwrap()[0].1.clone(),
        );
        for component in noema_toys::scenario::PARK {
            if component.kind == "scenario" {
                continue;
            }
            let document = substitute(&component.document().unwrap(), &park.names);
            park.name(component.name, kind_named(component.kind), &document);
        }
        park
    }

    /// Stores `document` and maps `name` to its hash.
    pub fn name(&mut self, name: &str, kind: ComponentKind, document: &Value) -> ContentHash {
        let hash = self.lookup.put(kind, document);
        self.names.insert(name.to_owned(), hash.clone());
        hash
    }

    pub fn hash(&self, name: &str) -> ContentHash {
        self.names
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("no component named {name}"))
    }

    /// The seed's workflow example with real hashes.
    pub fn workflow(&self) -> Value {
        substitute(&seed("cognition_workflow"), &self.names)
    }

    /// The park scenario, every agent on the park profile.
    pub fn scenario(&self) -> Value {
        substitute(&park("scenario"), &self.names)
    }

    /// Stores `workflow` and a profile on it; returns the scenario with every agent on that
    /// profile.
    pub fn scenario_with_workflow(&mut self, workflow: &Value) -> Value {
        let workflow_hash = self.lookup.put(ComponentKind::CognitionWorkflow, workflow);
        let profile = json!({"workflow_ref": {"hash": workflow_hash.as_str()}});
        let profile_hash = self.lookup.put(ComponentKind::CognitionProfile, &profile);
        let mut scenario = self.scenario();
        for entity in scenario["entities"].as_array_mut().unwrap() {
            if entity.get("cognition_profile_ref").is_some() {
                entity["cognition_profile_ref"] = json!({"hash": profile_hash.as_str()});
            }
        }
        scenario
    }

    pub async fn assemble(&self, scenario: &Value) -> Result<AssembledScenario, AssemblyError> {
        assemble_scenario(scenario, &self.lookup, &SourceKinds::standard()).await
    }

    /// Assembles the park scenario with every agent on `workflow`.
    pub async fn assemble_workflow(
        &mut self,
        workflow: &Value,
    ) -> Result<AssembledScenario, AssemblyError> {
        let scenario = self.scenario_with_workflow(workflow);
        self.assemble(&scenario).await
    }
}

/// Sets the value at `pointer` (creating nothing: the parent must exist).
pub fn set(document: &mut Value, pointer: &str, value: Value) {
    *document
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer} is not in the document")) = value;
}

/// Removes the member at `pointer`.
pub fn remove(document: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let parent = if parent.is_empty() {
        &mut *document
    } else {
        document.pointer_mut(parent).unwrap()
    };
    match parent {
        Value::Object(map) => {
            map.remove(key)
                .unwrap_or_else(|| panic!("{pointer} is not in the document"));
        }
        Value::Array(items) => {
            items.remove(key.parse::<usize>().unwrap());
        }
        _ => panic!("{pointer}: parent is not a container"),
    }
}

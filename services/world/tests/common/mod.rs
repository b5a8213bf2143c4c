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

pub fn park(name: &str) -> Value {
    serde_json::from_str(&text("park", name)).unwrap_or_else(|e| panic!("park/{name}: {e}"))
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
    match value {
        Value::String(s) => match s.strip_prefix('<').and_then(|s| s.strip_suffix('>')) {
            Some(name) if names.contains_key(name) => Value::from(names[name].as_str()),
            _ => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|i| substitute(i, names)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute(v, names)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The park: every component of the seed's workflow example, stored, with the placeholder
/// names mapped to their hashes.
pub struct Park {
    pub lookup: MemoryLookup,
    pub names: BTreeMap<String, ContentHash>,
}

/// Placeholder name → (kind, fixture dir, fixture name).
const COMPONENTS: [(&str, ComponentKind, &str, &str); 16] = [
    (
        "toy-weather-source-hash",
        ComponentKind::ResponseSource,
        "seed",
        "source_toy_park_weather",
    ),
    (
        "weather-result-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "weather_result.schema",
    ),
    (
        "toy-pa-source-hash",
        ComponentKind::ResponseSource,
        "seed",
        "source_toy_park_pa",
    ),
    (
        "pa-result-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "pa_result.schema",
    ),
    (
        "toy-phone-inbox-source-hash",
        ComponentKind::ResponseSource,
        "seed",
        "source_toy_phone_inbox",
    ),
    (
        "phone-inbox-result-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "phone_inbox_result.schema",
    ),
    (
        "llm-source-hash",
        ComponentKind::ResponseSource,
        "seed",
        "source_llm_chat_router",
    ),
    (
        "http-vending-source-hash",
        ComponentKind::ResponseSource,
        "seed",
        "source_toy_vending_machine",
    ),
    (
        "buy-candy-arguments-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "buy_candy_arguments.schema",
    ),
    (
        "vending-result-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "vending_result.schema",
    ),
    (
        "http-drinking-fountain-source-hash",
        ComponentKind::ResponseSource,
        "park",
        "source_toy_drinking_fountain",
    ),
    (
        "drinking-fountain-arguments-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "drinking_fountain_arguments.schema",
    ),
    (
        "drinking-fountain-result-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "drinking_fountain_result.schema",
    ),
    (
        "dummy-send-text-source-hash",
        ComponentKind::ResponseSource,
        "seed",
        "source_dummy_send_text",
    ),
    (
        "send-text-arguments-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "send_text_arguments.schema",
    ),
    (
        "send-text-result-schema-hash",
        ComponentKind::JsonSchema,
        "park",
        "send_text_result.schema",
    ),
];

impl Park {
    pub fn new() -> Park {
        let mut lookup = MemoryLookup::with_builtins();
        let mut names = BTreeMap::new();
        for (name, kind, dir, file) in COMPONENTS {
            let document = if dir == "seed" {
                seed(file)
            } else {
                park(file)
            };
            names.insert(name.to_owned(), lookup.put(kind, &document));
        }
        names.insert(
            "world-patch-schema-hash".to_owned(),
            builtin_components().unwrap()[0].1.clone(),
        );
        let mut park = Park { lookup, names };
        let workflow = park.workflow();
        park.name(
            "park-workflow-hash",
            ComponentKind::CognitionWorkflow,
            &workflow,
        );
        let simple = substitute(&self::park("simple_workflow"), &park.names);
        park.name(
            "simple-workflow-hash",
            ComponentKind::CognitionWorkflow,
            &simple,
        );
        let profile = substitute(&self::park("cognition_profile"), &park.names);
        park.name(
            "park-profile-hash",
            ComponentKind::CognitionProfile,
            &profile,
        );
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

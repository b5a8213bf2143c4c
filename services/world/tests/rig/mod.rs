//! A world service over a real database (a SQLite file, or a fresh Postgres database from
//! `NOEMA_TEST_DATABASE_URL`), with the toys — the scripted LLM and the toy sources — as
//! real HTTP servers on 127.0.0.1 and the park's components stored: the kernel's tests drive
//! it below the gRPC layer, through the operations the API calls.
#![allow(dead_code)] // each test binary uses its own part
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::collections::BTreeMap;
use std::sync::Arc;

use noema_store::Database;
use noema_store::testing::TestDatabase;
use noema_toys::park::ParkConfig;
use noema_toys::scenario::{PARK, PARK_MODEL_ALIAS, PARK_URL_ENVS, WORLD_PATCH_SCHEMA, substitute};
use noema_toys::{LlmScript, Park, ScriptedLlm, ToyServer, serve_all};
use noema_world::domain::component::{ComponentKind, WORLD_PATCH_SCHEMA_NAME};
use noema_world::domain::hash::ContentHash;
use noema_world::ops::kernel::{TurnOutcome, TurnResult};
use noema_world::ops::{Caller, World};
use noema_world::{MIGRATIONS, WorldBuilder, WorldOptions};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// What a test's database needs kept until the test ends: the directory a SQLite file lives
/// in, or the Postgres database (dropped with this).
pub struct Scratch {
    _dir: tempfile::TempDir,
    _database: Option<TestDatabase>,
}

/// A migrated database of `backend`, and what keeps it.
pub async fn database(backend: Backend) -> (Database, Scratch) {
    let dir = tempfile::tempdir().unwrap();
    let (url, database) = match backend {
        Backend::Sqlite => (
            format!("sqlite://{}", dir.path().join("world.db").display()),
            None,
        ),
        Backend::Postgres => {
            let admin = std::env::var("NOEMA_TEST_DATABASE_URL").expect(
                "NOEMA_TEST_DATABASE_URL is not set: run through scripts/test, which starts Postgres",
            );
            let database = TestDatabase::create(&admin, "world").await.unwrap();
            (database.url().to_owned(), Some(database))
        }
    };
    let db = Database::connect(&url).await.unwrap();
    db.migrate(&MIGRATIONS).await.unwrap();
    (
        db,
        Scratch {
            _dir: dir,
            _database: database,
        },
    )
}

pub fn caller() -> Caller {
    Caller::local("test:kernel")
}

/// The park's LLM script (`libs/toys/scripts/park.json`).
pub fn park_script() -> Value {
    let path = format!(
        "{}/../../libs/toys/scripts/park.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A scripted answer: a final patch.
pub fn final_patch(patch: Value) -> Value {
    json!({"json": {"kind": "final_patch", "patch": patch}})
}

pub struct Rig {
    pub world: Arc<World>,
    pub db: Database,
    pub llm: ScriptedLlm,
    pub park: Park,
    pub toys: ToyServer,
    /// Placeholder name → hash of every park component stored.
    pub names: BTreeMap<String, ContentHash>,
    _dir: Scratch,
}

/// The options pointing every park source and the LLM at the toys.
pub fn options_for(toys_url: &str) -> WorldOptions {
    let mut options = WorldOptions::default();
    for name in PARK_URL_ENVS {
        options
            .source_env
            .insert(name.to_owned(), toys_url.to_owned());
    }
    options.llm.base_url = format!("{toys_url}/v1");
    options
        .llm
        .models
        .insert(PARK_MODEL_ALIAS.to_owned(), "toy".to_owned());
    options
}

pub struct RigBuilder {
    backend: Backend,
    script: LlmScript,
    edit: Box<dyn FnOnce(&mut WorldOptions) + Send>,
    build: Box<dyn FnOnce(WorldBuilder) -> WorldBuilder + Send>,
}

impl RigBuilder {
    pub fn options(mut self, edit: impl FnOnce(&mut WorldOptions) + Send + 'static) -> Self {
        self.edit = Box::new(edit);
        self
    }

    pub fn builder(
        mut self,
        f: impl FnOnce(WorldBuilder) -> WorldBuilder + Send + 'static,
    ) -> Self {
        self.build = Box::new(f);
        self
    }

    pub async fn start(self) -> Rig {
        let llm = ScriptedLlm::new(self.script);
        let park = Park::new(ParkConfig::default());
        let toys = serve_all("127.0.0.1:0".parse().unwrap(), &llm, &park)
            .await
            .unwrap();
        let (db, dir) = database(self.backend).await;
        let mut options = options_for(&toys.url());
        (self.edit)(&mut options);
        let builder = (self.build)(WorldBuilder::new(db.clone(), options));
        let world = builder.build().await.unwrap();
        let mut rig = Rig {
            world,
            db,
            llm,
            park,
            toys,
            names: BTreeMap::new(),
            _dir: dir,
        };
        rig.install_park().await;
        rig
    }
}

pub fn rig(backend: Backend, script: Value) -> RigBuilder {
    RigBuilder {
        backend,
        script: serde_json::from_value(script).unwrap(),
        edit: Box::new(|_| {}),
        build: Box::new(|b| b),
    }
}

impl Rig {
    /// Stores every park component but the scenario, through the service's puts.
    async fn install_park(&mut self) {
        let builtin = self
            .world
            .builtin_component(WORLD_PATCH_SCHEMA_NAME)
            .await
            .unwrap();
        self.names
            .insert(WORLD_PATCH_SCHEMA.to_owned(), builtin.hash);
        for component in PARK {
            if component.kind == "scenario" {
                continue;
            }
            let document = self.fill(&component.document().unwrap());
            let kind = ComponentKind::ALL
                .into_iter()
                .find(|k| k.as_str() == component.kind)
                .unwrap();
            let (hash, _) = self
                .world
                .put_component(kind, &document, &caller())
                .await
                .unwrap();
            self.names.insert(component.name.to_owned(), hash);
        }
    }

    /// `document` with the park's placeholders replaced by hashes.
    pub fn fill(&self, document: &Value) -> Value {
        let names = self
            .names
            .iter()
            .map(|(name, hash)| (name.clone(), hash.to_string()))
            .collect();
        substitute(document, &names)
    }

    pub fn hash(&self, name: &str) -> ContentHash {
        self.names[name].clone()
    }

    /// The seed's park workflow, hashes filled in.
    pub fn park_workflow(&self) -> Value {
        let text = PARK
            .iter()
            .find(|c| c.name == "park-workflow-hash")
            .unwrap();
        self.fill(&text.document().unwrap())
    }

    /// The park scenario document, every agent on `profile`.
    pub fn scenario_document(&self, profile: &ContentHash) -> Value {
        let text = PARK.iter().find(|c| c.kind == "scenario").unwrap();
        let mut scenario = self.fill(&text.document().unwrap());
        for entity in scenario["entities"].as_array_mut().unwrap() {
            if entity.get("cognition_profile_ref").is_some() {
                entity["cognition_profile_ref"] = json!({"hash": profile.as_str()});
            }
        }
        scenario
    }

    /// Stores `workflow`, a profile on it and the park scenario with every agent on that
    /// profile; returns the scenario's hash.
    pub async fn scenario_with(&self, workflow: &Value) -> ContentHash {
        let (workflow, _) = self
            .world
            .put_component(ComponentKind::CognitionWorkflow, workflow, &caller())
            .await
            .unwrap();
        let (profile, _) = self
            .world
            .put_component(
                ComponentKind::CognitionProfile,
                &json!({"workflow_ref": {"hash": workflow.as_str()}}),
                &caller(),
            )
            .await
            .unwrap();
        let (scenario, _) = self
            .world
            .assemble_scenario(&self.scenario_document(&profile), &caller())
            .await
            .unwrap();
        scenario
    }

    /// A world `slug` of the park scenario on `workflow`.
    pub async fn world_with(&self, slug: &str, workflow: &Value) {
        let scenario = self.scenario_with(workflow).await;
        self.world
            .create_world(slug, &scenario, &caller())
            .await
            .unwrap();
    }

    pub async fn run(&self, slug: &str) -> TurnOutcome {
        self.world.run_turn(slug, &caller()).await.unwrap()
    }

    /// Runs a turn that must commit; returns its number.
    pub async fn commit(&self, slug: &str) -> u64 {
        match self.run(slug).await.result {
            TurnResult::Committed { turn, .. } => turn,
            TurnResult::Failed(failure) => panic!("the turn failed: {failure}"),
        }
    }
}

/// Declares each case once per backend.
#[macro_export]
macro_rules! both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::rig::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::rig::Backend::Postgres).await;
                }
            )*
        }
    };
}

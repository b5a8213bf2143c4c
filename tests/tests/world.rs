//! The world service from outside: the seed's park scenario through the public REST API,
//! against the toys (the scripted LLM and the toy sources, real HTTP servers on 127.0.0.1)
//! on every shape and backend — components stored, the scenario assembled, a world created
//! and run, its turns, diffs, states, traces and LLM calls read back, its history verified
//! and a tampered turn caught; then two world replicas on one Postgres database racing for
//! one turn, and a world process killed while an LLM call is in flight.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use noema_e2e::{Backend, Role, Shape, TestCluster, owner};
use noema_toys::park::ParkConfig;
use noema_toys::scenario::{PARK, PARK_MODEL_ALIAS, PARK_URL_ENVS, WORLD_PATCH_SCHEMA, substitute};
use noema_toys::{LlmScript, Park, ScriptedLlm, ToyServer, serve_all};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A cluster whose world service talks to its own toys.
struct ParkCluster {
    cluster: TestCluster,
    llm: ScriptedLlm,
    park: Park,
    toys: ToyServer,
}

/// The park's LLM script (`libs/toys/scripts/park.json`).
fn park_script() -> Value {
    let path = format!(
        "{}/../libs/toys/scripts/park.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The settings pointing the world's sources and LLM at `toys_url`.
fn toy_settings(toys_url: &str) -> Vec<(String, String)> {
    let env: Vec<String> = PARK_URL_ENVS
        .iter()
        .map(|name| format!("{name} = \"{toys_url}\""))
        .collect();
    vec![
        ("world.llm.base_url".into(), format!("\"{toys_url}/v1\"")),
        (
            "world.llm.models".into(),
            format!("{{ \"{PARK_MODEL_ALIAS}\" = \"toy\" }}"),
        ),
        (
            "world.source_env".into(),
            format!("{{ {} }}", env.join(", ")),
        ),
    ]
}

async fn start(
    backend: Backend,
    shape: Shape,
    script: Value,
    extra: &[(&str, &str)],
) -> ParkCluster {
    let script: LlmScript = serde_json::from_value(script).unwrap();
    let llm = ScriptedLlm::new(script);
    let park = Park::new(ParkConfig::default());
    let toys = serve_all("127.0.0.1:0".parse().unwrap(), &llm, &park)
        .await
        .unwrap();
    let mut builder = TestCluster::builder(backend, shape);
    for (key, literal) in toy_settings(&toys.url()) {
        builder = builder.setting(&key, &literal);
    }
    for (key, literal) in extra {
        builder = builder.setting(key, literal);
    }
    let cluster = match builder.start().await {
        Ok(cluster) => cluster,
        Err(err) => panic!("cannot start a {shape:?} cluster on {backend}: {err}"),
    };
    ParkCluster {
        cluster,
        llm,
        park,
        toys,
    }
}

impl ParkCluster {
    async fn stop(self) {
        self.cluster.shutdown().await.unwrap();
        self.toys.shutdown().await.unwrap();
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.cluster.rest_url)
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        post_to(&self.cluster, &self.cluster.rest_url, path, body).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let response = owner(&self.cluster)
            .get(self.url(path))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// GET that must answer 200.
    async fn read(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Stores every park component through the REST collections — 201 the first time, 200
    /// with the same hash the second — and assembles the scenario; returns placeholder →
    /// hash.
    async fn install_park(&self) -> BTreeMap<String, String> {
        let builtin = self.read("/json-schemas/world-patch").await;
        let mut names = BTreeMap::from([(
            WORLD_PATCH_SCHEMA.to_owned(),
            builtin["hash"].as_str().unwrap().to_owned(),
        )]);
        for component in PARK {
            let document = substitute(&component.document().unwrap(), &names);
            let collection = format!("/{}s", component.kind.replace('_', "-"));
            let (status, first) = self.post(&collection, &document).await;
            assert_eq!(status, 201, "POST {collection} {}: {first}", component.name);
            let (status, again) = self.post(&collection, &document).await;
            assert_eq!((status, &again), (200, &first), "{}", component.name);
            let hash = first["hash"].as_str().unwrap().to_owned();
            let stored = self.read(&format!("{collection}/hash/{hash}")).await;
            assert_eq!(stored["kind"], json!(component.kind));
            assert_eq!(stored["content"], document);
            names.insert(component.name.to_owned(), hash);
        }
        names
    }

    /// The park installed and a world `slug` created from its scenario at turn 0.
    async fn park_world(&self, slug: &str) -> BTreeMap<String, String> {
        let names = self.install_park().await;
        let body = json!({"slug": slug, "scenario_ref": {"hash": names["park-scenario-hash"]}});
        let (status, world) = self.post("/worlds", &body).await;
        assert_eq!(status, 201, "{world}");
        assert_eq!(world["current_turn"], json!(0));
        let (status, again) = self.post("/worlds", &body).await;
        assert_eq!(status, 409, "a slug names one world: {again}");
        names
    }

    async fn run_turn(&self, slug: &str) -> (u16, Value) {
        self.post(&format!("/worlds/{slug}/turns"), &json!({}))
            .await
    }

    async fn commit(&self, slug: &str) -> Value {
        let (status, body) = self.run_turn(slug).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["status"], json!("committed"));
        body
    }

    /// Every page of a listing.
    async fn all(&self, path: &str) -> Vec<Value> {
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = match &token {
                Some(token) => format!("{path}{separator}page_size=50&page_token={token}"),
                None => format!("{path}{separator}page_size=50"),
            };
            let body = self.read(&page).await;
            items.extend(body["items"].as_array().unwrap().iter().cloned());
            match body["next_page_token"].as_str() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => return items,
            }
        }
    }
}

async fn post_to(cluster: &TestCluster, rest_url: &str, path: &str, body: &Value) -> (u16, Value) {
    let response = owner(cluster)
        .post(format!("{rest_url}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Declares each case once per shape and backend, as `cluster_cases!` does, each with its
/// own toys playing the case's LLM script, and the case's extra settings.
macro_rules! park_cases {
    ($($case:ident => ($script:ident, $settings:ident)),* $(,)?) => {
        park_cases!(@shape all_in_one_sqlite, Sqlite, AllInOne; $($case, $script, $settings);*);
        park_cases!(@shape split_sqlite, Sqlite, Split; $($case, $script, $settings);*);
        park_cases!(@shape all_in_one_postgres_s3, PostgresS3, AllInOne; $($case, $script, $settings);*);
        park_cases!(@shape split_postgres_s3, PostgresS3, Split; $($case, $script, $settings);*);
        park_cases!(@shape processes_postgres_s3, PostgresS3, Processes; $($case, $script, $settings);*);
    };
    (@shape $module:ident, $backend:ident, $shape:ident; $($case:ident, $script:ident, $settings:ident);*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let park = super::start(
                        noema_e2e::Backend::$backend,
                        noema_e2e::Shape::$shape,
                        super::$script(),
                        super::$settings,
                    )
                    .await;
                    super::$case(&park).await;
                    park.stop().await;
                }
            )*
        }
    };
}

/// No extra settings.
const DEFAULTS: &[(&str, &str)] = &[];
/// Each committed turn's hash anchored in the ledger.
const ANCHORED: &[(&str, &str)] = &[("world.anchor", "true")];

park_cases!(
    the_park_runs_three_turns_through_the_api => (park_script, DEFAULTS),
    tampering_with_a_stored_turn_is_caught_by_verify => (park_script, DEFAULTS),
    a_source_that_answers_no_json_fails_the_turn_with_502 => (park_script, DEFAULTS),
    available_tools_go_unused_through_the_api => (unused_tools_script, DEFAULTS),
    two_agents_and_one_candy_bar_through_the_api => (one_candy_bar_script, DEFAULTS),
    an_llm_only_workflow_commits_a_turn_through_the_api => (llm_only_script, DEFAULTS),
    concurrent_subjects_commit_in_subject_order_through_the_api => (concurrent_script, DEFAULTS),
    components_are_read_by_kind_through_mcp => (park_script, DEFAULTS),
    anchored_turns_are_in_the_ledger => (park_script, ANCHORED),
);

/// Seed Phase I tests 1-3, 5 and 7 (smokes of Phase N) through REST: weather, PA and phone
/// inbox over three turns, Bob's tool call, Bob and the ant in one committed turn; then
/// every read route a client uses to see what happened.
async fn the_park_runs_three_turns_through_the_api(park: &ParkCluster) {
    park.park_world("park-demo").await;
    let mut hashes = Vec::new();
    for turn in 1..=3u64 {
        let committed = park.commit("park-demo").await;
        assert_eq!(committed["turn"], json!(turn));
        hashes.push(committed["turn_hash"].as_str().unwrap().to_owned());
    }
    let world = park.read("/worlds/park-demo").await;
    assert_eq!(world["current_turn"], json!(3));
    assert_eq!(world["head_hash"], json!(hashes[2]));

    // The chain: each turn names its predecessor's hash.
    let turns = park.all("/worlds/park-demo/turns").await;
    let numbers: Vec<u64> = turns.iter().map(|t| t["turn"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1, 2, 3]);
    for pair in turns.windows(2) {
        assert_eq!(pair[1]["previous_turn_hash"], pair[0]["hash"]);
    }
    let verify = park.read("/worlds/park-demo/verify").await;
    assert_eq!(
        (&verify["ok"], &verify["turns_checked"]),
        (&json!(true), &json!(4)),
        "{verify}"
    );

    // Turn 1: both patches in one committed turn, in subject order (A5, Example 7).
    let turn1 = park.read("/worlds/park-demo/turns/1").await;
    assert_eq!(turn1["hash"], json!(hashes[0]));
    let subjects: Vec<&str> = turn1["record"]["patches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["subject_entity_id"].as_str().unwrap())
        .collect();
    assert_eq!(subjects, ["ant", "bob"]);
    let state = park.read("/worlds/park-demo/turns/1/state").await;
    let entity = |id: &str| state["state"]["entities"][id]["state"].clone();
    assert_eq!(entity("bob"), json!("holding a candy bar"));
    assert_eq!(entity("vending_machine"), json!("empty"));
    assert_eq!(entity("crumb"), json!("gone"));
    let before = park.read("/worlds/park-demo/turns/0/state").await;
    assert_ne!(
        before["state"]["entities"]["bob"],
        state["state"]["entities"]["bob"]
    );
    let diff = park.read("/worlds/park-demo/turns/1/diff").await;
    assert_eq!(diff["patches"].as_array().unwrap().len(), 2);
    let changed: Vec<&String> = diff["entities"].as_object().unwrap().keys().collect();
    assert_eq!(changed, ["ant", "bob", "crumb", "vending_machine"]);
    assert_eq!(
        diff["entities"]["bob"]["after"]["state"],
        json!("holding a candy bar")
    );
    let events = park.all("/worlds/park-demo/events?turn=1").await;
    assert_eq!(events.len(), 2);
    let history = park.read("/worlds/park-demo/entities/bob/history").await;
    assert_eq!(history["changes"].as_array().unwrap().len(), 3);

    // The traces, as stored: weather colder each turn (A9), the PA traced empty or not
    // (A10), the inbox before Bob only (A11), one tool call because Bob's model asked (A7).
    let all = park.all("/source-invocations?world_slug=park-demo").await;
    assert_eq!(all.len(), 7 + 6 + 5);
    assert!(all.iter().all(|i| i["status"] != json!("running")));
    let mut ordered = all.clone();
    ordered.sort_by_key(|i| {
        (
            i["attempted_turn"].as_u64().unwrap(),
            i["invocation_seq"].as_u64().unwrap(),
        )
    });
    let ambient = |id: &str| -> Vec<Value> {
        ordered
            .iter()
            .filter(|i| i["ambient_source_id"] == json!(id))
            .cloned()
            .collect()
    };
    let weather: Vec<Value> = ambient("park_weather")
        .iter()
        .map(|i| i["response_json"]["temperature_f"].clone())
        .collect();
    assert_eq!(weather, [json!(72), json!(64), json!(55)]);
    let pa: Vec<usize> = ambient("park_pa")
        .iter()
        .map(|i| {
            i["response_json"]["announcements"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect();
    assert_eq!(pa, [0, 1, 0]);
    let inbox = ambient("bob_phone_inbox");
    assert_eq!(inbox.len(), 3);
    assert!(
        inbox
            .iter()
            .all(|i| i["workflow_subject_entity_id"] == json!("bob"))
    );
    let tools = park
        .all("/source-invocations?world_slug=park-demo&invocation_kind=model_elected_tool")
        .await;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["tool_name"], json!("buy_candy"));
    assert_eq!(park.park.calls("/buy_candy").len(), 1);

    // Attempts and their invocations; turn 2's retry (A13) and the LLM calls (A15).
    let attempts = park.all("/worlds/park-demo/attempts").await;
    assert_eq!(attempts.len(), 3);
    let turn2 = attempts
        .iter()
        .find(|a| a["attempted_turn"] == json!(2))
        .unwrap();
    assert_eq!(turn2["status"], json!("committed"));
    let attempt_id = turn2["attempt_id"].as_str().unwrap();
    let detail = park.read(&format!("/attempts/{attempt_id}")).await;
    assert_eq!(detail["source_invocation_count"], json!(6));
    let of_attempt = park
        .all(&format!("/attempts/{attempt_id}/source-invocations"))
        .await;
    assert_eq!(of_attempt.len(), 6);
    let bob: Vec<&Value> = of_attempt
        .iter()
        .filter(|i| {
            i["invocation_kind"] == json!("llm_generation")
                && i["workflow_subject_entity_id"] == json!("bob")
        })
        .collect();
    let lane: Vec<(&Value, &Value)> = bob
        .iter()
        .map(|i| (&i["logical_generation_attempt"], &i["status"]))
        .collect();
    assert_eq!(
        lane,
        [
            (&json!(1), &json!("failed")),
            (&json!(2), &json!("succeeded"))
        ]
    );
    let one = park
        .read(&format!(
            "/source-invocations/{}",
            bob[1]["source_invocation_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(&one, bob[1]);
    let call = park
        .read(&format!(
            "/llm-calls/{}",
            bob[1]["llm_call_id"].as_str().unwrap()
        ))
        .await;
    let chunks = call["chunks"].as_array().unwrap();
    assert!(chunks.len() > 1, "{call}");
    let streamed: String = chunks.iter().map(|c| c["text"].as_str().unwrap()).collect();
    assert_eq!(Some(streamed.as_str()), call["raw_text"].as_str());
    assert_eq!(call["requested_model"], json!("@chat"));
    assert_eq!(call["model"], json!("toy"));
    let calls = park.all("/llm-calls?world_slug=park-demo").await;
    assert_eq!(
        calls.len(),
        ordered
            .iter()
            .filter(|i| i["invocation_kind"] == json!("llm_generation"))
            .count()
    );
    assert_eq!(park.llm.remaining(), 0);

    // The browse routes also answer `?format=json`; a scenario lists the world made from it.
    let worlds = park.read("/worlds?format=json").await;
    assert_eq!(worlds["items"].as_array().unwrap().len(), 1);
}

/// A stored turn edited under the service (as someone with database access could): the
/// reads still serve it, and verify names the first turn that no longer holds.
async fn tampering_with_a_stored_turn_is_caught_by_verify(park: &ParkCluster) {
    park.park_world("tampered").await;
    for _ in 1..=2 {
        park.commit("tampered").await;
    }
    let verify = park.read("/worlds/tampered/verify").await;
    assert_eq!(verify["ok"], json!(true), "{verify}");

    let cluster = &park.cluster;
    let spec = cluster.registry.get("world").unwrap();
    let url = cluster.config().database_url(spec);
    let edit = "UPDATE turns SET record = REPLACE(record, 'holding a candy bar', \
                'holding two candy bars') WHERE world_slug = 'tampered' AND turn = 1";
    match noema_store::Database::connect(&url).await.unwrap() {
        noema_store::Database::Sqlite(pool) => {
            // The append-only triggers stand in the way; an intruder drops them.
            sqlx::query("DROP TRIGGER turns_immutable_update")
                .execute(&pool)
                .await
                .unwrap();
            let done = sqlx::query(edit).execute(&pool).await.unwrap();
            assert_eq!(done.rows_affected(), 1);
        }
        noema_store::Database::Postgres(pool) => {
            sqlx::query("ALTER TABLE turns DISABLE TRIGGER turns_immutable")
                .execute(&pool)
                .await
                .unwrap();
            let done = sqlx::query(edit).execute(&pool).await.unwrap();
            assert_eq!(done.rows_affected(), 1);
        }
    }
    let verify = park.read("/worlds/tampered/verify").await;
    assert_eq!(verify["ok"], json!(false), "{verify}");
    assert_eq!(verify["broken_turn"], json!(1), "{verify}");
    assert!(verify["problem"].as_str().is_some_and(|p| !p.is_empty()));
}

/// Smoke 8: an HTTP source answers no JSON — the attempt fails before commit (502 with its
/// failure class), the world stays at turn 0, and the failed invocation keeps what came back.
async fn a_source_that_answers_no_json_fails_the_turn_with_502(park: &ParkCluster) {
    let names = park.install_park().await;
    let broken = json!({"version": 1, "label": "broken_inbox", "interface": {
        "name": "http_json", "method": "POST", "url_env": "CHUKWA_TOY_PHONE_URL",
        "path": "/faults/not_json", "timeout_ms": 5000}});
    let (status, broken) = park.post("/response-sources", &broken).await;
    assert_eq!(status, 201, "{broken}");
    let stored = park
        .read(&format!(
            "/cognition-workflows/hash/{}",
            names["park-workflow-hash"]
        ))
        .await;
    let mut workflow = stored["content"].clone();
    assert_eq!(
        workflow["ambient_sources"][2]["id"],
        json!("bob_phone_inbox")
    );
    workflow["ambient_sources"][2]["source_ref"]["hash"] = broken["hash"].clone();
    let (status, workflow) = park.post("/cognition-workflows", &workflow).await;
    assert_eq!(status, 201, "{workflow}");
    let profile = json!({"workflow_ref": {"hash": workflow["hash"]}});
    let (status, profile) = park.post("/cognition-profiles", &profile).await;
    assert_eq!(status, 201, "{profile}");
    let mut scenario = park
        .read(&format!("/scenarios/hash/{}", names["park-scenario-hash"]))
        .await["content"]
        .clone();
    scenario["label"] = json!("park_broken_phone");
    for entity in scenario["entities"].as_array_mut().unwrap() {
        if entity.get("cognition_profile_ref").is_some() {
            entity["cognition_profile_ref"] = json!({"hash": profile["hash"]});
        }
    }
    let (status, scenario) = park.post("/scenarios", &scenario).await;
    assert_eq!(status, 201, "{scenario}");
    let body = json!({"slug": "broken", "scenario_ref": {"hash": scenario["hash"]}});
    let (status, world) = park.post("/worlds", &body).await;
    assert_eq!(status, 201, "{world}");

    let (status, failed) = park.run_turn("broken").await;
    assert_eq!(status, 502, "{failed}");
    assert_eq!(failed["status"], json!("failed"));
    assert_eq!(failed["failure_class"], json!("source_invalid_json"));
    let world = park.read("/worlds/broken").await;
    assert_eq!(world["current_turn"], json!(0));
    assert_eq!(
        world["state"]["entities"]["ant"]["state"],
        json!("hungry, on the plate on the picnic table")
    );
    let attempt = park
        .read(&format!(
            "/attempts/{}",
            failed["attempt_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(attempt["status"], json!("failed"));
    let invocations = park
        .all(&format!(
            "/attempts/{}/source-invocations",
            failed["attempt_id"].as_str().unwrap()
        ))
        .await;
    let last = invocations.last().unwrap();
    assert_eq!(
        (&last["status"], &last["failure_class"]),
        (&json!("failed"), &json!("source_invalid_json"))
    );
    assert_eq!(
        last["response_text"],
        json!("service temporarily unavailable")
    );
    assert_eq!(park.all("/worlds/broken/turns").await.len(), 1);
}

/// Two world replicas on one Postgres database, each behind its own gateway, asked at the
/// same moment to run the next turn of one world: exactly one attempt commits turn 1, the
/// other is refused cleanly (409, nothing recorded for it), and the world is at turn 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_racing_for_one_turn_commit_it_once() {
    // The ant's generation takes a while, so the winner holds the lease while the loser asks.
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [{"json": {"kind": "final_patch", "patch": {
            "narration": "The ant waits.", "effects": []}}, "latency_ms": 1500}]},
        {"subject": "bob", "outputs": [{"json": {"kind": "final_patch", "patch": {
            "narration": "Bob waits.", "effects": []}}}]}
    ]});
    let park = start(Backend::PostgresS3, Shape::AllInOne, script, &[]).await;
    park.park_world("contested").await;

    // A second world replica on the same database, and a gateway in front of it.
    let cluster = &park.cluster;
    let stop = CancellationToken::new();
    let mut config = cluster.config().clone();
    for peer in ["identity", "ledger"] {
        config
            .endpoints
            .insert(peer.to_owned(), cluster.endpoints[peer].clone());
    }
    let replica = noema::Node::start(
        &cluster.registry,
        &config,
        &[Role::Service("world")],
        stop.child_token(),
    )
    .await
    .unwrap();
    let mut gateway_config = config.clone();
    for (name, url) in &cluster.endpoints {
        gateway_config.endpoints.insert(name.clone(), url.clone());
    }
    gateway_config.endpoints.insert(
        "world".to_owned(),
        format!("http://{}", replica.grpc_addr.unwrap()),
    );
    let gateway = noema::Node::start(
        &cluster.registry,
        &gateway_config,
        &[Role::Gateway],
        stop.child_token(),
    )
    .await
    .unwrap();
    let second_rest = format!("http://{}", gateway.http_addr.unwrap());

    let path = "/worlds/contested/turns";
    let empty = json!({});
    let (first, second) = tokio::join!(
        post_to(cluster, &cluster.rest_url, path, &empty),
        post_to(cluster, &second_rest, path, &empty),
    );
    let mut statuses = [first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 409], "{first:?} {second:?}");
    let (committed, refused) = if first.0 == 201 {
        (first.1, second.1)
    } else {
        (second.1, first.1)
    };
    assert_eq!(committed["turn"], json!(1));
    assert_eq!(refused["code"], json!("already_exists"), "{refused}");

    let world = park.read("/worlds/contested").await;
    assert_eq!(world["current_turn"], json!(1));
    let attempts = park.all("/worlds/contested/attempts").await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(park.all("/worlds/contested/turns").await.len(), 2);
    // Either replica serves the same history.
    let response = owner(cluster)
        .get(format!("{second_rest}/worlds/contested/verify"))
        .send()
        .await
        .unwrap();
    let verify: Value = response.json().await.unwrap();
    assert_eq!(verify["ok"], json!(true), "{verify}");

    stop.cancel();
    gateway.wait().await.unwrap();
    replica.wait().await.unwrap();
    park.stop().await;
}

/// The world process killed (SIGKILL) while the ant's LLM call is in flight: after restart
/// the attempt, its running invocation and its LLM call show `interrupted`, the world is
/// still at turn 0, and the next turn runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_killed_mid_llm_call_resumes_from_the_last_committed_turn() {
    let wait = json!({"json": {"kind": "final_patch", "patch": {
        "narration": "The ant waits.", "effects": []}}});
    let script = json!({"scripts": [
        {"subject": "ant", "outputs": [
            {"json": {"kind": "final_patch", "patch": {"narration": "Never sent.", "effects": []}},
             "latency_ms": 20000},
            wait
        ]},
        {"subject": "bob", "outputs": [{"json": {"kind": "final_patch", "patch": {
            "narration": "Bob waits.", "effects": []}}}]}
    ]});
    let mut park = start(
        Backend::PostgresS3,
        Shape::Processes,
        script,
        &[("world.lease_ttl_ms", "1000")],
    )
    .await;
    park.park_world("killed").await;

    let running = park.url("/worlds/killed/turns");
    let client = owner(&park.cluster);
    let in_flight = tokio::spawn(async move { client.post(running).json(&json!({})).send().await });
    // Until the ant's generation is recorded as running (before its first byte went out).
    let generation = loop {
        let running = park
            .all("/source-invocations?world_slug=killed&invocation_kind=llm_generation&status=running")
            .await;
        if let Some(first) = running.into_iter().next() {
            break first;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(generation["workflow_subject_entity_id"], json!("ant"));
    park.cluster.kill("world").await.unwrap();
    // The caller sees the attempt fail; nothing was committed.
    let answer = in_flight.await.unwrap();
    assert!(
        answer.as_ref().map_or(true, |r| !r.status().is_success()),
        "{answer:?}"
    );
    park.cluster.restart("world").await.unwrap();

    let invocation_path = format!(
        "/source-invocations/{}",
        generation["source_invocation_id"].as_str().unwrap()
    );
    let mut invocation = Value::Null;
    for _ in 0..200 {
        invocation = park.read(&invocation_path).await;
        if invocation["status"] == json!("interrupted") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(invocation["status"], json!("interrupted"), "{invocation}");
    let call = park
        .read(&format!(
            "/llm-calls/{}",
            generation["llm_call_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(call["status"], json!("interrupted"), "{call}");
    let attempts = park.all("/worlds/killed/attempts").await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["status"], json!("interrupted"));
    let world = park.read("/worlds/killed").await;
    assert_eq!(world["current_turn"], json!(0));

    let committed = park.commit("killed").await;
    assert_eq!(committed["turn"], json!(1));
    let verify = park.read("/worlds/killed/verify").await;
    assert_eq!(verify["ok"], json!(true), "{verify}");
    park.stop().await;
}

// --- the seed's other Phase I tests and Phase N smokes, and issue 19's gaps ---------------

/// One of the seed's verbatim examples (kept with the world kernel's tests).
fn seed(name: &str) -> Value {
    let path = format!(
        "{}/../services/world/tests/fixtures/seed/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A scripted model output: a final WorldPatch.
fn final_patch(patch: Value) -> Value {
    json!({"json": {"kind": "final_patch", "patch": patch}})
}

/// A scripted model output: `actor` calls `buy_candy`.
fn buy_candy(actor: &str) -> Value {
    json!({"json": {"kind": "tool_call", "tool_call": {"name": "buy_candy", "arguments": {
        "actor_id": actor, "machine_id": "vending_machine", "button": "C"}}}})
}

fn set_state(entity_id: &str, state: &str) -> Value {
    json!({"op": "set_entity_state", "entity_id": entity_id, "state": state})
}

/// Test 4 / smoke 2: both subjects answer with a final patch at once; Bob eats a candy bar
/// from his pocket.
fn unused_tools_script() -> Value {
    json!({"scripts": [
        {"subject": "ant", "outputs": [final_patch(seed("d9_world_patch_cooler"))]},
        {"subject": "bob", "outputs": [final_patch(seed("example3_world_patch"))]}
    ]})
}

/// Test 6: both subjects press the vending machine's button, then patch what they saw.
fn one_candy_bar_script() -> Value {
    json!({"scripts": [
        {"subject": "ant", "outputs": [buy_candy("ant"), final_patch(json!({
            "narration": "The ant gets a candy bar.",
            "effects": [set_state("ant", "next to a candy bar"), set_state("vending_machine", "empty")]}))]},
        {"subject": "bob", "outputs": [buy_candy("bob"), final_patch(seed("example2_world_patch"))]}
    ]})
}

/// Smoke 1: the one agent's model answers with a final patch.
fn llm_only_script() -> Value {
    json!({"scripts": [{"subject": "bob", "outputs": [final_patch(json!({
    "narration": "Bob stretches on the bench.",
    "effects": [
        set_state("bob", "stretching on a bench"),
        {"op": "append_entity_memory", "entity_id": "bob", "content": "I stretched."}
    ]}))]}]})
}

/// The subjects of the concurrent scenario, in entity-id byte order.
const CONCURRENT_SUBJECTS: [&str; 4] = ["ant", "bob", "bob-2", "bob_2"];

/// Item 8: the subjects answer in the reverse of their order (the first one last); `bob-2`'s
/// first patch names an entity the world does not have, so its lane retries once.
fn concurrent_script() -> Value {
    let patch = |subject: &str| {
        final_patch(json!({"narration": format!("{subject} acts."),
            "effects": [set_state(subject, &format!("acted ({subject})"))]}))
    };
    let slow = |subject: &str, latency_ms: u64| {
        let mut output = patch(subject);
        output["latency_ms"] = json!(latency_ms);
        output
    };
    json!({"scripts": [
        {"subject": "ant", "outputs": [slow("ant", 900)]},
        {"subject": "bob", "outputs": [slow("bob", 600)]},
        {"subject": "bob-2", "outputs": [
            final_patch(json!({"narration": "bob-2 waves at a ghost.",
                "effects": [set_state("ghost", "waved at")]})),
            slow("bob-2", 300)
        ]},
        {"subject": "bob_2", "outputs": [patch("bob_2")]}
    ]})
}

/// How many of `invocations` are of each kind.
fn kinds(invocations: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for invocation in invocations {
        *counts
            .entry(invocation["invocation_kind"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    counts
}

fn by_seq(mut invocations: Vec<Value>) -> Vec<Value> {
    invocations.sort_by_key(|i| {
        (
            i["attempted_turn"].as_u64().unwrap(),
            i["invocation_seq"].as_u64().unwrap(),
        )
    });
    invocations
}

fn patch_subjects(turn: &Value) -> Vec<(u64, String)> {
    turn["record"]["patches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["patch_seq"].as_u64().unwrap(),
                p["subject_entity_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

impl ParkCluster {
    /// Stores `workflow` and a cognition profile for it through REST, then assembles
    /// `scenario` with every agent on that profile and creates the world `slug` from it.
    async fn world_running(&self, slug: &str, workflow: &Value, mut scenario: Value) {
        let (status, workflow) = self.post("/cognition-workflows", workflow).await;
        assert!(status == 201 || status == 200, "{status} {workflow}");
        let profile = json!({"workflow_ref": {"hash": workflow["hash"]}});
        let (status, profile) = self.post("/cognition-profiles", &profile).await;
        assert!(status == 201 || status == 200, "{status} {profile}");
        for entity in scenario["entities"].as_array_mut().unwrap() {
            if entity["kind"] == json!("agent") {
                entity["cognition_profile_ref"] = json!({"hash": profile["hash"]});
            }
        }
        let (status, assembled) = self.post("/scenarios", &scenario).await;
        assert_eq!(status, 201, "{assembled}");
        let body = json!({"slug": slug, "scenario_ref": {"hash": assembled["hash"]}});
        let (status, world) = self.post("/worlds", &body).await;
        assert_eq!(status, 201, "{world}");
    }

    /// A stored component's document.
    async fn content(&self, collection: &str, hash: &str) -> Value {
        self.read(&format!("/{collection}/hash/{hash}")).await["content"].clone()
    }
}

/// Seed Phase I test 4 and Phase N smoke 2 (A12): Bob is offered the vending machine, the
/// drinking fountain and send-text, has candy in his pockets and answers with a final
/// WorldPatch: no tool invocation exists, no toy tool was called, ambient context ran
/// anyway (the workflow's choice, not the model's), and the patch applied normally.
async fn available_tools_go_unused_through_the_api(park: &ParkCluster) {
    park.park_world("unused").await;
    let committed = park.commit("unused").await;
    assert_eq!(committed["turn"], json!(1));

    let requests = park.llm.requests();
    let offered: Vec<&noema_toys::llm::RecordedRequest> = requests
        .iter()
        .filter(|r| r.subject.as_deref() == Some("bob"))
        .collect();
    assert_eq!(offered.len(), 1);
    for tool in ["buy_candy", "use_drinking_fountain", "send_text"] {
        assert!(
            offered[0].body.to_string().contains(tool),
            "{tool} was not offered to Bob's model"
        );
    }
    let tools = park
        .all("/source-invocations?world_slug=unused&invocation_kind=model_elected_tool")
        .await;
    assert!(tools.is_empty(), "{tools:?}");
    for path in ["/buy_candy", "/drinking_fountain", "/send"] {
        assert!(park.park.calls(path).is_empty(), "{path} was called");
    }
    let all = park.all("/source-invocations?world_slug=unused").await;
    assert_eq!(
        kinds(&all),
        BTreeMap::from([
            ("ambient_context".to_owned(), 3),
            ("llm_generation".to_owned(), 2)
        ])
    );
    assert!(
        all.iter()
            .filter(|i| i["invocation_kind"] == json!("llm_generation"))
            .all(|i| i["model_output_kind"] == json!("final_patch")
                && i["status"] == json!("succeeded")),
        "{all:?}"
    );

    let world = park.read("/worlds/unused").await;
    assert_eq!(world["current_turn"], json!(1));
    let entity = |id: &str| world["state"]["entities"][id]["state"].clone();
    assert_eq!(entity("bob"), json!("eating a candy bar from his pocket"));
    assert_eq!(entity("vending_machine"), json!("contains one candy bar"));
    let turn = park.read("/worlds/unused/turns/1").await;
    assert_eq!(
        patch_subjects(&turn),
        [(1, "ant".to_owned()), (2, "bob".to_owned())]
    );
    assert_eq!(
        turn["record"]["patches"][1]["patch"],
        seed("example3_world_patch")
    );
}

/// Seed Phase I test 6: the ant and Bob both call `buy_candy` in one turn. The first call
/// (the ant's: subjects run in entity-id order) gets `dispensed`, the second `empty`; both
/// invocations are durable, each the child of its subject's generation, each result went
/// back to its own model only, and the world changed only by the two final patches.
async fn two_agents_and_one_candy_bar_through_the_api(park: &ParkCluster) {
    park.park_world("candy").await;
    let committed = park.commit("candy").await;
    assert_eq!(committed["turn"], json!(1));

    let tools = by_seq(
        park.all("/source-invocations?world_slug=candy&invocation_kind=model_elected_tool")
            .await,
    );
    let seen: Vec<(&Value, &Value, &Value, &Value)> = tools
        .iter()
        .map(|i| {
            (
                &i["workflow_subject_entity_id"],
                &i["tool_name"],
                &i["status"],
                &i["response_json"]["status"],
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                &json!("ant"),
                &json!("buy_candy"),
                &json!("succeeded"),
                &json!("dispensed")
            ),
            (
                &json!("bob"),
                &json!("buy_candy"),
                &json!("succeeded"),
                &json!("empty")
            ),
        ]
    );
    // The machine was really asked twice, with each model's arguments as the body.
    let calls = park.park.calls("/buy_candy");
    let actors: Vec<&Value> = calls.iter().map(|c| &c.body["actor_id"]).collect();
    assert_eq!(actors, [&json!("ant"), &json!("bob")]);
    for (tool, call) in tools.iter().zip(&calls) {
        assert_eq!(tool["request_json"], call.body);
        // Durable: the record reads back whole, and its parent is that subject's generation.
        let id = tool["source_invocation_id"].as_str().unwrap();
        assert_eq!(&park.read(&format!("/source-invocations/{id}")).await, tool);
        let parent = park
            .read(&format!(
                "/source-invocations/{}",
                tool["parent_source_invocation_id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(parent["invocation_kind"], json!("llm_generation"));
        assert_eq!(parent["model_output_kind"], json!("tool_call"));
        assert_eq!(
            parent["workflow_subject_entity_id"],
            tool["workflow_subject_entity_id"]
        );
    }
    // Each result went back as context to the model that asked, and only to it.
    let requests = park.llm.requests();
    let saw = |subject: &str, message: &Value| {
        let message = message.as_str().unwrap();
        requests
            .iter()
            .filter(|r| r.subject.as_deref() == Some(subject))
            .any(|r| r.body.to_string().contains(message))
    };
    assert!(saw("ant", &tools[0]["response_json"]["message"]));
    assert!(saw("bob", &tools[1]["response_json"]["message"]));
    assert!(!saw("ant", &tools[1]["response_json"]["message"]));
    assert!(!saw("bob", &tools[0]["response_json"]["message"]));

    // The world changed through the two final patches alone.
    let world = park.read("/worlds/candy").await;
    let entities = &world["state"]["entities"];
    assert_eq!(entities["vending_machine"]["state"], json!("empty"));
    assert_eq!(entities["ant"]["state"], json!("next to a candy bar"));
    assert_eq!(
        entities["bob"]["memory"],
        json!("I tried the vending machine, but it was empty.")
    );
    let diff = park.read("/worlds/candy/turns/1/diff").await;
    let changed: Vec<&String> = diff["entities"].as_object().unwrap().keys().collect();
    assert_eq!(changed, ["ant", "bob", "vending_machine"]);
    assert_eq!(park.all("/worlds/candy/events?turn=1").await.len(), 2);
}

/// Seed Phase N smoke 1: a scenario with one agent whose workflow is a single LLM node
/// with no ambient sources and no tools: one generation, no source called, a final
/// WorldPatch, and the turn commits.
async fn an_llm_only_workflow_commits_a_turn_through_the_api(park: &ParkCluster) {
    let names = park.install_park().await;
    let workflow = park
        .content("cognition-workflows", &names["simple-workflow-hash"])
        .await;
    assert_eq!(workflow["ambient_sources"], json!([]));
    let scenario = json!({
        "label": "bench",
        "environments": [{"label": "park", "content": "A bench in a quiet park."}],
        "entities": [{"id": "bob", "kind": "agent", "environment_label": "park",
            "state": "sitting on the bench", "memory": ""}]
    });
    park.world_running("bench", &workflow, scenario).await;
    let committed = park.commit("bench").await;
    assert_eq!(committed["turn"], json!(1));

    let all = park.all("/source-invocations?world_slug=bench").await;
    assert_eq!(all.len(), 1, "{all:?}");
    let generation = &all[0];
    assert_eq!(generation["invocation_kind"], json!("llm_generation"));
    assert_eq!(generation["status"], json!("succeeded"));
    assert_eq!(generation["model_output_kind"], json!("final_patch"));
    assert_eq!(generation["workflow_subject_entity_id"], json!("bob"));
    assert!(park.park.log().is_empty(), "a toy source was called");
    let requests = park.llm.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].body["response_format"]["type"],
        json!("json_schema")
    );
    let call = park
        .read(&format!(
            "/llm-calls/{}",
            generation["llm_call_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(call["status"], json!("succeeded"), "{call}");

    let world = park.read("/worlds/bench").await;
    assert_eq!(world["current_turn"], json!(1));
    let bob = &world["state"]["entities"]["bob"];
    assert_eq!(bob["state"], json!("stretching on a bench"));
    assert_eq!(bob["memory"], json!("I stretched."));
    let turn = park.read("/worlds/bench/turns/1").await;
    assert_eq!(patch_subjects(&turn), [(1, "bob".to_owned())]);
    let verify = park.read("/worlds/bench/verify").await;
    assert_eq!(verify["ok"], json!(true), "{verify}");
}

/// Issue 19 item 8 through REST: a workflow authored `per_subject_concurrent`, four
/// subjects. Before its generation each subject waits at a barrier that opens only when all
/// four wait there together, so the turn commits only if they run at once; they answer in
/// the reverse of their order, yet the patches are applied in entity-id byte order with
/// `patch_seq` 1-4. `bob-2`'s first patch names an entity the world lacks: a model-content
/// failure that goes back through its own retry lane (a second, traced LLM call) while the
/// others go on.
async fn concurrent_subjects_commit_in_subject_order_through_the_api(park: &ParkCluster) {
    let names = park.install_park().await;
    let barrier = json!({"version": 1, "label": "barrier", "interface": {"name": "http_json",
        "method": "POST", "url_env": "CHUKWA_TOY_PA_URL", "path": "/barrier", "timeout_ms": 10000}});
    let (status, barrier) = park.post("/response-sources", &barrier).await;
    assert_eq!(status, 201, "{barrier}");
    let mut workflow = park
        .content("cognition-workflows", &names["park-workflow-hash"])
        .await;
    workflow["execution"] = json!("per_subject_concurrent");
    workflow["ambient_sources"] = json!([{
        "id": "meet", "source_ref": {"hash": barrier["hash"]}, "run": "before_subject_workflow",
        "scope": "acting_subject", "visible_to": "acting_subject",
        "request_template": {"name": {"$from": "/world/slug"}, "parties": 4, "timeout_ms": 5000},
        "inject_as": "/ambient/meet"
    }]);
    // Listed out of order: the order of the turn is the ids' byte order, not the document's.
    let agent = |id: &str| {
        json!({"id": id, "kind": "agent", "environment_label": "park",
            "state": "waiting", "memory": ""})
    };
    let scenario = json!({
        "label": "crowd",
        "environments": [{"label": "park", "content": "A crowded park."}],
        "entities": [agent("bob_2"), agent("bob"), agent("bob-2"), agent("ant"),
            {"id": "vending_machine", "kind": "prop", "environment_label": "park",
             "state": "contains one candy bar"}]
    });
    park.world_running("crowd", &workflow, scenario).await;
    let committed = park.commit("crowd").await;
    assert_eq!(committed["turn"], json!(1));

    let turn = park.read("/worlds/crowd/turns/1").await;
    let expected: Vec<(u64, String)> = (1..)
        .zip(CONCURRENT_SUBJECTS.iter().map(|s| (*s).to_owned()))
        .collect();
    assert_eq!(patch_subjects(&turn), expected);
    let diff = park.read("/worlds/crowd/turns/1/diff").await;
    let diffed: Vec<(u64, String)> = diff["patches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["patch_seq"].as_u64().unwrap(),
                p["subject_entity_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(diffed, expected);
    let events = park.all("/worlds/crowd/events?turn=1").await;
    assert_eq!(events.len(), 4);
    let world = park.read("/worlds/crowd").await;
    for subject in CONCURRENT_SUBJECTS {
        assert_eq!(
            world["state"]["entities"][subject]["state"],
            json!(format!("acted ({subject})"))
        );
    }

    // All four met at the barrier: they were in their workflows at the same time.
    let all = by_seq(park.all("/source-invocations?world_slug=crowd").await);
    let met: Vec<&Value> = all
        .iter()
        .filter(|i| i["ambient_source_id"] == json!("meet"))
        .collect();
    assert_eq!(met.len(), 4);
    assert!(
        met.iter()
            .all(|i| i["status"] == json!("succeeded")
                && i["response_json"]["released"] == json!(true)),
        "{met:?}"
    );
    // bob-2's lane: attempt 1 failed on the unknown entity, attempt 2 accepted, each its
    // own invocation and LLM call; the others needed one generation each.
    let lane = |subject: &str| -> Vec<(u64, String)> {
        all.iter()
            .filter(|i| {
                i["invocation_kind"] == json!("llm_generation")
                    && i["workflow_subject_entity_id"] == json!(subject)
            })
            .map(|i| {
                (
                    i["logical_generation_attempt"].as_u64().unwrap(),
                    i["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        lane("bob-2"),
        [(1, "failed".to_owned()), (2, "succeeded".to_owned())]
    );
    for subject in ["ant", "bob", "bob_2"] {
        assert_eq!(lane(subject), [(1, "succeeded".to_owned())], "{subject}");
    }
    let requests = park.llm.requests();
    let second = requests
        .iter()
        .filter(|r| r.subject.as_deref() == Some("bob-2"))
        .nth(1)
        .unwrap();
    assert!(
        second.body.to_string().contains("ghost"),
        "the retry carries the problem: {}",
        second.body
    );
    assert_eq!(park.llm.remaining(), 0);
}

/// Issue 19 item 10 / seed Phase J: the kind-generic MCP tools. `get_component`,
/// `list_components` and `list_uses_of` take the kind as an argument and answer what the
/// kind's own REST routes answer; an unknown kind is a tool error.
async fn components_are_read_by_kind_through_mcp(park: &ParkCluster) {
    let names = park.install_park().await;
    let body = json!({"slug": "listed", "scenario_ref": {"hash": names["park-scenario-hash"]}});
    let (status, world) = park.post("/worlds", &body).await;
    assert_eq!(status, 201, "{world}");

    let listed = mcp(park, "tools/list", json!({})).await;
    let mut tools = Vec::new();
    let mut page = listed;
    loop {
        for tool in page["result"]["tools"].as_array().unwrap() {
            tools.push(tool["name"].as_str().unwrap().to_owned());
        }
        match page["result"]["nextCursor"].as_str() {
            Some(cursor) => page = mcp(park, "tools/list", json!({"cursor": cursor})).await,
            None => break,
        }
    }
    for name in [
        "get_component",
        "list_components",
        "list_uses_of",
        "put_response_source",
    ] {
        assert!(tools.iter().any(|t| t == name), "{name} is not listed");
    }

    let workflow = names["park-workflow-hash"].as_str();
    let got = call_tool(
        park,
        "get_component",
        json!({"kind": "cognition_workflow", "hash": workflow}),
    )
    .await;
    assert_eq!(
        got,
        park.read(&format!("/cognition-workflows/hash/{workflow}"))
            .await
    );
    assert_eq!(got["kind"], json!("cognition_workflow"));

    let sources = call_tool(park, "list_components", json!({"kind": "response_source"})).await;
    let hashes: Vec<&str> = sources["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["hash"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = PARK
        .iter()
        .filter(|c| c.kind == "response_source")
        .map(|c| names[c.name].as_str())
        .collect();
    assert_eq!(hashes, expected);
    assert_eq!(sources, park.read("/response-sources").await);

    let weather = names["weather-result-schema-hash"].as_str();
    let uses = call_tool(
        park,
        "list_uses_of",
        json!({"kind": "json_schema", "hash": weather}),
    )
    .await;
    assert_eq!(
        uses,
        park.read(&format!("/json-schemas/hash/{weather}/uses"))
            .await
    );
    assert!(
        uses["uses"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["hash"] == json!(workflow)),
        "{uses}"
    );
    let scenario = names["park-scenario-hash"].as_str();
    let worlds = call_tool(
        park,
        "list_uses_of",
        json!({"kind": "scenario", "hash": scenario}),
    )
    .await;
    assert_eq!(worlds["uses"][0]["world_slug"], json!("listed"), "{worlds}");

    // The kind is checked: an unknown one, or a hash asked under the wrong kind, fails.
    for arguments in [
        json!({"kind": "prompt_template", "hash": workflow}),
        json!({"kind": "json_schema", "hash": workflow}),
    ] {
        let answer = mcp(
            park,
            "tools/call",
            json!({"name": "get_component", "arguments": arguments}),
        )
        .await;
        assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    }
    let (status, refused) = park.get("/components/prompt_template").await;
    assert_eq!(status, 400, "{refused}");
}

/// A JSON-RPC request to the gateway's MCP endpoint, as the owner.
async fn mcp(park: &ParkCluster, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = owner(&park.cluster)
        .post(park.url("/v1/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.unwrap()
}

/// A tool call that must succeed: its structured content.
async fn call_tool(park: &ParkCluster, name: &str, arguments: Value) -> Value {
    let answer = mcp(
        park,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await;
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    answer["result"]["structuredContent"].clone()
}

/// Issue 19 item 2, `world.anchor = true`: every committed turn — turn 0 with the first
/// commit — is anchored in the ledger, and the ledger's own API serves the anchor: a
/// canonical object naming the world, the turn, its hash and its predecessor's hash.
/// Verification checks each anchor against the ledger.
async fn anchored_turns_are_in_the_ledger(park: &ParkCluster) {
    park.park_world("anchored").await;
    for turn in 1..=3u64 {
        let committed = park.commit("anchored").await;
        assert_eq!(committed["turn"], json!(turn));
        assert!(committed.get("anchor_error").is_none(), "{committed}");
        assert!(committed["anchor_id"].is_string(), "{committed}");
    }
    let turns = park.all("/worlds/anchored/turns").await;
    assert_eq!(turns.len(), 4);
    let mut anchors = Vec::new();
    for turn in &turns {
        let id = turn["anchor_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{turn}"));
        let object = park.read(&format!("/canonicals/{id}")).await;
        assert_eq!(object["created_by"], json!("world:anchored"), "{object}");
        let payload = park.read(&format!("/canonicals/{id}/payload")).await;
        assert_eq!(
            payload,
            json!({
                "kind": "noema.world.turn",
                "world_slug": "anchored",
                "turn": turn["turn"],
                "turn_hash": turn["hash"],
                "previous_turn_hash": turn["previous_turn_hash"],
            })
        );
        anchors.push(id.to_owned());
    }
    anchors.sort();
    anchors.dedup();
    assert_eq!(anchors.len(), 4);
    let verify = park.read("/worlds/anchored/verify").await;
    assert_eq!(
        (&verify["ok"], &verify["anchors_checked"]),
        (&json!(true), &json!(4)),
        "{verify}"
    );
}

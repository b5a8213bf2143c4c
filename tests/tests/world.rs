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
/// own toys playing the park script.
macro_rules! park_cases {
    ($($case:ident),* $(,)?) => {
        park_cases!(@shape all_in_one_sqlite, Sqlite, AllInOne; $($case),*);
        park_cases!(@shape split_sqlite, Sqlite, Split; $($case),*);
        park_cases!(@shape all_in_one_postgres_s3, PostgresS3, AllInOne; $($case),*);
        park_cases!(@shape split_postgres_s3, PostgresS3, Split; $($case),*);
        park_cases!(@shape processes_postgres_s3, PostgresS3, Processes; $($case),*);
    };
    (@shape $module:ident, $backend:ident, $shape:ident; $($case:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let park = super::start(
                        noema_e2e::Backend::$backend,
                        noema_e2e::Shape::$shape,
                        super::park_script(),
                        &[],
                    )
                    .await;
                    super::$case(&park).await;
                    park.stop().await;
                }
            )*
        }
    };
}

park_cases!(
    the_park_runs_three_turns_through_the_api,
    tampering_with_a_stored_turn_is_caught_by_verify,
    a_source_that_answers_no_json_fails_the_turn_with_502,
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

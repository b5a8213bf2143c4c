//! The toys answer as scripted, over real HTTP on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use noema_toys::llm::{SUBJECT_HEADER, TURN_HEADER};
use noema_toys::park::ParkConfig;
use noema_toys::{LlmScript, Park, ScriptedLlm, ToyServer, serve, serve_all};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The seed's examples, from the world crate's verbatim fixtures.
fn seed(name: &str) -> Value {
    let path = format!(
        "{}/../../services/world/tests/fixtures/seed/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

async fn start_llm(script: Value) -> (ScriptedLlm, ToyServer) {
    let llm = ScriptedLlm::new(LlmScript::from_json(&script.to_string()).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = serve(listener, llm.router()).unwrap();
    (llm, server)
}

async fn start_park(config: ParkConfig) -> (Park, ToyServer) {
    let park = Park::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = serve(listener, park.router()).unwrap();
    (park, server)
}

fn chat(stream: bool) -> Value {
    json!({
        "model": "toy",
        "messages": [{"role": "system", "content": "You control Bob."}, {"role": "user", "content": "The park is warm."}],
        "stream": stream,
        "response_format": {"type": "json_schema", "json_schema": {"name": "tool_loop_output", "schema": {"type": "object"}}}
    })
}

async fn ask(server: &ToyServer, subject: &str, turn: u64, body: &Value) -> reqwest::Response {
    noema_tools::tls::client()
        .unwrap()
        .post(format!("{}/v1/chat/completions", server.url()))
        .header(SUBJECT_HEADER, subject)
        .header(TURN_HEADER, turn.to_string())
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_llm_answers_each_subject_and_turn_in_script_order() {
    let final_patch = seed("tool_loop_output_final_patch");
    let (llm, server) = start_llm(json!({"scripts": [
        {"subject": "bob", "turn": 1, "outputs": [{"text": "I am not JSON"}, {"json": seed("tool_loop_output_tool_call")}, {"json": final_patch}]},
        {"subject": "ant", "turn": 1, "outputs": [{"json": seed("example7_world_patch_ant")}]},
        {"outputs": [{"text": "anyone, any turn"}]}
    ]}))
    .await;
    let content = |body: Value| {
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    let answer: Value = ask(&server, "bob", 1, &chat(false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(content(answer.clone()), "I am not JSON");
    assert_eq!(answer["object"], json!("chat.completion"));
    assert_eq!(answer["choices"][0]["finish_reason"], json!("stop"));
    assert_eq!(
        answer["usage"],
        json!({"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11})
    );
    // The ant's script is separate from Bob's.
    let answer: Value = ask(&server, "ant", 1, &chat(false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&content(answer)).unwrap(),
        seed("example7_world_patch_ant")
    );
    let answer: Value = ask(&server, "bob", 1, &chat(false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&content(answer)).unwrap(),
        seed("tool_loop_output_tool_call")
    );
    let answer: Value = ask(&server, "bob", 1, &chat(false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&content(answer)).unwrap(),
        seed("tool_loop_output_final_patch")
    );
    // Bob's turn-1 script is used up; the wildcard answers once, then nothing does.
    let answer: Value = ask(&server, "bob", 1, &chat(false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(content(answer), "anyone, any turn");
    let response = ask(&server, "bob", 1, &chat(false)).await;
    assert_eq!(response.status(), 500);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no script answers subject bob turn 1")
    );

    let requests = llm.requests();
    assert_eq!(requests.len(), 6);
    assert_eq!(requests[1].subject.as_deref(), Some("ant"));
    assert_eq!(requests[1].turn, Some(1));
    assert_eq!(
        requests[0].body["response_format"]["type"],
        json!("json_schema")
    );
    assert_eq!(llm.remaining(), 0);
    let logged: Value = noema_tools::tls::client()
        .unwrap()
        .get(format!("{}/_toys/llm/requests", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(logged.as_array().unwrap().len(), 6);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_llm_streams_server_sent_events_with_usage() {
    let (_, server) = start_llm(json!({"chunk_chars": 8, "scripts": [{"outputs": [{"json": seed("tool_loop_output_tool_call")}]}]})).await;
    let mut body = chat(true);
    body["stream_options"] = json!({"include_usage": true});
    let response = ask(&server, "bob", 1, &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let frames: Vec<&str> = text.split("\n\n").filter(|f| !f.is_empty()).collect();
    assert_eq!(*frames.last().unwrap(), "data: [DONE]");
    let events: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    assert_eq!(events[0]["choices"][0]["delta"]["role"], json!("assistant"));
    let content: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&content).unwrap(),
        seed("tool_loop_output_tool_call")
    );
    let pieces = events
        .iter()
        .filter(|e| {
            e["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        })
        .count();
    assert_eq!(pieces, content.chars().count().div_ceil(8));
    let stop = events
        .iter()
        .find(|e| e["choices"][0]["finish_reason"] == json!("stop"))
        .unwrap();
    assert_eq!(stop["object"], json!("chat.completion.chunk"));
    let usage = events.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["total_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn the_llm_can_refuse_response_format_like_a_provider_without_structured_output() {
    let (_, server) = start_llm(json!({"reject_response_format": true, "scripts": [{"outputs": [{"json": {"kind": "x"}}]}]})).await;
    let response = ask(&server, "bob", 1, &chat(false)).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["param"], json!("response_format"));
    assert_eq!(error["error"]["type"], json!("invalid_request_error"));
    // Without response_format the same toy answers (the refusal is about the format only).
    let mut plain = chat(false);
    plain.as_object_mut().unwrap().remove("response_format");
    assert_eq!(ask(&server, "bob", 1, &plain).await.status(), 200);
}

#[tokio::test]
async fn the_llm_sends_scripted_errors_and_refuses_malformed_requests() {
    let (_, server) = start_llm(
        json!({"scripts": [{"outputs": [{"error": {"status": 503, "message": "overloaded"}}]}]}),
    )
    .await;
    let response = ask(&server, "bob", 1, &chat(false)).await;
    assert_eq!(response.status(), 503);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["message"], json!("overloaded"));
    for body in [
        json!({"model": "toy"}),
        json!({"messages": []}),
        json!({"model": "toy", "messages": [{"role": "user"}]}),
    ] {
        assert_eq!(ask(&server, "bob", 1, &body).await.status(), 400, "{body}");
    }
    let mut bad_format = chat(false);
    bad_format["response_format"] = json!({"type": "json_schema"});
    assert_eq!(ask(&server, "bob", 1, &bad_format).await.status(), 400);
}

#[tokio::test]
async fn the_llm_waits_its_scripted_latency() {
    let (_, server) = start_llm(
        json!({"latency_ms": 100, "scripts": [{"outputs": [{"text": "late", "latency_ms": 150}]}]}),
    )
    .await;
    let started = std::time::Instant::now();
    assert_eq!(ask(&server, "bob", 1, &chat(false)).await.status(), 200);
    assert!(started.elapsed() >= std::time::Duration::from_millis(250));
}

#[test]
fn scripts_load_from_files_and_are_checked() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/park.json");
    let script = LlmScript::from_file(&path).unwrap();
    assert_eq!(script.scripts.len(), 6);
    assert!(LlmScript::from_file(std::path::Path::new("/nonexistent/script.json")).is_err());
    let both = json!({"scripts": [{"outputs": [{"json": {}, "text": "x"}]}]});
    assert!(
        LlmScript::from_json(&both.to_string())
            .unwrap_err()
            .to_string()
            .contains("exactly one")
    );
    let odd = json!({"scripts": [{"outputs": [{"error": {"status": 200, "message": "x"}}]}]});
    assert!(LlmScript::from_json(&odd.to_string()).is_err());
    assert!(LlmScript::from_json("{\"sripts\": []}").is_err());
}

async fn post(server: &ToyServer, path: &str, body: Value) -> (u16, Value) {
    let response = noema_tools::tls::client()
        .unwrap()
        .post(format!("{}{path}", server.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_weather_cools_over_turns() {
    let (_, server) = start_park(ParkConfig::default()).await;
    let mut readings = Vec::new();
    for turn in 1..=6 {
        let (status, answer) = post(&server, "/weather", json!({"environment_label": "park", "turn": turn, "simulation_time": "2026-01-01T00:00:00Z"})).await;
        assert_eq!(status, 200);
        readings.push(answer);
    }
    assert_eq!(readings[0], seed("example4_weather_turn1"));
    assert_eq!(readings[1], seed("example4_weather_turn2"));
    assert_eq!(readings[2], seed("example4_weather_turn3"));
    let temperatures: Vec<u64> = readings
        .iter()
        .map(|r| r["temperature_f"].as_u64().unwrap())
        .collect();
    assert!(
        temperatures.windows(2).all(|w| w[1] < w[0]),
        "{temperatures:?}"
    );
}

#[tokio::test]
async fn the_pa_sometimes_speaks() {
    let (_, server) = start_park(ParkConfig::default()).await;
    for (turn, example) in [
        (1, "example5_pa_turn1"),
        (2, "example5_pa_turn2"),
        (3, "example5_pa_turn3"),
    ] {
        let (_, answer) = post(
            &server,
            "/announcement",
            json!({"speaker_id": "park_pa_speaker", "turn": turn}),
        )
        .await;
        assert_eq!(answer, seed(example), "turn {turn}");
    }
    let (_, answer) = post(
        &server,
        "/announcement",
        json!({"speaker_id": "park_pa_speaker", "turn": 4}),
    )
    .await;
    assert_eq!(answer["announcements"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_phone_gets_spam_and_texts_and_sends() {
    let (park, server) = start_park(ParkConfig::default()).await;
    let inbox = json!({"owner_entity_id": "bob", "phone_entity_id": "bob_phone", "turn": 1});
    let (_, answer) = post(&server, "/inbox", inbox).await;
    assert_eq!(answer, seed("d3_empty_messages"));
    let (_, answer) = post(
        &server,
        "/inbox",
        json!({"owner_entity_id": "bob", "phone_entity_id": "bob_phone", "turn": 3}),
    )
    .await;
    assert_eq!(answer, seed("example6_phone_inbox"));

    let (status, sent) = post(
        &server,
        "/send",
        json!({"from_phone_id": "alice_phone", "to": "bob_phone", "body": "Lunch?"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(sent, json!({"status": "sent", "message_id": "msg-1"}));
    let (_, answer) = post(
        &server,
        "/inbox",
        json!({"owner_entity_id": "bob", "phone_entity_id": "bob_phone", "turn": 4}),
    )
    .await;
    assert_eq!(
        answer,
        json!({"messages": [{"from": "alice_phone", "body": "Lunch?", "kind": "personal"}]})
    );
    // Delivered once.
    let (_, answer) = post(
        &server,
        "/inbox",
        json!({"owner_entity_id": "bob", "phone_entity_id": "bob_phone", "turn": 5}),
    )
    .await;
    assert_eq!(answer, json!({"messages": []}));
    assert_eq!(park.calls("/send").len(), 1);
    assert_eq!(park.calls("/inbox").len(), 4);
}

#[tokio::test]
async fn the_vending_machine_has_one_candy_bar() {
    let (park, server) = start_park(ParkConfig::default()).await;
    let arguments = seed("tool_loop_output_tool_call")["tool_call"]["arguments"].clone();
    let (_, first) = post(&server, "/buy_candy", arguments.clone()).await;
    assert_eq!(first, seed("example1_vending_result_dispensed"));
    let (_, second) = post(
        &server,
        "/buy_candy",
        json!({"actor_id": "ant", "machine_id": "vending_machine", "button": "C"}),
    )
    .await;
    assert_eq!(second, seed("example2_vending_result_empty"));
    // Another machine has its own candy bar.
    let (_, other) = post(
        &server,
        "/buy_candy",
        json!({"actor_id": "bob", "machine_id": "lobby_machine", "button": "A"}),
    )
    .await;
    assert_eq!(other["status"], json!("dispensed"));
    park.reset();
    let (_, again) = post(&server, "/buy_candy", arguments).await;
    assert_eq!(again["status"], json!("dispensed"));

    let (_, more) = start_park(ParkConfig { candy_bars: 2 }).await;
    let (_, first) = post(
        &more,
        "/buy_candy",
        json!({"actor_id": "bob", "machine_id": "m", "button": "C"}),
    )
    .await;
    assert_eq!(first["remaining"], json!(1));
}

#[tokio::test]
async fn the_fountain_flows_and_bad_requests_are_422() {
    let (park, server) = start_park(ParkConfig::default()).await;
    let (status, answer) = post(
        &server,
        "/drinking_fountain",
        json!({"actor_id": "bob", "fountain_id": "drinking_fountain"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(answer["status"], json!("water_flowing"));
    let (status, answer) = post(&server, "/buy_candy", json!({"actor_id": "bob"})).await;
    assert_eq!(status, 422);
    assert_eq!(answer["error"], json!("machine_id is required"));
    let (status, _) = post(&server, "/weather", json!("not an object")).await;
    assert_eq!(status, 422);
    let log: Value = noema_tools::tls::client()
        .unwrap()
        .get(format!("{}/_toys/park/log", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(log.as_array().unwrap().len(), 3);
    assert_eq!(park.log()[1].status, 422);
}

#[tokio::test]
async fn the_fault_endpoints_fail_as_named() {
    let (_, server) = start_park(ParkConfig::default()).await;
    let (status, body) = post(&server, "/faults/http_500", json!({})).await;
    assert_eq!((status, body), (500, json!({"error": "the toy is broken"})));
    let response = noema_tools::tls::client()
        .unwrap()
        .post(format!("{}/faults/not_json", server.url()))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/plain");
    assert!(serde_json::from_str::<Value>(&response.text().await.unwrap()).is_err());
    let (status, body) = post(&server, "/faults/schema_invalid", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(body["temperature"], json!("cold"));
    let (status, body) = post(&server, "/faults/slow", json!({"ms": 10})).await;
    assert_eq!((status, body), (200, json!({"waited_ms": 10})));
}

#[tokio::test]
async fn every_toy_is_served_on_one_port() {
    let llm = ScriptedLlm::new(
        LlmScript::from_file(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/park.json"),
        )
        .unwrap(),
    );
    let park = Park::new(ParkConfig::default());
    let server = serve_all("127.0.0.1:0".parse().unwrap(), &llm, &park)
        .await
        .unwrap();
    let answer: Value = ask(&server, "ant", 1, &chat(false))
        .await
        .json()
        .await
        .unwrap();
    let content: Value =
        serde_json::from_str(answer["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["patch"], seed("example7_world_patch_ant"));
    let (status, _) = post(
        &server,
        "/weather",
        json!({"environment_label": "park", "turn": 1}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        noema_tools::tls::client()
            .unwrap()
            .get(format!("{}/healthz", server.url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "ok"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_barrier_releases_callers_only_when_enough_wait_together() {
    let (park, server) = start_park(ParkConfig::default()).await;
    let call = |body: Value| {
        let url = format!("{}/barrier", server.url());
        async move {
            let response = noema_tools::tls::client()
                .unwrap()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        }
    };
    // Three callers at once meet.
    let body = json!({"name": "three", "parties": 3, "timeout_ms": 5000});
    let met = futures::future::join_all((0..3).map(|_| call(body.clone()))).await;
    assert!(
        met.iter()
            .all(|(status, answer)| *status == 200 && answer["released"] == json!(true)),
        "{met:?}"
    );
    // Two of three never do: both give up.
    let body = json!({"name": "two-of-three", "parties": 3, "timeout_ms": 300});
    let short = futures::future::join_all((0..2).map(|_| call(body.clone()))).await;
    assert!(short.iter().all(|(status, _)| *status == 504), "{short:?}");
    assert_eq!(park.calls("/barrier").len(), 5);
}

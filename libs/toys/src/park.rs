//! The seed's toy sources, with the request and response shapes of its examples. Each is a
//! `POST` of JSON answered with JSON; state that matters (the vending machine's stock, sent
//! texts) lives in the server, and anything that changes over time is computed from the
//! request's `turn` (D19: no scheduler).
//!
//! | path | request | answer |
//! |---|---|---|
//! | `/weather` | `{"environment_label", "turn", "simulation_time"?}` | turn 1 72°F sunny, 2 64°F windy, 3 55°F cold, then 4°F colder per turn down to 20°F |
//! | `/announcement` | `{"speaker_id", "turn"}` | `{"announcements": []}` on odd turns, one announcement on even turns |
//! | `/inbox` | `{"owner_entity_id", "phone_entity_id", "turn"}` | spam every third turn (3, 6, …), plus texts sent to this phone or its owner |
//! | `/send` | `{"from_phone_id", "to", "body"}` | `{"status": "sent", "message_id"}` |
//! | `/buy_candy` | `{"actor_id", "machine_id", "button"}` | `dispensed` while the machine has stock (one candy bar), then `empty` |
//! | `/drinking_fountain` | `{"actor_id", "fountain_id"}` | `{"status": "water_flowing", "message"}` |
//! | `/faults/http_500`, `/faults/not_json`, `/faults/schema_invalid`, `/faults/slow` | anything | a 500, a non-JSON body, JSON of the wrong shape, a slow answer (`{"ms": …}`, default 2000) |
//! | `/barrier` | `{"name", "parties", "timeout_ms"?}` | held until `parties` requests of one `name` are waiting together, then `{"released": true, "parties"}` for all of them; a 504 JSON error when they do not meet within `timeout_ms` (default 5000). What proves that callers run concurrently, and how many at most, without timing anything. |
//!
//! A request missing a field gets a 422 JSON error. `GET /_toys/park/log` lists every call;
//! `POST /_toys/park/reset` restocks the machine and forgets texts and calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Value, json};

/// What the toy sources start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkConfig {
    /// Candy bars in each vending machine at the start.
    pub candy_bars: u64,
}

impl Default for ParkConfig {
    fn default() -> Self {
        ParkConfig { candy_bars: 1 }
    }
}

/// One call, as logged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoggedCall {
    pub path: String,
    pub body: Value,
    pub status: u16,
    pub response: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct SentText {
    message_id: String,
    from_phone_id: String,
    to: String,
    body: String,
    delivered: bool,
}

#[derive(Default)]
struct ParkState {
    sold: HashMap<String, u64>,
    texts: Vec<SentText>,
    log: Vec<LoggedCall>,
    /// Barriers by name: how many wait, and the signal that releases them.
    barriers: HashMap<String, (u64, Arc<tokio::sync::Notify>)>,
}

struct Inner {
    config: ParkConfig,
    state: Mutex<ParkState>,
}

/// The toy sources; clones share one state.
#[derive(Clone)]
pub struct Park {
    inner: Arc<Inner>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Announcements the PA makes, in rotation, on even turns.
pub const ANNOUNCEMENTS: [&str; 3] = [
    "Attention park visitors: the east vending area is closed for maintenance.",
    "The park closes at sunset. Please take your belongings with you.",
    "A lost child is waiting at the fountain. Parents, please come forward.",
];

/// The spam the phone receives every third turn (the seed's Example 6).
pub fn spam() -> Value {
    json!({"from": "Unknown", "body": "Limited time offer: free candy coupons!", "kind": "spam"})
}

/// The weather of a turn: the seed's three readings, then colder.
pub fn weather(turn: u64) -> Value {
    match turn {
        0 | 1 => json!({"temperature_f": 72, "condition": "sunny", "message": "Warm and sunny."}),
        2 => {
            json!({"temperature_f": 64, "condition": "windy", "message": "A cold front is arriving."})
        }
        3 => {
            json!({"temperature_f": 55, "condition": "cold", "message": "The cold front has settled over the park."})
        }
        n => {
            let drop = (n - 3).saturating_mul(4);
            let temperature = 55u64.saturating_sub(drop).max(20);
            json!({"temperature_f": temperature, "condition": "cold", "message": "It keeps getting colder."})
        }
    }
}

/// The PA's announcements on a turn.
pub fn announcements(turn: u64) -> Value {
    if turn.is_multiple_of(2) && turn > 0 {
        let index = usize::try_from((turn / 2 - 1) % 3).unwrap_or_default();
        json!({"announcements": [ANNOUNCEMENTS[index]]})
    } else {
        json!({"announcements": []})
    }
}

impl Park {
    pub fn new(config: ParkConfig) -> Park {
        Park {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(ParkState::default()),
            }),
        }
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/weather", post(weather_handler))
            .route("/announcement", post(announcement_handler))
            .route("/inbox", post(inbox_handler))
            .route("/send", post(send_handler))
            .route("/buy_candy", post(buy_candy_handler))
            .route("/drinking_fountain", post(fountain_handler))
            .route("/faults/http_500", post(fault_500))
            .route("/faults/not_json", post(fault_not_json))
            .route("/faults/schema_invalid", post(fault_schema_invalid))
            .route("/faults/slow", post(fault_slow))
            .route("/barrier", post(barrier_handler))
            .route("/_toys/park/log", get(log_handler))
            .route("/_toys/park/reset", post(reset_handler))
            .route("/healthz", get(|| async { "ok" }))
            .with_state(self.clone())
    }

    /// Every call so far, in order.
    pub fn log(&self) -> Vec<LoggedCall> {
        lock(&self.inner.state).log.clone()
    }

    /// Calls to `path` so far.
    pub fn calls(&self, path: &str) -> Vec<LoggedCall> {
        self.log().into_iter().filter(|c| c.path == path).collect()
    }

    pub fn reset(&self) {
        *lock(&self.inner.state) = ParkState::default();
    }

    fn answer(&self, path: &str, body: Value, status: StatusCode, response: Value) -> Response {
        lock(&self.inner.state).log.push(LoggedCall {
            path: path.to_owned(),
            body,
            status: status.as_u16(),
            response: response.clone(),
        });
        (status, Json(response)).into_response()
    }
}

/// The request body as a JSON object, and the named fields present in it.
fn fields<'a>(body: &'a Value, names: &[&str]) -> Result<Vec<&'a Value>, String> {
    if !body.is_object() {
        return Err("the body must be a JSON object".to_owned());
    }
    names
        .iter()
        .map(|name| {
            body.get(*name)
                .filter(|v| !v.is_null())
                .ok_or_else(|| format!("{name} is required"))
        })
        .collect()
}

fn parse(bytes: &Bytes) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

/// Answers `path`: 422 when a field is missing, else what `make` computes.
fn handle(
    park: &Park,
    path: &str,
    bytes: &Bytes,
    names: &[&str],
    make: impl FnOnce(&[&Value]) -> Value,
) -> Response {
    let body = parse(bytes);
    match fields(&body, names) {
        Err(message) => {
            let response = json!({"error": message});
            park.answer(path, body, StatusCode::UNPROCESSABLE_ENTITY, response)
        }
        Ok(values) => {
            let response = make(&values);
            park.answer(path, body.clone(), StatusCode::OK, response)
        }
    }
}

fn turn_of(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

async fn weather_handler(State(park): State<Park>, bytes: Bytes) -> Response {
    handle(
        &park,
        "/weather",
        &bytes,
        &["environment_label", "turn"],
        |f| weather(turn_of(f[1])),
    )
}

async fn announcement_handler(State(park): State<Park>, bytes: Bytes) -> Response {
    handle(
        &park,
        "/announcement",
        &bytes,
        &["speaker_id", "turn"],
        |f| announcements(turn_of(f[1])),
    )
}

async fn inbox_handler(State(park): State<Park>, bytes: Bytes) -> Response {
    let inner = park.clone();
    handle(
        &park,
        "/inbox",
        &bytes,
        &["owner_entity_id", "phone_entity_id", "turn"],
        move |f| {
            let owner = f[0].as_str().unwrap_or_default();
            let phone = f[1].as_str().unwrap_or_default();
            let turn = turn_of(f[2]);
            let mut messages = Vec::new();
            if turn > 0 && turn.is_multiple_of(3) {
                messages.push(spam());
            }
            let mut state = lock(&inner.inner.state);
            for text in state
                .texts
                .iter_mut()
                .filter(|t| !t.delivered && (t.to == phone || t.to == owner))
            {
                text.delivered = true;
                messages.push(
                    json!({"from": text.from_phone_id, "body": text.body, "kind": "personal"}),
                );
            }
            json!({"messages": messages})
        },
    )
}

async fn send_handler(State(park): State<Park>, bytes: Bytes) -> Response {
    let inner = park.clone();
    handle(
        &park,
        "/send",
        &bytes,
        &["from_phone_id", "to", "body"],
        move |f| {
            let mut state = lock(&inner.inner.state);
            let message_id = format!("msg-{}", state.texts.len() + 1);
            state.texts.push(SentText {
                message_id: message_id.clone(),
                from_phone_id: f[0].as_str().unwrap_or_default().to_owned(),
                to: f[1].as_str().unwrap_or_default().to_owned(),
                body: f[2].as_str().unwrap_or_default().to_owned(),
                delivered: false,
            });
            json!({"status": "sent", "message_id": message_id})
        },
    )
}

async fn buy_candy_handler(State(park): State<Park>, bytes: Bytes) -> Response {
    let inner = park.clone();
    handle(
        &park,
        "/buy_candy",
        &bytes,
        &["actor_id", "machine_id", "button"],
        move |f| {
            let machine = f[1].as_str().unwrap_or_default().to_owned();
            let stock = inner.inner.config.candy_bars;
            let mut state = lock(&inner.inner.state);
            let sold = state.sold.entry(machine).or_default();
            if *sold < stock {
                *sold += 1;
                json!({"status": "dispensed", "remaining": stock - *sold, "message": "A candy bar was dispensed."})
            } else {
                json!({"status": "empty", "remaining": 0, "message": "No candy bars remain."})
            }
        },
    )
}

async fn fountain_handler(State(park): State<Park>, bytes: Bytes) -> Response {
    handle(
        &park,
        "/drinking_fountain",
        &bytes,
        &["actor_id", "fountain_id"],
        |_| json!({"status": "water_flowing", "message": "Cold water arcs from the fountain."}),
    )
}

async fn fault_500(State(park): State<Park>, bytes: Bytes) -> Response {
    park.answer(
        "/faults/http_500",
        parse(&bytes),
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"error": "the toy is broken"}),
    )
}

async fn fault_not_json(State(park): State<Park>, bytes: Bytes) -> Response {
    let text = "service temporarily unavailable";
    lock(&park.inner.state).log.push(LoggedCall {
        path: "/faults/not_json".to_owned(),
        body: parse(&bytes),
        status: 200,
        response: Value::String(text.to_owned()),
    });
    ([(header::CONTENT_TYPE, "text/plain")], text).into_response()
}

async fn fault_schema_invalid(State(park): State<Park>, bytes: Bytes) -> Response {
    park.answer(
        "/faults/schema_invalid",
        parse(&bytes),
        StatusCode::OK,
        json!({"temperature": "cold", "announcements": "none", "messages": 3}),
    )
}

async fn fault_slow(State(park): State<Park>, bytes: Bytes) -> Response {
    let body = parse(&bytes);
    let ms = body["ms"].as_u64().unwrap_or(2000);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    park.answer(
        "/faults/slow",
        body,
        StatusCode::OK,
        json!({"waited_ms": ms}),
    )
}

async fn barrier_handler(State(park): State<Park>, bytes: Bytes) -> Response {
    let body = parse(&bytes);
    let (Some(name), Some(parties)) = (body["name"].as_str(), body["parties"].as_u64()) else {
        let response = json!({"error": "name (a string) and parties (a number) are required"});
        return park.answer("/barrier", body, StatusCode::UNPROCESSABLE_ENTITY, response);
    };
    let timeout = Duration::from_millis(body["timeout_ms"].as_u64().unwrap_or(5000));
    let signal = {
        let mut state = lock(&park.inner.state);
        let entry = state
            .barriers
            .entry(name.to_owned())
            .or_insert_with(|| (0, Arc::new(tokio::sync::Notify::new())));
        entry.0 += 1;
        if entry.0 >= parties {
            let signal = Arc::clone(&entry.1);
            state.barriers.remove(name);
            signal.notify_waiters();
            None
        } else {
            // Registered as a waiter now, under the lock: the release cannot slip past it.
            Some(Arc::clone(&entry.1).notified_owned())
        }
    };
    let released = match signal {
        None => true,
        Some(waiting) => tokio::time::timeout(timeout, waiting).await.is_ok(),
    };
    if released {
        park.answer(
            "/barrier",
            body,
            StatusCode::OK,
            json!({"released": true, "parties": parties}),
        )
    } else {
        if let Some(entry) = lock(&park.inner.state).barriers.get_mut(name) {
            entry.0 = entry.0.saturating_sub(1);
        }
        let response = json!({"error": format!("{parties} parties never met at barrier {name:?}")});
        park.answer("/barrier", body, StatusCode::GATEWAY_TIMEOUT, response)
    }
}

async fn log_handler(State(park): State<Park>) -> Json<Vec<LoggedCall>> {
    Json(park.log())
}

async fn reset_handler(State(park): State<Park>) -> StatusCode {
    park.reset();
    StatusCode::NO_CONTENT
}

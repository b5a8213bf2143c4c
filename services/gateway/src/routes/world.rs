//! The world kernel's worlds (seed 003, issue 19 items 2, 9 and 10): create a world from an
//! assembled scenario, run attempted turns, and browse what happened — worlds, turns, the
//! state at a turn, turn diffs, events, entity histories, attempts, source invocations and
//! LLM calls. Records are the JSON the world service writes. Every browse route accepts
//! `?format=json`.
//!
//! `POST /worlds/{slug}/turns` answers 201 with the committed turn, or the failed attempt
//! with 502 (a source or the LLM provider failed) or 422 (the model's output stayed
//! invalid); 409 when another attempt holds the world's lease.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use noema_proto::world::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::world_components::{FormatQuery, PageQuery, WORLD, check_format, json_of, next_token};
use crate::error::ApiError;
use crate::features;
use crate::forward::{Caller, JsonBody, RepeatedQuery, first};
use crate::go_json::GoJson;
use crate::reply::{Answer, Created};
use crate::route::{OperationDoc, Reply, Route, Schemas, Verb, param_grammar};
use crate::routes::world_components::page_grammar;

/// A record the world service wrote (a world, turn, attempt, invocation, LLM call, event,
/// diff or history), as JSON.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct Record(pub Value);

/// A page of records.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RecordList {
    pub items: Vec<Value>,
    /// Null on the last page.
    pub next_page_token: Option<String>,
}

/// `{"slug", "scenario_ref": {"hash"}}`. Both are required; the service checks them
/// (after the caller's token), so a request without a token is a 401 whatever its body.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["slug", "scenario_ref"]))]
pub struct CreateWorldInput {
    /// `[a-z0-9][a-z0-9_-]{0,63}`.
    #[serde(default)]
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9_-]{0,63}$"))]
    pub slug: String,
    #[serde(default)]
    pub scenario_ref: HashRefInput,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct HashRefInput {
    #[schemars(regex(pattern = "^(sha256:)?[0-9a-f]{64}$"))]
    pub hash: String,
}

/// A committed attempt.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CommittedBody {
    pub attempt_id: String,
    /// `committed`.
    pub status: &'static str,
    pub turn: u64,
    /// The committed turn record's hash.
    pub turn_hash: String,
    /// With `world.anchor`: the ledger object anchoring the turn's hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor_id: Option<String>,
    /// With `world.anchor`: why anchoring failed (the turn is committed; a later turn
    /// anchors it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor_error: Option<String>,
}

/// A failed attempt: nothing was committed; its traces stay.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FailedBody {
    pub attempt_id: String,
    /// `failed`.
    pub status: &'static str,
    /// `source_http_error`, `source_invalid_json`, `source_schema_invalid`,
    /// `llm_provider_error`, `structured_output_rejected` (502) or `model_output_invalid`
    /// (422).
    pub failure_class: String,
    pub failure_message: String,
}

/// How `POST /worlds/{slug}/turns` ended.
pub enum TurnAnswer {
    Committed(CommittedBody),
    Failed(FailedBody),
}

impl IntoResponse for TurnAnswer {
    fn into_response(self) -> Response {
        match self {
            TurnAnswer::Committed(body) => (StatusCode::CREATED, GoJson(body)).into_response(),
            TurnAnswer::Failed(body) => {
                let status = if body.failure_class == "model_output_invalid" {
                    StatusCode::UNPROCESSABLE_ENTITY
                } else {
                    StatusCode::BAD_GATEWAY
                };
                (status, GoJson(body)).into_response()
            }
        }
    }
}

impl Reply for TurnAnswer {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.json_response::<CommittedBody>(schemas, 201, "The attempt committed its turn");
        doc.json_response::<FailedBody>(
            schemas,
            502,
            "The attempt failed: a source or the LLM provider failed",
        );
        doc.json_response::<FailedBody>(
            schemas,
            422,
            "The attempt failed: the model's output stayed invalid within its limits",
        );
    }
}

/// The state of a world at a committed turn.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StateBody {
    pub world_slug: String,
    pub turn: u64,
    pub simulation_time: String,
    pub state: Value,
}

/// A committed turn.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TurnBody {
    pub world_slug: String,
    pub turn: u64,
    /// SHA-256 of the record's JCS bytes.
    pub hash: String,
    /// Null for turn 0.
    pub previous_turn_hash: Option<String>,
    pub simulation_time: String,
    /// Null for turn 0.
    pub attempt_id: Option<String>,
    pub committed_at: String,
    pub anchor_id: Option<String>,
    /// `{world_slug, turn, previous_turn_hash, simulation_time, state, patches}`; absent in
    /// listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<Value>,
}

/// A page of committed turns, oldest first (without their records).
#[derive(Debug, Serialize, JsonSchema)]
pub struct TurnList {
    pub items: Vec<TurnBody>,
    /// Null on the last page.
    pub next_page_token: Option<String>,
}

/// What verifying a world's history found.
#[derive(Debug, Serialize, JsonSchema)]
pub struct VerifyBody {
    pub world_slug: String,
    pub ok: bool,
    pub turns_checked: u64,
    pub head_hash: String,
    /// The first turn where the history does not hold together.
    pub broken_turn: Option<u64>,
    pub problem: Option<String>,
    pub anchors_checked: u64,
}

/// `GET /worlds/{slug}/events` parameters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct EventsQuery {
    /// Only this turn's events.
    #[serde(default, deserialize_with = "first")]
    pub turn: Option<String>,
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["json"]))]
    pub format: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub page_size: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub page_token: Option<String>,
}

/// `GET /source-invocations` filters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct InvocationsQuery {
    #[serde(default, deserialize_with = "first")]
    pub world_slug: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub attempt_id: Option<String>,
    /// `llm_generation`, `ambient_context` or `model_elected_tool`.
    #[serde(default, deserialize_with = "first")]
    pub invocation_kind: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub source_hash: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub workflow_hash: Option<String>,
    /// The workflow subject's entity id.
    #[serde(default, deserialize_with = "first")]
    pub subject: Option<String>,
    /// `running`, `succeeded`, `failed` or `interrupted`.
    #[serde(default, deserialize_with = "first")]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["json"]))]
    pub format: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub page_size: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub page_token: Option<String>,
}

/// `GET /llm-calls` filters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct LlmCallsQuery {
    #[serde(default, deserialize_with = "first")]
    pub world_slug: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub attempt_id: Option<String>,
    #[serde(default, deserialize_with = "first")]
    #[schemars(extend("enum" = ["json"]))]
    pub format: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub page_size: Option<String>,
    #[serde(default, deserialize_with = "first")]
    pub page_token: Option<String>,
}

fn page(format: Option<String>, size: Option<String>, token: Option<String>) -> PageQuery {
    PageQuery {
        format,
        page_size: size,
        page_token: token,
    }
}

fn turn_number(text: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::invalid(format!("turn {text:?} is not a turn number")))
}

/// A `{turn}` path segment as a number. The services authenticate, so a segment that is
/// no number first goes through `GetWorld` (same `world:read` scope): a caller without a
/// token, or without the scope, hears 401/403 as on every route, before a 400 about the
/// path.
async fn path_turn(caller: &Caller, slug: &str, text: &str) -> Result<u64, ApiError> {
    match turn_number(text) {
        Ok(turn) => Ok(turn),
        Err(invalid) => {
            let request = pb::GetWorldRequest {
                slug: slug.to_owned(),
            };
            caller.world().get_world(caller.request(request)).await?;
            Err(invalid)
        }
    }
}

fn turn_body(turn: pb::Turn, with_record: bool) -> Result<TurnBody, ApiError> {
    let record = if with_record {
        Some(json_of(&turn.record_jcs)?)
    } else {
        None
    };
    let some = |text: String| Some(text).filter(|t| !t.is_empty());
    Ok(TurnBody {
        world_slug: turn.world_slug,
        turn: turn.turn,
        hash: turn.hash,
        previous_turn_hash: some(turn.previous_turn_hash),
        simulation_time: turn.simulation_time,
        attempt_id: some(turn.attempt_id),
        committed_at: turn.committed_at,
        anchor_id: some(turn.anchor_id),
        record,
    })
}

fn records<T>(items: Vec<T>, json: impl Fn(&T) -> &[u8]) -> Result<Vec<Value>, ApiError> {
    items.iter().map(|item| json_of(json(item))).collect()
}

async fn create_world(
    caller: Caller,
    JsonBody(input): JsonBody<CreateWorldInput>,
) -> Result<Created<Record>, ApiError> {
    let request = pb::CreateWorldRequest {
        slug: input.slug,
        scenario_hash: input.scenario_ref.hash,
    };
    let world = caller
        .world()
        .create_world(caller.request(request))
        .await?
        .into_inner();
    Ok(Created(Record(json_of(&world.world_json)?)))
}

async fn list_worlds(
    caller: Caller,
    RepeatedQuery(query): RepeatedQuery<PageQuery>,
) -> Answer<RecordList> {
    let request = pb::ListWorldsRequest {
        page: Some(query.page()?),
    };
    let reply = caller
        .world()
        .list_worlds(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RecordList {
        items: records(reply.worlds, |w| &w.world_json)?,
        next_page_token: next_token(reply.page),
    }))
}

async fn get_world(
    caller: Caller,
    Path(slug): Path<String>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<Record> {
    query.check()?;
    let world = caller
        .world()
        .get_world(caller.request(pb::GetWorldRequest { slug }))
        .await?
        .into_inner();
    Ok(GoJson(Record(json_of(&world.world_json)?)))
}

async fn run_turn(caller: Caller, Path(slug): Path<String>) -> Result<TurnAnswer, ApiError> {
    let reply = caller
        .world()
        .run_turn(caller.request(pb::RunTurnRequest { slug }))
        .await?
        .into_inner();
    let some = |text: String| Some(text).filter(|t| !t.is_empty());
    Ok(if reply.status == "committed" {
        TurnAnswer::Committed(CommittedBody {
            attempt_id: reply.attempt_id,
            status: "committed",
            turn: reply.turn,
            turn_hash: reply.turn_hash,
            anchor_id: some(reply.anchor_id),
            anchor_error: some(reply.anchor_error),
        })
    } else {
        TurnAnswer::Failed(FailedBody {
            attempt_id: reply.attempt_id,
            status: "failed",
            failure_class: reply.failure_class,
            failure_message: reply.failure_message,
        })
    })
}

async fn list_turns(
    caller: Caller,
    Path(slug): Path<String>,
    RepeatedQuery(query): RepeatedQuery<PageQuery>,
) -> Answer<TurnList> {
    let request = pb::ListTurnsRequest {
        slug,
        page: Some(query.page()?),
    };
    let reply = caller
        .world()
        .list_turns(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(TurnList {
        items: reply
            .turns
            .into_iter()
            .map(|t| turn_body(t, false))
            .collect::<Result<_, _>>()?,
        next_page_token: next_token(reply.page),
    }))
}

async fn fetch_turn(caller: &Caller, slug: String, turn: &str) -> Result<pb::Turn, ApiError> {
    let request = pb::GetTurnRequest {
        turn: path_turn(caller, &slug, turn).await?,
        slug,
    };
    Ok(caller
        .world()
        .get_turn(caller.request(request))
        .await?
        .into_inner())
}

async fn get_turn(
    caller: Caller,
    Path((slug, turn)): Path<(String, String)>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<TurnBody> {
    query.check()?;
    let turn = fetch_turn(&caller, slug, &turn).await?;
    Ok(GoJson(turn_body(turn, true)?))
}

async fn get_state(
    caller: Caller,
    Path((slug, turn)): Path<(String, String)>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<StateBody> {
    query.check()?;
    let turn = fetch_turn(&caller, slug, &turn).await?;
    let mut record = json_of(&turn.record_jcs)?;
    Ok(GoJson(StateBody {
        world_slug: turn.world_slug,
        turn: turn.turn,
        simulation_time: turn.simulation_time,
        state: record["state"].take(),
    }))
}

async fn get_diff(
    caller: Caller,
    Path((slug, turn)): Path<(String, String)>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<Record> {
    query.check()?;
    let request = pb::GetTurnRequest {
        turn: path_turn(&caller, &slug, &turn).await?,
        slug,
    };
    let diff = caller
        .world()
        .get_turn_diff(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Record(json_of(&diff.diff_json)?)))
}

async fn verify_world(
    caller: Caller,
    Path(slug): Path<String>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<VerifyBody> {
    query.check()?;
    let reply = caller
        .world()
        .verify_world(caller.request(pb::VerifyWorldRequest { slug: slug.clone() }))
        .await?
        .into_inner();
    Ok(GoJson(VerifyBody {
        world_slug: slug,
        ok: reply.ok,
        turns_checked: reply.turns_checked,
        head_hash: reply.head_hash,
        broken_turn: (!reply.ok).then_some(reply.broken_turn),
        problem: Some(reply.problem).filter(|p| !p.is_empty()),
        anchors_checked: reply.anchors_checked,
    }))
}

async fn list_attempts(
    caller: Caller,
    Path(slug): Path<String>,
    RepeatedQuery(query): RepeatedQuery<PageQuery>,
) -> Answer<RecordList> {
    let request = pb::ListAttemptsRequest {
        slug,
        page: Some(query.page()?),
    };
    let reply = caller
        .world()
        .list_attempts(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RecordList {
        items: records(reply.attempts, |a| &a.attempt_json)?,
        next_page_token: next_token(reply.page),
    }))
}

async fn list_events(
    caller: Caller,
    Path(slug): Path<String>,
    RepeatedQuery(query): RepeatedQuery<EventsQuery>,
) -> Answer<RecordList> {
    let turn = match query.turn.as_deref() {
        None | Some("") => 0,
        Some(text) => turn_number(text)?,
    };
    let request = pb::ListEventsRequest {
        slug,
        turn,
        page: Some(page(query.format, query.page_size, query.page_token).page()?),
    };
    let reply = caller
        .world()
        .list_events(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RecordList {
        items: records(reply.events, |e| &e.event_json)?,
        next_page_token: next_token(reply.page),
    }))
}

async fn entity_history(
    caller: Caller,
    Path((slug, entity_id)): Path<(String, String)>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<Record> {
    query.check()?;
    let request = pb::GetEntityHistoryRequest { slug, entity_id };
    let history = caller
        .world()
        .get_entity_history(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Record(json_of(&history.history_json)?)))
}

async fn get_attempt(
    caller: Caller,
    Path(attempt_id): Path<String>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<Record> {
    query.check()?;
    let attempt = caller
        .world()
        .get_attempt(caller.request(pb::GetAttemptRequest { attempt_id }))
        .await?
        .into_inner();
    Ok(GoJson(Record(json_of(&attempt.attempt_json)?)))
}

async fn invocations(
    caller: &Caller,
    request: pb::ListSourceInvocationsRequest,
) -> Answer<RecordList> {
    let reply = caller
        .world()
        .list_source_invocations(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RecordList {
        items: records(reply.invocations, |i| &i.invocation_json)?,
        next_page_token: next_token(reply.page),
    }))
}

async fn attempt_invocations(
    caller: Caller,
    Path(attempt_id): Path<String>,
    RepeatedQuery(query): RepeatedQuery<PageQuery>,
) -> Answer<RecordList> {
    let request = pb::ListSourceInvocationsRequest {
        attempt_id,
        page: Some(query.page()?),
        ..Default::default()
    };
    invocations(&caller, request).await
}

async fn list_invocations(
    caller: Caller,
    RepeatedQuery(q): RepeatedQuery<InvocationsQuery>,
) -> Answer<RecordList> {
    let request = pb::ListSourceInvocationsRequest {
        world_slug: q.world_slug.unwrap_or_default(),
        attempt_id: q.attempt_id.unwrap_or_default(),
        invocation_kind: q.invocation_kind.unwrap_or_default(),
        source_hash: q.source_hash.unwrap_or_default(),
        workflow_hash: q.workflow_hash.unwrap_or_default(),
        subject_entity_id: q.subject.unwrap_or_default(),
        status: q.status.unwrap_or_default(),
        page: Some(page(q.format, q.page_size, q.page_token).page()?),
    };
    invocations(&caller, request).await
}

async fn get_invocation(
    caller: Caller,
    Path(source_invocation_id): Path<String>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<Record> {
    query.check()?;
    let request = pb::GetSourceInvocationRequest {
        source_invocation_id,
    };
    let invocation = caller
        .world()
        .get_source_invocation(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(Record(json_of(&invocation.invocation_json)?)))
}

async fn list_llm_calls(
    caller: Caller,
    RepeatedQuery(q): RepeatedQuery<LlmCallsQuery>,
) -> Answer<RecordList> {
    let request = pb::ListLlmCallsRequest {
        world_slug: q.world_slug.unwrap_or_default(),
        attempt_id: q.attempt_id.unwrap_or_default(),
        page: Some(page(q.format, q.page_size, q.page_token).page()?),
    };
    let reply = caller
        .world()
        .list_llm_calls(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RecordList {
        items: records(reply.llm_calls, |c| &c.llm_call_json)?,
        next_page_token: next_token(reply.page),
    }))
}

async fn get_llm_call(
    caller: Caller,
    Path(llm_call_id): Path<String>,
    RepeatedQuery(query): RepeatedQuery<FormatQuery>,
) -> Answer<Record> {
    check_format(query.format.as_deref())?;
    let call = caller
        .world()
        .get_llm_call(caller.request(pb::GetLlmCallRequest { llm_call_id }))
        .await?
        .into_inner();
    Ok(GoJson(Record(json_of(&call.llm_call_json)?)))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = WORLD;
    let routes = vec![
        r.route(Verb::Post, "/worlds", "createWorld", "Create a world at turn 0 from an assembled scenario", create_world)
            .calls("CreateWorld")
            .tool("create_world", "Create a world at turn 0 from an assembled scenario")
            .feature(features::WORLD_KERNEL)
            .status(404, "No assembled scenario has this hash")
            .status(409, "A world with this slug exists"),
        r.route(Verb::Get, "/worlds", "listWorlds", "Worlds by slug", list_worlds)
            .calls("ListWorlds")
            .tool("list_worlds", "Worlds by slug"),
        r.route(Verb::Get, "/worlds/{slug}", "getWorld", "A world: its current turn and state", get_world)
            .calls("GetWorld")
            .tool("get_world", "A world: its current turn and state"),
        r.route(Verb::Post, "/worlds/{slug}/turns", "runTurn", "Run one attempted turn: 201 committed, 502/422 failed, 409 when another attempt holds the lease", run_turn)
            .calls("RunTurn")
            .tool("run_turn", "Run one attempted turn of a world")
            .feature(features::WORLD_KERNEL)
            .status(409, "Another attempt holds the world's lease"),
        r.route(Verb::Get, "/worlds/{slug}/turns", "listTurns", "A world's committed turns, oldest first", list_turns)
            .calls("ListTurns")
            .tool("list_turns", "A world's committed turns"),
        r.route(Verb::Get, "/worlds/{slug}/turns/{turn}", "getTurn", "A committed turn: its record, hash and predecessor's hash", get_turn)
            .calls("GetTurn")
            .tool("get_turn", "A committed turn and its hashes"),
        r.route(Verb::Get, "/worlds/{slug}/turns/{turn}/state", "getTurnState", "The world's state at a committed turn", get_state)
            .calls("GetTurn")
            .tool("get_turn_state", "The world state at a committed turn"),
        r.route(Verb::Get, "/worlds/{slug}/turns/{turn}/diff", "getTurnDiff", "What a turn changed: each patch's effects, and T(N-1) -> T(N) per entity and environment", get_diff)
            .calls("GetTurnDiff")
            .tool("get_turn_diff", "What a committed turn changed"),
        r.route(Verb::Get, "/worlds/{slug}/verify", "verifyWorld", "Re-check a world's hash-chained history (and its ledger anchors)", verify_world)
            .calls("VerifyWorld")
            .tool("verify_world", "Re-check a world's hash-chained history"),
        r.route(Verb::Get, "/worlds/{slug}/attempts", "listAttempts", "A world's attempts, newest first", list_attempts)
            .calls("ListAttempts"),
        r.route(Verb::Get, "/worlds/{slug}/events", "listEvents", "A world's events: one per accepted WorldPatch", list_events)
            .calls("ListEvents")
            .tool("list_world_events", "A world's accepted WorldPatch events"),
        r.route(Verb::Get, "/worlds/{slug}/entities/{entity_id}/history", "getEntityHistory", "An entity's state at turn 0 and every change since", entity_history)
            .calls("GetEntityHistory")
            .tool("get_entity_history", "An entity's state at turn 0 and each change since"),
        r.route(Verb::Get, "/attempts/{attempt_id}", "getAttempt", "An attempt with its source invocation summary", get_attempt)
            .calls("GetAttempt")
            .tool("get_attempt", "An attempt with its source invocation summary"),
        r.route(Verb::Get, "/attempts/{attempt_id}/source-invocations", "listAttemptSourceInvocations", "An attempt's source invocations, in invocation_seq order", attempt_invocations)
            .calls("ListSourceInvocations"),
        r.route(Verb::Get, "/source-invocations", "listSourceInvocations", "Source invocations, filtered", list_invocations)
            .calls("ListSourceInvocations")
            .tool("list_source_invocations", "Source invocations, filtered"),
        r.route(Verb::Get, "/source-invocations/{source_invocation_id}", "getSourceInvocation", "A source invocation: every field of the seed", get_invocation)
            .calls("GetSourceInvocation")
            .tool("get_source_invocation", "A source invocation, every field")
            .feature(features::WORLD_TRACES),
        r.route(Verb::Get, "/llm-calls", "listLlmCalls", "LLM calls (without chunks)", list_llm_calls)
            .calls("ListLlmCalls"),
        r.route(Verb::Get, "/llm-calls/{llm_call_id}", "getLlmCall", "An LLM call: request messages, streamed chunks, texts, tokens, errors, artifacts", get_llm_call)
            .calls("GetLlmCall")
            .tool("get_llm_call", "An LLM call: messages, chunks, texts, tokens")
            .feature(features::WORLD_TRACES),
    ];
    // The world's id grammar (`noema_world::domain::ids::ID_PATTERN`), turn numbers (in the
    // path and as `?turn=`) and pages.
    let id = serde_json::json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"});
    let routes = param_grammar(routes, "slug", &id);
    let routes = param_grammar(routes, "entity_id", &id);
    let routes = param_grammar(
        routes,
        "turn",
        &serde_json::json!({"type": "string", "pattern": "^[0-9]{1,19}$"}),
    );
    page_grammar(routes)
}

//! The orchestrator (Cognitive OS, seed 002 §11) on the seed's paths, JSON in and out:
//! `POST /plan` (201), `/risk`, `/approve`, `/execute`, `GET /trace/{id}`, `POST /evaluate`,
//! `/reward/update`, and the views around them (requests, events, the approval queue,
//! evaluator items, reputation, the release check, the schemas). Objects are the seed's
//! JSON documents as stored. Errors: 409 with the state and the calls allowed next, 422
//! naming the field, 404 for an unknown request (`ErrorStyle::CognitiveOs`).

use axum::extract::Path;
use noema_orchestrator::domain::schema::SchemaName;
use noema_proto::common::v1::PageRequest;
use noema_proto::orchestrator::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ApiError, ErrorStyle};
use crate::features;
use crate::forward::{Caller, JsonBody, Query, RawJson};
use crate::go_json::GoJson;
use crate::reply::{Answer, Created, Creates};
use crate::route::{Route, Routes, Verb};
use crate::schema_file::{Checked, schema_files};

const ORCHESTRATOR: Routes = Routes::new(
    "orchestrator",
    ErrorStyle::CognitiveOs,
    "noema.orchestrator.v1.OrchestratorService",
);

/// An object as the service sent it (its JCS bytes); `null` where there is none.
fn object(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

fn timestamp(at: Option<prost_types::Timestamp>) -> Option<String> {
    at.as_ref().map(noema_core::time::proto::rfc3339_seconds)
}

/// A page size from `limit`: absent or unreadable → the service's default.
fn page(limit: Option<&str>, cursor: Option<String>) -> Option<PageRequest> {
    Some(PageRequest {
        page_size: limit.and_then(|l| l.parse().ok()).unwrap_or(0),
        page_token: cursor.unwrap_or_default(),
    })
}

fn next_cursor(page: Option<noema_proto::common::v1::PageResponse>) -> Option<String> {
    page.map(|p| p.next_page_token).filter(|t| !t.is_empty())
}

// The seed's objects, documented by the schema files the orchestrator validates them with.
schema_files! {
    PlanFile => "Plan", SchemaName::Plan.text();
    RiskReportFile => "RiskReport", SchemaName::RiskReport.text();
    ApprovalFile => "Approval", SchemaName::Approval.text();
    ExecTraceFile => "ExecTrace", SchemaName::ExecTrace.text();
    EvalResultFile => "EvalResult", SchemaName::EvalResult.text();
}

// Request bodies default every field, so that the service, not the body parser, answers
// first: a token lacking the scope is 403 whatever the body, and a missing field is the
// service's 422 naming it.

/// `{"request_id"}`: the body of the calls that name only the request.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RequestRef {
    #[serde(default)]
    pub request_id: String,
}

/// A request's state after a call, with the object the call made.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PlanBody {
    pub request_id: String,
    pub state: String,
    /// The Plan as stored.
    pub plan: Value,
    /// The calls the request accepts next.
    pub allowed_next: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RiskBody {
    pub request_id: String,
    pub state: String,
    pub risk_report: Value,
    pub allowed_next: Vec<String>,
}

/// `POST /approve`'s body.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["approval"]))]
pub struct ApproveInput {
    #[serde(default)]
    pub request_id: String,
    /// The Approval.
    // (`skip_serializing_if` only keeps schemars from documenting a `null` default here and
    // below, which the schema file does not allow.)
    #[serde(default)]
    #[schemars(with = "Checked<ApprovalFile>", skip_serializing_if = "Value::is_null")]
    pub approval: Value,
    /// Standard base64 of the Ed25519 signature over the JCS bytes of
    /// `{"approval": <Approval>, "request_id": "<request_id>"}`.
    #[serde(default)]
    pub signature: String,
    /// Standard base64 of the approver's 32-byte public key, registered in identity.
    #[serde(default)]
    pub public_key: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ApproveBody {
    pub request_id: String,
    pub state: String,
    pub approval: Value,
    pub valid_approvers: u32,
    pub approvals_required: u32,
    pub allowed_next: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecuteBody {
    pub request_id: String,
    pub state: String,
    pub exec_trace: Value,
    pub allowed_next: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TraceBody {
    pub request_id: String,
    pub exec_trace: Value,
}

/// `POST /evaluate`'s body.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["evaluator_id", "eval_result"]))]
pub struct EvaluateInput {
    #[serde(default)]
    pub request_id: String,
    /// 1-256 characters.
    #[serde(default)]
    #[schemars(length(min = 1, max = 256))]
    pub evaluator_id: String,
    /// The EvalResult.
    #[serde(default)]
    #[schemars(
        with = "Checked<EvalResultFile>",
        skip_serializing_if = "Value::is_null"
    )]
    pub eval_result: Value,
}

/// The evaluation gate's decision.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GateBody {
    pub gate_passed: bool,
    pub regression: bool,
    pub regression_computed: bool,
    pub baseline: Option<f64>,
    pub gate_min_score: f64,
    pub reasons: Vec<String>,
}

/// The anti-abuse rules' verdict on the vote.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScreeningBody {
    pub suppressed: bool,
    pub reason_codes: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EvaluateBody {
    pub request_id: String,
    pub state: String,
    pub eval_result: Value,
    pub gate: Option<GateBody>,
    pub screening: Option<ScreeningBody>,
    pub allowed_next: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RewardBody {
    pub request_id: String,
    pub state: String,
    pub reward_update: Value,
    pub allowed_next: Vec<String>,
}

/// One lifecycle event (seed §10), hash-chained in its request's history.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventBody {
    pub seq: u64,
    pub event_type: String,
    pub entity_id: String,
    pub prev_state: Option<String>,
    pub next_state: String,
    pub meta: Value,
    pub ts: String,
    pub prev_hash: String,
    pub hash: String,
}

impl From<pb::Event> for EventBody {
    fn from(e: pb::Event) -> Self {
        EventBody {
            seq: e.seq,
            event_type: e.event_type,
            entity_id: e.entity_id,
            prev_state: (!e.prev_state.is_empty()).then_some(e.prev_state),
            next_state: e.next_state,
            meta: object(&e.meta),
            ts: e.ts,
            prev_hash: e.prev_hash,
            hash: e.hash,
        }
    }
}

/// How the live state compares with the one its events rebuild.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReplayBody {
    pub matches: bool,
    pub differences: Vec<String>,
}

/// A request: state, every object, and its events (the first `limit`; the rest through
/// `GET /requests/{id}/events?cursor=events_next_cursor`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RequestBody {
    pub request_id: String,
    pub state: String,
    pub actor: String,
    pub allowed_next: Vec<String>,
    pub plan: Value,
    pub risk_report: Value,
    pub approvals: Vec<Value>,
    pub exec_trace: Value,
    pub evaluations: Vec<Value>,
    pub evaluation_count: u64,
    pub reward_update: Value,
    pub event_count: u64,
    pub head_hash: String,
    pub events: Vec<EventBody>,
    pub events_next_cursor: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    /// With `from=events`: the replay compared with the live state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayBody>,
}

/// `GET /requests/{id}` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RequestQuery {
    /// `events`: rebuild the request from its events and compare with the live state
    #[schemars(extend("enum" = ["", "live", "events"]))]
    from: Option<String>,
    /// Events and evaluations included: default 100, at most 1000
    limit: Option<String>,
}

/// Listing parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListQuery {
    /// Only requests in this state (e.g. APPROVAL_PENDING)
    #[schemars(extend("enum" = ["", "RECEIVED", "PLANNED", "RISKED", "APPROVAL_PENDING", "EXECUTED", "BLOCKED", "TRACED", "EVALUATED", "REWARDED"]))]
    state: Option<String>,
    /// Items to return: default 50, at most 200
    limit: Option<String>,
    /// `next_cursor` of the previous page, as given (opaque: any other text is refused with 400)
    cursor: Option<String>,
}

/// Paging parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct PageQuery {
    /// Items to return: default 50, at most 200
    limit: Option<String>,
    /// `next_cursor` of the previous page, as given (opaque: any other text is refused with 400)
    cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RequestSummaryBody {
    pub request_id: String,
    pub state: String,
    pub actor: String,
    pub risk_level: Option<String>,
    pub event_count: u64,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RequestsBody {
    pub requests: Vec<RequestSummaryBody>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EventsBody {
    pub events: Vec<EventBody>,
    pub next_cursor: Option<String>,
}

/// A request waiting for approval.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PendingBody {
    pub request_id: String,
    pub actor: String,
    pub risk_level: String,
    pub approvals_required: u32,
    pub valid_approvers: u32,
    pub required_scope: Vec<String>,
    /// Since when it waits.
    pub waiting_since: Option<String>,
    pub plan: Value,
    pub risk_report: Value,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PendingListBody {
    pub pending: Vec<PendingBody>,
    pub next_cursor: Option<String>,
}

/// `GET /evaluations/next` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["evaluator_id"]))]
pub struct NextQuery {
    /// The evaluator asking (the caller, or anyone for an orchestrator:admin token)
    #[schemars(length(min = 1, max = 256))]
    evaluator_id: Option<String>,
}

/// An item to judge: a real trace or a gold task, the same either way.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ItemBody {
    pub item_id: String,
    pub request_id: String,
    pub plan: Value,
    pub risk_report: Value,
    pub exec_trace: Value,
    pub served_at: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReputationBody {
    pub actor_id: String,
    pub rep: f64,
    pub rep_cap: f64,
    pub updates: u64,
    pub last_reward_id: Option<String>,
    pub updated_at: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReleaseItemBody {
    pub item: String,
    pub title: String,
    pub ok: bool,
    pub details: Vec<String>,
}

/// The release checklist: `ok: false` names each failing item.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReleaseBody {
    pub ok: bool,
    pub items: Vec<ReleaseItemBody>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SchemasBody {
    pub schemas: Vec<String>,
}

/// A gold task's known answer: scores with 0 ≤ min_score ≤ max_score ≤ 1.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct GoldAnswerBody {
    pub pass: bool,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_score: f64,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_score: f64,
}

/// `POST /gold`'s body: from a traced request (`from_request_id`), or else from the
/// objects themselves (a Plan and an ExecTrace, and a RiskReport if there was one; null is
/// absent).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("anyOf" = [
    {"required": ["from_request_id"], "properties": {"from_request_id": {"minLength": 1}}},
    {"required": ["plan", "exec_trace"],
     "properties": {"plan": {"type": "object"}, "exec_trace": {"type": "object"}}}
]))]
pub struct GoldInput {
    pub from_request_id: Option<String>,
    #[serde(default)]
    #[schemars(
        with = "Option<Checked<PlanFile>>",
        skip_serializing_if = "Option::is_none"
    )]
    pub plan: Option<Value>,
    #[serde(default)]
    #[schemars(
        with = "Option<Checked<RiskReportFile>>",
        skip_serializing_if = "Option::is_none"
    )]
    pub risk_report: Option<Value>,
    #[serde(default)]
    #[schemars(
        with = "Option<Checked<ExecTraceFile>>",
        skip_serializing_if = "Option::is_none"
    )]
    pub exec_trace: Option<Value>,
    #[serde(default)]
    pub answer: GoldAnswerBody,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct GoldBody {
    pub gold_id: String,
    pub answer: Option<GoldAnswerBody>,
    pub created_at: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct EvaluatorBody {
    pub evaluator_id: String,
    pub votes: u64,
    pub gold_attempts: u32,
    pub gold_matches: u32,
    pub consecutive_mismatches: u32,
    pub influence: f64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PolicyBody {
    pub policy_version: String,
    pub policy_hash: String,
    pub source: String,
    pub loaded_at: Option<String>,
    pub document: Value,
    pub last_reload_error: Option<String>,
}

impl From<pb::PolicyInfo> for PolicyBody {
    fn from(p: pb::PolicyInfo) -> Self {
        PolicyBody {
            policy_version: p.policy_version,
            policy_hash: p.policy_hash,
            source: p.source,
            loaded_at: timestamp(p.loaded_at),
            document: object(&p.document),
            last_reload_error: (!p.last_reload_error.is_empty()).then_some(p.last_reload_error),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReplayMismatchBody {
    pub request_id: String,
    pub differences: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReplayReportBody {
    pub ok: bool,
    pub requests: u64,
    pub events: u64,
    pub mismatched: u64,
    pub mismatches: Vec<ReplayMismatchBody>,
}

fn json_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

async fn plan(caller: Caller, body: RawJson<Checked<PlanFile>>) -> Creates<PlanBody> {
    let request = pb::PlanRequest {
        plan: body.bytes.to_vec(),
    };
    let r = caller
        .orchestrator()
        .plan(caller.request(request))
        .await?
        .into_inner();
    Ok(Created(PlanBody {
        request_id: r.request_id,
        state: r.state,
        plan: object(&r.plan),
        allowed_next: r.allowed_next,
    }))
}

async fn risk(caller: Caller, JsonBody(body): JsonBody<RequestRef>) -> Answer<RiskBody> {
    let request = pb::RiskRequest {
        request_id: body.request_id,
    };
    let r = caller
        .orchestrator()
        .risk(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RiskBody {
        request_id: r.request_id,
        state: r.state,
        risk_report: object(&r.risk_report),
        allowed_next: r.allowed_next,
    }))
}

async fn approve(caller: Caller, JsonBody(body): JsonBody<ApproveInput>) -> Answer<ApproveBody> {
    let request = pb::ApproveRequest {
        request_id: body.request_id,
        approval: json_bytes(&body.approval),
        signature: body.signature,
        public_key: body.public_key,
    };
    let r = caller
        .orchestrator()
        .approve(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(ApproveBody {
        request_id: r.request_id,
        state: r.state,
        approval: object(&r.approval),
        valid_approvers: r.valid_approvers,
        approvals_required: r.approvals_required,
        allowed_next: r.allowed_next,
    }))
}

async fn execute(caller: Caller, JsonBody(body): JsonBody<RequestRef>) -> Answer<ExecuteBody> {
    let request = pb::ExecuteRequest {
        request_id: body.request_id,
    };
    let r = caller
        .orchestrator()
        .execute(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(ExecuteBody {
        request_id: r.request_id,
        state: r.state,
        exec_trace: object(&r.exec_trace),
        allowed_next: r.allowed_next,
    }))
}

async fn trace(caller: Caller, Path(id): Path<String>) -> Answer<TraceBody> {
    let r = caller
        .orchestrator()
        .get_trace(caller.request(pb::GetTraceRequest { id }))
        .await?
        .into_inner();
    Ok(GoJson(TraceBody {
        request_id: r.request_id,
        exec_trace: object(&r.exec_trace),
    }))
}

async fn evaluate(caller: Caller, JsonBody(body): JsonBody<EvaluateInput>) -> Answer<EvaluateBody> {
    let request = pb::EvaluateRequest {
        request_id: body.request_id,
        evaluator_id: body.evaluator_id,
        eval_result: json_bytes(&body.eval_result),
    };
    let r = caller
        .orchestrator()
        .evaluate(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(EvaluateBody {
        request_id: r.request_id,
        state: r.state,
        eval_result: object(&r.eval_result),
        gate: r.gate.map(|g| GateBody {
            gate_passed: g.gate_passed,
            regression: g.regression,
            regression_computed: g.regression_computed,
            baseline: g.baseline,
            gate_min_score: g.gate_min_score,
            reasons: g.reasons,
        }),
        screening: r.screening.map(|s| ScreeningBody {
            suppressed: s.suppressed,
            reason_codes: s.reason_codes,
        }),
        allowed_next: r.allowed_next,
    }))
}

async fn reward(caller: Caller, JsonBody(body): JsonBody<RequestRef>) -> Answer<RewardBody> {
    let request = pb::UpdateRewardRequest {
        request_id: body.request_id,
    };
    let r = caller
        .orchestrator()
        .update_reward(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RewardBody {
        request_id: r.request_id,
        state: r.state,
        reward_update: object(&r.reward_update),
        allowed_next: r.allowed_next,
    }))
}

async fn get_request(
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<RequestQuery>,
) -> Answer<RequestBody> {
    let from_events = match q.from.as_deref() {
        None | Some("") | Some("live") => false,
        Some("events") => true,
        Some(other) => {
            return Err(ApiError::malformed_query(format!(
                "from must be `events` (or absent), not {other:?}"
            )));
        }
    };
    let request = pb::GetRequestRequest {
        request_id: id,
        from_events,
        limit: q.limit.and_then(|l| l.parse().ok()).unwrap_or(0),
    };
    let d = caller
        .orchestrator()
        .get_request(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RequestBody {
        allowed_next: d.allowed_next,
        plan: object(&d.plan),
        risk_report: object(&d.risk_report),
        approvals: d.approvals.iter().map(|a| object(a)).collect(),
        exec_trace: object(&d.exec_trace),
        evaluations: d.evaluations.iter().map(|e| object(e)).collect(),
        evaluation_count: d.evaluation_count,
        reward_update: object(&d.reward_update),
        event_count: d.event_count,
        head_hash: d.head_hash,
        events: d.events.into_iter().map(EventBody::from).collect(),
        events_next_cursor: (!d.events_next_page_token.is_empty())
            .then_some(d.events_next_page_token),
        created_at: timestamp(d.created_at),
        updated_at: timestamp(d.updated_at),
        replay: d.replay.map(|r| ReplayBody {
            matches: r.matches,
            differences: r.differences,
        }),
        request_id: d.request_id,
        state: d.state,
        actor: d.actor,
    }))
}

async fn list_requests(caller: Caller, Query(q): Query<ListQuery>) -> Answer<RequestsBody> {
    let request = pb::ListRequestsRequest {
        state: q.state.unwrap_or_default(),
        page: page(q.limit.as_deref(), q.cursor),
    };
    let r = caller
        .orchestrator()
        .list_requests(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(RequestsBody {
        requests: r
            .requests
            .into_iter()
            .map(|s| RequestSummaryBody {
                request_id: s.request_id,
                state: s.state,
                actor: s.actor,
                risk_level: (!s.risk_level.is_empty()).then_some(s.risk_level),
                event_count: s.event_count,
                created_at: timestamp(s.created_at),
                updated_at: timestamp(s.updated_at),
            })
            .collect(),
        next_cursor: next_cursor(r.page),
    }))
}

async fn list_events(
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> Answer<EventsBody> {
    let request = pb::ListEventsRequest {
        request_id: id,
        page: page(q.limit.as_deref(), q.cursor),
    };
    let r = caller
        .orchestrator()
        .list_events(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(EventsBody {
        events: r.events.into_iter().map(EventBody::from).collect(),
        next_cursor: next_cursor(r.page),
    }))
}

async fn pending(caller: Caller, Query(q): Query<PageQuery>) -> Answer<PendingListBody> {
    let request = pb::ListPendingApprovalsRequest {
        page: page(q.limit.as_deref(), q.cursor),
    };
    let r = caller
        .orchestrator()
        .list_pending_approvals(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(PendingListBody {
        pending: r
            .pending
            .into_iter()
            .map(|p| PendingBody {
                request_id: p.request_id,
                actor: p.actor,
                risk_level: p.risk_level,
                approvals_required: p.approvals_required,
                valid_approvers: p.valid_approvers,
                required_scope: p.required_scope,
                waiting_since: timestamp(p.waiting_since),
                plan: object(&p.plan),
                risk_report: object(&p.risk_report),
            })
            .collect(),
        next_cursor: next_cursor(r.page),
    }))
}

async fn next_evaluation(caller: Caller, Query(q): Query<NextQuery>) -> Answer<ItemBody> {
    let request = pb::NextEvaluationRequest {
        evaluator_id: q.evaluator_id.unwrap_or_default(),
    };
    let r = caller
        .orchestrator()
        .next_evaluation(caller.request(request))
        .await?
        .into_inner();
    Ok(GoJson(ItemBody {
        item_id: r.item_id,
        request_id: r.request_id,
        plan: object(&r.plan),
        risk_report: object(&r.risk_report),
        exec_trace: object(&r.exec_trace),
        served_at: timestamp(r.served_at),
    }))
}

async fn reputation(caller: Caller, Path(actor_id): Path<String>) -> Answer<ReputationBody> {
    let r = caller
        .orchestrator()
        .get_reputation(caller.request(pb::GetReputationRequest { actor_id }))
        .await?
        .into_inner();
    Ok(GoJson(ReputationBody {
        actor_id: r.actor_id,
        rep: r.rep,
        rep_cap: r.rep_cap,
        updates: r.updates,
        last_reward_id: (!r.last_reward_id.is_empty()).then_some(r.last_reward_id),
        updated_at: timestamp(r.updated_at),
    }))
}

async fn release_check(caller: Caller) -> Answer<ReleaseBody> {
    let r = caller
        .orchestrator()
        .check_release(caller.request(pb::CheckReleaseRequest {}))
        .await?
        .into_inner();
    Ok(GoJson(ReleaseBody {
        ok: r.ok,
        items: r
            .items
            .into_iter()
            .map(|i| ReleaseItemBody {
                item: i.item,
                title: i.title,
                ok: i.ok,
                details: i.details,
            })
            .collect(),
    }))
}

async fn schemas(caller: Caller) -> Answer<SchemasBody> {
    let r = caller
        .orchestrator()
        .list_schemas(caller.request(pb::ListSchemasRequest {}))
        .await?
        .into_inner();
    Ok(GoJson(SchemasBody { schemas: r.names }))
}

/// The JSON Schema document itself.
async fn schema(caller: Caller, Path(name): Path<String>) -> Answer<Value> {
    let r = caller
        .orchestrator()
        .get_schema(caller.request(pb::GetSchemaRequest { name }))
        .await?
        .into_inner();
    Ok(GoJson(object(&r.document)))
}

async fn add_gold(caller: Caller, JsonBody(body): JsonBody<GoldInput>) -> Creates<GoldBody> {
    let bytes = |v: &Option<Value>| v.as_ref().map(json_bytes).unwrap_or_default();
    let request = pb::AddGoldTaskRequest {
        from_request_id: body.from_request_id.unwrap_or_default(),
        plan: bytes(&body.plan),
        risk_report: bytes(&body.risk_report),
        exec_trace: bytes(&body.exec_trace),
        answer: Some(pb::GoldAnswer {
            pass: body.answer.pass,
            min_score: body.answer.min_score,
            max_score: body.answer.max_score,
        }),
    };
    let r = caller
        .orchestrator()
        .add_gold_task(caller.request(request))
        .await?
        .into_inner();
    Ok(Created(GoldBody {
        gold_id: r.gold_id,
        answer: r.answer.map(|a| GoldAnswerBody {
            pass: a.pass,
            min_score: a.min_score,
            max_score: a.max_score,
        }),
        created_at: timestamp(r.created_at),
    }))
}

async fn evaluator(caller: Caller, Path(evaluator_id): Path<String>) -> Answer<EvaluatorBody> {
    let r = caller
        .orchestrator()
        .get_evaluator(caller.request(pb::GetEvaluatorRequest { evaluator_id }))
        .await?
        .into_inner();
    Ok(GoJson(EvaluatorBody {
        evaluator_id: r.evaluator_id,
        votes: r.votes,
        gold_attempts: r.gold_attempts,
        gold_matches: r.gold_matches,
        consecutive_mismatches: r.consecutive_mismatches,
        influence: r.influence,
    }))
}

async fn policy(caller: Caller) -> Answer<PolicyBody> {
    let r = caller
        .orchestrator()
        .get_policy(caller.request(pb::GetPolicyRequest {}))
        .await?
        .into_inner();
    Ok(GoJson(r.into()))
}

async fn reload_policy(caller: Caller) -> Answer<PolicyBody> {
    let r = caller
        .orchestrator()
        .reload_policy(caller.request(pb::ReloadPolicyRequest {}))
        .await?
        .into_inner();
    Ok(GoJson(r.into()))
}

async fn replay(caller: Caller) -> Answer<ReplayReportBody> {
    let r = caller
        .orchestrator()
        .replay_all(caller.request(pb::ReplayAllRequest {}))
        .await?
        .into_inner();
    Ok(GoJson(ReplayReportBody {
        ok: r.ok,
        requests: r.requests,
        events: r.events,
        mismatched: r.mismatched,
        mismatches: r
            .mismatches
            .into_iter()
            .map(|m| ReplayMismatchBody {
                request_id: m.request_id,
                differences: m.differences,
            })
            .collect(),
    }))
}

const WRONG_STATE: (u16, &str) = (
    409,
    "Not allowed in the request's state: the state and the calls allowed next",
);
const UNKNOWN_REQUEST: (u16, &str) = (404, "No such request");

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = ORCHESTRATOR;
    let changes = |route: Route| {
        route
            .status(WRONG_STATE.0, WRONG_STATE.1)
            .status(UNKNOWN_REQUEST.0, UNKNOWN_REQUEST.1)
    };
    vec![
        r.route(Verb::Post, "/plan", "plan", "Create a request from a Plan (RECEIVED → PLANNED)", plan)
            .calls("Plan")
            .describe("A plan's step_ids are unique among its steps (422 otherwise).")
            .tool("orchestrator.plan", "Create a governed request from a Plan")
            .feature(features::ORCHESTRATOR_RUNTIME),
        changes(
            r.route(Verb::Post, "/risk", "risk", "Assess the plan under the risk policy (→ RISKED, then APPROVAL_PENDING or BLOCKED)", risk)
                .calls("Risk")
            .tool("orchestrator.risk", "Assess a request's plan under the risk policy"),
        ),
        changes(
            r.route(Verb::Post, "/approve", "approve", "Record an Approval signed by the approver's registered Ed25519 key", approve)
                .calls("Approve")
            .tool("orchestrator.approve", "Record a signed Approval of a request"),
        ),
        changes(
            r.route(Verb::Post, "/execute", "execute", "Run the allowlisted steps (or refuse): the ExecTrace, in state TRACED", execute)
                .calls("Execute")
            .tool("orchestrator.execute", "Execute an assessed (and approved) request")
            .feature(features::ORCHESTRATOR_RUNTIME),
        ),
        r.route(Verb::Get, "/trace/{id}", "getTrace", "A trace, by trace id or request id", trace)
            .calls("GetTrace")
            .tool("orchestrator.trace", "A request's execution trace")
            .status(UNKNOWN_REQUEST.0, UNKNOWN_REQUEST.1),
        changes(
            r.route(Verb::Post, "/evaluate", "evaluate", "Record an EvalResult through its suite's gate (→ EVALUATED)", evaluate)
                .calls("Evaluate")
            .tool("orchestrator.evaluate", "Record an evaluation of a traced request"),
        ),
        changes(
            r.route(Verb::Post, "/reward/update", "updateReward", "Compute the actor's RewardUpdate (→ REWARDED)", reward)
                .calls("UpdateReward")
            .tool("orchestrator.reward", "Compute the actor's reward update"),
        ),
        r.route(Verb::Get, "/requests", "listRequests", "Requests, oldest first, by state", list_requests)
            .calls("ListRequests"),
        r.route(Verb::Get, "/requests/{id}", "getRequest", "A request: state, objects and events; from=events rebuilds it", get_request)
            .calls("GetRequest")
            .tool("orchestrator.request", "A request: state, objects and events")
            .status(UNKNOWN_REQUEST.0, UNKNOWN_REQUEST.1),
        r.route(Verb::Get, "/requests/{id}/events", "listRequestEvents", "A request's hash-chained events, oldest first", list_events)
            .calls("ListEvents")
            .describe("cursor: only one an earlier page returned (400 otherwise).")
            .status(UNKNOWN_REQUEST.0, UNKNOWN_REQUEST.1),
        r.route(Verb::Get, "/approvals/pending", "listPendingApprovals", "Requests waiting for approval, and since when", pending)
            .calls("ListPendingApprovals")
            .tool("orchestrator.pending_approvals", "Requests waiting for approval"),
        r.route(Verb::Get, "/evaluations/next", "nextEvaluation", "The evaluator's next item: a real trace or a gold task", next_evaluation)
            .calls("NextEvaluation")
            .tool("orchestrator.next_evaluation", "The evaluator's next item to evaluate")
            .status(404, "Nothing to evaluate"),
        r.route(Verb::Get, "/reputation/{actor_id}", "getReputation", "An actor's reputation", reputation)
            .calls("GetReputation")
            .tool("orchestrator.reputation", "An actor's reputation"),
        r.route(Verb::Get, "/release/check", "checkRelease", "The seven release blockers; ok: false names each failing item", release_check)
            .calls("CheckRelease"),
        r.route(Verb::Get, "/schemas", "listSchemas", "The served JSON Schemas", schemas)
            .calls("ListSchemas"),
        r.route(Verb::Get, "/schemas/{name}", "getSchema", "A JSON Schema document (plan, plan.v0.1, plan.v0.1.json)", schema)
            .calls("GetSchema")
            .status(404, "No such schema"),
        r.route(Verb::Post, "/gold", "addGoldTask", "Add a gold task (known answer) for evaluator calibration", add_gold)
            .calls("AddGoldTask")
            .describe(
                "The plan's step_ids are unique (422 otherwise); min_score ≤ max_score, and a \
                 from_request_id names a request with a trace (400 otherwise).",
            )
            .status(UNKNOWN_REQUEST.0, UNKNOWN_REQUEST.1),
        r.route(Verb::Get, "/evaluators/{id}", "getEvaluator", "An evaluator's gold record and influence", evaluator)
            .calls("GetEvaluator")
            .status(404, "The evaluator has not voted"),
        r.route(Verb::Get, "/policy", "getPolicy", "The risk policy in force, its hash and the last reload's failure", policy)
            .calls("GetPolicy"),
        r.route(Verb::Post, "/policy/reload", "reloadPolicy", "Reload the policy file (as SIGHUP does)", reload_policy)
            .calls("ReloadPolicy"),
        r.route(Verb::Post, "/replay", "replayAll", "Rebuild every request from its events and compare with the live state", replay)
            .calls("ReplayAll"),
    ]
}

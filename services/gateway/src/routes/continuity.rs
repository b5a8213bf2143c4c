//! CogniRelay's continuity routes (`shared/compat/cognirelay.md` §3–§9) on its own paths,
//! plus the subject history Noema adds.
//!
//! The continuity service reproduces CogniRelay's documents exactly (key order, number
//! forms, pydantic's 422 bodies echoing the caller's input), so these handlers pass the
//! caller's body bytes through untouched and answer with the service's bytes; refusals
//! carry the original's status and body, which the CogniRelay renderer sends as they are.
//! `POST /v1/ops/run` is the one route that reads its body: the envelope names the job,
//! and its `arguments` go on to the job's RPC as the caller wrote them.

use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use noema_continuity::domain::schema::Model;
use noema_core::scopes::TENANT_METADATA;
use noema_core::time::proto::rfc3339_seconds;
use noema_core::{ErrorCode, Failure};
use noema_proto::continuity::v1 as pb;
use noema_proto::continuity::v1::continuity_service_client::ContinuityServiceClient;
use noema_runtime::client::TracedChannel;
use schemars::{JsonSchema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::{ApiError, ErrorStyle};
use crate::features;
use crate::forward::{Caller, LastQuery, RawJson};
use crate::go_json::GoJson;
use crate::reply::Answer;
use crate::route::{Input, OperationDoc, Reply, ResponseDoc, Route, Routes, Schemas, Verb};

pub(crate) const COGNIRELAY: Routes = Routes::new(
    "continuity",
    ErrorStyle::CogniRelay,
    "noema.continuity.v1.ContinuityService",
);

/// A CogniRelay request body, passed on as the caller's bytes and documented by the
/// continuity service's own declaration of the original's request model `M` (the one its
/// validation runs), so the document and the 422s cannot disagree.
pub(crate) struct Document<M> {
    pub bytes: Bytes,
    model: PhantomData<M>,
}

impl<M, S: Send + Sync> FromRequest<S> for Document<M> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let declared_json = declares_json(request.headers());
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if !declared_json && !bytes.is_empty() {
            return Err(not_an_object(&bytes).into_response());
        }
        Ok(Document {
            bytes,
            model: PhantomData,
        })
    }
}

/// Whether FastAPI (0.165, as CogniRelay 1.4.15 runs) reads the body as JSON: only under
/// `application/json` or `application/*+json` (parameters aside); without a content type
/// the model gets the raw text.
fn declares_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers.get(axum::http::header::CONTENT_TYPE) else {
        return false;
    };
    let media = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    media
        .strip_prefix("application/")
        .is_some_and(|subtype| subtype == "json" || subtype.ends_with("+json"))
}

/// FastAPI's 422 for a body it did not read as JSON: the model gets the raw text.
fn not_an_object(bytes: &[u8]) -> ApiError {
    let text = serde_json::to_string(&String::from_utf8_lossy(bytes)).unwrap_or_default();
    invalid_envelope(
        "model_attributes_type",
        r#"["body"]"#,
        "Input should be a valid dictionary or object to extract fields from",
        &text,
        None,
    )
}

/// The request model a [`Document`] is read as.
pub(crate) trait RequestModel {
    fn model() -> &'static Model;
}

impl<M: RequestModel> Input for Document<M> {
    fn document(doc: &mut OperationDoc, schemas: &mut Schemas) {
        doc.body = Some(model_schema(M::model(), &mut schemas.requests));
        // An MCP tool takes the body as one object argument: the full models would not fit
        // every token's `tools/list`, and the service answers what does not fit them.
        doc.tool_body = Some(
            schemas
                .requests
                .subschema_for::<Map<String, Value>>()
                .to_value(),
        );
    }
}

/// A `$ref` to `model`'s schema among the generator's definitions, which it adds (with the
/// models it nests) on first use.
fn model_schema(model: &'static Model, generator: &mut SchemaGenerator) -> Value {
    let path = generator.settings().definitions_path.trim_end_matches('/');
    let reference = format!("#{path}/{}", model.name);
    if !generator.definitions().contains_key(model.name) {
        // Taken before the fields are walked, so a model that nests itself ends.
        generator
            .definitions_mut()
            .insert(model.name.to_owned(), Value::Bool(true));
        let schema = model.object_schema(&mut |nested| model_schema(nested, generator));
        generator
            .definitions_mut()
            .insert(model.name.to_owned(), schema);
    }
    serde_json::json!({ "$ref": reference })
}

/// Declares marker types naming the continuity service's request models.
macro_rules! request_models {
    ($($marker:ident => $model:path;)*) => {
        $(
            pub(crate) enum $marker {}
            impl $crate::routes::continuity::RequestModel for $marker {
                fn model() -> &'static noema_continuity::domain::schema::Model {
                    &$model
                }
            }
        )*
    };
}
pub(crate) use request_models;

request_models! {
    Upsert => noema_continuity::domain::request::UPSERT_REQUEST;
    Patch => noema_continuity::domain::request::PATCH_REQUEST;
    Lifecycle => noema_continuity::domain::request::LIFECYCLE_REQUEST;
    Read => noema_continuity::domain::request::READ_REQUEST;
    List => noema_continuity::domain::request::LIST_REQUEST;
    Compare => noema_continuity::domain::request::COMPARE_REQUEST;
    Revalidate => noema_continuity::domain::request::REVALIDATE_REQUEST;
    Archive => noema_continuity::domain::request::ARCHIVE_REQUEST;
    Delete => noema_continuity::domain::request::DELETE_REQUEST;
    RefreshPlan => noema_continuity::domain::request::REFRESH_PLAN_REQUEST;
    RetentionPlan => noema_continuity::domain::request::RETENTION_PLAN_REQUEST;
    ContextRetrieve => noema_continuity::domain::context::request::CONTEXT_RETRIEVE_REQUEST;
    ContextSnapshot => noema_continuity::domain::context::request::CONTEXT_SNAPSHOT_REQUEST;
}

/// The service's JSON answer, sent byte for byte (CogniRelay writes compact JSON in its
/// own key order, without a trailing newline).
pub struct Original(pub(crate) Vec<u8>);

impl IntoResponse for Original {
    fn into_response(self) -> Response {
        (StatusCode::OK, [(CONTENT_TYPE, "application/json")], self.0).into_response()
    }
}

impl Reply for Original {
    fn document(doc: &mut OperationDoc, _schemas: &mut Schemas) {
        doc.responses.push(ResponseDoc {
            status: 200,
            description: "CogniRelay's response document",
            content: Some((
                "application/json",
                serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
            )),
        });
    }
}

pub(crate) type Passed = Result<Original, ApiError>;

/// The continuity client and `message` as a request carrying the caller's token and the
/// tenant it names (`x-noema-tenant`, honoured for superusers only, by the service).
pub(crate) fn call<T>(
    caller: &Caller,
    message: T,
) -> (ContinuityServiceClient<TracedChannel>, tonic::Request<T>) {
    let mut request = caller.request(message);
    let tenant = caller.header(TENANT_METADATA);
    if !tenant.is_empty()
        && let Ok(value) = tonic::metadata::MetadataValue::try_from(tenant.as_str())
    {
        request.metadata_mut().insert(TENANT_METADATA, value);
    }
    (caller.continuity(), request)
}

pub(crate) fn body(bytes: &Bytes) -> pb::JsonRequest {
    pb::JsonRequest {
        body: bytes.to_vec(),
    }
}

async fn upsert(caller: Caller, document: Document<Upsert>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.upsert(request).await?.into_inner().body))
}

async fn patch(caller: Caller, document: Document<Patch>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.patch(request).await?.into_inner().body))
}

async fn lifecycle(caller: Caller, document: Document<Lifecycle>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.lifecycle(request).await?.into_inner().body))
}

async fn read(caller: Caller, document: Document<Read>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.read(request).await?.into_inner().body))
}

async fn context_retrieve(caller: Caller, document: Document<ContextRetrieve>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.retrieve(request).await?.into_inner().body))
}

async fn context_snapshot_create(caller: Caller, document: Document<ContextSnapshot>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.create_snapshot(request).await?.into_inner().body,
    ))
}

async fn context_snapshot_get(caller: Caller, Path(snapshot_id): Path<String>) -> Passed {
    let (mut client, request) = call(&caller, pb::GetSnapshotRequest { snapshot_id });
    Ok(Original(
        client.get_snapshot(request).await?.into_inner().body,
    ))
}

async fn list(caller: Caller, document: Document<List>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.list(request).await?.into_inner().body))
}

async fn compare(caller: Caller, document: Document<Compare>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.compare(request).await?.into_inner().body))
}

async fn revalidate(caller: Caller, document: Document<Revalidate>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.revalidate(request).await?.into_inner().body,
    ))
}

async fn archive(caller: Caller, document: Document<Archive>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.archive(request).await?.into_inner().body))
}

async fn delete(caller: Caller, document: Document<Delete>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(client.delete(request).await?.into_inner().body))
}

async fn refresh_plan(caller: Caller, document: Document<RefreshPlan>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.refresh_plan(request).await?.into_inner().body,
    ))
}

async fn retention_plan(caller: Caller, document: Document<RetentionPlan>) -> Passed {
    let (mut client, request) = call(&caller, body(&document.bytes));
    Ok(Original(
        client.retention_plan(request).await?.into_inner().body,
    ))
}

/// `GET /v1/continuity/history` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("required" = ["subject_kind", "subject_id"]))]
pub struct HistoryQuery {
    /// user, peer, thread or task
    #[serde(default)]
    #[schemars(extend("enum" = noema_continuity::domain::model::SUBJECT_KINDS))]
    pub subject_kind: String,
    /// Normalises to a subject key (a letter, digit, `.` or `_` among its characters)
    #[serde(default)]
    #[schemars(extend("pattern" = noema_continuity::domain::rules::SUBJECT_ID_PATTERN))]
    pub subject_id: String,
    /// Revisions per page (the service clamps it)
    #[serde(default)]
    #[schemars(extend("maximum" = u32::MAX))]
    pub limit: Option<u32>,
    /// `next_page_token` of the previous page; any other token is refused (400)
    #[serde(default)]
    pub page_token: Option<String>,
    /// true to include each revision's capsule
    #[serde(default)]
    pub include_capsules: Option<String>,
}

/// One revision of a subject, newest first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryRevision {
    /// The peer of the writing token.
    pub actor: String,
    /// The capsule's canonical JSON (with `include_capsules=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub capsule: Option<Box<RawValue>>,
    pub capsule_sha256: String,
    /// upsert, patch, lifecycle or revalidate.
    pub operation: String,
    /// The predecessor's id (null for the first revision).
    pub previous_revision_id: Option<String>,
    pub recorded_at: Option<String>,
    /// sha256:<hex> of the revision's record, which names its predecessor.
    pub revision_id: String,
    pub sequence: u64,
}

/// A subject's revisions (Noema's addition).
#[derive(Debug, Serialize, JsonSchema)]
pub struct History {
    /// Every id recomputes from its record and names its predecessor.
    pub chain_intact: bool,
    pub count: u64,
    /// Empty when there are no more revisions.
    pub next_page_token: String,
    pub ok: bool,
    pub revisions: Vec<HistoryRevision>,
}

fn revision(r: pb::Revision) -> Result<HistoryRevision, ApiError> {
    let capsule = if r.capsule.is_empty() {
        None
    } else {
        let text = String::from_utf8(r.capsule)
            .map_err(|_| ApiError(Failure::new(ErrorCode::Internal, "capsule is not UTF-8")))?;
        Some(
            RawValue::from_string(text)
                .map_err(|_| ApiError(Failure::new(ErrorCode::Internal, "capsule is not JSON")))?,
        )
    };
    Ok(HistoryRevision {
        actor: r.actor,
        capsule,
        capsule_sha256: r.capsule_sha256,
        operation: r.operation,
        previous_revision_id: (!r.previous_revision_id.is_empty())
            .then_some(r.previous_revision_id),
        recorded_at: r.recorded_at.as_ref().map(rfc3339_seconds),
        revision_id: r.revision_id,
        sequence: r.sequence,
    })
}

async fn history(caller: Caller, LastQuery(query): LastQuery<HistoryQuery>) -> Answer<History> {
    let include_capsules = matches!(
        query
            .include_capsules
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("true" | "1" | "yes")
    );
    let message = pb::HistoryRequest {
        subject_kind: query.subject_kind,
        subject_id: query.subject_id,
        page: Some(noema_proto::common::v1::PageRequest {
            page_size: query.limit.unwrap_or(0),
            page_token: query.page_token.unwrap_or_default(),
        }),
        include_capsules,
    };
    let (mut client, request) = call(&caller, message);
    let answer = client.history(request).await?.into_inner();
    let revisions = answer
        .revisions
        .into_iter()
        .map(revision)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(GoJson(History {
        chain_intact: answer.chain_intact,
        count: u64::try_from(revisions.len()).unwrap_or(u64::MAX),
        next_page_token: answer.page.map(|p| p.next_page_token).unwrap_or_default(),
        ok: true,
        revisions,
    }))
}

/// Every job `POST /v1/ops/run` accepts (CogniRelay's `OpsRunRequest.job_id` literal, in
/// its order); only the continuity jobs run here.
const OPS_JOBS: [&str; 19] = [
    "index.rebuild_incremental",
    "metrics.poll_and_alarm_eval",
    "backup.create",
    "backup.restore_test",
    "replication.pull",
    "replication.push",
    "messages.replay_dead_letter_sweep",
    "security.rotation_check",
    "compact.plan",
    "continuity_cold_store",
    "continuity_cold_rehydrate",
    "continuity_retention_apply",
    "artifact_history_cold_store",
    "artifact_history_cold_rehydrate",
    "registry_history_cold_store",
    "registry_history_cold_rehydrate",
    "segment_history_maintenance",
    "segment_history_cold_store",
    "segment_history_cold_rehydrate",
];

/// `POST /v1/ops/run`'s envelope as this gateway serves it: one of the continuity jobs, with
/// its arguments' request model (CogniRelay's other jobs are refused with 400 here).
pub struct OpsRunRequest;

impl JsonSchema for OpsRunRequest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "OpsRunRequest".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> schemars::Schema {
        use noema_continuity::domain::request as models;
        let jobs = [
            ("continuity_cold_store", &models::COLD_STORE_REQUEST),
            ("continuity_cold_rehydrate", &models::COLD_REHYDRATE_REQUEST),
            (
                "continuity_retention_apply",
                &models::RETENTION_APPLY_REQUEST,
            ),
        ];
        let one_of: Vec<Value> = jobs
            .into_iter()
            .map(|(job, model)| {
                serde_json::json!({"properties": {
                    "job_id": {"const": job},
                    "arguments": model_schema(model, generator),
                }})
            })
            .collect();
        schemars::json_schema!({
            "type": "object",
            "required": ["job_id", "arguments"],
            "properties": {
                "job_id": {"type": "string", "enum": jobs.map(|(job, _)| job)},
                "arguments": {"type": "object"},
                "dry_run": {"type": "boolean"},
                "force": {"type": "boolean"},
            },
            "oneOf": one_of,
        })
    }
}

/// A refusal in CogniRelay's exact terms, said by the gateway.
pub(super) fn original(code: ErrorCode, status: u16, body: String) -> ApiError {
    ApiError(
        Failure::new(code, "request validation failed")
            .with_metadata(noema_core::error::ORIGINAL_STATUS_KEY, status.to_string())
            .with_metadata(noema_core::error::ORIGINAL_BODY_KEY, body),
    )
}

/// FastAPI's 422 with one pydantic error at `loc` (JSON text) for `input` (raw JSON).
pub(super) fn invalid_envelope(
    kind: &str,
    loc: &str,
    msg: &str,
    input: &str,
    ctx: Option<String>,
) -> ApiError {
    let kind = serde_json::to_string(kind).unwrap_or_default();
    let msg = serde_json::to_string(msg).unwrap_or_default();
    let ctx = ctx.map(|c| format!(",\"ctx\":{c}")).unwrap_or_default();
    original(
        ErrorCode::FailedPrecondition,
        422,
        format!(
            "{{\"detail\":[{{\"type\":{kind},\"loc\":{loc},\"msg\":{msg},\"input\":{input}{ctx}}}]}}"
        ),
    )
}

/// The job and its arguments (raw) from an ops run envelope, or CogniRelay's 422.
fn ops_job(bytes: &[u8]) -> Result<(String, String), ApiError> {
    let envelope: std::collections::BTreeMap<String, &RawValue> =
        serde_json::from_slice(bytes).map_err(|e| ApiError::malformed_body(e.to_string()))?;
    let whole = std::str::from_utf8(bytes).unwrap_or("{}").trim();
    let Some(job) = envelope.get("job_id") else {
        return Err(invalid_envelope(
            "missing",
            "[\"body\",\"job_id\"]",
            "Field required",
            whole,
            None,
        ));
    };
    let expected = {
        let (last, rest) = OPS_JOBS.split_last().unwrap_or((&"", &[]));
        let rest: Vec<String> = rest.iter().map(|j| format!("'{j}'")).collect();
        format!("{} or '{last}'", rest.join(", "))
    };
    let job_id = match serde_json::from_str::<String>(job.get()) {
        Ok(id) if OPS_JOBS.contains(&id.as_str()) => id,
        _ => {
            let ctx = format!(
                "{{\"expected\":{}}}",
                serde_json::to_string(&expected).unwrap_or_default()
            );
            return Err(invalid_envelope(
                "literal_error",
                "[\"body\",\"job_id\"]",
                &format!("Input should be {expected}"),
                job.get(),
                Some(ctx),
            ));
        }
    };
    let arguments = match envelope.get("arguments") {
        None => "{}".to_owned(),
        Some(raw) if raw.get().starts_with('{') => raw.get().to_owned(),
        Some(raw) => {
            return Err(invalid_envelope(
                "dict_type",
                "[\"body\",\"arguments\"]",
                "Input should be a valid dictionary",
                raw.get(),
                None,
            ));
        }
    };
    Ok((job_id, arguments))
}

/// `ops_<YYYYMMDDTHHMMSSZ>_<8 hex>`, as CogniRelay names a run.
fn run_id() -> String {
    let now = time::OffsetDateTime::now_utc();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "ops_{}_{}",
        noema_core::time::basic_seconds(now),
        &random[..8]
    )
}

/// Whether the caller may run continuity jobs, asked of the service before the gateway
/// judges the envelope: CogniRelay authenticates before it validates a body, so a caller
/// without a (good) token hears 401/403, never about the envelope. The probe is a job call
/// without arguments, which the service refuses before doing anything.
pub(super) async fn authorise_ops(caller: &Caller) -> Result<(), ApiError> {
    let (mut client, request) = call(
        caller,
        pb::JsonRequest {
            body: b"{}".to_vec(),
        },
    );
    match client.cold_store(request).await {
        Err(status)
            if matches!(
                status.code(),
                tonic::Code::Unauthenticated
                    | tonic::Code::PermissionDenied
                    | tonic::Code::Unavailable
            ) =>
        {
            Err(status.into())
        }
        _ => Ok(()),
    }
}

/// CogniRelay's 403 for a host ops call from another host.
fn not_local() -> ApiError {
    original(
        ErrorCode::PermissionDenied,
        403,
        r#"{"detail":"Host ops endpoints are local-only"}"#.to_owned(),
    )
}

async fn ops_run(caller: Caller, document: RawJson<OpsRunRequest>) -> Passed {
    let (job_id, arguments) = match ops_job(&document.bytes) {
        Ok(job) => job,
        Err(refusal) => {
            authorise_ops(&caller).await?;
            return Err(refusal);
        }
    };
    // As the original: the scope first (a caller without admin:peers hears that), then
    // where the call comes from.
    if !caller.is_local() {
        authorise_ops(&caller).await?;
        return Err(not_local());
    }
    let (mut client, request) = call(
        &caller,
        pb::JsonRequest {
            body: arguments.into_bytes(),
        },
    );
    let result = match job_id.as_str() {
        "continuity_cold_store" => client.cold_store(request).await?,
        "continuity_cold_rehydrate" => client.cold_rehydrate(request).await?,
        "continuity_retention_apply" => client.retention_apply(request).await?,
        other => {
            authorise_ops(&caller).await?;
            return Err(original(
                ErrorCode::InvalidArgument,
                400,
                format!(
                    "{{\"detail\":{}}}",
                    serde_json::to_string(&format!("Unsupported ops job: {other}"))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    .into_inner()
    .body;
    let job_result = String::from_utf8(result)
        .map_err(|_| ApiError(Failure::new(ErrorCode::Internal, "job result is not UTF-8")))?;
    let text = |s: &str| serde_json::to_string(s).unwrap_or_default();
    Ok(Original(
        format!(
            "{{\"ok\":true,\"run_id\":{},\"job_id\":{},\"status\":\"succeeded\",\"local_only\":true,\"job_result\":{job_result}}}",
            text(&run_id()),
            text(&job_id),
        )
        .into_bytes(),
    ))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = COGNIRELAY;
    vec![
        r.route(
            Verb::Post,
            "/v1/continuity/upsert",
            "continuityUpsert",
            "CogniRelay: write a subject's continuity capsule (merge, timestamp guard)",
            upsert,
        )
        .calls("Upsert")
        .tool(
            "continuity.upsert",
            "Write a continuity capsule (merge, timestamp guard)",
        )
        .feature(features::CONTINUITY_SESSION_END_SNAPSHOT)
        .feature(features::CONTINUITY_PRESERVE_MODE)
        .feature(features::CONTINUITY_STABLE_PREFERENCES)
        .feature(features::CONTINUITY_THREAD_IDENTITY)
        .status(
            400,
            "Service rule failed; also when capsule.subject_id differs from subject_id, or a \
             lifecycle_transition finds no stored thread_descriptor",
        )
        .status(409, "Older or conflicting capsule, or concurrent writers"),
        r.route(
            Verb::Post,
            "/v1/continuity/patch",
            "continuityPatch",
            "CogniRelay: apply list operations to the active capsule",
            patch,
        )
        .calls("Patch")
        .tool("continuity.patch", "Patch a capsule's list fields")
        .feature(features::CONTINUITY_PATCH)
        .status(404, "No such capsule or item")
        .status(409, "Older or conflicting update"),
        r.route(
            Verb::Post,
            "/v1/continuity/lifecycle",
            "continuityLifecycle",
            "CogniRelay: move a thread or task through its lifecycle",
            lifecycle,
        )
        .calls("Lifecycle")
        .tool(
            "continuity.lifecycle",
            "Move a thread or task capsule through its lifecycle",
        )
        .feature(features::CONTINUITY_LIFECYCLE)
        .status(404, "No such capsule")
        .status(409, "Older or conflicting update"),
        r.route(
            Verb::Post,
            "/v1/continuity/read",
            "continuityRead",
            "CogniRelay: a capsule with its trust signals (and startup view)",
            read,
        )
        .calls("Read")
        .tool(
            "continuity.read",
            "Read a capsule with trust signals, or its startup view",
        )
        .feature(features::CONTINUITY_STARTUP_VIEW)
        .feature(features::CONTINUITY_STARTUP_GRAPH_SUMMARY)
        .feature(features::CONTINUITY_TRUST_SIGNALS)
        .status(404, "No such capsule"),
        r.route(
            Verb::Post,
            "/v1/continuity/list",
            "continuityList",
            "CogniRelay: the tenant's capsules, optionally by salience",
            list,
        )
        .calls("List")
        .tool(
            "continuity.list",
            "List capsules, by subject or by salience",
        )
        .feature(features::CONTINUITY_SALIENCE),
        r.route(
            Verb::Post,
            "/v1/continuity/compare",
            "continuityCompare",
            "CogniRelay: compare a candidate capsule with the active one",
            compare,
        )
        .calls("Compare")
        .tool(
            "continuity.compare",
            "Compare a candidate capsule with the stored one",
        )
        .status(
            400,
            "Service rule failed; also when the candidate's subject_id normalises to another key",
        )
        .status(404, "No such capsule"),
        r.route(
            Verb::Post,
            "/v1/continuity/revalidate",
            "continuityRevalidate",
            "CogniRelay: confirm, correct, degrade or conflict the active capsule",
            revalidate,
        )
        .calls("Revalidate")
        .tool(
            "continuity.revalidate",
            "Confirm, correct or degrade a capsule's verification",
        )
        .status(
            400,
            "Service rule failed; also when the candidate's subject_id normalises to another key",
        )
        .status(404, "No such capsule"),
        r.route(
            Verb::Post,
            "/v1/continuity/archive",
            "continuityArchive",
            "CogniRelay: move the active capsule into an archive envelope",
            archive,
        )
        .calls("Archive")
        .tool("continuity.archive", "Archive a capsule")
        .status(404, "No such capsule"),
        r.route(
            Verb::Post,
            "/v1/continuity/delete",
            "continuityDelete",
            "CogniRelay: delete a subject's active, fallback and archive artifacts",
            delete,
        )
        .calls("Delete")
        .tool("continuity.delete", "Delete a capsule and its fallback"),
        r.route(
            Verb::Post,
            "/v1/continuity/refresh/plan",
            "continuityRefreshPlan",
            "CogniRelay: capsules due for revalidation, by priority",
            refresh_plan,
        )
        .calls("RefreshPlan")
        .tool(
            "continuity.refresh_plan",
            "Which capsules need refreshing, in order",
        ),
        r.route(
            Verb::Post,
            "/v1/continuity/retention/plan",
            "continuityRetentionPlan",
            "CogniRelay: stale archives due for the cold tier",
            retention_plan,
        )
        .calls("RetentionPlan")
        .tool(
            "continuity.retention_plan",
            "Which archived capsules may move to the cold tier",
        ),
        r.route(
            Verb::Post,
            "/v1/context/retrieve",
            "contextRetrieve",
            "CogniRelay: a token-budgeted continuation bundle (continuity state, graph, schedule)",
            context_retrieve,
        )
        .calls("Retrieve")
        .tool(
            "context.retrieve",
            "Retrieve a token-budgeted continuation bundle for a task or subject",
        )
        .feature(features::CONTEXT_CONTINUITY_STATE)
        .feature(features::CONTEXT_GRAPH_CONTEXT)
        .status(404, "continuity_mode required and no capsule resolvable"),
        r.route(
            Verb::Post,
            "/v1/context/snapshot",
            "contextSnapshotCreate",
            "CogniRelay: store a context snapshot, immutable and content-addressed",
            context_snapshot_create,
        )
        .calls("CreateSnapshot")
        .tool(
            "context.snapshot_create",
            "Create a context snapshot and store it immutably",
        )
        .status(404, "No commit before as_of.value (no history is kept)"),
        r.route(
            Verb::Get,
            "/v1/context/snapshot/{snapshot_id}",
            "contextSnapshotGet",
            "CogniRelay: a stored context snapshot, byte for byte",
            context_snapshot_get,
        )
        .calls("GetSnapshot")
        .tool(
            "context.snapshot_get",
            "Load a stored context snapshot by id",
        )
        .status(404, "No such snapshot"),
        r.route(
            Verb::Get,
            "/v1/continuity/history",
            "continuityHistory",
            "Noema: a subject's revisions, newest first, as a hash chain",
            history,
        )
        .calls("History")
        .tool(
            "continuity.history",
            "A subject's revisions, as a verifiable chain",
        )
        .status(400, "Bad subject, or a page_token no earlier page returned")
        .status(404, "No such subject"),
        r.route(
            Verb::Post,
            "/v1/ops/run",
            "opsRun",
            "CogniRelay: run a maintenance job (continuity cold store, rehydrate, retention apply)",
            ops_run,
        )
        .calls("ColdStore")
        .calls("ColdRehydrate")
        .calls("RetentionApply")
        .status(400, "Unsupported job or bad arguments")
        .status(404, "No such archive or cold artifact")
        .status(409, "Artifact already in that tier"),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn refusal(bytes: &str) -> (String, String) {
        let ApiError(failure) = ops_job(bytes.as_bytes()).unwrap_err();
        (
            failure
                .metadata_value(noema_core::error::ORIGINAL_STATUS_KEY)
                .unwrap()
                .to_owned(),
            failure
                .metadata_value(noema_core::error::ORIGINAL_BODY_KEY)
                .unwrap()
                .to_owned(),
        )
    }

    #[test]
    fn an_ops_run_envelope_names_the_job_and_keeps_the_arguments_bytes() {
        let (job, arguments) =
            ops_job(br#"{"job_id":"continuity_cold_store","arguments":{"b":1,"a":2.0}}"#).unwrap();
        assert_eq!(job, "continuity_cold_store");
        assert_eq!(arguments, r#"{"b":1,"a":2.0}"#);
        let (_, arguments) = ops_job(br#"{"job_id":"continuity_retention_apply"}"#).unwrap();
        assert_eq!(arguments, "{}");
    }

    #[test]
    fn a_bad_envelope_gets_fastapis_422() {
        assert_eq!(
            refusal(r#"{"arguments":{}}"#),
            (
                "422".into(),
                r#"{"detail":[{"type":"missing","loc":["body","job_id"],"msg":"Field required","input":{"arguments":{}}}]}"#.into()
            )
        );
        let (status, body) = refusal(r#"{"job_id":"nope"}"#);
        assert_eq!(status, "422");
        assert!(body.starts_with(r#"{"detail":[{"type":"literal_error","loc":["body","job_id"],"msg":"Input should be 'index.rebuild_incremental', "#), "{body}");
        assert!(body.ends_with(r#"or 'segment_history_cold_rehydrate'","input":"nope","ctx":{"expected":"'index.rebuild_incremental', 'metrics.poll_and_alarm_eval', 'backup.create', 'backup.restore_test', 'replication.pull', 'replication.push', 'messages.replay_dead_letter_sweep', 'security.rotation_check', 'compact.plan', 'continuity_cold_store', 'continuity_cold_rehydrate', 'continuity_retention_apply', 'artifact_history_cold_store', 'artifact_history_cold_rehydrate', 'registry_history_cold_store', 'registry_history_cold_rehydrate', 'segment_history_maintenance', 'segment_history_cold_store' or 'segment_history_cold_rehydrate'"}}]}"#), "{body}");
    }
}

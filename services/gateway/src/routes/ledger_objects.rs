//! open-cognition's object and reference routes (`POST /canonical`, `POST /reference`,
//! `GET /canonicals`, `GET /references`, `GET /reconcile`) with the original's request
//! decoding, field order and status codes, plus read-by-id and payload streaming.

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use noema_core::ErrorCode;
use noema_core::time::proto::{parse_rfc3339, rfc3339_seconds};
use noema_proto::common::v1::PageRequest;
use noema_proto::ledger::v1 as pb;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::GatewayState;
use crate::error::{ApiError, ErrorStyle, Styled};
use crate::forward::grpc;
use crate::go_json::GoJson;
use crate::routes::ledger::list_limit;
use crate::{RouteDoc, doc};
use axum::routing::{MethodRouter, get, post};

const STYLE: ErrorStyle = ErrorStyle::OpenCognition;

fn decode_error(reason: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidArgument,
        format!("invalid JSON: {reason}"),
    )
    .styled(STYLE)
}

/// A request body decoded the way Go's `encoding/json` fills a struct: only the first
/// JSON value counts, keys match case-insensitively, unknown keys are ignored, and a
/// later duplicate wins.
struct GoObject(Map<String, Value>);

impl GoObject {
    fn parse(bytes: &[u8]) -> Result<GoObject, ApiError> {
        let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>();
        let value = match stream.next() {
            None => return Err(decode_error("EOF")),
            Some(Err(err)) => return Err(decode_error(err)),
            Some(Ok(value)) => value,
        };
        match value {
            Value::Object(map) => Ok(GoObject(
                map.into_iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v))
                    .collect(),
            )),
            other => Err(decode_error(format!(
                "json: cannot unmarshal {} into Go value of type main.Request",
                go_kind(&other)
            ))),
        }
    }

    fn field(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn string(&self, name: &str) -> Result<String, ApiError> {
        match self.field(name) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(unmarshal(other, name, "string")),
        }
    }

    fn int(&self, name: &str) -> Result<i64, ApiError> {
        match self.field(name) {
            None => Ok(0),
            Some(Value::Number(n)) => n
                .as_i64()
                .filter(|_| !n.to_string().contains(['.', 'e', 'E']))
                .ok_or_else(|| unmarshal(&Value::Number(n.clone()), name, "int")),
            Some(other) => Err(unmarshal(other, name, "int")),
        }
    }

    fn float(&self, name: &str) -> Result<Option<f64>, ApiError> {
        match self.field(name) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(unmarshal(other, name, "float64")),
        }
    }

    fn object(&self, name: &str) -> Result<Option<Value>, ApiError> {
        match self.field(name) {
            None => Ok(None),
            Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
            Some(other) => Err(unmarshal(other, name, "map[string]interface {}")),
        }
    }

    /// Standard, padded base64 (CR and LF ignored), as Go decodes `[]byte`.
    fn bytes(&self, name: &str) -> Result<Vec<u8>, ApiError> {
        let text = self.string(name)?;
        let cleaned: String = text.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        data_encoding::BASE64
            .decode(cleaned.as_bytes())
            .map_err(|e| decode_error(format!("illegal base64 data at input byte {}", e.position)))
    }
}

fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn unmarshal(value: &Value, field: &str, go_type: &str) -> ApiError {
    let shown = match value {
        Value::Number(n) => format!("number {n}"),
        other => go_kind(other).to_owned(),
    };
    decode_error(format!(
        "json: cannot unmarshal {shown} into Go struct field .{field} of type {go_type}"
    ))
}

/// open-cognition checks the mode before decoding: a STOPPED system answers 503 even to
/// a malformed body.
async fn stopped_first(state: &GatewayState, headers: &HeaderMap, err: ApiError) -> ApiError {
    let mut ledger = state.ledger();
    match ledger
        .get_status(grpc(headers, pb::GetStatusRequest {}))
        .await
    {
        Ok(status) if status.get_ref().mode == pb::SystemMode::Stopped as i32 => ApiError::new(
            ErrorCode::Unavailable,
            "system is STOPPED; no writes accepted",
        )
        .styled(STYLE),
        _ => err,
    }
}

/// CanonicalObject in open-cognition's field order.
#[derive(Debug, Serialize)]
pub struct CanonicalBody {
    pub schema_version: String,
    pub id: String,
    pub object_type: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub created_at: String,
    pub created_by: String,
    pub storage_path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

fn non_empty_object(s: &Option<prost_types::Struct>) -> Option<Value> {
    s.as_ref()
        .map(noema_proto::json::from_proto_struct)
        .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
}

pub fn canonical_body(o: pb::CanonicalObject) -> CanonicalBody {
    CanonicalBody {
        metadata: non_empty_object(&o.metadata),
        schema_version: o.schema_version,
        id: o.id,
        object_type: o.object_type,
        content_type: o.content_type,
        size_bytes: o.size_bytes,
        created_at: o.created_at,
        created_by: o.created_by,
        storage_path: o.storage_path,
    }
}

pub async fn put_canonical(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, GoJson<CanonicalBody>), ApiError> {
    let request = match decode_canonical(&body) {
        Ok(request) => request,
        Err(err) => return Err(stopped_first(&state, &headers, err).await),
    };
    let mut ledger = state.ledger();
    let object = ledger
        .put_canonical(grpc(&headers, request))
        .await
        .styled(STYLE)?
        .into_inner();
    Ok((StatusCode::CREATED, GoJson(canonical_body(object))))
}

fn decode_canonical(body: &[u8]) -> Result<pb::PutCanonicalRequest, ApiError> {
    let o = GoObject::parse(body)?;
    Ok(pb::PutCanonicalRequest {
        schema_version: o.string("schema_version")?,
        id: o.string("id")?,
        object_type: o.string("object_type")?,
        content_type: o.string("content_type")?,
        size_bytes: o.int("size_bytes")?,
        created_at: o.string("created_at")?,
        created_by: o.string("created_by")?,
        storage_path: o.string("storage_path")?,
        payload: o.bytes("payload")?,
        metadata: o
            .object("metadata")?
            .as_ref()
            .and_then(noema_proto::json::to_proto_struct),
    })
}

/// Go prints an integral float64 without a fraction (`1`, not `1.0`).
fn go_number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 1e21 {
        #[allow(clippy::cast_possible_truncation)]
        return json!(value as i64);
    }
    json!(value)
}

/// AgentReference in open-cognition's field order.
#[derive(Debug, Serialize)]
pub struct ReferenceBody {
    pub schema_version: String,
    pub id: String,
    pub canonical_object_id: String,
    pub agent_id: String,
    pub created_at: String,
    pub context: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relevance: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_weight: Option<Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub time_horizon: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub signature: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub public_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

pub fn reference_body(r: pb::AgentReference) -> ReferenceBody {
    ReferenceBody {
        metadata: non_empty_object(&r.metadata),
        schema_version: r.schema_version,
        id: r.id,
        canonical_object_id: r.canonical_object_id,
        agent_id: r.agent_id,
        created_at: r.created_at,
        context: r.context,
        relevance: r.relevance.map(go_number),
        trust_weight: r.trust_weight.map(go_number),
        time_horizon: r.time_horizon,
        signature: r.signature,
        public_key: r.public_key,
    }
}

pub async fn put_reference(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, GoJson<ReferenceBody>), ApiError> {
    let request = match decode_reference(&body) {
        Ok(request) => request,
        Err(err) => return Err(stopped_first(&state, &headers, err).await),
    };
    // The original echoes the decoded request (relevance as sent, not rounded).
    let echo_relevance = request.relevance;
    let echo_trust = request.trust_weight;
    let mut ledger = state.ledger();
    let stored = ledger
        .put_reference(grpc(&headers, request))
        .await
        .styled(STYLE)?
        .into_inner();
    let mut body = reference_body(stored);
    body.relevance = echo_relevance.map(go_number);
    body.trust_weight = echo_trust.map(go_number);
    Ok((StatusCode::CREATED, GoJson(body)))
}

fn decode_reference(body: &[u8]) -> Result<pb::PutReferenceRequest, ApiError> {
    let o = GoObject::parse(body)?;
    Ok(pb::PutReferenceRequest {
        schema_version: o.string("schema_version")?,
        id: o.string("id")?,
        canonical_object_id: o.string("canonical_object_id")?,
        agent_id: o.string("agent_id")?,
        created_at: o.string("created_at")?,
        context: o.string("context")?,
        relevance: o.float("relevance")?,
        trust_weight: o.float("trust_weight")?,
        time_horizon: o.string("time_horizon")?,
        signature: o.string("signature")?,
        public_key: o.string("public_key")?,
        metadata: o
            .object("metadata")?
            .as_ref()
            .and_then(noema_proto::json::to_proto_struct),
    })
}

#[derive(Debug, serde::Deserialize, Default)]
pub struct ListQuery {
    limit: Option<String>,
    offset: Option<String>,
    object_type: Option<String>,
    created_by: Option<String>,
    agent_id: Option<String>,
    canonical_object_id: Option<String>,
    created_after: Option<String>,
    created_before: Option<String>,
}

/// `created_after` / `created_before` as protobuf timestamps; a value that is not RFC
/// 3339 is refused rather than ignored (it would silently widen the listing).
fn time_filter(
    name: &str,
    value: Option<&str>,
) -> Result<Option<prost_types::Timestamp>, ApiError> {
    match value {
        None | Some("") => Ok(None),
        Some(text) => parse_rfc3339(text).map(Some).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{name} must be an RFC 3339 timestamp like 2026-01-31T12:00:00Z"
            ))
            .styled(STYLE)
        }),
    }
}

fn offset(raw: Option<&str>) -> u32 {
    raw.and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
}

pub async fn list_canonicals(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Result<GoJson<Vec<CanonicalBody>>, ApiError> {
    let limit = list_limit(q.limit.as_deref());
    if limit == 0 {
        return Ok(GoJson(Vec::new()));
    }
    let mut ledger = state.ledger();
    let objects = ledger
        .list_canonicals(grpc(
            &headers,
            pb::ListCanonicalsRequest {
                page: Some(PageRequest {
                    page_size: limit,
                    page_token: String::new(),
                }),
                offset: offset(q.offset.as_deref()),
                object_type: q.object_type.unwrap_or_default(),
                created_by: q.created_by.unwrap_or_default(),
                created_after: time_filter("created_after", q.created_after.as_deref())?,
                created_before: time_filter("created_before", q.created_before.as_deref())?,
            },
        ))
        .await
        .styled(STYLE)?
        .into_inner()
        .objects;
    Ok(GoJson(objects.into_iter().map(canonical_body).collect()))
}

pub async fn list_references(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Result<GoJson<Vec<ReferenceBody>>, ApiError> {
    let limit = list_limit(q.limit.as_deref());
    if limit == 0 {
        return Ok(GoJson(Vec::new()));
    }
    let mut ledger = state.ledger();
    let references = ledger
        .list_references(grpc(
            &headers,
            pb::ListReferencesRequest {
                page: Some(PageRequest {
                    page_size: limit,
                    page_token: String::new(),
                }),
                offset: offset(q.offset.as_deref()),
                agent_id: q.agent_id.unwrap_or_default(),
                canonical_object_id: q.canonical_object_id.unwrap_or_default(),
                created_after: time_filter("created_after", q.created_after.as_deref())?,
                created_before: time_filter("created_before", q.created_before.as_deref())?,
            },
        ))
        .await
        .styled(STYLE)?
        .into_inner()
        .references;
    Ok(GoJson(references.into_iter().map(reference_body).collect()))
}

pub async fn get_canonical(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<GoJson<CanonicalBody>, ApiError> {
    let mut ledger = state.ledger();
    let object = ledger
        .get_canonical(grpc(&headers, pb::GetCanonicalRequest { id }))
        .await
        .styled(STYLE)?
        .into_inner();
    Ok(GoJson(canonical_body(object)))
}

/// The payload bytes, streamed, with the object's content type.
pub async fn get_payload(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let mut ledger = state.ledger();
    let object = ledger
        .get_canonical(grpc(&headers, pb::GetCanonicalRequest { id: id.clone() }))
        .await
        .styled(STYLE)?
        .into_inner();
    let stream = ledger
        .get_canonical_payload(grpc(&headers, pb::GetCanonicalRequest { id }))
        .await
        .styled(STYLE)?
        .into_inner()
        .map(|chunk| {
            chunk
                .map(|c| Bytes::from(c.data))
                .map_err(std::io::Error::other)
        });
    Ok((
        [(CONTENT_TYPE, object.content_type)],
        Body::from_stream(stream),
    )
        .into_response())
}

#[derive(Debug, serde::Deserialize, Default)]
pub struct ReconcileQuery {
    verify_hashes: Option<String>,
}

/// open-cognition's summary (`checked`, `checked_at`, `missing_in_storage`, `ok`) plus
/// what it cannot see: storage orphans and, on request, corrupt objects.
pub async fn reconcile(
    State(state): State<GatewayState>,
    headers: HeaderMap,
    Query(q): Query<ReconcileQuery>,
) -> Result<GoJson<Value>, ApiError> {
    let verify_hashes = matches!(q.verify_hashes.as_deref(), Some("true" | "1"));
    let mut ledger = state.ledger();
    let report = ledger
        .reconcile(grpc(&headers, pb::ReconcileRequest { verify_hashes }))
        .await
        .styled(STYLE)?
        .into_inner();
    Ok(GoJson(json!({
        "checked": report.checked,
        "checked_at": report.checked_at.as_ref().map(rfc3339_seconds).unwrap_or_default(),
        "missing_in_storage": report.missing_in_storage.iter()
            .map(|m| json!({"id": m.id, "storage_path": m.storage_path})).collect::<Vec<_>>(),
        "ok": report.ok,
        "orphans_in_storage": report.orphans_in_storage.iter()
            .map(|o| json!({"size_bytes": o.size_bytes, "storage_path": o.storage_path})).collect::<Vec<_>>(),
        "corrupt": report.corrupt.iter()
            .map(|c| json!({"actual_hash": c.actual_hash, "id": c.id, "storage_path": c.storage_path})).collect::<Vec<_>>(),
    })))
}

/// This module's routes and their documentation (see `crate::route_table`).
pub fn routes() -> Vec<(RouteDoc, MethodRouter<GatewayState>)> {
    vec![
        (
            doc(
                "POST",
                "/canonical",
                "putCanonical",
                "ledger",
                "Store a canonical object (payload base64); 201, 409 duplicate, 422 invalid, 503 STOPPED",
            ),
            post(put_canonical),
        ),
        (
            doc(
                "POST",
                "/reference",
                "putReference",
                "ledger",
                "Record an Ed25519-signed agent reference; the key is registered on first use",
            ),
            post(put_reference),
        ),
        (
            RouteDoc {
                query: &[
                    ("limit", "Items to return: default 50, at most 200"),
                    ("offset", "Items to skip"),
                    ("object_type", "Only this object type"),
                    ("created_by", "Only objects by this creator"),
                    (
                        "created_after",
                        "RFC 3339: only objects created at or after this time",
                    ),
                    (
                        "created_before",
                        "RFC 3339: only objects created before this time",
                    ),
                ],
                ..doc(
                    "GET",
                    "/canonicals",
                    "listCanonicals",
                    "ledger",
                    "Canonical objects, newest created_at first",
                )
            },
            get(list_canonicals),
        ),
        (
            doc(
                "GET",
                "/canonicals/{id}",
                "getCanonical",
                "ledger",
                "One canonical object's metadata",
            ),
            get(get_canonical),
        ),
        (
            doc(
                "GET",
                "/canonicals/{id}/payload",
                "getCanonicalPayload",
                "ledger",
                "One canonical object's payload bytes, with its content type",
            ),
            get(get_payload),
        ),
        (
            RouteDoc {
                query: &[
                    ("limit", "Items to return: default 50, at most 200"),
                    ("offset", "Items to skip"),
                    ("agent_id", "Only this agent's references"),
                    ("canonical_object_id", "Only references to this object"),
                    (
                        "created_after",
                        "RFC 3339: only references created at or after this time",
                    ),
                    (
                        "created_before",
                        "RFC 3339: only references created before this time",
                    ),
                ],
                ..doc(
                    "GET",
                    "/references",
                    "listReferences",
                    "ledger",
                    "Agent references, newest created_at first",
                )
            },
            get(list_references),
        ),
        (
            RouteDoc {
                query: &[("verify_hashes", "true to also re-hash every stored object")],
                ..doc(
                    "GET",
                    "/reconcile",
                    "reconcile",
                    "ledger",
                    "Ledger rows missing from storage, storage objects with no row, corrupt objects",
                )
            },
            get(reconcile),
        ),
    ]
}

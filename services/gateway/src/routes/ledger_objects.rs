//! open-cognition's object and reference routes (`POST /canonical`, `POST /reference`,
//! `GET /canonicals`, `GET /references`, `GET /reconcile`) with the original's request
//! decoding, field order and status codes, plus read-by-id and payload streaming.

use axum::body::{Body, Bytes};
use axum::extract::Path;
use futures::StreamExt;
use noema_core::time::proto::rfc3339_seconds;
use noema_proto::common::v1::PageRequest;
use noema_proto::ledger::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ErrorStyle};
use crate::features;
use crate::forward::{Caller, Query, RawJson};
use crate::go_json::GoJson;
use crate::reply::{Answer, Created, Creates, Payload};
use crate::route::{Route, Routes, Verb};
use crate::routes::ledger::list_limit;

const OPEN_COGNITION: Routes = Routes::new(
    "ledger",
    ErrorStyle::OpenCognition,
    "noema.ledger.v1.LedgerService",
);

/// A body Go's decoder refuses: `invalid JSON: …` (400).
fn decode_error(reason: impl std::fmt::Display) -> ApiError {
    ApiError::malformed_body(format!("invalid JSON: {reason}"))
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
async fn stopped_first(caller: &Caller, err: ApiError) -> ApiError {
    match caller
        .ledger()
        .get_status(caller.request(pb::GetStatusRequest {}))
        .await
    {
        Ok(status) if status.get_ref().mode == pb::SystemMode::Stopped as i32 => {
            ApiError::stopped()
        }
        _ => err,
    }
}

/// CanonicalObject in open-cognition's field order.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CanonicalBody {
    #[schemars(extend("enum" = ["0.1.0"]))]
    pub schema_version: String,
    /// `sha256:<64 lowercase hex>` of the payload bytes.
    #[schemars(regex(pattern = "^sha256:[0-9a-f]{64}$"))]
    pub id: String,
    #[schemars(extend("enum" = ["observation", "document", "tool_output", "policy"]))]
    pub object_type: String,
    #[schemars(length(min = 1))]
    pub content_type: String,
    #[schemars(range(min = 0))]
    pub size_bytes: i64,
    /// RFC 3339 UTC seconds (`2026-01-31T12:00:00Z`).
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(length(min = 1))]
    pub created_by: String,
    /// `canonical/<object_type>/<yyyy>/<mm>/<dd>/<id>.json`.
    #[schemars(regex(
        pattern = "^canonical/[a-z_]+/[0-9]{4}/[0-9]{2}/[0-9]{2}/sha256:[0-9a-f]{64}\\.json$"
    ))]
    pub storage_path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub metadata: Option<Value>,
}

fn non_empty_object(s: &Option<prost_types::Struct>) -> Option<Value> {
    s.as_ref()
        .map(noema_proto::json::from_proto_struct)
        .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
}

impl From<pb::CanonicalObject> for CanonicalBody {
    fn from(o: pb::CanonicalObject) -> Self {
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
}

/// open-cognition's `POST /canonical` request: the object and its payload (decoded as
/// Go's `encoding/json` would: keys case-insensitive, unknown keys ignored). Documents
/// the body only; [`decode_canonical`] reads it.
#[derive(Debug, JsonSchema)]
pub struct CanonicalInput {
    #[serde(flatten)]
    pub object: CanonicalBody,
    /// Standard base64 of the bytes.
    #[schemars(length(min = 1), extend("format" = "byte"))]
    pub payload: String,
}

async fn put_canonical(caller: Caller, body: RawJson<CanonicalInput>) -> Creates<CanonicalBody> {
    let request = match decode_canonical(&body.bytes) {
        Ok(request) => request,
        Err(err) => return Err(stopped_first(&caller, err).await),
    };
    let object = caller
        .ledger()
        .put_canonical(caller.request(request))
        .await?
        .into_inner();
    Ok(Created(object.into()))
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
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReferenceBody {
    #[schemars(extend("enum" = ["0.1.0"]))]
    pub schema_version: String,
    /// UUID v4.
    #[schemars(regex(
        pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
    ))]
    pub id: String,
    #[schemars(regex(pattern = "^sha256:[0-9a-f]{64}$"))]
    pub canonical_object_id: String,
    #[schemars(length(min = 1))]
    pub agent_id: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(length(min = 1))]
    pub context: String,
    /// A number, written as Go writes a float64 (`1`, not `1.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0, max = 1))]
    pub relevance: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0, max = 1))]
    pub trust_weight: Option<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub time_horizon: String,
    /// Standard base64 of the Ed25519 signature over
    /// `id|canonical_object_id|agent_id|created_at`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub signature: String,
    /// Standard base64 of the 32-byte key; registered on first use.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub public_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub metadata: Option<Value>,
}

impl From<pb::AgentReference> for ReferenceBody {
    fn from(r: pb::AgentReference) -> Self {
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
}

/// open-cognition's `POST /reference` request: a reference as [`ReferenceBody`] shows it,
/// signed over `id|canonical_object_id|agent_id|created_at` (decoded as Go would).
/// Documents the body only; [`decode_reference`] reads it.
#[derive(Debug, JsonSchema)]
pub struct ReferenceInput {
    #[serde(flatten)]
    pub reference: ReferenceBody,
}

async fn put_reference(caller: Caller, body: RawJson<ReferenceInput>) -> Creates<ReferenceBody> {
    let request = match decode_reference(&body.bytes) {
        Ok(request) => request,
        Err(err) => return Err(stopped_first(&caller, err).await),
    };
    // The original echoes the decoded request (relevance as sent, not rounded).
    let echo_relevance = request.relevance;
    let echo_trust = request.trust_weight;
    let stored = caller
        .ledger()
        .put_reference(caller.request(request))
        .await?
        .into_inner();
    let mut body = ReferenceBody::from(stored);
    body.relevance = echo_relevance.map(go_number);
    body.trust_weight = echo_trust.map(go_number);
    Ok(Created(body))
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

/// `GET /canonicals` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CanonicalsQuery {
    /// Items to return: default 50, at most 200
    limit: Option<String>,
    /// Items to skip
    offset: Option<String>,
    /// Only this object type
    object_type: Option<String>,
    /// Only objects by this creator
    created_by: Option<String>,
    /// RFC 3339: only objects created at or after this time
    #[schemars(extend("anyOf" = [{"format": "date-time"}, {"maxLength": 0}]))]
    created_after: Option<String>,
    /// RFC 3339: only objects created before this time
    #[schemars(extend("anyOf" = [{"format": "date-time"}, {"maxLength": 0}]))]
    created_before: Option<String>,
}

/// `GET /references` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReferencesQuery {
    /// Items to return: default 50, at most 200
    limit: Option<String>,
    /// Items to skip
    offset: Option<String>,
    /// Only this agent's references
    agent_id: Option<String>,
    /// Only references to this object
    canonical_object_id: Option<String>,
    /// RFC 3339: only references created at or after this time
    #[schemars(extend("anyOf" = [{"format": "date-time"}, {"maxLength": 0}]))]
    created_after: Option<String>,
    /// RFC 3339: only references created before this time
    #[schemars(extend("anyOf" = [{"format": "date-time"}, {"maxLength": 0}]))]
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
        Some(text) => noema_core::time::proto::parse_rfc3339(text)
            .map(Some)
            .ok_or_else(|| {
                ApiError::malformed_query(format!(
                    "{name} must be an RFC 3339 timestamp like 2026-01-31T12:00:00Z"
                ))
            }),
    }
}

fn offset(raw: Option<&str>) -> u32 {
    raw.and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
}

fn page(limit: u32) -> Option<PageRequest> {
    Some(PageRequest {
        page_size: limit,
        page_token: String::new(),
    })
}

async fn list_canonicals(
    caller: Caller,
    Query(q): Query<CanonicalsQuery>,
) -> Answer<Vec<CanonicalBody>> {
    // The filters are checked before `limit=0` is honoured: a bad one is refused whatever
    // the limit (the original has no filters to check, only a lenient limit).
    let created_after = time_filter("created_after", q.created_after.as_deref())?;
    let created_before = time_filter("created_before", q.created_before.as_deref())?;
    let limit = list_limit(q.limit.as_deref());
    if limit == 0 {
        return Ok(GoJson(Vec::new()));
    }
    let request = pb::ListCanonicalsRequest {
        page: page(limit),
        offset: offset(q.offset.as_deref()),
        object_type: q.object_type.unwrap_or_default(),
        created_by: q.created_by.unwrap_or_default(),
        created_after,
        created_before,
    };
    let objects = caller
        .ledger()
        .list_canonicals(caller.request(request))
        .await?
        .into_inner()
        .objects;
    Ok(GoJson(
        objects.into_iter().map(CanonicalBody::from).collect(),
    ))
}

async fn list_references(
    caller: Caller,
    Query(q): Query<ReferencesQuery>,
) -> Answer<Vec<ReferenceBody>> {
    // As for canonicals: the filters first, then `limit=0`.
    let created_after = time_filter("created_after", q.created_after.as_deref())?;
    let created_before = time_filter("created_before", q.created_before.as_deref())?;
    let limit = list_limit(q.limit.as_deref());
    if limit == 0 {
        return Ok(GoJson(Vec::new()));
    }
    let request = pb::ListReferencesRequest {
        page: page(limit),
        offset: offset(q.offset.as_deref()),
        agent_id: q.agent_id.unwrap_or_default(),
        canonical_object_id: q.canonical_object_id.unwrap_or_default(),
        created_after,
        created_before,
    };
    let references = caller
        .ledger()
        .list_references(caller.request(request))
        .await?
        .into_inner()
        .references;
    Ok(GoJson(
        references.into_iter().map(ReferenceBody::from).collect(),
    ))
}

async fn get_canonical(caller: Caller, Path(id): Path<String>) -> Answer<CanonicalBody> {
    let object = caller
        .ledger()
        .get_canonical(caller.request(pb::GetCanonicalRequest { id }))
        .await?;
    Ok(GoJson(object.into_inner().into()))
}

/// The payload bytes, streamed, with the object's content type.
async fn get_payload(caller: Caller, Path(id): Path<String>) -> Result<Payload, ApiError> {
    let mut ledger = caller.ledger();
    let object = ledger
        .get_canonical(caller.request(pb::GetCanonicalRequest { id: id.clone() }))
        .await?
        .into_inner();
    let stream = ledger
        .get_canonical_payload(caller.request(pb::GetCanonicalRequest { id }))
        .await?
        .into_inner()
        .map(|chunk| {
            chunk
                .map(|c| Bytes::from(c.data))
                .map_err(std::io::Error::other)
        });
    Ok(Payload {
        content_type: object.content_type,
        body: Body::from_stream(stream),
    })
}

/// `GET /reconcile` parameters.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReconcileQuery {
    /// true to also re-hash every stored object
    verify_hashes: Option<String>,
}

/// open-cognition's summary (`checked`, `checked_at`, `missing_in_storage`, `ok`) plus
/// what it cannot see: storage orphans and, on request, corrupt objects.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReconcileReport {
    pub checked: u64,
    pub checked_at: String,
    /// Objects whose stored bytes no longer hash to their id (with `verify_hashes`).
    pub corrupt: Vec<CorruptObject>,
    pub missing_in_storage: Vec<MissingObject>,
    /// Objects whose bytes are present (and, with `verify_hashes`, intact).
    pub ok: u64,
    /// Stored bytes with no ledger row (an interrupted write).
    pub orphans_in_storage: Vec<OrphanObject>,
}

/// A ledger row whose bytes are missing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MissingObject {
    pub id: String,
    pub storage_path: String,
}

/// Stored bytes without a ledger row.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OrphanObject {
    pub size_bytes: u64,
    pub storage_path: String,
}

/// Stored bytes that do not hash to their id.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CorruptObject {
    pub actual_hash: String,
    pub id: String,
    pub storage_path: String,
}

async fn reconcile(caller: Caller, Query(q): Query<ReconcileQuery>) -> Answer<ReconcileReport> {
    let verify_hashes = matches!(q.verify_hashes.as_deref(), Some("true" | "1"));
    let report = caller
        .ledger()
        .reconcile(caller.request(pb::ReconcileRequest { verify_hashes }))
        .await?
        .into_inner();
    Ok(GoJson(ReconcileReport {
        checked: report.checked,
        checked_at: report
            .checked_at
            .as_ref()
            .map(rfc3339_seconds)
            .unwrap_or_default(),
        corrupt: report
            .corrupt
            .into_iter()
            .map(|c| CorruptObject {
                actual_hash: c.actual_hash,
                id: c.id,
                storage_path: c.storage_path,
            })
            .collect(),
        missing_in_storage: report
            .missing_in_storage
            .into_iter()
            .map(|m| MissingObject {
                id: m.id,
                storage_path: m.storage_path,
            })
            .collect(),
        ok: report.ok,
        orphans_in_storage: report
            .orphans_in_storage
            .into_iter()
            .map(|o| OrphanObject {
                size_bytes: o.size_bytes,
                storage_path: o.storage_path,
            })
            .collect(),
    }))
}

/// This module's routes (see `crate::route_table`).
pub fn routes() -> Vec<Route> {
    let r = OPEN_COGNITION;
    vec![
        r.route(
            Verb::Post,
            "/canonical",
            "putCanonical",
            "Store a canonical object (payload base64); 201, 409 duplicate, 422 invalid, 503 STOPPED",
            put_canonical,
        )
        .calls("PutCanonical")
        .status(409, "An object with this id exists")
        .status(
            422,
            "Invalid: also when id is not sha256(payload), size_bytes not its length, or \
             storage_path not the one of this type, date and id",
        )
        .tool("ledger_put_canonical", "Store a content-addressed object (payload: standard base64)")
        .feature(features::LEDGER_OBJECTS),
        r.route(
            Verb::Post,
            "/reference",
            "putReference",
            "Record an Ed25519-signed agent reference; the key is registered on first use",
            put_reference,
        )
        .calls("PutReference")
        .status(409, "A reference with this id exists")
        .status(
            422,
            "Invalid: also when the signature is not the key's over \
             id:canonical_object_id:agent_id:created_at, or the agent has another key",
        )
        .tool("ledger_put_reference", "Record an Ed25519-signed agent reference to an object")
        .feature(features::LEDGER_REFERENCES),
        r.route(
            Verb::Get,
            "/canonicals",
            "listCanonicals",
            "Canonical objects, newest created_at first",
            list_canonicals,
        )
        .calls("ListCanonicals")
        .tool("ledger_list_canonicals", "Canonical objects, newest first, filtered"),
        r.route(
            Verb::Get,
            "/canonicals/{id}",
            "getCanonical",
            "One canonical object's metadata",
            get_canonical,
        )
        .calls("GetCanonical")
        .status(404, "No such object")
        .tool("ledger_get_canonical", "A canonical object's metadata"),
        r.route(
            Verb::Get,
            "/canonicals/{id}/payload",
            "getCanonicalPayload",
            "One canonical object's payload bytes, with its content type",
            get_payload,
        )
        .calls("GetCanonical")
        .calls("GetCanonicalPayload")
        .status(404, "No such object")
        .tool("ledger_get_payload", "A canonical object's bytes (text, or base64)"),
        r.route(
            Verb::Get,
            "/references",
            "listReferences",
            "Agent references, newest created_at first",
            list_references,
        )
        .calls("ListReferences")
        .tool("ledger_list_references", "Agent references, newest first, filtered"),
        r.route(
            Verb::Get,
            "/reconcile",
            "reconcile",
            "Ledger rows missing from storage, storage objects with no row, corrupt objects",
            reconcile,
        )
        .calls("Reconcile")
        .tool("ledger_reconcile", "Missing, orphaned and (verify_hashes) corrupt stored objects"),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::go_json::tests::assert_sorted;
    use proptest::prelude::*;

    #[test]
    fn the_reconcile_report_keeps_its_field_order() {
        assert_sorted(&ReconcileReport {
            checked: 1,
            checked_at: "t".into(),
            corrupt: vec![CorruptObject {
                actual_hash: "h".into(),
                id: "i".into(),
                storage_path: "p".into(),
            }],
            missing_in_storage: vec![MissingObject {
                id: "i".into(),
                storage_path: "p".into(),
            }],
            ok: 0,
            orphans_in_storage: vec![OrphanObject {
                size_bytes: 1,
                storage_path: "p".into(),
            }],
        });
    }

    #[test]
    fn go_prints_integral_floats_without_a_fraction() {
        assert_eq!(go_number(1.0).to_string(), "1");
        assert_eq!(go_number(0.5).to_string(), "0.5");
    }

    /// `name` with each letter's case flipped where `flips` says so.
    fn recase(name: &str, flips: &[bool]) -> String {
        name.chars()
            .enumerate()
            .map(|(i, c)| {
                if flips.get(i).copied().unwrap_or(false) {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_config())]

        #[test]
        fn any_body_is_decoded_or_refused_as_malformed(bytes in proptest::prelude::any::<Vec<u8>>()) {
            let refusals = [decode_canonical(&bytes).err(), decode_reference(&bytes).err()];
            for err in refusals.into_iter().flatten() {
                proptest::prop_assert_eq!(err.0.reason, noema_core::Reason::MalformedBody);
            }
        }

        #[test]
        fn json_shaped_bodies_are_decoded_or_refused_as_malformed(
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::Just(serde_json::Value::Null),
                    proptest::prelude::any::<bool>().prop_map(serde_json::Value::from),
                    proptest::prelude::any::<f64>().prop_map(serde_json::Value::from),
                    proptest::prelude::any::<i64>().prop_map(serde_json::Value::from),
                    proptest::prelude::any::<String>().prop_map(serde_json::Value::from),
                    proptest::prelude::Just(serde_json::json!({"a": [1]})),
                ],
                11,
            ),
        ) {
            let names = ["schema_version", "id", "object_type", "content_type", "size_bytes",
                "created_at", "created_by", "storage_path", "payload", "metadata", "relevance"];
            let body: Map<String, Value> = names.iter().map(|n| (*n).to_owned()).zip(values).collect();
            let bytes = serde_json::to_vec(&body).unwrap();
            let refusals = [decode_canonical(&bytes).err(), decode_reference(&bytes).err()];
            for err in refusals.into_iter().flatten() {
                proptest::prop_assert_eq!(err.0.reason, noema_core::Reason::MalformedBody);
            }
        }

        /// Go matches keys case-insensitively and reads `[]byte` as padded standard base64
        /// with line breaks ignored.
        #[test]
        fn keys_in_any_case_and_wrapped_base64_decode_alike(
            payload in proptest::prelude::any::<Vec<u8>>(),
            size in proptest::prelude::any::<i64>(),
            text in proptest::prelude::any::<String>(),
            flips in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..16),
            wrap in 1usize..80,
        ) {
            let encoded = data_encoding::BASE64.encode(&payload);
            let wrapped: Vec<String> = encoded
                .as_bytes()
                .chunks(wrap)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect();
            let plain = json!({"id": text, "size_bytes": size, "payload": encoded});
            let recased = json!({
                recase("id", &flips): text,
                recase("size_bytes", &flips): size,
                recase("payload", &flips): wrapped.join("\r\n"),
            });
            let a = decode_canonical(&serde_json::to_vec(&plain).unwrap()).unwrap();
            let b = decode_canonical(&serde_json::to_vec(&recased).unwrap()).unwrap();
            proptest::prop_assert_eq!(&a, &b);
            proptest::prop_assert_eq!(a.payload, payload);
            proptest::prop_assert_eq!(a.size_bytes, size);
        }

        #[test]
        fn go_numbers_keep_their_value(value in -1e15f64..1e15) {
            proptest::prop_assert_eq!(go_number(value).as_f64(), Some(value));
        }
    }
}

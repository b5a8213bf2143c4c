//! Signed diaries over REST on MoltNet's paths and JSON shapes (`shared/compat/moltnet.md`
//! §2, §5–§10): camelCase bodies, ISO 8601 millisecond timestamps, RFC 9457 problems.
//! Noema additions on their own paths: diary shares (the seed's reader/writer shares
//! replace MoltNet's grants), and an agent's signature chain.
//!
//! `x-moltnet-team-id` is accepted and stored on new diaries; it grants nothing:
//! authorisation follows the seed's owner / shares / visibility model. Handlers never
//! validate before the gRPC call, so authentication and scope errors come first.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{MethodRouter, delete, get, patch, post};
use noema_core::ErrorCode;
use noema_core::time::proto::iso_millis;
use noema_proto::identity::v1 as pb;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::GatewayState;
use crate::error::{ApiError, ErrorStyle};
use crate::forward::{grpc, json_body};
use crate::go_json::GoJson;
use crate::{RouteDoc, doc};

type Reply = Result<GoJson<Value>, ApiError>;
type CreatedReply = Result<(StatusCode, GoJson<Value>), ApiError>;

/// A downstream status as MoltNet's problem: conflicts (failed preconditions) are 409,
/// and the signing-request problems get MoltNet's own types.
fn problem(status: tonic::Status) -> ApiError {
    let mut err = ApiError::from(status).styled(ErrorStyle::MoltNet);
    let slug = match err.message.as_str() {
        "This signing request has expired" => {
            Some(("signing-request-expired", "Signing Request Expired"))
        }
        "A signature has already been submitted for this request" => Some((
            "signing-request-already-completed",
            "Signing Request Already Completed",
        )),
        m if m.starts_with("Signing request limit reached") => Some((
            "signing-request-limit-reached",
            "Signing Request Limit Reached",
        )),
        _ => None,
    };
    if err.code == ErrorCode::FailedPrecondition {
        err.code = ErrorCode::AlreadyExists;
    }
    if let Some((slug, title)) = slug {
        err.extra.insert(
            "type".into(),
            json!(format!("https://themolt.net/problems/{slug}")),
        );
        err.extra.insert("title".into(), json!(title));
    }
    if err.code == ErrorCode::ResourceExhausted
        && let Some(seconds) = err
            .message
            .split("retry after ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
    {
        err.extra.insert("retryAfter".into(), json!(seconds));
    }
    if err.message == "This signing request has already been used to create an entry" {
        err.extra.insert(
            "conflict".into(),
            json!({
                "constraint": "diary_entries_content_signature_unique_idx",
                "target": {"resource": "diary-entry"},
            }),
        );
    }
    err
}

fn time(t: &Option<prost_types::Timestamp>) -> Value {
    t.as_ref().map_or(Value::Null, |t| json!(iso_millis(t)))
}

fn text_or_null(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { json!(s) }
}

/// MoltNet's `creator` principal.
fn creator(id: &str, fingerprint: &str, public_key: &str) -> Value {
    if public_key.is_empty() {
        json!({"kind": "human", "humanId": id, "identityId": null})
    } else {
        json!({"kind": "agent", "identityId": id, "fingerprint": fingerprint, "publicKey": public_key})
    }
}

fn diary_body(d: &pb::Diary) -> Value {
    json!({
        "id": d.id,
        "creator": creator(&d.owner_id, &d.owner_fingerprint, &d.owner_public_key),
        "ownerId": d.owner_id,
        "teamId": text_or_null(&d.team_id),
        "name": d.name,
        "visibility": d.visibility,
        "signed": d.signed,
        "createdAt": time(&d.created_at),
        "updatedAt": time(&d.updated_at),
    })
}

fn share_body(s: &pb::DiaryShare) -> Value {
    json!({
        "diaryId": s.diary_id,
        "agentId": s.agent_id,
        "role": s.role,
        "status": s.status,
        "invitedBy": s.invited_by,
        "createdAt": time(&s.created_at),
        "updatedAt": time(&s.updated_at),
    })
}

pub fn entry_body(e: &pb::Entry) -> Value {
    json!({
        "id": e.id,
        "diaryId": e.diary_id,
        "creator": creator(&e.created_by, &e.creator_fingerprint, &e.creator_public_key),
        "createdBy": e.created_by,
        "title": e.title,
        "content": e.content,
        "tags": e.tags,
        "injectionRisk": e.injection_risk,
        "importance": e.importance,
        "accessCount": e.access_count,
        "lastAccessedAt": time(&e.last_accessed_at),
        "entryType": e.entry_type,
        "contentHash": e.content_hash,
        "contentSignature": text_or_null(&e.content_signature),
        "signedBy": text_or_null(&e.signed_by),
        "signerFingerprint": text_or_null(&e.signer_fingerprint),
        "signedAt": time(&e.signed_at),
        "superseded": e.superseded,
        "visibility": e.visibility,
        "createdAt": time(&e.created_at),
        "updatedAt": time(&e.updated_at),
    })
}

fn relation_body(r: &pb::EntryRelation) -> Value {
    json!({
        "id": r.id,
        "sourceId": r.source_id,
        "targetId": r.target_id,
        "relation": r.relation,
        "status": r.status,
        "sourceCidSnapshot": text_or_null(&r.source_cid_snapshot),
        "targetCidSnapshot": text_or_null(&r.target_cid_snapshot),
        "workflowId": null,
        "confidence": null,
        "similarity": null,
        "createdAt": time(&r.created_at),
        "updatedAt": time(&r.updated_at),
    })
}

fn signing_request_body(r: &pb::SigningRequest) -> Value {
    json!({
        "id": r.id,
        "agentId": r.agent_id,
        "verificationMethod": r.verification_method,
        "requestedBy": {"id": r.agent_id, "type": "agent"},
        "signerConstraint": null,
        "teamId": text_or_null(&r.team_id),
        "purpose": text_or_null(&r.purpose),
        "claimedByHumanId": null,
        "signingCredentialId": null,
        "challenge": null,
        "receipt": null,
        "message": r.message,
        "nonce": r.nonce,
        "signingInput": data_encoding::BASE64.encode(&r.signing_input),
        "status": r.status,
        "signature": text_or_null(&r.signature),
        "valid": r.valid,
        "entryId": text_or_null(&r.entry_id),
        "createdAt": time(&r.created_at),
        "expiresAt": time(&r.expires_at),
        "completedAt": time(&r.completed_at),
        "claimedAt": null,
        "rejectedAt": null,
        "rejectionReason": null,
    })
}

/// Query parameters as (name, value) pairs, repeated names kept (MoltNet's arrays).
fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                    match u8::from_str_radix(hex, 16) {
                        Ok(b) => {
                            out.push(b);
                            i += 2;
                        }
                        Err(_) => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    raw.unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn all(pairs: &[(String, String)], name: &str) -> Vec<String> {
    pairs
        .iter()
        .filter(|(k, _)| k == name || k.strip_suffix("[]") == Some(name))
        .map(|(_, v)| v.clone())
        .collect()
}

fn one(pairs: &[(String, String)], name: &str) -> Option<String> {
    all(pairs, name).into_iter().next()
}

/// A numeric query value; an unparsable one is passed as out of range so the service
/// refuses it after authentication.
fn number(pairs: &[(String, String)], name: &str) -> u32 {
    one(pairs, name).map_or(0, |v| v.parse().unwrap_or(u32::MAX))
}

fn flag(pairs: &[(String, String)], name: &str) -> bool {
    one(pairs, name).is_some_and(|v| matches!(v.as_str(), "true" | "1"))
}

// ---- diaries ---------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DiaryBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    visibility: Option<String>,
}

async fn create_diary(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> CreatedReply {
    let body: DiaryBody = json_body(&body, ErrorStyle::MoltNet)?;
    let team_id = headers
        .get("x-moltnet-team-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let d = s
        .diary()
        .create_diary(grpc(
            &headers,
            pb::CreateDiaryRequest {
                name: body.name.unwrap_or_default(),
                visibility: body.visibility.unwrap_or_default(),
                team_id,
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok((StatusCode::CREATED, GoJson(diary_body(&d))))
}

async fn list_diaries(State(s): State<GatewayState>, headers: HeaderMap) -> Reply {
    let list = s
        .diary()
        .list_diaries(grpc(&headers, pb::ListDiariesRequest {}))
        .await
        .map_err(problem)?
        .into_inner();
    let items: Vec<Value> = list.diaries.iter().map(diary_body).collect();
    Ok(GoJson(json!({"items": items})))
}

async fn get_diary(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Reply {
    let d = s
        .diary()
        .get_diary(grpc(&headers, pb::GetDiaryRequest { id }))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(diary_body(&d)))
}

async fn update_diary(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    let body: DiaryBody = json_body(&body, ErrorStyle::MoltNet)?;
    let d = s
        .diary()
        .update_diary(grpc(
            &headers,
            pb::UpdateDiaryRequest {
                id,
                name: body.name,
                visibility: body.visibility,
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(diary_body(&d)))
}

async fn delete_diary(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Reply {
    s.diary()
        .delete_diary(grpc(&headers, pb::DeleteDiaryRequest { id }))
        .await
        .map_err(problem)?;
    Ok(GoJson(json!({"success": true})))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShareBody {
    #[serde(default)]
    agent_id: String,
    #[serde(default)]
    role: String,
}

async fn share_diary(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(diary_id): Path<String>,
    body: Bytes,
) -> CreatedReply {
    let body: ShareBody = json_body(&body, ErrorStyle::MoltNet)?;
    let share = s
        .diary()
        .share_diary(grpc(
            &headers,
            pb::ShareDiaryRequest {
                diary_id,
                agent_id: body.agent_id,
                role: body.role,
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok((StatusCode::CREATED, GoJson(share_body(&share))))
}

async fn list_shares(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(diary_id): Path<String>,
) -> Reply {
    let list = s
        .diary()
        .list_shares(grpc(&headers, pb::ListSharesRequest { diary_id }))
        .await
        .map_err(problem)?
        .into_inner();
    let shares: Vec<Value> = list.shares.iter().map(share_body).collect();
    Ok(GoJson(json!({"shares": shares})))
}

async fn respond(s: GatewayState, headers: HeaderMap, diary_id: String, accept: bool) -> Reply {
    let share = s
        .diary()
        .respond_to_share(grpc(
            &headers,
            pb::RespondToShareRequest { diary_id, accept },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(share_body(&share)))
}

async fn accept_share(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(diary_id): Path<String>,
) -> Reply {
    respond(s, headers, diary_id, true).await
}

async fn decline_share(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(diary_id): Path<String>,
) -> Reply {
    respond(s, headers, diary_id, false).await
}

async fn revoke_share(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path((diary_id, agent_id)): Path<(String, String)>,
) -> Reply {
    let share = s
        .diary()
        .revoke_share(grpc(
            &headers,
            pb::RevokeShareRequest { diary_id, agent_id },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(share_body(&share)))
}

// ---- entries ---------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateEntryBody {
    #[serde(default)]
    content: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
    #[serde(default)]
    importance: Option<u32>,
    #[serde(default)]
    entry_type: Option<String>,
    #[serde(default)]
    content_hash: Option<String>,
    #[serde(default)]
    signing_request_id: Option<String>,
}

async fn create_entry(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(diary_id): Path<String>,
    body: Bytes,
) -> CreatedReply {
    let body: CreateEntryBody = json_body(&body, ErrorStyle::MoltNet)?;
    let e = s
        .diary()
        .create_entry(grpc(
            &headers,
            pb::CreateEntryRequest {
                diary_id,
                content: body.content,
                title: body.title,
                tags: body.tags.unwrap_or_default(),
                entry_type: body.entry_type.unwrap_or_default(),
                importance: body.importance.unwrap_or(0),
                content_hash: body.content_hash.unwrap_or_default(),
                signing_request_id: body.signing_request_id.unwrap_or_default(),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok((StatusCode::CREATED, GoJson(entry_body(&e))))
}

async fn list_entries(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(diary_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Reply {
    let q = query_pairs(raw.as_deref());
    let list = s
        .diary()
        .list_entries(grpc(
            &headers,
            pb::ListEntriesRequest {
                diary_id,
                limit: number(&q, "limit"),
                offset: number(&q, "offset"),
                ids: all(&q, "ids"),
                tags: all(&q, "tags"),
                exclude_tags: all(&q, "excludeTags"),
                entry_types: all(&q, "entryType"),
                exclude_superseded: flag(&q, "excludeSuperseded"),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    let items: Vec<Value> = list.entries.iter().map(entry_body).collect();
    Ok(GoJson(json!({
        "items": items,
        "total": list.total,
        "limit": list.limit,
        "offset": list.offset,
    })))
}

/// `minCount` for the service, which refuses values below 1: absent is `None`; a value
/// that is not an integer becomes 0 so it is refused after authentication (like
/// `number`); an all-digit value too large for an i64 is `i64::MAX` (valid, matches
/// nothing).
fn min_count(pairs: &[(String, String)]) -> Option<i64> {
    one(pairs, "minCount").map(|v| match v.parse::<i64>() {
        Ok(n) => n,
        Err(_) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => i64::MAX,
        Err(_) => 0,
    })
}

/// `entryTypes` both repeated (`entryTypes=a&entryTypes=b`, also `entryTypes[]=`) and
/// comma-separated (`entryTypes=a,b`); the service checks each type. Splitting keeps
/// empty pieces so `a,,b` is refused rather than silently read as `a,b`.
fn entry_types_param(pairs: &[(String, String)]) -> Vec<String> {
    all(pairs, "entryTypes")
        .iter()
        .flat_map(|v| v.split(',').map(str::to_owned))
        .collect()
}

/// MoltNet's `GET /diaries/:diaryId/tags`: `{tags:[{tag, count}], total}`, most used first.
async fn list_tags(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(diary_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Reply {
    let q = query_pairs(raw.as_deref());
    let list = s
        .diary()
        .list_diary_tags(grpc(
            &headers,
            pb::ListDiaryTagsRequest {
                diary_id,
                prefix: one(&q, "prefix").unwrap_or_default(),
                min_count: min_count(&q),
                entry_types: entry_types_param(&q),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    let tags: Vec<Value> = list
        .tags
        .iter()
        .map(|t| json!({"tag": t.tag, "count": t.count}))
        .collect();
    Ok(GoJson(json!({"tags": tags, "total": list.total})))
}

/// `depth` for the service, which refuses anything but 1-3: absent is `None`; a value
/// that is not an unsigned integer (or too large) is passed as 0 so it is refused after
/// authentication.
fn depth_param(pairs: &[(String, String)]) -> Option<u32> {
    one(pairs, "depth").map(|v| v.parse().unwrap_or(0))
}

/// A walked relation: MoltNet's EntryRelation plus `depth` and `parentRelationId`.
fn walked_body(w: &pb::WalkedRelation) -> Value {
    let mut body = relation_body(&w.relation.clone().unwrap_or_default());
    if let Value::Object(map) = &mut body {
        map.insert("depth".into(), json!(w.depth));
        map.insert(
            "parentRelationId".into(),
            text_or_null(&w.parent_relation_id),
        );
    }
    body
}

/// MoltNet's `GET /entries/:entryId`; with `expand=relations` the entry gets
/// `relations:{requestedDepth, maxDepth, items}` from WalkRelations. GetEntry checks
/// `expand` (only `relations`, as unknown enum values elsewhere are refused) and `depth`.
async fn get_entry(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Reply {
    let q = query_pairs(raw.as_deref());
    let expand = one(&q, "expand").unwrap_or_default();
    let depth = depth_param(&q);
    let e = s
        .diary()
        .get_entry(grpc(
            &headers,
            pb::GetEntryRequest {
                id: id.clone(),
                expand: expand.clone(),
                depth,
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    let mut body = entry_body(&e);
    if expand == "relations" {
        let walk = s
            .diary()
            .walk_relations(grpc(
                &headers,
                pb::WalkRelationsRequest {
                    entry_id: e.id.clone(),
                    depth,
                    status: String::new(),
                },
            ))
            .await
            .map_err(problem)?
            .into_inner();
        let items: Vec<Value> = walk.items.iter().map(walked_body).collect();
        if let Value::Object(map) = &mut body {
            map.insert(
                "relations".into(),
                json!({
                    "requestedDepth": walk.requested_depth,
                    "maxDepth": walk.max_depth,
                    "items": items,
                }),
            );
        }
    }
    Ok(GoJson(body))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateEntryBody {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
    #[serde(default)]
    importance: Option<u32>,
    #[serde(default)]
    entry_type: Option<String>,
    #[serde(default)]
    injection_risk: Option<bool>,
    #[serde(default)]
    record_access: Option<bool>,
}

async fn update_entry(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    let body: UpdateEntryBody = json_body(&body, ErrorStyle::MoltNet)?;
    let e = s
        .diary()
        .update_entry(grpc(
            &headers,
            pb::UpdateEntryRequest {
                id,
                title: body.title,
                content: body.content,
                set_tags: body.tags.is_some(),
                tags: body.tags.unwrap_or_default(),
                entry_type: body.entry_type,
                importance: body.importance,
                injection_risk: body.injection_risk,
                record_access: body.record_access.unwrap_or(false),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(entry_body(&e)))
}

async fn delete_entry(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Reply {
    s.diary()
        .delete_entry(grpc(&headers, pb::DeleteEntryRequest { id }))
        .await
        .map_err(problem)?;
    Ok(GoJson(json!({"success": true})))
}

/// MoltNet's bulk delete: `{ids}` → `{deleted, skipped}`, both in request order. Only the
/// body's JSON types are checked here (as typed bodies are decoded on the other routes);
/// the count, UUID and uniqueness rules are identity's, after authentication. Missing
/// `ids` is sent as none, which identity refuses.
async fn delete_entries(State(s): State<GatewayState>, headers: HeaderMap, body: Bytes) -> Reply {
    let body: Value = json_body(&body, ErrorStyle::MoltNet)?;
    let invalid = |message: String| ApiError::bad_request(message).styled(ErrorStyle::MoltNet);
    let Value::Object(body) = body else {
        return Err(invalid(
            "the body must be a JSON object: {\"ids\": [entry ids]}".into(),
        ));
    };
    let ids = match body.get("ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(id) => Ok(id.clone()),
                other => Err(invalid(format!(
                    "ids[{i}] must be a UUID string, got {other}"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(invalid(format!(
                "ids must be an array of entry ids, got {other}"
            )));
        }
    };
    let reply = s
        .diary()
        .delete_entries(grpc(&headers, pb::DeleteEntriesRequest { ids }))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(
        json!({"deleted": reply.deleted, "skipped": reply.skipped}),
    ))
}

async fn verify_entry(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Reply {
    let v = s
        .diary()
        .verify_entry(grpc(&headers, pb::VerifyEntryRequest { id }))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(json!({
        "signed": v.signed,
        "hashMatches": v.hash_matches,
        "signatureValid": v.signature_valid,
        "valid": v.valid,
        "contentHash": text_or_null(&v.content_hash),
        "agentFingerprint": text_or_null(&v.agent_fingerprint),
        "reason": text_or_null(&v.reason),
    })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SearchBody {
    #[serde(default)]
    diary_id: Option<String>,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    exclude_tags: Vec<String>,
    #[serde(default)]
    entry_types: Vec<String>,
    #[serde(default)]
    exclude_superseded: bool,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    offset: Option<u32>,
}

async fn search(State(s): State<GatewayState>, headers: HeaderMap, body: Bytes) -> Reply {
    let body: SearchBody = json_body(&body, ErrorStyle::MoltNet)?;
    let found = s
        .diary()
        .search_entries(grpc(
            &headers,
            pb::SearchEntriesRequest {
                diary_id: body.diary_id.unwrap_or_default(),
                query: body.query.unwrap_or_default(),
                tags: body.tags,
                exclude_tags: body.exclude_tags,
                entry_types: body.entry_types,
                exclude_superseded: body.exclude_superseded,
                limit: body.limit.unwrap_or(0),
                offset: body.offset.unwrap_or(0),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    let results: Vec<Value> = found.results.iter().map(entry_body).collect();
    Ok(GoJson(json!({"results": results, "total": found.total})))
}

// ---- relations -------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RelationBody {
    #[serde(default)]
    target_id: String,
    #[serde(default)]
    relation: String,
    #[serde(default)]
    status: Option<String>,
}

async fn create_relation(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(source_id): Path<String>,
    body: Bytes,
) -> CreatedReply {
    let body: RelationBody = json_body(&body, ErrorStyle::MoltNet)?;
    let created = s
        .diary()
        .create_relation(grpc(
            &headers,
            pb::CreateRelationRequest {
                source_id,
                target_id: body.target_id,
                relation: body.relation,
                status: body.status.unwrap_or_default(),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    let status = if created.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let relation = created.relation.unwrap_or_default();
    Ok((status, GoJson(relation_body(&relation))))
}

async fn list_relations(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(entry_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Reply {
    let q = query_pairs(raw.as_deref());
    if let Some(depth) = depth_param(&q).filter(|d| *d != 1) {
        // MoltNet's depth > 1: the undirected walk, status filter only (relation,
        // direction, limit and offset ignored), every edge at once without depth fields.
        let walk = s
            .diary()
            .walk_relations(grpc(
                &headers,
                pb::WalkRelationsRequest {
                    entry_id,
                    depth: Some(depth),
                    status: one(&q, "status").unwrap_or_default(),
                },
            ))
            .await
            .map_err(problem)?
            .into_inner();
        let items: Vec<Value> = walk
            .items
            .iter()
            .map(|w| relation_body(&w.relation.clone().unwrap_or_default()))
            .collect();
        let count = items.len();
        return Ok(GoJson(json!({
            "items": items,
            "total": count,
            "limit": count,
            "offset": 0,
        })));
    }
    let list = s
        .diary()
        .list_relations(grpc(
            &headers,
            pb::ListRelationsRequest {
                entry_id,
                relation: one(&q, "relation").unwrap_or_default(),
                status: one(&q, "status").unwrap_or_default(),
                direction: one(&q, "direction").unwrap_or_default(),
                limit: number(&q, "limit"),
                offset: number(&q, "offset"),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    let items: Vec<Value> = list.relations.iter().map(relation_body).collect();
    Ok(GoJson(json!({
        "items": items,
        "total": list.total,
        "limit": list.limit,
        "offset": list.offset,
    })))
}

#[derive(Debug, Default, Deserialize)]
struct RelationStatusBody {
    #[serde(default)]
    status: String,
}

async fn update_relation(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    let body: RelationStatusBody = json_body(&body, ErrorStyle::MoltNet)?;
    let r = s
        .diary()
        .update_relation(grpc(
            &headers,
            pb::UpdateRelationRequest {
                id,
                status: body.status,
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(relation_body(&r)))
}

async fn delete_relation(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    s.diary()
        .delete_relation(grpc(&headers, pb::DeleteRelationRequest { id }))
        .await
        .map_err(problem)?;
    Ok(StatusCode::NO_CONTENT)
}

// ---- signing ---------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SigningRequestBody {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    entry_id: Option<String>,
    #[serde(default)]
    verification_method: Option<String>,
    #[serde(default)]
    team_id: Option<String>,
    #[serde(default)]
    purpose: Option<String>,
}

async fn create_signing_request(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    body: Bytes,
) -> CreatedReply {
    let body: SigningRequestBody = json_body(&body, ErrorStyle::MoltNet)?;
    let r = s
        .diary()
        .create_signing_request(grpc(
            &headers,
            pb::CreateSigningRequestRequest {
                message: body.message.unwrap_or_default(),
                entry_id: body.entry_id.unwrap_or_default(),
                purpose: body.purpose.unwrap_or_default(),
                verification_method: body.verification_method.unwrap_or_default(),
                team_id: body.team_id.unwrap_or_default(),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok((StatusCode::CREATED, GoJson(signing_request_body(&r))))
}

async fn list_signing_requests(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Reply {
    let q = query_pairs(raw.as_deref());
    let list = s
        .diary()
        .list_signing_requests(grpc(
            &headers,
            pb::ListSigningRequestsRequest {
                status: all(&q, "status"),
                limit: number(&q, "limit"),
                offset: number(&q, "offset"),
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    // `scope=signable` lists delegated requests a human may claim: there are none.
    let signable = one(&q, "scope").as_deref() == Some("signable");
    let items: Vec<Value> = if signable {
        Vec::new()
    } else {
        list.requests.iter().map(signing_request_body).collect()
    };
    Ok(GoJson(json!({
        "items": items,
        "total": if signable { 0 } else { list.total },
        "limit": list.limit,
        "offset": list.offset,
    })))
}

async fn get_signing_request(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Reply {
    let r = s
        .diary()
        .get_signing_request(grpc(&headers, pb::GetSigningRequestRequest { id }))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(signing_request_body(&r)))
}

#[derive(Debug, Default, Deserialize)]
struct SignatureBody {
    #[serde(default)]
    signature: String,
}

async fn sign(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    let body: SignatureBody = json_body(&body, ErrorStyle::MoltNet)?;
    let r = s
        .diary()
        .submit_signature(grpc(
            &headers,
            pb::SubmitSignatureRequest {
                id,
                signature: body.signature,
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(signing_request_body(&r)))
}

async fn verify_signature(State(s): State<GatewayState>, headers: HeaderMap, body: Bytes) -> Reply {
    let body: SignatureBody = json_body(&body, ErrorStyle::MoltNet)?;
    let v = s
        .diary()
        .verify_signature(grpc(
            &headers,
            pb::VerifySignatureRequest {
                signature: body.signature,
            },
        ))
        .await
        .map_err(problem)?
        .into_inner();
    let mut out = json!({"valid": v.valid});
    if v.valid {
        out["signer"] = json!({"agentId": v.agent_id, "fingerprint": v.fingerprint});
        out["message"] = json!(v.message);
    }
    Ok(GoJson(out))
}

async fn verify_chain(
    State(s): State<GatewayState>,
    headers: HeaderMap,
    Path(agent_id): Path<String>,
) -> Reply {
    let v = s
        .diary()
        .verify_chain(grpc(&headers, pb::VerifyChainRequest { agent_id }))
        .await
        .map_err(problem)?
        .into_inner();
    Ok(GoJson(json!({
        "valid": v.valid,
        "length": v.length,
        "headSeq": v.head_seq,
        "headHash": text_or_null(&v.head_hash),
        "problems": v.problems,
    })))
}

fn with_query(doc: RouteDoc, query: &'static [(&'static str, &'static str)]) -> RouteDoc {
    RouteDoc { query, ..doc }
}

/// This module's routes and their documentation (see `crate::route_table`).
pub fn routes() -> Vec<(RouteDoc, MethodRouter<GatewayState>)> {
    const T: &str = "diaries";
    vec![
        (
            doc(
                "POST",
                "/diaries",
                "createDiary",
                T,
                "MoltNet: create a diary (x-moltnet-team-id is stored, grants nothing)",
            ),
            post(create_diary),
        ),
        (
            doc(
                "GET",
                "/diaries",
                "listDiaries",
                T,
                "MoltNet: diaries the caller owns or has an accepted share of",
            ),
            get(list_diaries),
        ),
        (
            doc(
                "GET",
                "/diaries/{id}",
                "getDiary",
                T,
                "MoltNet: a diary (404 when missing or not readable)",
            ),
            get(get_diary),
        ),
        (
            doc(
                "PATCH",
                "/diaries/{id}",
                "updateDiary",
                T,
                "MoltNet: rename or change visibility (owner)",
            ),
            patch(update_diary),
        ),
        (
            doc(
                "DELETE",
                "/diaries/{id}",
                "deleteDiary",
                T,
                "MoltNet: delete a diary without signed entries (owner)",
            ),
            delete(delete_diary),
        ),
        (
            doc(
                "POST",
                "/diaries/{id}/shares",
                "shareDiary",
                T,
                "Noema: invite an agent as reader or writer (pending until accepted)",
            ),
            post(share_diary),
        ),
        (
            doc(
                "GET",
                "/diaries/{id}/shares",
                "listShares",
                T,
                "Noema: a diary's shares (owner) or the caller's own",
            ),
            get(list_shares),
        ),
        (
            doc(
                "POST",
                "/diaries/{id}/shares/accept",
                "acceptShare",
                T,
                "Noema: accept the caller's pending share",
            ),
            post(accept_share),
        ),
        (
            doc(
                "POST",
                "/diaries/{id}/shares/decline",
                "declineShare",
                T,
                "Noema: decline the caller's pending share",
            ),
            post(decline_share),
        ),
        (
            doc(
                "DELETE",
                "/diaries/{id}/shares/{agent_id}",
                "revokeShare",
                T,
                "Noema: revoke an agent's share (owner)",
            ),
            delete(revoke_share),
        ),
        (
            doc(
                "POST",
                "/diaries/{id}/entries",
                "createEntry",
                T,
                "MoltNet: create a draft entry, or a signed one with signingRequestId",
            ),
            post(create_entry),
        ),
        (
            with_query(
                doc(
                    "GET",
                    "/diaries/{id}/entries",
                    "listEntries",
                    T,
                    "MoltNet: entries, newest first",
                ),
                &[
                    ("limit", "1-100, default 20"),
                    ("offset", "Skip this many"),
                    ("ids", "Only these ids (repeatable)"),
                    ("tags", "Entries with all these tags (repeatable)"),
                    (
                        "excludeTags",
                        "Entries with none of these tags (repeatable)",
                    ),
                    ("entryType", "Only these types (repeatable)"),
                    (
                        "excludeSuperseded",
                        "true hides targets of accepted supersedes relations",
                    ),
                ],
            ),
            get(list_entries),
        ),
        (
            with_query(
                doc(
                    "GET",
                    "/diaries/{id}/tags",
                    "listDiaryTags",
                    T,
                    "MoltNet: the diary's tags with entry counts, most used first",
                ),
                &[
                    (
                        "prefix",
                        "Only tags starting with this (literal, case-sensitive)",
                    ),
                    ("minCount", "Only tags on at least this many entries (>= 1)"),
                    (
                        "entryTypes",
                        "Count only entries of these types (repeatable or comma-separated)",
                    ),
                ],
            ),
            get(list_tags),
        ),
        (
            doc(
                "POST",
                "/diaries/search",
                "searchEntries",
                T,
                "MoltNet: full-text search with filters and excludeSuperseded",
            ),
            post(search),
        ),
        (
            with_query(
                doc(
                    "GET",
                    "/entries/{id}",
                    "getEntry",
                    T,
                    "MoltNet: an entry (superseded ones stay readable)",
                ),
                &[
                    (
                        "expand",
                        "relations: add relations {requestedDepth, maxDepth, items} \
                         (each relation with depth and parentRelationId)",
                    ),
                    ("depth", "1-3, default 1: how far the relation walk goes"),
                ],
            ),
            get(get_entry),
        ),
        (
            doc(
                "PATCH",
                "/entries/{id}",
                "updateEntry",
                T,
                "MoltNet: update (content fields only while unsigned; 409 when signed)",
            ),
            patch(update_entry),
        ),
        (
            doc(
                "DELETE",
                "/entries/{id}",
                "deleteEntry",
                T,
                "MoltNet: delete a draft (409 for a signed entry)",
            ),
            delete(delete_entry),
        ),
        (
            doc(
                "DELETE",
                "/entries",
                "deleteEntries",
                T,
                "MoltNet: delete drafts in bulk; body {ids: 1-100 unique UUIDs} → {deleted, skipped} \
                 in request order (signed, missing and not deletable ids are skipped)",
            ),
            delete(delete_entries),
        ),
        (
            doc(
                "GET",
                "/entries/{id}/verify",
                "verifyEntry",
                T,
                "MoltNet: signed, hashMatches, signatureValid, valid",
            ),
            get(verify_entry),
        ),
        (
            doc(
                "POST",
                "/entries/{id}/relations",
                "createRelation",
                T,
                "MoltNet: relate this entry (source) to targetId",
            ),
            post(create_relation),
        ),
        (
            with_query(
                doc(
                    "GET",
                    "/entries/{id}/relations",
                    "listRelations",
                    T,
                    "MoltNet: an entry's relations",
                ),
                &[
                    ("relation", "Only this type"),
                    ("status", "proposed, accepted or rejected"),
                    ("direction", "as_source, as_target or both"),
                    ("limit", "1-100, default 50"),
                    ("offset", "Skip this many"),
                    (
                        "depth",
                        "1-3, default 1; above 1 every relation within that many steps \
                         (status filter only), limit = total",
                    ),
                ],
            ),
            get(list_relations),
        ),
        (
            doc(
                "PATCH",
                "/relations/{id}",
                "updateRelation",
                T,
                "MoltNet: change a relation's status",
            ),
            patch(update_relation),
        ),
        (
            doc(
                "DELETE",
                "/relations/{id}",
                "deleteRelation",
                T,
                "MoltNet: delete a relation (204)",
            ),
            delete(delete_relation),
        ),
        (
            doc(
                "POST",
                "/crypto/signing-requests",
                "createSigningRequest",
                T,
                "MoltNet: a signing request over a message, or over a draft entry's CID (entryId)",
            ),
            post(create_signing_request),
        ),
        (
            with_query(
                doc(
                    "GET",
                    "/crypto/signing-requests",
                    "listSigningRequests",
                    T,
                    "MoltNet: the caller's signing requests",
                ),
                &[
                    ("status", "pending, completed or expired (repeatable)"),
                    ("limit", "1-100, default 20"),
                    ("offset", "Skip this many"),
                    ("scope", "requested (default) or signable (always empty)"),
                ],
            ),
            get(list_signing_requests),
        ),
        (
            doc(
                "GET",
                "/crypto/signing-requests/{id}",
                "getSigningRequest",
                T,
                "MoltNet: one of the caller's signing requests",
            ),
            get(get_signing_request),
        ),
        (
            doc(
                "POST",
                "/crypto/signing-requests/{id}/sign",
                "submitSignature",
                T,
                "MoltNet: submit the signature over signingInput",
            ),
            post(sign),
        ),
        (
            doc(
                "POST",
                "/crypto/verify",
                "verifySignature",
                T,
                "MoltNet: whether a signature belongs to a valid completed request (needs a token)",
            ),
            post(verify_signature),
        ),
        (
            doc(
                "GET",
                "/v1/agents/{agent_id}/signature-chain",
                "verifySignatureChain",
                T,
                "Noema: verify an agent's signature chain",
            ),
            get(verify_chain),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_query_values_are_kept_and_decoded() {
        let q = query_pairs(Some("tags=a&tags=b%20c&tags[]=d+e&limit=5&x=%zz"));
        assert_eq!(all(&q, "tags"), ["a", "b c", "d e"]);
        assert_eq!(number(&q, "limit"), 5);
        assert_eq!(one(&q, "x").as_deref(), Some("%zz"));
        assert_eq!(number(&q, "offset"), 0);
    }

    #[test]
    fn depth_query_parameter() {
        assert_eq!(depth_param(&query_pairs(None)), None);
        for (raw, expected) in [
            ("depth=2", 2),
            ("depth=3&depth=1", 3),
            ("depth=x", 0),
            ("depth=-1", 0),
            ("depth=1.5", 0),
            ("depth=", 0),
            ("depth=99999999999", 0),
        ] {
            assert_eq!(
                depth_param(&query_pairs(Some(raw))),
                Some(expected),
                "{raw}"
            );
        }
        let walked = pb::WalkedRelation {
            relation: Some(pb::EntryRelation {
                id: "r2".into(),
                ..Default::default()
            }),
            depth: 2,
            parent_relation_id: "r1".into(),
        };
        let body = walked_body(&walked);
        assert_eq!(body["id"], "r2");
        assert_eq!(body["depth"], 2);
        assert_eq!(body["parentRelationId"], "r1");
        let first = walked_body(&pb::WalkedRelation {
            depth: 1,
            parent_relation_id: String::new(),
            ..walked
        });
        assert_eq!(first["parentRelationId"], Value::Null);
    }

    #[test]
    fn tag_query_parameters() {
        let q = query_pairs(Some(
            "entryTypes=semantic,episodic&entryTypes=soul&minCount=2&prefix=a%25_",
        ));
        assert_eq!(entry_types_param(&q), ["semantic", "episodic", "soul"]);
        assert_eq!(min_count(&q), Some(2));
        assert_eq!(one(&q, "prefix").as_deref(), Some("a%_"));
        assert_eq!(min_count(&query_pairs(None)), None);
        for (raw, expected) in [
            ("minCount=abc", 0),
            ("minCount=1.5", 0),
            ("minCount=", 0),
            ("minCount=-3", -3),
            ("minCount=99999999999999999999", i64::MAX),
        ] {
            assert_eq!(min_count(&query_pairs(Some(raw))), Some(expected), "{raw}");
        }
    }
}

//! Source invocations and LLM calls: the rows the trace writer inserts and updates, and
//! their reads. Enumerations are stored as their snake_case JSON names.

use std::collections::BTreeMap;

use noema_store::sql::{Builder, Conn, Engine, query};
use noema_store::with_pool;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::types::Json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{StoreError, WorldStore, to_i64, to_u32, to_u64};
use crate::domain::chat::ChatMessage;
use crate::domain::failure::FailureClass;
use crate::domain::hash::ContentHash;
use crate::domain::ids::{EntityId, HumanId};
use crate::domain::invocation::{
    InvocationStatus, ModelOutputKind, SourceInvocation, ValidationStatus,
};
use crate::domain::llm_call::{LlmArtifact, LlmCall, LlmChunk, TokenUsage};
use crate::domain::problem::Problem;

/// The snake_case name of an enumeration value.
pub(crate) fn name_of<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        _ => String::new(),
    }
}

/// An enumeration value from its stored name.
pub(crate) fn parse_name<T: DeserializeOwned>(name: &str) -> Result<T, StoreError> {
    serde_json::from_value(Value::String(name.to_owned()))
        .map_err(|_| StoreError::corrupt(format!("unknown stored value {name:?}")))
}

fn uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(StoreError::corrupt)
}

fn opt_uuid(text: Option<String>) -> Result<Option<Uuid>, StoreError> {
    text.as_deref().map(uuid).transpose()
}

fn hash(text: &str) -> Result<ContentHash, StoreError> {
    ContentHash::parse(text).map_err(StoreError::corrupt)
}

fn opt_hash(text: Option<String>) -> Result<Option<ContentHash>, StoreError> {
    text.as_deref().map(hash).transpose()
}

fn human(text: &str) -> Result<HumanId, StoreError> {
    HumanId::parse(text).map_err(StoreError::corrupt)
}

fn opt_human(text: Option<String>) -> Result<Option<HumanId>, StoreError> {
    text.as_deref().map(human).transpose()
}

fn opt_entity(text: Option<String>) -> Result<Option<EntityId>, StoreError> {
    text.as_deref()
        .map(|t| EntityId::parse(t).map_err(StoreError::corrupt))
        .transpose()
}

fn opt_u32(value: Option<i64>) -> Option<u32> {
    value.map(to_u32)
}

fn opt_u16(value: Option<i64>) -> Option<u16> {
    value.and_then(|v| u16::try_from(v).ok())
}

pub(crate) const INVOCATION_COLUMNS: &str = "source_invocation_id, attempt_id, world_slug, \
     attempted_turn, invocation_seq, workflow_hash, workflow_node_id, workflow_subject_entity_id, \
     source_hash, invocation_kind, ambient_source_id, tool_name, parent_source_invocation_id, \
     input_schema_hash, output_schema_hash, llm_call_id, logical_generation_attempt, \
     tool_loop_round, model_output_kind, status, failure_class, failure_message, started_at, \
     ended_at, duration_ms, request_json, response_json, response_text, response_headers, \
     http_status, validation_status, metadata";

#[derive(sqlx::FromRow)]
pub(crate) struct InvocationRow {
    source_invocation_id: String,
    attempt_id: String,
    world_slug: String,
    attempted_turn: i64,
    invocation_seq: i64,
    workflow_hash: Option<String>,
    workflow_node_id: Option<String>,
    workflow_subject_entity_id: Option<String>,
    source_hash: String,
    invocation_kind: String,
    ambient_source_id: Option<String>,
    tool_name: Option<String>,
    parent_source_invocation_id: Option<String>,
    input_schema_hash: Option<String>,
    output_schema_hash: Option<String>,
    llm_call_id: Option<String>,
    logical_generation_attempt: Option<i64>,
    tool_loop_round: Option<i64>,
    model_output_kind: Option<String>,
    status: String,
    failure_class: Option<String>,
    failure_message: Option<String>,
    started_at: OffsetDateTime,
    ended_at: Option<OffsetDateTime>,
    duration_ms: Option<i64>,
    request_json: Json<Value>,
    response_json: Option<Json<Value>>,
    response_text: Option<String>,
    response_headers: Json<BTreeMap<String, String>>,
    http_status: Option<i64>,
    validation_status: Option<String>,
    metadata: Json<Value>,
}

impl TryFrom<InvocationRow> for SourceInvocation {
    type Error = StoreError;

    fn try_from(row: InvocationRow) -> Result<SourceInvocation, StoreError> {
        Ok(SourceInvocation {
            source_invocation_id: uuid(&row.source_invocation_id)?,
            attempt_id: uuid(&row.attempt_id)?,
            world_slug: human(&row.world_slug)?,
            attempted_turn: to_u64(row.attempted_turn),
            invocation_seq: to_u32(row.invocation_seq),
            workflow_hash: opt_hash(row.workflow_hash)?,
            workflow_node_id: opt_human(row.workflow_node_id)?,
            workflow_subject_entity_id: opt_entity(row.workflow_subject_entity_id)?,
            source_hash: hash(&row.source_hash)?,
            invocation_kind: parse_name(&row.invocation_kind)?,
            ambient_source_id: opt_human(row.ambient_source_id)?,
            tool_name: row.tool_name,
            parent_source_invocation_id: opt_uuid(row.parent_source_invocation_id)?,
            status: parse_name(&row.status)?,
            failure_class: row.failure_class.as_deref().map(parse_name).transpose()?,
            failure_message: row.failure_message,
            started_at: row.started_at,
            ended_at: row.ended_at,
            duration_ms: row.duration_ms.map(to_u64),
            request_json: row.request_json.0,
            response_json: row.response_json.map(|j| j.0),
            response_text: row.response_text,
            response_headers: row.response_headers.0,
            http_status: opt_u16(row.http_status),
            llm_call_id: opt_uuid(row.llm_call_id)?,
            input_schema_hash: opt_hash(row.input_schema_hash)?,
            output_schema_hash: opt_hash(row.output_schema_hash)?,
            validation_status: row
                .validation_status
                .as_deref()
                .map(parse_name)
                .transpose()?,
            logical_generation_attempt: opt_u32(row.logical_generation_attempt),
            tool_loop_round: opt_u32(row.tool_loop_round),
            model_output_kind: row
                .model_output_kind
                .as_deref()
                .map(parse_name)
                .transpose()?,
            metadata: row.metadata.0,
        })
    }
}

pub(crate) async fn insert_invocation<D: Engine>(
    conn: Conn<'_, D>,
    i: &SourceInvocation,
) -> Result<(), StoreError> {
    let placeholders = (1..=32)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql =
        format!("INSERT INTO source_invocations ({INVOCATION_COLUMNS}) VALUES ({placeholders})");
    query(&sql)
        .bind(i.source_invocation_id.to_string())
        .bind(i.attempt_id.to_string())
        .bind(i.world_slug.as_str())
        .bind(to_i64(i.attempted_turn))
        .bind(i64::from(i.invocation_seq))
        .bind(i.workflow_hash.as_ref().map(|h| h.to_string()))
        .bind(i.workflow_node_id.as_ref().map(|n| n.to_string()))
        .bind(i.workflow_subject_entity_id.as_ref().map(|e| e.to_string()))
        .bind(i.source_hash.to_string())
        .bind(name_of(&i.invocation_kind))
        .bind(i.ambient_source_id.as_ref().map(|a| a.to_string()))
        .bind(i.tool_name.clone())
        .bind(i.parent_source_invocation_id.map(|p| p.to_string()))
        .bind(i.input_schema_hash.as_ref().map(|h| h.to_string()))
        .bind(i.output_schema_hash.as_ref().map(|h| h.to_string()))
        .bind(i.llm_call_id.map(|l| l.to_string()))
        .bind(i.logical_generation_attempt.map(i64::from))
        .bind(i.tool_loop_round.map(i64::from))
        .bind(i.model_output_kind.as_ref().map(name_of))
        .bind(name_of(&i.status))
        .bind(i.failure_class.as_ref().map(name_of))
        .bind(i.failure_message.clone())
        .bind(i.started_at)
        .bind(i.ended_at)
        .bind(i.duration_ms.map(to_i64))
        .bind(Json(i.request_json.clone()))
        .bind(i.response_json.clone().map(Json))
        .bind(i.response_text.clone())
        .bind(Json(i.response_headers.clone()))
        .bind(i.http_status.map(i64::from))
        .bind(i.validation_status.as_ref().map(name_of))
        .bind(Json(i.metadata.clone()))
        .execute(conn)
        .await?;
    Ok(())
}

/// What a finished (or failed) call writes to its invocation row: the columns
/// [`finish_invocation`] sets, without the request, which the `running` row already holds.
#[derive(Debug, Clone, PartialEq)]
pub struct InvocationEnd {
    pub source_invocation_id: Uuid,
    pub status: InvocationStatus,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
    pub ended_at: Option<OffsetDateTime>,
    pub duration_ms: Option<u64>,
    pub response_json: Option<Value>,
    pub response_text: Option<String>,
    pub response_headers: BTreeMap<String, String>,
    pub http_status: Option<u16>,
    pub validation_status: Option<ValidationStatus>,
    pub model_output_kind: Option<ModelOutputKind>,
    pub llm_call_id: Option<Uuid>,
}

impl InvocationEnd {
    pub fn of(i: &SourceInvocation) -> InvocationEnd {
        InvocationEnd {
            source_invocation_id: i.source_invocation_id,
            status: i.status,
            failure_class: i.failure_class,
            failure_message: i.failure_message.clone(),
            ended_at: i.ended_at,
            duration_ms: i.duration_ms,
            response_json: i.response_json.clone(),
            response_text: i.response_text.clone(),
            response_headers: i.response_headers.clone(),
            http_status: i.http_status,
            validation_status: i.validation_status,
            model_output_kind: i.model_output_kind,
            llm_call_id: i.llm_call_id,
        }
    }
}

/// Writes what a finished (or failed) call recorded; an invocation recovery already marked
/// `interrupted` stays so.
pub(crate) async fn finish_invocation<D: Engine>(
    conn: Conn<'_, D>,
    i: &InvocationEnd,
) -> Result<(), StoreError> {
    query(
        "UPDATE source_invocations SET status = $2, failure_class = $3, failure_message = $4, \
         ended_at = $5, duration_ms = $6, response_json = $7, response_text = $8, \
         response_headers = $9, http_status = $10, validation_status = $11, \
         model_output_kind = $12, llm_call_id = $13 \
         WHERE source_invocation_id = $1 AND status <> 'interrupted'",
    )
    .bind(i.source_invocation_id.to_string())
    .bind(name_of(&i.status))
    .bind(i.failure_class.as_ref().map(name_of))
    .bind(i.failure_message.as_deref())
    .bind(i.ended_at)
    .bind(i.duration_ms.map(to_i64))
    .bind(i.response_json.as_ref().map(Json))
    .bind(i.response_text.as_deref())
    .bind(Json(&i.response_headers))
    .bind(i.http_status.map(i64::from))
    .bind(i.validation_status.as_ref().map(name_of))
    .bind(i.model_output_kind.as_ref().map(name_of))
    .bind(i.llm_call_id.map(|l| l.to_string()))
    .execute(conn)
    .await?;
    Ok(())
}

const LLM_CALL_COLUMNS: &str = "llm_call_id, source_invocation_id, attempt_id, world_slug, \
     attempted_turn, workflow_hash, workflow_node_id, workflow_subject_entity_id, \
     logical_generation_attempt, tool_loop_round, model_output_kind, requested_model, model, \
     schema_delivery, stream, request_messages, response_format, status, started_at, ended_at, \
     duration_ms, http_status, raw_text, normalized_text, prompt_tokens, completion_tokens, \
     total_tokens, parse_errors, validation_errors, artifacts, failure_class, failure_message";

#[derive(sqlx::FromRow)]
struct LlmCallRow {
    llm_call_id: String,
    source_invocation_id: String,
    attempt_id: String,
    world_slug: String,
    attempted_turn: i64,
    workflow_hash: String,
    workflow_node_id: String,
    workflow_subject_entity_id: String,
    logical_generation_attempt: i64,
    tool_loop_round: i64,
    model_output_kind: Option<String>,
    requested_model: String,
    model: String,
    schema_delivery: String,
    stream: bool,
    request_messages: Json<Vec<ChatMessage>>,
    response_format: Option<Json<Value>>,
    status: String,
    started_at: OffsetDateTime,
    ended_at: Option<OffsetDateTime>,
    duration_ms: Option<i64>,
    http_status: Option<i64>,
    raw_text: Option<String>,
    normalized_text: Option<String>,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
    total_tokens: Option<i64>,
    parse_errors: Json<Vec<String>>,
    validation_errors: Json<Vec<Problem>>,
    artifacts: Json<Vec<LlmArtifact>>,
    failure_class: Option<String>,
    failure_message: Option<String>,
}

impl LlmCallRow {
    fn into_call(self, chunks: Vec<LlmChunk>) -> Result<LlmCall, StoreError> {
        let tokens = match (
            self.prompt_tokens,
            self.completion_tokens,
            self.total_tokens,
        ) {
            (None, None, None) => None,
            (prompt, completion, total) => Some(TokenUsage {
                prompt_tokens: prompt.map(to_u64),
                completion_tokens: completion.map(to_u64),
                total_tokens: total.map(to_u64),
            }),
        };
        Ok(LlmCall {
            llm_call_id: uuid(&self.llm_call_id)?,
            source_invocation_id: uuid(&self.source_invocation_id)?,
            attempt_id: uuid(&self.attempt_id)?,
            world_slug: human(&self.world_slug)?,
            attempted_turn: to_u64(self.attempted_turn),
            workflow_hash: hash(&self.workflow_hash)?,
            workflow_node_id: human(&self.workflow_node_id)?,
            workflow_subject_entity_id: EntityId::parse(&self.workflow_subject_entity_id)
                .map_err(StoreError::corrupt)?,
            logical_generation_attempt: to_u32(self.logical_generation_attempt),
            tool_loop_round: to_u32(self.tool_loop_round),
            model_output_kind: self
                .model_output_kind
                .as_deref()
                .map(parse_name)
                .transpose()?,
            requested_model: self.requested_model,
            model: self.model,
            schema_delivery: parse_name(&self.schema_delivery)?,
            stream: self.stream,
            request_messages: self.request_messages.0,
            response_format: self.response_format.map(|j| j.0),
            status: parse_name(&self.status)?,
            started_at: self.started_at,
            ended_at: self.ended_at,
            duration_ms: self.duration_ms.map(to_u64),
            http_status: opt_u16(self.http_status),
            chunks,
            raw_text: self.raw_text,
            normalized_text: self.normalized_text,
            tokens,
            parse_errors: self.parse_errors.0,
            validation_errors: self.validation_errors.0,
            artifacts: self.artifacts.0,
            failure_class: self.failure_class.as_deref().map(parse_name).transpose()?,
            failure_message: self.failure_message,
        })
    }
}

pub(crate) async fn insert_llm_call<D: Engine>(
    conn: Conn<'_, D>,
    c: &LlmCall,
) -> Result<(), StoreError> {
    let placeholders = (1..=32)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("INSERT INTO llm_calls ({LLM_CALL_COLUMNS}) VALUES ({placeholders})");
    let tokens = c.tokens.unwrap_or_default();
    query(&sql)
        .bind(c.llm_call_id.to_string())
        .bind(c.source_invocation_id.to_string())
        .bind(c.attempt_id.to_string())
        .bind(c.world_slug.as_str())
        .bind(to_i64(c.attempted_turn))
        .bind(c.workflow_hash.to_string())
        .bind(c.workflow_node_id.to_string())
        .bind(c.workflow_subject_entity_id.to_string())
        .bind(i64::from(c.logical_generation_attempt))
        .bind(i64::from(c.tool_loop_round))
        .bind(c.model_output_kind.as_ref().map(name_of))
        .bind(c.requested_model.clone())
        .bind(c.model.clone())
        .bind(name_of(&c.schema_delivery))
        .bind(c.stream)
        .bind(Json(c.request_messages.clone()))
        .bind(c.response_format.clone().map(Json))
        .bind(name_of(&c.status))
        .bind(c.started_at)
        .bind(c.ended_at)
        .bind(c.duration_ms.map(to_i64))
        .bind(c.http_status.map(i64::from))
        .bind(c.raw_text.clone())
        .bind(c.normalized_text.clone())
        .bind(tokens.prompt_tokens.map(to_i64))
        .bind(tokens.completion_tokens.map(to_i64))
        .bind(tokens.total_tokens.map(to_i64))
        .bind(Json(c.parse_errors.clone()))
        .bind(Json(c.validation_errors.clone()))
        .bind(Json(c.artifacts.clone()))
        .bind(c.failure_class.as_ref().map(name_of))
        .bind(c.failure_message.clone())
        .execute(conn)
        .await?;
    Ok(())
}

/// What an LLM call's progress writes to its row: the columns [`update_llm_call`] sets,
/// without the request (the `running` row holds it) and the chunks (their own rows).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCallUpdate {
    pub llm_call_id: Uuid,
    pub model_output_kind: Option<ModelOutputKind>,
    pub status: InvocationStatus,
    pub ended_at: Option<OffsetDateTime>,
    pub duration_ms: Option<u64>,
    pub http_status: Option<u16>,
    pub raw_text: Option<String>,
    pub normalized_text: Option<String>,
    pub tokens: Option<TokenUsage>,
    pub parse_errors: Vec<String>,
    pub validation_errors: Vec<Problem>,
    pub artifacts: Vec<LlmArtifact>,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
}

impl LlmCallUpdate {
    pub fn of(c: &LlmCall) -> LlmCallUpdate {
        LlmCallUpdate {
            llm_call_id: c.llm_call_id,
            model_output_kind: c.model_output_kind,
            status: c.status,
            ended_at: c.ended_at,
            duration_ms: c.duration_ms,
            http_status: c.http_status,
            raw_text: c.raw_text.clone(),
            normalized_text: c.normalized_text.clone(),
            tokens: c.tokens,
            parse_errors: c.parse_errors.clone(),
            validation_errors: c.validation_errors.clone(),
            artifacts: c.artifacts.clone(),
            failure_class: c.failure_class,
            failure_message: c.failure_message.clone(),
        }
    }
}

/// Writes everything but the request and the chunks; a call recovery marked `interrupted`
/// stays so.
pub(crate) async fn update_llm_call<D: Engine>(
    conn: Conn<'_, D>,
    c: &LlmCallUpdate,
) -> Result<(), StoreError> {
    let tokens = c.tokens.unwrap_or_default();
    query(
        "UPDATE llm_calls SET model_output_kind = $2, status = $3, ended_at = $4, \
         duration_ms = $5, http_status = $6, raw_text = $7, normalized_text = $8, \
         prompt_tokens = $9, completion_tokens = $10, total_tokens = $11, parse_errors = $12, \
         validation_errors = $13, artifacts = $14, failure_class = $15, failure_message = $16 \
         WHERE llm_call_id = $1 AND status <> 'interrupted'",
    )
    .bind(c.llm_call_id.to_string())
    .bind(c.model_output_kind.as_ref().map(name_of))
    .bind(name_of(&c.status))
    .bind(c.ended_at)
    .bind(c.duration_ms.map(to_i64))
    .bind(c.http_status.map(i64::from))
    .bind(c.raw_text.as_deref())
    .bind(c.normalized_text.as_deref())
    .bind(tokens.prompt_tokens.map(to_i64))
    .bind(tokens.completion_tokens.map(to_i64))
    .bind(tokens.total_tokens.map(to_i64))
    .bind(Json(&c.parse_errors))
    .bind(Json(&c.validation_errors))
    .bind(Json(&c.artifacts))
    .bind(c.failure_class.as_ref().map(name_of))
    .bind(c.failure_message.as_deref())
    .execute(conn)
    .await?;
    Ok(())
}

pub(crate) async fn insert_chunks<D: Engine>(
    conn: Conn<'_, D>,
    llm_call_id: Uuid,
    chunks: &[LlmChunk],
) -> Result<(), StoreError> {
    if chunks.is_empty() {
        return Ok(());
    }
    let id = llm_call_id.to_string();
    Builder::<D>::new("INSERT INTO llm_call_chunks (llm_call_id, seq, received_at, text) ")
        .push_values(chunks, |row, chunk| {
            row.bind(id.clone())
                .bind(i64::from(chunk.seq))
                .bind(chunk.received_at)
                .bind(chunk.text.clone());
        })
        .push(" ON CONFLICT (llm_call_id, seq) DO NOTHING")
        .build()
        .execute(conn)
        .await?;
    Ok(())
}

/// Filters of a source invocation listing; `None` does not filter.
#[derive(Debug, Clone, Default)]
pub struct InvocationFilter {
    pub world_slug: Option<String>,
    pub attempt_id: Option<String>,
    pub invocation_kind: Option<String>,
    pub source_hash: Option<String>,
    pub workflow_hash: Option<String>,
    pub subject_entity_id: Option<String>,
    pub status: Option<String>,
}

async fn list_invocations_on<D: Engine>(
    pool: &sqlx::Pool<D>,
    filter: &InvocationFilter,
    offset: u64,
    limit: u32,
) -> Result<Vec<InvocationRow>, sqlx::Error> {
    let mut sql = Builder::<D>::new(format!(
        "SELECT {INVOCATION_COLUMNS} FROM source_invocations WHERE 1 = 1"
    ));
    let conditions = [
        ("world_slug", &filter.world_slug),
        ("attempt_id", &filter.attempt_id),
        ("invocation_kind", &filter.invocation_kind),
        ("source_hash", &filter.source_hash),
        ("workflow_hash", &filter.workflow_hash),
        ("workflow_subject_entity_id", &filter.subject_entity_id),
        ("status", &filter.status),
    ];
    for (column, value) in conditions {
        if let Some(value) = value {
            sql.push(format!(" AND {column} = "))
                .push_bind(value.clone());
        }
    }
    if filter.attempt_id.is_some() {
        sql.push(" ORDER BY invocation_seq");
    } else {
        sql.push(" ORDER BY started_at DESC, attempt_id, invocation_seq");
    }
    sql.push(" LIMIT ")
        .push_bind(i64::from(limit))
        .push(" OFFSET ")
        .push_bind(to_i64(offset));
    sql.build().fetch_all(pool).await
}

impl WorldStore {
    pub async fn list_invocations(
        &self,
        filter: &InvocationFilter,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<SourceInvocation>, StoreError> {
        let rows: Vec<InvocationRow> = with_pool!(&self.db, |pool| {
            list_invocations_on(pool, filter, offset, limit).await?
        });
        rows.into_iter().map(SourceInvocation::try_from).collect()
    }

    /// Every invocation of an attempt, in invocation_seq order.
    pub async fn attempt_invocations(
        &self,
        attempt_id: &str,
    ) -> Result<Vec<SourceInvocation>, StoreError> {
        let filter = InvocationFilter {
            attempt_id: Some(attempt_id.to_owned()),
            ..InvocationFilter::default()
        };
        self.list_invocations(&filter, 0, u32::MAX >> 1).await
    }

    pub async fn get_invocation(&self, id: &str) -> Result<Option<SourceInvocation>, StoreError> {
        let sql = format!(
            "SELECT {INVOCATION_COLUMNS} FROM source_invocations WHERE source_invocation_id = $1"
        );
        let row: Option<InvocationRow> = with_pool!(&self.db, |pool| {
            query(&sql).bind(id).fetch_optional(pool).await?
        });
        row.map(SourceInvocation::try_from).transpose()
    }

    /// An LLM call with its chunks.
    pub async fn get_llm_call(&self, id: &str) -> Result<Option<LlmCall>, StoreError> {
        let sql = format!("SELECT {LLM_CALL_COLUMNS} FROM llm_calls WHERE llm_call_id = $1");
        let row: Option<LlmCallRow> = with_pool!(&self.db, |pool| {
            query(&sql).bind(id).fetch_optional(pool).await?
        });
        let Some(row) = row else {
            return Ok(None);
        };
        let chunks: Vec<(i64, OffsetDateTime, String)> = with_pool!(&self.db, |pool| {
            query(
                "SELECT seq, received_at, text FROM llm_call_chunks WHERE llm_call_id = $1 \
                 ORDER BY seq",
            )
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        let chunks = chunks
            .into_iter()
            .map(|(seq, received_at, text)| LlmChunk {
                seq: to_u32(seq),
                received_at,
                text,
            })
            .collect();
        row.into_call(chunks).map(Some)
    }

    /// LLM calls (without chunks), of an attempt in start order, else of a world newest
    /// first.
    pub async fn list_llm_calls(
        &self,
        world_slug: Option<&str>,
        attempt_id: Option<&str>,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<LlmCall>, StoreError> {
        let rows: Vec<LlmCallRow> = with_pool!(&self.db, |pool| {
            let mut sql = Builder::new(format!(
                "SELECT {LLM_CALL_COLUMNS} FROM llm_calls WHERE 1 = 1"
            ));
            if let Some(slug) = world_slug {
                sql.push(" AND world_slug = ").push_bind(slug.to_owned());
            }
            if let Some(attempt) = attempt_id {
                sql.push(" AND attempt_id = ").push_bind(attempt.to_owned());
                sql.push(" ORDER BY started_at, llm_call_id");
            } else {
                sql.push(" ORDER BY started_at DESC, llm_call_id");
            }
            sql.push(" LIMIT ")
                .push_bind(i64::from(limit))
                .push(" OFFSET ")
                .push_bind(to_i64(offset));
            sql.build().fetch_all(pool).await?
        });
        rows.into_iter().map(|r| r.into_call(Vec::new())).collect()
    }
}

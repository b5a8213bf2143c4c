//! Events: one row per accepted WorldPatch of a committed turn, and one touch row per
//! entity or environment it changed (before and after that patch, D12). Written in the
//! turn's commit; read as a world's event log and as an entity's history.

use noema_store::audit::AuditedTx;
use noema_store::sql::{Engine, query};
use noema_store::with_pool;
use serde::Serialize;
use serde_json::Value;
use sqlx::types::Json;
use time::OffsetDateTime;

use super::{StoreError, WorldStore, to_i64, to_u32, to_u64};

/// One touched entity or environment of an event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Touch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment_label: Option<String>,
    pub before: Value,
    pub after: Value,
}

/// An event as stored and served.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub event_id: String,
    pub world_slug: String,
    pub turn: u64,
    pub patch_seq: u32,
    pub attempt_id: String,
    pub subject_entity_id: String,
    pub source_invocation_id: Option<String>,
    pub llm_call_id: Option<String>,
    pub cognition_workflow_hash: Option<String>,
    pub response_source_hash: Option<String>,
    pub workflow_node_id: Option<String>,
    pub narration: String,
    pub patch: Value,
    /// The patch's effects with each one's before and after.
    pub effects: Value,
    #[serde(with = "time::serde::rfc3339")]
    pub occurred_at: OffsetDateTime,
    pub touches: Vec<Touch>,
}

/// One change to an entity, for its history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityChange {
    pub turn: u64,
    pub patch_seq: u32,
    pub event_id: String,
    pub subject_entity_id: String,
    pub narration: String,
    pub before: Value,
    pub after: Value,
}

const EVENT_COLUMNS: &str = "event_id, world_slug, turn, patch_seq, attempt_id, \
     subject_entity_id, source_invocation_id, llm_call_id, cognition_workflow_hash, \
     response_source_hash, workflow_node_id, narration, patch, effects, occurred_at";

#[derive(sqlx::FromRow)]
struct EventRow {
    event_id: String,
    world_slug: String,
    turn: i64,
    patch_seq: i64,
    attempt_id: String,
    subject_entity_id: String,
    source_invocation_id: Option<String>,
    llm_call_id: Option<String>,
    cognition_workflow_hash: Option<String>,
    response_source_hash: Option<String>,
    workflow_node_id: Option<String>,
    narration: String,
    patch: Json<Value>,
    effects: Json<Value>,
    occurred_at: OffsetDateTime,
}

#[derive(sqlx::FromRow)]
struct TouchRow {
    event_id: String,
    entity_id: Option<String>,
    environment_label: Option<String>,
    before_value: Json<Value>,
    after_value: Json<Value>,
}

pub(crate) async fn insert_event<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    event: &Event,
) -> Result<(), StoreError> {
    query(&format!(
        "INSERT INTO world_events ({EVENT_COLUMNS}) VALUES \
         ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
    ))
    .bind(event.event_id.as_str())
    .bind(event.world_slug.as_str())
    .bind(to_i64(event.turn))
    .bind(i64::from(event.patch_seq))
    .bind(event.attempt_id.as_str())
    .bind(event.subject_entity_id.as_str())
    .bind(event.source_invocation_id.as_deref())
    .bind(event.llm_call_id.as_deref())
    .bind(event.cognition_workflow_hash.as_deref())
    .bind(event.response_source_hash.as_deref())
    .bind(event.workflow_node_id.as_deref())
    .bind(event.narration.as_str())
    .bind(Json(&event.patch))
    .bind(Json(&event.effects))
    .bind(event.occurred_at)
    .execute(tx.conn())
    .await?;
    for touch in &event.touches {
        query(
            "INSERT INTO world_event_touches (event_id, world_slug, turn, patch_seq, entity_id, \
             environment_label, before_value, after_value) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(event.event_id.as_str())
        .bind(event.world_slug.as_str())
        .bind(to_i64(event.turn))
        .bind(i64::from(event.patch_seq))
        .bind(touch.entity_id.as_deref())
        .bind(touch.environment_label.as_deref())
        .bind(Json(&touch.before))
        .bind(Json(&touch.after))
        .execute(tx.conn())
        .await?;
    }
    Ok(())
}

impl WorldStore {
    /// A world's events in (turn, patch_seq) order, of one turn when `turn` is given.
    pub async fn list_events(
        &self,
        slug: &str,
        turn: Option<u64>,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM world_events WHERE world_slug = $1 \
             AND ($2 < 0 OR turn = $2) ORDER BY turn, patch_seq LIMIT $3 OFFSET $4"
        );
        let turn = turn.map_or(-1, to_i64);
        let rows: Vec<EventRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(slug)
                .bind(turn)
                .bind(i64::from(limit))
                .bind(to_i64(offset))
                .fetch_all(pool)
                .await?
        });
        let touches: Vec<TouchRow> = with_pool!(&self.db, |pool| {
            query(
                "SELECT event_id, entity_id, environment_label, before_value, after_value \
                 FROM world_event_touches WHERE world_slug = $1 AND ($2 < 0 OR turn = $2) \
                 ORDER BY turn, patch_seq, entity_id, environment_label",
            )
            .bind(slug)
            .bind(turn)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|row| Event {
                touches: touches
                    .iter()
                    .filter(|t| t.event_id == row.event_id)
                    .map(|t| Touch {
                        entity_id: t.entity_id.clone(),
                        environment_label: t.environment_label.clone(),
                        before: t.before_value.0.clone(),
                        after: t.after_value.0.clone(),
                    })
                    .collect(),
                event_id: row.event_id,
                world_slug: row.world_slug,
                turn: to_u64(row.turn),
                patch_seq: to_u32(row.patch_seq),
                attempt_id: row.attempt_id,
                subject_entity_id: row.subject_entity_id,
                source_invocation_id: row.source_invocation_id,
                llm_call_id: row.llm_call_id,
                cognition_workflow_hash: row.cognition_workflow_hash,
                response_source_hash: row.response_source_hash,
                workflow_node_id: row.workflow_node_id,
                narration: row.narration,
                patch: row.patch.0,
                effects: row.effects.0,
                occurred_at: row.occurred_at,
            })
            .collect())
    }

    /// Every change a patch made to one entity, in (turn, patch_seq) order.
    pub async fn entity_changes(
        &self,
        slug: &str,
        entity_id: &str,
    ) -> Result<Vec<EntityChange>, StoreError> {
        type Row = (i64, i64, String, String, String, Json<Value>, Json<Value>);
        let rows: Vec<Row> = with_pool!(&self.db, |pool| {
            query(
                "SELECT e.turn, e.patch_seq, e.event_id, e.subject_entity_id, e.narration, \
                 t.before_value, t.after_value FROM world_event_touches t \
                 JOIN world_events e ON e.event_id = t.event_id \
                 WHERE t.world_slug = $1 AND t.entity_id = $2 ORDER BY e.turn, e.patch_seq",
            )
            .bind(slug)
            .bind(entity_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(
                |(turn, patch_seq, event_id, subject_entity_id, narration, before, after)| {
                    EntityChange {
                        turn: to_u64(turn),
                        patch_seq: to_u32(patch_seq),
                        event_id,
                        subject_entity_id,
                        narration,
                        before: before.0,
                        after: after.0,
                    }
                },
            )
            .collect())
    }
}

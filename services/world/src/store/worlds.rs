//! Worlds and their committed turns. A world row holds its head (current turn and its
//! hash) and the lease; a turn row holds the record's JCS text and its hash. Turns are never
//! updated (the tables refuse it); a turn's ledger anchor is a row of its own.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Engine, is_unique_violation, query};
use noema_store::with_pool;
use serde_json::json;
use time::OffsetDateTime;

use super::{StoreError, WorldStore, to_i64, to_u64};
use crate::domain::hash::ContentHash;

/// A world's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldRow {
    pub slug: String,
    pub scenario_hash: ContentHash,
    pub current_turn: u64,
    pub head_hash: ContentHash,
    pub created_at: OffsetDateTime,
    /// The attempt holding the lease, if any, and until when.
    pub lease_attempt_id: Option<String>,
    pub lease_expires_at: Option<OffsetDateTime>,
}

/// A committed turn's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRow {
    pub world_slug: String,
    pub turn: u64,
    pub turn_hash: String,
    pub previous_turn_hash: Option<String>,
    pub simulation_time: String,
    pub attempt_id: Option<String>,
    /// The record's JCS text (empty in summaries).
    pub record: String,
    pub committed_at: OffsetDateTime,
    pub anchor_id: Option<String>,
}

/// A new world and its turn 0.
#[derive(Debug, Clone)]
pub struct NewWorld {
    pub slug: String,
    pub scenario_hash: ContentHash,
    pub turn0_hash: ContentHash,
    pub turn0_record: String,
    pub simulation_time: String,
}

#[derive(sqlx::FromRow)]
pub(crate) struct WorldRowDb {
    slug: String,
    scenario_hash: String,
    current_turn: i64,
    head_hash: String,
    created_at: OffsetDateTime,
    lease_attempt_id: Option<String>,
    lease_expires_at: Option<OffsetDateTime>,
}

impl TryFrom<WorldRowDb> for WorldRow {
    type Error = StoreError;

    fn try_from(row: WorldRowDb) -> Result<WorldRow, StoreError> {
        Ok(WorldRow {
            slug: row.slug,
            scenario_hash: ContentHash::parse(&row.scenario_hash).map_err(StoreError::corrupt)?,
            current_turn: to_u64(row.current_turn),
            head_hash: ContentHash::parse(&row.head_hash).map_err(StoreError::corrupt)?,
            created_at: row.created_at,
            lease_attempt_id: row.lease_attempt_id,
            lease_expires_at: row.lease_expires_at,
        })
    }
}

pub(crate) const WORLD_COLUMNS: &str =
    "slug, scenario_hash, current_turn, head_hash, created_at, lease_attempt_id, lease_expires_at";

#[derive(sqlx::FromRow)]
struct TurnDbRow {
    world_slug: String,
    turn: i64,
    turn_hash: String,
    previous_turn_hash: Option<String>,
    simulation_time: String,
    attempt_id: Option<String>,
    record: String,
    committed_at: OffsetDateTime,
    anchor_id: Option<String>,
}

impl From<TurnDbRow> for TurnRow {
    fn from(row: TurnDbRow) -> TurnRow {
        TurnRow {
            world_slug: row.world_slug,
            turn: to_u64(row.turn),
            turn_hash: row.turn_hash,
            previous_turn_hash: row.previous_turn_hash,
            simulation_time: row.simulation_time,
            attempt_id: row.attempt_id,
            record: row.record,
            committed_at: row.committed_at,
            anchor_id: row.anchor_id,
        }
    }
}

/// The turn columns, `record` as given (the record itself or `''` for summaries).
fn turn_select(record: &str) -> String {
    format!(
        "SELECT t.world_slug, t.turn, t.turn_hash, t.previous_turn_hash, t.simulation_time, \
         t.attempt_id, {record} AS record, t.committed_at, a.anchor_id \
         FROM turns t LEFT JOIN turn_anchors a ON a.world_slug = t.world_slug AND a.turn = t.turn"
    )
}

/// Inserts a committed turn's row (turn 0 or an attempt's commit).
pub(crate) async fn insert_turn<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    row: &TurnRow,
) -> Result<(), StoreError> {
    query(
        "INSERT INTO turns (world_slug, turn, turn_hash, previous_turn_hash, simulation_time, \
         attempt_id, record, committed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(row.world_slug.as_str())
    .bind(to_i64(row.turn))
    .bind(row.turn_hash.as_str())
    .bind(row.previous_turn_hash.as_deref())
    .bind(row.simulation_time.as_str())
    .bind(row.attempt_id.as_deref())
    .bind(row.record.as_str())
    .bind(row.committed_at)
    .execute(tx.conn())
    .await?;
    Ok(())
}

async fn create<D: Engine>(
    pool: &sqlx::Pool<D>,
    world: &NewWorld,
    actor: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let mut tx = AuditedTx::begin(pool).await?;
    let inserted = query(
        "INSERT INTO worlds (slug, scenario_hash, current_turn, head_hash, created_at) \
         VALUES ($1, $2, 0, $3, $4)",
    )
    .bind(world.slug.as_str())
    .bind(world.scenario_hash.as_str())
    .bind(world.turn0_hash.as_str())
    .bind(now)
    .execute(tx.conn())
    .await;
    match inserted {
        Ok(_) => {}
        Err(err) if is_unique_violation(&err) => return Ok(false),
        Err(err) => return Err(err.into()),
    }
    insert_turn(
        &mut tx,
        &TurnRow {
            world_slug: world.slug.clone(),
            turn: 0,
            turn_hash: world.turn0_hash.to_string(),
            previous_turn_hash: None,
            simulation_time: world.simulation_time.clone(),
            attempt_id: None,
            record: world.turn0_record.clone(),
            committed_at: now,
            anchor_id: None,
        },
    )
    .await?;
    tx.record(
        AuditDraft {
            actor: actor.to_owned(),
            action: "create_world".into(),
            target_id: Some(world.slug.clone()),
            target_type: Some("world".into()),
            detail: Some(json!({
                "scenario_hash": world.scenario_hash,
                "turn0_hash": world.turn0_hash,
            })),
        },
        now,
    );
    tx.commit().await?;
    Ok(true)
}

impl WorldStore {
    /// Creates the world with its turn 0; `false` when the slug is taken.
    pub async fn create_world(
        &self,
        world: &NewWorld,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        with_pool!(&self.db, |pool| create(pool, world, actor, now).await)
    }

    pub async fn get_world(&self, slug: &str) -> Result<Option<WorldRow>, StoreError> {
        let sql = format!("SELECT {WORLD_COLUMNS} FROM worlds WHERE slug = $1");
        let row: Option<WorldRowDb> = with_pool!(&self.db, |pool| {
            query(&sql).bind(slug).fetch_optional(pool).await?
        });
        row.map(WorldRow::try_from).transpose()
    }

    /// Worlds by slug, `offset` rows in.
    pub async fn list_worlds(&self, offset: u64, limit: u32) -> Result<Vec<WorldRow>, StoreError> {
        let sql = format!("SELECT {WORLD_COLUMNS} FROM worlds ORDER BY slug LIMIT $1 OFFSET $2");
        let rows: Vec<WorldRowDb> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(i64::from(limit))
                .bind(to_i64(offset))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(WorldRow::try_from).collect()
    }

    /// A committed turn with its record.
    pub async fn turn(&self, slug: &str, turn: u64) -> Result<Option<TurnRow>, StoreError> {
        let sql = format!(
            "{} WHERE t.world_slug = $1 AND t.turn = $2",
            turn_select("t.record")
        );
        let row: Option<TurnDbRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(slug)
                .bind(to_i64(turn))
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(TurnRow::from))
    }

    /// Committed turns from `from` on, oldest first; with their records when `records`.
    pub async fn turns(
        &self,
        slug: &str,
        from: u64,
        limit: u32,
        records: bool,
    ) -> Result<Vec<TurnRow>, StoreError> {
        let sql = format!(
            "{} WHERE t.world_slug = $1 AND t.turn >= $2 ORDER BY t.turn LIMIT $3",
            turn_select(if records { "t.record" } else { "''" })
        );
        let rows: Vec<TurnDbRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(slug)
                .bind(to_i64(from))
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().map(TurnRow::from).collect())
    }

    /// Records the ledger object anchoring a committed turn (once; a second anchor of the
    /// same turn is ignored).
    pub async fn put_anchor(
        &self,
        slug: &str,
        turn: u64,
        anchor_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            query(
                "INSERT INTO turn_anchors (world_slug, turn, anchor_id, anchored_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (world_slug, turn) DO NOTHING",
            )
            .bind(slug)
            .bind(to_i64(turn))
            .bind(anchor_id)
            .bind(now)
            .execute(tx.conn())
            .await?;
            tx.commit().await?;
        });
        Ok(())
    }

    /// Committed turns of `slug` that have no anchor yet, oldest first.
    pub async fn unanchored_turns(
        &self,
        slug: &str,
        limit: u32,
    ) -> Result<Vec<TurnRow>, StoreError> {
        let sql = format!(
            "{} WHERE t.world_slug = $1 AND a.anchor_id IS NULL ORDER BY t.turn LIMIT $2",
            turn_select("''")
        );
        let rows: Vec<TurnDbRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(slug)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        });
        Ok(rows.into_iter().map(TurnRow::from).collect())
    }
}

//! Attempts and the world's lease. Beginning an attempt takes the lease in the same
//! transaction that records it, so one world has one writer across replicas; a lease whose
//! holder stopped renewing expires, and whoever finds it expired (the next attempt, or the
//! sweeper) marks the dead attempt and its running calls `interrupted` in that transaction.
//! Committing checks the lease and the head it started from before writing the turn.

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Engine, query};
use noema_store::with_pool;
use serde_json::json;
use sqlx::types::Json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::events::{Event, insert_event};
use super::invocations::{INVOCATION_COLUMNS, InvocationRow, name_of, parse_name};
use super::worlds::{TurnRow, WorldRow, insert_turn};
use super::{StoreError, WorldStore, to_i64, to_u32, to_u64};
use crate::domain::attempt::{AttemptRecord, AttemptStatus};
use crate::domain::failure::Failure;
use crate::domain::invocation::{AttemptSourceSummary, SourceInvocation, duration_ms};

/// What recovery writes on a call and attempt whose process stopped.
pub const INTERRUPTED_MESSAGE: &str =
    "the process running this attempt stopped (its lease expired) while it was in flight";

/// What a call stopped because its attempt failed elsewhere says.
pub const STOPPED_MESSAGE: &str =
    "stopped: the attempt failed in another subject while this call was in flight";

/// An attempt to begin.
#[derive(Debug, Clone)]
pub struct BeginAttempt {
    pub slug: String,
    pub attempt_id: Uuid,
    pub lease_owner: String,
    pub now: OffsetDateTime,
    pub lease_expires_at: OffsetDateTime,
}

/// How beginning an attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// The lease is ours; the world as it was when we took it.
    Started(WorldRow),
    /// Another attempt holds an unexpired lease.
    LeaseHeld {
        attempt_id: String,
    },
    NoWorld,
}

/// A committed turn and everything committed with it.
#[derive(Debug, Clone)]
pub struct TurnCommit {
    pub slug: String,
    pub attempt_id: Uuid,
    pub turn: TurnRow,
    pub events: Vec<Event>,
    pub summary: AttemptSourceSummary,
    pub ended_at: OffsetDateTime,
    pub duration_ms: u64,
    pub actor: String,
}

/// How an attempt ended without a turn.
#[derive(Debug, Clone)]
pub struct AttemptFailure {
    pub slug: String,
    pub attempt_id: Uuid,
    /// The classified failure, or `None` for an internal error (`message` says what).
    pub failure: Option<Failure>,
    pub message: String,
    pub ended_at: OffsetDateTime,
    pub duration_ms: u64,
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    attempt_id: String,
    world_slug: String,
    attempted_turn: i64,
    status: String,
    lease_owner: String,
    failure_class: Option<String>,
    failure_message: Option<String>,
    started_at: OffsetDateTime,
    ended_at: Option<OffsetDateTime>,
    duration_ms: Option<i64>,
    committed_turn_hash: Option<String>,
    source_invocation_count: i64,
    last_source_invocation_id: Option<String>,
    source_trace_summary: Json<crate::domain::invocation::SourceTraceSummary>,
}

const ATTEMPT_COLUMNS: &str = "attempt_id, world_slug, attempted_turn, status, lease_owner, \
     failure_class, failure_message, started_at, ended_at, duration_ms, committed_turn_hash, \
     source_invocation_count, last_source_invocation_id, source_trace_summary";

impl TryFrom<AttemptRow> for AttemptRecord {
    type Error = StoreError;

    fn try_from(row: AttemptRow) -> Result<AttemptRecord, StoreError> {
        let uuid = |text: &str| Uuid::parse_str(text).map_err(StoreError::corrupt);
        Ok(AttemptRecord {
            attempt_id: uuid(&row.attempt_id)?,
            world_slug: row.world_slug,
            attempted_turn: to_u64(row.attempted_turn),
            status: AttemptStatus::parse(&row.status)
                .ok_or_else(|| StoreError::corrupt(format!("attempt status {:?}", row.status)))?,
            failure_class: row.failure_class.as_deref().map(parse_name).transpose()?,
            failure_message: row.failure_message,
            started_at: row.started_at,
            ended_at: row.ended_at,
            duration_ms: row.duration_ms.map(to_u64),
            committed_turn_hash: row.committed_turn_hash,
            lease_owner: row.lease_owner,
            source_invocation_count: to_u32(row.source_invocation_count),
            last_source_invocation_id: row
                .last_source_invocation_id
                .as_deref()
                .map(uuid)
                .transpose()?,
            source_trace_summary: row.source_trace_summary.0,
        })
    }
}

fn summary_binds(summary: &AttemptSourceSummary) -> (i64, Option<String>, Json<serde_json::Value>) {
    (
        i64::from(summary.source_invocation_count),
        summary.last_source_invocation_id.map(|id| id.to_string()),
        Json(serde_json::to_value(&summary.source_trace_summary).unwrap_or_default()),
    )
}

/// Marks the running calls (source invocations and LLM calls) of `attempt_id` interrupted.
async fn interrupt_calls<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    attempt_id: &str,
    message: &str,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    let running: Vec<(String, OffsetDateTime)> = query(
        "SELECT source_invocation_id, started_at FROM source_invocations \
         WHERE attempt_id = $1 AND status = 'running'",
    )
    .bind(attempt_id)
    .fetch_all(tx.conn())
    .await?;
    for (id, started_at) in running {
        query(
            "UPDATE source_invocations SET status = 'interrupted', failure_message = $2, \
             ended_at = $3, duration_ms = $4 WHERE source_invocation_id = $1",
        )
        .bind(id)
        .bind(message)
        .bind(now)
        .bind(to_i64(duration_ms(started_at, now)))
        .execute(tx.conn())
        .await?;
    }
    let calls: Vec<(String, OffsetDateTime)> = query(
        "SELECT llm_call_id, started_at FROM llm_calls WHERE attempt_id = $1 AND status = 'running'",
    )
    .bind(attempt_id)
    .fetch_all(tx.conn())
    .await?;
    for (id, started_at) in calls {
        query(
            "UPDATE llm_calls SET status = 'interrupted', failure_message = $2, ended_at = $3, \
             duration_ms = $4 WHERE llm_call_id = $1",
        )
        .bind(id)
        .bind(message)
        .bind(now)
        .bind(to_i64(duration_ms(started_at, now)))
        .execute(tx.conn())
        .await?;
    }
    Ok(())
}

/// The summary of an attempt's stored invocations.
async fn stored_summary<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    attempt_id: &str,
) -> Result<AttemptSourceSummary, StoreError> {
    let rows: Vec<InvocationRow> = query(&format!(
        "SELECT {INVOCATION_COLUMNS} FROM source_invocations WHERE attempt_id = $1"
    ))
    .bind(attempt_id)
    .fetch_all(tx.conn())
    .await?;
    let invocations = rows
        .into_iter()
        .map(SourceInvocation::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(AttemptSourceSummary::of(&invocations))
}

/// Marks `attempt_id` and its running calls `interrupted` (if it is still running).
async fn interrupt<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    attempt_id: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let started: Option<(OffsetDateTime,)> =
        query("SELECT started_at FROM attempts WHERE attempt_id = $1 AND status = 'running'")
            .bind(attempt_id)
            .fetch_optional(tx.conn())
            .await?;
    let Some((attempt_started,)) = started else {
        return Ok(false);
    };
    interrupt_calls(tx, attempt_id, INTERRUPTED_MESSAGE, now).await?;
    let (count, last, summary) = summary_binds(&stored_summary(tx, attempt_id).await?);
    query(
        "UPDATE attempts SET status = 'interrupted', failure_message = $2, ended_at = $3, \
         duration_ms = $4, source_invocation_count = $5, last_source_invocation_id = $6, \
         source_trace_summary = $7 WHERE attempt_id = $1 AND status = 'running'",
    )
    .bind(attempt_id)
    .bind(INTERRUPTED_MESSAGE)
    .bind(now)
    .bind(to_i64(duration_ms(attempt_started, now)))
    .bind(count)
    .bind(last)
    .bind(summary)
    .execute(tx.conn())
    .await?;
    Ok(true)
}

async fn begin<D: Engine>(pool: &sqlx::Pool<D>, b: &BeginAttempt) -> Result<Begun, StoreError> {
    let mut tx = AuditedTx::begin(pool).await?;
    let lease: Option<(Option<String>, Option<OffsetDateTime>)> =
        query("SELECT lease_attempt_id, lease_expires_at FROM worlds WHERE slug = $1")
            .bind(b.slug.as_str())
            .fetch_optional(tx.conn())
            .await?;
    let Some((holder, expires)) = lease else {
        tx.rollback().await?;
        return Ok(Begun::NoWorld);
    };
    if let Some(holder) = holder {
        if expires.is_some_and(|at| at > b.now) {
            tx.rollback().await?;
            return Ok(Begun::LeaseHeld { attempt_id: holder });
        }
        if interrupt(&mut tx, &holder, b.now).await? {
            tracing::warn!(world = %b.slug, attempt = %holder, "interrupted an attempt whose lease expired");
        }
    }
    let taken = query(
        "UPDATE worlds SET lease_attempt_id = $2, lease_owner = $3, lease_expires_at = $4 \
         WHERE slug = $1 AND (lease_attempt_id IS NULL OR lease_expires_at <= $5)",
    )
    .bind(b.slug.as_str())
    .bind(b.attempt_id.to_string())
    .bind(b.lease_owner.as_str())
    .bind(b.lease_expires_at)
    .bind(b.now)
    .execute(tx.conn())
    .await?;
    if taken == 0 {
        tx.rollback().await?;
        return Ok(Begun::LeaseHeld {
            attempt_id: String::new(),
        });
    }
    let world: super::worlds::WorldRowDb = query(&format!(
        "SELECT {} FROM worlds WHERE slug = $1",
        super::worlds::WORLD_COLUMNS
    ))
    .bind(b.slug.as_str())
    .fetch_one(tx.conn())
    .await?;
    let world = WorldRow::try_from(world)?;
    query(
        "INSERT INTO attempts (attempt_id, world_slug, attempted_turn, status, lease_owner, \
         started_at) VALUES ($1, $2, $3, 'running', $4, $5)",
    )
    .bind(b.attempt_id.to_string())
    .bind(b.slug.as_str())
    .bind(to_i64(world.current_turn.saturating_add(1)))
    .bind(b.lease_owner.as_str())
    .bind(b.now)
    .execute(tx.conn())
    .await?;
    tx.commit().await?;
    Ok(Begun::Started(world))
}

async fn commit<D: Engine>(pool: &sqlx::Pool<D>, c: &TurnCommit) -> Result<bool, StoreError> {
    let mut tx = AuditedTx::begin(pool).await?;
    let moved = query(
        "UPDATE worlds SET current_turn = $3, head_hash = $4, lease_attempt_id = NULL, \
         lease_owner = NULL, lease_expires_at = NULL \
         WHERE slug = $1 AND lease_attempt_id = $2 AND current_turn = $5",
    )
    .bind(c.slug.as_str())
    .bind(c.attempt_id.to_string())
    .bind(to_i64(c.turn.turn))
    .bind(c.turn.turn_hash.as_str())
    .bind(to_i64(c.turn.turn.saturating_sub(1)))
    .execute(tx.conn())
    .await?;
    if moved == 0 {
        // The lease expired and was taken, or the head moved: this attempt may not commit.
        tx.rollback().await?;
        return Ok(false);
    }
    insert_turn(&mut tx, &c.turn).await?;
    for event in &c.events {
        insert_event(&mut tx, event).await?;
    }
    let (count, last, summary) = summary_binds(&c.summary);
    query(
        "UPDATE attempts SET status = 'committed', ended_at = $2, duration_ms = $3, \
         committed_turn_hash = $4, source_invocation_count = $5, last_source_invocation_id = $6, \
         source_trace_summary = $7 WHERE attempt_id = $1",
    )
    .bind(c.attempt_id.to_string())
    .bind(c.ended_at)
    .bind(to_i64(c.duration_ms))
    .bind(c.turn.turn_hash.as_str())
    .bind(count)
    .bind(last)
    .bind(summary)
    .execute(tx.conn())
    .await?;
    tx.record(
        AuditDraft {
            actor: c.actor.clone(),
            action: "commit_turn".into(),
            target_id: Some(format!("{}/{}", c.slug, c.turn.turn)),
            target_type: Some("turn".into()),
            detail: Some(json!({
                "attempt_id": c.attempt_id,
                "turn_hash": c.turn.turn_hash,
                "previous_turn_hash": c.turn.previous_turn_hash,
                "patches": c.events.len(),
            })),
        },
        c.ended_at,
    );
    tx.commit().await?;
    Ok(true)
}

async fn fail<D: Engine>(pool: &sqlx::Pool<D>, f: &AttemptFailure) -> Result<(), StoreError> {
    let mut tx = AuditedTx::begin(pool).await?;
    let attempt_id = f.attempt_id.to_string();
    // Calls other subjects had in flight when the attempt failed were stopped.
    interrupt_calls(&mut tx, &attempt_id, STOPPED_MESSAGE, f.ended_at).await?;
    let (count, last, summary) = summary_binds(&stored_summary(&mut tx, &attempt_id).await?);
    query(
        "UPDATE attempts SET status = 'failed', failure_class = $2, failure_message = $3, \
         ended_at = $4, duration_ms = $5, source_invocation_count = $6, \
         last_source_invocation_id = $7, source_trace_summary = $8 \
         WHERE attempt_id = $1 AND status = 'running'",
    )
    .bind(attempt_id.as_str())
    .bind(f.failure.as_ref().map(|failure| name_of(&failure.class)))
    .bind(f.message.as_str())
    .bind(f.ended_at)
    .bind(to_i64(f.duration_ms))
    .bind(count)
    .bind(last)
    .bind(summary)
    .execute(tx.conn())
    .await?;
    query(
        "UPDATE worlds SET lease_attempt_id = NULL, lease_owner = NULL, lease_expires_at = NULL \
         WHERE slug = $1 AND lease_attempt_id = $2",
    )
    .bind(f.slug.as_str())
    .bind(attempt_id.as_str())
    .execute(tx.conn())
    .await?;
    tx.commit().await?;
    Ok(())
}

async fn sweep<D: Engine>(
    pool: &sqlx::Pool<D>,
    now: OffsetDateTime,
) -> Result<Vec<String>, StoreError> {
    // Attempts still `running` that no unexpired lease protects: their process stopped.
    let stale: Vec<(String, String)> = query(
        "SELECT a.attempt_id, a.world_slug FROM attempts a JOIN worlds w ON w.slug = a.world_slug \
         WHERE a.status = 'running' AND NOT (w.lease_attempt_id IS NOT NULL \
         AND w.lease_attempt_id = a.attempt_id AND w.lease_expires_at > $1)",
    )
    .bind(now)
    .fetch_all(pool)
    .await?;
    let mut interrupted = Vec::new();
    for (attempt_id, slug) in stale {
        let mut tx = AuditedTx::begin(pool).await?;
        // Re-check under the lock: the holder may have renewed or finished meanwhile.
        let protected: Option<(String,)> = query(
            "SELECT slug FROM worlds WHERE slug = $1 AND lease_attempt_id = $2 \
             AND lease_expires_at > $3",
        )
        .bind(slug.as_str())
        .bind(attempt_id.as_str())
        .bind(now)
        .fetch_optional(tx.conn())
        .await?;
        if protected.is_some() {
            tx.rollback().await?;
            continue;
        }
        if interrupt(&mut tx, &attempt_id, now).await? {
            query(
                "UPDATE worlds SET lease_attempt_id = NULL, lease_owner = NULL, \
                 lease_expires_at = NULL WHERE slug = $1 AND lease_attempt_id = $2",
            )
            .bind(slug.as_str())
            .bind(attempt_id.as_str())
            .execute(tx.conn())
            .await?;
            tx.commit().await?;
            interrupted.push(attempt_id);
        } else {
            tx.rollback().await?;
        }
    }
    Ok(interrupted)
}

impl WorldStore {
    /// Takes the world's lease for a new attempt and records it `running`.
    pub async fn begin_attempt(&self, begin_attempt: &BeginAttempt) -> Result<Begun, StoreError> {
        with_pool!(&self.db, |pool| begin(pool, begin_attempt).await)
    }

    /// Extends the lease of a running attempt; `false` when it no longer holds it.
    pub async fn renew_lease(
        &self,
        slug: &str,
        attempt_id: Uuid,
        expires_at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let renewed = with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let renewed = query(
                "UPDATE worlds SET lease_expires_at = $3 WHERE slug = $1 AND lease_attempt_id = $2",
            )
            .bind(slug)
            .bind(attempt_id.to_string())
            .bind(expires_at)
            .execute(tx.conn())
            .await?;
            tx.commit().await?;
            renewed
        });
        Ok(renewed > 0)
    }

    /// Commits the attempt's turn; `false` (nothing written) when the attempt lost the
    /// lease or the world's head moved.
    pub async fn commit_turn(&self, turn_commit: &TurnCommit) -> Result<bool, StoreError> {
        with_pool!(&self.db, |pool| commit(pool, turn_commit).await)
    }

    /// Records the attempt failed and releases its lease.
    pub async fn fail_attempt(&self, failure: &AttemptFailure) -> Result<(), StoreError> {
        with_pool!(&self.db, |pool| fail(pool, failure).await)
    }

    /// Marks `interrupted` every running attempt whose lease expired (or that holds none),
    /// with its running calls; returns their ids.
    pub async fn interrupt_stale_attempts(
        &self,
        now: OffsetDateTime,
    ) -> Result<Vec<String>, StoreError> {
        with_pool!(&self.db, |pool| sweep(pool, now).await)
    }

    pub async fn get_attempt(&self, attempt_id: &str) -> Result<Option<AttemptRecord>, StoreError> {
        let sql = format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE attempt_id = $1");
        let row: Option<AttemptRow> = with_pool!(&self.db, |pool| {
            query(&sql).bind(attempt_id).fetch_optional(pool).await?
        });
        row.map(AttemptRecord::try_from).transpose()
    }

    /// A world's attempts, newest first.
    pub async fn list_attempts(
        &self,
        slug: &str,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<AttemptRecord>, StoreError> {
        let sql = format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE world_slug = $1 \
             ORDER BY started_at DESC, attempt_id LIMIT $2 OFFSET $3"
        );
        let rows: Vec<AttemptRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(slug)
                .bind(i64::from(limit))
                .bind(to_i64(offset))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(AttemptRecord::try_from).collect()
    }
}

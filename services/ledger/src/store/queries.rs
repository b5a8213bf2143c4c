//! The ledger's SQL, written once for both engines (`noema_store::sql`).

use std::collections::HashSet;

use noema_core::audit::AuditDraft;
use noema_store::Backend;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, query};
use serde_json::{Value, json};
use sqlx::types::Json;
use sqlx::{Acquire, Pool};
use time::OffsetDateTime;

use crate::domain::canonical::CanonicalObject;
use crate::domain::mode::{SystemMode, SystemState};
use crate::domain::reference::AgentReference;
use crate::error::LedgerError;
use crate::store::{Page, Query, Write};

/// Reads the mode under a lock that holds until commit, so a concurrent Stop waits for
/// this write (or this write sees STOPPED): the halt holds across replicas. SQLite takes
/// its write lock here; Postgres a share lock.
async fn require_running<D: Engine>(tx: &mut AuditedTx<'_, D>) -> Result<(), LedgerError> {
    let sql = match D::BACKEND {
        Backend::Sqlite => "UPDATE system_state SET mode = mode WHERE id = 1 RETURNING mode",
        Backend::Postgres => "SELECT mode FROM system_state WHERE id = 1 FOR SHARE",
    };
    let (mode,): (String,) = query(sql).fetch_one(tx.conn()).await?;
    match mode.parse::<SystemMode>() {
        Ok(SystemMode::Running) => Ok(()),
        Ok(SystemMode::Stopped) => Err(LedgerError::Stopped),
        Err(e) => Err(LedgerError::Corrupt(e)),
    }
}

fn unix(at: OffsetDateTime) -> i64 {
    at.unix_timestamp()
}

fn from_unix(seconds: i64) -> Result<OffsetDateTime, LedgerError> {
    OffsetDateTime::from_unix_timestamp(seconds)
        .map_err(|e| LedgerError::Corrupt(format!("stored time {seconds}: {e}")))
}

const CANONICAL_COLUMNS: &str = "id, object_type, content_type, size_bytes, created_by, \
     created_at, created_at_text, storage_path, metadata, recorded_at";

#[derive(sqlx::FromRow)]
struct CanonicalRow {
    id: String,
    object_type: String,
    content_type: String,
    size_bytes: i64,
    created_by: String,
    created_at: i64,
    created_at_text: String,
    storage_path: String,
    metadata: Option<Json<Value>>,
    recorded_at: OffsetDateTime,
}

impl TryFrom<CanonicalRow> for CanonicalObject {
    type Error = LedgerError;

    fn try_from(row: CanonicalRow) -> Result<CanonicalObject, LedgerError> {
        Ok(CanonicalObject {
            id: row.id,
            object_type: row.object_type,
            content_type: row.content_type,
            size_bytes: row.size_bytes,
            created_by: row.created_by,
            created_at: from_unix(row.created_at)?,
            created_at_text: row.created_at_text,
            storage_path: row.storage_path,
            metadata: row.metadata.map(|m| m.0),
            recorded_at: row.recorded_at,
        })
    }
}

const REFERENCE_COLUMNS: &str = "id, canonical_object_id, agent_id, created_at, \
     signed_created_at, context, relevance, trust_weight, time_horizon, signature, \
     metadata, recorded_at";

#[derive(sqlx::FromRow)]
struct ReferenceRow {
    id: String,
    canonical_object_id: String,
    agent_id: String,
    created_at: i64,
    signed_created_at: String,
    context: String,
    relevance: Option<f64>,
    trust_weight: Option<f64>,
    time_horizon: String,
    signature: String,
    metadata: Option<Json<Value>>,
    recorded_at: OffsetDateTime,
}

impl TryFrom<ReferenceRow> for AgentReference {
    type Error = LedgerError;

    fn try_from(row: ReferenceRow) -> Result<AgentReference, LedgerError> {
        Ok(AgentReference {
            id: row.id,
            canonical_object_id: row.canonical_object_id,
            agent_id: row.agent_id,
            created_at: from_unix(row.created_at)?,
            signed_created_at: row.signed_created_at,
            context: row.context,
            relevance: row.relevance,
            trust_weight: row.trust_weight,
            time_horizon: row.time_horizon,
            signature: row.signature,
            metadata: row.metadata.map(|m| m.0),
            recorded_at: row.recorded_at,
        })
    }
}

#[derive(sqlx::FromRow)]
struct StateRow {
    mode: String,
    changed_by: String,
    changed_at: OffsetDateTime,
}

impl TryFrom<StateRow> for SystemState {
    type Error = LedgerError;

    fn try_from(row: StateRow) -> Result<SystemState, LedgerError> {
        Ok(SystemState {
            mode: row.mode.parse().map_err(LedgerError::Corrupt)?,
            changed_by: row.changed_by,
            changed_at: row.changed_at,
        })
    }
}

fn canonical_audit(object: &CanonicalObject, submitted_by: &str) -> AuditDraft {
    AuditDraft {
        actor: object.created_by.clone(),
        action: "create_canonical".into(),
        target_id: Some(object.id.clone()),
        target_type: Some("canonical_object".into()),
        detail: Some(json!({
            "object_type": object.object_type,
            "size_bytes": object.size_bytes,
            "storage_path": object.storage_path,
            "submitted_by": submitted_by,
        })),
    }
}

fn reference_audit(reference: &AgentReference, submitted_by: &str) -> AuditDraft {
    AuditDraft {
        actor: reference.agent_id.clone(),
        action: "create_reference".into(),
        target_id: Some(reference.id.clone()),
        target_type: Some("agent_reference".into()),
        detail: Some(json!({
            "canonical_object_id": reference.canonical_object_id,
            "submitted_by": submitted_by,
        })),
    }
}

/// A group commit: every write of `writes` in one transaction that checks the mode once,
/// inserts each table's rows with one statement, and advances the audit chain once (in the
/// order of `writes`). A write whose id exists already, in the table or earlier in the
/// batch, is skipped and answered as a duplicate. `Err` means nothing was written.
pub async fn insert_batch<'c, D: Engine>(
    conn: impl Acquire<'c, Database = D>,
    writes: &[Write],
) -> Result<Vec<Result<(), LedgerError>>, LedgerError> {
    let mut tx = AuditedTx::begin(conn).await?;
    if let Err(err) = require_running(&mut tx).await {
        // Now, not lazily on the connection's next use: the writer keeps its connection
        // through STOPPED, and until this rollback its transaction holds the mode row that
        // Resume must update.
        tx.rollback().await?;
        return Err(err);
    }
    let mut outcomes: Vec<Result<(), LedgerError>> = Vec::with_capacity(writes.len());
    let mut seen = HashSet::new();
    let mut canonicals = Vec::new();
    let mut references = Vec::new();
    for write in writes {
        let first = seen.insert(write.key());
        outcomes.push(if first {
            Ok(())
        } else {
            Err(write.duplicate())
        });
        match write {
            Write::Canonical { object, .. } if first => canonicals.push(object),
            Write::Reference {
                reference,
                public_key,
                ..
            } if first => references.push((reference, public_key)),
            _ => {}
        }
    }
    let mut inserted: HashSet<(&str, String)> = HashSet::new();
    if !canonicals.is_empty() {
        let mut insert = Builder::<D>::new(
            "INSERT INTO canonical_objects (id, object_type, content_type, size_bytes, \
             created_by, created_at, created_at_text, storage_path, metadata, recorded_at) ",
        );
        insert.push_values(&canonicals, |row, object| {
            row.bind(&object.id)
                .bind(&object.object_type)
                .bind(&object.content_type)
                .bind(object.size_bytes)
                .bind(&object.created_by)
                .bind(unix(object.created_at))
                .bind(&object.created_at_text)
                .bind(&object.storage_path)
                .bind(object.metadata.as_ref().map(Json))
                .bind(object.recorded_at);
        });
        insert.push(" ON CONFLICT DO NOTHING RETURNING id");
        let ids: Vec<(String,)> = insert.build().fetch_all(tx.conn()).await?;
        inserted.extend(ids.into_iter().map(|(id,)| (Write::CANONICAL, id)));
    }
    if !references.is_empty() {
        let mut insert = Builder::<D>::new(
            "INSERT INTO agent_references (id, canonical_object_id, agent_id, created_at, \
             signed_created_at, context, relevance, trust_weight, time_horizon, signature, \
             public_key, metadata, recorded_at) ",
        );
        insert.push_values(&references, |row, (reference, public_key)| {
            row.bind(&reference.id)
                .bind(&reference.canonical_object_id)
                .bind(&reference.agent_id)
                .bind(unix(reference.created_at))
                .bind(&reference.signed_created_at)
                .bind(&reference.context)
                .bind(reference.relevance)
                .bind(reference.trust_weight)
                .bind(&reference.time_horizon)
                .bind(&reference.signature)
                .bind(public_key.as_str())
                .bind(reference.metadata.as_ref().map(Json))
                .bind(reference.recorded_at);
        });
        insert.push(" ON CONFLICT DO NOTHING RETURNING id");
        let ids: Vec<(String,)> = insert.build().fetch_all(tx.conn()).await?;
        inserted.extend(ids.into_iter().map(|(id,)| (Write::REFERENCE, id)));
    }
    for (write, outcome) in writes.iter().zip(outcomes.iter_mut()) {
        if outcome.is_err() {
            continue;
        }
        let (table, id) = write.key();
        if !inserted.contains(&(table, id.to_owned())) {
            *outcome = Err(write.duplicate());
            continue;
        }
        match write {
            Write::Canonical {
                object,
                submitted_by,
            } => tx.record(canonical_audit(object, submitted_by), object.recorded_at),
            Write::Reference {
                reference,
                submitted_by,
                ..
            } => tx.record(
                reference_audit(reference, submitted_by),
                reference.recorded_at,
            ),
        }
    }
    tx.commit().await?;
    Ok(outcomes)
}

pub async fn get_canonical<D: Engine>(
    pool: &Pool<D>,
    id: &str,
) -> Result<Option<CanonicalObject>, LedgerError> {
    let sql = format!("SELECT {CANONICAL_COLUMNS} FROM canonical_objects WHERE id = $1");
    let row: Option<CanonicalRow> = query(&sql).bind(id).fetch_optional(pool).await?;
    row.map(CanonicalObject::try_from).transpose()
}

/// Newest `created_at` first (ties by id), filtered, by offset or cursor.
pub async fn list_canonicals<D: Engine>(
    pool: &Pool<D>,
    filter: &Query,
    page: &Page,
) -> Result<Vec<CanonicalObject>, LedgerError> {
    let sql = format!(
        "SELECT {CANONICAL_COLUMNS} FROM canonical_objects \
         WHERE ($1 = '' OR object_type = $1) AND ($2 = '' OR created_by = $2) \
         AND created_at >= $3 AND created_at < $4 \
         AND (created_at < $5 OR (created_at = $5 AND id < $6)) \
         ORDER BY created_at DESC, id DESC LIMIT $7 OFFSET $8"
    );
    let rows: Vec<CanonicalRow> = query(&sql)
        .bind(&filter.kind)
        .bind(&filter.actor)
        .bind(filter.from)
        .bind(filter.until)
        .bind(page.before.0)
        .bind(&page.before.1)
        .bind(i64::from(page.limit))
        .bind(i64::from(page.offset))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(CanonicalObject::try_from).collect()
}

/// Oldest first after `(created_at, id)`: for export.
pub async fn canonicals_oldest_first<D: Engine>(
    pool: &Pool<D>,
    after: &(i64, String),
    limit: u32,
) -> Result<Vec<CanonicalObject>, LedgerError> {
    let sql = format!(
        "SELECT {CANONICAL_COLUMNS} FROM canonical_objects \
         WHERE created_at > $1 OR (created_at = $1 AND id > $2) \
         ORDER BY created_at ASC, id ASC LIMIT $3"
    );
    let rows: Vec<CanonicalRow> = query(&sql)
        .bind(after.0)
        .bind(&after.1)
        .bind(i64::from(limit))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(CanonicalObject::try_from).collect()
}

/// `(id, storage_path)` by id, for reconciliation.
pub async fn storage_paths<D: Engine>(
    pool: &Pool<D>,
    after_id: &str,
    limit: u32,
) -> Result<Vec<(String, String)>, LedgerError> {
    Ok(
        query("SELECT id, storage_path FROM canonical_objects WHERE id > $1 ORDER BY id LIMIT $2")
            .bind(after_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?,
    )
}

pub async fn list_references<D: Engine>(
    pool: &Pool<D>,
    filter: &Query,
    page: &Page,
) -> Result<Vec<AgentReference>, LedgerError> {
    let sql = format!(
        "SELECT {REFERENCE_COLUMNS} FROM agent_references \
         WHERE ($1 = '' OR agent_id = $1) AND ($2 = '' OR canonical_object_id = $2) \
         AND created_at >= $3 AND created_at < $4 \
         AND (created_at < $5 OR (created_at = $5 AND id < $6)) \
         ORDER BY created_at DESC, id DESC LIMIT $7 OFFSET $8"
    );
    let rows: Vec<ReferenceRow> = query(&sql)
        .bind(&filter.actor)
        .bind(&filter.kind)
        .bind(filter.from)
        .bind(filter.until)
        .bind(page.before.0)
        .bind(&page.before.1)
        .bind(i64::from(page.limit))
        .bind(i64::from(page.offset))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(AgentReference::try_from).collect()
}

pub async fn system_state<D: Engine>(pool: &Pool<D>) -> Result<SystemState, LedgerError> {
    let row: StateRow = query("SELECT mode, changed_by, changed_at FROM system_state WHERE id = 1")
        .fetch_one(pool)
        .await?;
    SystemState::try_from(row)
}

/// Sets the mode and appends its audit entry in one transaction.
pub async fn set_mode<D: Engine>(
    pool: &Pool<D>,
    mode: SystemMode,
    actor: &str,
    now: OffsetDateTime,
) -> Result<SystemState, LedgerError> {
    let mut tx = AuditedTx::begin(pool).await?;
    let row: StateRow = query(
        "UPDATE system_state SET mode = $1, changed_by = $2, changed_at = $3 \
         WHERE id = 1 RETURNING mode, changed_by, changed_at",
    )
    .bind(mode.as_str())
    .bind(actor)
    .bind(now.replace_nanosecond(0).unwrap_or(now))
    .fetch_one(tx.conn())
    .await?;
    let state = SystemState::try_from(row)?;
    let draft = AuditDraft {
        actor: actor.to_owned(),
        action: mode.transition_action().to_owned(),
        target_id: None,
        target_type: Some("system_state".to_owned()),
        detail: Some(json!({ "mode": mode.as_str() })),
    };
    tx.record(draft, now);
    tx.commit().await?;
    Ok(state)
}

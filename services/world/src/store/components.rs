//! Components: one table per kind, keyed by hash, each row the document's JCS text. A put
//! of a stored hash changes nothing (components are immutable; the tables refuse updates).

use noema_core::audit::AuditDraft;
use noema_store::audit::AuditedTx;
use noema_store::sql::{Engine, query};
use noema_store::with_pool;
use serde_json::json;
use time::OffsetDateTime;

use super::{StoreError, WorldStore, to_i64};
use crate::domain::component::ComponentKind;
use crate::domain::hash::ContentHash;

/// A component as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredComponent {
    pub kind: ComponentKind,
    pub hash: ContentHash,
    /// The JCS text: `hash` is SHA-256 of exactly these bytes.
    pub content: String,
    pub builtin_name: Option<String>,
    pub created_at: OffsetDateTime,
}

/// A reference from one component to another, for `uses`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ComponentRef {
    pub kind: ComponentKind,
    pub hash: ContentHash,
    /// Where the reference sits in the referring document.
    pub pointer: String,
}

/// A component to store, with the columns its kind keeps beside the document.
#[derive(Debug, Clone)]
pub struct NewComponent {
    pub kind: ComponentKind,
    pub hash: ContentHash,
    pub content: String,
    /// Scenarios and response sources.
    pub label: Option<String>,
    /// Response sources: `interface.name`.
    pub source_kind: Option<String>,
    /// Cognition profiles.
    pub workflow_hash: Option<ContentHash>,
    /// Built-in schemas.
    pub builtin_name: Option<String>,
    /// Every component this one references.
    pub references: Vec<ComponentRef>,
}

/// Where a scenario came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    pub lineage_id: String,
    pub scenario_hash: ContentHash,
    pub parent_hash: ContentHash,
    pub world_slug: Option<String>,
    pub turn: Option<u64>,
}

/// Something that references a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentUse {
    Component(ComponentRef),
    World { slug: String },
}

fn table(kind: ComponentKind) -> &'static str {
    match kind {
        ComponentKind::JsonSchema => "json_schemas",
        ComponentKind::ResponseSource => "response_sources",
        ComponentKind::CognitionWorkflow => "cognition_workflows",
        ComponentKind::CognitionProfile => "cognition_profiles",
        ComponentKind::Scenario => "scenarios",
    }
}

fn builtin_column(kind: ComponentKind) -> &'static str {
    if kind == ComponentKind::JsonSchema {
        "builtin_name"
    } else {
        "NULL"
    }
}

#[derive(sqlx::FromRow)]
struct ComponentRow {
    hash: String,
    content: String,
    builtin_name: Option<String>,
    created_at: OffsetDateTime,
}

impl ComponentRow {
    fn into_stored(self, kind: ComponentKind) -> Result<StoredComponent, StoreError> {
        Ok(StoredComponent {
            kind,
            hash: ContentHash::parse(&self.hash).map_err(StoreError::corrupt)?,
            content: self.content,
            builtin_name: self.builtin_name,
            created_at: self.created_at,
        })
    }
}

fn component_audit(component: &NewComponent, actor: &str) -> AuditDraft {
    AuditDraft {
        actor: actor.to_owned(),
        action: format!("put_{}", component.kind),
        target_id: Some(component.hash.to_string()),
        target_type: Some(component.kind.to_string()),
        detail: Some(json!({
            "label": component.label,
            "builtin_name": component.builtin_name,
            "bytes": component.content.len(),
        })),
    }
}

/// Inserts the row unless it exists; `true` when it was new.
async fn insert_component<D: Engine>(
    tx: &mut AuditedTx<'_, D>,
    component: &NewComponent,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let hash = component.hash.as_str();
    let content = component.content.as_str();
    let inserted = match component.kind {
        ComponentKind::JsonSchema => {
            query(
                "INSERT INTO json_schemas (hash, content, builtin_name, created_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING",
            )
            .bind(hash)
            .bind(content)
            .bind(component.builtin_name.as_deref())
            .bind(now)
            .execute(tx.conn())
            .await?
        }
        ComponentKind::ResponseSource => {
            query(
                "INSERT INTO response_sources (hash, content, label, kind, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (hash) DO NOTHING",
            )
            .bind(hash)
            .bind(content)
            .bind(component.label.as_deref().unwrap_or_default())
            .bind(component.source_kind.as_deref().unwrap_or_default())
            .bind(now)
            .execute(tx.conn())
            .await?
        }
        ComponentKind::CognitionWorkflow => {
            query(
                "INSERT INTO cognition_workflows (hash, content, created_at) \
                 VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING",
            )
            .bind(hash)
            .bind(content)
            .bind(now)
            .execute(tx.conn())
            .await?
        }
        ComponentKind::CognitionProfile => {
            let workflow = component
                .workflow_hash
                .as_ref()
                .ok_or_else(|| StoreError::corrupt("a cognition profile without its workflow"))?;
            query(
                "INSERT INTO cognition_profiles (hash, workflow_hash, content, created_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING",
            )
            .bind(hash)
            .bind(workflow.as_str())
            .bind(content)
            .bind(now)
            .execute(tx.conn())
            .await?
        }
        ComponentKind::Scenario => {
            query(
                "INSERT INTO scenarios (hash, label, content, created_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (hash) DO NOTHING",
            )
            .bind(hash)
            .bind(component.label.as_deref().unwrap_or_default())
            .bind(content)
            .bind(now)
            .execute(tx.conn())
            .await?
        }
    };
    if inserted == 0 {
        return Ok(false);
    }
    for reference in &component.references {
        query(
            "INSERT INTO component_uses (used_kind, used_hash, user_kind, user_hash, pointer) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(reference.kind.as_str())
        .bind(reference.hash.as_str())
        .bind(component.kind.as_str())
        .bind(hash)
        .bind(reference.pointer.as_str())
        .execute(tx.conn())
        .await?;
    }
    Ok(true)
}

async fn put<D: Engine>(
    pool: &sqlx::Pool<D>,
    component: &NewComponent,
    lineage: Option<&Lineage>,
    actor: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let mut tx = AuditedTx::begin(pool).await?;
    let created = insert_component(&mut tx, component, now).await?;
    if created {
        tx.record(component_audit(component, actor), now);
    }
    if let Some(lineage) = lineage {
        let existing: Option<(String,)> = query(
            "SELECT lineage_id FROM scenario_lineage WHERE scenario_hash = $1 AND parent_hash = $2 \
             AND COALESCE(world_slug, '') = $3 AND COALESCE(turn, -1) = $4",
        )
        .bind(lineage.scenario_hash.as_str())
        .bind(lineage.parent_hash.as_str())
        .bind(lineage.world_slug.as_deref().unwrap_or_default())
        .bind(lineage.turn.map_or(-1, to_i64))
        .fetch_optional(tx.conn())
        .await?;
        if existing.is_none() {
            query(
                "INSERT INTO scenario_lineage (lineage_id, scenario_hash, parent_hash, world_slug, \
                 turn, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(lineage.lineage_id.as_str())
            .bind(lineage.scenario_hash.as_str())
            .bind(lineage.parent_hash.as_str())
            .bind(lineage.world_slug.as_deref())
            .bind(lineage.turn.map(to_i64))
            .bind(now)
            .execute(tx.conn())
            .await?;
            tx.record(
                AuditDraft {
                    actor: actor.to_owned(),
                    action: "fork_scenario".into(),
                    target_id: Some(lineage.scenario_hash.to_string()),
                    target_type: Some("scenario".into()),
                    detail: Some(json!({
                        "parent_hash": lineage.parent_hash,
                        "world_slug": lineage.world_slug,
                        "turn": lineage.turn,
                    })),
                },
                now,
            );
        }
    }
    tx.commit().await?;
    Ok(created)
}

impl WorldStore {
    /// Stores `component` (and, for a fork, its lineage) unless it exists; `true` when new.
    pub async fn put_component(
        &self,
        component: &NewComponent,
        lineage: Option<&Lineage>,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        with_pool!(&self.db, |pool| put(pool, component, lineage, actor, now)
            .await)
    }

    pub async fn get_component(
        &self,
        kind: ComponentKind,
        hash: &ContentHash,
    ) -> Result<Option<StoredComponent>, StoreError> {
        let sql = format!(
            "SELECT hash, content, {} AS builtin_name, created_at FROM {} WHERE hash = $1",
            builtin_column(kind),
            table(kind)
        );
        let row: Option<ComponentRow> = with_pool!(&self.db, |pool| {
            query(&sql).bind(hash.as_str()).fetch_optional(pool).await?
        });
        row.map(|r| r.into_stored(kind)).transpose()
    }

    /// The built-in schema named `name` (`world-patch`).
    pub async fn builtin_schema(&self, name: &str) -> Result<Option<StoredComponent>, StoreError> {
        let row: Option<ComponentRow> = with_pool!(&self.db, |pool| {
            query(
                "SELECT hash, content, builtin_name, created_at FROM json_schemas \
                 WHERE builtin_name = $1",
            )
            .bind(name)
            .fetch_optional(pool)
            .await?
        });
        row.map(|r| r.into_stored(ComponentKind::JsonSchema))
            .transpose()
    }

    /// Components of `kind`, oldest first, `offset` rows in.
    pub async fn list_components(
        &self,
        kind: ComponentKind,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<StoredComponent>, StoreError> {
        let sql = format!(
            "SELECT hash, content, {} AS builtin_name, created_at FROM {} \
             ORDER BY created_at, hash LIMIT $1 OFFSET $2",
            builtin_column(kind),
            table(kind)
        );
        let rows: Vec<ComponentRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(i64::from(limit))
                .bind(to_i64(offset))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(|r| r.into_stored(kind)).collect()
    }

    /// What references the component: components (with the pointer of each reference),
    /// and for a scenario the worlds created from it.
    pub async fn component_uses(
        &self,
        kind: ComponentKind,
        hash: &ContentHash,
    ) -> Result<Vec<ComponentUse>, StoreError> {
        let rows: Vec<(String, String, String)> = with_pool!(&self.db, |pool| {
            query(
                "SELECT user_kind, user_hash, pointer FROM component_uses \
                 WHERE used_kind = $1 AND used_hash = $2 ORDER BY user_kind, user_hash, pointer",
            )
            .bind(kind.as_str())
            .bind(hash.as_str())
            .fetch_all(pool)
            .await?
        });
        let mut uses = Vec::with_capacity(rows.len());
        for (user_kind, user_hash, pointer) in rows {
            let kind = ComponentKind::ALL
                .into_iter()
                .find(|k| k.as_str() == user_kind)
                .ok_or_else(|| StoreError::corrupt(format!("component kind {user_kind:?}")))?;
            uses.push(ComponentUse::Component(ComponentRef {
                kind,
                hash: ContentHash::parse(&user_hash).map_err(StoreError::corrupt)?,
                pointer,
            }));
        }
        if kind == ComponentKind::Scenario {
            let worlds: Vec<(String,)> = with_pool!(&self.db, |pool| {
                query("SELECT slug FROM worlds WHERE scenario_hash = $1 ORDER BY slug")
                    .bind(hash.as_str())
                    .fetch_all(pool)
                    .await?
            });
            uses.extend(
                worlds
                    .into_iter()
                    .map(|(slug,)| ComponentUse::World { slug }),
            );
        }
        Ok(uses)
    }

    /// Where a scenario was forked from (empty for an original).
    pub async fn lineage(&self, scenario: &ContentHash) -> Result<Vec<Lineage>, StoreError> {
        type Row = (String, String, String, Option<String>, Option<i64>);
        let rows: Vec<Row> = with_pool!(&self.db, |pool| {
            query(
                    "SELECT lineage_id, scenario_hash, parent_hash, world_slug, turn \
                     FROM scenario_lineage WHERE scenario_hash = $1 ORDER BY created_at, lineage_id",
                )
                .bind(scenario.as_str())
                .fetch_all(pool)
                .await?
        });
        rows.into_iter()
            .map(
                |(lineage_id, scenario_hash, parent_hash, world_slug, turn)| {
                    Ok(Lineage {
                        lineage_id,
                        scenario_hash: ContentHash::parse(&scenario_hash)
                            .map_err(StoreError::corrupt)?,
                        parent_hash: ContentHash::parse(&parent_hash)
                            .map_err(StoreError::corrupt)?,
                        world_slug,
                        turn: turn.map(super::to_u64),
                    })
                },
            )
            .collect()
    }
}

//! Relations between entries of one diary.

use noema_store::audit::AuditedTx;
use noema_store::sql::{Builder, Engine, query};
use noema_store::with_pool;
use serde_json::json;
use time::OffsetDateTime;

use super::{IdentityStore, draft, unsigned};
use crate::domain::relation::Relation;
use crate::error::IdentityError;

const RELATION_COLUMNS: &str = "id, source_id, target_id, relation, status, \
     source_cid_snapshot, target_cid_snapshot, created_at, updated_at";

/// Filters of a relation list.
#[derive(Debug, Clone, Default)]
pub struct RelationFilter {
    pub entry_id: String,
    pub relation: Option<String>,
    pub status: Option<String>,
    /// as_source | as_target | both
    pub direction: &'static str,
    pub limit: i64,
    pub offset: i64,
}

#[derive(sqlx::FromRow)]
struct RelationRow {
    id: String,
    source_id: String,
    target_id: String,
    relation: String,
    status: String,
    source_cid_snapshot: Option<String>,
    target_cid_snapshot: Option<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl From<RelationRow> for Relation {
    fn from(row: RelationRow) -> Relation {
        Relation {
            id: row.id,
            source_id: row.source_id,
            target_id: row.target_id,
            relation: row.relation,
            status: row.status,
            source_cid_snapshot: row.source_cid_snapshot,
            target_cid_snapshot: row.target_cid_snapshot,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

fn push_filters<'a, D: Engine>(qb: &mut Builder<'a, D>, filter: &'a RelationFilter) {
    let entry = filter.entry_id.as_str();
    match filter.direction {
        "as_source" => {
            qb.push(" WHERE source_id = ").push_bind(entry);
        }
        "as_target" => {
            qb.push(" WHERE target_id = ").push_bind(entry);
        }
        _ => {
            qb.push(" WHERE (source_id = ").push_bind(entry);
            qb.push(" OR target_id = ").push_bind(entry).push(")");
        }
    }
    if let Some(relation) = &filter.relation {
        qb.push(" AND relation = ").push_bind(relation.as_str());
    }
    if let Some(status) = &filter.status {
        qb.push(" AND status = ").push_bind(status.as_str());
    }
}

impl IdentityStore {
    /// Inserts a relation, or returns the existing one for the same triple.
    pub async fn insert_relation(
        &self,
        relation: &Relation,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(Relation, bool), IdentityError> {
        let select = format!(
            "SELECT {RELATION_COLUMNS} FROM entry_relations \
             WHERE source_id = $1 AND target_id = $2 AND relation = $3"
        );
        let (row, inserted): (RelationRow, bool) = with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let inserted = query(
                "INSERT INTO entry_relations (id, source_id, target_id, relation, status, \
                 source_cid_snapshot, target_cid_snapshot, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (source_id, target_id, relation) DO NOTHING",
            )
            .bind(&relation.id)
            .bind(&relation.source_id)
            .bind(&relation.target_id)
            .bind(&relation.relation)
            .bind(&relation.status)
            .bind(&relation.source_cid_snapshot)
            .bind(&relation.target_cid_snapshot)
            .bind(relation.created_at)
            .bind(relation.updated_at)
            .execute(tx.conn())
            .await?
                == 1;
            let stored: RelationRow = query(&select)
                .bind(&relation.source_id)
                .bind(&relation.target_id)
                .bind(&relation.relation)
                .fetch_one(tx.conn())
                .await?;
            if inserted {
                let detail = json!({
                    "source_id": stored.source_id,
                    "target_id": stored.target_id,
                    "relation": stored.relation,
                    "status": stored.status,
                });
                tx.record(
                    draft(actor, "create_relation", "relation", &stored.id, detail),
                    now,
                );
            }
            tx.commit().await?;
            (stored, inserted)
        });
        Ok((Relation::from(row), inserted))
    }

    pub async fn get_relation(&self, id: &str) -> Result<Option<Relation>, IdentityError> {
        let sql = format!("SELECT {RELATION_COLUMNS} FROM entry_relations WHERE id = $1");
        Ok(self
            .find::<RelationRow>(&sql, id)
            .await?
            .map(Relation::from))
    }

    pub async fn list_relations(
        &self,
        filter: &RelationFilter,
    ) -> Result<(Vec<Relation>, u64), IdentityError> {
        let (rows, total): (Vec<RelationRow>, i64) = with_pool!(&self.db, |pool| {
            let mut count = Builder::new("SELECT COUNT(*) AS n FROM entry_relations");
            push_filters(&mut count, filter);
            let (total,): (i64,) = count.build().fetch_one(pool).await?;
            let mut page = Builder::new(format!("SELECT {RELATION_COLUMNS} FROM entry_relations"));
            push_filters(&mut page, filter);
            page.push(" ORDER BY created_at DESC, id DESC LIMIT ")
                .push_bind(filter.limit);
            page.push(" OFFSET ").push_bind(filter.offset);
            (page.build().fetch_all(pool).await?, total)
        });
        Ok((
            rows.into_iter().map(Relation::from).collect(),
            unsigned(total),
        ))
    }

    /// One level of a relation walk: every relation with source or target in `ids`,
    /// optionally of one status, newest first (ties by id descending).
    pub async fn relations_touching(
        &self,
        ids: &[String],
        status: Option<&str>,
    ) -> Result<Vec<Relation>, IdentityError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<RelationRow> = with_pool!(&self.db, |pool| {
            let mut qb = Builder::new(format!(
                "SELECT {RELATION_COLUMNS} FROM entry_relations WHERE (source_id IN ("
            ));
            qb.push_list(ids.iter().map(String::as_str));
            qb.push(") OR target_id IN (");
            qb.push_list(ids.iter().map(String::as_str));
            qb.push("))");
            if let Some(status) = status {
                qb.push(" AND status = ").push_bind(status);
            }
            qb.push(" ORDER BY created_at DESC, id DESC");
            qb.build().fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(Relation::from).collect())
    }

    pub async fn update_relation_status(
        &self,
        id: &str,
        status: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            query("UPDATE entry_relations SET status = $1, updated_at = $2 WHERE id = $3")
                .bind(status)
                .bind(now)
                .bind(id)
                .execute(tx.conn())
                .await?;
            let detail = json!({"status": status});
            tx.record(draft(actor, "update_relation", "relation", id, detail), now);
            tx.commit().await?;
            Ok(())
        })
    }

    pub async fn delete_relation(
        &self,
        id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            query("DELETE FROM entry_relations WHERE id = $1")
                .bind(id)
                .execute(tx.conn())
                .await?;
            tx.record(
                draft(actor, "delete_relation", "relation", id, json!({})),
                now,
            );
            tx.commit().await?;
            Ok(())
        })
    }
}

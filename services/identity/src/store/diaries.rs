//! Diaries and their shares.

use noema_store::audit::AuditedTx;
use noema_store::sql::query;
use noema_store::with_pool;
use serde_json::json;
use time::OffsetDateTime;

use super::{IdentityStore, draft};
use crate::domain::diary::{Diary, Share, ShareRole, ShareStatus, Visibility};
use crate::error::IdentityError;

const DIARY_SELECT: &str = "SELECT d.id, d.owner_id, d.name, d.visibility, d.signed, \
     d.team_id, d.created_at, d.updated_at, a.public_key AS owner_public_key \
     FROM diaries d LEFT JOIN agents a ON a.agent_id = d.owner_id";
const SHARE_COLUMNS: &str = "diary_id, agent_id, role, status, invited_by, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct DiaryRow {
    id: String,
    owner_id: String,
    name: String,
    visibility: String,
    signed: bool,
    team_id: String,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    owner_public_key: Option<String>,
}

impl TryFrom<DiaryRow> for Diary {
    type Error = IdentityError;

    fn try_from(row: DiaryRow) -> Result<Diary, IdentityError> {
        Ok(Diary {
            id: row.id,
            owner_id: row.owner_id,
            name: row.name,
            visibility: Visibility::from_stored(&row.visibility)?,
            signed: row.signed,
            team_id: row.team_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
            owner_public_key: row.owner_public_key,
        })
    }
}

#[derive(sqlx::FromRow)]
struct ShareRow {
    diary_id: String,
    agent_id: String,
    role: String,
    status: String,
    invited_by: String,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl TryFrom<ShareRow> for Share {
    type Error = IdentityError;

    fn try_from(row: ShareRow) -> Result<Share, IdentityError> {
        Ok(Share {
            diary_id: row.diary_id,
            agent_id: row.agent_id,
            role: ShareRole::parse(&row.role)
                .map_err(|_| IdentityError::Corrupt(format!("share role {:?}", row.role)))?,
            status: ShareStatus::from_stored(&row.status)?,
            invited_by: row.invited_by,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

impl IdentityStore {
    pub async fn insert_diary(
        &self,
        diary: &Diary,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            query(
                "INSERT INTO diaries \
                 (id, owner_id, name, visibility, signed, team_id, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&diary.id)
            .bind(&diary.owner_id)
            .bind(&diary.name)
            .bind(diary.visibility.as_str())
            .bind(diary.signed)
            .bind(&diary.team_id)
            .bind(diary.created_at)
            .bind(diary.updated_at)
            .execute(tx.conn())
            .await?;
            let detail = json!({"name": diary.name, "visibility": diary.visibility.as_str()});
            tx.record(
                draft(actor, "create_diary", "diary", &diary.id, detail),
                now,
            );
            tx.commit().await?;
            Ok(())
        })
    }

    pub async fn get_diary(&self, id: &str) -> Result<Option<Diary>, IdentityError> {
        let sql = format!("{DIARY_SELECT} WHERE d.id = $1");
        self.find::<DiaryRow>(&sql, id)
            .await?
            .map(Diary::try_from)
            .transpose()
    }

    /// Diaries `caller` owns or holds an accepted share of; every diary for `None`.
    pub async fn list_diaries(&self, caller: Option<&str>) -> Result<Vec<Diary>, IdentityError> {
        let sql = format!(
            "{DIARY_SELECT} WHERE $1 = '' OR d.owner_id = $1 OR EXISTS (SELECT 1 FROM \
             diary_shares s WHERE s.diary_id = d.id AND s.agent_id = $1 AND s.status = 'accepted') \
             ORDER BY d.created_at DESC, d.id DESC"
        );
        let rows: Vec<DiaryRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(caller.unwrap_or(""))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(Diary::try_from).collect()
    }

    pub async fn update_diary(
        &self,
        diary: &Diary,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            query("UPDATE diaries SET name = $1, visibility = $2, updated_at = $3 WHERE id = $4")
                .bind(&diary.name)
                .bind(diary.visibility.as_str())
                .bind(now)
                .bind(&diary.id)
                .execute(tx.conn())
                .await?;
            let detail = json!({"name": diary.name, "visibility": diary.visibility.as_str()});
            tx.record(
                draft(actor, "update_diary", "diary", &diary.id, detail),
                now,
            );
            tx.commit().await?;
            Ok(())
        })
    }

    /// Deletes a diary and its draft entries; refused while it holds signed ones.
    pub async fn delete_diary(
        &self,
        id: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<u64, IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            let (signed,): (i64,) = query(
                "SELECT COUNT(*) AS n FROM diary_entries \
                 WHERE diary_id = $1 AND content_signature IS NOT NULL",
            )
            .bind(id)
            .fetch_one(tx.conn())
            .await?;
            if signed > 0 {
                let noun = if signed == 1 { "entry" } else { "entries" };
                return Err(IdentityError::FailedPrecondition(format!(
                    "Cannot delete diary: it contains {signed} signed {noun}. Delete unsigned \
                     entries individually and use entry relations (supersedes) for signed ones."
                )));
            }
            let deleted = query("DELETE FROM diary_entries WHERE diary_id = $1")
                .bind(id)
                .execute(tx.conn())
                .await?;
            query("DELETE FROM diaries WHERE id = $1")
                .bind(id)
                .execute(tx.conn())
                .await?;
            let detail = json!({"deleted_entries": deleted});
            tx.record(draft(actor, "delete_diary", "diary", id, detail), now);
            tx.commit().await?;
            Ok(deleted)
        })
    }

    pub async fn get_share(
        &self,
        diary_id: &str,
        agent_id: &str,
    ) -> Result<Option<Share>, IdentityError> {
        let sql = format!(
            "SELECT {SHARE_COLUMNS} FROM diary_shares WHERE diary_id = $1 AND agent_id = $2"
        );
        let row: Option<ShareRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(diary_id)
                .bind(agent_id)
                .fetch_optional(pool)
                .await?
        });
        row.map(Share::try_from).transpose()
    }

    /// Inserts or replaces the share of (diary, agent).
    pub async fn put_share(
        &self,
        share: &Share,
        action: &str,
        actor: &str,
        now: OffsetDateTime,
    ) -> Result<(), IdentityError> {
        with_pool!(&self.db, |pool| {
            let mut tx = AuditedTx::begin(pool).await?;
            query(
                "INSERT INTO diary_shares \
                 (diary_id, agent_id, role, status, invited_by, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (diary_id, agent_id) DO UPDATE \
                 SET role = excluded.role, status = excluded.status, \
                 invited_by = excluded.invited_by, updated_at = excluded.updated_at",
            )
            .bind(&share.diary_id)
            .bind(&share.agent_id)
            .bind(share.role.as_str())
            .bind(share.status.as_str())
            .bind(&share.invited_by)
            .bind(share.created_at)
            .bind(share.updated_at)
            .execute(tx.conn())
            .await?;
            let detail = json!({
                "agent_id": share.agent_id,
                "role": share.role.as_str(),
                "status": share.status.as_str(),
            });
            tx.record(draft(actor, action, "diary", &share.diary_id, detail), now);
            tx.commit().await?;
            Ok(())
        })
    }

    pub async fn list_shares(
        &self,
        diary_id: &str,
        only_agent: Option<&str>,
    ) -> Result<Vec<Share>, IdentityError> {
        let sql = format!(
            "SELECT {SHARE_COLUMNS} FROM diary_shares WHERE diary_id = $1 \
             AND ($2 = '' OR agent_id = $2) ORDER BY created_at, agent_id"
        );
        let rows: Vec<ShareRow> = with_pool!(&self.db, |pool| {
            query(&sql)
                .bind(diary_id)
                .bind(only_agent.unwrap_or(""))
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(Share::try_from).collect()
    }
}

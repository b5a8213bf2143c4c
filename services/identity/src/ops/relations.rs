//! Relations between entries of one diary, and MoltNet's walk over them.

use time::OffsetDateTime;

use super::Identity;
use crate::domain::diary::{self, Access, Caller};
use crate::domain::relation::{self, Relation};
use crate::domain::walk::{self, WalkResult};
use crate::domain::{input, signing};
use crate::error::IdentityError;
use crate::store::RelationFilter;

const RELATION_NOT_FOUND: &str = "Relation not found";

/// A page of an entry's relations.
#[derive(Debug, Clone, Default)]
pub struct RelationList {
    pub entry_id: String,
    /// Empty for any.
    pub relation: String,
    /// Empty for any.
    pub status: String,
    pub direction: String,
    /// 0 for the default.
    pub limit: u32,
    pub offset: u32,
}

fn not_found() -> IdentityError {
    IdentityError::NotFound(RELATION_NOT_FOUND.into())
}

impl Identity {
    /// The relation, when the caller may write to its source entry's diary.
    async fn relation_with_write(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<Relation, IdentityError> {
        let relation = self.store.get_relation(id).await?.ok_or_else(not_found)?;
        let (_, access) = self
            .entry_access(caller, &relation.source_id)
            .await
            .map_err(|_| not_found())?;
        diary::require(access, Access::Write)?;
        Ok(relation)
    }

    /// Relates two entries of one diary; the same triple again answers the existing
    /// relation (`created` false).
    pub async fn create_relation(
        &self,
        caller: &Caller,
        source_id: &str,
        target_id: &str,
        kind: String,
        status: &str,
    ) -> Result<(Relation, bool), IdentityError> {
        let missing = || IdentityError::InvalidArgument("One or both entries not found".into());
        let (source, access) = self
            .entry_access(caller, source_id)
            .await
            .map_err(|e| match e {
                IdentityError::NotFound(_) => missing(),
                other => other,
            })?;
        if access < Access::Write {
            return Err(IdentityError::PermissionDenied(
                "Not authorized to edit this entry".into(),
            ));
        }
        relation::validate_relation(&kind)?;
        let status = relation::creation_status(status)?;
        if source_id == target_id {
            return Err(missing());
        }
        let target = self.store.get_entry(target_id).await?.ok_or_else(missing)?;
        if target.diary_id != source.diary_id {
            return Err(IdentityError::InvalidArgument(
                "Both entries must belong to the same diary".into(),
            ));
        }
        let now = OffsetDateTime::now_utc();
        let r = Relation {
            id: signing::new_uuid(),
            source_id: source.id,
            target_id: target.id,
            relation: kind,
            status,
            source_cid_snapshot: Some(source.content_hash),
            target_cid_snapshot: Some(target.content_hash),
            created_at: now,
            updated_at: now,
        };
        self.store.insert_relation(&r, &caller.id, now).await
    }

    /// A page of the entry's relations, the total and the page size used.
    pub async fn list_relations(
        &self,
        caller: &Caller,
        list: RelationList,
    ) -> Result<(Vec<Relation>, u64, u32), IdentityError> {
        let (e, _) = self.entry_access(caller, &list.entry_id).await?;
        if !list.relation.is_empty() {
            relation::validate_relation(&list.relation)?;
        }
        if !list.status.is_empty() {
            relation::validate_status(&list.status)?;
        }
        let limit = input::limit("limit", list.limit, 50, 100)?;
        let filter = RelationFilter {
            entry_id: e.id,
            relation: (!list.relation.is_empty()).then_some(list.relation),
            status: (!list.status.is_empty()).then_some(list.status),
            direction: relation::validate_direction(&list.direction)?,
            limit: i64::from(limit),
            offset: i64::from(list.offset),
        };
        let (relations, total) = self.store.list_relations(&filter).await?;
        Ok((relations, total, limit))
    }

    /// Walks the relations breadth-first from the entry, `depth` levels (1 by default);
    /// answers the depth used and the walk. Same access check as `list_relations`.
    /// Relations only ever join entries of one diary (`create_relation` refuses others and
    /// entries never change diary), so every entry the walk reaches is in the starting
    /// entry's diary, which the caller can read: no per-entry check is needed.
    pub async fn walk_relations(
        &self,
        caller: &Caller,
        entry_id: &str,
        depth: Option<u32>,
        status: &str,
    ) -> Result<(u32, WalkResult), IdentityError> {
        let (e, _) = self.entry_access(caller, entry_id).await?;
        let depth = walk::validate_depth(depth)?;
        if !status.is_empty() {
            relation::validate_status(status)?;
        }
        let status = (!status.is_empty()).then_some(status);
        let store = &self.store;
        let result = walk::walk(&e.id, depth, |frontier: Vec<String>| async move {
            store.relations_touching(&frontier, status).await
        })
        .await?;
        Ok((depth, result))
    }

    pub async fn update_relation(
        &self,
        caller: &Caller,
        id: &str,
        status: &str,
    ) -> Result<Relation, IdentityError> {
        let r = self.relation_with_write(caller, id).await?;
        relation::validate_status(status)?;
        self.store
            .update_relation_status(&r.id, status, &caller.id, OffsetDateTime::now_utc())
            .await?;
        self.store.get_relation(&r.id).await?.ok_or_else(not_found)
    }

    pub async fn delete_relation(&self, caller: &Caller, id: &str) -> Result<(), IdentityError> {
        let r = self.relation_with_write(caller, id).await?;
        self.store
            .delete_relation(&r.id, &caller.id, OffsetDateTime::now_utc())
            .await
    }
}

//! Diaries and their shares. A diary the caller cannot read is answered as missing.

use time::OffsetDateTime;

use super::Identity;
use crate::domain::diary::{
    self, Access, Caller, Diary, Share, ShareRole, ShareStatus, Visibility,
};
use crate::domain::{agent, input, signing};
use crate::error::IdentityError;

impl Identity {
    /// The diary and the caller's access to it; NOT_FOUND when missing.
    pub(super) async fn diary_access(
        &self,
        caller: &Caller,
        diary_id: &str,
    ) -> Result<(Diary, Access), IdentityError> {
        let diary = self
            .store
            .get_diary(diary_id)
            .await?
            .ok_or_else(diary::not_found)?;
        let share = if caller.superuser || caller.id == diary.owner_id {
            None
        } else {
            self.store.get_share(&diary.id, &caller.id).await?
        };
        let access = diary::access(caller, &diary, share.as_ref());
        Ok((diary, access))
    }

    pub async fn create_diary(
        &self,
        caller: &Caller,
        name: String,
        visibility: &str,
        team_id: String,
    ) -> Result<Diary, IdentityError> {
        diary::validate_name(&name)?;
        let visibility = Visibility::parse(visibility)?;
        let now = OffsetDateTime::now_utc();
        let d = Diary {
            id: signing::new_uuid(),
            owner_id: caller.id.clone(),
            name,
            visibility,
            signed: false,
            team_id,
            created_at: now,
            updated_at: now,
            owner_public_key: None,
        };
        self.store.insert_diary(&d, &caller.id, now).await?;
        Ok(self.store.get_diary(&d.id).await?.unwrap_or(d))
    }

    pub async fn get_diary(&self, caller: &Caller, id: &str) -> Result<Diary, IdentityError> {
        let (d, access) = self.diary_access(caller, id).await?;
        diary::require(access, Access::Read)?;
        Ok(d)
    }

    /// The caller's diaries (owned or shared with it); every diary for a superuser.
    pub async fn list_diaries(&self, caller: &Caller) -> Result<Vec<Diary>, IdentityError> {
        let filter = (!caller.superuser).then_some(caller.id.as_str());
        self.store.list_diaries(filter).await
    }

    pub async fn update_diary(
        &self,
        caller: &Caller,
        id: &str,
        name: Option<String>,
        visibility: Option<String>,
    ) -> Result<Diary, IdentityError> {
        let (mut d, access) = self.diary_access(caller, id).await?;
        diary::require(access, Access::Manage)?;
        if name.is_none() && visibility.is_none() {
            return Err(IdentityError::InvalidArgument(
                "give name and/or visibility to update".into(),
            ));
        }
        if let Some(name) = name {
            diary::validate_name(&name)?;
            d.name = name;
        }
        if let Some(visibility) = visibility {
            d.visibility = Visibility::parse(&visibility)?;
        }
        let now = OffsetDateTime::now_utc();
        self.store.update_diary(&d, &caller.id, now).await?;
        self.store
            .get_diary(&d.id)
            .await?
            .ok_or_else(diary::not_found)
    }

    /// Deletes the diary and its drafts; answers how many entries went with it.
    pub async fn delete_diary(&self, caller: &Caller, id: &str) -> Result<u64, IdentityError> {
        let (d, access) = self.diary_access(caller, id).await?;
        diary::require(access, Access::Manage)?;
        self.store
            .delete_diary(&d.id, &caller.id, OffsetDateTime::now_utc())
            .await
    }

    pub async fn share_diary(
        &self,
        caller: &Caller,
        diary_id: &str,
        agent_id: &str,
        role: &str,
    ) -> Result<Share, IdentityError> {
        let (d, access) = self.diary_access(caller, diary_id).await?;
        diary::require(access, Access::Manage)?;
        agent::validate_agent_id(agent_id)?;
        let role = ShareRole::parse(role)?;
        if agent_id == d.owner_id {
            return Err(IdentityError::InvalidArgument(
                "the owner already has full access; share with another agent".into(),
            ));
        }
        let now = OffsetDateTime::now_utc();
        let existing = self.store.get_share(&d.id, agent_id).await?;
        let share = diary::share_with(existing, &d.id, agent_id, role, &caller.id, now);
        self.store
            .put_share(&share, "share_diary", &caller.id, now)
            .await?;
        Ok(share)
    }

    /// The caller accepts or declines a pending share offered to it.
    pub async fn respond_to_share(
        &self,
        caller: &Caller,
        diary_id: &str,
        accept: bool,
    ) -> Result<Share, IdentityError> {
        input::required("diary_id", diary_id)?;
        let share = self
            .store
            .get_share(diary_id, &caller.id)
            .await?
            .ok_or_else(|| {
                IdentityError::NotFound(format!(
                    "{:?} has no share of diary {:?} to answer",
                    caller.id, diary_id
                ))
            })?;
        let status = diary::respond(&share, accept)?;
        let now = OffsetDateTime::now_utc();
        let share = Share {
            status,
            updated_at: now,
            ..share
        };
        let action = if accept {
            "accept_share"
        } else {
            "decline_share"
        };
        self.store
            .put_share(&share, action, &caller.id, now)
            .await?;
        Ok(share)
    }

    /// Revokes `agent_id`'s share; revoking a revoked share changes nothing.
    pub async fn revoke_share(
        &self,
        caller: &Caller,
        diary_id: &str,
        agent_id: &str,
    ) -> Result<Share, IdentityError> {
        let (d, access) = self.diary_access(caller, diary_id).await?;
        diary::require(access, Access::Manage)?;
        let share = self
            .store
            .get_share(&d.id, agent_id)
            .await?
            .ok_or_else(|| {
                IdentityError::NotFound(format!("diary has no share for {agent_id:?}"))
            })?;
        if share.status == ShareStatus::Revoked {
            return Ok(share);
        }
        let now = OffsetDateTime::now_utc();
        let share = Share {
            status: ShareStatus::Revoked,
            updated_at: now,
            ..share
        };
        self.store
            .put_share(&share, "revoke_share", &caller.id, now)
            .await?;
        Ok(share)
    }

    /// Every share of the diary for its owner; otherwise the caller's own share.
    pub async fn list_shares(
        &self,
        caller: &Caller,
        diary_id: &str,
    ) -> Result<Vec<Share>, IdentityError> {
        let (d, access) = self.diary_access(caller, diary_id).await?;
        if access == Access::Manage {
            return self.store.list_shares(&d.id, None).await;
        }
        let own = self.store.list_shares(&d.id, Some(&caller.id)).await?;
        if own.is_empty() && access == Access::None {
            return Err(diary::not_found());
        }
        Ok(own)
    }
}

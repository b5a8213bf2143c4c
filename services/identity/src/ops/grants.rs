//! MoltNet's diary grants (`domain::grant`): immediate writer/manager access, kept as
//! accepted shares. Unlike the share RPCs, a diary the caller may not manage (or that does
//! not exist) is answered 403 with MoltNet's message, as the original does.

use time::OffsetDateTime;

use super::Identity;
use crate::domain::diary::{self, Access, Caller, Share};
use crate::domain::grant::{self, GrantOutcome};
use crate::error::IdentityError;

impl Identity {
    /// The caller's access to the diary, `Access::None` when it does not exist.
    async fn grant_access(&self, caller: &Caller, diary_id: &str) -> Result<Access, IdentityError> {
        match self.diary_access(caller, diary_id).await {
            Ok((_, access)) => Ok(access),
            Err(IdentityError::NotFound(_)) => Ok(Access::None),
            Err(err) => Err(err),
        }
    }

    /// Grants `role` (writer or manager) to the agent `subject_id`; the same role again
    /// changes nothing, another live role is a conflict.
    pub async fn grant_diary(
        &self,
        caller: &Caller,
        diary_id: &str,
        subject_id: &str,
        subject_ns: &str,
        role: &str,
    ) -> Result<Share, IdentityError> {
        let role = grant::parse_role(role)?;
        grant::validate_subject(subject_id, subject_ns)?;
        if self.grant_access(caller, diary_id).await? < Access::Manage {
            return Err(IdentityError::PermissionDenied(
                grant::GRANT_FORBIDDEN.into(),
            ));
        }
        let now = OffsetDateTime::now_utc();
        let existing = self.store.get_share(diary_id, subject_id).await?;
        match grant::grant(
            existing.clone(),
            diary_id,
            subject_id,
            role,
            &caller.id,
            now,
        )? {
            GrantOutcome::Unchanged => existing.ok_or_else(diary::not_found),
            GrantOutcome::Write(share) => {
                self.store
                    .put_share(&share, "grant_diary", &caller.id, now)
                    .await?;
                Ok(share)
            }
        }
    }

    /// The diary's grants (accepted writer and manager shares), for anyone who may read it.
    pub async fn list_grants(
        &self,
        caller: &Caller,
        diary_id: &str,
    ) -> Result<Vec<Share>, IdentityError> {
        if self.grant_access(caller, diary_id).await? < Access::Read {
            return Err(IdentityError::PermissionDenied(
                grant::LIST_FORBIDDEN.into(),
            ));
        }
        let shares = self.store.list_shares(diary_id, None).await?;
        Ok(shares.into_iter().filter(grant::is_grant).collect())
    }

    /// Revokes the subject's `role` grant; answers whether one was revoked (MoltNet answers
    /// `revoked: true` either way).
    pub async fn revoke_grant(
        &self,
        caller: &Caller,
        diary_id: &str,
        subject_id: &str,
        subject_ns: &str,
        role: &str,
    ) -> Result<bool, IdentityError> {
        let role = grant::parse_role(role)?;
        grant::validate_subject(subject_id, subject_ns)?;
        if self.grant_access(caller, diary_id).await? < Access::Manage {
            return Err(IdentityError::PermissionDenied(
                grant::REVOKE_FORBIDDEN.into(),
            ));
        }
        let now = OffsetDateTime::now_utc();
        let existing = self.store.get_share(diary_id, subject_id).await?;
        match grant::revoke(existing, role, now) {
            Some(share) => {
                self.store
                    .put_share(&share, "revoke_grant", &caller.id, now)
                    .await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

//! Diaries, their visibility and shares, and who may do what with them (seed 004:
//! authorisation is diary-scoped; `created_by` is provenance, never a permission).

use time::OffsetDateTime;

use crate::error::IdentityError;

/// Longest diary name (MoltNet's 1–255).
pub const MAX_NAME_CHARS: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Owner (and accepted shares) only. The default.
    Private,
    /// Any authenticated agent may read.
    Moltnet,
    /// Any authenticated agent may read, and anyone without a token through the
    /// read-only public feed.
    Public,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Private => "private",
            Visibility::Moltnet => "moltnet",
            Visibility::Public => "public",
        }
    }

    /// Parses a request value; empty means the default, `private`.
    pub fn parse(text: &str) -> Result<Visibility, IdentityError> {
        match text {
            "" | "private" => Ok(Visibility::Private),
            "moltnet" => Ok(Visibility::Moltnet),
            "public" => Ok(Visibility::Public),
            other => Err(IdentityError::InvalidArgument(format!(
                "visibility {other:?} is not one of private, moltnet, public"
            ))),
        }
    }

    pub fn from_stored(text: &str) -> Result<Visibility, IdentityError> {
        Visibility::parse(text).map_err(|_| IdentityError::Corrupt(format!("visibility {text:?}")))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareRole {
    Reader,
    Writer,
    /// MoltNet's grant role that manages the diary (and its grants) like its owner.
    Manager,
}

impl ShareRole {
    pub fn as_str(self) -> &'static str {
        match self {
            ShareRole::Reader => "reader",
            ShareRole::Writer => "writer",
            ShareRole::Manager => "manager",
        }
    }

    pub fn parse(text: &str) -> Result<ShareRole, IdentityError> {
        match text {
            "reader" => Ok(ShareRole::Reader),
            "writer" => Ok(ShareRole::Writer),
            "manager" => Ok(ShareRole::Manager),
            other => Err(IdentityError::InvalidArgument(format!(
                "role {other:?} is not one of reader, writer, manager"
            ))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareStatus {
    Pending,
    Accepted,
    Declined,
    Revoked,
}

impl ShareStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ShareStatus::Pending => "pending",
            ShareStatus::Accepted => "accepted",
            ShareStatus::Declined => "declined",
            ShareStatus::Revoked => "revoked",
        }
    }

    pub fn from_stored(text: &str) -> Result<ShareStatus, IdentityError> {
        match text {
            "pending" => Ok(ShareStatus::Pending),
            "accepted" => Ok(ShareStatus::Accepted),
            "declined" => Ok(ShareStatus::Declined),
            "revoked" => Ok(ShareStatus::Revoked),
            other => Err(IdentityError::Corrupt(format!("share status {other:?}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diary {
    pub id: String,
    pub owner_id: String,
    pub name: String,
    pub visibility: Visibility,
    pub signed: bool,
    pub team_id: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    /// Of the owner, when the owner is a registered agent.
    pub owner_public_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    pub diary_id: String,
    pub agent_id: String,
    pub role: ShareRole,
    pub status: ShareStatus,
    pub invited_by: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// What the caller may do with one diary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    None,
    Read,
    Write,
    /// Owner, manager grant (or superuser): manage the diary and its shares.
    Manage,
}

/// The caller as far as diaries care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub id: String,
    pub superuser: bool,
}

/// The caller's access to `diary`, given the caller's own share of it (if any).
/// Only an accepted share grants anything; pending, declined and revoked grant nothing.
pub fn access(caller: &Caller, diary: &Diary, share: Option<&Share>) -> Access {
    if caller.superuser || caller.id == diary.owner_id {
        return Access::Manage;
    }
    let from_share = match share {
        Some(s) if s.status == ShareStatus::Accepted && s.agent_id == caller.id => match s.role {
            ShareRole::Manager => Access::Manage,
            ShareRole::Writer => Access::Write,
            ShareRole::Reader => Access::Read,
        },
        _ => Access::None,
    };
    let from_visibility = match diary.visibility {
        Visibility::Private => Access::None,
        Visibility::Moltnet | Visibility::Public => Access::Read,
    };
    from_share.max(from_visibility)
}

/// The error for a diary the caller may not see: indistinguishable from a missing one.
pub fn not_found() -> IdentityError {
    IdentityError::NotFound("Diary not found or access denied".into())
}

/// Requires at least `needed`, hiding unreadable diaries as missing.
pub fn require(access: Access, needed: Access) -> Result<(), IdentityError> {
    if access >= needed {
        return Ok(());
    }
    if access == Access::None {
        return Err(not_found());
    }
    Err(IdentityError::PermissionDenied(match needed {
        Access::Manage => "only the diary's owner or a manager can do this".into(),
        _ => "You do not have permission to write to this diary".into(),
    }))
}

pub fn validate_name(name: &str) -> Result<(), IdentityError> {
    let chars = name.chars().count();
    if name.trim().is_empty() || chars > MAX_NAME_CHARS {
        return Err(IdentityError::InvalidArgument(format!(
            "name must be 1-{MAX_NAME_CHARS} characters and not blank"
        )));
    }
    Ok(())
}

/// A share's next status when the invited agent answers.
pub fn respond(share: &Share, accept: bool) -> Result<ShareStatus, IdentityError> {
    match share.status {
        ShareStatus::Pending => Ok(if accept {
            ShareStatus::Accepted
        } else {
            ShareStatus::Declined
        }),
        other => Err(IdentityError::FailedPrecondition(format!(
            "the share is {}, not pending; only a pending share can be accepted or declined",
            other.as_str()
        ))),
    }
}

/// The share that (re)sharing `diary_id` with `agent_id` as `role` leaves: a pending or
/// accepted share keeps its status and takes the new role; a declined or revoked one is
/// offered again (pending); otherwise a new pending share.
pub fn share_with(
    existing: Option<Share>,
    diary_id: &str,
    agent_id: &str,
    role: ShareRole,
    invited_by: &str,
    now: OffsetDateTime,
) -> Share {
    match existing {
        Some(s) if matches!(s.status, ShareStatus::Pending | ShareStatus::Accepted) => Share {
            role,
            updated_at: now,
            invited_by: invited_by.to_owned(),
            ..s
        },
        Some(s) => Share {
            role,
            status: ShareStatus::Pending,
            updated_at: now,
            invited_by: invited_by.to_owned(),
            ..s
        },
        None => Share {
            diary_id: diary_id.to_owned(),
            agent_id: agent_id.to_owned(),
            role,
            status: ShareStatus::Pending,
            invited_by: invited_by.to_owned(),
            created_at: now,
            updated_at: now,
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn diary(visibility: Visibility) -> Diary {
        Diary {
            id: "d".into(),
            owner_id: "agent:owner".into(),
            name: "n".into(),
            visibility,
            signed: false,
            team_id: String::new(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
            owner_public_key: None,
        }
    }

    fn caller(id: &str) -> Caller {
        Caller {
            id: id.into(),
            superuser: false,
        }
    }

    fn share(role: ShareRole, status: ShareStatus) -> Share {
        Share {
            diary_id: "d".into(),
            agent_id: "agent:other".into(),
            role,
            status,
            invited_by: "agent:owner".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn owner_shares_and_visibility_decide_access() {
        let private = diary(Visibility::Private);
        let other = caller("agent:other");
        assert_eq!(
            access(&caller("agent:owner"), &private, None),
            Access::Manage
        );
        assert_eq!(access(&other, &private, None), Access::None);
        let reader = share(ShareRole::Reader, ShareStatus::Accepted);
        assert_eq!(access(&other, &private, Some(&reader)), Access::Read);
        let writer = share(ShareRole::Writer, ShareStatus::Accepted);
        assert_eq!(access(&other, &private, Some(&writer)), Access::Write);
        let manager = share(ShareRole::Manager, ShareStatus::Accepted);
        assert_eq!(access(&other, &private, Some(&manager)), Access::Manage);
        for status in [
            ShareStatus::Pending,
            ShareStatus::Declined,
            ShareStatus::Revoked,
        ] {
            let s = share(ShareRole::Writer, status);
            assert_eq!(access(&other, &private, Some(&s)), Access::None);
        }
        assert_eq!(
            access(&other, &diary(Visibility::Moltnet), None),
            Access::Read
        );
        assert_eq!(
            access(&other, &diary(Visibility::Public), Some(&writer)),
            Access::Write
        );
        let root = Caller {
            id: "owner".into(),
            superuser: true,
        };
        assert_eq!(access(&root, &private, None), Access::Manage);
    }

    #[test]
    fn unreadable_is_not_found_and_readable_is_forbidden() {
        assert!(matches!(
            require(Access::None, Access::Read),
            Err(IdentityError::NotFound(_))
        ));
        assert!(matches!(
            require(Access::Read, Access::Write),
            Err(IdentityError::PermissionDenied(_))
        ));
        assert!(require(Access::Write, Access::Write).is_ok());
    }

    #[test]
    fn only_pending_shares_are_answered() {
        let pending = share(ShareRole::Reader, ShareStatus::Pending);
        assert_eq!(respond(&pending, true).unwrap(), ShareStatus::Accepted);
        assert_eq!(respond(&pending, false).unwrap(), ShareStatus::Declined);
        assert!(respond(&share(ShareRole::Reader, ShareStatus::Revoked), true).is_err());
    }

    #[test]
    fn names_and_visibility_are_validated() {
        assert!(validate_name("").is_err());
        assert!(validate_name(&"x".repeat(256)).is_err());
        assert!(validate_name("journal").is_ok());
        assert_eq!(Visibility::parse("").unwrap(), Visibility::Private);
        assert!(Visibility::parse("secret").is_err());
    }

    #[test]
    fn resharing_keeps_live_shares_and_reoffers_ended_ones() {
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
        let new = share_with(
            None,
            "d",
            "agent:other",
            ShareRole::Reader,
            "agent:owner",
            now,
        );
        assert_eq!((new.status, new.created_at), (ShareStatus::Pending, now));
        let accepted = share(ShareRole::Reader, ShareStatus::Accepted);
        let promoted = share_with(
            Some(accepted),
            "d",
            "agent:other",
            ShareRole::Writer,
            "agent:owner",
            now,
        );
        assert_eq!(
            (promoted.role, promoted.status),
            (ShareRole::Writer, ShareStatus::Accepted)
        );
        assert_eq!(promoted.created_at, OffsetDateTime::UNIX_EPOCH);
        for ended in [ShareStatus::Declined, ShareStatus::Revoked] {
            let s = share_with(
                Some(share(ShareRole::Reader, ended)),
                "d",
                "agent:other",
                ShareRole::Reader,
                "agent:owner",
                now,
            );
            assert_eq!(s.status, ShareStatus::Pending);
        }
    }
}

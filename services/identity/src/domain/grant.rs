//! MoltNet's diary grants (`shared/compat/moltnet.md` §6) on Noema's shares.
//!
//! A grant is an accepted share whose role is `writer` or `manager`: it takes effect at
//! once (MoltNet has no invitation step), one role per subject and diary. The seed's
//! invitations (`reader`/`writer`, pending until the agent accepts) live in the same
//! table, so a subject's access has one source of truth whichever API made it.

use time::OffsetDateTime;

use super::diary::{Share, ShareRole, ShareStatus};
use crate::error::IdentityError;

/// MoltNet's answer when the caller cannot manage the diary (or it does not exist).
pub const GRANT_FORBIDDEN: &str = "Only diary managers can grant access";
pub const REVOKE_FORBIDDEN: &str = "Only diary managers can revoke access";
pub const LIST_FORBIDDEN: &str = "No read access to this diary";

/// The only subject namespace Noema has: its principals are agents (token peers). MoltNet's
/// `Human` and `Group` are refused rather than mapped, since nothing here could act as one.
pub const AGENT_NS: &str = "Agent";

/// A grant's role: what MoltNet lets a manager hand out.
pub fn parse_role(role: &str) -> Result<ShareRole, IdentityError> {
    match role {
        "writer" => Ok(ShareRole::Writer),
        "manager" => Ok(ShareRole::Manager),
        other => Err(IdentityError::InvalidArgument(format!(
            "role {other:?} is not one of writer, manager"
        ))),
    }
}

/// Checks the subject of a grant: an agent id in the `Agent` namespace.
pub fn validate_subject(subject_id: &str, subject_ns: &str) -> Result<(), IdentityError> {
    match subject_ns {
        AGENT_NS => {}
        "Human" | "Group" => {
            return Err(IdentityError::InvalidArgument(format!(
                "subjectNs {subject_ns:?} is not supported: Noema's principals are agents; \
                 grant to subjectNs \"Agent\""
            )));
        }
        other => {
            return Err(IdentityError::InvalidArgument(format!(
                "subjectNs {other:?} is not one of Agent, Human, Group"
            )));
        }
    }
    super::agent::validate_agent_id(subject_id).map_err(|_| {
        IdentityError::InvalidArgument("subjectId must be a non-empty agent id".into())
    })
}

/// Whether the share is a grant: accepted, with a grant role.
pub fn is_grant(share: &Share) -> bool {
    share.status == ShareStatus::Accepted
        && matches!(share.role, ShareRole::Writer | ShareRole::Manager)
}

/// What granting `role` does given the subject's current share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantOutcome {
    /// The subject holds this role already: nothing to write (MoltNet's idempotent 201).
    Unchanged,
    /// Write this share.
    Write(Share),
}

/// Grants `role` on `diary_id` to `agent_id`. A live (accepted) share of another role is a
/// conflict, MoltNet's "one role per subject"; a pending, declined or revoked share is
/// replaced, since a grant needs no acceptance.
pub fn grant(
    existing: Option<Share>,
    diary_id: &str,
    agent_id: &str,
    role: ShareRole,
    granted_by: &str,
    now: OffsetDateTime,
) -> Result<GrantOutcome, IdentityError> {
    match existing {
        Some(s) if s.status == ShareStatus::Accepted && s.role == role => {
            Ok(GrantOutcome::Unchanged)
        }
        Some(s) if s.status == ShareStatus::Accepted => Err(IdentityError::AlreadyExists(format!(
            "Subject already has '{}' access on this diary. Revoke it first.",
            s.role.as_str()
        ))),
        Some(s) => Ok(GrantOutcome::Write(Share {
            role,
            status: ShareStatus::Accepted,
            invited_by: granted_by.to_owned(),
            updated_at: now,
            ..s
        })),
        None => Ok(GrantOutcome::Write(Share {
            diary_id: diary_id.to_owned(),
            agent_id: agent_id.to_owned(),
            role,
            status: ShareStatus::Accepted,
            invited_by: granted_by.to_owned(),
            created_at: now,
            updated_at: now,
        })),
    }
}

/// The share that revoking `role` leaves, or `None` when the subject holds no such grant
/// (MoltNet's revoke of a missing tuple is a no-op that still answers `revoked: true`).
pub fn revoke(existing: Option<Share>, role: ShareRole, now: OffsetDateTime) -> Option<Share> {
    match existing {
        Some(s) if s.status == ShareStatus::Accepted && s.role == role => Some(Share {
            status: ShareStatus::Revoked,
            updated_at: now,
            ..s
        }),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn share(role: ShareRole, status: ShareStatus) -> Share {
        Share {
            diary_id: "d".into(),
            agent_id: "agent:b".into(),
            role,
            status,
            invited_by: "agent:a".into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1)
    }

    #[test]
    fn subjects_are_agents() {
        assert!(validate_subject("agent:b", "Agent").is_ok());
        for (id, ns) in [
            ("agent:b", "Human"),
            ("agent:b", "Group"),
            ("agent:b", "agent"),
            ("", "Agent"),
        ] {
            assert!(
                matches!(
                    validate_subject(id, ns),
                    Err(IdentityError::InvalidArgument(_))
                ),
                "{id} {ns}"
            );
        }
        assert_eq!(parse_role("manager").unwrap(), ShareRole::Manager);
        assert!(parse_role("reader").is_err());
    }

    #[test]
    fn one_role_per_subject_and_regranting_is_idempotent() {
        let fresh = grant(None, "d", "agent:b", ShareRole::Writer, "agent:a", now()).unwrap();
        let GrantOutcome::Write(written) = fresh else {
            panic!("a new grant is written");
        };
        assert_eq!(
            (written.status, written.created_at),
            (ShareStatus::Accepted, now())
        );
        let writer = share(ShareRole::Writer, ShareStatus::Accepted);
        assert_eq!(
            grant(
                Some(writer.clone()),
                "d",
                "agent:b",
                ShareRole::Writer,
                "agent:a",
                now()
            )
            .unwrap(),
            GrantOutcome::Unchanged
        );
        let err = grant(
            Some(writer),
            "d",
            "agent:b",
            ShareRole::Manager,
            "agent:a",
            now(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Subject already has 'writer' access on this diary. Revoke it first."
        );
        for status in [
            ShareStatus::Pending,
            ShareStatus::Declined,
            ShareStatus::Revoked,
        ] {
            let out = grant(
                Some(share(ShareRole::Reader, status)),
                "d",
                "agent:b",
                ShareRole::Manager,
                "agent:a",
                now(),
            )
            .unwrap();
            let GrantOutcome::Write(s) = out else {
                panic!("an inactive share is replaced");
            };
            assert_eq!(
                (s.role, s.status),
                (ShareRole::Manager, ShareStatus::Accepted)
            );
            assert_eq!(s.created_at, OffsetDateTime::UNIX_EPOCH);
        }
    }

    #[test]
    fn revoking_touches_only_the_named_live_grant() {
        let writer = share(ShareRole::Writer, ShareStatus::Accepted);
        assert!(revoke(Some(writer.clone()), ShareRole::Manager, now()).is_none());
        assert!(revoke(None, ShareRole::Writer, now()).is_none());
        let revoked = revoke(Some(writer), ShareRole::Writer, now()).unwrap();
        assert_eq!(revoked.status, ShareStatus::Revoked);
        assert!(revoke(Some(revoked), ShareRole::Writer, now()).is_none());
        assert!(is_grant(&share(ShareRole::Manager, ShareStatus::Accepted)));
        assert!(!is_grant(&share(ShareRole::Reader, ShareStatus::Accepted)));
        assert!(!is_grant(&share(ShareRole::Writer, ShareStatus::Pending)));
    }
}

//! Who may do what (digest §13, plus tenancy, which the original lacks).
//!
//! - **Tenant**: every capsule belongs to one. A caller acts in its token's tenant; a
//!   superuser (`admin:peers`, the owner) may name another one explicitly. A tenant never
//!   sees another's capsules: every lookup is keyed by tenant, so another tenant's subject
//!   answers exactly as a missing one.
//! - **Scopes**: each operation needs a Noema scope (`continuity:read|write|admin`) or the
//!   CogniRelay scope the original requires (`read:files`, `write:projects`, `admin:peers`);
//!   a refusal is the original's 403 `Missing scope: <scope>`.
//! - **Namespaces**: the token's read/write namespaces decide each path as the original's
//!   `_require_path_mode` does, `admin:peers` bypassing them. Unlike the original, collection
//!   operations (list, plans) are checked too, on the collection's root: they answer the
//!   same 403 as a single-item operation instead of silently dropping rows (digest §16).

use noema_core::scopes::Principal;

use super::error::ContinuityError;
use super::text::posix_normpath;

/// A requirement of one operation: a Noema scope or the original's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub noema: &'static str,
    pub cognirelay: &'static str,
}

pub const READ: Need = Need {
    noema: "continuity:read",
    cognirelay: "read:files",
};
pub const WRITE: Need = Need {
    noema: "continuity:write",
    cognirelay: "write:projects",
};
/// Index status, rebuilds and metrics (`read:index`).
pub const INDEX: Need = Need {
    noema: "continuity:read",
    cognirelay: "read:index",
};
pub const ADMIN: Need = Need {
    noema: "continuity:admin",
    cognirelay: "admin:peers",
};

/// The longest tenant name.
pub const MAX_TENANT_LEN: usize = 200;

/// A caller resolved for one request: its principal and the tenant it acts in.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub tenant: String,
    /// The tenant was named explicitly by a superuser (recorded in audit entries).
    pub named_tenant: bool,
    /// The caller's `authorization` header, forwarded when continuity asks identity on its
    /// behalf (a signed coordination write); `None` outside a request.
    pub authorization: Option<String>,
}

impl Caller {
    /// The caller acting in its own tenant, or (a superuser only) in `requested`.
    pub fn resolve(
        principal: Principal,
        requested: Option<&str>,
    ) -> Result<Caller, ContinuityError> {
        let own = principal.tenant.clone();
        let requested = requested.map(str::trim).filter(|t| !t.is_empty());
        match requested {
            None => Ok(Caller {
                principal,
                tenant: own,
                named_tenant: false,
                authorization: None,
            }),
            Some(tenant) if tenant == own => Ok(Caller {
                principal,
                tenant: own,
                named_tenant: false,
                authorization: None,
            }),
            Some(tenant) if tenant.chars().count() > MAX_TENANT_LEN => Err(
                ContinuityError::invalid(format!("Tenant name longer than {MAX_TENANT_LEN}")),
            ),
            Some(tenant) if principal.superuser => Ok(Caller {
                tenant: tenant.to_owned(),
                principal,
                named_tenant: true,
                authorization: None,
            }),
            Some(tenant) => Err(ContinuityError::Forbidden {
                detail: format!("Tenant not allowed: {tenant}"),
                namespace: false,
            }),
        }
    }

    /// The peer the original names as the actor (`archived_by`, audit entries).
    pub fn peer_id(&self) -> &str {
        &self.principal.peer_id
    }

    /// 403 `Missing scope: <s>` unless the token holds the Noema or the original scope.
    pub fn require(&self, need: Need) -> Result<(), ContinuityError> {
        if self.principal.allows(need.noema) || self.principal.allows(need.cognirelay) {
            Ok(())
        } else {
            Err(ContinuityError::missing_scope(need.cognirelay))
        }
    }

    pub fn require_read_path(&self, path: &str) -> Result<(), ContinuityError> {
        check_path(&self.principal, path, Mode::Read)
    }

    pub fn require_write_path(&self, path: &str) -> Result<(), ContinuityError> {
        check_path(&self.principal, path, Mode::Write)
    }
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    Read,
    Write,
}

/// The original's `_require_path_mode`.
fn check_path(principal: &Principal, path: &str, mode: Mode) -> Result<(), ContinuityError> {
    let normalized = if path.is_empty() {
        String::new()
    } else {
        posix_normpath(path)
    };
    if normalized.is_empty()
        || normalized == "."
        || normalized.starts_with('/')
        || normalized.starts_with("..")
    {
        return Err(ContinuityError::namespace(format!(
            "Invalid path for namespace check: {path}"
        )));
    }
    let allowed = match mode {
        Mode::Read => &principal.read_namespaces,
        Mode::Write => &principal.write_namespaces,
    };
    let matched = allowed.iter().any(|ns| {
        ns == "*"
            || normalized == *ns
            || normalized
                .strip_prefix(ns.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    });
    if matched || principal.superuser {
        return Ok(());
    }
    let label = match mode {
        Mode::Read => "Read",
        Mode::Write => "Write",
    };
    Err(ContinuityError::namespace(format!(
        "{label} path namespace not allowed: {normalized}"
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn principal(scopes: &[&str], read: &[&str], write: &[&str]) -> Principal {
        let list = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
        Principal {
            token_id: "tok".into(),
            peer_id: "agent:a".into(),
            scopes: list(scopes),
            read_namespaces: list(read),
            write_namespaces: list(write),
            superuser: scopes.contains(&"admin:peers"),
            tenant: "agent:a".into(),
        }
    }

    /// The collaboration_peer template (digest §13): the scopes pass, the namespaces do not.
    #[test]
    fn a_collaboration_peer_is_kept_out_of_memory_continuity() {
        let peer = Caller::resolve(
            principal(
                &["read:files", "search", "write:messages", "write:projects"],
                &["memory/coordination", "messages", "tasks"],
                &["memory/coordination/handoffs", "messages", "tasks"],
            ),
            None,
        )
        .unwrap();
        peer.require(READ).unwrap();
        peer.require(WRITE).unwrap();
        assert!(peer.require(ADMIN).is_err());
        let err = peer
            .require_read_path("memory/continuity/user-a.json")
            .unwrap_err();
        assert_eq!(
            err.body().get("detail").and_then(|d| d.as_str()),
            Some("Read path namespace not allowed: memory/continuity/user-a.json")
        );
        assert!(peer.require_write_path("memory/continuity").is_err());
        peer.require_read_path("memory/coordination/x.json")
            .unwrap();
        // A prefix only counts at a path boundary.
        assert!(peer.require_read_path("messagesX/a").is_err());
        assert!(matches!(
            peer.require_read_path("../etc"),
            Err(ContinuityError::Forbidden { detail, .. }) if detail == "Invalid path for namespace check: ../etc"
        ));
    }

    #[test]
    fn only_a_superuser_names_another_tenant() {
        let plain = principal(&["continuity:write"], &["*"], &["*"]);
        assert_eq!(
            Caller::resolve(plain.clone(), None).unwrap().tenant,
            "agent:a"
        );
        assert!(
            !Caller::resolve(plain.clone(), Some("agent:a"))
                .unwrap()
                .named_tenant
        );
        assert!(Caller::resolve(plain.clone(), Some("agent:b")).is_err());
        let admin = principal(&["admin:peers"], &[], &[]);
        let acting = Caller::resolve(admin, Some("agent:b")).unwrap();
        assert_eq!(
            (acting.tenant.as_str(), acting.named_tenant),
            ("agent:b", true)
        );
        acting
            .require_read_path("memory/continuity/x.json")
            .unwrap();
        let missing = Caller::resolve(principal(&["continuity:read"], &["*"], &["*"]), None)
            .unwrap()
            .require(WRITE)
            .unwrap_err();
        assert_eq!(missing.to_string(), "Missing scope: write:projects");
    }
}

//! Scopes and principals: who a token acts as and what it may do.
//!
//! Noema's own scopes are `<service>:<read|write|admin>`, where admin implies write and
//! write implies read. The original systems' scope names are honoured where their APIs
//! are served (MoltNet's `diary:*`, `crypto:sign`, `agent:profile`; CogniRelay's
//! `read:files`, `write:messages`, …); they are matched literally. `admin:peers` (and the
//! owner token) is a superuser that passes every check, as in CogniRelay.

use std::fmt;

/// Services with Noema-native scopes.
pub const SERVICES: [&str; 5] = ["ledger", "identity", "continuity", "orchestrator", "world"];

/// The superuser scope (CogniRelay's owner scope).
pub const SUPERUSER_SCOPE: &str = "admin:peers";

/// Request metadata (gRPC) and header (REST) by which a superuser names the tenant it acts
/// in; anyone else may name only their own.
pub const TENANT_METADATA: &str = "x-noema-tenant";

/// Pseudo-scope required by RPCs any valid token may call.
pub const AUTHENTICATED: &str = "authenticated";

/// Pseudo-scope of RPCs anyone may call without a token (MoltNet's public verifiers); a
/// token, when sent, is still authenticated.
pub const PUBLIC: &str = "public";

/// Scope names of the seed systems, honoured where their APIs are served.
pub const MOLTNET_SCOPES: [&str; 5] = [
    "diary:read",
    "diary:write",
    "diary:manage",
    "crypto:sign",
    "agent:profile",
];
pub const COGNIRELAY_SCOPES: [&str; 9] = [
    "read:files",
    "read:index",
    "write:journal",
    "write:messages",
    "write:projects",
    "search",
    "compact:trigger",
    "admin:peers",
    "replication:sync",
];

/// A governance template: the scopes and namespaces a token issued with it gets
/// (CogniRelay's `scope_templates`, `shared/compat/cognirelay.md` §13). Identity applies
/// them on issue; the gateway publishes them at `/v1/governance/policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenTemplate {
    pub name: &'static str,
    pub scopes: &'static [&'static str],
    pub read_namespaces: &'static [&'static str],
    pub write_namespaces: &'static [&'static str],
}

/// Every template; `owner` is the superuser.
pub const TOKEN_TEMPLATES: [TokenTemplate; 3] = [
    TokenTemplate {
        name: "owner",
        scopes: &[SUPERUSER_SCOPE],
        read_namespaces: &["*"],
        write_namespaces: &["*"],
    },
    TokenTemplate {
        name: "collaboration_peer",
        scopes: &["read:files", "search", "write:messages", "write:projects"],
        read_namespaces: &["memory/coordination", "messages", "tasks"],
        write_namespaces: &[
            "memory/coordination/handoffs",
            "memory/coordination/shared",
            "memory/coordination/reconciliations",
            "messages",
            "tasks",
        ],
    },
    TokenTemplate {
        name: "replication_peer",
        scopes: &["replication:sync", "read:files", "write:messages"],
        read_namespaces: &["*"],
        write_namespaces: &[
            "archive",
            "essays",
            "journal",
            "memory",
            "messages",
            "patches",
            "peers",
            "projects",
            "runs",
            "snapshots",
            "tasks",
        ],
    },
];

/// The longest `ttl_seconds` a token may be issued with: one year.
pub const MAX_TOKEN_TTL_SECONDS: u64 = 31_536_000;

/// A token namespace as a regular expression (the OpenAPI document's pattern): `*`, or a
/// relative path of non-empty segments other than `.` and `..`. The identity service checks
/// the same rule by hand, and a property test there keeps the two equal.
pub const NAMESPACE_PATTERN: &str =
    r"^(?:\*|(?:[^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)(?:/(?:[^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+))*)$";

/// The template called `name`.
pub fn token_template(name: &str) -> Option<&'static TokenTemplate> {
    TOKEN_TEMPLATES.iter().find(|t| t.name == name)
}

/// Every scope a token may carry, sorted.
pub fn known_scopes() -> Vec<String> {
    let mut all: Vec<String> = SERVICES
        .iter()
        .flat_map(|svc| ["read", "write", "admin"].map(|level| format!("{svc}:{level}")))
        .chain(MOLTNET_SCOPES.iter().map(|s| (*s).to_owned()))
        .chain(COGNIRELAY_SCOPES.iter().map(|s| (*s).to_owned()))
        .collect();
    all.sort();
    all.dedup();
    all
}

pub fn is_known_scope(scope: &str) -> bool {
    known_scopes().iter().any(|s| s == scope)
}

/// The CogniRelay scope to name when a token lacks `required` (alternatives, `|`-separated,
/// as an RPC declares them): the first of CogniRelay's own names among them; for a call
/// that only an admin level allows, CogniRelay's superuser scope (the original guards its
/// token and peer administration with it); else `required` as it is.
pub fn cognirelay_scope(required: &str) -> &str {
    let mut alternatives = required.split('|');
    if let Some(own) = alternatives.clone().find(|s| COGNIRELAY_SCOPES.contains(s)) {
        return own;
    }
    if alternatives.any(|s| s.ends_with(":admin")) {
        return SUPERUSER_SCOPE;
    }
    required
}

/// Every scope except the superuser one: what a token gets when none are asked for.
pub fn default_scopes() -> Vec<String> {
    known_scopes()
        .into_iter()
        .filter(|s| s != SUPERUSER_SCOPE)
        .collect()
}

fn level_rank(level: &str) -> Option<u8> {
    match level {
        "read" => Some(0),
        "write" => Some(1),
        "admin" => Some(2),
        _ => None,
    }
}

/// Whether holding `held` satisfies `required` (one alternative, no `|`).
fn satisfies(held: &str, required: &str) -> bool {
    if held == required {
        return true;
    }
    match (held.split_once(':'), required.split_once(':')) {
        (Some((held_svc, held_level)), Some((req_svc, req_level)))
            if held_svc == req_svc && SERVICES.contains(&held_svc) =>
        {
            matches!(
                (level_rank(held_level), level_rank(req_level)),
                (Some(h), Some(r)) if h >= r
            )
        }
        _ => false,
    }
}

/// Why a bearer token that was sent does not authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRejection {
    /// No token has that secret.
    Invalid,
    Revoked,
    Expired,
}

impl TokenRejection {
    /// The stable reason a caller decides on.
    pub fn reason(self) -> crate::Reason {
        match self {
            TokenRejection::Invalid => crate::Reason::TokenInvalid,
            TokenRejection::Revoked => crate::Reason::TokenRevoked,
            TokenRejection::Expired => crate::Reason::TokenExpired,
        }
    }

    /// The rejection a reason names (a generic one is an invalid token).
    pub fn from_reason(reason: crate::Reason) -> TokenRejection {
        match reason {
            crate::Reason::TokenRevoked => TokenRejection::Revoked,
            crate::Reason::TokenExpired => TokenRejection::Expired,
            _ => TokenRejection::Invalid,
        }
    }
}

impl fmt::Display for TokenRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenRejection::Invalid => "invalid token",
            TokenRejection::Revoked => "token revoked",
            TokenRejection::Expired => "token expired",
        })
    }
}

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub token_id: String,
    /// Who the token acts as; a registered agent id makes it act as that agent.
    pub peer_id: String,
    pub scopes: Vec<String>,
    pub read_namespaces: Vec<String>,
    pub write_namespaces: Vec<String>,
    pub superuser: bool,
    /// Whose data the token acts on (capsules and other agent-written data): set when the
    /// token is issued, by default its `peer_id`, so several tokens can act for one tenant.
    pub tenant: String,
}

impl Principal {
    /// The principal of an unauthenticated request when `auth.anonymous_scopes` allows it.
    pub fn anonymous(scopes: Vec<String>) -> Principal {
        Principal {
            token_id: String::new(),
            peer_id: "anonymous".into(),
            scopes,
            read_namespaces: vec!["*".into()],
            write_namespaces: vec!["*".into()],
            superuser: false,
            tenant: "anonymous".into(),
        }
    }

    /// Whether this principal may call something requiring `required`, which may list
    /// alternatives separated by `|`.
    pub fn allows(&self, required: &str) -> bool {
        if self.superuser || required == AUTHENTICATED || required == PUBLIC {
            return true;
        }
        required
            .split('|')
            .any(|alternative| self.scopes.iter().any(|held| satisfies(held, alternative)))
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token itself: only its id and who it acts as.
        write!(f, "{} (token {})", self.peer_id, self.token_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(scopes: &[&str]) -> Principal {
        Principal {
            token_id: "tok".into(),
            peer_id: "p".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            read_namespaces: vec![],
            write_namespaces: vec![],
            superuser: false,
            tenant: "p".into(),
        }
    }

    #[test]
    fn cognirelay_names_the_first_of_its_own_scopes_or_its_superuser() {
        assert_eq!(
            cognirelay_scope("continuity:write|write:projects|write:journal"),
            "write:projects"
        );
        assert_eq!(cognirelay_scope("continuity:read|search"), "search");
        assert_eq!(cognirelay_scope("identity:admin"), SUPERUSER_SCOPE);
        assert_eq!(cognirelay_scope("ledger:write"), "ledger:write");
    }

    #[test]
    fn noema_levels_imply_lower_levels_of_the_same_service() {
        let admin = principal(&["ledger:admin"]);
        assert!(admin.allows("ledger:read"));
        assert!(admin.allows("ledger:write"));
        assert!(admin.allows("ledger:admin"));
        assert!(!admin.allows("identity:read"));
        let reader = principal(&["ledger:read"]);
        assert!(reader.allows("ledger:read"));
        assert!(!reader.allows("ledger:write"));
    }

    #[test]
    fn seed_scopes_match_literally_and_alternatives_work() {
        let diary = principal(&["diary:write"]);
        assert!(diary.allows("identity:write|diary:write"));
        assert!(!diary.allows("diary:read"));
        assert!(!diary.allows("identity:write"));
    }

    #[test]
    fn superuser_and_authenticated() {
        let mut p = principal(&[]);
        assert!(p.allows(AUTHENTICATED));
        assert!(!p.allows("ledger:read"));
        p.superuser = true;
        assert!(p.allows("ledger:admin"));
    }

    #[test]
    fn the_known_scope_list_has_every_family() {
        let known = known_scopes();
        for scope in [
            "ledger:read",
            "world:admin",
            "diary:manage",
            "crypto:sign",
            "read:files",
            "admin:peers",
        ] {
            assert!(known.iter().any(|s| s == scope), "{scope}");
        }
        assert!(!default_scopes().iter().any(|s| s == SUPERUSER_SCOPE));
        assert!(!is_known_scope("ledger:delete"));
    }
}

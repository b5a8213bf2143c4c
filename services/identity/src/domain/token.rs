//! API tokens: random secrets with a recognisable prefix, stored only as SHA-256, with a
//! principal, scopes, namespaces and an optional expiry. Templates follow CogniRelay's
//! governance policy (seed 001).

use noema_core::content_id::ContentId;
use noema_core::scopes::{self, Principal, TokenRejection};
use time::OffsetDateTime;

use crate::error::IdentityError;

/// Every token starts with this, so a leaked one is recognisable (secret scanners, logs).
pub const TOKEN_PREFIX: &str = "noema_";
/// Id of the owner token created at bootstrap.
pub const OWNER_TOKEN_ID: &str = "owner";
pub const OWNER_PEER_ID: &str = "owner";
/// Longest accepted `ttl_seconds` (one year), as CogniRelay.
pub const MAX_TTL_SECONDS: u64 = noema_core::scopes::MAX_TOKEN_TTL_SECONDS;
/// The longest tenant name (continuity refuses longer ones too).
pub const MAX_TENANT_LEN: usize = 200;

/// A token as stored (never the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub token_id: String,
    pub token_sha256: String,
    pub peer_id: String,
    pub scopes: Vec<String>,
    pub read_namespaces: Vec<String>,
    pub write_namespaces: Vec<String>,
    pub superuser: bool,
    pub status: TokenStatus,
    pub issued_at: OffsetDateTime,
    pub expires_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub revoked_reason: Option<String>,
    pub rotated_at: Option<OffsetDateTime>,
    pub rotated_to_token_id: Option<String>,
    pub rotated_from_token_id: Option<String>,
    pub description: String,
    /// Whose data the token acts on (by default its `peer_id`).
    pub tenant: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenStatus {
    Active,
    Revoked,
}

impl TokenStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenStatus::Active => "active",
            TokenStatus::Revoked => "revoked",
        }
    }

    pub fn parse(text: &str) -> Result<TokenStatus, IdentityError> {
        match text {
            "active" => Ok(TokenStatus::Active),
            "revoked" => Ok(TokenStatus::Revoked),
            other => Err(IdentityError::Corrupt(format!(
                "unknown token status {other:?}"
            ))),
        }
    }
}

impl TokenRecord {
    /// `active`, `revoked` or `expired`, as of `now`.
    pub fn effective_status(&self, now: OffsetDateTime) -> &'static str {
        match (self.status, self.expires_at) {
            (TokenStatus::Revoked, _) => "revoked",
            (TokenStatus::Active, Some(expiry)) if expiry <= now => "expired",
            (TokenStatus::Active, _) => "active",
        }
    }

    /// The principal this token authenticates as, or why it does not.
    pub fn principal(&self, now: OffsetDateTime) -> Result<Principal, TokenRejection> {
        match self.effective_status(now) {
            "revoked" => Err(TokenRejection::Revoked),
            "expired" => Err(TokenRejection::Expired),
            _ => Ok(Principal {
                token_id: self.token_id.clone(),
                peer_id: self.peer_id.clone(),
                scopes: self.scopes.clone(),
                read_namespaces: self.read_namespaces.clone(),
                write_namespaces: self.write_namespaces.clone(),
                superuser: self.superuser
                    || self.scopes.iter().any(|s| s == scopes::SUPERUSER_SCOPE),
                tenant: self.tenant.clone(),
            }),
        }
    }
}

/// `sha256:<hex>` of a token secret: the only form in which tokens are stored or compared.
pub fn token_sha256(secret: &str) -> String {
    ContentId::of_bytes(secret.as_bytes()).into_string()
}

/// Accepts `sha256:<hex>` or bare hex in either case (CogniRelay accepts both) and returns
/// the stored form, `sha256:<lowercase hex>`.
pub fn normalize_sha256(text: &str) -> Result<String, IdentityError> {
    ContentId::parse_normalizing(text)
        .map(ContentId::into_string)
        .map_err(|_| {
            IdentityError::InvalidArgument(
                "token_sha256 must be 64 hex digits, optionally prefixed with sha256:".into(),
            )
        })
}

fn random_hex(bytes: usize) -> Result<String, IdentityError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|e| IdentityError::Randomness(e.to_string()))?;
    Ok(data_encoding::HEXLOWER.encode(&buffer))
}

/// A new secret: the prefix and 160 random bits as 40 hex digits.
pub fn generate_secret() -> Result<String, IdentityError> {
    Ok(format!("{TOKEN_PREFIX}{}", random_hex(20)?))
}

/// `tok_<YYYYMMDDTHHMMSSZ>_<8 hex>`, as CogniRelay.
pub fn generate_token_id(now: OffsetDateTime) -> Result<String, IdentityError> {
    let stamp = noema_core::time::basic_seconds(now);
    Ok(format!("tok_{stamp}_{}", random_hex(4)?))
}

/// Scopes and namespaces of a governance template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub scopes: Vec<String>,
    pub read_namespaces: Vec<String>,
    pub write_namespaces: Vec<String>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// CogniRelay's templates (`noema_core::scopes::TOKEN_TEMPLATES`). `owner` is the superuser.
pub fn template(name: &str) -> Result<Template, IdentityError> {
    let template = scopes::token_template(name).ok_or_else(|| {
        IdentityError::InvalidArgument(format!(
            "unknown template {name:?}; expected owner, collaboration_peer or replication_peer"
        ))
    })?;
    Ok(Template {
        scopes: strings(template.scopes),
        read_namespaces: strings(template.read_namespaces),
        write_namespaces: strings(template.write_namespaces),
    })
}

/// What a new token should carry, validated. Built from an issue or rotate request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    pub peer_id: String,
    pub scopes: Vec<String>,
    pub read_namespaces: Vec<String>,
    pub write_namespaces: Vec<String>,
    pub expires_at: Option<OffsetDateTime>,
    pub description: String,
    pub tenant: String,
}

/// Raw fields of an issue request, before validation.
#[derive(Debug, Clone, Default)]
pub struct TokenRequest {
    pub peer_id: String,
    pub scopes: Vec<String>,
    pub read_namespaces: Vec<String>,
    pub write_namespaces: Vec<String>,
    pub expires_at: Option<OffsetDateTime>,
    pub ttl_seconds: u64,
    pub description: String,
    pub template: String,
    /// Empty: the `peer_id`.
    pub tenant: String,
}

fn sorted_unique(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items.dedup();
    items
}

fn validate_namespaces(field: &str, namespaces: &[String]) -> Result<(), IdentityError> {
    for ns in namespaces {
        let bad = ns.is_empty()
            || ns.starts_with('/')
            || ns
                .split('/')
                .any(|seg| seg.is_empty() || seg == "." || seg == "..");
        if bad && ns != "*" {
            return Err(IdentityError::InvalidArgument(format!(
                "{field}: {ns:?} is not a namespace (relative path like memory/coordination, or *)"
            )));
        }
    }
    Ok(())
}

/// Validates a request into a spec: known scopes, sane namespaces, one expiry form.
/// Empty scopes mean every scope except `admin:peers` (never granted by default);
/// empty namespaces mean `*`.
pub fn token_spec(request: TokenRequest, now: OffsetDateTime) -> Result<TokenSpec, IdentityError> {
    if request.peer_id.trim().is_empty() {
        return Err(IdentityError::InvalidArgument("peer_id is required".into()));
    }
    let template = if request.template.is_empty() {
        None
    } else {
        Some(template(&request.template)?)
    };
    let pick = |explicit: Vec<String>, from_template: Option<Vec<String>>, default: Vec<String>| {
        if !explicit.is_empty() {
            explicit
        } else {
            from_template.unwrap_or(default)
        }
    };
    let scopes = sorted_unique(pick(
        request.scopes,
        template.as_ref().map(|t| t.scopes.clone()),
        scopes::default_scopes(),
    ));
    let unknown: Vec<&String> = scopes
        .iter()
        .filter(|s| !scopes::is_known_scope(s))
        .collect();
    if !unknown.is_empty() {
        return Err(IdentityError::InvalidArgument(format!(
            "unknown scopes {unknown:?}; known scopes: {}",
            scopes::known_scopes().join(", ")
        )));
    }
    let read_namespaces = sorted_unique(pick(
        request.read_namespaces,
        template.as_ref().map(|t| t.read_namespaces.clone()),
        vec!["*".into()],
    ));
    let write_namespaces = sorted_unique(pick(
        request.write_namespaces,
        template.as_ref().map(|t| t.write_namespaces.clone()),
        vec!["*".into()],
    ));
    validate_namespaces("read_namespaces", &read_namespaces)?;
    validate_namespaces("write_namespaces", &write_namespaces)?;
    let expires_at = match (request.expires_at, request.ttl_seconds) {
        (Some(_), ttl) if ttl > 0 => {
            return Err(IdentityError::InvalidArgument(
                "give expires_at or ttl_seconds, not both".into(),
            ));
        }
        // An instant already past gives a token born expired, as CogniRelay's issue does
        // (listed with `effective_status` expired, refused with `Token expired`).
        (Some(at), _) => Some(at),
        (None, 0) => None,
        (None, ttl) if ttl > MAX_TTL_SECONDS => {
            return Err(IdentityError::InvalidArgument(format!(
                "ttl_seconds must be between 1 and {MAX_TTL_SECONDS}"
            )));
        }
        (None, ttl) => Some(now + time::Duration::seconds(i64::try_from(ttl).unwrap_or(0))),
    };
    let tenant = if request.tenant.is_empty() {
        request.peer_id.clone()
    } else {
        validate_tenant(&request.tenant)?;
        request.tenant
    };
    Ok(TokenSpec {
        tenant,
        peer_id: request.peer_id,
        scopes,
        read_namespaces,
        write_namespaces,
        expires_at,
        description: request.description,
    })
}

fn validate_tenant(tenant: &str) -> Result<(), IdentityError> {
    if tenant.trim() != tenant || tenant.chars().count() > MAX_TENANT_LEN {
        return Err(IdentityError::InvalidArgument(format!(
            "tenant must be 1-{MAX_TENANT_LEN} characters without leading or trailing spaces"
        )));
    }
    Ok(())
}

/// Whether `issuer` may issue (or rotate) a token acting for `tenant`. A superuser may
/// name any tenant: it already passes every check, so this widens nothing. Anyone else
/// (an `identity:admin` token) only its own tenant: otherwise minting a token would be a
/// way into another tenant's data, which no scope opens.
pub fn check_tenant_grant(issuer: &Principal, tenant: &str) -> Result<(), IdentityError> {
    if issuer.superuser || issuer.tenant == tenant {
        Ok(())
    } else {
        Err(IdentityError::PermissionDenied(format!(
            "Tenant not allowed: {tenant}; only a superuser (admin:peers) issues tokens for \
             another tenant than its own ({})",
            issuer.tenant
        )))
    }
}

/// Whether `viewer` may see or revoke `token`: a superuser any, anyone else its own
/// tenant's only (a token is a key to its tenant's data; another tenant's are not its business).
pub fn within_reach(viewer: &Principal, token: &TokenRecord) -> bool {
    viewer.superuser || viewer.tenant == token.tenant
}

/// The owner token changes only through configuration.
pub const OWNER_IMMUTABLE: &str = "the owner token cannot be revoked or rotated through the API; \
     replace <data_dir>/owner.token (or auth.owner_token_sha256) and restart";

/// A token id chosen by the caller: 1-128 letters, digits, `_`, `-`, `.`, `:`.
pub fn validate_token_id(token_id: &str) -> Result<(), IdentityError> {
    let ok = !token_id.is_empty()
        && token_id.len() <= 128
        && token_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(IdentityError::InvalidArgument(
            "token_id must be 1-128 characters of letters, digits, '_', '-', '.', ':'".into(),
        ))
    }
}

/// A new active token from a validated spec, and its secret. `token_id` is the caller's
/// (checked) or, when empty, generated.
pub fn mint(
    spec: TokenSpec,
    token_id: &str,
    rotated_from: Option<String>,
    now: OffsetDateTime,
) -> Result<(String, TokenRecord), IdentityError> {
    let token_id = if token_id.is_empty() {
        generate_token_id(now)?
    } else {
        validate_token_id(token_id)?;
        token_id.to_owned()
    };
    let secret = generate_secret()?;
    let record = TokenRecord {
        token_id,
        token_sha256: token_sha256(&secret),
        peer_id: spec.peer_id,
        scopes: spec.scopes,
        read_namespaces: spec.read_namespaces,
        write_namespaces: spec.write_namespaces,
        superuser: false,
        status: TokenStatus::Active,
        issued_at: now,
        expires_at: spec.expires_at,
        revoked_at: None,
        revoked_reason: None,
        rotated_at: None,
        rotated_to_token_id: None,
        rotated_from_token_id: rotated_from,
        description: spec.description,
        tenant: spec.tenant,
    };
    Ok((secret, record))
}

/// A token list's filter: one effective status, or (empty) the active tokens, or every
/// token when `include_inactive`.
pub fn list_filter(
    status: String,
    include_inactive: bool,
) -> Result<impl Fn(&TokenRecord, OffsetDateTime) -> bool, IdentityError> {
    if !matches!(status.as_str(), "" | "active" | "revoked" | "expired") {
        return Err(IdentityError::InvalidArgument(
            "status must be active, revoked or expired".into(),
        ));
    }
    Ok(move |token: &TokenRecord, now| {
        let effective = token.effective_status(now);
        if status.is_empty() {
            include_inactive || effective == "active"
        } else {
            effective == status
        }
    })
}

/// What a rotation may change; everything left empty is inherited from the old token.
#[derive(Debug, Clone, Default)]
pub struct Rotation {
    pub scopes: Vec<String>,
    pub read_namespaces: Vec<String>,
    pub write_namespaces: Vec<String>,
    pub expires_at: Option<OffsetDateTime>,
    pub ttl_seconds: u64,
    pub description: String,
}

/// The request for the token that replaces `old`: its peer, and its scopes, namespaces,
/// expiry and description unless the rotation gives new ones.
pub fn rotation_request(old: &TokenRecord, rotation: Rotation) -> TokenRequest {
    let inherit = |given: Vec<String>, old: &Vec<String>| {
        if given.is_empty() { old.clone() } else { given }
    };
    let expires_at = if rotation.expires_at.is_none() && rotation.ttl_seconds == 0 {
        old.expires_at
    } else {
        rotation.expires_at
    };
    TokenRequest {
        peer_id: old.peer_id.clone(),
        scopes: inherit(rotation.scopes, &old.scopes),
        read_namespaces: inherit(rotation.read_namespaces, &old.read_namespaces),
        write_namespaces: inherit(rotation.write_namespaces, &old.write_namespaces),
        expires_at,
        ttl_seconds: rotation.ttl_seconds,
        description: if rotation.description.is_empty() {
            old.description.clone()
        } else {
            rotation.description
        },
        template: String::new(),
        tenant: old.tenant.clone(),
    }
}

/// Whether `old` may be rotated: neither the owner token nor a revoked one.
pub fn check_rotatable(old: &TokenRecord) -> Result<(), IdentityError> {
    if old.token_id == OWNER_TOKEN_ID {
        return Err(IdentityError::FailedPrecondition(OWNER_IMMUTABLE.into()));
    }
    if old.status == TokenStatus::Revoked {
        return Err(IdentityError::TokenRevoked {
            token_id: old.token_id.clone(),
        });
    }
    // An expired token rotates (its replacement inherits the expiry unless the rotation
    // names one), as CogniRelay's does.
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn request(peer: &str) -> TokenRequest {
        TokenRequest {
            peer_id: peer.into(),
            ..TokenRequest::default()
        }
    }

    #[test]
    fn secrets_are_prefixed_random_and_hashed() {
        let a = generate_secret().unwrap();
        let b = generate_secret().unwrap();
        assert!(a.starts_with("noema_") && a.len() == 46, "{a}");
        assert_ne!(a, b);
        assert_eq!(token_sha256(&a).len(), 71);
        assert_eq!(
            normalize_sha256(&token_sha256(&a)[7..]).unwrap(),
            token_sha256(&a)
        );
        assert!(normalize_sha256("sha256:xyz").is_err());
    }

    #[test]
    fn token_ids_follow_cognirelay() {
        let id = generate_token_id(OffsetDateTime::UNIX_EPOCH).unwrap();
        assert!(
            id.starts_with("tok_19700101T000000Z_") && id.len() == 29,
            "{id}"
        );
    }

    #[test]
    fn defaults_never_grant_the_superuser_scope() {
        let spec = token_spec(request("p"), OffsetDateTime::UNIX_EPOCH).unwrap();
        assert!(!spec.scopes.iter().any(|s| s == "admin:peers"));
        assert!(spec.scopes.iter().any(|s| s == "ledger:admin"));
        assert_eq!(spec.read_namespaces, ["*"]);
    }

    #[test]
    fn templates_fill_what_is_not_explicit() {
        let spec = token_spec(
            TokenRequest {
                template: "collaboration_peer".into(),
                ..request("peer-1")
            },
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap();
        assert_eq!(
            spec.scopes,
            ["read:files", "search", "write:messages", "write:projects"]
        );
        assert!(
            spec.write_namespaces
                .contains(&"memory/coordination/handoffs".to_owned())
        );
        assert!(
            !spec
                .read_namespaces
                .contains(&"memory/continuity".to_owned())
        );
    }

    #[test]
    fn bad_requests_say_what_to_fix() {
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(1);
        let err = token_spec(
            TokenRequest {
                scopes: vec!["ledger:delete".into()],
                ..request("p")
            },
            now,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown scopes"), "{err}");
        let err = token_spec(
            TokenRequest {
                ttl_seconds: MAX_TTL_SECONDS + 1,
                ..request("p")
            },
            now,
        )
        .unwrap_err();
        assert!(err.to_string().contains("ttl_seconds"), "{err}");
        let err = token_spec(
            TokenRequest {
                ttl_seconds: 5,
                expires_at: Some(now + time::Duration::hours(1)),
                ..request("p")
            },
            now,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
        let err = token_spec(
            TokenRequest {
                read_namespaces: vec!["../x".into()],
                ..request("p")
            },
            now,
        )
        .unwrap_err();
        assert!(err.to_string().contains("read_namespaces"), "{err}");
        assert!(token_spec(request(""), now).is_err());
        assert!(
            token_spec(
                TokenRequest {
                    template: "root".into(),
                    ..request("p")
                },
                now
            )
            .is_err()
        );
    }

    #[test]
    fn revoked_and_expired_tokens_do_not_authenticate() {
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(1);
        let mut record = TokenRecord {
            token_id: "t".into(),
            token_sha256: token_sha256("x"),
            peer_id: "p".into(),
            scopes: vec!["admin:peers".into()],
            read_namespaces: vec![],
            write_namespaces: vec![],
            superuser: false,
            status: TokenStatus::Active,
            issued_at: OffsetDateTime::UNIX_EPOCH,
            expires_at: None,
            revoked_at: None,
            revoked_reason: None,
            rotated_at: None,
            rotated_to_token_id: None,
            rotated_from_token_id: None,
            description: String::new(),
            tenant: "team".into(),
        };
        assert!(record.principal(now).unwrap().superuser);
        assert_eq!(record.principal(now).unwrap().tenant, "team");
        record.expires_at = Some(now);
        assert_eq!(
            record.principal(now).unwrap_err().to_string(),
            "token expired"
        );
        record.status = TokenStatus::Revoked;
        assert_eq!(
            record.principal(now).unwrap_err().to_string(),
            "token revoked"
        );
    }

    #[test]
    fn rotation_inherits_what_it_does_not_change() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let spec = token_spec(request("agent:a"), now).unwrap();
        let (_, mut old) = mint(spec, "old", None, now).unwrap();
        old.expires_at = Some(now + time::Duration::days(1));
        let kept = rotation_request(&old, Rotation::default());
        assert_eq!(kept.peer_id, "agent:a");
        assert_eq!(kept.scopes, old.scopes);
        assert_eq!(kept.expires_at, old.expires_at);
        let changed = rotation_request(
            &old,
            Rotation {
                scopes: vec!["ledger:read".into()],
                ttl_seconds: 60,
                description: "new".into(),
                ..Rotation::default()
            },
        );
        assert_eq!(changed.scopes, ["ledger:read"]);
        assert_eq!((changed.expires_at, changed.ttl_seconds), (None, 60));
        assert_eq!(changed.description, "new");
        assert!(validate_token_id("tok_1:a.b-c").is_ok());
        assert!(validate_token_id("no spaces").is_err());
    }

    #[test]
    fn unrevoked_non_owner_tokens_rotate_and_lists_filter_by_status() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let spec = token_spec(request("agent:a"), now).unwrap();
        let (_, mut token) = mint(spec, "", None, now).unwrap();
        assert!(check_rotatable(&token).is_ok());
        token.expires_at = Some(now - time::Duration::seconds(1));
        assert_eq!(token.effective_status(now), "expired");
        assert!(check_rotatable(&token).is_ok());
        token.expires_at = None;
        let active = list_filter(String::new(), false).unwrap();
        assert!(active(&token, now));
        token.status = TokenStatus::Revoked;
        let err = check_rotatable(&token).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("is revoked and cannot be rotated")
        );
        assert!(!active(&token, now));
        assert!(list_filter(String::new(), true).unwrap()(&token, now));
        assert!(list_filter("revoked".into(), false).unwrap()(&token, now));
        assert!(list_filter("gone".into(), false).is_err());
        token.token_id = OWNER_TOKEN_ID.into();
        assert_eq!(
            check_rotatable(&token).unwrap_err().to_string(),
            OWNER_IMMUTABLE
        );
    }

    #[test]
    fn the_tenant_defaults_to_the_peer_and_is_kept_by_rotation() {
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(
            token_spec(request("agent:a"), now).unwrap().tenant,
            "agent:a"
        );
        let spec = token_spec(
            TokenRequest {
                tenant: "team:blue".into(),
                ..request("agent:a")
            },
            now,
        )
        .unwrap();
        assert_eq!(spec.tenant, "team:blue");
        let (_, record) = mint(spec, "", None, now).unwrap();
        let again = token_spec(rotation_request(&record, Rotation::default()), now).unwrap();
        assert_eq!(again.tenant, "team:blue");
        for bad in [" team", &"t".repeat(MAX_TENANT_LEN + 1)] {
            let err = token_spec(
                TokenRequest {
                    tenant: bad.to_owned(),
                    ..request("agent:a")
                },
                now,
            )
            .unwrap_err();
            assert!(err.to_string().contains("tenant"), "{err}");
        }
    }

    #[test]
    fn only_a_superuser_grants_another_tenant() {
        let issuer = |superuser: bool| Principal {
            token_id: "t".into(),
            peer_id: "agent:a".into(),
            scopes: vec!["identity:admin".into()],
            read_namespaces: vec![],
            write_namespaces: vec![],
            superuser,
            tenant: "team:blue".into(),
        };
        assert!(check_tenant_grant(&issuer(false), "team:blue").is_ok());
        let err = check_tenant_grant(&issuer(false), "team:red").unwrap_err();
        assert!(matches!(err, IdentityError::PermissionDenied(_)), "{err}");
        assert!(
            err.to_string().starts_with("Tenant not allowed: team:red"),
            "{err}"
        );
        assert!(check_tenant_grant(&issuer(true), "team:red").is_ok());
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 2048,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]

        /// The OpenAPI document's namespace pattern accepts exactly what the service does.
        #[test]
        fn the_documented_namespace_pattern_is_the_rule(namespace in "[a./*]{0,7}") {
            let pattern = regex::Regex::new(noema_core::scopes::NAMESPACE_PATTERN).unwrap();
            proptest::prop_assert_eq!(
                pattern.is_match(&namespace),
                validate_namespaces("read_namespaces", std::slice::from_ref(&namespace)).is_ok(),
                "{:?}",
                namespace
            );
        }
    }
}

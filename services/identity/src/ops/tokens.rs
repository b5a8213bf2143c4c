//! API tokens: issue, list, revoke, rotate. Each takes the request's time from the caller,
//! which renders the answer (a token's effective status) at that same instant.

use noema_core::scopes::Principal;
use time::OffsetDateTime;

use super::Identity;
use crate::domain::token::{
    self, OWNER_IMMUTABLE, OWNER_TOKEN_ID, Rotation, TokenRecord, TokenRequest,
};
use crate::error::IdentityError;
use crate::store::RevokeSelector;

/// Which tokens to revoke: the first field given of `token_id`, `token_sha256`, `peer_id`.
#[derive(Debug, Clone, Default)]
pub struct RevokeToken {
    pub token_id: String,
    pub token_sha256: String,
    pub peer_id: String,
    pub reason: String,
}

/// What a revocation did: the tokens it matched, how many it revoked (the others were
/// inactive already) and the matched tokens as they are now.
#[derive(Debug, Clone)]
pub struct Revocation {
    pub matched: usize,
    pub revoked: usize,
    pub tokens: Vec<TokenRecord>,
}

/// Which token to rotate (`token_id`, else `token_sha256`) and what the new one changes.
#[derive(Debug)]
pub struct RotateToken {
    pub token_id: String,
    pub token_sha256: String,
    pub new_token_id: String,
    pub reason: String,
    /// Checked when the rotation reaches it, after the old token is found, as it always was.
    pub expires_at: Result<Option<OffsetDateTime>, IdentityError>,
    pub changes: Rotation,
}

impl Identity {
    /// Issues a token for `issuer`, which must be allowed to act for the new token's
    /// tenant; answers its secret (shown once) and its record.
    pub async fn issue_token(
        &self,
        issuer: &Principal,
        request: TokenRequest,
        token_id: &str,
        now: OffsetDateTime,
    ) -> Result<(String, TokenRecord), IdentityError> {
        let spec = token::token_spec(request, now)?;
        token::check_tenant_grant(issuer, &spec.tenant)?;
        let (secret, record) = token::mint(spec, token_id, None, now)?;
        self.store
            .insert_token(&record, &issuer.peer_id, now)
            .await?;
        Ok((secret, record))
    }

    /// Tokens newest first, optionally of one peer, filtered by effective status.
    pub async fn list_tokens(
        &self,
        viewer: &Principal,
        peer_id: &str,
        status: String,
        include_inactive: bool,
        now: OffsetDateTime,
    ) -> Result<Vec<TokenRecord>, IdentityError> {
        let listed = token::list_filter(status, include_inactive)?;
        let peer = (!peer_id.is_empty()).then_some(peer_id);
        Ok(self
            .store
            .list_tokens(peer)
            .await?
            .into_iter()
            .filter(|t| token::within_reach(viewer, t) && listed(t, now))
            .collect())
    }

    pub async fn revoke_token(
        &self,
        actor: &Principal,
        request: RevokeToken,
        now: OffsetDateTime,
    ) -> Result<Revocation, IdentityError> {
        let selector = if !request.token_id.is_empty() {
            RevokeSelector::TokenId(request.token_id)
        } else if !request.token_sha256.is_empty() {
            RevokeSelector::Sha256(token::normalize_sha256(&request.token_sha256)?)
        } else if !request.peer_id.is_empty() {
            RevokeSelector::Peer(request.peer_id)
        } else {
            return Err(IdentityError::InvalidArgument(
                "give token_id, token_sha256 or peer_id".into(),
            ));
        };
        if selector == RevokeSelector::TokenId(OWNER_TOKEN_ID.into()) {
            return Err(IdentityError::FailedPrecondition(OWNER_IMMUTABLE.into()));
        }
        self.check_revocable(actor, &selector).await?;
        // No reason given is none recorded (CogniRelay's `revoked_reason: null`).
        let (matched, revoked) = self
            .store
            .revoke(&selector, &request.reason, &actor.peer_id, now)
            .await?;
        if matched.is_empty() {
            return Err(IdentityError::NotFound("no token matched".into()));
        }
        let tokens = match &selector {
            RevokeSelector::Peer(peer) => self.store.list_tokens(Some(peer)).await?,
            _ => {
                let mut now_stored = Vec::new();
                for token in &matched {
                    if let Some(t) = self.store.token_by_id(&token.token_id).await? {
                        now_stored.push(t);
                    }
                }
                now_stored
            }
        };
        Ok(Revocation {
            matched: matched.len(),
            revoked: revoked.len(),
            tokens,
        })
    }

    /// Replaces an active token by a new one (keeping its tenant, which `issuer` must be
    /// allowed to act for); answers the new secret, the old token as it is now (revoked)
    /// and the new token.
    pub async fn rotate_token(
        &self,
        issuer: &Principal,
        request: RotateToken,
        now: OffsetDateTime,
    ) -> Result<(String, TokenRecord, TokenRecord), IdentityError> {
        let actor = issuer.peer_id.as_str();
        let old = self
            .find_token(&request.token_id, &request.token_sha256)
            .await?;
        token::check_rotatable(&old)?;
        token::check_tenant_grant(issuer, &old.tenant)?;
        let changes = Rotation {
            expires_at: request.expires_at?,
            ..request.changes
        };
        let spec = token::token_spec(token::rotation_request(&old, changes), now)?;
        let (secret, new) =
            token::mint(spec, &request.new_token_id, Some(old.token_id.clone()), now)?;
        let reason = if request.reason.is_empty() {
            format!("rotated_to:{}", new.token_id)
        } else {
            request.reason
        };
        self.store
            .rotate_token(&old, &new, &reason, actor, now)
            .await?;
        let from = self.store.token_by_id(&old.token_id).await?.unwrap_or(old);
        Ok((secret, from, new))
    }

    /// A caller that is not a superuser revokes only its own tenant's tokens: one token of
    /// another tenant is "no token matched" (its existence is not told), a peer with tokens
    /// in another tenant is refused whole rather than revoked in part.
    async fn check_revocable(
        &self,
        actor: &Principal,
        selector: &RevokeSelector,
    ) -> Result<(), IdentityError> {
        if actor.superuser {
            return Ok(());
        }
        let one = match selector {
            RevokeSelector::TokenId(id) => self.store.token_by_id(id).await?,
            RevokeSelector::Sha256(sha) => self.store.token_by_sha256(sha).await?,
            RevokeSelector::Peer(peer) => {
                let tokens = self.store.list_tokens(Some(peer)).await?;
                if let Some(foreign) = tokens.iter().find(|t| !token::within_reach(actor, t)) {
                    return token::check_tenant_grant(actor, &foreign.tenant);
                }
                return Ok(());
            }
        };
        match one {
            Some(t) if !token::within_reach(actor, &t) => {
                Err(IdentityError::NotFound("no token matched".into()))
            }
            _ => Ok(()),
        }
    }

    async fn find_token(&self, token_id: &str, sha256: &str) -> Result<TokenRecord, IdentityError> {
        let found = if !token_id.is_empty() {
            self.store.token_by_id(token_id).await?
        } else if !sha256.is_empty() {
            self.store
                .token_by_sha256(&token::normalize_sha256(sha256)?)
                .await?
        } else {
            return Err(IdentityError::InvalidArgument(
                "give token_id or token_sha256".into(),
            ));
        };
        found.ok_or_else(|| IdentityError::NotFound("no token matched".into()))
    }
}

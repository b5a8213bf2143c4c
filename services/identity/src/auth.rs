//! Token resolution straight from the identity store, for the process that hosts the
//! identity service (every other process asks it over gRPC).

use noema_core::scopes::Principal;
use noema_runtime::auth::{AuthError, Authenticator};
use time::OffsetDateTime;

use crate::domain::token;
use crate::error::IdentityError;
use crate::store::IdentityStore;

pub struct LocalAuthenticator {
    store: IdentityStore,
}

impl LocalAuthenticator {
    pub fn new(store: IdentityStore) -> Self {
        LocalAuthenticator { store }
    }
}

#[async_trait::async_trait]
impl Authenticator for LocalAuthenticator {
    async fn authenticate(&self, secret: &str) -> Result<Principal, AuthError> {
        let record = self
            .store
            .token_by_sha256(&token::token_sha256(secret))
            .await
            .map_err(|e| AuthError::Unavailable(noema_core::ErrorChain(&e).to_string()))?
            .ok_or_else(|| AuthError::Rejected("invalid token".into()))?;
        record
            .principal(OffsetDateTime::now_utc())
            .map_err(|e| match e {
                IdentityError::Unauthenticated(reason) => AuthError::Rejected(reason),
                other => AuthError::Unavailable(other.to_string()),
            })
    }
}

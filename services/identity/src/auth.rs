//! Token resolution straight from the identity store, for the process that hosts the
//! identity service (every other process asks it over gRPC).
//!
//! Token records are cached by hash so that a request costs no database read. Every token
//! write in this process bumps [`TOKEN_WRITES`] after it commits, and a cached record read
//! before the latest bump is read again: a revocation here is effective for the very next
//! request. A revocation by another identity replica (Postgres) is seen within the cache's
//! time to live, the same bound `auth.cache_ttl_secs` gives remote authenticators.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use noema_core::scopes::{Principal, TokenRejection};
use noema_runtime::auth::{AuthError, Authenticator};
use time::OffsetDateTime;

use crate::domain::token::{self, TokenRecord};
use crate::store::IdentityStore;

/// Token writes committed by this process. Process-wide rather than per database because
/// the stores that write tokens and the authenticator are separate values over one pool;
/// a bump from an unrelated database only costs one extra read.
static TOKEN_WRITES: AtomicU64 = AtomicU64::new(0);

/// Past this many cached tokens, stale entries are swept on insert.
const CACHE_SWEEP_AT: usize = 10_000;

/// A token record, the write count when it was read, and when.
type Cached = (TokenRecord, u64, Instant);

pub struct LocalAuthenticator {
    store: IdentityStore,
    ttl: Duration,
    cache: Mutex<HashMap<String, Cached>>,
}

impl LocalAuthenticator {
    pub fn new(store: IdentityStore, ttl: Duration) -> Self {
        LocalAuthenticator {
            store,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, sha256: &str, writes: u64) -> Option<TokenRecord> {
        let cache = self.cache.lock().ok()?;
        let (record, read_at_writes, at) = cache.get(sha256)?;
        (*read_at_writes == writes && at.elapsed() < self.ttl).then(|| record.clone())
    }

    fn remember(&self, sha256: String, record: TokenRecord, writes: u64) {
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_SWEEP_AT {
                let ttl = self.ttl;
                cache.retain(|_, (_, w, at)| *w == writes && at.elapsed() < ttl);
            }
            cache.insert(sha256, (record, writes, Instant::now()));
        }
    }

    async fn record(&self, sha256: String) -> Result<TokenRecord, AuthError> {
        // Read the count before the row: a write that lands after the read bumps it later,
        // so the entry is already stale when the next request looks.
        let writes = TOKEN_WRITES.load(Ordering::Acquire);
        if let Some(record) = self.cached(&sha256, writes) {
            return Ok(record);
        }
        let record = self
            .store
            .token_by_sha256(&sha256)
            .await
            .map_err(|e| AuthError::Unavailable(noema_core::ErrorChain(&e).to_string()))?
            .ok_or(AuthError::Rejected(TokenRejection::Invalid))?;
        self.remember(sha256, record.clone(), writes);
        Ok(record)
    }
}

/// Called by the store after every committed token write.
pub(crate) fn token_written() {
    TOKEN_WRITES.fetch_add(1, Ordering::Release);
}

#[async_trait::async_trait]
impl Authenticator for LocalAuthenticator {
    async fn authenticate(&self, secret: &str) -> Result<Principal, AuthError> {
        let record = self.record(token::token_sha256(secret)).await?;
        // Expiry and status are judged on every request, cached or not.
        record
            .principal(OffsetDateTime::now_utc())
            .map_err(AuthError::Rejected)
    }
}

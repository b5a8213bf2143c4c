//! An object store wrapper that injects faults, for durability tests.
//!
//! Faults are armed at run time from the test while the service under test holds the store:
//!
//! ```
//! # async fn demo(inner: std::sync::Arc<dyn noema_store::ObjectStore>) {
//! use std::sync::Arc;
//! use noema_store::object::{FaultyObjectStore, ObjectStore};
//!
//! let faulty = Arc::new(FaultyObjectStore::new(inner));
//! let store: Arc<dyn ObjectStore> = faulty.clone();
//! // … hand `store` to the service …
//! faulty.fail_next_puts(1); // the next put fails before writing anything
//! faulty.lose_next_put_acks(1); // the next put stores the bytes, then reports failure
//! # drop(store);
//! # }
//! ```
//!
//! A count of [`STICKY`] never runs down: the fault stays until [`FaultyObjectStore::reset`].
//! Injected failures are [`ObjectError::Unavailable`] with an [`InjectedFault`] source.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;

use super::{ListPage, ObjectBody, ObjectError, ObjectMeta, ObjectStore, PutOutcome};

/// A fault count that does not run down.
pub const STICKY: u32 = u32::MAX;

/// The source of every injected error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("injected fault: {0}")]
pub struct InjectedFault(pub &'static str);

#[derive(Debug, Default)]
struct Faults {
    fail_puts: AtomicU32,
    lose_put_acks: AtomicU32,
    fail_gets: AtomicU32,
    fail_heads: AtomicU32,
    latency_nanos: AtomicU64,
    injected: AtomicU64,
}

impl Faults {
    /// Consume one armed fault from `counter`; `true` if one was armed.
    fn take(&self, counter: &AtomicU32) -> bool {
        let taken = counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                STICKY => Some(n),
                n => n.checked_sub(1),
            })
            .is_ok();
        if taken {
            self.injected.fetch_add(1, Ordering::SeqCst);
        }
        taken
    }
}

/// Wraps another store and fails or delays its calls on demand.
#[derive(Debug, Clone)]
pub struct FaultyObjectStore {
    inner: Arc<dyn ObjectStore>,
    faults: Arc<Faults>,
}

impl FaultyObjectStore {
    /// Wrap `inner` with no fault armed.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            faults: Arc::new(Faults::default()),
        }
    }

    /// The wrapped store (to look behind the faults, e.g. to see what a "failed" put stored).
    pub fn inner(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// The next `n` puts fail with `Unavailable` without writing anything.
    pub fn fail_next_puts(&self, n: u32) {
        self.faults.fail_puts.store(n, Ordering::SeqCst);
    }

    /// The next `n` puts store the bytes and then fail with `Unavailable`, as when the
    /// acknowledgement is lost on the way back.
    pub fn lose_next_put_acks(&self, n: u32) {
        self.faults.lose_put_acks.store(n, Ordering::SeqCst);
    }

    /// The next `n` gets fail with `Unavailable`.
    pub fn fail_next_gets(&self, n: u32) {
        self.faults.fail_gets.store(n, Ordering::SeqCst);
    }

    /// The next `n` heads fail with `Unavailable`.
    pub fn fail_next_heads(&self, n: u32) {
        self.faults.fail_heads.store(n, Ordering::SeqCst);
    }

    /// Delay every call by `latency` before it reaches the wrapped store.
    pub fn set_latency(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.faults.latency_nanos.store(nanos, Ordering::SeqCst);
    }

    /// Disarm every fault and remove the latency.
    pub fn reset(&self) {
        for counter in [
            &self.faults.fail_puts,
            &self.faults.lose_put_acks,
            &self.faults.fail_gets,
            &self.faults.fail_heads,
        ] {
            counter.store(0, Ordering::SeqCst);
        }
        self.faults.latency_nanos.store(0, Ordering::SeqCst);
    }

    /// How many faults were injected so far.
    pub fn injected_faults(&self) -> u64 {
        self.faults.injected.load(Ordering::SeqCst)
    }

    async fn delay(&self) {
        let nanos = self.faults.latency_nanos.load(Ordering::SeqCst);
        if nanos > 0 {
            tokio::time::sleep(Duration::from_nanos(nanos)).await;
        }
    }

    fn injected(op: &'static str, key: &str, what: &'static str) -> ObjectError {
        tracing::debug!(op, key, what, "injecting fault");
        ObjectError::unavailable(op, key, InjectedFault(what))
    }
}

#[async_trait]
impl ObjectStore for FaultyObjectStore {
    async fn put(&self, key: &str, body: Bytes, content_type: &str) -> Result<(), ObjectError> {
        self.delay().await;
        if self.faults.take(&self.faults.fail_puts) {
            return Err(Self::injected("put", key, "put failed before writing"));
        }
        self.inner.put(key, body, content_type).await?;
        if self.faults.take(&self.faults.lose_put_acks) {
            return Err(Self::injected(
                "put",
                key,
                "put stored, acknowledgement lost",
            ));
        }
        Ok(())
    }

    /// Put faults apply here too: a conditional put is a put.
    async fn put_if_absent(
        &self,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError> {
        self.delay().await;
        if self.faults.take(&self.faults.fail_puts) {
            return Err(Self::injected("put", key, "put failed before writing"));
        }
        let outcome = self.inner.put_if_absent(key, body, content_type).await?;
        if self.faults.take(&self.faults.lose_put_acks) {
            return Err(Self::injected(
                "put",
                key,
                "put stored, acknowledgement lost",
            ));
        }
        Ok(outcome)
    }

    async fn get(&self, key: &str) -> Result<ObjectBody, ObjectError> {
        self.delay().await;
        if self.faults.take(&self.faults.fail_gets) {
            return Err(Self::injected("get", key, "get failed"));
        }
        self.inner.get(key).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, ObjectError> {
        self.delay().await;
        if self.faults.take(&self.faults.fail_heads) {
            return Err(Self::injected("head", key, "head failed"));
        }
        self.inner.head(key).await
    }

    async fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ListPage, ObjectError> {
        self.delay().await;
        self.inner.list(prefix, start_after, limit).await
    }

    async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        self.delay().await;
        self.inner.delete(key).await
    }

    async fn check(&self) -> Result<(), ObjectError> {
        self.delay().await;
        self.inner.check().await
    }
}

//! The one retry policy for object-store writes.
//!
//! Exactly one layer retries a write, and it is this one, above the store: a caller puts
//! through [`WriteRetry::put`], and the stores themselves send each put once. The S3 store
//! switches the AWS SDK's own retries off for its puts; with both layers on, the SDK's
//! attempts (three by default) nested inside these and one write could cost up to nine
//! requests and the sum of both backoffs. This layer rather than the SDK's because:
//! - it treats every backend alike: `pack://`, `file://` and `s3://` all report a failure
//!   that may pass as [`ObjectError::Unavailable`], and only those are retried;
//! - the fault-injecting store sits below it, so the durability tests exercise the policy
//!   that production runs, attempt for attempt;
//! - the caller knows a repeated write is safe: a put replaces the object whole and the
//!   ledger's keys are content-addressed, so a retry after a lost acknowledgement stores the
//!   same bytes again.
//!
//! Reads are not covered here: an S3 read keeps the SDK's standard retries, and a failed
//! local read is not one that waiting would mend.

use std::time::Duration;

use bytes::Bytes;

use super::{ObjectError, ObjectStore, PutOutcome};

/// How often, and how far apart, a write is attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRetry {
    /// Attempts in all, the first included (at least one is made).
    pub attempts: u32,
    /// Pause before the second attempt; each later pause doubles, plus up to 25% jitter so
    /// that writers failing together do not retry together.
    pub first_delay: Duration,
}

impl WriteRetry {
    /// The policy every object-store write uses: three attempts, about 200 ms and then
    /// 400 ms apart, so a blip of well under a second is ridden out while a store that is
    /// down fails the request quickly enough for its caller to retry or report it.
    pub const STANDARD: WriteRetry = WriteRetry {
        attempts: 3,
        first_delay: Duration::from_millis(200),
    };

    /// Put `body` under `key`, attempting again while the store reports itself
    /// unavailable. Returns the last error when every attempt failed, or the first error
    /// that retrying cannot mend.
    pub async fn put(
        &self,
        store: &dyn ObjectStore,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<(), ObjectError> {
        self.attempt(key, || store.put(key, body.clone(), content_type))
            .await
    }

    /// [`ObjectStore::put_if_absent`] under the same policy. An attempt after one whose
    /// acknowledgement was lost finds the object there and answers `Exists`: the caller
    /// tells its own bytes from another's (the ledger compares their hash).
    pub async fn put_if_absent(
        &self,
        store: &dyn ObjectStore,
        key: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<PutOutcome, ObjectError> {
        self.attempt(key, || store.put_if_absent(key, body.clone(), content_type))
            .await
    }

    async fn attempt<T, F, Fut>(&self, key: &str, mut write: F) -> Result<T, ObjectError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ObjectError>>,
    {
        let mut attempt = 1;
        loop {
            match write().await {
                Ok(done) => return Ok(done),
                Err(err) if err.is_retryable() && attempt < self.attempts => {
                    tracing::warn!(attempt, key, error = %noema_core::ErrorChain(&err), "object store write failed; retrying");
                    tokio::time::sleep(self.pause_after(attempt)).await;
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// The pause after failed attempt `attempt` (1-based).
    fn pause_after(&self, attempt: u32) -> Duration {
        let base = self
            .first_delay
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        // Jitter from the clock's nanoseconds: spread enough, and no random source needed.
        let nanos = time::OffsetDateTime::now_utc().nanosecond();
        base + base.mul_f64(f64::from(nanos % 250) / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_with_at_most_a_quarter_of_jitter() {
        let policy = WriteRetry::STANDARD;
        for (attempt, base_ms) in [(1, 200), (2, 400), (3, 800)] {
            let pause = policy.pause_after(attempt);
            let base = Duration::from_millis(base_ms);
            assert!(
                pause >= base && pause < base + base / 4,
                "{attempt}: {pause:?}"
            );
        }
    }
}

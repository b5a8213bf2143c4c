//! `GET /v1/metrics`: the caller's tenant's deliveries, audit entries and verification
//! failures, counted as the original counts them, with its scope and namespace checks.

use super::{Continuity, now};
use crate::domain::access::{Caller, INDEX};
use crate::domain::messages::{self, DELIVERY_STATE_PATH};
use crate::domain::metrics::{AUDIT_LOG_PATH, AUDIT_WINDOW, Failures, Thresholds, metrics_body};
use crate::error::Error;

impl Continuity {
    /// `GET /v1/metrics`.
    pub async fn metrics(&self, caller: &Caller) -> Result<Vec<u8>, Error> {
        caller.require(INDEX)?;
        caller.require_read_path(DELIVERY_STATE_PATH)?;
        caller.require_read_path(AUDIT_LOG_PATH)?;
        let at = now();
        let store = self.store();
        let deliveries = store
            .delivery_counts(&caller.tenant, &messages::passed_deadline(at))
            .await?;
        let audit = store.audit_counts(&caller.tenant, AUDIT_WINDOW).await?;
        let window = self.failure_window();
        let failures = Failures {
            recent: self.failures.count_tenant(&caller.tenant, at, window),
            window_seconds: window.whole_seconds(),
        };
        let thresholds = Thresholds {
            backlog: self.options.backlog_alarm_threshold.max(1),
            verification: self.options.verification_alarm_threshold.max(1),
        };
        Ok(metrics_body(at, deliveries, audit, failures, thresholds))
    }
}

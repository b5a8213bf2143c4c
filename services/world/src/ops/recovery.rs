//! Attempts whose process stopped: their lease expires (nobody renews it), and they are
//! marked `interrupted` with their running source invocations and LLM calls — by the next
//! attempt on the world, by this sweep at start-up, and by this sweep every little while,
//! so a crashed attempt shows as `interrupted` without waiting for the world's next turn.

use std::sync::Weak;
use std::time::Duration;

use super::{World, now};
use crate::error::WorldError;

impl World {
    /// Marks every stale attempt interrupted; returns how many.
    pub async fn recover(&self) -> Result<usize, WorldError> {
        let interrupted = self.store.interrupt_stale_attempts(now()).await?;
        for attempt in &interrupted {
            tracing::warn!(%attempt, "interrupted an attempt whose process stopped");
        }
        Ok(interrupted.len())
    }

    /// How often the sweep runs: a third of the lease, at most every 10 s.
    pub fn sweep_interval(&self) -> Duration {
        (self.options.lease_ttl() / 3).min(Duration::from_secs(10))
    }
}

/// Sweeps until the world service is gone.
pub fn spawn_sweeper(world: Weak<World>, interval: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let Some(world) = world.upgrade() else {
                return;
            };
            if let Err(err) = world.recover().await {
                tracing::warn!(error = %err, "sweeping stale attempts failed");
            }
        }
    })
}

//! The rescuer: returns jobs whose lease ran out to `pending` (or `failed` when their attempts
//! are spent), so that a crashed or stalled worker loses no job.

use std::time::Duration;

use crate::error::Result;
use crate::job_id::JobId;
use crate::maintenance::Service;
use crate::store;
use crate::store::Store;

/// How many jobs one rescue statement takes at most.
pub(crate) const RESCUE_BATCH: i64 = 1000;

/// The rescuer's settings.
#[derive(Debug, Clone)]
pub(crate) struct RescuerConfig {
    pub(crate) interval: Duration,
}

/// Rescues every job whose lease has expired, a batch at a time.
pub(crate) async fn rescue(store: &Store) -> Result<Vec<JobId>> {
    let mut rescued = Vec::new();
    loop {
        let batch = store::lease::rescue(store, RESCUE_BATCH).await?;
        let done = (batch.len() as i64) < RESCUE_BATCH;
        rescued.extend(batch);
        if done {
            return Ok(rescued);
        }
    }
}

/// The rescuer as a periodic service.
#[derive(Debug)]
pub(crate) struct Rescuer {
    pub(crate) store: Store,
    pub(crate) config: RescuerConfig,
}

impl Service for Rescuer {
    const NAME: &'static str = "rescuer";

    fn interval(&self) -> Duration {
        self.config.interval
    }

    async fn run_once(&mut self) -> Result<()> {
        let ids = rescue(&self.store).await?;
        if !ids.is_empty() {
            tracing::warn!(count = ids.len(), jobs = ?ids, "rescued jobs whose lease expired");
        }
        Ok(())
    }
}

//! The rescuer: returns jobs whose lease ran out to `pending` (or `failed` when their attempts
//! are spent), so that a crashed or stalled worker loses no job.

use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

use crate::error::Result;
use crate::job_id::JobId;
use crate::store;

/// How often each worker process looks for expired leases: every 15 s. While any worker runs,
/// a crashed worker's jobs are back in `pending` within this long after their lease ran out.
///
/// ```
/// use std::time::Duration;
///
/// assert_eq!(pgq_core::DEFAULT_RESCUE_INTERVAL, Duration::from_secs(15));
/// ```
pub const DEFAULT_RESCUE_INTERVAL: Duration = Duration::from_secs(15);
/// How many jobs one rescue statement takes at most.
pub(crate) const RESCUE_BATCH: i64 = 1000;

#[derive(Debug, Clone)]
pub(crate) struct RescuerConfig {
    pub(crate) interval: Duration,
}

/// Rescues every job whose lease has expired, a batch at a time.
pub(crate) async fn run_once(pool: &PgPool) -> Result<Vec<JobId>> {
    let mut rescued = Vec::new();
    loop {
        let batch = store::lease::rescue(pool, RESCUE_BATCH).await?;
        let done = (batch.len() as i64) < RESCUE_BATCH;
        rescued.extend(batch);
        if done {
            return Ok(rescued);
        }
    }
}

pub(crate) async fn run(pool: PgPool, config: RescuerConfig, mut stopping: watch::Receiver<bool>) {
    loop {
        match run_once(&pool).await {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(count = ids.len(), jobs = ?ids, "rescued jobs whose lease expired");
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "rescue failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(config.interval) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
    }
}

//! The rescuer: returns jobs whose lease ran out to `pending` (or `failed` when their attempts
//! are spent), so that a crashed or stalled worker loses no job.

use std::collections::HashMap;
use std::time::Duration;

use crate::defaults;
use crate::error::Result;
use crate::job_id::JobId;
use crate::maintenance::Service;
use crate::metric;
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
pub(crate) async fn rescue(store: &Store) -> Result<Vec<(JobId, String)>> {
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
        let orphaned = store::workers::release_dead(&self.store).await?;
        if !orphaned.is_empty() {
            let ids: Vec<JobId> = orphaned.iter().map(|(id, _)| *id).collect();
            tracing::warn!(count = ids.len(), jobs = ?ids, "took back the jobs of dead workers");
            count_by_queue(orphaned, true);
        }
        let rescued = rescue(&self.store).await?;
        if !rescued.is_empty() {
            let ids: Vec<JobId> = rescued.iter().map(|(id, _)| *id).collect();
            tracing::warn!(count = ids.len(), jobs = ?ids, "rescued jobs whose lease expired");
            count_by_queue(rescued, false);
        }
        if metric::ENABLED {
            // The queues' depth, as the database knows it, at the rescuer's pace.
            let stats = store::maintenance::stats(&self.store, defaults::STATS_WINDOW).await?;
            for queue in stats {
                let counts = [
                    ("due", queue.due),
                    ("scheduled", queue.scheduled),
                    ("claimed", queue.claimed),
                    ("running", queue.running),
                ];
                metric::queue_depth(
                    &queue.queue,
                    &counts,
                    queue.oldest_due_age.unwrap_or_default(),
                );
            }
        }
        Ok(())
    }
}

fn count_by_queue(jobs: Vec<(JobId, String)>, of_dead_worker: bool) {
    if metric::ENABLED {
        let mut queues: HashMap<String, u64> = HashMap::new();
        for (_, queue) in jobs {
            *queues.entry(queue).or_default() += 1;
        }
        for (queue, count) in queues {
            metric::rescued(&queue, count, of_dead_worker);
        }
    }
}

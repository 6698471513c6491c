//! The rescuer: returns jobs whose lease ran out to `pending` (or `failed` when their attempts
//! are spent), so that a crashed or stalled worker loses no job.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::job_id::JobId;
use crate::maintenance::Service;
use crate::maintenance::heartbeat_streak::HeartbeatStreak;
use crate::metric;
use crate::store;
use crate::store::Store;
use crate::store::maintenance::QueueDepth;

/// How many jobs one rescue statement takes at most.
pub(crate) const RESCUE_BATCH: i64 = 1000;

/// The rescuer's settings.
#[derive(Debug, Clone)]
pub(crate) struct RescuerConfig {
    pub(crate) interval: Duration,
}

/// Rescues every job whose lease has expired, a batch at a time, handing each committed batch
/// to `rescued`: a batch that fails leaves the ones before it rescued, and reported.
pub(crate) async fn rescue(
    store: &Store,
    mut rescued: impl FnMut(Vec<(JobId, String)>),
) -> Result<()> {
    loop {
        let batch = store::lease::rescue(store, RESCUE_BATCH).await?;
        let done = (batch.len() as i64) < RESCUE_BATCH;
        if !batch.is_empty() {
            rescued(batch);
        }
        if done {
            return Ok(());
        }
    }
}

/// Who the rescuer works for, when it judges other workers dead.
#[derive(Debug)]
pub(crate) struct Judge {
    pub(crate) worker_id: String,
    pub(crate) streak: Arc<HeartbeatStreak>,
}

/// The rescuer as a periodic service.
#[derive(Debug)]
pub(crate) struct Rescuer {
    store: Store,
    config: RescuerConfig,
    judge: Judge,
    /// The worker's own queues, whose depth is reported even when they are empty.
    own: Vec<String>,
    /// The queues whose depth the last step reported: one that has emptied since is reported
    /// empty.
    reported: HashSet<String>,
}

impl Rescuer {
    pub(crate) fn new(store: Store, config: RescuerConfig, judge: Judge, own: Vec<String>) -> Self {
        Self {
            store,
            config,
            judge,
            reported: own.iter().cloned().collect(),
            own,
        }
    }

    /// Exports every queue's depth, as the database knows it: from the jobs pending and held
    /// only, so that the step's cost does not grow with the jobs finished.
    async fn report_depth(&mut self) -> Result<()> {
        let depths = store::maintenance::depth(&self.store).await?;
        let mut now: HashSet<String> = depths.iter().map(|depth| depth.queue.clone()).collect();
        let emptied = self
            .reported
            .difference(&now)
            .map(|queue| QueueDepth {
                queue: queue.clone(),
                ..QueueDepth::default()
            })
            .collect::<Vec<_>>();
        for depth in depths.iter().chain(&emptied) {
            let counts = [
                ("due", depth.due),
                ("scheduled", depth.scheduled),
                ("claimed", depth.claimed),
                ("running", depth.running),
            ];
            metric::queue_depth(
                &depth.queue,
                &counts,
                depth.oldest_due_age.unwrap_or_default(),
            );
        }
        now.extend(self.own.iter().cloned());
        self.reported = now;
        Ok(())
    }
}

impl Service for Rescuer {
    const NAME: &'static str = "rescuer";

    fn interval(&self) -> Duration {
        self.config.interval
    }

    async fn run_once(&mut self) -> Result<()> {
        // The two steps stand apart: one failing (a role that lost its grant on a table added
        // by a later migration) must not keep expired leases from being rescued.
        // Only workers whose registrations live no longer than this worker's heartbeats have
        // landed: after an outage, every registration may have expired with its own.
        let released = match self.judge.streak.lasted() {
            Some(lasted) => {
                store::workers::release_dead(&self.store, &self.judge.worker_id, lasted).await
            }
            None => Ok(Vec::new()),
        };
        if let Ok(orphaned) = &released
            && !orphaned.is_empty()
        {
            let ids: Vec<JobId> = orphaned.iter().map(|(id, _)| *id).collect();
            tracing::warn!(count = ids.len(), jobs = ?ids, "took back the jobs of dead workers");
            count_by_queue(orphaned.clone(), true);
        }
        let rescued = rescue(&self.store, |batch| {
            let ids: Vec<JobId> = batch.iter().map(|(id, _)| *id).collect();
            tracing::warn!(count = ids.len(), jobs = ?ids, "rescued jobs whose lease expired");
            count_by_queue(batch, false);
        })
        .await;
        released?;
        rescued?;
        if metric::ENABLED {
            self.report_depth().await?;
        }
        Ok(())
    }
}

pub(crate) fn count_by_queue(jobs: Vec<(JobId, String)>, of_dead_worker: bool) {
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

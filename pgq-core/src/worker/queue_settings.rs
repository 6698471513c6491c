//! The queue-settings reader: reads what operators set on the worker's queues — paused
//! (`Client::pause_queue`) or not, a cluster-wide concurrency limit
//! (`Client::set_queue_limit`) and a rate limit (`Client::set_queue_rate`) — into each queue's
//! flags, which its dispatcher reads before
//! every claim. It reads at start, when the listener hears a queue's notification, and every
//! [`interval`] as the fallback for a lost notification or a worker behind a pooler, which does
//! not listen. Between hearing of a change and a read that started after it, the queue claims
//! nothing: a job enqueued after a pause, whose notification follows the pause's, is never
//! claimed on the settings from before it. Each read also tells whether another live worker
//! serves the queue (`Pacing::want`). With each read it renews the worker's seats of each
//! limited queue (`store::seats`), which bound how many of the queue's handlers the worker runs
//! at once. The claim statement of a queue without a rate limit never reads `pgq.queues`: a
//! paused or limited queue costs the others nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::error::Result;
use crate::store;
use crate::store::Store;
use crate::store::queues::Settings;
use crate::store::seats::Lease;
use crate::worker::slots::QueueSlots;

/// The shortest time between two periodic reads, whatever the poll interval.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// The longest: a pause reaches a worker that missed its notification within this long.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(1);

/// How often a worker polling every `poll_interval` reads its queues' settings.
pub(crate) fn interval(poll_interval: Duration) -> Duration {
    poll_interval.clamp(MIN_INTERVAL, MAX_INTERVAL)
}

/// How many reads a lease of seats outlasts: a renewal or two may fail or come late.
const READS_PER_LEASE: u32 = 4;

/// How long a lease of seats lasts: as long as the worker's registration (`alive_for`), and
/// never less than a few of the reads that renew it.
pub(crate) fn seats_lease(alive_for: Duration, interval: Duration) -> Duration {
    alive_for.max(interval * READS_PER_LEASE)
}

#[derive(Debug)]
pub(crate) struct SettingsReader {
    pub(crate) store: Store,
    pub(crate) queues: Vec<Arc<QueueSlots>>,
    pub(crate) interval: Duration,
    /// Fired by the listener on a queue's notification: read now.
    pub(crate) check_now: Arc<Notify>,
    /// The worker, whose seats of limited queues each read renews.
    pub(crate) worker_id: String,
    /// How long a lease of seats lasts unless renewed: as long as the worker's registration.
    pub(crate) seats_lease: Duration,
    /// The worker is stopping: its seats shrink to its handlers still running, and it wants no
    /// more.
    pub(crate) stopping: watch::Receiver<bool>,
}

impl SettingsReader {
    /// Reads the settings now and after each interval or notification, until `stop` turns true:
    /// after the last handler has returned, so that the seats of a stopping worker's handlers
    /// stay leased through the grace period.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut failing = false;
        loop {
            match self.run_once().await {
                Err(err) => {
                    if !failing {
                        tracing::warn!(error = %err, "cannot read the queues' settings (paused, limit); queues not read yet do not claim until it can");
                    }
                    failing = true;
                }
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("reading the queues' settings works again");
                }
                Ok(()) => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(self.interval) => {}
                _ = self.check_now.notified() => {}
                _ = stop.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// One read: sets each queue's flags; each dispatcher reports what changed for its queue.
    pub(crate) async fn run_once(&self) -> Result<()> {
        let names: Vec<String> = self.queues.iter().map(|q| q.name.to_string()).collect();
        // Taken before the read: a change heard later may not be in it.
        let heard: Vec<u64> = self.queues.iter().map(|q| q.changes_heard()).collect();
        let settings: HashMap<String, Settings> =
            store::queues::settings_among(&self.store, &names, &self.worker_id)
                .await?
                .into_iter()
                .collect();
        let mut failed = None;
        for (queue, heard) in self.queues.iter().zip(heard) {
            let now = settings.get(&*queue.name).copied().unwrap_or_default();
            // The seats first: setting the pause state lets a dispatcher claim, within them.
            if (now.limit.is_some() || queue.seated())
                && let Err(err) = self.take_seats(queue).await
            {
                if !queue.seated() {
                    // A limited queue runs nothing without a lease.
                    queue.set_seats(Some((0, Instant::now())));
                }
                failed.get_or_insert(err);
            }
            let limit_before = queue.set_limit(now.limit);
            let rated_before = queue.set_rated(now.rated);
            queue.set_alone(now.alone);
            let before = queue.set_paused(now.paused);
            queue.settings_read(heard);
            let queue = &*queue.name;
            match (before, now.paused) {
                (None | Some(false), true) => {
                    tracing::info!(
                        queue,
                        "queue is paused; not claiming from it until it is resumed"
                    );
                }
                (Some(true), false) => tracing::info!(queue, "queue resumed; claiming again"),
                _ => {}
            }
            if rated_before != now.rated {
                if now.rated {
                    tracing::info!(queue, "queue has a rate limit across all workers");
                } else {
                    tracing::info!(queue, "queue has no rate limit any more");
                }
            }
            if limit_before != now.limit {
                match now.limit {
                    Some(limit) => tracing::info!(
                        queue,
                        limit,
                        "queue has a concurrency limit across all workers"
                    ),
                    None => tracing::info!(queue, "queue has no concurrency limit any more"),
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Renews the worker's seats of a limited queue: all it can run, keeping those that may run
    /// while the lease is asked for; once stopping, only those its running handlers hold.
    async fn take_seats(&self, queue: &QueueSlots) -> Result<()> {
        let asked = Instant::now();
        let (wanted, keep) = if *self.stopping.borrow() {
            (0, queue.running())
        } else {
            (queue.concurrency, queue.seats_to_keep())
        };
        let lease = store::seats::take(
            &self.store,
            &queue.name,
            &self.worker_id,
            wanted,
            keep,
            i64::try_from(self.seats_lease.as_millis()).unwrap_or(i64::MAX),
        )
        .await?;
        // Counted from before the database started it: it runs out here first.
        queue.set_seats(match lease {
            Lease::Unlimited => None,
            Lease::Allowed(seats) => Some((seats, asked + self.seats_lease)),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MAX_INTERVAL, MIN_INTERVAL, interval, seats_lease};

    #[test]
    fn the_interval_follows_polling_within_bounds() {
        assert_eq!(
            interval(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
        assert_eq!(interval(Duration::from_secs(5)), MAX_INTERVAL);
        assert_eq!(interval(Duration::from_millis(1)), MIN_INTERVAL);
    }

    #[test]
    fn a_lease_of_seats_outlasts_several_renewals() {
        let second = Duration::from_secs(1);
        assert_eq!(seats_lease(20 * second, second), 20 * second);
        assert_eq!(
            seats_lease(Duration::from_millis(40), second),
            4 * second,
            "a quick heartbeat does not shorten it below the renewals"
        );
    }
}

//! The queue-settings reader: reads what operators set on the worker's queues — paused
//! (`Client::pause_queue`) or not, a cluster-wide concurrency limit
//! (`Client::set_queue_limit`) and a rate limit (`Client::set_queue_rate`) — into each queue's
//! flags, which its dispatcher reads before
//! every claim. It reads at start, when the listener hears a queue's notification, and every
//! [`interval`] as the fallback for a lost notification or a worker behind a pooler, which does
//! not listen. The claim statement of a queue without a limit never reads `pgq.queues`: a
//! paused or limited queue costs the others nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::error::Result;
use crate::store;
use crate::store::Store;
use crate::store::queues::Settings;
use crate::worker::slots::QueueSlots;

/// The shortest time between two periodic reads, whatever the poll interval.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// The longest: a pause reaches a worker that missed its notification within this long.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(1);

/// How often a worker polling every `poll_interval` reads its queues' settings.
pub(crate) fn interval(poll_interval: Duration) -> Duration {
    poll_interval.clamp(MIN_INTERVAL, MAX_INTERVAL)
}

#[derive(Debug)]
pub(crate) struct SettingsReader {
    pub(crate) store: Store,
    pub(crate) queues: Vec<Arc<QueueSlots>>,
    pub(crate) interval: Duration,
    /// Fired by the listener on a queue's notification: read now.
    pub(crate) check_now: Arc<Notify>,
}

impl SettingsReader {
    /// Reads the settings now and after each interval or notification, until `stop` turns true.
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
        let settings: HashMap<String, Settings> =
            store::queues::settings_among(&self.store, &names)
                .await?
                .into_iter()
                .collect();
        for queue in &self.queues {
            let now = settings.get(&*queue.name).copied().unwrap_or_default();
            // The limit first: setting the pause state lets a dispatcher claim, with the limit.
            let limit_before = queue.set_limit(now.limit);
            let rated_before = queue.set_rated(now.rated);
            let before = queue.set_paused(now.paused);
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MAX_INTERVAL, MIN_INTERVAL, interval};

    #[test]
    fn the_interval_follows_polling_within_bounds() {
        assert_eq!(
            interval(Duration::from_millis(200)),
            Duration::from_millis(200)
        );
        assert_eq!(interval(Duration::from_secs(5)), MAX_INTERVAL);
        assert_eq!(interval(Duration::from_millis(1)), MIN_INTERVAL);
    }
}

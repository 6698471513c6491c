//! The pause check: reads which of the worker's queues an operator paused (`Client::pause_queue`)
//! into each queue's flag, which its dispatcher reads before every claim. It reads at start,
//! when the listener hears a queue's notification, and every [`interval`] as the fallback for a
//! lost notification or a worker behind a pooler, which does not listen. The claim statement
//! never reads `pgq.queues`: a paused queue costs the others nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::error::Result;
use crate::store;
use crate::store::Store;
use crate::worker::slots::QueueSlots;

/// The shortest time between two periodic reads, whatever the poll interval.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// The longest: a pause reaches a worker that missed its notification within this long.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(1);

/// How often a worker polling every `poll_interval` reads its queues' paused flags.
pub(crate) fn interval(poll_interval: Duration) -> Duration {
    poll_interval.clamp(MIN_INTERVAL, MAX_INTERVAL)
}

#[derive(Debug)]
pub(crate) struct PauseCheck {
    pub(crate) store: Store,
    pub(crate) queues: Vec<Arc<QueueSlots>>,
    pub(crate) interval: Duration,
    /// Fired by the listener on a queue's notification: read now.
    pub(crate) check_now: Arc<Notify>,
}

impl PauseCheck {
    /// Reads the flags now and after each interval or notification, until `stop` turns true.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut failing = false;
        loop {
            match self.run_once().await {
                Err(err) => {
                    if !failing {
                        tracing::warn!(error = %err, "cannot read which queues are paused; queues not read yet do not claim until it can");
                    }
                    failing = true;
                }
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("reading which queues are paused works again");
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

    /// One read: sets each queue's flag; each dispatcher reports what changed for its queue.
    pub(crate) async fn run_once(&self) -> Result<()> {
        let names: Vec<String> = self.queues.iter().map(|q| q.name.to_string()).collect();
        let paused: HashSet<String> = store::queues::paused_among(&self.store, &names)
            .await?
            .into_iter()
            .collect();
        for queue in &self.queues {
            let now = paused.contains(&*queue.name);
            let before = queue.set_paused(now);
            let queue = &*queue.name;
            match (before, now) {
                (None | Some(false), true) => {
                    tracing::info!(
                        queue,
                        "queue is paused; not claiming from it until it is resumed"
                    );
                }
                (Some(true), false) => tracing::info!(queue, "queue resumed; claiming again"),
                _ => {}
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

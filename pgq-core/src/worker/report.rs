//! Where a worker tells what it did: events for whoever subscribed, and running totals.

use std::sync::Arc;

use tokio::sync::{broadcast, watch};

use crate::attempt::AttemptState;
use crate::job_outcome::JobOutcome;
use crate::worker::event::{WorkerEvent, WorkerStats};

/// How many events a slow receiver may fall behind before it lags.
const EVENT_CAPACITY: usize = 1024;

#[derive(Debug, Clone)]
pub(crate) struct Reporter {
    events: broadcast::Sender<WorkerEvent>,
    stats: watch::Sender<WorkerStats>,
}

/// One attempt's end, as reported.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) state: Arc<AttemptState>,
    pub(crate) task: String,
    pub(crate) outcome: JobOutcome,
    pub(crate) error: Option<String>,
}

impl Reporter {
    pub(crate) fn new() -> Self {
        Self {
            events: broadcast::channel(EVENT_CAPACITY).0,
            stats: watch::channel(WorkerStats::default()).0,
        }
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<WorkerEvent> {
        self.events.subscribe()
    }

    pub(crate) fn stats(&self) -> watch::Receiver<WorkerStats> {
        self.stats.subscribe()
    }

    /// Sends the event `event` builds, built only when someone listens: most workers have no
    /// subscriber, and a job's events would cost it allocations for nobody.
    pub(crate) fn emit(&self, event: impl FnOnce() -> WorkerEvent) {
        if self.events.receiver_count() > 0 {
            // A receiver gone since is fine: events are for whoever listens.
            let _ = self.events.send(event());
        }
    }

    pub(crate) fn claimed(&self, count: usize) {
        if count > 0 {
            self.stats
                .send_modify(|stats| stats.claimed += count as u64);
        }
    }

    /// Reports attempts that ended: one stats update for all of them, since every update wakes
    /// whoever watches the stats, then a log line, metrics and an event each.
    pub(crate) fn finished(&self, ended: impl IntoIterator<Item = Finished>) {
        let ended: Vec<Finished> = ended.into_iter().collect();
        if ended.is_empty() {
            return;
        }
        self.stats.send_modify(|stats| {
            for finished in &ended {
                stats.count(finished.outcome);
            }
        });
        for finished in ended {
            let state = &finished.state;
            state
                .trace
                .ended(&finished.task, finished.outcome, finished.error.as_deref());
            self.emit(|| WorkerEvent::JobFinished {
                id: state.id,
                task: finished.task,
                attempt: state.attempt,
                outcome: finished.outcome,
                error: finished.error,
            });
        }
    }
}

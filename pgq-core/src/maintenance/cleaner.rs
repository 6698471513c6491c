//! The cleaner: deletes finished jobs past their retention, in bounded batches, one process at a
//! time (an advisory lock), so the table does not grow forever.
//!
//! A worker's cleaner deletes one batch a step and, while batches come back full, waits three
//! times as long as the last one took before the next: a minute's or an hour's backlog is spread
//! over the following seconds or minutes at no more than a quarter of one connection's time,
//! instead of a burst that the claims beside it queue behind. Once a batch comes back short, it
//! waits its interval.

use std::time::{Duration, Instant};

use crate::defaults;
use crate::error::Result;
use crate::maintenance::Service;
use crate::store;
use crate::store::Store;

/// How many rows one delete statement removes at most.
pub(crate) const CLEAN_BATCH: i64 = 1000;

/// While batches come back full, the pause after each, in multiples of the time it took.
const PAUSE_PER_BATCH_TIME: u32 = 3;

/// How long finished jobs are kept before the cleaner deletes them.
///
/// ```
/// use std::time::Duration;
/// let retention = pgq_core::Retention {
///     completed: Duration::from_secs(3600),
///     ..Default::default()
/// };
/// assert_eq!(retention.failed, pgq_core::defaults::RETAIN_FAILED);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Age (since completion) after which completed jobs are deleted.
    pub completed: Duration,
    /// Age after which failed and cancelled jobs are deleted.
    pub failed: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            completed: defaults::RETAIN_COMPLETED,
            failed: defaults::RETAIN_FAILED,
        }
    }
}

/// The cleaner's settings.
#[derive(Debug, Clone)]
pub(crate) struct CleanerConfig {
    pub(crate) retention: Retention,
    pub(crate) interval: Duration,
}

/// Deletes what is past retention; `None` when another process is cleaning right now.
pub(crate) async fn clean(store: &Store, retention: Retention) -> Result<Option<u64>> {
    store::maintenance::delete_finished(store, retention.completed, retention.failed, CLEAN_BATCH)
        .await
}

/// The cleaner as a periodic service, a batch a step.
#[derive(Debug)]
pub(crate) struct Cleaner {
    store: Store,
    config: CleanerConfig,
    /// While batches come back full: the pause before the next.
    backlog: Option<Duration>,
    /// Deleted since the pass began, logged when it ends.
    deleted: u64,
}

impl Cleaner {
    pub(crate) fn new(store: Store, config: CleanerConfig) -> Self {
        Self {
            store,
            config,
            backlog: None,
            deleted: 0,
        }
    }
}

impl Service for Cleaner {
    const NAME: &'static str = "cleaner";

    fn interval(&self) -> Duration {
        self.backlog.unwrap_or(self.config.interval)
    }

    async fn run_once(&mut self) -> Result<()> {
        let retention = self.config.retention;
        let began = Instant::now();
        // A failed step ends the pass: the next starts after the interval.
        self.backlog = None;
        let deleted = store::maintenance::delete_finished_batch(
            &self.store,
            retention.completed,
            retention.failed,
            CLEAN_BATCH,
        )
        .await?;
        // `None`: another process is cleaning; this pass ends.
        let deleted = deleted.unwrap_or(0);
        self.deleted += deleted;
        if deleted == CLEAN_BATCH as u64 {
            let pause = began.elapsed() * PAUSE_PER_BATCH_TIME;
            self.backlog = Some(pause.min(self.config.interval));
        } else if self.deleted > 0 {
            tracing::info!(deleted = self.deleted, "deleted old finished jobs");
            self.deleted = 0;
        }
        Ok(())
    }
}

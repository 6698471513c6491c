//! The cleaner: deletes finished jobs past their retention, in bounded batches, one process at a
//! time (an advisory lock), so the table does not grow forever.

use std::time::Duration;

use crate::defaults;
use crate::error::Result;
use crate::maintenance::Service;
use crate::store;
use crate::store::Store;

/// How many rows one delete statement removes at most.
pub(crate) const CLEAN_BATCH: i64 = 1000;

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

/// The cleaner as a periodic service.
#[derive(Debug)]
pub(crate) struct Cleaner {
    pub(crate) store: Store,
    pub(crate) config: CleanerConfig,
}

impl Service for Cleaner {
    const NAME: &'static str = "cleaner";

    fn interval(&self) -> Duration {
        self.config.interval
    }

    async fn run_once(&mut self) -> Result<()> {
        if let Some(deleted) = clean(&self.store, self.config.retention).await?
            && deleted > 0
        {
            tracing::info!(deleted, "deleted old finished jobs");
        }
        Ok(())
    }
}

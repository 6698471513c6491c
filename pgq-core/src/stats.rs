//! [`QueueStats`]: how one queue is doing, as [`Client::stats`](crate::Client::stats) reports.

use std::time::Duration;

/// How one queue is doing now: its jobs waiting and held, how far behind it is, and how fast
/// its jobs have been finishing over the last [`STATS_WINDOW`](crate::defaults::STATS_WINDOW).
///
/// Everything is read from the indexes of active jobs and from the jobs finished within the
/// window, never from the whole history: the answer costs the same with a million finished jobs
/// kept as with none.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// for queue in client.stats().await? {
///     if queue.oldest_due_age > Some(Duration::from_secs(300)) {
///         println!("queue {} is {:?} behind ({} due)", queue.queue, queue.oldest_due_age, queue.due);
///     }
///     println!("{}: {:.1} completed and {:.1} failed a minute", queue.queue, queue.completed_per_minute, queue.failed_per_minute);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue's name.
    pub queue: String,
    /// Pending jobs whose `run_at` has come.
    pub due: u64,
    /// Pending jobs waiting for a later `run_at` (delayed, or backing off before a retry).
    pub scheduled: u64,
    /// Jobs claimed by a worker, not started yet.
    pub claimed: u64,
    /// Jobs whose handler is running.
    pub running: u64,
    /// How long the oldest due job has been waiting: the queue's lag.
    pub oldest_due_age: Option<Duration>,
    /// Jobs completed within the window.
    pub completed: u64,
    /// Jobs that ended `failed` within the window.
    pub failed: u64,
    /// Jobs cancelled within the window.
    pub cancelled: u64,
    /// Jobs completed a minute, over the window.
    pub completed_per_minute: f64,
    /// Jobs that ended `failed` a minute, over the window.
    pub failed_per_minute: f64,
    /// Jobs cancelled a minute, over the window.
    pub cancelled_per_minute: f64,
}

impl QueueStats {
    /// A queue with nothing active and nothing finished within the window.
    pub(crate) fn idle(queue: String) -> Self {
        Self {
            queue,
            ..Self::default()
        }
    }
}

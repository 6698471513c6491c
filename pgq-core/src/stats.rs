//! [`QueueStats`]: how one queue is doing, as [`Client::stats`](crate::Client::stats) reports.

use std::time::Duration;

/// Counts for one queue, by status, plus how far behind it is and how much it fails.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// for queue in client.stats().await? {
///     if queue.oldest_due_age > Some(Duration::from_secs(300)) {
///         println!("queue {} is {:?} behind ({} due)", queue.queue, queue.oldest_due_age, queue.due);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
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
    /// Completed jobs still kept.
    pub completed: u64,
    /// Failed jobs still kept.
    pub failed: u64,
    /// Cancelled jobs still kept.
    pub cancelled: u64,
    /// How long the oldest due job has been waiting: the queue's lag.
    pub oldest_due_age: Option<Duration>,
    /// Jobs that ended `failed` in the last hour.
    pub failed_last_hour: u64,
    /// Failed attempts (including ones that will retry) in the last hour.
    pub errors_last_hour: u64,
}

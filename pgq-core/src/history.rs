//! [`FinishedMinute`] and [`FinishedHistory`]: how many jobs each queue finished, minute by
//! minute, over the last hour — what a dashboard's chart draws.

use chrono::{DateTime, Utc};

/// How many minutes [`Client::finished_history`](crate::Client::finished_history) looks back.
///
/// ```
/// assert_eq!(pgq_core::FINISHED_HISTORY_MINUTES, 60);
/// ```
pub const FINISHED_HISTORY_MINUTES: u32 = 60;

/// The jobs one queue finished within one minute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FinishedMinute {
    /// The queue.
    pub queue: String,
    /// The minute's start, by the database clock.
    pub minute: DateTime<Utc>,
    /// Jobs completed within it.
    pub completed: u64,
    /// Jobs that ended `failed` within it.
    pub failed: u64,
    /// Jobs cancelled within it.
    pub cancelled: u64,
}

/// Finished jobs per queue and minute over the last [`FINISHED_HISTORY_MINUTES`], as
/// [`Client::finished_history`](crate::Client::finished_history) reports them.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let history = client.finished_history().await?;
/// for minute in history.minutes.iter().filter(|m| m.queue == "email") {
///     println!("{}: {} completed, {} failed", minute.minute, minute.completed, minute.failed);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FinishedHistory {
    /// The current minute's start, by the database clock: the last minute of the range.
    pub now: DateTime<Utc>,
    /// Each queue's minutes that finished a job, by queue, then minute; minutes without any
    /// are left out.
    pub minutes: Vec<FinishedMinute>,
}

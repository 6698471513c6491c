//! What a running worker reports: an event per job step, and running totals.

use crate::job_id::JobId;
use crate::job_outcome::JobOutcome;

/// Something a worker did, as seen through [`WorkerHandle::events`](crate::WorkerHandle::events).
/// A receiver more than 1024 events behind misses the oldest (`RecvError::Lagged`); the loop
/// below stops there, [`Worker::events`](crate::Worker::events) shows one that goes on.
///
/// ```no_run
/// # use pgq_core::WorkerEvent;
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let worker = pgq_core::Worker::builder(client).queue("email", 16).build()?;
/// let mut events = worker.events();
/// let _handle = worker.start();
/// while let Ok(event) = events.recv().await {
///     match event {
///         WorkerEvent::JobStarted { id, task, attempt } => println!("{task} {id}: attempt {attempt}"),
///         WorkerEvent::JobFinished { id, outcome, error, .. } => println!("{id}: {outcome:?} {error:?}"),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerEvent {
    /// An attempt is running: its handler started and the job is `running` in the table. An
    /// attempt whose `running` write was refused sends only [`JobFinished`](Self::JobFinished),
    /// with `LeaseLost`.
    JobStarted {
        /// The job.
        id: JobId,
        /// Its task name.
        task: String,
        /// The attempt, starting at 1.
        attempt: i32,
    },
    /// An attempt ended and its outcome was recorded (or found fenced off). A retry due at
    /// once may start, and even end, before its previous attempt's `JobFinished` arrives:
    /// order one job's reports by `attempt`.
    JobFinished {
        /// The job.
        id: JobId,
        /// Its task name.
        task: String,
        /// The attempt, starting at 1.
        attempt: i32,
        /// What became of the job.
        outcome: JobOutcome,
        /// The attempt's error, if it failed.
        error: Option<String>,
    },
    /// The LISTEN connection is up (again) and listening.
    ListenerConnected,
    /// The LISTEN connection was lost; the worker reconnects and polls meanwhile.
    ListenerLost,
    /// The worker found the queue paused ([`Client::pause_queue`](crate::Client::pause_queue)),
    /// at its start or since, and no claim of its from the queue is in flight: from now on it
    /// claims nothing from the queue until [`QueueResumed`](Self::QueueResumed); its running
    /// jobs finish.
    QueuePaused {
        /// The queue.
        queue: String,
    },
    /// The worker found the paused queue resumed, and claims from it again.
    QueueResumed {
        /// The queue.
        queue: String,
    },
}

/// Running totals of one worker, as seen through
/// [`WorkerHandle::stats`](crate::WorkerHandle::stats).
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
/// let stats = *handle.stats().borrow();
/// println!("{} claimed, {} completed, {} retried, {} failed", stats.claimed, stats.completed, stats.retried, stats.failed);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Jobs claimed.
    pub claimed: u64,
    /// Attempts that completed their job.
    pub completed: u64,
    /// Attempts that failed with retries left.
    pub retried: u64,
    /// Attempts that left their job `failed`.
    pub failed: u64,
    /// Attempts that snoozed.
    pub snoozed: u64,
    /// Attempts released at shutdown.
    pub released: u64,
    /// Attempts whose job was cancelled while they ran.
    pub cancelled: u64,
    /// Attempts whose result was dropped because the lease was lost, or not written.
    pub lost: u64,
}

impl WorkerStats {
    pub(crate) fn count(&mut self, outcome: JobOutcome) {
        let counter = match outcome {
            JobOutcome::Completed => &mut self.completed,
            JobOutcome::Retrying => &mut self.retried,
            JobOutcome::Failed => &mut self.failed,
            JobOutcome::Snoozed => &mut self.snoozed,
            JobOutcome::Released => &mut self.released,
            JobOutcome::Cancelled => &mut self.cancelled,
            JobOutcome::LeaseLost | JobOutcome::Unrecorded => &mut self.lost,
        };
        *counter += 1;
    }

    /// Attempts that ended, whatever their outcome.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// // Whatever their outcome: completed, retried, failed, snoozed, released, cancelled or lost.
    /// handle.stats().wait_for(|stats| stats.finished() >= 1_000).await.ok();
    /// handle.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn finished(&self) -> u64 {
        self.completed
            + self.retried
            + self.failed
            + self.snoozed
            + self.released
            + self.cancelled
            + self.lost
    }
}

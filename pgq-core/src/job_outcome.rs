//! [`JobOutcome`]: how an attempt ended, as the worker reports it and its spans and metrics
//! record it.

/// How an attempt ended. (The loop below stops if it falls more than 1024 events behind: see
/// [`Worker::events`](crate::Worker::events) for one that goes on.)
///
/// ```no_run
/// # use pgq_core::{JobOutcome, WorkerEvent};
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let worker = pgq_core::Worker::builder(client).queue("billing", 4).build()?;
/// let mut events = worker.events();
/// let _handle = worker.start();
/// while let Ok(event) = events.recv().await {
///     if let WorkerEvent::JobFinished { id, outcome: JobOutcome::Failed, error, .. } = event {
///         println!("job {id} failed for good: {error:?}");
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutcome {
    /// The handler succeeded; the job is `completed`.
    Completed,
    /// The attempt failed; the job is `pending` and will retry.
    Retrying,
    /// The attempt failed and no retry is left (or it failed on purpose); the job is `failed`.
    Failed,
    /// The handler snoozed; the job is `pending` with its attempt given back.
    Snoozed,
    /// The job was cancelled while its handler ran; the job is `cancelled`.
    Cancelled,
    /// The worker shut down mid-attempt; the job is `pending` with its attempt given back.
    Released,
    /// This worker no longer held the job (its lease was lost); the result was dropped.
    LeaseLost,
    /// The outcome could not be written: the database refused the write, or the worker stopped
    /// before the database could be reached again (while it cannot be, the write is tried
    /// again). The job's lease will run out and it will be retried.
    Unrecorded,
}

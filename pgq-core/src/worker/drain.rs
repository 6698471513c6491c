//! Draining: every due job of the worker's queues, run inline through the real handlers until
//! none is due — for tests, scripts and one-off runs.

use std::sync::Arc;

use crate::error::Result;
use crate::job_id::JobId;
use crate::store;
use crate::worker::{JobOutcome, Shared, WorkerEvent, executor};

/// The most attempts one drain runs, so that a job that retries at once forever still ends it.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let drained = pgq_core::Worker::builder(client).queue("email", 1).build()?.drain().await?;
/// if drained.len() == pgq_core::DRAIN_LIMIT {
///     println!("stopped at the limit: a job keeps retrying at once");
/// }
/// # Ok(()) }
/// ```
pub const DRAIN_LIMIT: usize = 10_000;

/// One attempt a drain ran.
///
/// ```no_run
/// # use pgq_core::JobOutcome;
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let drained = pgq_core::Worker::builder(client).queue("email", 1).build()?.drain().await?;
/// for job in drained.iter().filter(|job| job.outcome != JobOutcome::Completed) {
///     println!("{} {} attempt {}: {:?} {:?}", job.task, job.id, job.attempt, job.outcome, job.error);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainedJob {
    /// The job.
    pub id: JobId,
    /// Its task name.
    pub task: String,
    /// The attempt, starting at 1.
    pub attempt: i32,
    /// How it ended.
    pub outcome: JobOutcome,
    /// Its error, if it failed.
    pub error: Option<String>,
}

/// Claims one due job at a time, in priority order across the queues, and runs it to its end.
pub(crate) async fn drain(shared: Arc<Shared>) -> Result<Vec<DrainedJob>> {
    let mut drained = Vec::new();
    while drained.len() < DRAIN_LIMIT {
        let mut ran = false;
        for queue in &shared.queues {
            let jobs = store::attempt::claim(
                &shared.pool,
                &queue.name,
                &shared.task_names,
                &shared.task_leases,
                1,
                shared.worker_id(),
            )
            .await?;
            store::attempt::start(&shared.pool, &jobs, shared.worker_id()).await?;
            for job in jobs {
                ran = true;
                let (id, task, attempt) = (job.id, job.task.clone(), job.attempt);
                let entry = shared.handlers[job.task.as_str()];
                let state = executor::attempt_state(&shared, &job, true);
                shared.emit(WorkerEvent::JobStarted {
                    id,
                    task: task.clone(),
                    attempt,
                });
                // Without a dispatcher, every outcome is recorded and returned here.
                let Some((outcome, error)) =
                    executor::execute(shared.clone(), job, entry, state, None).await
                else {
                    continue;
                };
                drained.push(DrainedJob {
                    id,
                    task,
                    attempt,
                    outcome,
                    error,
                });
            }
        }
        if !ran {
            break;
        }
    }
    Ok(drained)
}

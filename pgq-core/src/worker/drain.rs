//! Draining: every due job of the worker's queues, run inline through the real handlers until
//! none is due — for tests, scripts and one-off runs.

use std::sync::Arc;

use crate::error::Result;
use crate::job_id::JobId;
use crate::job_outcome::JobOutcome;
use crate::store;
use crate::store::run;
use crate::store::tick::TickRequest;
use crate::worker::event::WorkerEvent;
use crate::worker::executor::Executor;
use crate::worker::report::Reporter;
use crate::worker::slots::QueueSlots;

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
    /// The queue it ran in.
    pub queue: String,
    /// The attempt, starting at 1.
    pub attempt: i32,
    /// How it ended.
    pub outcome: JobOutcome,
    /// Its error, if it failed.
    pub error: Option<String>,
}

/// Claims one due job at a time, with the same claim statement as a dispatcher's tick, and runs
/// it to its end: the queues take turns, a job each, and each queue's jobs come in its claim
/// order (priority, then run time, then id).
pub(crate) async fn drain(
    executor: Arc<Executor>,
    reporter: &Reporter,
    queues: &[Arc<QueueSlots>],
    limit: usize,
) -> Result<Vec<DrainedJob>> {
    let db = executor.client.store();
    let tasks = &executor.tasks;
    let mut drained = Vec::new();
    while drained.len() < limit {
        let mut ran = false;
        for queue in queues {
            if drained.len() >= limit {
                break;
            }
            // Claimed as `running`: its handler starts at once.
            let request = TickRequest {
                worker_id: &executor.worker_id,
                complete: &[],
                start: &[],
                queue: &queue.name,
                tasks: tasks.names(),
                leases_ms: tasks.leases_ms(),
                claim: 1,
                run_now: 1,
                durable: true,
                delete_completed: false,
                // One job at a time, inline: a queue's limits are not read, as its pause is not.
                rated: false,
                keyed: false,
            };
            let claimed = run!(db, |conn| store::tick::tick(db, conn, &request))?.claimed;
            for job in claimed {
                ran = true;
                let (id, task, attempt) = (job.id, job.task.clone(), job.attempt);
                let job_queue = job.queue.clone();
                executor
                    .held
                    .claimed(id, &task, attempt, tasks.lease_ms(&task));
                let state = executor.attempt_state(&job, true);
                let timeout = tasks.get(&task).and_then(|entry| entry.timeout);
                executor.held.start(&state, timeout);
                reporter.emit(|| WorkerEvent::JobStarted {
                    id,
                    task: task.clone(),
                    attempt,
                });
                // Without a dispatcher, every outcome is written and returned here.
                let Some((outcome, error)) = executor.clone().execute(job, state, None).await
                else {
                    continue;
                };
                drained.push(DrainedJob {
                    id,
                    task,
                    queue: job_queue,
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

//! Runs one claimed job through its handler and records the outcome, fenced.

use std::any::Any;
use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use crate::context::JobContext;
use crate::handler::RunFn;
use crate::store;
use crate::store::attempt::{ClaimedJob, Failure, Fence};
use crate::task_error::{TaskAction, TaskError, truncate_error};
use crate::worker::{JobOutcome, Shared, WorkerEvent};

pub(crate) async fn execute(
    shared: Arc<Shared>,
    job: ClaimedJob,
    run: RunFn,
    _slot: OwnedSemaphorePermit,
) {
    let (id, attempt) = (job.id, job.attempt);
    shared.emit(WorkerEvent::JobStarted {
        id,
        task: job.task.clone(),
        attempt,
    });
    let ctx = JobContext::new(
        id,
        attempt,
        job.task.clone(),
        job.queue.clone(),
        job.unique_key,
        shared.state.clone(),
    );
    // Its own task, so that a panic is caught and shutdown can abort it.
    let handler = tokio::spawn(run(job.payload, ctx));
    if let Ok(mut running) = shared.running.lock() {
        running.insert(id, handler.abort_handle());
    }
    let result = handler.await;
    if let Ok(mut running) = shared.running.lock() {
        running.remove(&id);
    }

    let fence = Fence {
        id,
        attempt,
        worker_id: shared.worker_id(),
    };
    let (recorded, error) = match result {
        Ok(Ok(())) => (
            store::attempt::complete(&shared.pool, fence)
                .await
                .map(|held| held.then_some(JobOutcome::Completed)),
            None,
        ),
        Ok(Err(err)) => record_failure(&shared, &job.queue, fence, &err).await,
        Err(join) if join.is_panic() => {
            let err = TaskError::retry(format_args!(
                "handler panicked: {}",
                panic_message(join.into_panic())
            ));
            record_failure(&shared, &job.queue, fence, &err).await
        }
        Err(_) => (
            store::attempt::release(&shared.pool, fence)
                .await
                .map(|held| held.then_some(JobOutcome::Released)),
            None,
        ),
    };
    let outcome = match recorded {
        Ok(Some(outcome)) => outcome,
        Ok(None) => {
            tracing::warn!(job = %id, attempt, "lease lost: another attempt owns the job; result dropped");
            JobOutcome::LeaseLost
        }
        Err(err) => {
            tracing::error!(job = %id, attempt, error = %err, "could not record the attempt's outcome");
            JobOutcome::Unrecorded
        }
    };
    shared.stats.send_modify(|stats| stats.count(outcome));
    shared.emit(WorkerEvent::JobFinished {
        id,
        task: job.task,
        attempt,
        outcome,
        error,
    });
}

async fn record_failure(
    shared: &Shared,
    queue: &str,
    fence: Fence<'_>,
    err: &TaskError,
) -> (crate::Result<Option<JobOutcome>>, Option<String>) {
    let message = truncate_error(err.message());
    let failure = match err.action() {
        TaskAction::Retry => Failure::Retry(None),
        TaskAction::RetryAfter(delay) => Failure::Retry(Some(millis(delay))),
        TaskAction::Fail => Failure::Fail,
        TaskAction::Snooze(delay) => Failure::Snooze(millis(delay)),
    };
    let recorded = store::attempt::fail(&shared.pool, fence, failure, &message)
        .await
        .map(|state| {
            state.map(|state| {
                if state.due_now {
                    // Retrying at once: look again instead of waiting for the poll.
                    shared.wake(queue);
                }
                match (failure, state.failed) {
                    (Failure::Snooze(_), _) => JobOutcome::Snoozed,
                    (_, true) => JobOutcome::Failed,
                    (_, false) => JobOutcome::Retrying,
                }
            })
        });
    (recorded, Some(message))
}

fn millis(delay: std::time::Duration) -> i64 {
    i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(message) => (*message).to_owned(),
            Err(_) => "a non-string panic payload".to_owned(),
        },
    }
}

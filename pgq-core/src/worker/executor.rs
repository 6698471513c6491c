//! Runs one claimed job through its handler and records the outcome, fenced.

use std::any::Any;
use std::sync::Arc;

use tokio::task::JoinError;

use crate::attempt::{AttemptState, Backend};
use crate::context::JobContext;
use crate::error::Result;
use crate::store;
use crate::store::attempt::{ClaimedJob, Failure, Fence};
use crate::store::tick::Held;
use crate::task_error::{TaskAction, TaskError, truncate_error};
use crate::worker::dispatcher::{PendingCompletion, Slot};
use crate::worker::{JobOutcome, Running, Shared, TaskEntry};

/// The live state of a claimed job's attempt; `confirmed` when its `running` write has landed.
pub(crate) fn attempt_state(
    shared: &Shared,
    job: &ClaimedJob,
    confirmed: bool,
) -> Arc<AttemptState> {
    let backend = Backend::Database {
        client: shared.client.clone(),
        worker_id: shared.worker_id().to_owned(),
    };
    if confirmed {
        AttemptState::new(job.id, job.attempt, backend)
    } else {
        AttemptState::unconfirmed(job.id, job.attempt, backend)
    }
}

/// Runs one attempt and records its outcome; returns the outcome and the attempt's error.
/// Under a dispatcher (`slot`), the slot frees as soon as the handler returns, and a plain
/// success is handed to the dispatcher, whose next tick writes it and reports it (`None` here);
/// without one (a drain), outcomes are written here. Nothing is written before the attempt's
/// `running` write has landed.
pub(crate) async fn execute(
    shared: Arc<Shared>,
    job: ClaimedJob,
    entry: TaskEntry,
    state: Arc<AttemptState>,
    slot: Option<Slot>,
) -> Option<(JobOutcome, Option<String>)> {
    let (id, attempt) = (job.id, job.attempt);
    let (permit, active) = slot.map(|s| (s.permit, s.active)).unzip();
    let ctx = JobContext::new(
        job.task.clone(),
        job.queue.clone(),
        job.unique_key,
        shared.state.clone(),
        state.clone(),
    );
    if let Ok(mut running) = shared.running.lock() {
        running.insert(
            id,
            Running {
                attempt,
                lease_ms: entry.lease_ms,
                state: state.clone(),
                abort: None,
            },
        );
    }
    // Its own task, so that a panic is caught and shutdown can abort it.
    let handler = tokio::spawn((entry.run)(job.payload, ctx));
    if let Ok(mut running) = shared.running.lock()
        && let Some(r) = running.get_mut(&id)
    {
        r.abort = Some(handler.abort_handle());
    }
    let result = handler.await;
    if let Ok(mut running) = shared.running.lock() {
        running.remove(&id);
    }
    if let Some(active) = &active {
        drop(permit);
        active.queue().handler_returned();
    }
    let plain_success =
        matches!(result, Ok(Ok(()))) && !state.completed_in_tx() && !state.is_cancel_requested();
    if let Some(active) = active
        && plain_success
    {
        // Handed to the dispatcher, whose tick writes it once the `running` write has landed.
        if state.has_unwritten_progress() && state.started().await {
            state.flush().await;
        }
        let queue = active.queue_slots();
        queue.push_completion(PendingCompletion {
            held: Held { id, attempt },
            task: job.task,
            state,
            active,
        });
        return None;
    }
    let (recorded, error) = if state.started().await {
        state.flush().await;
        record(&shared, &state, &job.queue, result).await
    } else {
        (Ok(None), None)
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
    shared.finished(id, job.task, attempt, outcome, error.clone());
    Some((outcome, error))
}

type Recorded = (Result<Option<JobOutcome>>, Option<String>);

/// Writes what the attempt's result means for the job. `Ok(None)`: the fence did not hold.
async fn record(
    shared: &Shared,
    state: &AttemptState,
    queue: &str,
    result: std::result::Result<std::result::Result<(), TaskError>, JoinError>,
) -> Recorded {
    // The fence decides: an expired lease nobody took over still lets this attempt finish.
    let fence = state.fence().expect("a worker's attempt has a fence");
    let error = match &result {
        Ok(Ok(())) => None,
        Ok(Err(err)) => Some(truncate_error(err.message())),
        Err(join) if join.is_panic() => None,
        Err(_) => None,
    };
    if matches!(result, Ok(Ok(()))) && state.completed_in_tx() {
        match store::attempt::is_completed(&shared.pool, fence).await {
            Ok(true) => return (Ok(Some(JobOutcome::Completed)), None),
            Ok(false) => {} // the handler's transaction rolled back: complete it here
            Err(err) => return (Err(err), None),
        }
    }
    if state.is_cancel_requested() {
        let done = store::attempt::cancelled(&shared.pool, fence, error.as_deref()).await;
        return (
            done.map(|held| held.then_some(JobOutcome::Cancelled)),
            error,
        );
    }
    match result {
        Ok(Ok(())) => (
            store::attempt::complete(&shared.pool, fence)
                .await
                .map(|held| held.then_some(JobOutcome::Completed)),
            None,
        ),
        Ok(Err(err)) => record_failure(shared, queue, fence, &err).await,
        Err(join) if join.is_panic() => {
            let err = TaskError::retry(format_args!(
                "handler panicked: {}",
                panic_message(join.into_panic())
            ));
            record_failure(shared, queue, fence, &err).await
        }
        // Aborted at shutdown, past the grace period.
        Err(_) => (
            store::attempt::release(&shared.pool, fence)
                .await
                .map(|held| held.then_some(JobOutcome::Released)),
            None,
        ),
    }
}

async fn record_failure(
    shared: &Shared,
    queue: &str,
    fence: Fence<'_>,
    err: &TaskError,
) -> Recorded {
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

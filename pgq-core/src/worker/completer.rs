//! The one place where an attempt ends: every outcome — success, failure, retry, snooze,
//! cancellation, release, lease lost, completion in the handler's transaction — is written here,
//! fenced on (id, attempt, worker), and reported here (stats, events).
//!
//! Plain successes under a dispatcher are batched: they wait for their queue's next tick, whose
//! statement writes them with the next claim ([`Completer::take_ready`], then
//! [`Completer::batch_written`]). Everything else, and every outcome of a drain, is written at
//! once on the worker's pool, durably.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::attempt::{AttemptState, Start};
use crate::error::Result;
use crate::job_id::JobId;
use crate::job_outcome::JobOutcome;
use crate::limits;
use crate::store;
use crate::store::Store;
use crate::store::attempt::{Failure, Fence};
use crate::store::run;
use crate::task_error::{TaskAction, TaskError, truncate_error};
use crate::worker::event::WorkerEvent;
use crate::worker::held::HeldJobs;
use crate::worker::report::{Finished, Reporter};
use crate::worker::slots::{Active, QueueSlots};

/// The longest pause between two tries of an outcome the database could not be reached for.
const UNREACHABLE_PAUSE: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct Completer {
    /// The client's pool: what dispatchers and executors write, on the application's runtime.
    store: Store,
    /// The worker's own connections, for what its control thread writes: a connection is
    /// served by the runtime that opened it, and the application's may be stalled.
    own: Store,
    worker_id: Arc<str>,
    reporter: Reporter,
    held: Arc<HeldJobs>,
    queues: HashMap<Arc<str>, Batch>,
    /// A retention of zero: completed jobs are deleted, also those written outside a tick.
    delete_completed: bool,
}

/// One queue's successes waiting for a tick.
#[derive(Debug)]
struct Batch {
    queue: Arc<QueueSlots>,
    lists: Mutex<BatchLists>,
}

#[derive(Debug, Default)]
struct BatchLists {
    /// Handed over since the dispatcher last looked.
    handed: Vec<Success>,
    /// Their `running` write is still in flight.
    awaiting_start: Vec<Success>,
}

/// A successful attempt whose completion a tick writes. Counted as active until reported.
#[derive(Debug)]
pub(crate) struct Success {
    pub(crate) id: JobId,
    pub(crate) attempt: i32,
    task: String,
    state: Arc<AttemptState>,
    active: Active,
}

/// What an attempt's handler came to.
#[derive(Debug)]
pub(crate) enum Return {
    Ok,
    Err(TaskError),
    Panicked(String),
    /// Aborted at shutdown, past the grace period.
    Aborted,
}

/// An attempt whose handler has returned.
#[derive(Debug)]
pub(crate) struct Ended {
    pub(crate) task: String,
    pub(crate) queue: String,
    pub(crate) state: Arc<AttemptState>,
    pub(crate) returned: Return,
    /// Under a dispatcher: the attempt's count as active, and a plain success is batched.
    pub(crate) active: Option<Active>,
}

impl Completer {
    pub(crate) fn new(
        store: Store,
        own: Store,
        worker_id: Arc<str>,
        reporter: Reporter,
        held: Arc<HeldJobs>,
        queues: &[Arc<QueueSlots>],
        delete_completed: bool,
    ) -> Self {
        let queues = queues
            .iter()
            .map(|queue| {
                let batch = Batch {
                    queue: queue.clone(),
                    lists: Mutex::default(),
                };
                (queue.name.clone(), batch)
            })
            .collect();
        Self {
            delete_completed,
            store,
            own,
            worker_id,
            reporter,
            held,
            queues,
        }
    }

    fn fence<'a>(&'a self, state: &AttemptState) -> Fence<'a> {
        Fence {
            id: state.id,
            attempt: state.attempt,
            worker_id: &self.worker_id,
        }
    }

    /// Ends an attempt. A plain success under a dispatcher waits for its queue's next tick and
    /// is reported then (`None` here); every other outcome is written and reported now, by a
    /// future of its own on the heap: the statements' futures are large, and every attempt's
    /// task, which is moved into place as it is spawned, would carry them.
    pub(crate) async fn end(&self, ended: Ended) -> Option<(JobOutcome, Option<String>)> {
        let Ended {
            task,
            queue,
            state,
            returned,
            active,
        } = ended;
        if state.is_abandoned() {
            // Released and reported at shutdown: what the handler returned comes too late.
            return None;
        }
        // An attempt that lost its lease is written on its own, fenced out: in a tick, its job
        // (maybe claimed again since, and running) would count as finishing, and a keyed claim
        // would leave it out of its key's held jobs.
        let plain_success = matches!(returned, Return::Ok)
            && !state.completed_in_tx()
            && !state.is_cancel_requested()
            && !state.is_lease_lost();
        if let Some(active) = active {
            if plain_success && let Some(batch) = self.queues.get(queue.as_str()) {
                if state.has_unwritten_progress() && state.started().await {
                    Box::pin(state.flush()).await;
                }
                batch.hand_over(Success {
                    id: state.id,
                    attempt: state.attempt,
                    task,
                    state,
                    active,
                });
                return None;
            }
            let ended = Box::pin(self.end_now(task, &queue, state, returned)).await;
            // Reported: a stopping worker no longer waits for it.
            drop(active);
            return Some(ended);
        }
        Some(Box::pin(self.end_now(task, &queue, state, returned)).await)
    }

    async fn end_now(
        &self,
        task: String,
        queue: &str,
        state: Arc<AttemptState>,
        returned: Return,
    ) -> (JobOutcome, Option<String>) {
        let (written, error) = if state.started().await {
            state.flush().await;
            self.write_once_reachable(&state, queue, &returned).await
        } else {
            (Ok(None), None)
        };
        let outcome = match written {
            Ok(Some(outcome)) => outcome,
            Ok(None) => JobOutcome::LeaseLost,
            Err(err) => {
                let _span = state.trace.span().enter();
                tracing::error!(error = %err, "could not write the attempt's outcome");
                JobOutcome::Unrecorded
            }
        };
        self.held.forget_attempt(&state);
        self.reporter.finished([Finished {
            state,
            task,
            outcome,
            error: error.clone(),
        }]);
        (outcome, error)
    }

    /// [`write`](Self::write), again while the database cannot be reached: a failure, retry,
    /// snooze or cancellation is written once it is back, as a success is with a later tick,
    /// rather than left to the lease's end (which would spend an attempt and lose the handler's
    /// error). Meanwhile the lease is renewed as for a running handler; the fence still decides,
    /// and a shutdown past its grace, which releases the job, ends the tries.
    async fn write_once_reachable(
        &self,
        state: &AttemptState,
        queue: &str,
        returned: &Return,
    ) -> (Result<Option<JobOutcome>>, Option<String>) {
        let mut pause = Duration::from_millis(50);
        loop {
            let (written, error) = self.write(state, queue, returned).await;
            match &written {
                Err(err) if err.is_unreachable() && !state.is_abandoned() => {
                    let _span = state.trace.span().enter();
                    tracing::warn!(error = %err, "could not write the attempt's outcome; trying again");
                }
                _ => return (written, error),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(UNREACHABLE_PAUSE);
        }
    }

    /// Writes what the attempt's return means for the job. `Ok(None)`: the fence did not hold.
    async fn write(
        &self,
        state: &AttemptState,
        queue: &str,
        returned: &Return,
    ) -> (Result<Option<JobOutcome>>, Option<String>) {
        // The fence decides: an expired lease nobody took over still lets this attempt finish.
        let fence = self.fence(state);
        let held = |written: Result<bool>, outcome| written.map(|held| held.then_some(outcome));
        // Completed in the handler's transaction: whatever the handler did after its commit
        // (an error, a panic, a stop) cannot undo it.
        if state.completed_in_tx() {
            match store::attempt::is_completed(&self.store, fence, self.delete_completed).await {
                Ok(true) => {
                    if !matches!(returned, Return::Ok) {
                        let _span = state.trace.span().enter();
                        tracing::warn!(
                            "the job was completed in the handler's transaction; \
                             what the handler returned after its commit is not recorded"
                        );
                    }
                    return (Ok(Some(JobOutcome::Completed)), None);
                }
                Ok(false) => {
                    // The handler's transaction rolled back: the job is written here, with the
                    // progress that transaction would have carried.
                    state.unmark_completed_in_tx();
                    if state.has_unwritten_progress() && state.started().await {
                        Box::pin(state.flush()).await;
                    }
                }
                Err(err) => return (Err(err), None),
            }
        }
        let error = match &returned {
            // A snooze is no error, also when a cancel ends the job instead.
            Return::Err(err) if matches!(err.action(), TaskAction::Snooze(_)) => None,
            Return::Err(err) => Some(truncate_error(err.message())),
            _ => None,
        };
        if state.is_cancel_requested() {
            let written = store::attempt::cancelled(&self.store, fence, error.as_deref()).await;
            return (held(written, JobOutcome::Cancelled), error);
        }
        match returned {
            Return::Ok => {
                let written = run!(self.store, |conn| store::attempt::complete(
                    &self.store,
                    conn,
                    fence,
                    self.delete_completed
                ));
                (held(written, JobOutcome::Completed), None)
            }
            Return::Err(err) => self.write_failure(state, queue, fence, err).await,
            Return::Panicked(message) => {
                let err = TaskError::retry(format_args!("handler panicked: {message}"));
                self.write_failure(state, queue, fence, &err).await
            }
            Return::Aborted => {
                let written = store::attempt::release(&self.store, fence).await;
                (written.map(|given| given.map(released_as)), None)
            }
        }
    }

    async fn write_failure(
        &self,
        attempt: &AttemptState,
        queue: &str,
        fence: Fence<'_>,
        err: &TaskError,
    ) -> (Result<Option<JobOutcome>>, Option<String>) {
        let message = truncate_error(err.message());
        let failure = match err.action() {
            TaskAction::Retry => Failure::Retry(None),
            TaskAction::RetryAfter(delay) => Failure::Retry(Some(millis(delay))),
            TaskAction::Fail => Failure::Fail,
            TaskAction::Snooze(delay) => Failure::Snooze(millis(delay)),
        };
        let written = store::attempt::fail(&self.store, fence, failure, &message).await;
        let outcome = written.map(|state| {
            state.map(|state| {
                if !state.failed && !state.cancelled {
                    attempt.trace.retries_at(state.run_at);
                }
                if state.due_now
                    && let Some(batch) = self.queues.get(queue)
                {
                    // Retrying at once: look again instead of waiting for the poll.
                    batch.queue.wake.notify_one();
                }
                match (failure, state.failed) {
                    _ if state.cancelled => JobOutcome::Cancelled,
                    (Failure::Snooze(_), _) => JobOutcome::Snoozed,
                    (_, true) => JobOutcome::Failed,
                    (_, false) => JobOutcome::Retrying,
                }
            })
        });
        // A snooze records no error, and reports none.
        let error = (!matches!(failure, Failure::Snooze(_))).then_some(message);
        (outcome, error)
    }

    /// The successes of `queue` for its next tick: those whose start has landed, and those whose
    /// start was never sent, which the tick completes with their start (see
    /// [`Success::is_unstarted`]). Those whose start was refused were never this attempt's to
    /// complete: reported now. Those whose start is in flight wait for it.
    pub(crate) fn take_ready(&self, queue: &str) -> Vec<Success> {
        let Some(batch) = self.queues.get(queue) else {
            return Vec::new();
        };
        let mut ready = Vec::new();
        let mut refused = Vec::new();
        {
            let mut lists = batch.lists();
            if lists.handed.is_empty() && lists.awaiting_start.is_empty() {
                return ready;
            }
            let mut handed = std::mem::take(&mut lists.handed);
            handed.append(&mut lists.awaiting_start);
            for success in handed {
                match success.state.start_status() {
                    // Unsent: its start is written with its completion.
                    Start::Confirmed | Start::Unsent => ready.push(success),
                    Start::Sent => lists.awaiting_start.push(success),
                    Start::Refused => refused.push(success),
                }
            }
        }
        self.batch_written(refused, &[]);
        ready
    }

    /// A tick could not be sent: its successes go with a later one.
    pub(crate) fn put_back(&self, queue: &str, successes: Vec<Success>) {
        if let Some(batch) = self.queues.get(queue) {
            batch.lists().handed.extend(successes);
        }
    }

    /// Reports the successes a tick carried: completed when the tick wrote them (`written`),
    /// fenced off otherwise. One completed with its start is reported started first.
    pub(crate) fn batch_written(&self, successes: Vec<Success>, written: &[JobId]) {
        if successes.is_empty() {
            return;
        }
        let written: HashSet<JobId> = written.iter().copied().collect();
        for success in &successes {
            if success.is_unstarted() {
                let held = written.contains(&success.id);
                if held {
                    self.reporter.emit(|| WorkerEvent::JobStarted {
                        id: success.id,
                        task: success.task.clone(),
                        attempt: success.attempt,
                    });
                }
                success.state.confirm_start(held);
            }
        }
        let mut actives = Vec::with_capacity(successes.len());
        let finished: Vec<Finished> = successes
            .into_iter()
            .map(|success| {
                let outcome = if written.contains(&success.id) {
                    JobOutcome::Completed
                } else {
                    JobOutcome::LeaseLost
                };
                self.held.forget_attempt(&success.state);
                actives.push(success.active);
                Finished {
                    state: success.state,
                    task: success.task,
                    outcome,
                    error: None,
                }
            })
            .collect();
        self.reporter.finished(finished);
        // Reported: a stopping dispatcher no longer waits for them.
        drop(actives);
    }

    /// Returns a claimed job that never started to `pending`, its attempt given back.
    pub(crate) async fn release_unstarted(&self, id: JobId, attempt: i32) {
        self.release_unstarted_on(&self.store, id, attempt).await;
    }

    /// [`release_unstarted`](Self::release_unstarted) on `store`: the worker's own connections
    /// when its control thread releases, since the application's runtime, which serves the
    /// client's, may have every thread blocked by handlers.
    async fn release_unstarted_on(&self, store: &Store, id: JobId, attempt: i32) {
        self.held.forget(id, attempt);
        let fence = Fence {
            id,
            attempt,
            worker_id: &self.worker_id,
        };
        if let Err(err) = store::attempt::release(store, fence).await {
            tracing::warn!(job = %id, error = %err, "could not release an unstarted job");
        }
    }

    /// Releases, at shutdown, the attempts whose handlers did not stop when aborted (they block
    /// their threads): each goes back to `pending` without spending its attempt and is
    /// reported `Released`; what its handler returns later is fenced out and not reported.
    pub(crate) async fn release_abandoned(&self) {
        let mut released = Vec::new();
        for held in self.held.all() {
            let (id, attempt) = (held.id, held.attempt);
            let Some(state) = held.running else {
                self.release_unstarted_on(&self.own, id, attempt).await;
                continue;
            };
            if !state.abandon() {
                continue;
            }
            let fence = Fence {
                id,
                attempt,
                worker_id: &self.worker_id,
            };
            let outcome = match store::attempt::release(&self.own, fence).await {
                Ok(Some(cancelled)) => released_as(cancelled),
                Ok(None) => JobOutcome::LeaseLost,
                Err(err) => {
                    let _span = state.trace.span().enter();
                    tracing::error!(error = %err, "could not release a job whose handler does not stop");
                    JobOutcome::Unrecorded
                }
            };
            self.held.forget_attempt(&state);
            released.push(Finished {
                state,
                task: held.task,
                outcome,
                error: None,
            });
        }
        self.reporter.finished(released);
    }

    /// Returns everything this worker still holds to `pending`, at the end of a shutdown.
    pub(crate) async fn release_all(&self) {
        if let Err(err) = store::attempt::release_worker(&self.own, &self.worker_id).await {
            tracing::warn!(worker_id = %self.worker_id, error = %err, "could not release held jobs at shutdown");
        }
    }
}

impl Success {
    /// Whether its start was never sent: the tick that completes it writes its start too.
    pub(crate) fn is_unstarted(&self) -> bool {
        self.state.start_status() == Start::Unsent
    }
}

impl Batch {
    fn lists(&self) -> MutexGuard<'_, BatchLists> {
        self.lists
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a success for the next tick; the first of a batch wakes the dispatcher.
    fn hand_over(&self, success: Success) {
        let first = {
            let mut lists = self.lists();
            lists.handed.push(success);
            lists.handed.len() == 1
        };
        if first {
            self.queue.changed.notify_one();
        }
    }
}

/// A delay a handler asked for, as stored: at most [`MAX_DELAY`](limits::MAX_DELAY), as for
/// enqueues, so that the outcome is always recorded.
fn millis(delay: std::time::Duration) -> i64 {
    limits::millis_rounded_up(delay.min(limits::MAX_DELAY))
}

/// What a release wrote: `cancelled` when a cancel was asked for, else `released`.
fn released_as(cancelled: bool) -> JobOutcome {
    if cancelled {
        JobOutcome::Cancelled
    } else {
        JobOutcome::Released
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use std::time::Duration;

    use sqlx::postgres::PgPoolOptions;

    use super::{Completer, Ended, Return};
    use crate::attempt::{AttemptState, Backend};
    use crate::attempt_trace::AttemptTrace;
    use crate::job_id::JobId;
    use crate::job_outcome::JobOutcome;
    use crate::schema::Schema;
    use crate::store::Store;
    use crate::worker::event::WorkerEvent;
    use crate::worker::held::HeldJobs;
    use crate::worker::report::Reporter;
    use crate::worker::slots::QueueSlots;

    /// A completer whose batching never reaches a database (its pool never connects).
    fn completer() -> (Completer, Arc<QueueSlots>, Reporter) {
        let pool = PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        let store = Store::new(pool, Duration::from_secs(1), Schema::default());
        let queue = QueueSlots::new("email", 4, false);
        let reporter = Reporter::new();
        let held = Arc::new(HeldJobs::default());
        let completer = Completer::new(
            store.clone(),
            store,
            "worker-1".into(),
            reporter.clone(),
            held,
            std::slice::from_ref(&queue),
            false,
        );
        (completer, queue, reporter)
    }

    fn attempt(id: i64) -> Arc<AttemptState> {
        AttemptState::unconfirmed(
            JobId::from(id),
            1,
            Backend::Recording(Mutex::default()),
            AttemptTrace::none(),
        )
    }

    async fn succeed(completer: &Completer, queue: &Arc<QueueSlots>, state: &Arc<AttemptState>) {
        let slot = queue.try_slot().expect("a free slot");
        let ended = completer
            .end(Ended {
                task: "Welcome".into(),
                queue: "email".into(),
                state: state.clone(),
                returned: Return::Ok,
                active: Some(slot.handler_returned()),
            })
            .await;
        assert!(
            ended.is_none(),
            "a plain success waits for the queue's tick"
        );
    }

    #[tokio::test]
    async fn a_success_whose_start_is_in_flight_waits_for_it() {
        let (completer, queue, _) = completer();
        let state = attempt(1);
        state.start_sent();
        succeed(&completer, &queue, &state).await;
        assert!(completer.take_ready("email").is_empty(), "not started yet");
        assert_eq!(queue.active(), 1, "still to be reported");
        state.confirm_start(true);
        let ready = completer.take_ready("email");
        assert_eq!(ready.iter().map(|s| s.id).collect::<Vec<_>>(), [1.into()]);
        assert!(!ready[0].is_unstarted(), "completed from running");
        assert!(completer.take_ready("email").is_empty(), "taken once");
    }

    #[tokio::test]
    async fn a_success_whose_start_was_never_sent_is_completed_with_it() {
        let (completer, queue, reporter) = completer();
        let mut events = reporter.subscribe();
        let (written, fenced) = (attempt(5), attempt(6));
        for state in [&written, &fenced] {
            succeed(&completer, &queue, state).await;
        }
        let ready = completer.take_ready("email");
        assert_eq!(
            ready.len(),
            2,
            "ready at once: the tick writes the start too"
        );
        assert!(ready.iter().all(|success| success.is_unstarted()));
        completer.batch_written(ready, &[JobId::from(5)]);
        let mut seen = Vec::new();
        while let Ok(event) = events.try_recv() {
            match event {
                WorkerEvent::JobStarted { id, .. } => seen.push((id.get(), "started")),
                WorkerEvent::JobFinished { id, outcome, .. } => seen.push((
                    id.get(),
                    if outcome == JobOutcome::Completed {
                        "completed"
                    } else {
                        "lost"
                    },
                )),
                _ => {}
            }
        }
        assert_eq!(
            seen,
            [(5, "started"), (5, "completed"), (6, "lost")],
            "a written one is reported started, then completed"
        );
        assert!(written.started().await);
        assert!(!fenced.started().await, "the fenced one's start is refused");
    }

    #[tokio::test]
    async fn a_tick_reports_what_it_wrote_and_what_was_fenced_off() {
        let (completer, queue, reporter) = completer();
        let mut events = reporter.subscribe();
        let (written, fenced) = (attempt(1), attempt(2));
        for state in [&written, &fenced] {
            state.start_sent();
            succeed(&completer, &queue, state).await;
            state.confirm_start(true);
        }
        let ready = completer.take_ready("email");
        assert_eq!(ready.len(), 2);
        completer.batch_written(ready, &[JobId::from(1)]);
        let mut outcomes = Vec::new();
        for _ in 0..2 {
            if let Ok(WorkerEvent::JobFinished { id, outcome, .. }) = events.try_recv() {
                outcomes.push((id.get(), outcome));
            }
        }
        outcomes.sort_by_key(|(id, _)| *id);
        assert_eq!(
            outcomes,
            [(1, JobOutcome::Completed), (2, JobOutcome::LeaseLost)]
        );
        let stats = *reporter.stats().borrow();
        assert_eq!((stats.completed, stats.lost), (1, 1));
        assert_eq!(queue.active(), 0, "reported: nothing left to wait for");
    }

    #[tokio::test]
    async fn a_refused_start_is_reported_lost_without_a_tick() {
        let (completer, queue, reporter) = completer();
        let state = attempt(3);
        state.start_sent();
        succeed(&completer, &queue, &state).await;
        state.confirm_start(false);
        assert!(completer.take_ready("email").is_empty());
        assert_eq!(reporter.stats().borrow().lost, 1);
        assert_eq!(queue.active(), 0);
    }

    #[tokio::test]
    async fn successes_of_a_failed_tick_go_with_a_later_one() {
        let (completer, queue, _) = completer();
        let state = attempt(4);
        succeed(&completer, &queue, &state).await;
        state.confirm_start(true);
        let ready = completer.take_ready("email");
        completer.put_back("email", ready);
        assert_eq!(completer.take_ready("email").len(), 1);
    }
}

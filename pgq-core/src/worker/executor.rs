//! Runs one claimed job through its handler, catching a panic and abortable at shutdown, and
//! hands what it returned to the completer. Under a dispatcher the handler runs in the
//! attempt's own task rather than in one more: a task spawned per job cost the worker a tenth
//! of its time.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::{Aborted, abortable};
use tracing::Instrument;

use crate::attempt::{AttemptState, Backend};
use crate::attempt_trace::{AttemptTrace, Traced};
use crate::client::Client;
use crate::context::JobContext;
use crate::job_outcome::JobOutcome;
use crate::panic_message::panic_message;
use crate::state::StateMap;
use crate::store::tick::ClaimedJob;
use crate::task_error::TaskError;
use crate::trace_context;
use crate::worker::completer::{Completer, Ended, Return};
use crate::worker::held::HeldJobs;
use crate::worker::slots::Slot;
use crate::worker::tasks::Tasks;

#[derive(Debug)]
pub(crate) struct Executor {
    pub(crate) client: Client,
    pub(crate) worker_id: Arc<str>,
    pub(crate) tasks: Arc<Tasks>,
    pub(crate) state: Arc<StateMap>,
    pub(crate) held: Arc<HeldJobs>,
    pub(crate) completer: Arc<Completer>,
}

impl Executor {
    /// The live state of a claimed job's attempt; `confirmed` when its `running` write has
    /// landed.
    pub(crate) fn attempt_state(&self, job: &ClaimedJob, confirmed: bool) -> Arc<AttemptState> {
        let backend = Backend::Database {
            client: self.client.clone(),
            worker_id: self.worker_id.clone(),
        };
        let trace = AttemptTrace::start(Traced {
            id: job.id,
            task: &job.task,
            queue: &job.queue,
            attempt: job.attempt,
            worker_id: &self.worker_id,
            run_at: Some(job.run_at),
        });
        trace_context::continue_in(trace.span(), job.meta.as_deref());
        if confirmed {
            AttemptState::new(job.id, job.attempt, backend, trace)
        } else {
            AttemptState::unconfirmed(job.id, job.attempt, backend, trace)
        }
    }

    /// Runs one attempt and ends it through the completer. Under a dispatcher (`slot`), the
    /// slot frees as soon as the handler returns, and a plain success waits for the queue's
    /// next tick (`None` here); without one (a drain), every outcome is written and returned.
    pub(crate) async fn execute(
        self: Arc<Self>,
        job: ClaimedJob,
        state: Arc<AttemptState>,
        slot: Option<Slot>,
    ) -> Option<(JobOutcome, Option<String>)> {
        let ctx = JobContext::new(
            job.task.clone(),
            job.queue.clone(),
            job.unique_key,
            self.state.clone(),
            state.clone(),
        );
        let returned = match self.tasks.get(&job.task) {
            Some(entry) => {
                let run = (entry.run)(job.payload, ctx).instrument(state.trace.span().clone());
                let (handler, abort) = abortable(AssertUnwindSafe(run).catch_unwind());
                self.held.set_abort(job.id, abort);
                let handled = if slot.is_some() {
                    handler.await
                } else {
                    // A drain's handler gets a task of its own: inline jobs nest (a handler's
                    // enqueue runs the jobs it enqueued, inside it), and levels polled from one
                    // task would deepen one stack until it overflowed.
                    // Aborted if the drain is dropped meanwhile (a test's timeout): a handler
                    // must not run on after its drain, changing what the test reads.
                    let task = tokio::spawn(handler);
                    let _abort_if_dropped = AbortOnDrop(task.abort_handle());
                    task.await.unwrap_or(Err(Aborted))
                };
                returned(handled)
            }
            None => Return::Err(TaskError::fail(format_args!(
                "no handler for task {:?} in this worker",
                job.task
            ))),
        };
        self.held.handler_returned(&state);
        state.trace.handler_returned();
        let active = slot.map(Slot::handler_returned);
        self.completer
            .end(Ended {
                task: job.task,
                queue: job.queue,
                state,
                returned,
                active,
            })
            .await
    }
}

/// Aborts its task when dropped; a task that finished is left as it is.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

type Handled = Result<Result<Result<(), TaskError>, Box<dyn Any + Send>>, Aborted>;

fn returned(result: Handled) -> Return {
    match result {
        Ok(Ok(Ok(()))) => Return::Ok,
        Ok(Ok(Err(err))) => Return::Err(err),
        Ok(Err(panic)) => Return::Panicked(panic_message(panic)),
        Err(Aborted) => Return::Aborted,
    }
}

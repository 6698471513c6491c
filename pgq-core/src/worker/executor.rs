//! Runs one claimed job through its handler, in a task of its own so that a panic is caught and
//! shutdown can abort it, and hands what it returned to the completer.

use std::any::Any;
use std::sync::Arc;

use tokio::task::JoinError;
use tracing::Instrument;

use crate::attempt::{AttemptState, Backend};
use crate::attempt_trace::{AttemptTrace, Traced};
use crate::client::Client;
use crate::context::JobContext;
use crate::job_outcome::JobOutcome;
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
            worker_id: self.worker_id.to_string(),
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
                let handler = tokio::spawn(run);
                self.held.set_abort(job.id, handler.abort_handle());
                returned(handler.await)
            }
            None => Return::Err(TaskError::fail(format_args!(
                "no handler for task {:?} in this worker",
                job.task
            ))),
        };
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

fn returned(result: Result<Result<(), TaskError>, JoinError>) -> Return {
    match result {
        Ok(Ok(())) => Return::Ok,
        Ok(Err(err)) => Return::Err(err),
        Err(join) if join.is_panic() => Return::Panicked(panic_message(join.into_panic())),
        Err(_) => Return::Aborted,
    }
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

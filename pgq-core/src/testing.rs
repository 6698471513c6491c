//! The database-free attempt behind `pgq-testkit`'s handler unit tests: the handler's context
//! records progress, events and enqueued tasks instead of writing them.

use std::sync::{Arc, Mutex};

use crate::attempt::{AttemptState, Backend, Recording};
use crate::context::JobContext;
use crate::job_id::JobId;
use crate::state::StateMap;

/// One recorded attempt; use it through `pgq_testkit::TestContext`.
#[doc(hidden)]
#[derive(Debug)]
pub struct TestAttempt {
    attempt: Arc<AttemptState>,
    state: StateMap,
}

impl TestAttempt {
    /// An attempt of job `id`, numbered `attempt`.
    pub fn new(id: i64, attempt: i32) -> Self {
        Self {
            attempt: AttemptState::new(
                JobId::from(id),
                attempt,
                Backend::Recording(Mutex::new(Recording::default())),
            ),
            state: StateMap::default(),
        }
    }

    /// Starts over as attempt `attempt` of job `id`, keeping the state values.
    pub fn renumber(&mut self, id: i64, attempt: i32) {
        self.attempt = AttemptState::new(
            JobId::from(id),
            attempt,
            Backend::Recording(Mutex::new(Recording::default())),
        );
    }

    /// A switch that fires `ctx.cancelled()` from anywhere, also while the handler runs.
    pub fn cancel_switch(&self) -> CancelSwitch {
        CancelSwitch(self.attempt.clone())
    }

    /// Makes `value` available through `ctx.state::<S>()`.
    pub fn insert_state<S: Send + Sync + 'static>(&mut self, value: S) {
        self.state.insert(value);
    }

    /// A context for the handler.
    pub fn context(&self, task: &str, queue: &str, unique_key: Option<String>) -> JobContext {
        JobContext::new(
            task.to_owned(),
            queue.to_owned(),
            unique_key,
            Arc::new(self.state.clone()),
            self.attempt.clone(),
        )
    }

    /// Fires `ctx.cancelled()`, as `Client::cancel` does for a running job.
    pub fn cancel(&self) {
        self.attempt.request_cancel();
    }

    /// What the handler recorded so far.
    pub fn recording(&self) -> Recording {
        let mut recorded = None;
        self.attempt.record(|r| recorded = Some(r.clone()));
        recorded.unwrap_or_default()
    }

    /// Whether the handler called `ctx.complete_in`.
    pub fn completed_in_tx(&self) -> bool {
        self.attempt.completed_in_tx()
    }
}

/// Fires a test attempt's `ctx.cancelled()`.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct CancelSwitch(Arc<AttemptState>);

impl CancelSwitch {
    /// Cancels the attempt.
    pub fn cancel(&self) {
        self.0.request_cancel();
    }
}

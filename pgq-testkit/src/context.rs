//! [`TestContext`]: run a handler with no database and read what it did.

use pgq_core::__private::TestAttempt;
use pgq_core::{Handler, Task, TaskError};

/// A job context for handler unit tests: no database, no worker. The handler runs exactly as
/// under a worker; progress, events and enqueued tasks are recorded for the test to read.
///
/// ```
/// use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
/// use pgq_testkit::TestContext;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Serialize, Deserialize, Task)]
/// struct Signup { user_id: i64 }
///
/// #[derive(Debug, PartialEq, Serialize, Deserialize, Task)]
/// struct SendWelcome { user_id: i64 }
///
/// #[async_trait]
/// impl Handler for Signup {
///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
///         ctx.progress(50, "account created").await;
///         ctx.enqueue(SendWelcome { user_id: self.user_id }).await?;
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let ctx = TestContext::new();
/// ctx.run(Signup { user_id: 7 }).await.unwrap();
/// assert_eq!(ctx.progress(), vec![(50, "account created".to_string())]);
/// assert_eq!(ctx.enqueued::<SendWelcome>(), vec![SendWelcome { user_id: 7 }]);
/// # }
/// ```
#[derive(Debug)]
pub struct TestContext {
    id: i64,
    attempt: i32,
    inner: TestAttempt,
}

impl Default for TestContext {
    fn default() -> Self {
        Self::new()
    }
}

impl TestContext {
    /// Attempt 1 of job 1.
    pub fn new() -> Self {
        Self {
            id: 1,
            attempt: 1,
            inner: TestAttempt::new(1, 1),
        }
    }

    /// Runs as attempt `attempt` (from 1), for handlers that behave differently on retries.
    pub fn attempt(mut self, attempt: i32) -> Self {
        self.attempt = attempt;
        self.inner.renumber(self.id, attempt);
        self
    }

    /// Runs as job `id`.
    pub fn job_id(mut self, id: i64) -> Self {
        self.id = id;
        self.inner.renumber(id, self.attempt);
        self
    }

    /// Makes `value` available through `ctx.state::<S>()`, as `WorkerBuilder::state` does.
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        self.inner.insert_state(value);
        self
    }

    /// Runs the task's handler once and returns its result. Panics propagate to the test.
    pub async fn run<T: Handler>(&self, task: T) -> Result<(), TaskError> {
        let ctx = self.inner.context(T::NAME, T::QUEUE, task.unique_key());
        task.handle(&ctx).await
    }

    /// Fires `ctx.cancelled()` now; call it before `run` to start cancelled.
    pub fn cancel(&self) {
        self.inner.cancel_switch().cancel();
    }

    /// A switch to cancel from another task while the handler runs.
    pub fn cancel_switch(&self) -> CancelSwitch {
        CancelSwitch(self.inner.cancel_switch())
    }

    /// Every `ctx.progress` call so far: percent (capped at 100) and stage.
    pub fn progress(&self) -> Vec<(u8, String)> {
        self.inner.recording().progress
    }

    /// Every `ctx.event` message so far.
    pub fn events(&self) -> Vec<String> {
        self.inner.recording().events
    }

    /// The tasks of type `T` enqueued through the context so far, in order.
    pub fn enqueued<T: Task>(&self) -> Vec<T> {
        self.inner
            .recording()
            .enqueued
            .into_iter()
            .filter(|(name, _)| *name == T::NAME)
            .map(|(_, payload)| {
                serde_json::from_value(payload).expect("a recorded task deserializes")
            })
            .collect()
    }

    /// Whether the handler completed the job with `ctx.complete_in`.
    pub fn completed_in_tx(&self) -> bool {
        self.inner.completed_in_tx()
    }
}

/// Cancels a [`TestContext`]'s job from anywhere, also while its handler runs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CancelSwitch(pgq_core::__private::CancelSwitch);

impl CancelSwitch {
    /// Fires the handler's `ctx.cancelled()`.
    pub fn cancel(&self) {
        self.0.cancel();
    }
}

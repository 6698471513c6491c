//! [`TestContext`]: run a handler with no database and read what it did.

use pgq_core::__testkit::TestAttempt;
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
    /// Attempt 1 of job 1, with no state.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Ping;
    /// # #[async_trait] impl Handler for Ping {
    /// #     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> { Ok(()) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// assert!(ctx.run(Ping).await.is_ok());
    /// # }
    /// ```
    pub fn new() -> Self {
        Self {
            id: 1,
            attempt: 1,
            inner: TestAttempt::new(1, 1),
        }
    }

    /// Runs as attempt `attempt` (from 1), for handlers that behave differently on retries.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Fetch;
    /// # #[async_trait] impl Handler for Fetch {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         if ctx.attempt() < 3 { Err(TaskError::retry("busy")) } else { Ok(()) }
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use pgq_testkit::TestContext;
    ///
    /// assert!(TestContext::new().run(Fetch).await.is_err());
    /// assert!(TestContext::new().attempt(3).run(Fetch).await.is_ok());
    /// # }
    /// ```
    pub fn attempt(mut self, attempt: i32) -> Self {
        assert!(
            attempt >= 1,
            "TestContext::attempt({attempt}): attempts count from 1"
        );
        self.attempt = attempt;
        self.inner.renumber(self.id, attempt);
        self
    }

    /// Runs as job `id`: what `ctx.id()` returns, and part of `ctx.idempotency_key()` for
    /// tasks without a unique key.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Charge;
    /// # #[async_trait] impl Handler for Charge {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         ctx.event(&ctx.idempotency_key()).await;
    /// #         Ok(())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new().job_id(42);
    /// ctx.run(Charge).await.unwrap();
    /// assert_eq!(ctx.events(), ["pgq:job:42"]);
    /// # }
    /// ```
    pub fn job_id(mut self, id: i64) -> Self {
        self.id = id;
        self.inner.renumber(id, self.attempt);
        self
    }

    /// Makes `value` available through `ctx.state::<S>()`, as `WorkerBuilder::state` does.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// struct Billing { review_above_cents: i64 }
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Charge { cents: i64 }
    /// # #[async_trait] impl Handler for Charge {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         ctx.state::<Billing>().ok_or_else(|| TaskError::fail("no Billing state"))?;
    /// #         Ok(())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new().state(Billing { review_above_cents: 100_000 });
    /// ctx.run(Charge { cents: 500 }).await.unwrap();
    /// # }
    /// ```
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        self.inner.insert_state(value);
        self
    }

    /// Runs the task's handler once and returns its result. Panics propagate to the test.
    ///
    /// `ctx.task()`, `ctx.queue()` and the unique key come from the task's `#[task(...)]`
    /// settings; calling `run` again records into the same context.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct CallPartner;
    /// # #[async_trait] impl Handler for CallPartner {
    /// #     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
    /// #         Err(TaskError::retry_after(Duration::from_secs(30), "rate limited"))
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use pgq_core::TaskAction;
    ///
    /// let err = pgq_testkit::TestContext::new().run(CallPartner).await.unwrap_err();
    /// assert_eq!(err.action(), TaskAction::RetryAfter(Duration::from_secs(30)));
    /// assert_eq!(err.message(), "rate limited");
    /// # }
    /// ```
    pub async fn run<T: Handler>(&self, task: T) -> Result<(), TaskError> {
        self.inner.run(task).await
    }

    /// Runs the handler of `T` on a payload in its stored form, JSON, exactly as a worker does:
    /// decoded (a payload that does not decode is the failed attempt it would be in
    /// production), within the task's `timeout`, with its backoff applied to a plain retry.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// # #[async_trait] impl Handler for SendWelcome {
    /// #     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> { Ok(()) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// ctx.perform::<SendWelcome>(r#"{"user_id": 7}"#).await.unwrap();
    /// // A row written by an older version of the task, with a string id, would not run:
    /// let err = ctx.perform::<SendWelcome>(r#"{"user_id": "7"}"#).await.unwrap_err();
    /// assert!(err.message().contains("user_id"), "{}", err.message());
    /// # }
    /// ```
    pub async fn perform<T: Handler>(&self, json: &str) -> Result<(), TaskError> {
        self.inner.run_json::<T>(json).await
    }

    /// Fires `ctx.cancelled()` now; call it before `run` to start cancelled.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Backfill { days: u32 }
    /// # #[async_trait] impl Handler for Backfill {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         for day in 0..self.days {
    /// #             if ctx.is_cancelled() { return Err(TaskError::fail("cancelled")); }
    /// #             ctx.progress((day * 100 / self.days) as u8, "backfilling").await;
    /// #         }
    /// #         Ok(())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// ctx.cancel();
    /// let err = ctx.run(Backfill { days: 30 }).await.unwrap_err();
    /// assert_eq!(err.message(), "cancelled");
    /// assert!(ctx.progress().is_empty());
    /// # }
    /// ```
    pub fn cancel(&self) {
        self.inner.cancel_switch().cancel();
    }

    /// A switch to cancel from another task while the handler runs. Take it once the context
    /// is numbered: [`attempt`](Self::attempt) and [`job_id`](Self::job_id) start a new attempt,
    /// which keeps a cancel already made but not the switches taken before.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Watch;
    /// # #[async_trait] impl Handler for Watch {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         ctx.cancelled().await;
    /// #         Err(TaskError::fail("stopped on request"))
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// let switch = ctx.cancel_switch();
    /// let (result, ()) = tokio::join!(ctx.run(Watch), async move { switch.cancel() });
    /// assert_eq!(result.unwrap_err().message(), "stopped on request");
    /// # }
    /// ```
    pub fn cancel_switch(&self) -> CancelSwitch {
        CancelSwitch(self.inner.cancel_switch())
    }

    /// Every `ctx.progress` call so far: percent (capped at 100) and stage. Nothing is
    /// throttled here: each call is recorded.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Import { rows: u32 }
    /// # #[async_trait] impl Handler for Import {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         for row in 1..=self.rows { ctx.progress((row * 100 / self.rows) as u8, "importing").await; }
    /// #         Ok(())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// ctx.run(Import { rows: 2 }).await.unwrap();
    /// assert_eq!(ctx.progress(), [(50, "importing".to_string()), (100, "importing".to_string())]);
    /// # }
    /// ```
    pub fn progress(&self) -> Vec<(u8, String)> {
        self.inner.recording().progress
    }

    /// Every `ctx.event` message so far.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Import { file: String }
    /// # #[async_trait] impl Handler for Import {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         ctx.event(&format!("imported {}", self.file)).await;
    /// #         Ok(())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// ctx.run(Import { file: "a.csv".into() }).await.unwrap();
    /// assert_eq!(ctx.events(), ["imported a.csv"]);
    /// # }
    /// ```
    pub fn events(&self) -> Vec<String> {
        self.inner.recording().events
    }

    /// The tasks of type `T` enqueued through the context so far, in order. Nothing reaches a
    /// database.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Signup { user_id: i64 }
    /// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, Task)]
    /// struct SendWelcome { user_id: i64 }
    /// # #[async_trait] impl Handler for Signup {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         ctx.enqueue(SendWelcome { user_id: self.user_id }).await?;
    /// #         Ok(())
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// ctx.run(Signup { user_id: 7 }).await.unwrap();
    /// assert_eq!(ctx.enqueued::<SendWelcome>(), [SendWelcome { user_id: 7 }]);
    /// # }
    /// ```
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

    /// Whether the handler completed the job with `ctx.complete_in`. Its transaction needs a
    /// real database, such as a [`TestDatabase`](crate::TestDatabase)'s pool.
    ///
    /// ```no_run
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Ship { order_id: i64 }
    /// # #[async_trait] impl Handler for Ship {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         let mut tx = ctx.state::<sqlx::PgPool>().unwrap().begin().await?;
    /// #         ctx.complete_in(&mut tx).await?;
    /// #         tx.commit().await?;
    /// #         Ok(())
    /// #     }
    /// # }
    /// # async fn example() {
    /// let db = pgq_testkit::TestDatabase::new().await;
    /// let ctx = pgq_testkit::TestContext::new().state(db.pool().clone());
    /// ctx.run(Ship { order_id: 42 }).await.unwrap();
    /// assert!(ctx.completed_in_tx());
    /// # }
    /// ```
    pub fn completed_in_tx(&self) -> bool {
        self.inner.completed_in_tx()
    }
}

/// Cancels a [`TestContext`]'s job from anywhere, also while its handler runs. Cheap to clone.
///
/// ```
/// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Watch;
/// # #[async_trait] impl Handler for Watch {
/// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
/// #         ctx.cancelled().await;
/// #         Err(TaskError::fail("stopped on request"))
/// #     }
/// # }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let ctx = pgq_testkit::TestContext::new();
/// let switch = ctx.cancel_switch();
/// tokio::spawn(async move { switch.cancel() });
/// assert!(ctx.run(Watch).await.is_err());
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CancelSwitch(pgq_core::__testkit::CancelSwitch);

impl CancelSwitch {
    /// Fires the handler's `ctx.cancelled()`.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Watch;
    /// # #[async_trait] impl Handler for Watch {
    /// #     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    /// #         ctx.cancelled().await;
    /// #         Err(TaskError::fail("stopped on request"))
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let ctx = pgq_testkit::TestContext::new();
    /// let switch = ctx.cancel_switch();
    /// let (result, ()) = tokio::join!(ctx.run(Watch), async move { switch.cancel() });
    /// assert!(result.is_err());
    /// # }
    /// ```
    pub fn cancel(&self) {
        self.0.cancel();
    }
}

//! [`JobContext`]: what a handler knows about the job it runs, and what it can do about it.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgConnection;

use crate::attempt::{AttemptState, Backend};
use crate::defaults;
use crate::enqueue::{self, EnqueueOptions};
use crate::enqueued::Enqueued;
use crate::error::{Error, Result};
use crate::job_id::JobId;
use crate::limits;
use crate::state::StateMap;
use crate::store;
use crate::task::Task;

/// The job a handler is running: its identity and attempt, application state, and the
/// services around it — progress, cancellation, leases, completion in a transaction.
///
/// A worker hands one to [`Handler::handle`](crate::Handler::handle) for each attempt; in
/// handler unit tests, `pgq_testkit::TestContext` makes one without a database.
///
/// ```
/// use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Export { account_id: i64 }
///
/// #[async_trait]
/// impl Handler for Export {
///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
///         ctx.progress(0, "collecting").await;
///         println!("export {} on attempt {}", ctx.id(), ctx.attempt());
///         Ok(())
///     }
/// }
/// ```
#[derive(Debug)]
pub struct JobContext {
    task: String,
    queue: String,
    unique_key: Option<String>,
    state: Arc<StateMap>,
    attempt: Arc<AttemptState>,
}

impl JobContext {
    pub(crate) fn new(
        task: String,
        queue: String,
        unique_key: Option<String>,
        state: Arc<StateMap>,
        attempt: Arc<AttemptState>,
    ) -> Self {
        Self {
            task,
            queue,
            unique_key,
            state,
            attempt,
        }
    }

    /// The job's id.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Thumbnail { image_id: i64 }
    /// #[async_trait]
    /// impl Handler for Thumbnail {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         let path = format!("/tmp/thumbnail-{}.png", ctx.id());
    ///         println!("rendering image {} to {path}", self.image_id);
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn id(&self) -> JobId {
        self.attempt.id
    }

    /// The attempt being run, starting at 1.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Fetch { url: String }
    /// #[async_trait]
    /// impl Handler for Fetch {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         // Ask the mirror once the primary has failed twice.
    ///         let host = if ctx.attempt() > 2 { "mirror.example" } else { "primary.example" };
    ///         println!("fetching {} from {host}", self.url);
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn attempt(&self) -> i32 {
        self.attempt.attempt
    }

    /// The task name stored in the row.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(Serialize, Deserialize, Task)]
    /// #[task(name = "reports.monthly")]
    /// struct MonthlyReport { month: u32 }
    ///
    /// #[async_trait]
    /// impl Handler for MonthlyReport {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         assert_eq!(ctx.task(), "reports.monthly");
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn task(&self) -> &str {
        &self.task
    }

    /// The queue the job was claimed from: the task's, or the one
    /// [`EnqueueOptions::queue`](crate::EnqueueOptions::queue) chose.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Resize { image_id: i64 }
    /// #[async_trait]
    /// impl Handler for Resize {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         let quality = if ctx.queue() == "backfill" { 60 } else { 90 };
    ///         println!("resizing {} at quality {quality}", self.image_id);
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// A key that is the same for every attempt of this job, for deduplicating side effects
    /// (payment idempotency keys, say): `<task>:<unique key>` when the job has a unique key,
    /// otherwise `pgq:job:<id>`.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Charge { invoice_id: i64 }
    /// # async fn charge(invoice_id: i64, idempotency_key: &str) -> Result<(), std::io::Error> { Ok(()) }
    /// #[async_trait]
    /// impl Handler for Charge {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         // A retry after a crash sends the same key, so the provider charges once.
    ///         charge(self.invoice_id, &ctx.idempotency_key()).await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn idempotency_key(&self) -> String {
        match &self.unique_key {
            Some(key) => format!("{}:{key}", self.task),
            None => format!("pgq:job:{}", self.id()),
        }
    }

    /// The value of type `S` given to [`WorkerBuilder::state`](crate::WorkerBuilder::state):
    /// a pool, an HTTP client, configuration.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Charge { cents: i64 }
    /// struct Billing { api_key: String }
    ///
    /// #[async_trait]
    /// impl Handler for Charge {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         let billing = ctx.state::<Billing>().ok_or_else(|| TaskError::fail("no Billing state"))?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn state<S: Send + Sync + 'static>(&self) -> Option<&S> {
        self.state.get::<S>()
    }

    /// Reports progress (0–100, larger values count as 100) and the current stage. An empty
    /// stage keeps the last one reported (the progress alone moves).
    ///
    /// Writes are throttled to one a second per job; the latest state is always written, at
    /// the latest when the attempt ends (with the completion, after
    /// [`complete_in`](Self::complete_in), and nothing after it). Visible through
    /// [`Client::job`](crate::Client::job) and [`Client::watch`](crate::Client::watch). A job
    /// that goes back to `pending` starts its next attempt at 0, with no stage.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Import { rows: u32 }
    /// #[async_trait]
    /// impl Handler for Import {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         for row in 0..self.rows {
    ///             ctx.progress((row * 100 / self.rows) as u8, "importing").await;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub async fn progress(&self, percent: u8, stage: &str) {
        let recorded = self
            .attempt
            .record(|r| r.progress.push((percent.min(100), stage.to_owned())));
        if !recorded {
            self.attempt.report(Some(percent), Some(stage), false).await;
        }
    }

    /// Records an event: counted in the job's `events_count` (throttled like progress) and
    /// logged with `tracing`.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Import { files: Vec<String> }
    /// #[async_trait]
    /// impl Handler for Import {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         for file in &self.files {
    ///             ctx.event(&format!("imported {file}")).await;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub async fn event(&self, message: &str) {
        tracing::info!(job = %self.id(), attempt = self.attempt(), "{message}");
        if !self.attempt.record(|r| r.events.push(message.to_owned())) {
            self.attempt.report(None, None, true).await;
        }
    }

    /// Whether the job was cancelled, or this attempt lost its lease: either way, stop.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Backfill { ids: Vec<i64> }
    /// # async fn reindex(id: i64) -> Result<(), std::io::Error> { Ok(()) }
    /// #[async_trait]
    /// impl Handler for Backfill {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         for id in self.ids {
    ///             if ctx.is_cancelled() {
    ///                 return Err(TaskError::fail(format_args!("stopped before {id}")));
    ///             }
    ///             reindex(id).await?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.attempt.is_stopped()
    }

    /// Resolves when the job is cancelled (or this attempt loses its lease). A handler that
    /// returns after it ends the job `cancelled`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Crawl { url: String }
    /// # async fn crawl(url: &str) -> Result<(), TaskError> { Ok(()) }
    /// #[async_trait]
    /// impl Handler for Crawl {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         tokio::select! {
    ///             done = crawl(&self.url) => done,
    ///             _ = ctx.cancelled() => Err(TaskError::fail("cancelled")),
    ///         }
    ///     }
    /// }
    /// ```
    pub async fn cancelled(&self) {
        self.attempt.stopped().await;
    }

    /// Whether this attempt lost its lease: another worker may be running the job, and this
    /// attempt's result will be dropped.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Render { video_id: i64 }
    /// # async fn render(video_id: i64) {}
    /// #[async_trait]
    /// impl Handler for Render {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         render(self.video_id).await;
    ///         if ctx.lease_lost() {
    ///             println!("video {}: another worker owns this job now", self.video_id);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn lease_lost(&self) -> bool {
        self.attempt.is_lease_lost()
    }

    /// Holds the job for at least `duration` from now, for work the handler knows is long.
    /// Fails with [`Error::LeaseLost`] when the lease already ran out. A duration longer than
    /// [`limits::MAX_LEASE`] (a day) holds the job a day: the worker renews the lease for as
    /// long as the handler runs anyway.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Archive { bucket: String }
    /// #[async_trait]
    /// impl Handler for Archive {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         // Archiving a bucket takes up to half an hour: hold the job that long.
    ///         ctx.extend_lease(Duration::from_secs(45 * 60)).await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub async fn extend_lease(&self, duration: Duration) -> Result<()> {
        let Some(fence) = self.attempt.fence() else {
            return Ok(());
        };
        let Backend::Database { client, .. } = &self.attempt.backend else {
            return Ok(());
        };
        if !self.attempt.writable(client.store()).await {
            // Completed in the handler's transaction, which holds the job's row until it ends:
            // nothing is left to hold, and a write would wait for that transaction.
            return Ok(());
        }
        // Longer than a day is a day: the lease is renewed while the handler runs anyway.
        let millis = limits::millis_rounded_up(duration.min(limits::MAX_LEASE));
        if store::lease::extend(client.store(), fence, millis).await? {
            Ok(())
        } else {
            self.attempt.lose_lease();
            Err(self.lease_lost_error())
        }
    }

    /// Completes the job inside the handler's own transaction, so that its writes and the
    /// completion commit together or not at all. Fenced: if the lease was lost, it fails with
    /// [`Error::LeaseLost`] instead of completing a job another worker now owns. The stage and
    /// events not written yet go with the completion, in the transaction's own statement
    /// (progress becomes 100); from then on the transaction holds the job's row, so progress,
    /// events and [`extend_lease`](Self::extend_lease) write nothing more. Called again in the
    /// same transaction, it does nothing.
    ///
    /// ```no_run
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Ship { order_id: i64 }
    /// #[async_trait]
    /// impl Handler for Ship {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         let pool = ctx.state::<sqlx::PgPool>().expect("pool in state");
    ///         let mut tx = pool.begin().await?;
    ///         sqlx::query("UPDATE orders SET shipped = true WHERE id = $1")
    ///             .bind(self.order_id)
    ///             .execute(&mut *tx)
    ///             .await?;
    ///         ctx.complete_in(&mut tx).await?;
    ///         tx.commit().await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub async fn complete_in(&self, conn: &mut PgConnection) -> Result<()> {
        let (Some(fence), Backend::Database { client, .. }) =
            (self.attempt.fence(), &self.attempt.backend)
        else {
            self.attempt.mark_completed_in_tx(None);
            return Ok(());
        };
        if self
            .attempt
            .complete_in(client.store(), conn, fence)
            .await?
        {
            Ok(())
        } else {
            self.attempt.lose_lease();
            Err(self.lease_lost_error())
        }
    }

    /// Enqueues a follow-up task (recorded instead under a test context).
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Signup { user_id: i64 }
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// #[async_trait]
    /// impl Handler for Signup {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         ctx.enqueue(SendWelcome { user_id: self.user_id }).await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub async fn enqueue<T: Task>(&self, task: T) -> Result<Enqueued> {
        self.enqueue_with(task, EnqueueOptions::default()).await
    }

    /// Enqueues a follow-up task with options (recorded instead under a test context).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, EnqueueOptions, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct StartTrial { user_id: i64 }
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct EndTrial { user_id: i64 }
    /// #[async_trait]
    /// impl Handler for StartTrial {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         let in_two_weeks = EnqueueOptions::default().delay(Duration::from_secs(14 * 24 * 3600));
    ///         ctx.enqueue_with(EndTrial { user_id: self.user_id }, in_two_weeks).await?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub async fn enqueue_with<T: Task>(
        &self,
        task: T,
        options: EnqueueOptions,
    ) -> Result<Enqueued> {
        match &self.attempt.backend {
            Backend::Database { client, .. } => client.enqueue_with(task, options).await,
            Backend::Recording(_) => {
                // Refused as a real enqueue refuses it: a handler that passes its unit test
                // must not fail on this in production.
                enqueue::template::<T>(&options)?;
                enqueue::prepare(&task, defaults::MAX_PAYLOAD_BYTES)?;
                let payload = serde_json::to_value(&task).map_err(|source| Error::Serialize {
                    task: T::NAME,
                    source,
                })?;
                let mut index = 0;
                self.attempt.record(|r| {
                    r.enqueued.push((T::NAME, payload));
                    index = r.enqueued.len();
                });
                Ok(Enqueued::Inserted(JobId::from(index as i64)))
            }
        }
    }

    fn lease_lost_error(&self) -> Error {
        Error::LeaseLost {
            id: self.id(),
            attempt: self.attempt(),
        }
    }
}

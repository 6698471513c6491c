//! [`Client`]: enqueue and inspect jobs.

use sqlx::PgConnection;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::enqueue::{self, DEFAULT_MAX_PAYLOAD_BYTES, EnqueueOptions, Enqueued};
use crate::error::Result;
use crate::job::Job;
use crate::job_id::JobId;
use crate::maintenance::cleaner::{self, Retention};
use crate::maintenance::rescuer;
use crate::stats::QueueStats;
use crate::store;
use crate::store::control::Cancellation;
use crate::task::Task;
use crate::watch::JobWatch;

/// The connections a pool made by [`Client::connect`] keeps at most.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10;

/// pgq's handle on a database: enqueues tasks and reads jobs. Cheap to clone.
///
/// ```no_run
/// use pgq_core::{Client, Task};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Task)]
/// struct Ping;
///
/// # async fn example() -> pgq_core::Result<()> {
/// let client = Client::connect("postgres://localhost/app").await?;
/// client.migrate().await?;
/// let id = client.enqueue(Ping).await?.id();
/// let job = client.job(id).await?.expect("just enqueued");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    pool: PgPool,
    max_payload_bytes: usize,
}

impl Client {
    /// Connects a new pool of up to [`DEFAULT_MAX_CONNECTIONS`] connections.
    pub async fn connect(url: &str) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(DEFAULT_MAX_CONNECTIONS)
            .connect(url)
            .await?;
        Ok(Self::new(pool))
    }

    /// Uses an existing pool.
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }

    /// Refuses payloads larger than `bytes` of JSON (default 256 KiB).
    pub fn with_max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// The pool the client runs on.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Creates or updates pgq's schema; see [`migrate`](crate::migrate).
    pub async fn migrate(&self) -> Result<()> {
        crate::migrate(&self.pool).await
    }

    /// Enqueues a task with its `#[task(...)]` settings.
    pub async fn enqueue<T: Task>(&self, task: T) -> Result<Enqueued> {
        self.enqueue_with(task, EnqueueOptions::default()).await
    }

    /// Enqueues a task with per-job overrides.
    pub async fn enqueue_with<T: Task>(
        &self,
        task: T,
        options: EnqueueOptions,
    ) -> Result<Enqueued> {
        let template = enqueue::template::<T>(&options)?;
        let task = enqueue::prepare(&task, self.max_payload_bytes)?;
        store::enqueue::insert_one(
            &self.pool,
            &template,
            &task.payload,
            task.unique_key.as_deref(),
            options.replace,
        )
        .await
    }

    /// Enqueues a task inside the caller's transaction: the job exists if and only if the
    /// transaction commits, and workers are woken at the commit.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendReceipt { order_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *tx).await?;
    /// client.enqueue_in(&mut tx, SendReceipt { order_id: 42 }).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_in<T: Task>(&self, conn: &mut PgConnection, task: T) -> Result<Enqueued> {
        self.enqueue_in_with(conn, task, EnqueueOptions::default())
            .await
    }

    /// [`enqueue_in`](Self::enqueue_in) with per-job overrides.
    pub async fn enqueue_in_with<T: Task>(
        &self,
        conn: &mut PgConnection,
        task: T,
        options: EnqueueOptions,
    ) -> Result<Enqueued> {
        let template = enqueue::template::<T>(&options)?;
        let task = enqueue::prepare(&task, self.max_payload_bytes)?;
        store::enqueue::insert_one(
            conn,
            &template,
            &task.payload,
            task.unique_key.as_deref(),
            options.replace,
        )
        .await
    }

    /// Enqueues many tasks of one type in one statement, honouring unique keys (also between
    /// tasks of the same batch). Returns one outcome per task, in order.
    pub async fn enqueue_many<T: Task>(
        &self,
        tasks: impl IntoIterator<Item = T>,
    ) -> Result<Vec<Enqueued>> {
        let options = EnqueueOptions::default();
        let template = enqueue::template::<T>(&options)?;
        let (payloads, unique_keys) = tasks
            .into_iter()
            .map(|task| {
                enqueue::prepare(&task, self.max_payload_bytes)
                    .map(|prepared| (prepared.payload, prepared.unique_key))
            })
            .collect::<Result<(Vec<_>, Vec<_>)>>()?;
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        store::enqueue::insert_many(&self.pool, &template, payloads, unique_keys).await
    }

    /// The job with this id, or `None` if there is none (never enqueued, or deleted).
    pub async fn job(&self, id: JobId) -> Result<Option<Job>> {
        store::job::find(&self.pool, id).await
    }

    /// Follows a job's progress live until it finishes.
    pub async fn watch(&self, id: JobId) -> Result<JobWatch> {
        JobWatch::start(self.clone(), id).await
    }

    /// Cancels a job: a pending one at once; a claimed or running one by firing its handler's
    /// `ctx.cancelled()` (it ends `cancelled` when the handler returns). A finished job is an
    /// [`Error::JobState`](crate::Error::JobState), a missing one
    /// [`Error::JobNotFound`](crate::Error::JobNotFound).
    pub async fn cancel(&self, id: JobId) -> Result<Cancellation> {
        store::control::cancel(&self.pool, id).await
    }

    /// Runs a failed or cancelled job again: back to `pending`, due now, with at least one
    /// attempt left.
    pub async fn retry(&self, id: JobId) -> Result<()> {
        store::control::retry(&self.pool, id).await
    }

    /// Returns every job the given worker holds to `pending` without spending their attempts:
    /// for operators who know that worker is gone. Returns the released ids.
    pub async fn release_worker(&self, worker_id: &str) -> Result<Vec<JobId>> {
        store::attempt::release_worker(&self.pool, worker_id).await
    }

    /// Rescues every job whose lease expired now, as each worker's rescuer does periodically.
    /// Returns the rescued ids.
    pub async fn rescue_expired(&self) -> Result<Vec<JobId>> {
        rescuer::run_once(&self.pool).await
    }

    /// Deletes finished jobs past `retention`, as each worker's cleaner does periodically.
    /// `None` when another process is cleaning at this moment.
    pub async fn delete_finished(&self, retention: Retention) -> Result<Option<u64>> {
        cleaner::run_once(&self.pool, retention).await
    }

    /// Per-queue counts by status, lag, and recent failures.
    pub async fn stats(&self) -> Result<Vec<QueueStats>> {
        store::maintenance::stats(&self.pool).await
    }
}

//! [`Job`]: a typed view of one row of `pgq.jobs`.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::job_id::JobId;

/// Where a job is in its life.
///
/// `pending → claimed → running → completed | failed | cancelled`, and back to `pending` for
/// a retry, a rescue or a release. The database refuses every other transition.
///
/// ```
/// use pgq_core::JobStatus;
///
/// let status: JobStatus = "failed".parse().unwrap();
/// assert_eq!(status, JobStatus::Failed);
/// assert!(status.is_finished());
/// assert_eq!(status.to_string(), "failed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Waiting for its `run_at` and a free worker.
    Pending,
    /// Taken by a worker, not started yet.
    Claimed,
    /// Its handler is running.
    Running,
    /// Its handler succeeded. Final.
    Completed,
    /// Out of attempts, or failed on purpose. Kept for inspection and manual retry.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl JobStatus {
    /// The name stored in the `status` column.
    ///
    /// ```no_run
    /// # use pgq_core::JobStatus;
    /// # async fn example(pool: sqlx::PgPool) -> Result<(), sqlx::Error> {
    /// let failed: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = $1")
    ///     .bind(JobStatus::Failed.as_str())
    ///     .fetch_one(&pool)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "pending",
            JobStatus::Claimed => "claimed",
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the job has finished: completed, failed or cancelled.
    ///
    /// ```
    /// use pgq_core::JobStatus;
    ///
    /// assert!(JobStatus::Cancelled.is_finished());
    /// assert!(!JobStatus::Running.is_finished());
    /// ```
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "pending" => JobStatus::Pending,
            "claimed" => JobStatus::Claimed,
            "running" => JobStatus::Running,
            "completed" => JobStatus::Completed,
            "failed" => JobStatus::Failed,
            "cancelled" => JobStatus::Cancelled,
            other => return Err(format!("unknown job status {}", crate::text::echoed(other))),
        })
    }
}

/// One failed attempt, as kept in a job's bounded error history: [`Job::errors`] holds the
/// last 10, each message cut to [`limits::MAX_ERROR_BYTES`](crate::limits::MAX_ERROR_BYTES).
///
/// ```no_run
/// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
/// let job = client.job(id).await?.expect("job exists");
/// for error in &job.errors {
///     println!("attempt {} at {}: {}", error.attempt, error.at, error.error);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptError {
    /// The attempt that failed, starting at 1.
    pub attempt: i32,
    /// Its error message, truncated.
    pub error: String,
    /// When it failed, by the database clock.
    pub at: DateTime<Utc>,
}

/// A job row, as [`Client::job`](crate::Client::job) returns it.
///
/// ```no_run
/// # use pgq_core::JobStatus;
/// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
/// let job = client.job(id).await?.expect("job exists");
/// match job.status {
///     JobStatus::Running => println!("{}: {}% {:?}", job.task, job.progress, job.current_stage),
///     JobStatus::Failed => println!("{} failed: {:?}", job.task, job.last_error),
///     status => println!("{} is {status}", job.task),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Job {
    /// The job's id.
    pub id: JobId,
    /// The task name.
    pub task: String,
    /// The queue.
    pub queue: String,
    /// Its priority; higher runs first.
    pub priority: i16,
    /// Where it is in its life.
    pub status: JobStatus,
    /// The task, serialized.
    pub payload: serde_json::Value,
    /// When it may run next.
    pub run_at: DateTime<Utc>,
    /// Attempts started so far.
    pub attempts: i32,
    /// Attempts allowed before it is `failed`.
    pub max_attempts: i32,
    /// Its unique key, if the task has one.
    pub unique_key: Option<String>,
    /// The last attempt's error, if any.
    pub last_error: Option<String>,
    /// The most recent failed attempts, oldest first.
    pub errors: Vec<AttemptError>,
    /// Progress reported by the handler of its latest attempt, 0 to 100 (0 again when the job
    /// goes back to `pending`, 100 when it completes).
    pub progress: i16,
    /// The stage the handler of its latest attempt last reported (none again when the job goes
    /// back to `pending`).
    pub current_stage: Option<String>,
    /// How many events the handler recorded.
    pub events_count: i32,
    /// The worker holding it, while claimed or running; the one that ran it last, once finished
    /// (none while pending, nor when it was cancelled while pending).
    pub worker_id: Option<String>,
    /// When a worker last claimed it.
    pub claimed_at: Option<DateTime<Utc>>,
    /// When the holding worker's lease runs out.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When someone asked to cancel it, if anyone did.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When its latest attempt started running.
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished.
    pub completed_at: Option<DateTime<Utc>>,
    /// When the row last changed.
    pub updated_at: DateTime<Utc>,
    /// Its metadata: user tags under `"tags"`, the enqueue's trace context under `"trace"`.
    pub meta: Option<serde_json::Value>,
}

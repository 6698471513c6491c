//! What an enqueue did, and what the store inserts for one: the types the client and the store
//! share.

use chrono::{DateTime, Utc};

use crate::job_id::JobId;

/// What an enqueue did.
///
/// ```no_run
/// # use pgq_core::{Client, Enqueued, Task};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)]
/// # #[task(unique_key = "welcome:{user_id}")] struct SendWelcome { user_id: i64 }
/// # async fn example(client: Client) -> pgq_core::Result<()> {
/// match client.enqueue(SendWelcome { user_id: 7 }).await? {
///     Enqueued::Inserted(id) => println!("new job {id}"),
///     Enqueued::Duplicate(id) => println!("job {id} already holds the key"),
///     Enqueued::Replaced(id) => println!("pending job {id} was updated"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// A new job was inserted.
    Inserted(JobId),
    /// An active job already held the unique key; nothing was written. Its id.
    Duplicate(JobId),
    /// A pending job held the unique key and was updated (with [`EnqueueOptions::replace`](crate::EnqueueOptions::replace)).
    Replaced(JobId),
}

impl Enqueued {
    /// The id of the job, new or existing.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let id = client.enqueue(SendWelcome { user_id: 7 }).await?.id();
    /// let job = client.job(id).await?.expect("just enqueued");
    /// # Ok(()) }
    /// ```
    pub fn id(self) -> JobId {
        match self {
            Enqueued::Inserted(id) | Enqueued::Duplicate(id) | Enqueued::Replaced(id) => id,
        }
    }

    /// Whether an existing job was found instead of inserting a new one.
    ///
    /// ```
    /// use pgq_core::{Enqueued, JobId};
    ///
    /// let id = JobId::from(42);
    /// assert!(!Enqueued::Inserted(id).is_duplicate());
    /// assert!(Enqueued::Duplicate(id).is_duplicate());
    /// assert!(Enqueued::Replaced(id).is_duplicate()); // an existing job was updated
    /// ```
    pub fn is_duplicate(self) -> bool {
        !matches!(self, Enqueued::Inserted(_))
    }
}

/// Everything a new row needs but its payload and unique key.
#[derive(Debug)]
pub(crate) struct JobTemplate<'a> {
    pub(crate) task: &'static str,
    pub(crate) queue: &'a str,
    pub(crate) priority: i16,
    pub(crate) max_attempts: i32,
    /// An absolute start time; when `None`, `now() + delay_ms` by the database clock.
    pub(crate) run_at: Option<DateTime<Utc>>,
    pub(crate) delay_ms: i64,
    /// The job's `meta` as JSON text: tags and trace context, `None` for neither.
    pub(crate) meta: Option<String>,
}

impl JobTemplate<'_> {
    /// The span of an enqueue of `count` jobs from this template, at DEBUG.
    pub(crate) fn span(&self, count: usize) -> tracing::Span {
        tracing::debug_span!(
            "pgq.enqueue",
            otel.name = %format_args!("send {}", self.queue),
            otel.kind = "producer",
            messaging.system = "pgq",
            messaging.operation.type = "send",
            messaging.destination.name = self.queue,
            messaging.batch.message_count = count,
            job.task = self.task,
        )
    }

    /// Counts the new jobs among `enqueued` in the metrics.
    pub(crate) fn count(&self, enqueued: &[Enqueued]) {
        if crate::metric::ENABLED {
            let inserted = enqueued
                .iter()
                .filter(|e| matches!(e, Enqueued::Inserted(_)))
                .count();
            crate::metric::enqueued(self.task, self.queue, inserted as u64);
        }
    }
}

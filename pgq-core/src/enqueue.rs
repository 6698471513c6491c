//! Enqueue options and outcomes, and the checks every enqueue path runs before the database.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::enqueued::JobTemplate;
use crate::error::{Error, Result};
use crate::job_meta;
use crate::limits;
use crate::queue;
use crate::task::Task;
use crate::text;

/// Per-job overrides of a task's `#[task(...)]` settings.
///
/// ```
/// use std::time::Duration;
/// use pgq_core::EnqueueOptions;
///
/// let options = EnqueueOptions::default()
///     .delay(Duration::from_secs(60))
///     .priority(150)
///     .queue("urgent");
/// assert_eq!(options.priority, Some(150));
/// ```
#[derive(Debug, Clone, Default)]
pub struct EnqueueOptions {
    /// Run no earlier than this time. Exclusive with `delay`.
    pub run_at: Option<DateTime<Utc>>,
    /// Run no earlier than this long after the enqueue, by the database clock.
    pub delay: Option<Duration>,
    /// Priority from 0 to 1000 instead of the task's.
    pub priority: Option<i16>,
    /// Attempts from 1 to 1000 instead of the task's.
    pub max_attempts: Option<i32>,
    /// Queue instead of the task's.
    pub queue: Option<String>,
    /// When a still-pending job holds the unique key, update its payload, priority and run_at
    /// (and its tags, if these options name any) instead of leaving it as it is. A task without
    /// a unique key has no such job: its enqueue inserts, as without `replace`.
    pub replace: bool,
    /// Tags an operator finds the job by, kept in its `meta` under `"tags"`: at most
    /// [`MAX_TAGS`](limits::MAX_TAGS), names of 1 to 64 bytes, values of at most 256.
    pub tags: BTreeMap<String, String>,
}

impl EnqueueOptions {
    /// Runs no earlier than `time`.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendNewsletter { issue: u32 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let monday_9am: chrono::DateTime<chrono::Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
    /// let options = EnqueueOptions::default().run_at(monday_9am);
    /// client.enqueue_with(SendNewsletter { issue: 42 }, options).await?;
    /// # Ok(()) }
    /// ```
    pub fn run_at(mut self, time: DateTime<Utc>) -> Self {
        self.run_at = Some(time);
        self
    }

    /// Runs no earlier than `delay` from now.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct FinishSignupReminder { user_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// // In a day, by the database clock.
    /// let tomorrow = EnqueueOptions::default().delay(Duration::from_secs(24 * 3600));
    /// client.enqueue_with(FinishSignupReminder { user_id: 7 }, tomorrow).await?;
    /// # Ok(()) }
    /// ```
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Overrides the priority.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Reindex { document_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// // A user is waiting for this one: ahead of the task's usual priority.
    /// let urgent = EnqueueOptions::default().priority(150);
    /// client.enqueue_with(Reindex { document_id: 7 }, urgent).await?;
    /// # Ok(()) }
    /// ```
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Overrides the attempt limit.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Import { file: String }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// // An import an operator is watching: fail at the first error instead of retrying.
    /// let once = EnqueueOptions::default().max_attempts(1);
    /// client.enqueue_with(Import { file: "q3.csv".into() }, once).await?;
    /// # Ok(()) }
    /// ```
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// Tags the job: `meta.tags.<name> = value`. The dashboard and the admin API filter on tags;
    /// in SQL, `meta @> '{"tags": {"tenant": "acme"}}'` finds them through an index.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Export { account_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// let options = EnqueueOptions::default().tag("tenant", "acme").tag("requested_by", "ops");
    /// client.enqueue_with(Export { account_id: 7 }, options).await?;
    /// # Ok(()) }
    /// ```
    pub fn tag(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.tags.insert(name.into(), value.into());
        self
    }

    /// Overrides the queue.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, EnqueueOptions, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Reindex { document_id: i64 }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// // Same task, run by the workers that serve "backfill".
    /// let backfill = EnqueueOptions::default().queue("backfill");
    /// client.enqueue_with(Reindex { document_id: 7 }, backfill).await?;
    /// # Ok(()) }
    /// ```
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Replaces a still-pending job with the same unique key.
    ///
    /// ```no_run
    /// # use pgq_core::{Client, EnqueueOptions, Enqueued, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// # #[task(unique_key = "sync:{account_id}")] struct SyncAccount { account_id: i64, full: bool }
    /// # async fn example(client: Client) -> pgq_core::Result<()> {
    /// // Turn a still-pending sync of this account into a full one.
    /// let options = EnqueueOptions::default().replace();
    /// let enqueued = client.enqueue_with(SyncAccount { account_id: 7, full: true }, options).await?;
    /// if let Enqueued::Duplicate(id) = enqueued {
    ///     println!("job {id} is already running; left as it is");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn replace(mut self) -> Self {
        self.replace = true;
        self
    }
}

/// A task turned into what its row needs, after every check.
#[derive(Debug)]
pub(crate) struct PreparedTask {
    pub(crate) payload: String,
    pub(crate) unique_key: Option<String>,
    /// The key its concurrency limit counts by, with the limit; `None` for a task without one.
    pub(crate) concurrency: Option<Concurrency>,
}

/// A job's concurrency key and the most held jobs of that key (`Task::CONCURRENCY`).
#[derive(Debug, Clone)]
pub(crate) struct Concurrency {
    pub(crate) key: String,
    pub(crate) limit: i32,
}

/// A batch of tasks turned into what their rows need, in input order.
pub(crate) struct PreparedBatch {
    pub(crate) payloads: Vec<String>,
    pub(crate) unique_keys: Vec<Option<String>>,
    pub(crate) concurrency: Vec<Option<Concurrency>>,
}

/// Checks the options against the task's settings and builds the row template.
pub(crate) fn template<'a, T: Task>(options: &'a EnqueueOptions) -> Result<JobTemplate<'a>> {
    check_name(T::NAME)?;
    let queue = options.queue.as_deref().unwrap_or(T::QUEUE);
    queue::validate(queue)?;
    if T::CONCURRENCY.is_some() && queue != T::QUEUE {
        // Workers bound keys on the queues that keyed tasks declare, and only there.
        return Err(invalid::<T>(
            "queue",
            format!(
                "a task with a concurrency key runs on its own queue {:?}, not {queue:?}",
                T::QUEUE
            ),
        ));
    }
    let priority = options.priority.unwrap_or(T::PRIORITY);
    let max_attempts = options.max_attempts.unwrap_or(T::MAX_ATTEMPTS);
    check_bounds(T::NAME, priority, max_attempts)?;
    if options.run_at.is_some() && options.delay.is_some() {
        return Err(invalid::<T>(
            "run_at",
            "give run_at or delay, not both".into(),
        ));
    }
    if let Some(run_at) = options.run_at
        && !(limits::EARLIEST_RUN_AT..limits::LATEST_RUN_AT).contains(&run_at.timestamp())
    {
        return Err(invalid::<T>(
            "run_at",
            format!("{run_at} is outside the years 1970 to 9999"),
        ));
    }
    let delay_ms = match options.delay {
        Some(delay) if delay > limits::MAX_DELAY => {
            return Err(invalid::<T>(
                "delay",
                format!("{delay:?} is longer than 100 years"),
            ));
        }
        Some(delay) => limits::millis_rounded_up(delay),
        None => 0,
    };
    let meta = job_meta::build(&options.tags).map_err(|reason| invalid::<T>("tags", reason))?;
    Ok(JobTemplate {
        task: T::NAME,
        queue,
        priority,
        max_attempts,
        run_at: options.run_at,
        delay_ms,
        meta,
    })
}

/// [`template`] for a batch: the options apply to every task, and `replace` is refused, as a
/// batch cannot update pending jobs in place.
pub(crate) fn batch_template<'a, T: Task>(options: &'a EnqueueOptions) -> Result<JobTemplate<'a>> {
    if options.replace {
        return Err(invalid::<T>(
            "replace",
            "a batch enqueue cannot replace pending jobs; enqueue those tasks one at a time \
             with enqueue_with"
                .into(),
        ));
    }
    template::<T>(options)
}

/// Serializes every task of a batch and checks each; one refused task refuses the batch.
pub(crate) fn prepare_many<T: Task>(
    tasks: impl IntoIterator<Item = T>,
    max_payload_bytes: usize,
) -> Result<PreparedBatch> {
    let mut batch = PreparedBatch {
        payloads: Vec::new(),
        unique_keys: Vec::new(),
        concurrency: Vec::new(),
    };
    for task in tasks {
        let prepared = prepare(&task, max_payload_bytes)?;
        batch.payloads.push(prepared.payload);
        batch.unique_keys.push(prepared.unique_key);
        batch.concurrency.push(prepared.concurrency);
    }
    Ok(batch)
}

/// Serializes the task and checks its size and unique key.
pub(crate) fn prepare<T: Task>(task: &T, max_payload_bytes: usize) -> Result<PreparedTask> {
    let payload = serde_json::to_string(task).map_err(|source| Error::Serialize {
        task: T::NAME,
        source,
    })?;
    if text::json_has_nul(&payload) {
        return Err(Error::InvalidPayload {
            task: T::NAME,
            reason: "it holds a NUL character (\\u0000), which PostgreSQL cannot store",
        });
    }
    if text::json_nests_deeper_than(&payload, limits::MAX_PAYLOAD_DEPTH) {
        return Err(Error::InvalidPayload {
            task: T::NAME,
            reason: "it nests arrays and objects deeper than 127 levels, which a worker cannot \
                     decode (limits::MAX_PAYLOAD_DEPTH)",
        });
    }
    if payload.len() > max_payload_bytes {
        return Err(Error::PayloadTooLarge {
            task: T::NAME,
            size: payload.len(),
            limit: max_payload_bytes,
        });
    }
    let unique_key = task.unique_key();
    check_key::<T>(
        "unique_key",
        unique_key.as_deref(),
        limits::MAX_UNIQUE_KEY_BYTES,
    )?;
    Ok(PreparedTask {
        payload,
        unique_key,
        concurrency: concurrency(task)?,
    })
}

/// The task's concurrency key with its limit, checked.
fn concurrency<T: Task>(task: &T) -> Result<Option<Concurrency>> {
    let Some(key) = task.concurrency_key() else {
        return Ok(None);
    };
    check_key::<T>(
        "concurrency_key",
        Some(&key),
        limits::MAX_CONCURRENCY_KEY_BYTES,
    )?;
    match T::CONCURRENCY {
        Some(limit @ 1..=limits::MAX_CONCURRENCY) => Ok(Some(Concurrency {
            key,
            limit: limit as i32,
        })),
        Some(limit) => Err(invalid::<T>(
            "concurrency",
            format!("{limit} is outside 1..={}", limits::MAX_CONCURRENCY),
        )),
        None => Err(invalid::<T>(
            "concurrency_key",
            "a concurrency key needs a limit: set `concurrency` (Task::CONCURRENCY)".into(),
        )),
    }
}

/// A unique or concurrency key PostgreSQL can store and pgq bounds: no NUL, 1 to `max_bytes` bytes.
fn check_key<T: Task>(option: &'static str, key: Option<&str>, max_bytes: usize) -> Result<()> {
    let Some(key) = key else {
        return Ok(());
    };
    if key.contains('\0') {
        return Err(invalid::<T>(
            option,
            "it holds a NUL character, which PostgreSQL cannot store".into(),
        ));
    }
    if key.is_empty() || key.len() > max_bytes {
        return Err(invalid::<T>(
            option,
            format!("{} bytes; a key has 1 to {max_bytes} bytes", key.len()),
        ));
    }
    Ok(())
}

/// Refuses a task name the column cannot hold. The derive checks the name when it compiles; a
/// `Task` written by hand meets the column's bound here, as a typed error rather than the
/// database's.
pub(crate) fn check_name(task: &'static str) -> Result<()> {
    let len = task.chars().count();
    if len == 0 || len > limits::MAX_TASK_NAME_LEN || task.contains('\0') {
        return Err(Error::InvalidOption {
            task,
            option: "name",
            reason: format!(
                "a task name has 1 to {} characters and no NUL",
                limits::MAX_TASK_NAME_LEN
            ),
        });
    }
    Ok(())
}

/// Refuses a priority or a number of attempts outside pgq's bounds, for `task`'s jobs.
pub(crate) fn check_bounds(task: &'static str, priority: i16, max_attempts: i32) -> Result<()> {
    let refuse = |option, reason| Error::InvalidOption {
        task,
        option,
        reason,
    };
    if !(limits::MIN_PRIORITY..=limits::MAX_PRIORITY).contains(&priority) {
        return Err(refuse(
            "priority",
            format!(
                "{priority} is outside {}..={}",
                limits::MIN_PRIORITY,
                limits::MAX_PRIORITY
            ),
        ));
    }
    if !(1..=limits::MAX_MAX_ATTEMPTS).contains(&max_attempts) {
        return Err(refuse(
            "max_attempts",
            format!("{max_attempts} is outside 1..={}", limits::MAX_MAX_ATTEMPTS),
        ));
    }
    Ok(())
}

fn invalid<T: Task>(option: &'static str, reason: String) -> Error {
    Error::InvalidOption {
        task: T::NAME,
        option,
        reason,
    }
}

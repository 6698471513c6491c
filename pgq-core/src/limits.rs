//! The limits pgq holds every job to, and its fixed intervals. The database's column types
//! enforce the same bounds, and `#[derive(Task)]` checks its keys against them at compile time.

use std::time::Duration;

/// The lowest priority a job may have.
///
/// ```
/// use pgq_core::{EnqueueOptions, limits::MIN_PRIORITY};
///
/// // Run this one only when nothing else is waiting.
/// let options = EnqueueOptions::default().priority(MIN_PRIORITY);
/// assert_eq!(options.priority, Some(0));
/// ```
pub const MIN_PRIORITY: i16 = 0;

/// The highest priority a job may have; larger values are refused with
/// [`Error::InvalidOption`](crate::Error::InvalidOption).
///
/// ```
/// use pgq_core::{EnqueueOptions, limits::MAX_PRIORITY};
///
/// // Ahead of everything else in its queue.
/// let options = EnqueueOptions::default().priority(MAX_PRIORITY);
/// assert_eq!(options.priority, Some(1000));
/// ```
pub const MAX_PRIORITY: i16 = 1000;

/// The largest `max_attempts` a job may have; larger values are refused with
/// [`Error::InvalidOption`](crate::Error::InvalidOption).
///
/// ```
/// use pgq_core::{EnqueueOptions, limits::MAX_MAX_ATTEMPTS};
///
/// let keep_trying = EnqueueOptions::default().max_attempts(MAX_MAX_ATTEMPTS);
/// assert_eq!(keep_trying.max_attempts, Some(1000));
/// ```
pub const MAX_MAX_ATTEMPTS: i32 = 1000;

/// The longest queue name pgq accepts, in characters. Longer names are refused with
/// [`Error::InvalidQueue`](crate::Error::InvalidQueue).
///
/// ```
/// let tenant = "acme-corp";
/// let queue = format!("reports:{tenant}");
/// assert!(queue.len() <= pgq_core::limits::MAX_QUEUE_LEN);
/// ```
pub const MAX_QUEUE_LEN: usize = 64;

/// The longest unique key pgq stores, in bytes.
///
/// ```
/// use pgq_core::{limits::MAX_UNIQUE_KEY_BYTES, Task};
///
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// #[task(unique_key = "import:{path}")]
/// struct Import { path: String }
///
/// // A longer key is refused at enqueue with Error::InvalidOption.
/// let key = Import { path: "/data/2026/q3.csv".into() }.unique_key().unwrap();
/// assert!(key.len() <= MAX_UNIQUE_KEY_BYTES);
/// ```
pub const MAX_UNIQUE_KEY_BYTES: usize = 1024;

/// The deepest a payload may nest arrays and objects: the most serde_json's decoder, which a
/// worker reads payloads with, accepts. A deeper payload could never run, and is refused at
/// enqueue with [`Error::InvalidPayload`](crate::Error::InvalidPayload).
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_PAYLOAD_DEPTH, 127);
/// ```
pub const MAX_PAYLOAD_DEPTH: usize = 127;

/// The longest concurrency key pgq stores, in bytes: refused at enqueue, and by the schema
/// (`pgq.concurrency_key`) from hand-written SQL.
///
/// ```
/// use pgq_core::{limits::MAX_CONCURRENCY_KEY_BYTES, Task};
///
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// #[task(concurrency_key = "tenant:{tenant}", concurrency = 2)]
/// struct Export { tenant: String }
///
/// // A longer key is refused at enqueue with Error::InvalidOption.
/// let key = Export { tenant: "acme".into() }.concurrency_key().unwrap();
/// assert!(key.len() <= MAX_CONCURRENCY_KEY_BYTES);
/// ```
pub const MAX_CONCURRENCY_KEY_BYTES: usize = 1024;

/// The largest `concurrency` a task may declare: held jobs per concurrency key.
///
/// ```
/// use pgq_core::{limits::MAX_CONCURRENCY, Task};
///
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// #[task(concurrency_key = "{tenant}", concurrency = 1000)]
/// struct Export { tenant: String }
///
/// assert_eq!(Export::CONCURRENCY, Some(MAX_CONCURRENCY));
/// ```
pub const MAX_CONCURRENCY: u32 = 1000;

/// The longest delay an enqueue accepts: 100 years (PostgreSQL's intervals stay in range).
///
/// ```
/// assert!(pgq_core::limits::MAX_DELAY >= std::time::Duration::from_secs(100 * 365 * 24 * 3600));
/// ```
pub const MAX_DELAY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The longest lease a task or worker may set; `#[task(lease = ..)]` checks the same limit.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_LEASE, std::time::Duration::from_secs(24 * 3600));
/// ```
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

/// The most of an error message pgq stores per attempt, in bytes. Longer messages are cut at
/// a character boundary and end with `… (<length> bytes, truncated)`.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
/// let job = client.job(id).await?.expect("job exists");
/// if let Some(error) = &job.last_error {
///     assert!(error.len() <= pgq_core::limits::MAX_ERROR_BYTES);
/// }
/// # Ok(()) }
/// ```
pub const MAX_ERROR_BYTES: usize = 2048;

/// The longest stage name stored, in bytes (the column's limit); longer ones are cut.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_STAGE_BYTES, 1024);
/// ```
pub const MAX_STAGE_BYTES: usize = 1024;

/// At most one progress write per attempt in this interval; the latest state always follows.
///
/// ```
/// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Import { rows: u32 }
/// # #[async_trait] impl Handler for Import {
/// # async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
/// // A call per row is fine: at most one write per PROGRESS_THROTTLE reaches the database,
/// // and the latest state is always written.
/// for row in 1..=self.rows {
///     ctx.progress((row * 100 / self.rows) as u8, "importing").await;
/// }
/// # Ok(()) } }
/// assert_eq!(pgq_core::limits::PROGRESS_THROTTLE, std::time::Duration::from_secs(1));
/// ```
pub const PROGRESS_THROTTLE: Duration = Duration::from_secs(1);

/// How often a watcher re-reads the job when no notification arrives.
///
/// ```
/// use std::time::Duration;
///
/// // A missed notification delays a watcher's update by at most this long.
/// assert_eq!(pgq_core::limits::WATCH_POLL_INTERVAL, Duration::from_millis(500));
/// ```
pub const WATCH_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The most attempts one drain runs, so that a job that retries at once forever still ends it.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let drained = pgq_core::Worker::builder(client).queue("email", 1).build()?.drain().await?;
/// if drained.len() == pgq_core::limits::DRAIN_LIMIT {
///     println!("stopped at the limit: a job keeps retrying at once");
/// }
/// # Ok(()) }
/// ```
pub const DRAIN_LIMIT: usize = 10_000;

/// The most handlers of one queue a worker runs at once (`WorkerBuilder::queue`).
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_QUEUE_CONCURRENCY, 100_000);
/// ```
pub const MAX_QUEUE_CONCURRENCY: usize = 100_000;

/// The most jobs one claim of a worker takes (`WorkerBuilder::batch_size`).
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_BATCH_SIZE, 100_000);
/// ```
pub const MAX_BATCH_SIZE: usize = 100_000;

/// The shortest poll, heartbeat and rescue interval a worker may set: at zero it would query
/// the database without pause.
///
/// ```
/// assert_eq!(pgq_core::limits::MIN_WORKER_INTERVAL, std::time::Duration::from_millis(1));
/// ```
pub const MIN_WORKER_INTERVAL: Duration = Duration::from_millis(1);

/// The longest poll, heartbeat and rescue interval a worker may set.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_WORKER_INTERVAL, std::time::Duration::from_secs(24 * 3600));
/// ```
pub const MAX_WORKER_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// The most dispatch connections per queue, and upkeep connections, a worker may keep.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_WORKER_CONNECTIONS, 64);
/// ```
pub const MAX_WORKER_CONNECTIONS: u32 = 64;

/// The shortest lease a task or worker may set.
///
/// ```
/// assert_eq!(pgq_core::limits::MIN_LEASE, std::time::Duration::from_secs(1));
/// ```
pub const MIN_LEASE: Duration = Duration::from_secs(1);

/// The longest `#[task(timeout = ..)]`.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_TIMEOUT, std::time::Duration::from_secs(24 * 3600));
/// ```
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The longest task name, in characters (`#[task(name = ..)]` or the type's name).
///
/// ```
/// # use pgq_core::Task;
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// #[task(name = "billing.invoices.charge")]
/// struct Charge { invoice_id: i64 }
///
/// assert!(Charge::NAME.len() <= pgq_core::limits::MAX_TASK_NAME_LEN);
/// ```
pub const MAX_TASK_NAME_LEN: usize = 128;

/// How many failed attempts a job's error history keeps, oldest first.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
/// let job = client.job(id).await?.expect("job exists");
/// assert!(job.errors.len() <= pgq_core::limits::ERROR_HISTORY);
/// # Ok(()) }
/// ```
pub const ERROR_HISTORY: usize = 10;

/// The longest schema name a client accepts (`Client::with_schema`), in characters: notification
/// channel names carry it, and PostgreSQL allows them 63 bytes.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_SCHEMA_LEN, 48);
/// ```
pub const MAX_SCHEMA_LEN: usize = 48;

/// The earliest `run_at` a job may have, as a Unix timestamp: 1970-01-01T00:00:00Z. The
/// database refuses earlier ones, so that every run time reads back.
pub(crate) const EARLIEST_RUN_AT: i64 = 0;

/// The first instant after the latest `run_at` a job may have: year 10000.
pub(crate) const LATEST_RUN_AT: i64 = 253_402_300_800;

/// The longest worker id, in bytes (`WorkerBuilder::worker_id`); ids with control characters are
/// refused too.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_WORKER_ID_BYTES, 128);
/// ```
pub const MAX_WORKER_ID_BYTES: usize = 128;

/// At most this many tags per job ([`EnqueueOptions::tag`](crate::EnqueueOptions::tag)).
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_TAGS, 16);
/// ```
pub const MAX_TAGS: usize = 16;

/// A tag's name: 1 to 64 bytes, no control characters.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_TAG_KEY_BYTES, 64);
/// ```
pub const MAX_TAG_KEY_BYTES: usize = 64;

/// A tag's value: at most 256 bytes, no control characters.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_TAG_VALUE_BYTES, 256);
/// ```
pub const MAX_TAG_VALUE_BYTES: usize = 256;

/// A job's whole metadata (tags and trace context) as JSON: at most 4 KiB, which the
/// database also enforces.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_META_BYTES, 4096);
/// ```
pub const MAX_META_BYTES: usize = 4096;

/// How many jobs a page of [`Client::jobs`](crate::Client::jobs) holds when the filter sets no
/// limit.
///
/// ```
/// assert_eq!(pgq_core::JobFilter::new(), pgq_core::JobFilter::new().limit(pgq_core::limits::DEFAULT_PAGE_SIZE));
/// ```
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// The most jobs a page may hold; larger limits are refused with
/// [`Error::InvalidFilter`](crate::Error::InvalidFilter).
///
/// ```
/// use pgq_core::{JobFilter, limits::MAX_PAGE_SIZE};
/// assert!(JobFilter::new().limit(MAX_PAGE_SIZE).validate().is_ok());
/// assert!(JobFilter::new().limit(MAX_PAGE_SIZE + 1).validate().is_err());
/// ```
pub const MAX_PAGE_SIZE: usize = 1000;

/// How many ids one page of a search that may match finished jobs looks at: the history is
/// read through the primary key a window at a time, so that no filter reads it whole.
///
/// ```
/// // A million finished jobs are searched in ten pages at most.
/// assert_eq!(pgq_core::limits::SEARCH_WINDOW, 100_000);
/// ```
pub const SEARCH_WINDOW: i64 = 100_000;

/// The count at which [`Client::count_jobs`](crate::Client::count_jobs) stops counting.
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_COUNT, 10_000);
/// ```
pub const MAX_COUNT: u64 = 10_000;

/// The longest text [`JobFilter::error_contains`](crate::JobFilter::error_contains) searches
/// for, in bytes.
///
/// ```
/// use pgq_core::{JobFilter, limits::MAX_ERROR_SEARCH_BYTES};
/// assert!(JobFilter::new().error_contains("x".repeat(MAX_ERROR_SEARCH_BYTES + 1)).validate().is_err());
/// ```
pub const MAX_ERROR_SEARCH_BYTES: usize = 200;

/// How many jobs one statement of a bulk action (retry, cancel, delete, run now, priority)
/// changes; larger selections go in several.
///
/// ```
/// assert_eq!(pgq_core::limits::ACTION_BATCH, 1000);
/// ```
pub const ACTION_BATCH: usize = 1000;

/// The most missed instants a schedule backfills ([`Missed::Backfill`](crate::Missed)).
///
/// ```
/// use pgq_core::{Missed, Schedule};
/// let schedule = Schedule::cron("0 0 * * * *").missed(Missed::Backfill(24));
/// assert!(24 <= pgq_core::limits::MAX_BACKFILL);
/// # let _ = schedule;
/// ```
pub const MAX_BACKFILL: u32 = 1000;

/// The longest cron expression of a schedule, in characters, spaces included: `#[task(cron)]`
/// refuses a longer one at compile time, `WorkerBuilder::build` with
/// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule).
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_CRON_CHARS, 256);
/// ```
pub const MAX_CRON_CHARS: usize = 256;

/// The longest schedule name, in bytes (a schedule is named after its task unless named).
///
/// ```
/// assert_eq!(pgq_core::limits::MAX_SCHEDULE_NAME_BYTES, 128);
/// ```
pub const MAX_SCHEDULE_NAME_BYTES: usize = 128;

/// The most on-time instants one schedule enqueues in one step: a cron firing every second
/// has at most [`SCHEDULE_GRACE`](crate::defaults::SCHEDULE_GRACE) worth of them. A grace of
/// hours (twice a long leader lease) may hold more: the newest run, and the older ones are
/// passed over as missed.
pub(crate) const MAX_ON_TIME_INSTANTS: usize = 10_000;

/// The longest period of a queue's rate limit ([`RateLimit`](crate::RateLimit)).
///
/// ```
/// assert!("1/25h".parse::<pgq_core::RateLimit>().is_err());
/// ```
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// `duration` in whole milliseconds, the unit waits are stored in, rounded up: a wait meaning
/// "no earlier than" is never shortened.
pub(crate) fn millis_rounded_up(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(i64::MAX)
}

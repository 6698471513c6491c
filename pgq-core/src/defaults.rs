//! The values pgq uses where a task, a client or a worker sets nothing else.

use std::time::Duration;

/// The queue a task goes to when `#[task(queue = ..)]` is not given.
///
/// ```
/// # use pgq_core::Task;
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// struct Ping;
///
/// assert_eq!(Ping::QUEUE, pgq_core::defaults::QUEUE); // "default"
/// ```
pub const QUEUE: &str = "default";

/// The priority of a task when `#[task(priority = ..)]` is not given. Higher runs first.
///
/// ```
/// # use pgq_core::Task;
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// #[task(priority = 30)]
/// struct Backfill { day: u32 }
///
/// assert!(Backfill::PRIORITY < pgq_core::defaults::PRIORITY); // runs after normal work (100)
/// ```
pub const PRIORITY: i16 = 100;

/// How many attempts a task gets when `#[task(max_attempts = ..)]` is not given.
///
/// ```
/// # use pgq_core::Task;
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// struct Ping;
///
/// assert_eq!(Ping::MAX_ATTEMPTS, pgq_core::defaults::MAX_ATTEMPTS); // 20
/// ```
pub const MAX_ATTEMPTS: i32 = 20;

/// How long a claim holds a job before another worker may rescue it; renewed every third of it
/// while the handler runs.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// // Slow, blocking-prone jobs: hold each claim four times as long as the default 60 s.
/// let worker = pgq_core::Worker::builder(client)
///     .queue("reports", 2)
///     .lease(4 * pgq_core::defaults::LEASE)
///     .build()?;
/// # Ok(()) }
/// ```
pub const LEASE: Duration = Duration::from_secs(60);

/// How long an idle worker waits between claims when no notification arrives.
///
/// ```
/// use std::time::Duration;
///
/// // With NOTIFY, jobs start at once; a lost notification costs at most this long.
/// assert_eq!(pgq_core::defaults::POLL_INTERVAL, Duration::from_secs(1));
/// ```
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How many jobs one claim statement takes at most: see
/// [`WorkerBuilder::batch_size`](crate::WorkerBuilder::batch_size).
///
/// ```
/// assert_eq!(pgq_core::defaults::BATCH_SIZE, 256);
/// ```
pub const BATCH_SIZE: usize = 256;

/// How long shutdown waits for running jobs before releasing them.
///
/// ```
/// use std::time::Duration;
///
/// assert_eq!(pgq_core::defaults::SHUTDOWN_GRACE, Duration::from_secs(15));
/// ```
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// How often each worker process looks for expired leases: every 15 s. While any worker runs,
/// a crashed worker's jobs are back in `pending` within this long after their lease ran out.
///
/// ```
/// use std::time::Duration;
///
/// assert_eq!(pgq_core::defaults::RESCUE_INTERVAL, Duration::from_secs(15));
/// ```
pub const RESCUE_INTERVAL: Duration = Duration::from_secs(15);

/// How long completed jobs are kept: 24 hours.
///
/// ```
/// use pgq_core::{defaults::RETAIN_COMPLETED, Retention};
///
/// // Keep completed jobs for a week instead.
/// let retention = Retention { completed: 7 * RETAIN_COMPLETED, ..Retention::default() };
/// assert_eq!(retention.completed.as_secs(), 7 * 24 * 3600);
/// ```
pub const RETAIN_COMPLETED: Duration = Duration::from_secs(24 * 3600);

/// How long failed and cancelled jobs are kept, for inspection and manual retry: 7 days.
///
/// ```
/// use pgq_core::{defaults::RETAIN_FAILED, Retention};
///
/// assert_eq!(Retention::default().failed, RETAIN_FAILED);
/// assert_eq!(RETAIN_FAILED.as_secs(), 7 * 24 * 3600);
/// ```
pub const RETAIN_FAILED: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often each worker process tries to clean: every 60 s.
///
/// ```
/// use std::time::Duration;
///
/// assert_eq!(pgq_core::defaults::CLEAN_INTERVAL, Duration::from_secs(60));
/// ```
pub const CLEAN_INTERVAL: Duration = Duration::from_secs(60);

/// The connections a pool made by [`Client::connect`](crate::Client::connect) keeps at most.
///
/// For a larger pool, build it yourself, without sqlx's ping before each use (see
/// [`Client::new`](crate::Client::new)), and hand it to [`Client::new`](crate::Client::new):
///
/// ```no_run
/// # async fn example() -> pgq_core::Result<()> {
/// let pool = sqlx::postgres::PgPoolOptions::new()
///     .max_connections(4 * pgq_core::defaults::MAX_CONNECTIONS)
///     .test_before_acquire(false)
///     .connect("postgres://postgres@127.0.0.1/app")
///     .await?;
/// let client = pgq_core::Client::new(pool);
/// # Ok(()) }
/// ```
pub const MAX_CONNECTIONS: u32 = 10;

/// The payload size limit of a new [`Client`](crate::Client): 256 KiB of JSON.
///
/// ```no_run
/// # async fn example(pool: sqlx::PgPool) {
/// // Reports carry their filters: allow 1 MiB instead of 256 KiB.
/// let client = pgq_core::Client::new(pool)
///     .with_max_payload_bytes(4 * pgq_core::defaults::MAX_PAYLOAD_BYTES);
/// # }
/// ```
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;

/// The window within which enqueues to one queue share a notification.
pub const WAKEUP_WINDOW: Duration = Duration::from_millis(2);

/// How long pgq waits for the database to answer one of its own statements before it closes
/// the connection: see [`Client::with_statement_timeout`](crate::Client::with_statement_timeout).
///
/// ```
/// assert_eq!(pgq_core::defaults::STATEMENT_TIMEOUT, std::time::Duration::from_secs(10));
/// ```
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an idle worker waits between claims when its client is
/// [`behind_pooler`](crate::Client::behind_pooler): it cannot listen for notifications there.
///
/// ```
/// assert_eq!(pgq_core::defaults::POOLED_POLL_INTERVAL, std::time::Duration::from_millis(200));
/// ```
pub const POOLED_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Connections each queue's dispatcher keeps, one per claim statement in flight: see
/// [`WorkerBuilder::dispatch_connections`](crate::WorkerBuilder::dispatch_connections).
///
/// ```
/// assert_eq!(pgq_core::defaults::DISPATCH_CONNECTIONS, 3);
/// ```
pub const DISPATCH_CONNECTIONS: u32 = 3;

/// How often a worker heartbeats its registration (`WorkerBuilder::heartbeat_interval`). A
/// worker that misses four in a row counts as dead: any other worker's rescuer whose own
/// heartbeats have landed for as long takes its jobs back without waiting for their leases.
///
/// ```
/// # use std::time::Duration;
/// assert_eq!(pgq_core::defaults::HEARTBEAT_INTERVAL, Duration::from_secs(5));
/// ```
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// Connections a worker keeps for its upkeep: see
/// [`WorkerBuilder::upkeep_connections`](crate::WorkerBuilder::upkeep_connections).
///
/// ```
/// assert_eq!(pgq_core::defaults::UPKEEP_CONNECTIONS, 2);
/// ```
pub const UPKEEP_CONNECTIONS: u32 = 2;

/// The window over which [`Client::stats`](crate::Client::stats) measures how fast jobs finish:
/// the last 5 minutes.
///
/// ```
/// assert_eq!(pgq_core::defaults::STATS_WINDOW.as_secs(), 300);
/// ```
pub const STATS_WINDOW: Duration = Duration::from_secs(300);

/// How long the process that leads the periodic schedules holds its lead without renewing it;
/// it renews every third of it, and another process takes over once it has run out.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// // A quicker takeover when the leader dies, for a few more writes.
/// let worker = pgq_core::Worker::builder(client)
///     .queue("reports", 2)
///     .leader_lease(Duration::from_secs(5))
///     .build()?;
/// # Ok(()) }
/// ```
pub const LEADER_LEASE: Duration = Duration::from_secs(10);

/// How late a scheduled instant may be enqueued and still count as on time. Instants older than
/// this when a leader gets to them were missed (no worker ran, or none led), and follow their
/// schedule's [`Missed`](crate::Missed) policy; those within it always run, so a leader that
/// dies and is replaced when its lease runs out loses none. A worker whose
/// [`leader_lease`](crate::WorkerBuilder::leader_lease) is longer than half of this uses twice
/// its lease instead.
///
/// ```
/// assert!(pgq_core::defaults::SCHEDULE_GRACE > pgq_core::defaults::LEADER_LEASE);
/// ```
pub const SCHEDULE_GRACE: Duration = Duration::from_secs(60);

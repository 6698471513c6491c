//! [`Client`]: enqueue and inspect jobs.

mod enqueuing;

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::cancellation::Cancellation;
use crate::defaults;
use crate::error::Result;
use crate::inline::{InlineMode, InlineRunner};
use crate::job::Job;
use crate::job_id::JobId;
use crate::kept_connection::KeptConnection;
use crate::live_worker::LiveWorker;
use crate::maintenance::cleaner::{self, Retention};
use crate::maintenance::rescuer;
use crate::migrate::Migration;
use crate::schema::Schema;
use crate::stats::QueueStats;
use crate::store;
use crate::store::Store;
use crate::store::run;
use crate::wakeup::Wakeups;
use crate::watch::JobWatch;
use crate::watchers::Watchers;
use crate::worker_id;

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
    store: Store,
    /// Reached through a transaction-mode pooler: no session state, so no LISTEN.
    pooled: bool,
    /// Behind a pooler, whether it keeps prepared statements: remembered whichever of
    /// `behind_pooler` and `with_prepared_statements` comes first.
    pooler_prepares: bool,
    max_payload_bytes: usize,
    wakeups: Arc<Wakeups>,
    kept: Arc<KeptConnection>,
    /// Manual (jobs wait for workers) unless a test made it inline.
    inline: InlineMode<Client>,
    /// The listener every [`JobWatch`] of this client and its clones shares.
    watchers: Arc<Watchers>,
}

impl Client {
    /// Connects a new pool of up to [`defaults::MAX_CONNECTIONS`] connections, named
    /// `pgq-client` in `pg_stat_activity` unless the URL (`application_name=`) or `PGAPPNAME`
    /// names them.
    ///
    /// ```no_run
    /// # async fn example() -> pgq_core::Result<()> {
    /// let url = std::env::var("DATABASE_URL").unwrap_or("postgres://postgres@127.0.0.1/app".into());
    /// let client = pgq_core::Client::connect(&url).await?;
    /// client.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self> {
        // sqlx reads any URL's host and database, whatever its scheme: `mysql://db/app` would
        // reach a PostgreSQL server on db's port 5432.
        if !is_postgres_url(url) {
            return Err(sqlx::Error::Configuration(
                "a PostgreSQL URL starts with postgres:// or postgresql://".into(),
            )
            .into());
        }
        let mut options: PgConnectOptions = url.parse()?;
        if options.get_application_name().is_none() {
            options = options.application_name(CLIENT_APPLICATION_NAME);
        }
        let pool = PgPoolOptions::new()
            .max_connections(defaults::MAX_CONNECTIONS)
            // sqlx pings a connection before each use by default: a round trip per statement.
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        Ok(Self::new(pool))
    }

    /// Uses an existing pool: the application's own, so that pgq shares its connections.
    ///
    /// Build that pool with `test_before_acquire(false)`, as [`connect`](Self::connect) does.
    /// sqlx's default (`true`, which `PgPool::connect` uses) pings each connection as it is
    /// taken from the pool: a round trip before each of pgq's statements, most of which are one
    /// round trip themselves, so a lookup or a batch enqueue makes two instead of one. pgq works
    /// either way. Without the ping, a connection the server closed while it sat idle fails the
    /// one statement that uses it (the error is returned and the connection dropped) instead of
    /// being replaced first; an `idle_timeout` below the server's or a proxy's keeps that rare.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), sqlx::Error> {
    /// use sqlx::postgres::PgPoolOptions;
    ///
    /// let pool = PgPoolOptions::new()
    ///     .max_connections(20)
    ///     .test_before_acquire(false) // no ping before each use
    ///     .connect("postgres://postgres@127.0.0.1/app")
    ///     .await?;
    /// let client = pgq_core::Client::new(pool.clone()); // the application keeps using `pool`
    /// # Ok(()) }
    /// ```
    pub fn new(pool: PgPool) -> Self {
        Self {
            store: Store::new(pool, defaults::STATEMENT_TIMEOUT, Schema::default()),
            max_payload_bytes: defaults::MAX_PAYLOAD_BYTES,
            pooled: false,
            pooler_prepares: false,
            wakeups: Arc::default(),
            kept: Arc::default(),
            inline: InlineMode::default(),
            watchers: Arc::default(),
        }
    }

    /// Refuses payloads larger than `bytes` of JSON (default 256 KiB) with
    /// [`Error::PayloadTooLarge`](crate::Error::PayloadTooLarge), before anything reaches the
    /// database.
    ///
    /// ```no_run
    /// # async fn example(pool: sqlx::PgPool) {
    /// // Tasks carry ids, not documents: refuse anything over 4 KiB.
    /// let client = pgq_core::Client::new(pool).with_max_payload_bytes(4 * 1024);
    /// # }
    /// ```
    pub fn with_max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// How long pgq waits for the database to answer one of its own statements (default
    /// [`STATEMENT_TIMEOUT`](crate::defaults::STATEMENT_TIMEOUT), 10 s) before it closes that
    /// connection and returns [`Error::Unresponsive`](crate::Error::Unresponsive): a network
    /// that went silent is noticed within this long. pgq's statements are short; your own
    /// queries, and enqueues inside your transactions, are not bounded by it. `Duration::ZERO`
    /// means no limit, as PostgreSQL's `statement_timeout = 0` does. The server holds pgq's
    /// statements to a tenth less, at most its own longest (about 24.8 days).
    ///
    /// ```no_run
    /// # async fn example(pool: sqlx::PgPool) {
    /// use std::time::Duration;
    /// let client = pgq_core::Client::new(pool).with_statement_timeout(Duration::from_secs(5));
    /// # }
    /// ```
    pub fn with_statement_timeout(mut self, timeout: Duration) -> Self {
        self.store = self.store.clone().with_timeout(timeout);
        self
    }

    /// Puts pgq's tables, functions and notification channels in `schema` instead of `pgq`: two
    /// applications, or two isolated pgq instances, then share one database without seeing each
    /// other's jobs, and pgq can live beside another tool that owns a schema called `pgq`. The
    /// name is 1 to 48 lowercase ASCII letters, digits and `_`, not starting with a digit or
    /// `pg_`; anything else is an [`Error::InvalidSchema`](crate::Error::InvalidSchema). Every
    /// client and worker of one instance uses the same name; [`migrate`](Self::migrate) creates
    /// the schema.
    ///
    /// ```no_run
    /// # async fn example(pool: sqlx::PgPool) -> pgq_core::Result<()> {
    /// let client = pgq_core::Client::new(pool).with_schema("billing_jobs")?;
    /// client.migrate().await?; // creates schema billing_jobs
    /// # Ok(()) }
    /// ```
    pub fn with_schema(mut self, schema: &str) -> Result<Self> {
        self.store = self.store.clone().with_schema(Schema::new(schema)?);
        // Another schema's watches listen, and its workers are woken, on other channels.
        self.watchers = Arc::default();
        self.wakeups = Arc::new(Wakeups::new(self.wakeups.window()));
        Ok(self)
    }

    /// For a database reached through a connection pooler in transaction mode (PgBouncer with
    /// `pool_mode = transaction`, and the like), where no session state survives a
    /// transaction: workers and watches poll instead of listening for notifications (a worker's
    /// default poll interval becomes
    /// [`POOLED_POLL_INTERVAL`](crate::defaults::POOLED_POLL_INTERVAL), 200 ms), and statements are
    /// sent unnamed, each in a transaction of its own, instead of kept prepared, which poolers
    /// before PgBouncer 1.21 cannot do. With a pooler that keeps prepared statements (PgBouncer
    /// 1.21 or newer with `max_prepared_statements` set), add
    /// [`with_prepared_statements(true)`](Self::with_prepared_statements). See the README's
    /// *Deploying* section for the pooler's settings.
    ///
    /// ```no_run
    /// # async fn example() -> pgq_core::Result<()> {
    /// // PgBouncer on port 6432, in transaction mode.
    /// let client = pgq_core::Client::connect("postgres://app@pgbouncer:6432/app")
    ///     .await?
    ///     .behind_pooler();
    /// # Ok(()) }
    /// ```
    pub fn behind_pooler(mut self) -> Self {
        self.pooled = true;
        self.store = self.store.clone().behind_pooler(self.pooler_prepares);
        self
    }

    /// Behind a transaction pooler, whether it keeps prepared statements across its server
    /// connections (PgBouncer 1.21 or newer with `max_prepared_statements` set): then pgq's
    /// statements are prepared once and kept, as without a pooler, instead of sent unnamed in a
    /// transaction each. Without [`behind_pooler`](Self::behind_pooler), statements are always
    /// kept prepared. The two may be called in either order.
    ///
    /// ```no_run
    /// # async fn example() -> pgq_core::Result<()> {
    /// // PgBouncer 1.21 or newer, with max_prepared_statements = 200.
    /// let client = pgq_core::Client::connect("postgres://app@pgbouncer:6432/app")
    ///     .await?
    ///     .behind_pooler()
    ///     .with_prepared_statements(true);
    /// # Ok(()) }
    /// ```
    pub fn with_prepared_statements(mut self, prepared: bool) -> Self {
        self.pooler_prepares = prepared;
        if self.pooled {
            self.store = self.store.clone().behind_pooler(prepared);
        }
        self
    }

    /// Whether the client was told it runs behind a transaction pooler.
    pub(crate) fn is_pooled(&self) -> bool {
        self.pooled
    }

    /// The largest payload an enqueue accepts, in bytes.
    pub(crate) fn max_payload_bytes(&self) -> usize {
        self.max_payload_bytes
    }

    /// pgq's statements on the client's pool, within the statement timeout.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Enqueues to one queue within `window` share one notification to idle workers (default
    /// [`WAKEUP_WINDOW`](crate::defaults::WAKEUP_WINDOW), 2 ms): a wider window sends fewer
    /// NOTIFYs under bursts, at up to one and a half windows more wake-up latency for the jobs
    /// after the first (two and a half while the enqueue that would carry their notification
    /// waits, on a unique key's row lock say). A window longer than a day counts as a day:
    /// workers poll meanwhile.
    ///
    /// ```no_run
    /// # async fn example(pool: sqlx::PgPool) {
    /// use std::time::Duration;
    /// let client = pgq_core::Client::new(pool).with_wakeup_window(Duration::from_millis(10));
    /// # }
    /// ```
    pub fn with_wakeup_window(mut self, window: Duration) -> Self {
        self.wakeups = Arc::new(Wakeups::new(window));
        self
    }

    /// Makes the enqueues that commit on their own run their jobs at once through `runner`
    /// (the inline testing mode), or, with `None`, leaves jobs for workers (the manual mode,
    /// the default). Use it through `pgq_testkit::Inline`.
    #[doc(hidden)]
    pub fn with_inline_runner(mut self, runner: Option<Arc<dyn InlineRunner<Client>>>) -> Self {
        self.inline = InlineMode::new(runner);
        self
    }

    /// Whether enqueues run their jobs at once: a client of pgq-testkit's inline testing mode.
    pub fn is_inline(&self) -> bool {
        self.inline.is_inline()
    }

    /// The pool the client runs on, for transactions that enqueue with
    /// [`enqueue_in`](Self::enqueue_in).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let mut tx = client.pool().begin().await?;
    /// sqlx::query("UPDATE accounts SET plan = 'pro' WHERE id = 7").execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn pool(&self) -> &PgPool {
        self.store.pool()
    }

    /// Creates or updates pgq's schema; see [`migrate`](crate::migrate). Safe on every start.
    ///
    /// ```no_run
    /// # async fn example() -> pgq_core::Result<()> {
    /// let client = pgq_core::Client::connect("postgres://postgres@127.0.0.1/app").await?;
    /// client.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<()> {
        store::schema::migrate(&self.store).await
    }

    /// pgq's migrations as SQL scripts for the client's schema, for a migration tool of yours;
    /// see [`migrations`](crate::migrations). [`migrate`](Self::migrate) finds them applied.
    ///
    /// ```no_run
    /// # async fn example(pool: sqlx::PgPool) -> pgq_core::Result<()> {
    /// let client = pgq_core::Client::new(pool).with_schema("billing_jobs")?;
    /// for migration in client.migrations() {
    ///     println!("-- {}\n{}", migration.name, migration.sql);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn migrations(&self) -> Vec<Migration> {
        crate::migrate::scripts(self.store.schema())
    }

    /// The job with this id, or `None` if there is none (never enqueued, or deleted).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
    /// if let Some(job) = client.job(id).await? {
    ///     println!("job {} is {} after {} attempts", job.id, job.status, job.attempts);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn job(&self, id: JobId) -> Result<Option<Job>> {
        run!(self.store, |conn| store::job::find(&self.store, conn, id))
    }

    /// Follows a job's progress live until it finishes; see [`JobWatch`]. `watch` reads no job:
    /// one that does not exist (or is deleted meanwhile) fails the first
    /// [`next`](JobWatch::next) after it with [`Error::JobNotFound`](crate::Error::JobNotFound).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
    /// let mut watch = client.watch(id).await?;
    /// while let Some(job) = watch.next().await? {
    ///     println!("{} {}%", job.status, job.progress);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn watch(&self, id: JobId) -> Result<JobWatch> {
        let watchers = (!self.pooled).then_some(&self.watchers);
        JobWatch::start(self.store.clone(), id, watchers).await
    }

    /// Cancels a job: a pending one at once; a claimed or running one by firing its handler's
    /// `ctx.cancelled()` (it ends `cancelled` when the handler returns). A finished job is an
    /// [`Error::JobState`](crate::Error::JobState), a missing one
    /// [`Error::JobNotFound`](crate::Error::JobNotFound).
    ///
    /// ```no_run
    /// # use pgq_core::Cancellation;
    /// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
    /// match client.cancel(id).await? {
    ///     Cancellation::Cancelled => println!("job {id} will not run"),
    ///     Cancellation::Requested => println!("job {id} is running; its handler was told to stop"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel(&self, id: JobId) -> Result<Cancellation> {
        store::control::cancel(&self.store, id).await
    }

    /// Runs a failed or cancelled job again: back to `pending`, due now, with at least one
    /// attempt left.
    ///
    /// Any other status is an [`Error::JobState`](crate::Error::JobState); when another
    /// active job now holds the job's unique key, [`Error::UniqueKeyHeld`](crate::Error::UniqueKeyHeld).
    ///
    /// ```no_run
    /// # use pgq_core::JobStatus;
    /// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
    /// let job = client.job(id).await?.expect("kept after failing");
    /// if job.status == JobStatus::Failed {
    ///     println!("retrying job {id}, which failed with {:?}", job.last_error);
    ///     client.retry(id).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn retry(&self, id: JobId) -> Result<()> {
        store::control::retry(&self.store, id).await
    }

    /// Returns every job the given worker holds to `pending` without spending their attempts:
    /// for operators who know that worker is gone. Returns the released ids. A job whose row
    /// another transaction holds at that moment (its completion or renewal in flight, or a
    /// handler's open [`JobContext::complete_in`](crate::JobContext::complete_in) transaction
    /// on a host that is not gone after all) is skipped rather than waited for, and is not in
    /// the list: its outcome lands, or the rescuer returns it once its lease runs out.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // The host running this worker was shut down; don't wait for its leases to run out.
    /// let released = client.release_worker("web-3:4121:a1b2c3").await?;
    /// println!("released {} jobs", released.len());
    /// # Ok(()) }
    /// ```
    pub async fn release_worker(&self, worker_id: &str) -> Result<Vec<JobId>> {
        worker_id::validate(worker_id)?;
        store::attempt::release_worker(&self.store, worker_id).await
    }

    /// The worker processes alive now, oldest first: each registers when it starts,
    /// heartbeats (see [`WorkerBuilder::heartbeat_interval`](crate::WorkerBuilder::heartbeat_interval))
    /// and is removed at a clean shutdown; one that stopped heartbeating is not listed.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// for worker in client.workers().await? {
    ///     println!("{} on {}: {} jobs held, last seen {}", worker.id, worker.host, worker.held, worker.heartbeat_at);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn workers(&self) -> Result<Vec<LiveWorker>> {
        store::workers::live(&self.store).await
    }

    /// Rescues every job whose lease expired now, as each worker's rescuer does periodically.
    /// Returns the rescued ids. It works in batches of 1000, each committed on its own: after an
    /// error, the batches before it stay rescued.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let rescued = client.rescue_expired().await?;
    /// println!("rescued {} jobs: {rescued:?}", rescued.len());
    /// # Ok(()) }
    /// ```
    pub async fn rescue_expired(&self) -> Result<Vec<JobId>> {
        let mut rescued = Vec::new();
        rescuer::rescue(&self.store, |batch| {
            rescued.extend(batch.into_iter().map(|(id, _)| id));
        })
        .await?;
        Ok(rescued)
    }

    /// Deletes finished jobs past `retention`, as each worker's cleaner does periodically.
    /// Returns how many jobs it deleted, or `None` when another process is cleaning at this
    /// moment.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::Retention;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let retention = Retention { completed: Duration::from_secs(3600), ..Retention::default() };
    /// if let Some(deleted) = client.delete_finished(retention).await? {
    ///     println!("deleted {deleted} finished jobs");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn delete_finished(&self, retention: Retention) -> Result<Option<u64>> {
        cleaner::clean(&self.store, retention).await
    }

    /// Per-queue counts of waiting and held jobs, lag, and completion, failure and
    /// cancellation rates over the last [`STATS_WINDOW`](crate::defaults::STATS_WINDOW); one
    /// [`QueueStats`] per queue with active jobs or jobs finished within the window, ordered by
    /// queue name. It reads active jobs and the window's finished ones, never the whole history.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// for queue in client.stats().await? {
    ///     println!("{}: {} due, {} running, lag {:?}", queue.queue, queue.due, queue.running, queue.oldest_due_age);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn stats(&self) -> Result<Vec<QueueStats>> {
        store::maintenance::stats(&self.store, defaults::STATS_WINDOW).await
    }
}

/// The name of the connections of a pool [`Client::connect`] makes.
const CLIENT_APPLICATION_NAME: &str = "pgq-client";

/// Whether `url` names PostgreSQL by its scheme (`postgres://` or `postgresql://`, in any case).
fn is_postgres_url(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.eq_ignore_ascii_case("postgres") || scheme.eq_ignore_ascii_case("postgresql")
    })
}

#[cfg(test)]
mod tests {
    use super::{Client, is_postgres_url};

    /// Prepared statements behind a pooler hold whichever of the two calls comes first.
    #[tokio::test]
    async fn the_poolers_prepared_statements_hold_in_either_order() {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        let first = Client::new(pool.clone())
            .behind_pooler()
            .with_prepared_statements(true);
        let second = Client::new(pool.clone())
            .with_prepared_statements(true)
            .behind_pooler();
        for client in [first, second] {
            assert!(client.store.prepared() && !client.store.pinned());
        }
        let unnamed = Client::new(pool).behind_pooler();
        assert!(!unnamed.store.prepared() && unnamed.store.pinned());
    }

    #[test]
    fn only_postgres_schemes_are_database_urls() {
        assert!(is_postgres_url("postgres://app@db/app"));
        assert!(is_postgres_url("postgresql://db/app?sslmode=require"));
        assert!(is_postgres_url("POSTGRES://db/app"));
        assert!(!is_postgres_url("mysql://db/app"));
        assert!(!is_postgres_url("db/app"));
        assert!(!is_postgres_url(""));
    }
}

//! [`WorkerBuilder`]: queues, concurrency and timing, checked by `build()`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::client::Client;
use crate::defaults;
use crate::error::{Error, Result};
use crate::limits;
use crate::maintenance::cleaner::{CleanerConfig, Retention};
use crate::maintenance::rescuer::RescuerConfig;
use crate::maintenance::scheduler::SchedulerConfig;
use crate::periodic::{self, Periodic, Unchecked};
use crate::queue::{self, QueueMismatch};
use crate::registry::Registry;
use crate::state::StateMap;
use crate::worker::{TaskEntry, Worker};
use crate::worker_id;

/// Configures a [`Worker`]: which queues it serves, with how many jobs at once.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let worker = pgq_core::Worker::builder(client)
///     .queue("email", 16)
///     .queue("reports", 2)
///     .poll_interval(Duration::from_millis(500))
///     .build()?;
/// worker.run().await?; // until SIGINT or SIGTERM
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use]
pub struct WorkerBuilder {
    client: Client,
    queues: Vec<(String, usize)>,
    poll_interval: Option<Duration>,
    batch_size: usize,
    lease: Duration,
    shutdown_grace: Duration,
    worker_id: Option<String>,
    state: StateMap,
    rescue_interval: Duration,
    heartbeat_interval: Duration,
    retention: Retention,
    strict_queues: bool,
    durable_completions: bool,
    dispatch_connections: u32,
    upkeep_connections: u32,
    /// Schedules given to [`periodic`](Self::periodic), checked by `build()`.
    pub(in crate::worker) schedules: Vec<Unchecked>,
    pub(in crate::worker) leader_lease: Duration,
}

/// A worker's settings after `build()` checked them.
#[derive(Debug, Clone)]
pub(crate) struct WorkerConfig {
    pub(crate) queues: BTreeMap<String, usize>,
    pub(crate) poll_interval: Duration,
    pub(crate) batch_size: usize,
    pub(crate) lease: Duration,
    pub(crate) shutdown_grace: Duration,
    pub(crate) worker_id: String,
    pub(crate) rescuer: RescuerConfig,
    pub(crate) cleaner: CleanerConfig,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) durable_completions: bool,
    pub(crate) dispatch_connections: u32,
    pub(crate) upkeep_connections: u32,
    /// The periodic schedules this worker runs when it leads them; none: it takes no part.
    pub(crate) schedules: Vec<Periodic>,
    pub(crate) scheduler: SchedulerConfig,
}

impl WorkerBuilder {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            queues: Vec::new(),
            poll_interval: None,
            batch_size: defaults::BATCH_SIZE,
            lease: defaults::LEASE,
            shutdown_grace: defaults::SHUTDOWN_GRACE,
            worker_id: None,
            state: StateMap::default(),
            rescue_interval: defaults::RESCUE_INTERVAL,
            heartbeat_interval: defaults::HEARTBEAT_INTERVAL,
            retention: Retention::default(),
            strict_queues: false,
            durable_completions: true,
            dispatch_connections: defaults::DISPATCH_CONNECTIONS,
            upkeep_connections: defaults::UPKEEP_CONNECTIONS,
            schedules: Vec::new(),
            leader_lease: defaults::LEADER_LEASE,
        }
    }

    /// Whether [`build`](Self::build) refuses a worker whose queues do not match its tasks'
    /// (default `false`: it logs a warning for each mismatch and builds).
    ///
    /// A mismatch is a task with a handler whose `#[task(queue = ..)]` this worker does not
    /// serve, or a served queue that no task with a handler declares. Neither is always a
    /// mistake — another worker may serve the first, and `EnqueueOptions::queue` can send jobs to
    /// the second — but a typo in a queue name is both. Strict mode turns them into
    /// [`Error::InvalidWorker`] naming the task and the queue; use it where one worker serves
    /// every task linked into its binary.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // Refuses to start if "email" is misspelt here or in a #[task(queue = ..)].
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16)
    ///     .strict_queues(true)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn strict_queues(mut self, strict: bool) -> Self {
        self.strict_queues = strict;
        self
    }

    /// How often this process looks for jobs whose lease expired (default 15 s), within
    /// [`limits::MIN_WORKER_INTERVAL`] and [`limits::MAX_WORKER_INTERVAL`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16)
    ///     .rescue_interval(Duration::from_secs(5))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn rescue_interval(mut self, interval: Duration) -> Self {
        self.rescue_interval = interval;
        self
    }

    /// How often this worker heartbeats its registration in `pgq.workers` (default 5 s, at most
    /// [`limits::MAX_WORKER_INTERVAL`]), with how many jobs it holds. [`Client::workers`](crate::Client::workers) lists the workers
    /// that heartbeat; a worker that misses four heartbeats in a row (a crash, a lost host, a
    /// network cut longer than that), and at least 4 s of them, counts as dead (a heartbeat may
    /// wait a second for its statement, however short the interval), and the next rescuer of any other worker
    /// whose own heartbeats have landed for as long takes its jobs back at once instead of
    /// waiting for their leases (none judges its own worker). A clean shutdown removes the
    /// registration.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // Counted dead 4 s after its last heartbeat.
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16)
    ///     .heartbeat_interval(Duration::from_secs(1))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// How long finished jobs are kept (default: completed 24 h, failed and cancelled 7 days).
    ///
    /// The cleaner applies it to every finished job of pgq's schema, whatever its queue: the
    /// workers of one database take turns cleaning, and the shortest retention among them wins.
    /// Give every worker of a schema the same one (a
    /// [`Client::with_schema`](crate::Client::with_schema) of its own for
    /// jobs that must be kept apart).
    ///
    /// A `completed` retention of zero keeps no completed job: the statement that completes a
    /// job deletes it instead (graphile-worker's model), which saves the database a row version
    /// and an index entry per job (about 15 % on the benchmark's drain, docs/performance.md).
    /// [`Client::job`](crate::Client::job) then finds a completed job no more, and a
    /// [`JobWatch`](crate::JobWatch) ends with [`Error::JobNotFound`](crate::Error::JobNotFound);
    /// a job completed in the handler's transaction is deleted once the worker has seen the
    /// commit, the few completed another way (by a drain) go with the cleaner's next run, and
    /// [`Client::stats`](crate::Client::stats) counts no completions.
    /// A retention of [`limits::MAX_DELAY`] (100 years) or more, such as `Duration::MAX`,
    /// keeps those jobs for good.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // Keep no completed job, and failures for a month: what an operator looks at.
    /// let retention = pgq_core::Retention {
    ///     completed: Duration::ZERO,
    ///     failed: Duration::from_secs(30 * 24 * 3600),
    /// };
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("billing", 4)
    ///     .queue("events", 16)
    ///     .retention(retention)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Makes `value` available to every handler through
    /// [`JobContext::state`](crate::JobContext::state), looked up by its type.
    ///
    /// ```no_run
    /// # struct Mailer { api_key: String }
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client.clone())
    ///     .queue("email", 16)
    ///     .state(client.pool().clone()) // ctx.state::<sqlx::PgPool>()
    ///     .state(Mailer { api_key: std::env::var("MAIL_API_KEY").unwrap_or_default() })
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn state<S: Send + Sync + 'static>(mut self, value: S) -> Self {
        self.state.insert(value);
        self
    }

    /// Serves `queue`, running up to `concurrency` of its jobs at once (1 to
    /// [`limits::MAX_QUEUE_CONCURRENCY`]).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16) // many short jobs
    ///     .queue("reports", 2) // a few heavy ones
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn queue(mut self, queue: impl Into<String>, concurrency: usize) -> Self {
        self.queues.push((queue.into(), concurrency));
        self
    }

    /// How long to wait between claims when no notification arrives (default 1 s), within
    /// [`limits::MIN_WORKER_INTERVAL`] and [`limits::MAX_WORKER_INTERVAL`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16)
    ///     .poll_interval(Duration::from_secs(5)) // NOTIFY wakes it sooner
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// How many jobs one claim takes at most (default [`defaults::BATCH_SIZE`], at most
    /// [`limits::MAX_BATCH_SIZE`]). A claim asks for
    /// the free slots plus what a round trip uses up, so only queues of quick jobs reach it. A
    /// worker holds at most this many claimed jobs beyond those running, twice as many when
    /// more jobs return per round trip than the queue has slots (a second claim in flight), and
    /// three times as many when it also serves the queue alone (a third).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("reports", 4)
    ///     .batch_size(1) // hold at most one report beyond the four running
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn batch_size(mut self, size: usize) -> Self {
        self.batch_size = size;
        self
    }

    /// How long a claim holds a job (default 60 s).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("reports", 2)
    ///     .lease(Duration::from_secs(300))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// How long shutdown lets running jobs finish before releasing them (default 15 s).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // Kubernetes waits 30 s after SIGTERM: finish what we can in 25.
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16)
    ///     .shutdown_grace(Duration::from_secs(25))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The id recorded on claimed jobs (default: host, process id and a random suffix). It must
    /// be unique among live workers: jobs are fenced and released by it, and two workers with
    /// one id share one registration. A worker that starts takes back, as a dead process's, the
    /// jobs held under its id, unless another worker of this process runs under it: a process
    /// started again under the same id (a container restarted with the same name and pid)
    /// recovers what the one before it held; a live worker elsewhere under the same id would
    /// lose its jobs.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let pod = std::env::var("POD_NAME").unwrap_or_else(|_| "local".into());
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16)
    ///     .worker_id(format!("{pod}:{}", std::process::id()))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = Some(id.into());
        self
    }

    /// Whether the completions of successful attempts commit durably. On (the default), each
    /// statement that writes completions waits for the write-ahead log to reach disk, as
    /// everything else pgq writes does; several statements in flight share one flush. Off, they
    /// commit without waiting (`synchronous_commit = off` for their own transactions), about 3 %
    /// faster on the benchmark's drain (docs/performance.md), and a PostgreSQL crash can lose the
    /// last fraction of a second of them: such a job is held until its lease runs out and then
    /// runs again — at least once, as after a worker crash. Claims and starts alone never wait
    /// for the flush: a lost one runs the job again the same way. See docs/reliability.md.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // Cheap, idempotent handlers: a job run twice after a database crash is fine.
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("thumbnails", 32)
    ///     .durable_completions(false)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn durable_completions(mut self, durable: bool) -> Self {
        self.durable_completions = durable;
        self
    }

    /// Connections each queue's dispatcher keeps (default
    /// [`DISPATCH_CONNECTIONS`](crate::defaults::DISPATCH_CONNECTIONS), 3, at most
    /// [`limits::MAX_WORKER_CONNECTIONS`]): one per claim
    /// statement it may have in flight, so fewer claim less at once. Part of the worker's
    /// connection budget (see the README's *Deploying*).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // Forty queues on a database that allows few connections: one each.
    /// let mut builder = pgq_core::Worker::builder(client).dispatch_connections(1);
    /// for tenant in 0..40 {
    ///     builder = builder.queue(format!("tenant-{tenant}"), 2);
    /// }
    /// let worker = builder.build()?;
    /// # Ok(()) }
    /// ```
    pub fn dispatch_connections(mut self, connections: u32) -> Self {
        self.dispatch_connections = connections;
        self
    }

    /// Connections the worker keeps for lease renewal, rescue, cleaning and releases (default
    /// [`UPKEEP_CONNECTIONS`](crate::defaults::UPKEEP_CONNECTIONS), 2, at most
    /// [`limits::MAX_WORKER_CONNECTIONS`]), apart from the client's
    /// pool so that handlers holding all of its connections cannot starve them.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("email", 16)
    ///     .upkeep_connections(1)
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn upkeep_connections(mut self, connections: u32) -> Self {
        self.upkeep_connections = connections;
        self
    }

    /// Checks the configuration and the linked task handlers. Call it within a Tokio runtime:
    /// the worker's connection pools are made here.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// match pgq_core::Worker::builder(client).queue("email", 16).build() {
    ///     Ok(worker) => worker.run().await?,
    ///     Err(pgq_core::Error::InvalidWorker(reason)) => println!("not starting: {reason}"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn build(mut self) -> Result<Worker> {
        if self.queues.is_empty() {
            return Err(Error::InvalidWorker("no queues configured".into()));
        }
        let mut queues = BTreeMap::new();
        for (name, concurrency) in std::mem::take(&mut self.queues) {
            queue::validate(&name)?;
            if !(1..=limits::MAX_QUEUE_CONCURRENCY).contains(&concurrency) {
                return Err(Error::InvalidWorker(format!(
                    "queue {name:?} has concurrency {concurrency}, outside 1..={}",
                    limits::MAX_QUEUE_CONCURRENCY
                )));
            }
            if queues.insert(name.clone(), concurrency).is_some() {
                return Err(Error::InvalidWorker(format!(
                    "queue {name:?} is configured twice"
                )));
            }
        }
        let connections = 1..=limits::MAX_WORKER_CONNECTIONS;
        if !connections.contains(&self.dispatch_connections)
            || !connections.contains(&self.upkeep_connections)
        {
            return Err(Error::InvalidWorker(format!(
                "{} dispatch and {} upkeep connections: each must be within 1..={}",
                self.dispatch_connections,
                self.upkeep_connections,
                limits::MAX_WORKER_CONNECTIONS
            )));
        }
        if !(1..=limits::MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(Error::InvalidWorker(format!(
                "batch size {} is outside 1..={}",
                self.batch_size,
                limits::MAX_BATCH_SIZE
            )));
        }
        let poll_interval = self.poll_interval.unwrap_or(if self.client.is_pooled() {
            defaults::POOLED_POLL_INTERVAL
        } else {
            defaults::POLL_INTERVAL
        });
        let intervals = limits::MIN_WORKER_INTERVAL..=limits::MAX_WORKER_INTERVAL;
        for (what, interval) in [
            ("poll", poll_interval),
            ("heartbeat", self.heartbeat_interval),
            ("rescue", self.rescue_interval),
        ] {
            if !intervals.contains(&interval) {
                return Err(Error::InvalidWorker(format!(
                    "{what} interval {interval:?} is outside 1 ms..=24 h"
                )));
            }
        }
        if self.lease < limits::MIN_LEASE || self.lease > limits::MAX_LEASE {
            return Err(Error::InvalidWorker(format!(
                "lease {:?} is outside 1 s..=24 h",
                self.lease
            )));
        }
        let registry = Registry::linked()?;
        let handlers: HashMap<_, _> = registry
            .tasks()
            .filter_map(|task| {
                let run = task.run_fn()?;
                let lease = task.lease().unwrap_or(self.lease);
                let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
                let entry = TaskEntry {
                    run,
                    lease_ms,
                    timeout: task.timeout(),
                    keyed_queue: task.keyed().then(|| task.queue()),
                };
                Some((task.name(), entry))
            })
            .collect();
        if handlers.is_empty() {
            return Err(Error::InvalidWorker(
                "no task type linked into this binary has a Handler".into(),
            ));
        }
        let declared = registry
            .tasks()
            .filter(|task| task.has_handler())
            .map(|task| (task.name(), task.queue()));
        let mismatches = queue::mismatches(declared, queues.keys().map(String::as_str));
        if self.strict_queues && !mismatches.is_empty() {
            let list: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
            return Err(Error::InvalidWorker(format!(
                "queues do not match the tasks (strict_queues): {}",
                list.join("; ")
            )));
        }
        for mismatch in &mismatches {
            match mismatch {
                QueueMismatch::Unserved { task, queue } => tracing::warn!(
                    task,
                    queue,
                    "{mismatch}; its jobs wait for a worker that serves it"
                ),
                QueueMismatch::Undeclared { queue } => tracing::warn!(
                    queue,
                    "{mismatch}; only jobs enqueued to it with EnqueueOptions::queue run there"
                ),
            }
        }
        let schedules = self.checked_schedules(&queues)?;
        let config = WorkerConfig {
            scheduler: SchedulerConfig {
                lease: self.leader_lease,
                max_payload_bytes: self.client.max_payload_bytes(),
            },
            schedules,
            queues,
            poll_interval,
            batch_size: self.batch_size,
            lease: self.lease,
            shutdown_grace: self.shutdown_grace,
            worker_id: match self.worker_id {
                Some(id) => {
                    worker_id::validate(&id)?;
                    id
                }
                None => default_worker_id(),
            },
            rescuer: RescuerConfig {
                interval: self.rescue_interval,
            },
            cleaner: CleanerConfig {
                retention: self.retention,
                interval: defaults::CLEAN_INTERVAL,
            },
            heartbeat_interval: self.heartbeat_interval,
            durable_completions: self.durable_completions,
            dispatch_connections: self.dispatch_connections,
            upkeep_connections: self.upkeep_connections,
        };
        Ok(Worker::new(self.client, config, handlers, self.state))
    }
}

impl WorkerBuilder {
    /// The schedules given to [`periodic`](Self::periodic) and those declared with
    /// `#[task(cron = ..)]` on tasks whose queue this worker serves, checked.
    fn checked_schedules(&self, queues: &BTreeMap<String, usize>) -> Result<Vec<Periodic>> {
        if self.leader_lease < limits::MIN_LEASE || self.leader_lease > limits::MAX_LEASE {
            return Err(Error::InvalidWorker(format!(
                "leader lease {:?} is outside 1 s..=24 h",
                self.leader_lease
            )));
        }
        let declared = periodic::declared()
            .into_iter()
            .filter(|schedule| queues.contains_key(schedule.queue()));
        periodic::check_all(self.schedules.iter().cloned().chain(declared).collect())
    }
}

/// `host:pid:suffix`, unique enough that two processes never share it.
fn default_worker_id() -> String {
    let host = host_name();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}:{}:{:06x}", std::process::id(), nanos & 0xff_ffff)
}

/// This machine's name, as far as the environment tells it: letters, digits, `.-_`.
pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .take(64)
                .collect()
        })
        .filter(|h: &String| !h.is_empty())
        .unwrap_or_else(|| "worker".into())
}

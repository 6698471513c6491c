//! The worker runtime: claims jobs of its queues and runs them through their typed handlers.
//!
//! One dispatcher per queue claims batches into free slots, starts them and writes their
//! completions, one statement per round trip; one listener connection wakes the dispatchers on
//! NOTIFY, with polling as the backstop; each job runs as its own task, and every outcome is
//! written fenced on (id, attempt, worker).

mod builder;
mod dispatcher;
mod drain;
mod event;
mod executor;
mod listener;
mod renewer;
mod signal;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::{Notify, Semaphore, broadcast, watch};

use dispatcher::PendingCompletion;
use tokio::task::{AbortHandle, JoinHandle};

pub(crate) use builder::WorkerConfig;
pub use builder::{
    DEFAULT_BATCH_SIZE, DEFAULT_LEASE, DEFAULT_POLL_INTERVAL, DEFAULT_SHUTDOWN_GRACE, WorkerBuilder,
};
pub use drain::{DRAIN_LIMIT, DrainedJob};
pub use event::{JobOutcome, WorkerEvent, WorkerStats};

use crate::attempt::AttemptState;
use crate::client::Client;
use crate::error::Result;
use crate::handler::RunFn;
use crate::job_id::JobId;
use crate::maintenance::{cleaner, rescuer};
use crate::state::StateMap;
use crate::store;
use crate::store::lease::HeldJob;

/// Connections of the upkeep pool: renewal, rescue and cleaning.
const UPKEEP_CONNECTIONS: u32 = 2;

/// How many events a slow [`WorkerHandle::events`] receiver may fall behind before it lags.
const EVENT_CAPACITY: usize = 1024;

/// Runs jobs: built by [`Worker::builder`], run by [`run`](Self::run),
/// [`run_until`](Self::run_until) or [`start`](Self::start).
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let worker = pgq_core::Worker::builder(client).queue("default", 8).build()?;
/// worker.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Worker {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

/// A started worker. Dropping it does not stop the worker; call [`shutdown`](Self::shutdown).
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
/// tokio::signal::ctrl_c().await.ok();
/// handle.shutdown().await?; // running jobs finish, or go back to pending
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct WorkerHandle {
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    supervisor: JoinHandle<()>,
}

/// What the worker's tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) pool: PgPool,
    /// A small pool of its own for lease renewal and maintenance, so that handlers holding
    /// every connection of the main pool cannot starve them.
    pub(crate) upkeep_pool: PgPool,
    /// The dispatchers' connections; see [`dispatch_pool`].
    pub(crate) dispatch_pool: PgPool,
    pub(crate) config: WorkerConfig,
    pub(crate) handlers: HashMap<&'static str, TaskEntry>,
    pub(crate) task_names: Vec<&'static str>,
    /// Each task's lease, in the order of `task_names`.
    pub(crate) task_leases: Vec<i64>,
    pub(crate) queues: Vec<Arc<QueueSlots>>,
    pub(crate) state: Arc<StateMap>,
    /// Attempts in flight: renewed, cancellable, and aborted at shutdown after the grace period.
    pub(crate) running: Mutex<HashMap<JobId, Running>>,
    /// Claimed jobs waiting for a slot: renewed like running ones, so that a job that waits
    /// longer than its lease is never rescued from under the worker that will start it.
    pub(crate) waiting: Mutex<HashMap<JobId, HeldJob>>,
    pub(crate) events: broadcast::Sender<WorkerEvent>,
    pub(crate) stats: watch::Sender<WorkerStats>,
    pub(crate) stopping: watch::Receiver<bool>,
}

/// A task this worker can run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskEntry {
    pub(crate) run: RunFn,
    pub(crate) lease_ms: i64,
}

/// An attempt in flight.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) attempt: i32,
    pub(crate) lease_ms: i64,
    pub(crate) state: Arc<AttemptState>,
    pub(crate) abort: Option<AbortHandle>,
}

/// One queue's free slots, its wake-up signal, and the completions waiting for a tick.
#[derive(Debug)]
pub(crate) struct QueueSlots {
    pub(crate) name: String,
    pub(crate) concurrency: usize,
    /// One permit per handler running.
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) wake: Notify,
    completions: Mutex<Vec<PendingCompletion>>,
    /// Attempts the dispatcher started whose executor has not ended.
    active: AtomicUsize,
    /// Handlers that returned since the dispatcher last claimed.
    returned: AtomicUsize,
    /// Signalled when a completion is waiting, a handler returned, or an executor ended.
    pub(crate) completed: Notify,
}

impl QueueSlots {
    fn new(name: String, concurrency: usize) -> Self {
        Self {
            name,
            concurrency,
            slots: Arc::new(Semaphore::new(concurrency)),
            wake: Notify::new(),
            completions: Mutex::new(Vec::new()),
            active: AtomicUsize::new(0),
            returned: AtomicUsize::new(0),
            completed: Notify::new(),
        }
    }

    /// Counts an attempt as active until the returned guard drops.
    pub(crate) fn enter(self: &Arc<Self>) -> Active {
        self.active.fetch_add(1, Ordering::SeqCst);
        Active {
            queue: self.clone(),
        }
    }

    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// A handler returned: its slot is free for the next job.
    pub(crate) fn handler_returned(&self) {
        self.returned.fetch_add(1, Ordering::SeqCst);
        self.completed.notify_one();
    }

    /// How many handlers returned since the last call.
    pub(crate) fn take_returned(&self) -> usize {
        self.returned.swap(0, Ordering::SeqCst)
    }

    /// Handlers running now.
    pub(crate) fn running(&self) -> usize {
        self.concurrency - self.slots.available_permits().min(self.concurrency)
    }

    /// Queues a success for the next tick; the first of a batch wakes the dispatcher.
    pub(crate) fn push_completion(&self, completion: PendingCompletion) {
        let first = match self.completions.lock() {
            Ok(mut completions) => {
                completions.push(completion);
                completions.len() == 1
            }
            Err(_) => true,
        };
        if first {
            self.completed.notify_one();
        }
    }

    pub(crate) fn take_completions(&self) -> Vec<PendingCompletion> {
        self.completions
            .lock()
            .map(|mut completions| std::mem::take(&mut *completions))
            .unwrap_or_default()
    }
}

/// An attempt started by a dispatcher, counted until its executor ends.
#[derive(Debug)]
pub(crate) struct Active {
    queue: Arc<QueueSlots>,
}

impl Active {
    pub(crate) fn queue(&self) -> &QueueSlots {
        &self.queue
    }

    pub(crate) fn queue_slots(&self) -> Arc<QueueSlots> {
        self.queue.clone()
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        // The last one lets a stopping dispatcher finish.
        if self.queue.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.queue.completed.notify_one();
        }
    }
}

impl Shared {
    pub(crate) fn emit(&self, event: WorkerEvent) {
        // No receiver is fine: events are for whoever listens.
        let _ = self.events.send(event);
    }

    /// Reports an attempt's end: counted in the stats and sent as an event.
    pub(crate) fn finished(
        &self,
        id: JobId,
        task: String,
        attempt: i32,
        outcome: JobOutcome,
        error: Option<String>,
    ) {
        self.stats.send_modify(|stats| stats.count(outcome));
        self.emit(WorkerEvent::JobFinished {
            id,
            task,
            attempt,
            outcome,
            error,
        });
    }

    pub(crate) fn worker_id(&self) -> &str {
        &self.config.worker_id
    }

    pub(crate) fn wake(&self, queue: &str) {
        if let Some(slots) = self.queues.iter().find(|q| q.name == queue) {
            slots.wake.notify_one();
        }
    }

    /// Takes a waiting job out to start it; `false` when it lost its lease while it waited.
    pub(crate) fn take_waiting(&self, id: JobId) -> bool {
        self.waiting
            .lock()
            .map_or(true, |mut waiting| waiting.remove(&id).is_some())
    }

    /// The attempt in flight for job `id`, if any.
    pub(crate) fn running_state(&self, id: JobId) -> Option<Arc<AttemptState>> {
        let running = self.running.lock().ok()?;
        running.get(&id).map(|r| r.state.clone())
    }

    pub(crate) fn wake_all(&self) {
        for slots in &self.queues {
            slots.wake.notify_one();
        }
    }
}

impl Worker {
    /// Starts configuring a worker on the client's database.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client).queue("email", 16).build()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(client: Client) -> WorkerBuilder {
        WorkerBuilder::new(client)
    }

    pub(crate) fn new(
        client: Client,
        config: WorkerConfig,
        handlers: HashMap<&'static str, TaskEntry>,
        state: StateMap,
    ) -> Self {
        let (stop, stopping) = watch::channel(false);
        let queues = config
            .queues
            .iter()
            .map(|(name, &concurrency)| Arc::new(QueueSlots::new(name.clone(), concurrency)))
            .collect();
        let mut task_names: Vec<_> = handlers.keys().copied().collect();
        task_names.sort_unstable();
        let task_leases = task_names
            .iter()
            .map(|name| handlers[name].lease_ms)
            .collect();
        let dispatch_pool = dispatch_pool(client.pool(), queues_len(&config));
        let upkeep_pool = PgPoolOptions::new()
            .max_connections(UPKEEP_CONNECTIONS)
            .test_before_acquire(false)
            .connect_lazy_with(client.pool().connect_options().as_ref().clone());
        let shared = Arc::new(Shared {
            pool: client.pool().clone(),
            client,
            upkeep_pool,
            dispatch_pool,
            config,
            handlers,
            task_names,
            task_leases,
            queues,
            state: Arc::new(state),
            running: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            events: broadcast::channel(EVENT_CAPACITY).0,
            stats: watch::channel(WorkerStats::default()).0,
            stopping,
        });
        Self { shared, stop }
    }

    /// The id this worker records on the jobs it claims.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client).queue("email", 16).build()?;
    /// // Logged so that an operator can `Client::release_worker` it if the process dies.
    /// println!("starting worker {}", worker.worker_id());
    /// # Ok(()) }
    /// ```
    pub fn worker_id(&self) -> &str {
        self.shared.worker_id()
    }

    /// Events from now on; subscribe before starting to see every job.
    ///
    /// ```no_run
    /// # use pgq_core::WorkerEvent;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client).queue("email", 16).build()?;
    /// let mut events = worker.events(); // before `start`, so no event is missed
    /// let _handle = worker.start();
    /// while let Ok(event) = events.recv().await {
    ///     if let WorkerEvent::JobFinished { id, outcome, .. } = event {
    ///         println!("job {id}: {outcome:?}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> broadcast::Receiver<WorkerEvent> {
        self.shared.events.subscribe()
    }

    /// Starts the worker in the background.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// // ... serve requests, run the rest of the application ...
    /// handle.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn start(self) -> WorkerHandle {
        let shared = self.shared.clone();
        let supervisor = tokio::spawn(supervise(self.shared));
        WorkerHandle {
            shared,
            stop: self.stop,
            supervisor,
        }
    }

    /// Runs until `shutdown` resolves, then shuts down gracefully.
    ///
    /// ```no_run
    /// # async fn admin_endpoint(stop: tokio::sync::oneshot::Sender<()>) { let _ = stop.send(()); }
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let (stop, stopped) = tokio::sync::oneshot::channel();
    /// tokio::spawn(admin_endpoint(stop)); // sends when an operator asks the worker to stop
    /// let worker = pgq_core::Worker::builder(client).queue("email", 16).build()?;
    /// worker.run_until(async { let _ = stopped.await; }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let handle = self.start();
        shutdown.await;
        handle.shutdown().await
    }

    /// Runs every due job of the worker's queues inline, one at a time in priority order, until
    /// none is due (at most [`DRAIN_LIMIT`] attempts), and returns what each attempt did. Jobs
    /// that retry at once run again within the same drain.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let drained = pgq_core::Worker::builder(client).queue("email", 1).build()?.drain().await?;
    /// for job in drained {
    ///     println!("{} {}: {:?}", job.task, job.id, job.outcome);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn drain(self) -> Result<Vec<DrainedJob>> {
        let drained = drain::drain(self.shared.clone()).await;
        self.shared.upkeep_pool.close().await;
        self.shared.dispatch_pool.close().await;
        drained
    }

    /// Runs until the process receives SIGINT or SIGTERM, then shuts down gracefully.
    ///
    /// ```no_run
    /// #[tokio::main]
    /// async fn main() -> pgq_core::Result<()> {
    ///     let client = pgq_core::Client::connect("postgres://postgres@127.0.0.1/app").await?;
    ///     let worker = pgq_core::Worker::builder(client).queue("default", 8).build()?;
    ///     worker.run().await // until SIGINT or SIGTERM, then a graceful shutdown
    /// }
    /// ```
    pub async fn run(self) -> Result<()> {
        self.run_until(signal::terminate()).await
    }
}

impl WorkerHandle {
    /// The id this worker records on the jobs it claims.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// println!("worker {} started", handle.worker_id());
    /// # Ok(()) }
    /// ```
    pub fn worker_id(&self) -> &str {
        self.shared.worker_id()
    }

    /// Events from now on: each job started and finished, listener changes.
    ///
    /// ```no_run
    /// # use pgq_core::WorkerEvent;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// let mut events = handle.events();
    /// tokio::spawn(async move {
    ///     while let Ok(event) = events.recv().await {
    ///         if event == WorkerEvent::ListenerLost {
    ///             println!("LISTEN connection lost; polling until it is back");
    ///         }
    ///     }
    /// });
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> broadcast::Receiver<WorkerEvent> {
        self.shared.events.subscribe()
    }

    /// Running totals, updated as attempts end; `wait_for` on it to await a count.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// handle.stats().wait_for(|stats| stats.completed >= 100).await.ok();
    /// handle.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> watch::Receiver<WorkerStats> {
        self.shared.stats.subscribe()
    }

    /// Asks the worker to stop without waiting; [`shutdown`](Self::shutdown) also waits.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// handle.stop(); // no new claims from now on; running jobs carry on
    /// handle.shutdown().await?; // waits for them, up to the grace period
    /// # Ok(()) }
    /// ```
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Stops claiming, lets running jobs finish within the grace period, releases the rest
    /// to `pending` without spending their attempt, and returns when nothing is held.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// // ... when the application stops:
    /// handle.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(self) -> Result<()> {
        self.stop();
        self.supervisor
            .await
            .map_err(|err| crate::Error::InvalidWorker(format!("worker supervisor failed: {err}")))
    }
}

/// Runs the listener, fetchers and upkeep until told to stop, then shuts down in order.
async fn supervise(shared: Arc<Shared>) {
    let listener = tokio::spawn(listener::listen(shared.clone()));
    let renewer = tokio::spawn(renewer::renew(shared.clone()));
    let rescuer = tokio::spawn(rescuer::run(
        shared.upkeep_pool.clone(),
        shared.config.rescuer.clone(),
        shared.stopping.clone(),
    ));
    let cleaner = tokio::spawn(cleaner::run(
        shared.upkeep_pool.clone(),
        shared.config.cleaner.clone(),
        shared.stopping.clone(),
    ));
    let dispatchers: Vec<_> = shared
        .queues
        .iter()
        .map(|queue| tokio::spawn(dispatcher::dispatch(shared.clone(), queue.clone())))
        .collect();
    let mut dispatchers = futures_util::future::join_all(dispatchers);

    let mut stopping = shared.stopping.clone();
    let _ = stopping.wait_for(|stop| *stop).await;
    // Dispatchers stop claiming and return once every running job has finished and been written.
    if tokio::time::timeout(shared.config.shutdown_grace, &mut dispatchers)
        .await
        .is_err()
    {
        let running: Vec<AbortHandle> = shared
            .running
            .lock()
            .map(|running| running.values().filter_map(|r| r.abort.clone()).collect())
            .unwrap_or_default();
        for handler in running {
            handler.abort();
        }
        // Executors see the abort and release their jobs; give them time to write that.
        let _ = tokio::time::timeout(RELEASE_TIME, &mut dispatchers).await;
    }
    // Anything still held (an unwritten release) goes back to pending too.
    if let Err(err) = store::attempt::release_worker(&shared.pool, shared.worker_id()).await {
        tracing::warn!(worker_id = shared.worker_id(), error = %err, "could not release held jobs at shutdown");
    }
    for upkeep in [listener, renewer, rescuer, cleaner] {
        upkeep.abort();
        let _ = upkeep.await;
    }
    shared.upkeep_pool.close().await;
    shared.dispatch_pool.close().await;
}

fn queues_len(config: &WorkerConfig) -> usize {
    config.queues.len()
}

/// The dispatchers' own connections, one per tick a queue may have in flight, committing without waiting for the WAL flush: a claim, a start or a completion that a
/// PostgreSQL crash loses leaves its job held, and the rescuer runs it again once the lease runs
/// out — at least once, as for a worker crash. Everything else, enqueues and the outcomes the
/// executors write themselves (failures, cancellations, releases) included, commits durably.
fn dispatch_pool(pool: &PgPool, queues: usize) -> PgPool {
    let options = pool
        .connect_options()
        .as_ref()
        .clone()
        .options([("synchronous_commit", "off")]);
    PgPoolOptions::new()
        .max_connections(u32::try_from(queues * dispatcher::TICKS_IN_FLIGHT).unwrap_or(u32::MAX))
        .test_before_acquire(false)
        .connect_lazy_with(options)
}

/// How long shutdown waits, after aborting handlers past the grace period, for their jobs to be
/// released.
const RELEASE_TIME: Duration = Duration::from_secs(10);

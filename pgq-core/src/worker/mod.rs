//! The worker runtime: claims jobs of its queues and runs them through their typed handlers.
//!
//! One dispatcher per queue claims jobs into free slots and writes their starts and successes,
//! one statement per round trip; an executor runs each job as a task of its own; the completer
//! is where every attempt ends; the held-jobs registry is what the lease renewer renews; one
//! listener connection wakes the dispatchers on NOTIFY, with polling as the backstop.

mod builder;
pub(crate) mod completer;
pub(crate) mod connections;
mod control;
mod dispatcher;
mod drain;
mod event;
mod executor;
mod heartbeat;
mod held;
mod listener;
mod options_follower;
mod pacing;
mod periodic;
mod queue_settings;
mod renewer;
mod report;
mod running_ids;
mod signal;
mod slots;
mod supervisor;
mod tasks;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{broadcast, oneshot, watch};

pub use builder::WorkerBuilder;
pub(crate) use builder::WorkerConfig;
pub use drain::DrainedJob;
pub use event::{WorkerEvent, WorkerStats};
pub(crate) use tasks::TaskEntry;

use crate::client::Client;
use crate::error::Result;
use crate::state::StateMap;
use supervisor::Runtime;

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
    runtime: Arc<Runtime>,
    stop: watch::Sender<bool>,
}

/// A started worker. Dropping it does not stop the worker; call [`shutdown`](Self::shutdown).
/// The worker also stops, without a grace period, when the Tokio runtime it was started on
/// shuts down (its claims and handlers run there): its held jobs go back to pending and its
/// registration is removed.
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
    runtime: Arc<Runtime>,
    stop: watch::Sender<bool>,
    supervisor: oneshot::Receiver<()>,
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
        let runtime = Arc::new(Runtime::new(client, config, handlers, state, stopping));
        Self { runtime, stop }
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
        self.runtime.worker_id()
    }

    /// Events from now on; subscribe before starting to see every job.
    ///
    /// The channel keeps the last 1024 events (two a job): a receiver that falls further behind
    /// gets `RecvError::Lagged` with how many it missed, and goes on with the oldest kept.
    ///
    /// ```no_run
    /// # use pgq_core::WorkerEvent;
    /// use tokio::sync::broadcast::error::RecvError;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client).queue("email", 16).build()?;
    /// let mut events = worker.events(); // before `start`, so no event is missed
    /// let _handle = worker.start();
    /// loop {
    ///     match events.recv().await {
    ///         Ok(WorkerEvent::JobFinished { id, outcome, .. }) => println!("job {id}: {outcome:?}"),
    ///         Ok(_) => {}
    ///         Err(RecvError::Lagged(missed)) => println!("{missed} events missed"),
    ///         Err(RecvError::Closed) => break,
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> broadcast::Receiver<WorkerEvent> {
        self.runtime.reporter.subscribe()
    }

    /// Starts the worker in the background: its claims and handlers on the current Tokio
    /// runtime (this panics outside one, as `tokio::spawn` does), its own loops on a thread of
    /// their own.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let handle = pgq_core::Worker::builder(client).queue("email", 16).build()?.start();
    /// // ... serve requests, run the rest of the application ...
    /// handle.shutdown().await?;
    /// # Ok(()) }
    /// ```
    pub fn start(self) -> WorkerHandle {
        let runtime = self.runtime.clone();
        // Claims and handlers run on this runtime; the worker's own loops on a thread of theirs.
        let handlers = tokio::runtime::Handle::current();
        // The worker keeps a sender of its own stop signal while it runs: a handle (or a
        // `run` future) dropped without `shutdown` leaves the worker running, instead of
        // closing the signal, which every loop would read as a stop it never completes.
        let keep_running = self.stop.clone();
        let supervisor =
            control::spawn(supervisor::supervise(self.runtime, handlers, keep_running));
        WorkerHandle {
            runtime,
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
    /// none is due (at most [`DRAIN_LIMIT`](crate::limits::DRAIN_LIMIT) attempts), and returns
    /// what each attempt did. Jobs that retry at once run again within the same drain.
    ///
    /// A drain is for tests, scripts and one-off runs: it does not read a queue's pause or its
    /// limits, renews no lease (a handler running past its lease may be rescued by a running
    /// worker and run again there), and hears no cancellation.
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
        self.drain_at_most(crate::limits::DRAIN_LIMIT).await
    }

    /// [`drain`](Self::drain), stopping after `attempts` attempts (at most
    /// [`DRAIN_LIMIT`](crate::limits::DRAIN_LIMIT): a larger bound counts as that): a bound for
    /// jobs that keep enqueueing or retrying jobs.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let drained = pgq_core::Worker::builder(client).queue("crawl", 1).build()?.drain_at_most(100).await?;
    /// assert!(drained.len() <= 100);
    /// # Ok(()) }
    /// ```
    pub async fn drain_at_most(self, attempts: usize) -> Result<Vec<DrainedJob>> {
        let runtime = &self.runtime;
        let limit = attempts.min(crate::limits::DRAIN_LIMIT);
        let drained = drain::drain(
            runtime.executor.clone(),
            &runtime.reporter,
            &runtime.queues,
            limit,
        )
        .await;
        runtime.close_pools().await;
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
        self.runtime.worker_id()
    }

    /// Events from now on: each job started and finished, listener changes. A receiver that
    /// falls more than 1024 events behind gets `RecvError::Lagged` and goes on (see
    /// [`Worker::events`]); the loop below stops at the first.
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
        self.runtime.reporter.subscribe()
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
        self.runtime.reporter.stats()
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
    /// to `pending` without spending their attempt, and returns when nothing is held — or, when
    /// the database does not answer, after about 5 s more, leaving what is still held to its
    /// lease.
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
            .map_err(|_| crate::Error::InvalidWorker("the worker's thread ended early".into()))
    }
}

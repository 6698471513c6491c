//! What a worker is made of, and the supervisor that starts its parts and shuts them down in
//! order: stop claiming, let running jobs finish within the grace period, abort and release
//! the rest, then stop the upkeep.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, timeout_at};

use crate::client::Client;
use crate::job_id::JobId;
use crate::maintenance::cleaner::Cleaner;
use crate::maintenance::heartbeat_streak::HeartbeatStreak;
use crate::maintenance::rescuer::{self, Judge, Rescuer};
use crate::maintenance::scheduler::Scheduler;
use crate::maintenance::{self};
use crate::metric;
use crate::state::StateMap;
use crate::store;
use crate::store::workers::Registration;
use crate::worker::builder::{self, WorkerConfig};
use crate::worker::completer::Completer;
use crate::worker::connections::{self, OwnPool};
use crate::worker::dispatcher::{self, Dispatch};
use crate::worker::executor::Executor;
use crate::worker::heartbeat::{Heartbeat, MISSED_HEARTBEATS};
use crate::worker::held::HeldJobs;
use crate::worker::listener::Listener;
use crate::worker::options_follower::OptionsFollower;
use crate::worker::queue_settings::{self, SettingsReader};
use crate::worker::renewer::{self, Renewer};
use crate::worker::report::Reporter;
use crate::worker::running_ids::RunningId;
use crate::worker::slots::QueueSlots;
use crate::worker::tasks::{TaskEntry, Tasks};

/// How long shutdown waits, after aborting handlers past the grace period, for them to stop
/// and their jobs to be released; handlers that block their threads do not stop, and their jobs
/// are released without them.
const RELEASE_TIME: Duration = Duration::from_secs(1);

/// The least a heartbeat waits for its statement, however short its interval: on a busy
/// database a shorter wait would fail heartbeats that are merely slow.
const HEARTBEAT_TIMEOUT_FLOOR: Duration = Duration::from_secs(1);

/// The most the releases after the grace period, and the upkeep's last steps, may take together
/// when the database does not answer.
const CLEANUP_TIME: Duration = Duration::from_secs(2);

/// The most the worker's last writes (its seats of limited queues, its registration) may take.
const FAREWELL_TIME: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) config: WorkerConfig,
    pub(crate) queues: Vec<Arc<QueueSlots>>,
    pub(crate) executor: Arc<Executor>,
    pub(crate) reporter: Reporter,
    /// Each queue's dispatch connections, in the order of `queues`.
    pub(crate) dispatch_pools: Vec<PgPool>,
    pub(crate) upkeep_pool: PgPool,
    /// The dispatch and upkeep pools, to follow the client pool's connect options.
    pub(crate) own_pools: Vec<OwnPool>,
    pub(crate) stopping: watch::Receiver<bool>,
}

impl Runtime {
    pub(crate) fn new(
        client: Client,
        config: WorkerConfig,
        handlers: HashMap<&'static str, TaskEntry>,
        state: StateMap,
        stopping: watch::Receiver<bool>,
    ) -> Self {
        let queues: Vec<_> = config
            .queues
            .iter()
            .map(|(name, &concurrency)| QueueSlots::new(name, concurrency, !client.is_pooled()))
            .collect();
        let worker_id: Arc<str> = config.worker_id.as_str().into();
        let reporter = Reporter::new();
        let held = Arc::new(HeldJobs::default());
        let dispatch: Vec<OwnPool> = queues
            .iter()
            .map(|queue| {
                connections::dispatch_pool(
                    client.pool(),
                    &queue.name,
                    config.dispatch_connections,
                    client.is_pooled(),
                    client.store().server_timeout(),
                )
            })
            .collect();
        let upkeep = connections::upkeep_pool(
            client.pool(),
            config.upkeep_connections,
            client.is_pooled(),
            client.store().server_timeout(),
        );
        let dispatch_pools = dispatch.iter().map(|own| own.pool.clone()).collect();
        let upkeep_pool = upkeep.pool.clone();
        let own_pools = dispatch.into_iter().chain([upkeep]).collect();
        let completer = Arc::new(Completer::new(
            client.store().clone(),
            client.store().on(upkeep_pool.clone()),
            worker_id.clone(),
            reporter.clone(),
            held.clone(),
            &queues,
            config.cleaner.retention.completed.is_zero(),
        ));
        let executor = Arc::new(Executor {
            client,
            worker_id,
            tasks: Arc::new(Tasks::new(handlers)),
            state: Arc::new(state),
            held,
            completer,
        });
        Self {
            config,
            queues,
            executor,
            reporter,
            dispatch_pools,
            upkeep_pool,
            own_pools,
            stopping,
        }
    }

    pub(crate) fn worker_id(&self) -> &str {
        &self.executor.worker_id
    }

    pub(crate) async fn close_pools(&self) {
        self.upkeep_pool.close().await;
        for pool in &self.dispatch_pools {
            pool.close().await;
        }
    }
}

/// Runs the listener, dispatchers and upkeep until told to stop, then shuts down in order.
/// Dispatchers, and the attempts they start, run on the application's runtime (`handlers`);
/// everything else here runs on the worker's own thread, which a handler that blocks its thread
/// cannot stall. It stops when `stop` is sent, or when the runtime of `handlers` shuts down.
pub(crate) async fn supervise(
    runtime: Arc<Runtime>,
    handlers: tokio::runtime::Handle,
    stop: watch::Sender<bool>,
) {
    let executor = &runtime.executor;
    let config = &runtime.config;
    // The listener and the renewer outlive the dispatchers: running jobs keep their leases and
    // hear of cancellations through the grace period.
    let (finish, finished) = watch::channel(false);
    let pause_changed = Arc::new(Notify::new());
    let listener = Listener {
        client_pool: executor.client.pool().clone(),
        store: executor.client.store().clone(),
        queues: runtime.queues.clone(),
        held: executor.held.clone(),
        reporter: runtime.reporter.clone(),
        probe_timeout: executor.client.store().timeout(),
        pause_changed: pause_changed.clone(),
    };
    // Behind a transaction pooler no session state survives: the dispatchers poll instead.
    let listener = if executor.client.is_pooled() {
        tokio::spawn(async {})
    } else {
        tokio::spawn(listener.listen())
    };
    let shortest_lease = Duration::from_millis(
        u64::try_from(executor.tasks.shortest_lease_ms()).unwrap_or(u64::MAX),
    );
    let renew_every = renewer::interval(shortest_lease.min(config.lease));
    let renewer_store = executor.client.store().on(runtime.upkeep_pool.clone());
    let renew_wait = renewer::wait(renew_every, renewer_store.timeout());
    let renewer = Renewer {
        store: renewer_store.with_timeout(renew_wait),
        worker_id: executor.worker_id.clone(),
        held: executor.held.clone(),
        interval: renew_every,
    };
    let renewer = tokio::spawn(maintenance::run(renewer, finished.clone()));
    let follower = OptionsFollower {
        client_pool: executor.client.pool().clone(),
        own: runtime.own_pools.clone(),
    };
    let follower = tokio::spawn(maintenance::run(follower, finished.clone()));
    // The heartbeat, like the renewer, goes on through the grace period. Each waits no longer
    // than its interval (a second at least): a statement hung on a silently dropped connection
    // would otherwise stretch the gap between two heartbeats past the registration's life.
    let streak = Arc::new(HeartbeatStreak::default());
    let heartbeat_store = executor.client.store().on(runtime.upkeep_pool.clone());
    let heartbeat_timeout = heartbeat_store
        .timeout()
        .min(config.heartbeat_interval.max(HEARTBEAT_TIMEOUT_FLOOR));
    let heartbeat_store = heartbeat_store.with_timeout(heartbeat_timeout);
    let worker = registration(config);
    // Registered as a new process before anything is claimed. Unregistered, it registers with
    // its first heartbeat, and what a process before it held waits for its leases. Another
    // worker of this process under the same id is alive: its jobs are left alone.
    let (_running_id, shared) = RunningId::hold(&config.worker_id);
    let registered = if shared {
        tracing::warn!(worker = %config.worker_id, "another worker of this process runs under this worker's id");
        Ok(Vec::new())
    } else {
        store::workers::register(&heartbeat_store, &worker).await
    };
    match registered {
        Ok(taken) if !taken.is_empty() => {
            let ids: Vec<JobId> = taken.iter().map(|(id, _)| *id).collect();
            tracing::warn!(
                count = ids.len(),
                jobs = ?ids,
                "took back the jobs a process before this one held under its worker id"
            );
            rescuer::count_by_queue(taken, true);
        }
        Ok(_) => {}
        Err(err) => tracing::warn!(error = %err, "could not register the worker at its start"),
    }
    let heartbeat = Heartbeat {
        store: heartbeat_store,
        worker,
        held: executor.held.clone(),
        interval: config.heartbeat_interval,
        streak: streak.clone(),
    };
    let heartbeat = tokio::spawn(maintenance::run(heartbeat, finished.clone()));
    // Dispatchers claim nothing until it has read whether their queues are paused.
    let settings_interval = queue_settings::interval(config.poll_interval);
    let settings_reader = SettingsReader {
        store: executor.client.store().on(runtime.upkeep_pool.clone()),
        queues: runtime.queues.clone(),
        interval: settings_interval,
        check_now: pause_changed,
        worker_id: config.worker_id.clone(),
        seats_lease: queue_settings::seats_lease(registration_life(config), settings_interval),
        stopping: runtime.stopping.clone(),
    };
    // It renews the seats of limited queues: through the grace period too.
    let settings_reader = tokio::spawn(settings_reader.run(finished));
    let judge = Judge {
        worker_id: config.worker_id.clone(),
        streak,
    };
    let rescuer = Rescuer::new(
        executor.client.store().on(runtime.upkeep_pool.clone()),
        config.rescuer.clone(),
        judge,
        config.queues.keys().cloned().collect(),
    );
    let rescuer = tokio::spawn(maintenance::run(rescuer, runtime.stopping.clone()));
    let cleaner = Cleaner::new(
        executor.client.store().on(runtime.upkeep_pool.clone()),
        config.cleaner.clone(),
    );
    let cleaner = tokio::spawn(maintenance::run(cleaner, runtime.stopping.clone()));
    // Only a worker with schedules takes part in electing their leader.
    let scheduler = if config.schedules.is_empty() {
        tokio::spawn(async {})
    } else {
        let scheduler = Scheduler::new(
            executor.client.store().on(runtime.upkeep_pool.clone()),
            config.worker_id.clone(),
            config.schedules.clone(),
            config.scheduler.clone(),
        );
        tokio::spawn(scheduler.run(runtime.stopping.clone()))
    };
    let dispatch = Dispatch {
        executor: executor.clone(),
        reporter: runtime.reporter.clone(),
        poll_interval: config.poll_interval,
        ticks_in_flight: config.dispatch_connections as usize,
        batch_size: config.batch_size,
        durable: config.durable_completions,
        delete_completed: config.cleaner.retention.completed.is_zero(),
        stopping: runtime.stopping.clone(),
    };
    let dispatchers: Vec<_> = runtime
        .queues
        .iter()
        .zip(&runtime.dispatch_pools)
        .map(|(queue, pool)| {
            let store = executor.client.store().on(pool.clone());
            handlers.spawn(dispatcher::dispatch(dispatch.clone(), queue.clone(), store))
        })
        .collect();
    let dispatcher_aborts: Vec<_> = dispatchers.iter().map(|d| d.abort_handle()).collect();
    let mut dispatchers = futures_util::future::join_all(dispatchers);

    // The application's runtime shut down without a `shutdown` (a test that panicked, a runtime
    // dropped): its dispatchers and handlers went with it, and so does the worker, giving back
    // what they held instead of renewing it for as long as the process lives.
    let mut runtime_gone = handlers.spawn(std::future::pending::<()>());
    let mut stopping = runtime.stopping.clone();
    tokio::select! {
        _ = stopping.wait_for(|stop| *stop) => runtime_gone.abort(),
        _ = &mut runtime_gone => {
            tracing::warn!("the runtime the worker was started on shut down; the worker stops");
            stop.send_replace(true);
        }
    }
    // Dispatchers stop claiming and return once every running job has finished and been written.
    // Past the grace period, every write is bounded: the releases and the upkeep's last steps
    // by one deadline (`CLEANUP_TIME`), the worker's seats and registration by another
    // (`FAREWELL_TIME`). A database that does not answer (often why a worker stops) holds the
    // shutdown no longer; what is left unwritten waits for its lease, or its registration, to
    // run out.
    let mut until = None;
    if tokio::time::timeout(config.shutdown_grace, &mut dispatchers)
        .await
        .is_err()
    {
        executor.held.abort_running();
        // Handlers that yield stop now, and the completer releases their jobs.
        if tokio::time::timeout(RELEASE_TIME, &mut dispatchers)
            .await
            .is_err()
        {
            // The rest block their threads: the grace period is kept without them.
            let deadline = *until.insert(Instant::now() + CLEANUP_TIME);
            if timeout_at(deadline, executor.completer.release_abandoned())
                .await
                .is_err()
            {
                tracing::warn!(
                    "could not release the abandoned jobs in time; their leases run out"
                );
            }
            for dispatcher in dispatcher_aborts {
                dispatcher.abort();
            }
        }
    }
    let until = until.unwrap_or_else(|| Instant::now() + CLEANUP_TIME);
    // Anything still held (an unwritten release) goes back to pending too.
    if timeout_at(until, executor.completer.release_all())
        .await
        .is_err()
    {
        tracing::warn!("could not release the held jobs in time; their leases run out");
    }
    finish.send_replace(true);
    listener.abort();
    for upkeep in [
        listener,
        renewer,
        follower,
        heartbeat,
        settings_reader,
        rescuer,
        cleaner,
        scheduler,
    ] {
        let abort = upkeep.abort_handle();
        if timeout_at(until, upkeep).await.is_err() {
            abort.abort();
        }
    }
    // The worker's last two writes get a deadline of their own, whatever the upkeep took.
    let until = Instant::now() + FAREWELL_TIME;
    let own = executor.client.store().on(runtime.upkeep_pool.clone());
    match timeout_at(until, store::seats::release(&own, &executor.worker_id)).await {
        Ok(Ok(())) => {}
        _ => tracing::warn!(
            "could not give back the worker's seats of limited queues; their lease runs out"
        ),
    }
    match timeout_at(until, store::workers::remove(&own, &executor.worker_id)).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!(
            error = %err,
            "could not remove the worker's registration; it expires"
        ),
        Err(_) => tracing::warn!("could not remove the worker's registration; it expires"),
    }
    // A stopped worker holds nothing: the gauge must not keep its last heartbeat's count for
    // as long as the process serves its metrics.
    metric::held(0);
    // A dispatcher stalled with its runtime may still hold a connection: don't wait for it.
    let _ = tokio::time::timeout(RELEASE_TIME, runtime.close_pools()).await;
}

/// How long a registration lives after each heartbeat, and a worker's seats of limited queues
/// with it. A heartbeat may wait a second for its statement however short its interval: four
/// gaps of that long are the least.
fn registration_life(config: &WorkerConfig) -> Duration {
    config.heartbeat_interval.max(HEARTBEAT_TIMEOUT_FLOOR) * MISSED_HEARTBEATS
}

/// What the worker registers: its id, host, process, queues, and how long it counts as alive
/// after each heartbeat.
fn registration(config: &WorkerConfig) -> Registration {
    let queues: serde_json::Map<String, serde_json::Value> = config
        .queues
        .iter()
        .map(|(name, &concurrency)| (name.clone(), concurrency.into()))
        .collect();
    let alive_for = registration_life(config);
    Registration {
        id: config.worker_id.clone(),
        host: builder::host_name(),
        pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        queues: queues.into(),
        alive_for_ms: i64::try_from(alive_for.as_millis()).unwrap_or(i64::MAX),
    }
}

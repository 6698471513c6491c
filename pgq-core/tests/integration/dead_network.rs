//! A dead network never wedges a worker: with every connection of a worker going through a proxy
//! that swallows bytes and sends nothing back — a dropped route, a failover, a pulled cable — the
//! worker notices, replaces its connections once the network passes again, starts a job enqueued
//! after that within its poll interval and the statement timeout, loses nothing and completes
//! nothing twice.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Client, Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, async_trait,
};
use pgq_test_support::{ProxyMode, TcpProxy};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "netsplit")]
struct AcrossTheSplit {
    gated: bool,
}

#[async_trait]
impl Handler for AcrossTheSplit {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if self.gated {
            support::pass_gate(ctx).await;
        }
        Ok(())
    }
}

/// A pool whose every connection goes through a proxy the test can silence.
async fn through_a_proxy(db: &TestDatabase) -> (TcpProxy, sqlx::PgPool) {
    through_a_proxy_of(db, 5).await
}

/// [`through_a_proxy`], with a pool of `connections`.
async fn through_a_proxy_of(db: &TestDatabase, connections: u32) -> (TcpProxy, sqlx::PgPool) {
    let server = db.connect_options();
    let upstream = format!("{}:{}", server.get_host(), server.get_port())
        .parse()
        .expect("a socket address");
    let proxy = TcpProxy::new(upstream).await;
    let pool = PgPoolOptions::new()
        .max_connections(connections)
        .test_before_acquire(false)
        .connect_with(proxy.connect_options(&server))
        .await
        .unwrap();
    (proxy, pool)
}

/// Enqueues a job whose handler waits for the gate, and returns once the worker started it.
async fn a_running_job(
    client: &Client,
    events: &mut tokio::sync::broadcast::Receiver<pgq_core::WorkerEvent>,
) -> pgq_core::JobId {
    let running = client
        .enqueue(AcrossTheSplit { gated: true })
        .await
        .unwrap()
        .id();
    support::event(
        events,
        |e| matches!(e, pgq_core::WorkerEvent::JobStarted { id, .. } if *id == running),
    )
    .await;
    running
}

#[tokio::test]
async fn a_worker_behind_a_blackholed_network_recovers_and_loses_nothing() {
    let db = TestDatabase::new().await;
    let direct = db.client();
    let (proxy, pool) = through_a_proxy(&db).await;
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(Client::new(pool))
        .queue("netsplit", 2)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();

    // A job runs while the network goes silent; its completion must still land, once.
    let running = a_running_job(&direct, &mut events).await;
    proxy.set_mode(ProxyMode::Blackhole);
    gate.add_permits(1);
    let during = direct
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    tokio::time::sleep(Duration::from_secs(3)).await; // the outage, not a wait for work
    proxy.set_mode(ProxyMode::Pass);

    let after = direct
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    let started = std::time::Instant::now();
    let outcomes = support::all_finished(&mut events, &[running, during, after]).await;
    assert!(
        started.elapsed() < Duration::from_secs(1 + 15),
        "the worker took {:?} to recover",
        started.elapsed()
    );
    for id in [running, during, after] {
        assert_eq!(outcomes[&id], JobOutcome::Completed, "job {id}");
        let job = direct.job(id).await.unwrap().unwrap();
        assert_eq!(
            (job.status, job.attempts),
            (JobStatus::Completed, 1),
            "job {id} ran once"
        );
    }
    handle.shutdown().await.unwrap();
}

/// A handler that snoozes on its last attempt while the database cannot be reached.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "netsplit", max_attempts = 1)]
struct SnoozeAcrossTheSplit;

#[async_trait]
impl Handler for SnoozeAcrossTheSplit {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Err(TaskError::snooze(Duration::from_secs(3600)))
    }
}

/// An outcome other than a plain success whose write finds the database gone is written once
/// it is back, not left to the lease's end: a snooze on the last attempt stays a snooze, its
/// attempt given back, instead of a rescue that spends it and fails the job.
#[tokio::test]
async fn a_snooze_written_while_the_database_is_gone_lands_once_it_is_back() {
    let db = TestDatabase::new().await;
    let direct = db.client();
    let (proxy, pool) = through_a_proxy(&db).await;
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(Client::new(pool))
        .queue("netsplit", 1)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let id = direct.enqueue(SnoozeAcrossTheSplit).await.unwrap().id();
    support::event(
        &mut events,
        |e| matches!(e, pgq_core::WorkerEvent::JobStarted { id: started, .. } if *started == id),
    )
    .await;

    // Every connection is cut, and every new one refused, when the handler returns.
    let connections = proxy.connections();
    proxy.set_mode(ProxyMode::Reset);
    gate.add_permits(1);
    // The outcome's write was tried and failed: it asked for a connection of its own.
    support::eventually(|| async { (proxy.connections() > connections).then_some(()) }).await;
    proxy.set_mode(ProxyMode::Pass);

    let (outcome, _) = support::finished(&mut events, id).await;
    assert_eq!(outcome, JobOutcome::Snoozed);
    let job = direct.job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.attempts),
        (JobStatus::Pending, 0),
        "{job:?}"
    );
    assert!(job.run_at > chrono::Utc::now() + chrono::Duration::minutes(50));
    handle.shutdown().await.unwrap();
}

/// A tick whose connection died waits at most a second before the queue claims again, however
/// long the poll interval of a worker that leans on notifications.
#[tokio::test]
async fn a_failed_tick_stalls_its_queue_a_second_at_most() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let worker = Worker::builder(client.clone())
        .queue("netsplit", 1)
        .dispatch_connections(1)
        .poll_interval(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let first = client
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    assert_eq!(
        support::finished(&mut events, first).await.0,
        JobOutcome::Completed
    );
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'pgq-dispatch:netsplit'",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    assert!(!killed.is_empty() && killed.iter().all(|k| *k));
    // Woken by its notification, the claim finds its connection dead; within the test's limit
    // (a third of the poll interval) the next one runs it.
    let second = client
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    assert_eq!(
        support::finished(&mut events, second).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "lock-wait")]
struct PastALock;

#[async_trait]
impl Handler for PastALock {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// A claim that waits for a lock longer than the statement timeout is given up by the worker;
/// the server must give it up too, or it claims the job after the lock is released, for a worker
/// that never learns of it (the job waits out its lease, then runs again with an attempt spent).
async fn a_claim_waiting_past_the_timeout_never_commits(client: Client, db: &TestDatabase) {
    let client = client.with_statement_timeout(Duration::from_secs(1));
    // A rate limit: the claim takes tokens from the queue's row, under its lock.
    client
        .set_queue_rate(
            "lock-wait",
            pgq_core::RateLimit::new(1000, Duration::from_secs(1)),
        )
        .await
        .unwrap();
    let id = client.enqueue(PastALock).await.unwrap().id();
    let mut lock = db.pool().begin().await.unwrap();
    sqlx::query("SELECT FROM pgq.queues WHERE name = 'lock-wait' FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    let worker = Worker::builder(client.clone())
        .queue("lock-wait", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    // A claim waits for the lock...
    let waiting_since: chrono::DateTime<chrono::Utc> = support::eventually(|| async {
        sqlx::query_scalar(
            "SELECT min(query_start) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'
               AND application_name = 'pgq-dispatch:lock-wait'",
        )
        .fetch_one(db.pool())
        .await
        .unwrap()
    })
    .await;
    // ... past the time the worker waits for it.
    support::eventually(|| async {
        sqlx::query_scalar::<_, bool>("SELECT now() > $1 + interval '1.5 seconds'")
            .bind(waiting_since)
            .fetch_one(db.pool())
            .await
            .unwrap()
            .then_some(())
    })
    .await;
    lock.commit().await.unwrap();
    assert_eq!(
        support::finished(&mut events, id).await,
        (JobOutcome::Completed, None)
    );
    handle.shutdown().await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
}

#[tokio::test]
async fn a_claim_waiting_for_a_lock_past_the_timeout_never_commits() {
    let db = TestDatabase::new().await;
    a_claim_waiting_past_the_timeout_never_commits(db.client(), &db).await;
}

#[tokio::test]
async fn behind_a_pooler_a_claim_waiting_past_the_timeout_never_commits() {
    let db = TestDatabase::new().await;
    a_claim_waiting_past_the_timeout_never_commits(db.client().behind_pooler(), &db).await;
}

#[tokio::test]
async fn a_call_the_server_cancels_at_its_limit_is_unresponsive() {
    let db = TestDatabase::new().await;
    // Behind a pooler, each statement's transaction sets the server's limit.
    let client = db
        .client()
        .behind_pooler()
        .with_statement_timeout(Duration::from_secs(1));
    let id = client.enqueue(PastALock).await.unwrap().id();
    let mut lock = db.pool().begin().await.unwrap();
    sqlx::query("SELECT FROM pgq.jobs WHERE id = $1 FOR UPDATE")
        .bind(id.get())
        .execute(&mut *lock)
        .await
        .unwrap();
    let err = client.cancel(id).await.unwrap_err();
    assert!(matches!(err, pgq_core::Error::Unresponsive(_)), "{err:?}");
    lock.rollback().await.unwrap();
    // Nothing of it was written.
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.cancel_requested_at),
        (JobStatus::Pending, None)
    );
}

/// The listener's connection goes silent: the listener notices, and once the network passes
/// again it listens again. Its dead connection, whose goodbye (`UNLISTEN`) is swallowed, does not
/// hold the way to a new one.
#[tokio::test]
async fn the_listener_listens_again_after_its_connection_went_silent() {
    let db = TestDatabase::new().await;
    let (proxy, pool) = through_a_proxy(&db).await;
    let client = Client::new(pool).with_statement_timeout(Duration::from_secs(2));
    let worker = Worker::builder(client)
        .queue("netsplit", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| {
        matches!(e, pgq_core::WorkerEvent::ListenerConnected)
    })
    .await;

    proxy.set_mode(ProxyMode::Blackhole);
    support::event(&mut events, |e| {
        matches!(e, pgq_core::WorkerEvent::ListenerLost)
    })
    .await;
    proxy.set_mode(ProxyMode::Pass);
    support::event(&mut events, |e| {
        matches!(e, pgq_core::WorkerEvent::ListenerConnected)
    })
    .await;
    handle.shutdown().await.unwrap();
}

/// A worker that stops while the database does not answer returns within its grace period and a
/// few seconds more: the writes of its shutdown give up together, and what they leave unwritten
/// waits for its lease. (Each waiting out the statement timeout, one after another,
/// they took over half a minute.)
#[tokio::test]
async fn a_worker_stops_in_time_while_the_database_does_not_answer() {
    let db = TestDatabase::new().await;
    let direct = db.client();
    let (proxy, pool) = through_a_proxy(&db).await;
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(Client::new(pool))
        .queue("netsplit", 2)
        .shutdown_grace(Duration::from_secs(1))
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let running = a_running_job(&direct, &mut events).await;

    proxy.set_mode(ProxyMode::Blackhole);
    let stopping = std::time::Instant::now();
    let _ = tokio::time::timeout(support::LIMIT, handle.shutdown())
        .await
        .expect("the shutdown returns");
    assert!(
        // The grace, a second for aborted handlers, two for the releases, one for the last
        // writes, one to close the pools.
        stopping.elapsed() < Duration::from_secs(1 + 1 + 2 + 1 + 1 + 2),
        "the shutdown took {:?}",
        stopping.elapsed()
    );
    proxy.set_mode(ProxyMode::Pass);
    // Nothing lost: the job is still held, until its lease runs out.
    let job = direct.job(running).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Running);
}

/// The connections named `pgq-watch` the server has, and how many of them last ran a LISTEN.
async fn watch_connections(db: &TestDatabase) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE query LIKE 'LISTEN%')
         FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'pgq-watch'",
    )
    .fetch_one(db.pool())
    .await
    .unwrap()
}

/// The watches' listener whose connection goes silent notices, listens again on a new
/// connection once the network passes, and holds no connection of the client's pool: dropped,
/// its goodbye (`UNLISTEN`) waits on the dead connection for as long as TCP does, and a listener
/// on a connection of the pool kept it from enqueues all that time.
#[tokio::test]
async fn the_watch_listener_listens_again_and_holds_nothing_of_the_pool() {
    let db = TestDatabase::new().await;
    let (proxy, pool) = through_a_proxy_of(&db, 1).await;
    let client = Client::new(pool).with_statement_timeout(Duration::from_secs(2));
    let id = client
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    let mut watch = client.watch(id).await.unwrap();
    assert!(watch.next().await.unwrap().is_some());
    assert_eq!(watch_connections(&db).await, (1, 1));

    // Every connection open now hangs for good; new ones pass.
    proxy.set_mode(ProxyMode::Blackhole);
    proxy.set_mode(ProxyMode::Pass);
    support::eventually(|| async { (watch_connections(&db).await == (2, 2)).then_some(()) }).await;

    drop(watch);
    // The pool's own connection hung too: the first enqueue may give up on it.
    let enqueued = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match client.enqueue(AcrossTheSplit { gated: false }).await {
                Err(pgq_core::Error::Unresponsive(_)) => continue,
                other => break other,
            }
        }
    })
    .await
    .expect("the pool's connection is not held by the listener");
    enqueued.unwrap();
}

/// Runs on a short lease until the test lets it go.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "netsplit-lease", lease = "3s")]
struct ShortLeaseAcrossTheSplit;

#[async_trait]
impl Handler for ShortLeaseAcrossTheSplit {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

/// A moment of silence on the network leaves the worker's idle connections dead. A renewal on
/// one of them gives up within a quarter of its interval and is made again on another, so the
/// lease of a job still running is renewed before it ends: the job is not rescued from a live
/// worker, and runs once.
#[tokio::test]
async fn a_renewal_hung_on_a_dead_connection_does_not_lose_the_lease() {
    let db = TestDatabase::new().await;
    let direct = db.client();
    let (proxy, pool) = through_a_proxy(&db).await;
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(Client::new(pool))
        .queue("netsplit-lease", 1)
        .rescue_interval(Duration::from_millis(200))
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let id = direct.enqueue(ShortLeaseAcrossTheSplit).await.unwrap().id();
    support::event(
        &mut events,
        |e| matches!(e, pgq_core::WorkerEvent::JobStarted { id: started, .. } if *started == id),
    )
    .await;

    proxy.set_mode(ProxyMode::Blackhole);
    tokio::time::sleep(Duration::from_millis(300)).await; // the outage, not a wait for work
    proxy.set_mode(ProxyMode::Pass);
    let back: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(db.pool())
        .await
        .unwrap();

    // A renewal after the outage sets the lease 3 s past its own time; one before it, at most
    // 2.7 s past the network's return.
    let renewed_after = back + chrono::Duration::milliseconds(2800);
    let renewed = tokio::time::timeout(Duration::from_secs(8), async {
        loop {
            let (lease, attempts): (Option<chrono::DateTime<chrono::Utc>>, i32) =
                sqlx::query_as("SELECT lease_expires_at, attempts FROM pgq.jobs WHERE id = $1")
                    .bind(id.get())
                    .fetch_one(db.pool())
                    .await
                    .unwrap();
            assert_eq!(attempts, 1, "the job was rescued from its live worker");
            if lease.is_some_and(|lease| lease > renewed_after) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(renewed.is_ok(), "no renewal landed before the lease ended");
    gate.add_permits(1);
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );
    let job = direct.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
    handle.shutdown().await.unwrap();
}

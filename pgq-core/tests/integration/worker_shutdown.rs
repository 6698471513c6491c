//! Graceful shutdown: running jobs finish within the grace period; the rest go back to pending
//! without spending an attempt, due as they were, and nothing stays held by the stopped worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgq_core::{
    Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, WorkerEvent, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::support;

/// Waits for the test's permit, or forever.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "shutdown")]
struct Gated;

#[async_trait]
impl Handler for Gated {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

async fn held_by(db: &TestDatabase, worker_id: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pgq.jobs WHERE worker_id = $1 AND status IN ('claimed', 'running')",
    )
    .bind(worker_id)
    .fetch_one(db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn jobs_still_running_after_the_grace_period_are_released() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let ids: Vec<_> = client
        .enqueue_many([Gated, Gated])
        .await
        .unwrap()
        .iter()
        .map(|e| e.id())
        .collect();
    let mut due = Vec::new();
    for &id in &ids {
        due.push(client.job(id).await.unwrap().unwrap().run_at);
    }
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("shutdown", 2)
        .shutdown_grace(Duration::from_millis(200))
        .state(gate)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    for _ in 0..2 {
        support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
    }
    let worker_id = handle.worker_id().to_owned();
    assert_eq!(held_by(&db, &worker_id).await, 2);
    handle.shutdown().await.unwrap();

    let outcomes = support::all_finished(&mut events, &ids).await;
    for (id, due) in ids.into_iter().zip(due) {
        assert_eq!(outcomes[&id], JobOutcome::Released);
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!((job.status, job.attempts), (JobStatus::Pending, 0));
        assert_eq!(job.worker_id, None);
        // Due as it was: its place in line and its wait are kept.
        assert_eq!(job.run_at, due);
    }
    assert_eq!(held_by(&db, &worker_id).await, 0);
}

#[tokio::test]
async fn jobs_that_finish_within_the_grace_period_complete() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Gated).await.unwrap().id();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("shutdown", 1)
        .shutdown_grace(Duration::from_secs(30))
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
    handle.stop();
    // Stopping does not cut the running job short: let it finish now.
    gate.add_permits(1);
    let worker_id = handle.worker_id().to_owned();
    handle.shutdown().await.unwrap();
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );
    assert_eq!(held_by(&db, &worker_id).await, 0);
    // A job enqueued after the stop is not claimed.
    let later = client.enqueue(Gated).await.unwrap().id();
    assert_eq!(
        client.job(later).await.unwrap().unwrap().status,
        JobStatus::Pending
    );
}

/// Dropping the handle does not stop the worker, as its documentation says: it claims and runs
/// a job enqueued after the drop. (The drop once closed the stop signal, which the worker read
/// as a shutdown it never finished.)
#[tokio::test]
async fn a_dropped_handle_leaves_the_worker_running() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(1));
    let worker = Worker::builder(client.clone())
        .queue("shutdown", 1)
        .poll_interval(Duration::from_millis(50))
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    drop(worker.start());
    support::event(&mut events, |e| matches!(e, WorkerEvent::ListenerConnected)).await;
    // Every loop goes on: the listener listens again, and the settings it then waits for are
    // read, so the queue claims again.
    support::cut_listener(db.pool(), &mut events).await;
    let id = client.enqueue(Gated).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );
    assert_eq!(client.workers().await.unwrap().len(), 1, "still registered");
}

/// Blocks its thread for four seconds, as a handler calling a blocking client does.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "blocking")]
struct Blocking;

/// How many `Blocking` handlers started, and how many returned.
#[derive(Debug, Default)]
struct Progress {
    started: AtomicUsize,
    returned: AtomicUsize,
}

#[async_trait]
impl Handler for Blocking {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let progress = ctx.state::<Arc<Progress>>().expect("progress counters");
        progress.started.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(4));
        progress.returned.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn shutdown_keeps_its_grace_period_when_handlers_block_their_threads() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Blocking).await.unwrap().id();
    let progress = Arc::new(Progress::default());
    let grace = Duration::from_millis(500);
    let worker = Worker::builder(client.clone())
        .queue("blocking", 1)
        .shutdown_grace(grace)
        .state(progress.clone())
        .build()
        .unwrap();
    let worker_id = worker.worker_id().to_owned();
    let mut events = worker.events();
    let application = support::application_runtime();
    let handle = support::start_on(&application, worker).await;
    support::eventually(|| async { (progress.started.load(Ordering::SeqCst) == 1).then_some(()) })
        .await;

    let started = std::time::Instant::now();
    handle.shutdown().await.unwrap();
    let took = started.elapsed();
    // The grace period, a bounded release time, and the release statement itself; the
    // handler still blocks its thread for seconds more.
    assert!(
        took < grace + Duration::from_secs(3),
        "shutdown took {took:?}"
    );
    assert_eq!(
        progress.returned.load(Ordering::SeqCst),
        0,
        "the handler had not returned"
    );
    let (outcome, _) = support::finished(&mut events, id).await;
    assert_eq!(outcome, JobOutcome::Released);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    assert_eq!(job.attempts, 0, "a release does not spend the attempt");
    assert_eq!(held_by(&db, &worker_id).await, 0);

    // The handler returns later: its success is fenced out, and nothing is written.
    support::eventually(|| async { (progress.returned.load(Ordering::SeqCst) == 1).then_some(()) })
        .await;
    let later = client.job(id).await.unwrap().unwrap();
    assert_eq!(later.status, JobStatus::Pending);
    assert_eq!(
        later.updated_at, job.updated_at,
        "nothing was written after the release"
    );
    application.shutdown_background();
}

/// A worker whose application runtime shuts down without a `shutdown` (a test that panicked, a
/// runtime dropped) stops with it: its handlers and claims went with that runtime, so its held
/// jobs go back to pending and its registration is removed. (It went on renewing their leases
/// and heartbeating for as long as the process lived, and no rescuer took them back.)
#[tokio::test]
async fn a_worker_stops_when_its_runtime_shuts_down() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Gated).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("shutdown", 1)
        .state(Arc::new(Semaphore::new(0)))
        .build()
        .unwrap();
    let worker_id = worker.worker_id().to_owned();
    let application = support::application_runtime();
    let handle = support::start_on(&application, worker).await;
    support::held(db.pool(), id).await;

    application.shutdown_background();
    support::eventually(|| async {
        let job = client.job(id).await.unwrap().unwrap();
        (job.status == JobStatus::Pending).then_some(job)
    })
    .await;
    assert_eq!(held_by(&db, &worker_id).await, 0);
    support::eventually(|| async { client.workers().await.unwrap().is_empty().then_some(()) })
        .await;
    // Already stopped: shutting down returns at once.
    tokio::time::timeout(support::LIMIT, handle.shutdown())
        .await
        .expect("the handle's shutdown returns")
        .unwrap();
}

//! Pausing a queue: every worker stops claiming from it and waits until it is resumed, the
//! pause outlives the workers, the other queues carry on, and workers behind a pooler (which
//! do not listen) find it by reading.
//!
//! "Not claimed" is shown without waiting for time to pass: a job of the paused queue is
//! enqueued before a job of a running queue, so its notification reaches the worker first; once
//! the second job has completed, the paused queue's dispatcher was woken and claimed nothing.

use std::sync::Arc;

use pgq_core::{
    Client, Error, Handler, JobContext, JobId, JobOutcome, JobStatus, Task, TaskError, Worker,
    WorkerEvent, WorkerHandle, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, broadcast};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "paused")]
struct PausedWork {
    n: u32,
}

#[async_trait]
impl Handler for PausedWork {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// A job of the paused queue that holds its slot until the test lets it go.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "paused")]
struct GatedWork;

#[async_trait]
impl Handler for GatedWork {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "unpaused")]
struct UnpausedWork {
    n: u32,
}

#[async_trait]
impl Handler for UnpausedWork {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

fn worker(client: &Client) -> Worker {
    Worker::builder(client.clone())
        .queue("paused", 2)
        .queue("unpaused", 2)
        .build()
        .unwrap()
}

fn start(client: &Client) -> (WorkerHandle, broadcast::Receiver<WorkerEvent>) {
    let worker = worker(client);
    let events = worker.events();
    (worker.start(), events)
}

async fn queue_event(events: &mut broadcast::Receiver<WorkerEvent>, paused: bool) {
    support::event(events, |event| match event {
        WorkerEvent::QueuePaused { queue } => paused && queue == "paused",
        WorkerEvent::QueueResumed { queue } => !paused && queue == "paused",
        _ => false,
    })
    .await;
}

/// Enqueues a job to the paused queue, then one to a running queue, and waits for the second
/// to complete: the first was seen and left alone. Returns the first.
async fn enqueue_behind(
    client: &Client,
    events: &mut broadcast::Receiver<WorkerEvent>,
    n: u32,
) -> JobId {
    let held_back = client.enqueue(PausedWork { n }).await.unwrap().id();
    let other = client.enqueue(UnpausedWork { n }).await.unwrap().id();
    assert_eq!(
        support::finished(events, other).await.0,
        JobOutcome::Completed
    );
    held_back
}

async fn status(client: &Client, id: JobId) -> (JobStatus, i32) {
    let job = client.job(id).await.unwrap().unwrap();
    (job.status, job.attempts)
}

#[tokio::test]
async fn a_paused_queue_accepts_jobs_but_no_worker_claims_them_until_it_is_resumed() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (handle, mut events) = start(&client);

    client.pause_queue("paused").await.unwrap();
    queue_event(&mut events, true).await;
    let held_back = enqueue_behind(&client, &mut events, 1).await;
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));
    // The worker's registration is written by its upkeep, which may still be on its way.
    let paused = support::eventually(|| async {
        let queues = client.queues().await.unwrap();
        queues
            .into_iter()
            .find(|q| q.name == "paused" && q.workers == 1)
    })
    .await;
    assert!(paused.paused_at.is_some());
    assert_eq!(paused.stats.due, 1);

    client.resume_queue("paused").await.unwrap();
    queue_event(&mut events, false).await;
    assert_eq!(
        support::finished(&mut events, held_back).await.0,
        JobOutcome::Completed
    );
    assert!(
        client
            .queues()
            .await
            .unwrap()
            .iter()
            .all(|q| q.paused_at.is_none())
    );
    handle.shutdown().await.unwrap();
}

/// The pause and a job of the paused queue, committed together: the worker hears of both at
/// once, the pause first, and claims nothing before it has read what the pause changed.
#[tokio::test]
async fn a_job_enqueued_with_the_pause_is_not_claimed_by_a_worker_that_heard_of_both() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (handle, mut events) = start(&client);
    // The queue claims: the worker has read that it is not paused.
    let first = client.enqueue(PausedWork { n: 1 }).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, first).await.0,
        JobOutcome::Completed
    );

    let mut tx = db.pool().begin().await.unwrap();
    // As `Client::pause_queue` writes it, notification included.
    sqlx::raw_sql(
        "INSERT INTO pgq.queues (name, paused_at, updated_at) VALUES ('paused', now(), now())
         RETURNING pg_notify('pgq_queue', name)",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    let held_back = client
        .enqueue_in(&mut tx, PausedWork { n: 2 })
        .await
        .unwrap()
        .id();
    tx.commit().await.unwrap();
    queue_event(&mut events, true).await;
    enqueue_behind(&client, &mut events, 3).await;
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));

    client.resume_queue("paused").await.unwrap();
    queue_event(&mut events, false).await;
    support::finished(&mut events, held_back).await;
    handle.shutdown().await.unwrap();
}

/// A pause committed while the worker did not listen (its notification lost with the
/// connection) is read before the queue claims again: a job enqueued once the listener is back
/// is not claimed on the settings from before.
#[tokio::test]
async fn a_pause_made_while_the_listener_was_away_is_read_before_the_next_claim() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("paused", 2)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    // The queue claims, so the worker has read that it is not paused.
    let running = client.enqueue(GatedWork).await.unwrap().id();
    support::event(
        &mut events,
        |e| matches!(e, WorkerEvent::JobStarted { id, .. } if *id == running),
    )
    .await;

    // From here on, every read of the settings waits behind this lock.
    let mut blocker = db.pool().begin().await.unwrap();
    sqlx::raw_sql("LOCK TABLE pgq.workers IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    // Paused without a notification, as if while the listener was away; then it is cut off.
    sqlx::raw_sql("INSERT INTO pgq.queues (name, paused_at) VALUES ('paused', now())")
        .execute(db.pool())
        .await
        .unwrap();
    support::cut_listener(db.pool(), &mut events).await;

    let held_back = client.enqueue(PausedWork { n: 1 }).await.unwrap().id();
    // The running job's completion goes in a tick that would also claim `held_back`, were the
    // queue taken for unpaused.
    gate.add_permits(1);
    assert_eq!(
        support::finished(&mut events, running).await.0,
        JobOutcome::Completed
    );
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));

    blocker.rollback().await.unwrap();
    queue_event(&mut events, true).await;
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));
    client.resume_queue("paused").await.unwrap();
    queue_event(&mut events, false).await;
    support::finished(&mut events, held_back).await;
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_pause_outlives_the_workers_and_a_worker_started_on_a_paused_queue_waits() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.pause_queue("paused").await.unwrap();
    // Pausing twice keeps the first pause.
    client.pause_queue("paused").await.unwrap();

    let (first, mut events) = start(&client);
    queue_event(&mut events, true).await;
    let held_back = enqueue_behind(&client, &mut events, 1).await;
    first.shutdown().await.unwrap();

    let (second, mut events) = start(&client);
    queue_event(&mut events, true).await;
    enqueue_behind(&client, &mut events, 2).await;
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));

    client.resume_queue("paused").await.unwrap();
    queue_event(&mut events, false).await;
    let outcomes = support::all_finished(&mut events, &[held_back]).await;
    assert_eq!(outcomes[&held_back], JobOutcome::Completed);
    second.shutdown().await.unwrap();
}

#[tokio::test]
async fn every_worker_of_a_process_stops_and_the_job_runs_once_after_the_resume() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (one, mut one_events) = start(&client);
    let (two, mut two_events) = start(&client);

    client.pause_queue("paused").await.unwrap();
    queue_event(&mut one_events, true).await;
    queue_event(&mut two_events, true).await;
    let held_back = client.enqueue(PausedWork { n: 1 }).await.unwrap().id();
    // Enough jobs of the running queue that both workers take some of them.
    let others: Vec<JobId> = client
        .enqueue_many((0..40).map(|n| UnpausedWork { n }))
        .await
        .unwrap()
        .iter()
        .map(|e| e.id())
        .collect();
    support::eventually(|| async {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pgq.jobs WHERE queue = 'unpaused' AND status = 'completed'",
        )
        .fetch_one(db.pool())
        .await
        .unwrap();
        (done == others.len() as i64).then_some(())
    })
    .await;
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));

    client.resume_queue("paused").await.unwrap();
    queue_event(&mut one_events, false).await;
    queue_event(&mut two_events, false).await;
    support::eventually(|| async {
        (status(&client, held_back).await == (JobStatus::Completed, 1)).then_some(())
    })
    .await;
    one.shutdown().await.unwrap();
    two.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_pause_that_no_notification_announced_is_found_by_the_periodic_read() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (handle, mut events) = start(&client);
    // Written by hand: no NOTIFY, as if the notification were lost.
    sqlx::raw_sql("INSERT INTO pgq.queues (name, paused_at) VALUES ('paused', now())")
        .execute(db.pool())
        .await
        .unwrap();
    queue_event(&mut events, true).await;
    let held_back = enqueue_behind(&client, &mut events, 1).await;
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));
    sqlx::raw_sql("UPDATE pgq.queues SET paused_at = NULL")
        .execute(db.pool())
        .await
        .unwrap();
    queue_event(&mut events, false).await;
    support::finished(&mut events, held_back).await;
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn workers_behind_pgbouncer_stop_and_resume_by_reading_the_flag() {
    let db = TestDatabase::new().await;
    let (_bouncer, client) = support::behind_pgbouncer(&db).await;
    let (handle, mut events) = start(&client);

    client.pause_queue("paused").await.unwrap();
    queue_event(&mut events, true).await;
    let held_back = enqueue_behind(&client, &mut events, 1).await;
    assert_eq!(status(&client, held_back).await, (JobStatus::Pending, 0));

    client.resume_queue("paused").await.unwrap();
    queue_event(&mut events, false).await;
    support::finished(&mut events, held_back).await;
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_queue_name_outside_the_rules_is_refused_before_the_database() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for name in ["", "with space", "quote'd", &"q".repeat(65)] {
        assert!(matches!(
            client.pause_queue(name).await,
            Err(Error::InvalidQueue { .. })
        ));
        assert!(matches!(
            client.resume_queue(name).await,
            Err(Error::InvalidQueue { .. })
        ));
    }
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.queues")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(rows, 0);
}

//! Leases: renewed while the handler runs, on connections handlers cannot take; extended on
//! request; rescued when they run out, by exactly one rescuer.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Client, Handler, JobContext, JobStatus, Task, TaskError, Worker, WorkerEvent, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tokio::sync::{Notify, Semaphore};

use crate::support;

/// Takes every connection of the worker's pool, then waits for the test's permit.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "lease-hog", lease = "1s")]
struct Hog;

#[async_trait]
impl Handler for Hog {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let pool = ctx.state::<PgPool>().unwrap();
        let _a = pool.acquire().await?;
        let _b = pool.acquire().await?;
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "lease-extend")]
struct Long;

#[async_trait]
impl Handler for Long {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.extend_lease(Duration::from_secs(3600)).await?;
        ctx.state::<Arc<Notify>>().unwrap().notify_one();
        support::pass_gate(ctx).await;
        Ok(())
    }
}

async fn lease_left(db: &TestDatabase, id: pgq_core::JobId) -> f64 {
    sqlx::query_scalar(
        "SELECT extract(epoch FROM lease_expires_at - now())::float8 FROM pgq.jobs WHERE id = $1",
    )
    .bind(id.get())
    .fetch_one(db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn leases_are_renewed_even_when_handlers_hold_every_pool_connection() {
    let db = TestDatabase::new().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = Client::new(pool.clone());
    let id = client.enqueue(Hog).await.unwrap().id();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client)
        .queue("lease-hog", 1)
        .state(pool)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
    // Time has to pass for a lease to run out: three 1 s leases' worth.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let left = lease_left(&db, id).await;
    assert!(left > 0.0, "lease ran out {left} s ago");
    assert!(db.client().rescue_expired().await.unwrap().is_empty());
    gate.add_permits(1);
    let (outcome, _) = support::finished(&mut events, id).await;
    assert_eq!(outcome, pgq_core::JobOutcome::Completed);
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_handler_can_extend_its_lease() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Long).await.unwrap().id();
    let gate = Arc::new(Semaphore::new(0));
    let extended = Arc::new(Notify::new());
    let worker = Worker::builder(client)
        .queue("lease-extend", 1)
        .state(gate.clone())
        .state(extended.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    tokio::time::timeout(support::LIMIT, extended.notified())
        .await
        .expect("the handler extended its lease");
    let left = lease_left(&db, id).await;
    assert!(left > 3500.0, "{left}");
    gate.add_permits(1);
    support::finished(&mut events, id).await;
    handle.shutdown().await.unwrap();
}

/// Inserts `n` jobs held by a worker whose leases ran out, attempts spent as given.
async fn expired_jobs(db: &TestDatabase, n: i64, attempts: i32, max_attempts: i32) -> Vec<i64> {
    let ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO pgq.jobs (task, queue, payload, max_attempts)
         SELECT 'Gone', 'rescue', '{}', $2 FROM generate_series(1, $1)
         RETURNING id",
    )
    .bind(n)
    .bind(max_attempts)
    .fetch_all(db.pool())
    .await
    .unwrap();
    hold(db, &ids, attempts, "crashed", "- interval '1 second'").await;
    ids
}

/// Moves pending jobs to claimed by `worker`, with a lease ending at `now() <lease>`.
async fn hold(db: &TestDatabase, ids: &[i64], attempts: i32, worker: &str, lease: &str) {
    let sql = format!(
        "UPDATE pgq.jobs SET status = 'claimed', phase = 1, attempts = $2, worker_id = $3,
             claimed_at = now(), lease_expires_at = now() {lease}
         WHERE id = ANY($1)"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(ids)
        .bind(attempts)
        .bind(worker)
        .execute(db.pool())
        .await
        .unwrap();
}

#[tokio::test]
async fn expired_jobs_are_rescued_with_backoff_or_failed_when_spent() {
    let db = TestDatabase::new().await;
    let retry = expired_jobs(&db, 1, 1, 3).await[0];
    let spent = expired_jobs(&db, 1, 3, 3).await[0];
    let live: i64 = sqlx::query_scalar(
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('Gone', 'rescue', '{}') RETURNING id",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    hold(&db, &[live], 1, "alive", "+ interval '1 minute'").await;

    let client = db.client();
    let mut rescued: Vec<i64> = client
        .rescue_expired()
        .await
        .unwrap()
        .iter()
        .map(|id| id.get())
        .collect();
    rescued.sort();
    assert_eq!(rescued, vec![retry, spent]);

    let job = client.job(retry.into()).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Pending, 1));
    assert!(job.run_at > job.updated_at, "retried with backoff");
    assert_eq!(
        job.last_error.as_deref(),
        Some("lease expired: worker crashed stopped renewing it")
    );
    assert_eq!(job.errors.len(), 1);
    assert_eq!(job.worker_id, None);
    let job = client.job(spent.into()).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Failed);
    assert!(job.completed_at.is_some());
    let job = client.job(live.into()).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Claimed, "a live lease is left alone");
}

#[tokio::test]
async fn two_rescuers_at_once_never_rescue_one_job_twice() {
    let db = TestDatabase::new().await;
    let mut expected = expired_jobs(&db, 3000, 1, 5).await;
    expected.sort();
    let rescuers: Vec<_> = (0..2)
        .map(|_| {
            let options = db.connect_options();
            tokio::spawn(async move {
                let pool = PgPool::connect_with(options).await.unwrap();
                Client::new(pool).rescue_expired().await.unwrap()
            })
        })
        .collect();
    let mut all = Vec::new();
    for rescuer in rescuers {
        all.extend(rescuer.await.unwrap().into_iter().map(|id| id.get()));
    }
    all.sort();
    assert_eq!(all, expected, "each job rescued exactly once");
    let single_error: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pgq.jobs WHERE status = 'pending' AND jsonb_array_length(errors) = 1",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(single_error, 3000);
}

/// Instant jobs of high priority, so that the worker claims ahead of its free slot.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "lease-wait", priority = 150, lease = "1s")]
struct Sprint;

#[async_trait]
impl Handler for Sprint {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Holds the worker's one slot until the test opens the gate.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "lease-wait", lease = "1s")]
struct Blocker;

#[async_trait]
impl Handler for Blocker {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

/// Claimed behind the blocker; counts its runs.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "lease-wait", priority = 50, lease = "1s")]
struct Waiter;

#[async_trait]
impl Handler for Waiter {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.state::<Arc<std::sync::atomic::AtomicUsize>>()
            .unwrap()
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn a_claimed_job_waiting_for_a_slot_keeps_its_lease() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for _ in 0..20 {
        client.enqueue(Sprint).await.unwrap();
    }
    client.enqueue(Blocker).await.unwrap();
    let waiter = client.enqueue(Waiter).await.unwrap().id();
    let gate = Arc::new(Semaphore::new(0));
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let worker = Worker::builder(client.clone())
        .queue("lease-wait", 1)
        .state(gate.clone())
        .state(runs.clone())
        .build()
        .unwrap();
    let handle = worker.start();

    // The quick jobs teach the worker to claim ahead, so the waiter is claimed while the
    // blocker holds the only slot.
    let claimed_at = support::eventually(|| async {
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
            "SELECT claimed_at FROM pgq.jobs WHERE id = $1 AND status = 'claimed'",
        )
        .bind(waiter.get())
        .fetch_optional(db.pool())
        .await
        .unwrap()
    })
    .await;
    // Its 1 s lease is renewed while it waits, well past the first second.
    support::eventually(|| async {
        let renewed = sqlx::query_scalar::<_, bool>(
            "SELECT lease_expires_at > $2 + interval '2 seconds' FROM pgq.jobs
             WHERE id = $1 AND status = 'claimed'",
        )
        .bind(waiter.get())
        .bind(claimed_at)
        .fetch_optional(db.pool())
        .await
        .unwrap();
        let renewed = renewed.expect("the waiting job lost its claim");
        renewed.then_some(())
    })
    .await;
    gate.add_permits(1);
    support::completed(&handle, 22).await;
    handle.shutdown().await.unwrap();
    let job = client.job(waiter).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
}

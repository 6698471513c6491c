//! pgq through a real PgBouncer in transaction mode, where no session state survives a
//! transaction: with `Client::behind_pooler`, pgq migrates, enqueues, works, retries, cancels,
//! rescues after a lost lease, and cleans, all through the pooler.

use std::time::Duration;

use pgq_core::{
    Cancellation, Handler, JobContext, JobOutcome, JobStatus, Retention, Task, TaskError, Worker,
    async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "pooled", unique_key = "pooled:{n}", lease = "1s")]
struct Pooled {
    n: u32,
    mode: String,
}

#[async_trait]
impl Handler for Pooled {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(50, "through the pooler").await;
        match self.mode.as_str() {
            "fail-once" if ctx.attempt() == 1 => {
                Err(TaskError::retry_after(Duration::ZERO, "once"))
            }
            "wait-for-cancel" => {
                ctx.cancelled().await;
                Err(TaskError::fail("cancelled"))
            }
            _ => Ok(()),
        }
    }
}

fn pooled(n: u32, mode: &str) -> Pooled {
    Pooled {
        n,
        mode: mode.into(),
    }
}

#[tokio::test]
async fn everything_works_through_pgbouncer_in_transaction_mode() {
    let db = TestDatabase::new().await;
    let (_bouncer, client) = support::behind_pgbouncer(&db).await;
    // Migrating from nothing, then again, through the pooler.
    sqlx::raw_sql("DROP SCHEMA pgq CASCADE")
        .execute(db.pool())
        .await
        .unwrap();
    client.migrate().await.unwrap();
    client.migrate().await.unwrap();

    let ok = client.enqueue(pooled(1, "ok")).await.unwrap().id();
    let retried = client.enqueue(pooled(2, "fail-once")).await.unwrap().id();
    let cancelled = client
        .enqueue(pooled(3, "wait-for-cancel"))
        .await
        .unwrap()
        .id();
    client
        .enqueue_many((10..20).map(|n| pooled(n, "ok")))
        .await
        .unwrap();
    // A job held by a worker that died: its lease ran out long ago.
    let orphan = client.enqueue(pooled(4, "ok")).await.unwrap().id();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'claimed', phase = 1, attempts = 1, worker_id = 'gone',
                claimed_at = now(), lease_expires_at = now() - interval '1 minute'
         WHERE id = $1",
    )
    .bind(orphan.get())
    .execute(db.pool())
    .await
    .unwrap();

    let worker = Worker::builder(client.clone())
        .queue("pooled", 4)
        .rescue_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::held(db.pool(), cancelled).await;
    assert_eq!(
        client.cancel(cancelled).await.unwrap(),
        Cancellation::Requested
    );
    let outcomes = support::all_finished(&mut events, &[ok, cancelled]).await;
    assert_eq!(outcomes[&ok], JobOutcome::Completed);
    assert_eq!(outcomes[&cancelled], JobOutcome::Cancelled);
    support::completed(&handle, 13).await;
    handle.shutdown().await.unwrap();

    let job = client.job(retried).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 2));
    let job = client.job(orphan).await.unwrap().unwrap();
    assert!(
        job.errors[0].error.contains("lease expired"),
        "{:?}",
        job.errors
    );
    client.retry(cancelled).await.unwrap();
    assert!(!client.stats().await.unwrap().is_empty());
    db.advance(Duration::from_secs(3600)).await;
    let deleted = client
        .delete_finished(Retention {
            completed: Duration::ZERO,
            failed: Duration::ZERO,
        })
        .await
        .unwrap();
    assert!(deleted.unwrap_or(0) >= 12, "{deleted:?}");
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "pooled_beat")]
struct PooledBeat {
    n: u32,
}

#[async_trait]
impl Handler for PooledBeat {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// A keyed task on the same queue: its claims count each key's held jobs too.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "pooled_beat", concurrency_key = "{tenant}", concurrency = 1)]
struct PooledTenant {
    tenant: u32,
}

#[async_trait]
impl Handler for PooledTenant {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// The schedule's lease, the watermark's transaction and a limited queue's claim need no
/// session state: two workers behind the pooler enqueue each instant once, and run the jobs of
/// a queue limited to one at a time, keyed jobs among them.
#[tokio::test]
async fn schedules_and_queue_limits_work_through_pgbouncer() {
    let db = TestDatabase::new().await;
    let (_bouncer, client) = support::behind_pgbouncer(&db).await;
    client
        .set_queue_limit("pooled_beat", Some(1))
        .await
        .unwrap();
    client
        .set_queue_rate(
            "pooled_beat",
            pgq_core::RateLimit::new(100, Duration::from_secs(1)),
        )
        .await
        .unwrap();
    let start = || {
        Worker::builder(client.clone())
            .queue("pooled_beat", 2)
            .periodic(pgq_core::Schedule::cron("* * * * * *"), || PooledBeat {
                n: 0,
            })
            .leader_lease(Duration::from_secs(2))
            .build()
            .unwrap()
            .start()
    };
    client
        .enqueue_many((0..4).map(|n| PooledTenant { tenant: n % 2 }))
        .await
        .unwrap();
    let (first, second) = (start(), start());
    support::eventually(|| async {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pgq.jobs WHERE task = 'PooledTenant' AND status = 'completed'",
        )
        .fetch_one(db.pool())
        .await
        .unwrap();
        (done == 4).then_some(())
    })
    .await;
    let instants = support::eventually(|| async {
        let instants: Vec<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
            "SELECT run_at FROM pgq.jobs WHERE task = 'PooledBeat' AND status = 'completed'
             ORDER BY run_at",
        )
        .fetch_all(db.pool())
        .await
        .unwrap();
        (instants.len() >= 3).then_some(instants)
    })
    .await;
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
    for pair in instants.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            chrono::TimeDelta::seconds(1),
            "{instants:?}"
        );
    }
    let queues = client.queues().await.unwrap();
    let queue = queues.iter().find(|q| q.name == "pooled_beat").unwrap();
    assert_eq!(queue.limit, Some(1));
}

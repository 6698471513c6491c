//! A queue's cluster-wide concurrency limit: set, listed and lifted through the admin API, and
//! held by two workers together, each allowed more than the limit on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgq_core::{Error, Handler, JobContext, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "limited")]
struct Limited {
    n: u32,
}

/// How many handlers run now, and the most that ever ran at once, across both workers.
#[derive(Debug, Default)]
struct Overlap {
    running: AtomicUsize,
    peak: AtomicUsize,
}

#[async_trait]
impl Handler for Limited {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let overlap = ctx.state::<Arc<Overlap>>().expect("the overlap counter");
        let now = overlap.running.fetch_add(1, Ordering::SeqCst) + 1;
        overlap.peak.fetch_max(now, Ordering::SeqCst);
        support::pass_gate(ctx).await;
        overlap.running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn a_limit_is_set_listed_and_lifted() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.set_queue_limit("limited", Some(2)).await.unwrap();
    let queues = client.queues().await.unwrap();
    assert_eq!(queues.len(), 1);
    assert_eq!(
        (queues[0].name.as_str(), queues[0].limit),
        ("limited", Some(2))
    );
    client.set_queue_limit("limited", None).await.unwrap();
    // Nothing else to show for it: no jobs, workers or pause.
    assert!(client.queues().await.unwrap().is_empty());

    let zero = client
        .set_queue_limit("limited", Some(0))
        .await
        .unwrap_err();
    assert!(
        matches!(&zero, Error::InvalidQueue { reason, .. } if reason.contains("at least 1")),
        "{zero}"
    );
    let hostile = client
        .set_queue_limit("a'; DROP TABLE pgq.jobs; --", Some(1))
        .await;
    assert!(matches!(hostile, Err(Error::InvalidQueue { .. })));
}

#[tokio::test]
async fn two_workers_together_run_no_more_than_the_limit() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.set_queue_limit("limited", Some(2)).await.unwrap();
    let overlap = Arc::new(Overlap::default());
    let gate = Arc::new(Semaphore::new(0));
    let start = || {
        Worker::builder(client.clone())
            .queue("limited", 4)
            .poll_interval(Duration::from_millis(100))
            .state(overlap.clone())
            .state(gate.clone())
            .build()
            .unwrap()
            .start()
    };
    let (first, second) = (start(), start());
    let jobs = 6;
    client
        .enqueue_many((0..jobs).map(|n| Limited { n }))
        .await
        .unwrap();
    for done in 0..jobs {
        // Two handlers run (or the last one): let one finish, and the next takes its place.
        let expected = (jobs - done).min(2) as usize;
        support::eventually(|| async {
            (overlap.running.load(Ordering::SeqCst) == expected).then_some(())
        })
        .await;
        gate.add_permits(1);
        support::eventually(|| async {
            let completed: i64 =
                sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'completed'")
                    .fetch_one(db.pool())
                    .await
                    .unwrap();
            (completed > i64::from(done)).then_some(())
        })
        .await;
    }
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
    // Eight slots between them, two at once.
    assert_eq!(overlap.peak.load(Ordering::SeqCst), 2);
}

/// The race the limit must win: a claimer that waited for the queue's lock counts the claim
/// its predecessor committed meanwhile, although its own statement started before that commit.
#[tokio::test]
async fn a_claimer_that_waited_for_the_lock_counts_the_claim_committed_before_it() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.set_queue_limit("limited", Some(1)).await.unwrap();
    let job = client.enqueue(Limited { n: 1 }).await.unwrap().id();
    client.enqueue(Limited { n: 2 }).await.unwrap();
    let claimable = "SELECT room FROM pgq.claimable('limited', '{}', $1, 10, '{Limited}')";

    let mut first = db.pool().begin().await.unwrap();
    let room: Option<i64> = sqlx::query_scalar(claimable)
        .bind("first")
        .fetch_one(&mut *first)
        .await
        .unwrap();
    assert_eq!(room, Some(1));
    // The first claimer takes the one slot, as its claim statement would.
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'first',
                claimed_at = now(), started_at = now(),
                lease_expires_at = now() + interval '1 hour'
         WHERE id = $1",
    )
    .bind(job.get())
    .execute(&mut *first)
    .await
    .unwrap();

    // The second claimer's statement starts now, and waits for the queue's lock.
    let pool = db.pool().clone();
    let second = tokio::spawn(async move {
        sqlx::query_scalar::<_, Option<i64>>(claimable)
            .bind("second")
            .fetch_one(&pool)
            .await
            .unwrap()
    });
    support::eventually(|| async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'
               AND query LIKE '%claimable%'",
        )
        .fetch_one(db.pool())
        .await
        .unwrap();
        (waiting == 1).then_some(())
    })
    .await;
    first.commit().await.unwrap();
    assert_eq!(
        second.await.unwrap(),
        Some(0),
        "the committed claim is counted"
    );
}

//! A queue's cluster-wide concurrency limit: set, listed and lifted through the admin API, and
//! held by two workers together, each allowed more than the limit on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgq_core::{
    Client, Error, Handler, JobContext, Task, TaskError, Worker, WorkerBuilder, async_trait,
};
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

/// A worker of the limited queue, with `concurrency` slots, polling every 100 ms.
fn limited_worker(
    client: &Client,
    concurrency: usize,
    overlap: &Arc<Overlap>,
    gate: &Arc<Semaphore>,
) -> WorkerBuilder {
    Worker::builder(client.clone())
        .queue("limited", concurrency)
        .poll_interval(Duration::from_millis(100))
        .state(overlap.clone())
        .state(gate.clone())
}

/// How many jobs have completed.
async fn completed(db: &TestDatabase) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'completed'")
        .fetch_one(db.pool())
        .await
        .unwrap()
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
    // What the database cannot store is refused, not stored as something else.
    let huge = client
        .set_queue_limit("limited", Some(u32::MAX))
        .await
        .unwrap_err();
    assert!(
        matches!(&huge, Error::InvalidQueue { reason, .. } if reason.contains("at most")),
        "{huge}"
    );
    client
        .set_queue_limit("limited", Some(i32::MAX as u32))
        .await
        .unwrap();
    assert_eq!(
        client.queues().await.unwrap()[0].limit,
        Some(i32::MAX as u32)
    );
    client.set_queue_limit("limited", None).await.unwrap();
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
        limited_worker(&client, 4, &overlap, &gate)
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
    support::eventually(|| async { (overlap.running.load(Ordering::SeqCst) == 2).then_some(()) })
        .await;
    for done in 0..jobs {
        // Let one running handler finish; the next job takes its seat.
        support::eventually(|| async {
            (overlap.running.load(Ordering::SeqCst) > 0).then_some(())
        })
        .await;
        gate.add_permits(1);
        support::eventually(|| async { (completed(&db).await > i64::from(done)).then_some(()) })
            .await;
    }
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
    // Eight slots between them, two at once.
    assert_eq!(overlap.peak.load(Ordering::SeqCst), 2);
    let leases: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.queue_seats")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(leases, 0, "a worker that stops gives its seats back");
}

/// A worker that is stopping keeps the seats of the handlers it still runs through its grace
/// period, however short its lease: another worker may take them only once they have returned.
#[tokio::test]
async fn a_stopping_worker_keeps_the_seats_of_its_running_handlers() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.set_queue_limit("limited", Some(2)).await.unwrap();
    let overlap = Arc::new(Overlap::default());
    let gate = Arc::new(Semaphore::new(0));
    let start = || {
        limited_worker(&client, 2, &overlap, &gate)
            // Its seats are leased for 400 ms at a time.
            .heartbeat_interval(Duration::from_millis(100))
            .shutdown_grace(Duration::from_secs(60))
            .build()
            .unwrap()
            .start()
    };
    let first = start();
    client
        .enqueue_many((0..2).map(|n| Limited { n }))
        .await
        .unwrap();
    support::eventually(|| async { (overlap.running.load(Ordering::SeqCst) == 2).then_some(()) })
        .await;
    client
        .enqueue_many((2..4).map(|n| Limited { n }))
        .await
        .unwrap();
    let stopping = tokio::spawn(first.shutdown());
    let second = start();
    // Many leases long: the second worker finds no seat while the first's handlers run.
    let more = tokio::time::timeout(
        Duration::from_secs(3),
        support::eventually(|| async {
            (overlap.running.load(Ordering::SeqCst) > 2).then_some(())
        }),
    )
    .await;
    assert!(more.is_err(), "more handlers than the limit ran at once");
    gate.add_permits(4);
    stopping.await.unwrap().unwrap();
    support::eventually(|| async { (completed(&db).await == 4).then_some(()) }).await;
    second.shutdown().await.unwrap();
    assert_eq!(overlap.peak.load(Ordering::SeqCst), 2);
}

/// What `pgq.take_seats` leases: (seats recorded, handlers allowed).
async fn take_seats(
    db: &TestDatabase,
    worker: &str,
    wanted: i32,
    keep: i32,
    lease_ms: i64,
) -> (Option<i32>, Option<i32>) {
    sqlx::query_as("SELECT seats, allowed FROM pgq.take_seats('limited', $1, $2, $3, $4)")
        .bind(worker)
        .bind(wanted)
        .bind(keep)
        .bind(lease_ms)
        .fetch_one(db.pool())
        .await
        .unwrap()
}

/// Seats are shared out: a worker that holds them all gives back down to its fair share once
/// another wants some, but keeps those its running handlers still use; a lease that runs out
/// frees its seats; a lifted limit drops the leases.
#[tokio::test]
async fn seats_are_shared_out_and_given_back_only_once_free() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.set_queue_limit("limited", Some(4)).await.unwrap();
    let minute = 60_000;
    assert_eq!(take_seats(&db, "a", 8, 0, minute).await, (Some(4), Some(4)));
    assert_eq!(
        take_seats(&db, "b", 8, 0, minute).await,
        (Some(0), Some(0)),
        "all taken"
    );
    // `a` is allowed its share, 2, but four of its handlers may still run.
    assert_eq!(take_seats(&db, "a", 8, 4, minute).await, (Some(4), Some(2)));
    assert_eq!(take_seats(&db, "b", 8, 0, minute).await, (Some(0), Some(0)));
    // Two of them returned: two seats are free, and `b` takes them.
    assert_eq!(take_seats(&db, "a", 8, 2, minute).await, (Some(2), Some(2)));
    assert_eq!(take_seats(&db, "b", 8, 0, minute).await, (Some(2), Some(2)));
    // `b`'s lease runs out unrenewed: its seats are `a`'s to take.
    assert_eq!(take_seats(&db, "b", 8, 2, 0).await, (Some(2), Some(2)));
    assert_eq!(take_seats(&db, "a", 8, 2, minute).await, (Some(4), Some(4)));

    client.set_queue_limit("limited", None).await.unwrap();
    assert_eq!(take_seats(&db, "a", 8, 4, minute).await, (None, None));
    let leases: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pgq.queue_seats WHERE worker_id = 'a'")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(leases, 0);
}

/// The race the limit must win: a worker that waited for the queue's lock counts the seats
/// its predecessor leased meanwhile, although its own statement started before that commit.
#[tokio::test]
async fn a_lease_that_waited_for_the_lock_counts_the_seats_leased_before_it() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.set_queue_limit("limited", Some(1)).await.unwrap();
    let lease = "SELECT allowed FROM pgq.take_seats('limited', $1, 4, 0, 60000)";

    let mut first = db.pool().begin().await.unwrap();
    let allowed: Option<i32> = sqlx::query_scalar(lease)
        .bind("first")
        .fetch_one(&mut *first)
        .await
        .unwrap();
    assert_eq!(allowed, Some(1));

    // The second worker's statement starts now, and waits for the queue's lock.
    let pool = db.pool().clone();
    let second = tokio::spawn(async move {
        sqlx::query_scalar::<_, Option<i32>>(lease)
            .bind("second")
            .fetch_one(&pool)
            .await
            .unwrap()
    });
    support::eventually(|| async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'
               AND query LIKE '%take_seats%'",
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
        "the committed lease is counted"
    );
}

//! A queue's rate limit holds across worker processes: three processes of the fleet example,
//! twelve slots between them, start 20 jobs a second together, measured by the database over
//! 30 seconds, and wait for their tokens without polling for them.

mod fleet;

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use pgq_core::{RateLimit, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::process::Child;

const LIMIT: Duration = Duration::from_secs(90);

/// The fleet example's task; enqueued here, run by the fleet's processes.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet", unique_key = "fleet:{key}", max_attempts = 3)]
struct FleetJob {
    key: u32,
    millis: u64,
    fail: bool,
}

async fn start_worker(db: &TestDatabase) -> Child {
    fleet::start_worker(db, &["--concurrency", "4"]).await.0
}

async fn queue_updates(db: &TestDatabase) -> i64 {
    sqlx::query_scalar(
        "SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = 'pgq' AND relname = 'queues'",
    )
    .fetch_one(db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn three_processes_start_jobs_at_the_queue_rate_within_ten_percent() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let rate = RateLimit::new(20, Duration::from_secs(1)).unwrap();
    client.set_queue_rate("fleet", Some(rate)).await.unwrap();
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(start_worker(&db).await);
    }
    // More than 35 seconds' worth: the queue never runs dry while it is measured.
    client
        .enqueue_many((0..1_000).map(|key| FleetJob {
            key,
            millis: 0,
            fail: false,
        }))
        .await
        .unwrap();

    // Measured from one second after the first start: the full bucket's burst is left out.
    let first: DateTime<Utc> = tokio::time::timeout(LIMIT, async {
        loop {
            let first: Option<DateTime<Utc>> =
                sqlx::query_scalar("SELECT min(claimed_at) FROM pgq.jobs")
                    .fetch_one(db.pool())
                    .await
                    .unwrap();
            if let Some(first) = first {
                return first;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("jobs start");
    let from = first + TimeDelta::seconds(1);
    let to = from + TimeDelta::seconds(30);
    tokio::time::timeout(LIMIT, async {
        loop {
            let past: bool = sqlx::query_scalar("SELECT now() > $1")
                .bind(to + TimeDelta::milliseconds(500))
                .fetch_one(db.pool())
                .await
                .unwrap();
            if past {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await
    .expect("the database clock moves on");

    let started: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pgq.jobs WHERE claimed_at >= $1 AND claimed_at < $2",
    )
    .bind(from)
    .bind(to)
    .fetch_one(db.pool())
    .await
    .unwrap();
    // 20 a second for 30 seconds: 600, within 10 %.
    assert!(
        (540..=660).contains(&started),
        "{started} jobs started in 30 s"
    );
    // Each claim of the rate-limited queue writes its bucket once: a worker that polled for
    // tokens would have written it thousands of times a second.
    let updates = queue_updates(&db).await;
    assert!(
        updates < 10 * started + 200,
        "{updates} bucket writes for {started} starts"
    );
    let queues = client.queues().await.unwrap();
    assert_eq!(
        queues.iter().find(|q| q.name == "fleet").unwrap().rate,
        Some(rate)
    );
}

//! A queue's concurrency limit holds across worker processes: four processes of the fleet
//! example, each able to run four jobs at once, never run more than the limit together. The
//! handlers count themselves in one row of the database, under its row lock, so the highest
//! overlap is measured exactly.

mod fleet;

use std::time::Duration;

use pgq_core::Task;
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::process::Child;

const LIMIT: Duration = Duration::from_secs(60);

/// The fleet example's overlap-recording task; enqueued here, run by the fleet's processes.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet")]
struct OverlapJob {
    millis: u64,
}

async fn start_worker(db: &TestDatabase) -> Child {
    fleet::start_worker(db, &["--concurrency", "4"]).await.0
}

#[tokio::test]
async fn four_processes_never_run_more_jobs_of_a_limited_queue_than_its_limit() {
    let db = TestDatabase::new().await;
    let client = db.client();
    sqlx::raw_sql(
        "CREATE TABLE fleet_overlap (running integer NOT NULL, peak integer NOT NULL);
         INSERT INTO fleet_overlap VALUES (0, 0)",
    )
    .execute(db.pool())
    .await
    .unwrap();
    client.set_queue_limit("fleet", Some(3)).await.unwrap();
    let mut workers = Vec::new();
    for _ in 0..4 {
        workers.push(start_worker(&db).await);
    }
    // Jobs long enough that three processes overlap whatever the machine's load: 40 ms jobs
    // on a starved machine ran one at a time, each process's between another's.
    let jobs = 30;
    client
        .enqueue_many((0..jobs).map(|_| OverlapJob { millis: 200 }))
        .await
        .unwrap();

    tokio::time::timeout(LIMIT, async {
        loop {
            let done: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pgq.jobs WHERE task = 'OverlapJob' AND status = 'completed'",
            )
            .fetch_one(db.pool())
            .await
            .unwrap();
            if done == jobs {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every job completes");

    let (running, peak): (i32, i32) = sqlx::query_as("SELECT running, peak FROM fleet_overlap")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(running, 0);
    // Sixteen slots in the fleet, three at once: the limit, reached and never passed.
    assert_eq!(peak, 3);
    let attempts: i64 =
        sqlx::query_scalar("SELECT sum(attempts) FROM pgq.jobs WHERE task = 'OverlapJob'")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(attempts, jobs, "each job ran once");
    let queues = client.queues().await.unwrap();
    let fleet = queues.iter().find(|q| q.name == "fleet").unwrap();
    assert_eq!(fleet.limit, Some(3));
}

//! A concurrency limit per key holds across worker processes: four processes of the fleet
//! example, each able to run four jobs at once, never run two jobs of one tenant together. The
//! handlers count themselves in their tenant's row of the database, under its row lock, so the
//! highest overlap per tenant is measured exactly.

mod fleet;

use std::time::Duration;

use pgq_core::Task;
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::process::Child;

const LIMIT: Duration = Duration::from_secs(60);

/// The fleet example's per-tenant overlap-recording task; enqueued here, run by the fleet.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet", concurrency_key = "{tenant}", concurrency = 1)]
struct KeyedOverlapJob {
    tenant: String,
    millis: u64,
}

async fn start_worker(db: &TestDatabase) -> Child {
    fleet::start_worker(db, &["--concurrency", "4"]).await.0
}

#[tokio::test]
async fn four_processes_never_run_two_jobs_of_one_key_together() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let tenants = ["acme", "globex", "initech"];
    sqlx::raw_sql(
        "CREATE TABLE fleet_key_overlap (tenant text PRIMARY KEY, running integer NOT NULL,
                                         peak integer NOT NULL);
         INSERT INTO fleet_key_overlap VALUES ('acme', 0, 0), ('globex', 0, 0), ('initech', 0, 0)",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let mut workers = Vec::new();
    for _ in 0..4 {
        workers.push(start_worker(&db).await);
    }
    let jobs = 45;
    client
        .enqueue_many((0..jobs).map(|n| KeyedOverlapJob {
            tenant: tenants[n % tenants.len()].into(),
            millis: 30,
        }))
        .await
        .unwrap();

    tokio::time::timeout(LIMIT, async {
        loop {
            let done: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pgq.jobs
                 WHERE task = 'KeyedOverlapJob' AND status = 'completed'",
            )
            .fetch_one(db.pool())
            .await
            .unwrap();
            if done == jobs as i64 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every job completes");

    let rows: Vec<(String, i32, i32)> =
        sqlx::query_as("SELECT tenant, running, peak FROM fleet_key_overlap ORDER BY tenant")
            .fetch_all(db.pool())
            .await
            .unwrap();
    // Sixteen slots in the fleet, one job per tenant at once: reached and never passed.
    let expected: Vec<(String, i32, i32)> = tenants.iter().map(|t| (t.to_string(), 0, 1)).collect();
    assert_eq!(rows, expected);
    let attempts: i64 =
        sqlx::query_scalar("SELECT sum(attempts) FROM pgq.jobs WHERE task = 'KeyedOverlapJob'")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(attempts, jobs as i64, "each job ran once");
}

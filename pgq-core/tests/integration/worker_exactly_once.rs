//! The core promise: four independent workers, each with its own pool, drain 20 000 jobs; the
//! database shows every job completed exactly once and none lost.

use pgq_core::{Client, Handler, JobContext, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::support;

const JOBS: i64 = 20_000;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "exactly-once")]
struct Record {
    n: i64,
}

#[async_trait]
impl Handler for Record {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let pool = ctx.state::<PgPool>().unwrap();
        // The primary key turns a second run of one job into an error, so a duplicate would show.
        sqlx::query("INSERT INTO runs (job_id, n) VALUES ($1, $2)")
            .bind(ctx.id().get())
            .bind(self.n)
            .execute(pool)
            .await?;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_workers_complete_every_job_exactly_once() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql("CREATE TABLE runs (job_id bigint PRIMARY KEY, n bigint NOT NULL UNIQUE)")
        .execute(db.pool())
        .await
        .unwrap();
    db.client()
        .enqueue_many((0..JOBS).map(|n| Record { n }))
        .await
        .unwrap();

    let mut handles = Vec::new();
    for _ in 0..4 {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(6)
            .connect_with(db.connect_options())
            .await
            .unwrap();
        let worker = Worker::builder(Client::new(pool.clone()))
            .queue("exactly-once", 8)
            .state(pool)
            .build()
            .unwrap();
        handles.push(worker.start());
    }
    let all_completed = async {
        let mut stats: Vec<_> = handles.iter().map(|h| h.stats()).collect();
        loop {
            let done: u64 = stats.iter().map(|s| s.borrow().completed).sum();
            if done >= JOBS as u64 {
                break;
            }
            let changes = stats.iter_mut().map(|s| Box::pin(s.changed()));
            let _ = futures_util::future::select_all(changes).await;
        }
    };
    tokio::time::timeout(support::LIMIT * 6, all_completed)
        .await
        .expect("jobs did not all complete in time");
    let mut retried = 0;
    for handle in handles {
        retried += handle.stats().borrow().retried;
        handle.shutdown().await.unwrap();
    }

    let (completed, other, runs, distinct_n): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM pgq.jobs WHERE status = 'completed' AND attempts = 1),
                (SELECT count(*) FROM pgq.jobs WHERE status <> 'completed'),
                (SELECT count(*) FROM runs),
                (SELECT count(DISTINCT n) FROM runs)",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!((completed, other, runs, distinct_n), (JOBS, 0, JOBS, JOBS));
    assert_eq!(retried, 0, "no attempt failed");
}

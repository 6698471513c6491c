//! One row never stalls a queue: values that pgq's statements could not process are refused by
//! the schema, from hand-written SQL too, and the queue flows.

use pgq_core::{Handler, JobContext, JobOutcome, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "rows")]
struct RowJob {
    n: u32,
}

#[async_trait]
impl Handler for RowJob {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// The SQLSTATE a hand-written statement fails with.
async fn refused(db: &TestDatabase, sql: &str) -> String {
    let err = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(db.pool())
        .await
        .expect_err(sql);
    err.as_database_error()
        .and_then(|e| e.code())
        .map(|code| code.into_owned())
        .unwrap_or_else(|| format!("{err}"))
}

#[tokio::test]
async fn values_the_claim_could_not_process_are_refused_by_the_schema() {
    let db = TestDatabase::new().await;
    let id = db.client().enqueue(RowJob { n: 1 }).await.unwrap().id();
    for assignment in [
        "attempts = 2147483647",
        "attempts = 100001",
        "run_at = '-infinity'",
        "run_at = 'infinity'",
        "run_at = '294276-01-01'",
        "run_at = '1900-01-01'",
    ] {
        let sql = format!("UPDATE pgq.jobs SET {assignment} WHERE id = {id}");
        assert_eq!(refused(&db, &sql).await, "23514", "{assignment}");
    }
    let code = refused(
        &db,
        "INSERT INTO pgq.jobs (task, queue, payload, run_at) VALUES ('RowJob', 'rows', '{}', '-infinity')",
    )
    .await;
    assert_eq!(code, "23514");
    let long_worker = "w".repeat(9000);
    let sql = format!(
        "UPDATE pgq.jobs SET status = 'claimed', phase = 1, worker_id = '{long_worker}',
                claimed_at = now(), lease_expires_at = now() WHERE id = {id}"
    );
    assert_eq!(refused(&db, &sql).await, "23514");
}

#[tokio::test]
async fn a_queue_flows_past_hand_written_rows_and_every_job_runs() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // Rows written by hand at the head of the queue, at the edges of what the schema allows.
    sqlx::raw_sql(
        "INSERT INTO pgq.jobs (task, queue, payload, priority, run_at, attempts, max_attempts)
         VALUES ('RowJob', 'rows', '{\"n\": 1}', 1000, '1970-01-01', 999, 1000),
                ('RowJob', 'rows', '{\"n\": 2}', 1000, '1970-01-01', 0, 1),
                ('Nobody', 'rows', '{}', 1000, '1970-01-01', 0, 1)",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let worker = Worker::builder(client.clone())
        .queue("rows", 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let id = client.enqueue(RowJob { n: 3 }).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );
    support::completed(&handle, 3).await;
    handle.shutdown().await.unwrap();
    let unclaimed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pgq.jobs WHERE task = 'Nobody' AND status = 'pending'",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(
        unclaimed, 1,
        "a task no worker runs waits for one that does"
    );
}

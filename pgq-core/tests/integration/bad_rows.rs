//! One row never stalls a queue: values that pgq's statements could not process are refused by
//! the schema, from hand-written SQL too, and the queue flows.

use std::time::Duration;

use chrono::{DateTime, Utc};
use pgq_core::{
    Handler, JobContext, JobFilter, JobOutcome, RateLimit, Retention, Task, TaskError, Worker,
    async_trait,
};
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
        "concurrency_key = repeat('k', 1025), concurrency_limit = 1",
        "concurrency_key = '', concurrency_limit = 1",
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
    // A key longer than an index entry holds would have failed every claim of its queue.
    let code = refused(
        &db,
        "INSERT INTO pgq.jobs (task, queue, payload, concurrency_key, concurrency_limit)
         SELECT 'RowJob', 'rows', '{}', string_agg(md5(g::text), ''), 1
         FROM generate_series(1, 100) AS g",
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
                ('RowJob', 'rows', '{\"n\": 4}', 1000, '1970-01-01', 100000, 1000),
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
    support::completed(&handle, 4).await;
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

#[tokio::test]
async fn a_rate_limited_queue_flows_past_a_hand_written_token_bucket() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client
        .set_queue_rate("rows", RateLimit::new(1000, Duration::from_secs(1)))
        .await
        .unwrap();
    let worker = Worker::builder(client.clone())
        .queue("rows", 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    // Each made every claim of the queue fail ("cannot subtract infinite timestamps", "bigint
    // out of range"): the queue stood still.
    for (n, bucket) in [
        "tokens = 0, tokens_at = 'infinity'",
        "tokens = '-Infinity', tokens_at = now()",
        "tokens = -1e300, tokens_at = '-infinity'",
        "tokens = 'NaN', tokens_at = now() + interval '1000 years'",
    ]
    .into_iter()
    .enumerate()
    {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "UPDATE pgq.queues SET {bucket} WHERE name = 'rows'"
        )))
        .execute(db.pool())
        .await
        .unwrap();
        let id = client.enqueue(RowJob { n: n as u32 }).await.unwrap().id();
        assert_eq!(
            support::finished(&mut events, id).await.0,
            JobOutcome::Completed,
            "{bucket}"
        );
    }
    handle.shutdown().await.unwrap();
    let (tokens, behind): (f64, bool) =
        sqlx::query_as("SELECT tokens, tokens_at <= now() FROM pgq.queues WHERE name = 'rows'")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert!(
        (0.0..=1000.0).contains(&tokens) && behind,
        "the bucket is back in range: {tokens} tokens"
    );
}

/// PostgreSQL's earliest time, which `-infinity` reads as.
fn earliest() -> DateTime<Utc> {
    "-4713-11-24T00:00:00Z".parse().unwrap()
}

#[tokio::test]
async fn hand_written_times_errors_and_worker_rows_read_without_crashing_or_hiding_the_rest() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let done = client.enqueue(RowJob { n: 1 }).await.unwrap().id();
    let waiting = client.enqueue(RowJob { n: 2 }).await.unwrap().id();
    let oldest = client.enqueue(RowJob { n: 3 }).await.unwrap().id();
    // sqlx's own decoding panics on each of these: whatever read the row would have crashed.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "UPDATE pgq.jobs SET status = 'cancelled', phase = 2, created_at = '-infinity',
                completed_at = 'infinity', cancel_requested_at = '290000-01-01'
         WHERE id = {done};
         UPDATE pgq.jobs SET updated_at = 'infinity', created_at = '294000-01-01',
                errors = '[1, {{\"attempt\": 1, \"error\": \"e\", \"at\": \"2026-01-01T00:00:00Z\"}}]'
         WHERE id = {waiting};
         UPDATE pgq.jobs SET status = 'cancelled', phase = 2, completed_at = '-infinity'
         WHERE id = {oldest};
         INSERT INTO pgq.workers (id, host, pid, queues, started_at, heartbeat_at, expires_at)
         VALUES ('hand-written', 'h', 1, '{{\"rows\": 2, \"bad\": -1, \"worse\": \"x\"}}',
                 '-infinity', 'infinity', 'infinity'),
                ('hand-written-list', 'h', 2, '[1]', now(), now(), 'infinity');
         INSERT INTO pgq.queues (name, paused_at) VALUES ('rows', 'infinity');
         INSERT INTO pgq.schedules (name, task, cron, time_zone, missed, role, done_through,
                                    last_instant)
         VALUES ('hand-written', 'RowJob', '0 * * * * *', 'UTC', 'skip', 'r', '-infinity',
                 'infinity'),
                ('hand-written-paris', 'RowJob', '0 * * * * *', 'Europe/Paris', 'skip', 'r',
                 'infinity', NULL);
         UPDATE pgq.migrations SET applied_at = 'infinity' WHERE version = 1;"
    )))
    .execute(db.pool())
    .await
    .unwrap();

    let job = client.job(done).await.unwrap().unwrap();
    assert_eq!(job.created_at, earliest());
    assert_eq!(job.completed_at, Some(DateTime::<Utc>::MAX_UTC));
    assert_eq!(job.cancel_requested_at, Some(DateTime::<Utc>::MAX_UTC));
    let job = client.job(waiting).await.unwrap().unwrap();
    assert_eq!(
        (job.created_at, job.updated_at),
        (DateTime::<Utc>::MAX_UTC, DateTime::<Utc>::MAX_UTC)
    );
    // An error entry pgq did not write is left out; the job and its other errors read.
    assert_eq!(
        job.errors
            .iter()
            .map(|e| e.error.as_str())
            .collect::<Vec<_>>(),
        ["e"]
    );
    let page = client.jobs(&JobFilter::new()).await.unwrap();
    assert_eq!(page.jobs.len(), 3);

    let workers = client.workers().await.unwrap();
    let worker = |id: &str| {
        workers
            .iter()
            .find(|w| w.id == id)
            .unwrap_or_else(|| panic!("{id} is live until infinity"))
    };
    assert_eq!(
        (
            worker("hand-written").started_at,
            worker("hand-written").heartbeat_at
        ),
        (earliest(), DateTime::<Utc>::MAX_UTC)
    );
    // What no worker writes in its row's queues is left out, not an error for the whole list.
    assert_eq!(
        worker("hand-written").queues.iter().collect::<Vec<_>>(),
        [(&"rows".to_owned(), &2)]
    );
    assert!(worker("hand-written-list").queues.is_empty());
    let queue = client.queues().await.unwrap();
    let rows = queue.iter().find(|q| q.name == "rows").unwrap();
    assert_eq!(rows.paused_at, Some(DateTime::<Utc>::MAX_UTC));
    let schedules = client.schedules().await.unwrap();
    assert_eq!(schedules[0].last_run, Some(DateTime::<Utc>::MAX_UTC));
    assert!(schedules[0].next_run.is_some_and(|next| next > Utc::now()));
    assert_eq!(
        schedules[1].next_run, None,
        "nothing is due after a watermark at infinity"
    );
    let migrations = client.migration_states().await.unwrap();
    assert_eq!(migrations[0].applied_at, Some(DateTime::<Utc>::MAX_UTC));
    let history = client.finished_history().await.unwrap();
    assert!(
        history.minutes.iter().all(|m| m.minute <= history.now),
        "a completion past now is not in the last hour: {:?}",
        history.minutes
    );

    // A job finished at -infinity is the oldest there is: the cleaner deletes it, and would
    // start its next batch from there. One finished at infinity is never due.
    let deleted = client.delete_finished(Retention::default()).await.unwrap();
    assert_eq!(deleted, Some(1));
    assert!(client.job(oldest).await.unwrap().is_none());
    assert!(client.job(done).await.unwrap().is_some());
}

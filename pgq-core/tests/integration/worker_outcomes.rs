//! What each handler result does to the job: complete, retry, retry after, fail, snooze,
//! and running out of attempts; with a bounded error history.

use std::time::Duration;

use pgq_core::{Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Serialize, Deserialize)]
enum Then {
    Retry,
    RetryAfter(u64),
    Fail,
    Snooze(u64),
    HugeError,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "outcomes", max_attempts = 5)]
struct Outcome {
    then: Then,
}

#[async_trait]
impl Handler for Outcome {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Err(match self.then {
            Then::Retry => TaskError::retry("try later"),
            Then::RetryAfter(secs) => {
                TaskError::retry_after(Duration::from_secs(secs), "rate limited")
            }
            Then::Fail => TaskError::fail("invalid card"),
            Then::Snooze(secs) => TaskError::snooze(Duration::from_secs(secs)),
            Then::HugeError => TaskError::retry("e".repeat(5 * 1024 * 1024)),
        })
    }
}

/// Fails every attempt and retries at once, through its own backoff.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "outcomes-exhaust", max_attempts = 12)]
struct AlwaysFails;

#[async_trait]
impl Handler for AlwaysFails {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        Err(TaskError::retry(format_args!("failure {}", ctx.attempt())))
    }

    fn backoff(_attempt: i32) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

/// Runs one job on a worker; its id, and its outcome and error as the worker reported them.
async fn run_reported(
    client: &pgq_core::Client,
    then: Then,
) -> (pgq_core::JobId, JobOutcome, Option<String>) {
    let id = client.enqueue(Outcome { then }).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("outcomes", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let (outcome, error) = support::finished(&mut events, id).await;
    handle.shutdown().await.unwrap();
    (id, outcome, error)
}

async fn run_one(db: &TestDatabase, then: Then) -> (pgq_core::Job, JobOutcome, f64) {
    let client = db.client();
    let (id, outcome, _) = run_reported(&client, then).await;
    let delay: f64 = sqlx::query_scalar(
        "SELECT extract(epoch FROM run_at - updated_at)::float8 FROM pgq.jobs WHERE id = $1",
    )
    .bind(id.get())
    .fetch_one(db.pool())
    .await
    .unwrap();
    (client.job(id).await.unwrap().unwrap(), outcome, delay)
}

#[tokio::test]
async fn an_error_retries_with_the_default_backoff() {
    let db = TestDatabase::new().await;
    let (job, outcome, delay) = run_one(&db, Then::Retry).await;
    assert_eq!(outcome, JobOutcome::Retrying);
    assert_eq!((job.status, job.attempts), (JobStatus::Pending, 1));
    assert!((8.0..=10.0).contains(&delay), "first backoff {delay}");
    assert_eq!(job.last_error.as_deref(), Some("try later"));
    assert_eq!(job.errors.len(), 1);
    assert_eq!(
        (job.errors[0].attempt, job.errors[0].error.as_str()),
        (1, "try later")
    );
    assert_eq!(job.lease_expires_at, None);
}

#[tokio::test]
async fn retry_after_uses_the_given_delay() {
    let db = TestDatabase::new().await;
    let (job, outcome, delay) = run_one(&db, Then::RetryAfter(120)).await;
    assert_eq!(outcome, JobOutcome::Retrying);
    assert_eq!(job.status, JobStatus::Pending);
    assert!((delay - 120.0).abs() < 0.001, "{delay}");
}

#[tokio::test]
async fn fail_ends_the_job_with_attempts_left() {
    let db = TestDatabase::new().await;
    let (job, outcome, _) = run_one(&db, Then::Fail).await;
    assert_eq!(outcome, JobOutcome::Failed);
    assert_eq!((job.status, job.attempts), (JobStatus::Failed, 1));
    assert_eq!(job.last_error.as_deref(), Some("invalid card"));
    assert!(job.completed_at.is_some());
}

#[tokio::test]
async fn snooze_runs_later_without_spending_an_attempt() {
    let db = TestDatabase::new().await;
    let (job, outcome, delay) = run_one(&db, Then::Snooze(30)).await;
    assert_eq!(outcome, JobOutcome::Snoozed);
    assert_eq!((job.status, job.attempts), (JobStatus::Pending, 0));
    assert!((delay - 30.0).abs() < 0.001, "{delay}");
    assert_eq!(job.last_error, None);
    assert!(job.errors.is_empty());
}

/// A snooze is no error: neither the worker's event nor a drain reports one.
#[tokio::test]
async fn a_snooze_reports_no_error() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (id, outcome, error) = run_reported(&client, Then::Snooze(30)).await;
    assert_eq!((outcome, error), (JobOutcome::Snoozed, None));

    sqlx::query("UPDATE pgq.jobs SET run_at = now() WHERE id = $1")
        .bind(id.get())
        .execute(db.pool())
        .await
        .unwrap();
    let drained = pgq_testkit::drain(&client, "outcomes").await;
    assert_eq!(
        (drained[0].outcome, drained[0].error.as_deref()),
        (JobOutcome::Snoozed, None)
    );
}

#[tokio::test]
async fn a_huge_error_is_truncated() {
    let db = TestDatabase::new().await;
    let (job, outcome, _) = run_one(&db, Then::HugeError).await;
    assert_eq!(outcome, JobOutcome::Retrying);
    let error = job.last_error.unwrap();
    assert!(
        error.len() <= pgq_core::limits::MAX_ERROR_BYTES,
        "{}",
        error.len()
    );
    assert!(error.ends_with("(5242880 bytes, truncated)"), "{error}");
}

#[tokio::test]
async fn out_of_attempts_the_job_fails_and_keeps_the_last_errors() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(AlwaysFails).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("outcomes-exhaust", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    // A retry due at once may start, and even end, before the previous attempt's report
    // arrives: the reports are put in order by their attempt.
    let mut reports = support::attempts_finished(&mut events, id, 12).await;
    reports.sort_by_key(|(attempt, ..)| *attempt);
    for (attempt, (reported, outcome, error)) in (1..=12).zip(reports) {
        let expected = if attempt < 12 {
            JobOutcome::Retrying
        } else {
            JobOutcome::Failed
        };
        assert_eq!(reported, attempt);
        assert_eq!(outcome, expected, "attempt {attempt}");
        assert_eq!(error, Some(format!("failure {attempt}")));
    }
    handle.shutdown().await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Failed, 12));
    assert_eq!(job.last_error.as_deref(), Some("failure 12"));
    let kept: Vec<i32> = job.errors.iter().map(|e| e.attempt).collect();
    assert_eq!(kept, (3..=12).collect::<Vec<_>>(), "the last 10 attempts");
}

#[tokio::test]
async fn the_default_backoff_doubles_from_ten_seconds_up_to_an_hour() {
    let db = TestDatabase::new().await;
    for attempt in 1..=15 {
        let secs: f64 =
            sqlx::query_scalar("SELECT extract(epoch FROM pgq.default_backoff($1))::float8")
                .bind(attempt)
                .fetch_one(db.pool())
                .await
                .unwrap();
        let base = (10.0 * 2f64.powi(attempt - 1)).min(3600.0);
        assert!(
            secs <= base && secs >= base * 0.8,
            "attempt {attempt}: {secs} s, base {base} s"
        );
    }
}

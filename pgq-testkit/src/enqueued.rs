//! Typed reads and assertions on enqueued jobs with their rows: [`all_enqueued`],
//! [`assert_enqueued_with`], [`refute_enqueued_with`], and their `_in` forms, which look inside
//! an open transaction so that a test of code that enqueues in its own transaction need not
//! commit.

use pgq_core::{Job, JobId, Task};
use sqlx::{PgConnection, PgPool};

use crate::expect::Expect;

/// A job of task `T` as it is stored: its decoded task and its row.
#[derive(Debug, Clone)]
pub struct EnqueuedJob<T> {
    /// The payload, decoded as a worker would.
    pub task: T,
    /// The row: id, queue, priority, status, `run_at`, tags and the rest.
    pub job: Job,
}

/// Every job of `T` with its row (decoded or not), oldest id first.
async fn jobs_of<T: Task>(conn: &mut PgConnection) -> Vec<(Job, Result<T, String>)> {
    let jobs = pgq_core::__testkit::jobs_of_task(conn, T::NAME)
        .await
        .unwrap_or_else(|err| panic!("cannot read pgq.jobs: {err}"));
    jobs.into_iter()
        .map(|job| {
            let task = serde_json::from_value::<T>(job.payload.clone()).map_err(|e| e.to_string());
            (job, task)
        })
        .collect()
}

async fn connection(pool: &PgPool) -> sqlx::pool::PoolConnection<sqlx::Postgres> {
    pool.acquire().await.unwrap_or_else(|err| {
        panic!(
            "cannot connect to the test database: {}",
            pgq_core::Error::from(err)
        )
    })
}

/// Every pending job of task `T`, decoded, with its row, oldest first. A payload that does not
/// decode as `T` fails the test, naming the job: a worker could not run it either.
///
/// ```no_run
/// # use pgq_core::Task;
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// let waiting = pgq_testkit::all_enqueued::<SendWelcome>(db.pool()).await;
/// assert_eq!(waiting.len(), 1);
/// assert_eq!(waiting[0].task.user_id, 7);
/// assert_eq!(waiting[0].job.queue, "default");
/// # }
/// ```
pub async fn all_enqueued<T: Task>(pool: &PgPool) -> Vec<EnqueuedJob<T>> {
    all_enqueued_in::<T>(&mut *connection(pool).await).await
}

/// [`all_enqueued`] as `conn` sees the table: inside its transaction, if one is open.
///
/// ```no_run
/// # use pgq_core::Task;
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendReceipt { order_id: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) -> pgq_core::Result<()> {
/// let mut tx = db.pool().begin().await?;
/// db.client().enqueue_in(&mut tx, SendReceipt { order_id: 42 }).await?;
/// let waiting = pgq_testkit::all_enqueued_in::<SendReceipt>(&mut tx).await;
/// assert_eq!(waiting[0].task.order_id, 42);
/// # Ok(()) }
/// ```
pub async fn all_enqueued_in<T: Task>(conn: &mut PgConnection) -> Vec<EnqueuedJob<T>> {
    jobs_of::<T>(conn)
        .await
        .into_iter()
        .filter(|(job, _)| job.status == pgq_core::JobStatus::Pending)
        .map(|(job, task)| match task {
            Ok(task) => EnqueuedJob { task, job },
            Err(err) => panic!(
                "job {} of {} does not decode as {}: {err}; payload {}",
                job.id,
                T::NAME,
                std::any::type_name::<T>(),
                job.payload
            ),
        })
        .collect()
}

/// Asserts that jobs of `T` match `expect` and `predicate` — at least one, or exactly
/// [`Expect::count`] — and returns their ids. On failure the message says what was expected and
/// lists every job of `T` with its status, queue, priority, schedule and payload.
///
/// ```no_run
/// # use std::time::Duration;
/// # use pgq_core::Task;
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendReminder { user_id: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// use pgq_testkit::{Expect, assert_enqueued_with};
///
/// // One reminder for user 7, in the "email" queue, due in about a day.
/// let expect = Expect::default()
///     .queue("email")
///     .scheduled_within(Duration::from_secs(24 * 3600), Duration::from_secs(60))
///     .count(1);
/// assert_enqueued_with::<SendReminder>(db.pool(), expect, |t| t.user_id == 7).await;
/// # }
/// ```
pub async fn assert_enqueued_with<T: Task>(
    pool: &PgPool,
    expect: Expect,
    predicate: impl Fn(&T) -> bool,
) -> Vec<JobId> {
    assert_enqueued_with_in::<T>(&mut *connection(pool).await, expect, predicate).await
}

/// [`assert_enqueued_with`] as `conn` sees the table: inside its transaction, if one is open.
pub async fn assert_enqueued_with_in<T: Task>(
    conn: &mut PgConnection,
    expect: Expect,
    predicate: impl Fn(&T) -> bool,
) -> Vec<JobId> {
    let jobs = jobs_of::<T>(conn).await;
    let matching = matching(&jobs, &expect, &predicate);
    let enough = match expect.expected_count() {
        Some(count) => matching.len() == count,
        None => !matching.is_empty(),
    };
    if !enough {
        let wanted = match expect.expected_count() {
            Some(count) => format!("exactly {count}"),
            None => "at least one".into(),
        };
        panic!(
            "expected {wanted} {} job(s) with {expect} matching the predicate; found {}. \
             {} jobs: {}",
            T::NAME,
            matching.len(),
            T::NAME,
            describe(&jobs)
        );
    }
    matching
}

/// Asserts that no job of `T` matches `expect` and `predicate`. On failure the message lists the
/// jobs that do.
///
/// ```no_run
/// # use pgq_core::Task;
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// use pgq_testkit::{Expect, refute_enqueued_with};
///
/// // Nothing urgent was enqueued for user 7.
/// refute_enqueued_with::<SendWelcome>(db.pool(), Expect::default().priority(150), |t| t.user_id == 7).await;
/// # }
/// ```
pub async fn refute_enqueued_with<T: Task>(
    pool: &PgPool,
    expect: Expect,
    predicate: impl Fn(&T) -> bool,
) {
    refute_enqueued_with_in::<T>(&mut *connection(pool).await, expect, predicate).await
}

/// [`refute_enqueued_with`] as `conn` sees the table: inside its transaction, if one is open.
pub async fn refute_enqueued_with_in<T: Task>(
    conn: &mut PgConnection,
    expect: Expect,
    predicate: impl Fn(&T) -> bool,
) {
    assert!(
        expect.expected_count().is_none(),
        "Expect::count has no meaning in a refute, which fails on any match"
    );
    let jobs = jobs_of::<T>(conn).await;
    // A payload that does not decode as `T` may be what the predicate refutes: it fails.
    let matching: Vec<JobId> = jobs
        .iter()
        .filter(|(job, task)| expect.matches(job) && task.as_ref().map_or(true, &predicate))
        .map(|(job, _)| job.id)
        .collect();
    if !matching.is_empty() {
        let found: Vec<_> = jobs
            .into_iter()
            .filter(|(job, _)| matching.contains(&job.id))
            .collect();
        panic!(
            "expected no {} job with {expect} matching the predicate; found: {}",
            T::NAME,
            describe(&found)
        );
    }
}

fn matching<T>(
    jobs: &[(Job, Result<T, String>)],
    expect: &Expect,
    predicate: &impl Fn(&T) -> bool,
) -> Vec<JobId> {
    jobs.iter()
        .filter(|(job, task)| expect.matches(job) && task.as_ref().is_ok_and(predicate))
        .map(|(job, _)| job.id)
        .collect()
}

fn describe<T>(jobs: &[(Job, Result<T, String>)]) -> String {
    if jobs.is_empty() {
        return "none".into();
    }
    jobs.iter()
        .map(|(job, task)| {
            let undecodable = match task {
                Ok(_) => String::new(),
                Err(err) => format!(" (does not decode: {err})"),
            };
            let tags = job
                .meta
                .as_ref()
                .and_then(|meta| meta.get("tags"))
                .map_or_else(String::new, |tags| format!(", tags {tags}"));
            format!(
                "\n  job {}: {}, queue {:?}, priority {}, run_at {}{tags}, payload {}{undecodable}",
                job.id, job.status, job.queue, job.priority, job.run_at, job.payload
            )
        })
        .collect()
}

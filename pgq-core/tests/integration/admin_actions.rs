//! Acting on jobs with the admin API: every action on a job in every status (what changes and
//! what is skipped, and why), unique keys on retry, actions by filter across several batches,
//! and a running job cancelled through its handler.

use pgq_core::{
    ActionReport, Client, EnqueueOptions, Error, Handler, JobContext, JobFilter, JobId, JobOutcome,
    JobStatus, SkipReason, Task, TaskError, Worker, async_trait, limits,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "actions", unique_key = "act:{n}", max_attempts = 2)]
struct Actionable {
    n: u32,
}

#[async_trait]
impl Handler for Actionable {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "actions-live")]
struct Stoppable;

#[async_trait]
impl Handler for Stoppable {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.cancelled().await;
        Err(TaskError::fail("stopped"))
    }
}

const EVERY_STATUS: [JobStatus; 6] = [
    JobStatus::Pending,
    JobStatus::Claimed,
    JobStatus::Running,
    JobStatus::Completed,
    JobStatus::Failed,
    JobStatus::Cancelled,
];

/// One job in each status, in the order of [`EVERY_STATUS`], and an id no job has.
async fn one_of_each(db: &TestDatabase, client: &Client) -> (Vec<JobId>, JobId) {
    let mut ids = Vec::new();
    for (n, status) in (0u32..).zip(EVERY_STATUS) {
        // Delayed, so that "run now" has something to do.
        let later = EnqueueOptions::default().delay(std::time::Duration::from_secs(600));
        let id = client
            .enqueue_with(Actionable { n }, later)
            .await
            .unwrap()
            .id();
        support::put_in(db.pool(), id, status, "boom").await;
        ids.push(id);
    }
    let missing = JobId::from(ids.iter().map(|id| id.get()).max().unwrap() + 1_000);
    (ids, missing)
}

async fn status_of(client: &Client, id: JobId) -> Option<JobStatus> {
    client.job(id).await.unwrap().map(|job| job.status)
}

/// What a report should say for the jobs of [`one_of_each`]: those changed (by status), those
/// whose handler was asked to stop, and every other one skipped with its status.
fn expected(
    ids: &[JobId],
    missing: JobId,
    changed: &[JobStatus],
    requested: &[JobStatus],
) -> ActionReport {
    let mut report = ActionReport::default();
    for (&id, status) in ids.iter().zip(EVERY_STATUS) {
        if changed.contains(&status) {
            report.changed.push(id);
        } else if requested.contains(&status) {
            report.requested.push(id);
        } else {
            report.skipped.push((id, SkipReason::State(status)));
        }
    }
    report.skipped.push((missing, SkipReason::NotFound));
    report
}

#[tokio::test]
async fn retry_moves_failed_and_cancelled_jobs_back_to_pending_with_attempts_left() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (ids, missing) = one_of_each(&db, &client).await;
    let mut asked = ids.clone();
    asked.push(missing);
    let report = client.retry_jobs(asked, 3).await.unwrap();
    use JobStatus::*;
    assert_eq!(report, expected(&ids, missing, &[Failed, Cancelled], &[]));
    for &id in &report.changed {
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(job.status, Pending);
        assert!(job.max_attempts - job.attempts >= 3, "{job:?}");
        assert!(job.run_at <= chrono::Utc::now());
    }
    assert_eq!(status_of(&client, ids[3]).await, Some(Completed));
}

/// "At least one attempt left" holds when asked for none: a job that spent all its attempts
/// comes back with room for one more, not with `attempts == max_attempts`.
#[tokio::test]
async fn a_retry_asking_for_no_attempts_still_leaves_one() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let once = EnqueueOptions::default().max_attempts(1);
    let id = client
        .enqueue_with(Actionable { n: 1 }, once)
        .await
        .unwrap()
        .id();
    // Its one attempt spent.
    support::put_in(db.pool(), id, JobStatus::Failed, "boom").await;
    let report = client.retry_jobs(id, 0).await.unwrap();
    assert_eq!(report.changed, vec![id]);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.attempts, job.max_attempts), (1, 2), "{job:?}");
}

#[tokio::test]
async fn cancel_stops_pending_jobs_and_asks_held_ones_to_stop() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (ids, missing) = one_of_each(&db, &client).await;
    let mut asked = ids.clone();
    asked.push(missing);
    let report = client.cancel_jobs(asked).await.unwrap();
    use JobStatus::*;
    assert_eq!(
        report,
        expected(&ids, missing, &[Pending], &[Claimed, Running])
    );
    assert_eq!(status_of(&client, ids[0]).await, Some(Cancelled));
    let running = client.job(ids[2]).await.unwrap().unwrap();
    assert_eq!(running.status, Running);
    assert!(running.cancel_requested_at.is_some());
}

#[tokio::test]
async fn delete_removes_finished_jobs_and_others_only_when_forced() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (ids, missing) = one_of_each(&db, &client).await;
    let mut asked = ids.clone();
    asked.push(missing);
    let report = client.delete_jobs(asked.clone(), false).await.unwrap();
    use JobStatus::*;
    assert_eq!(
        report,
        expected(&ids, missing, &[Completed, Failed, Cancelled], &[])
    );
    assert_eq!(status_of(&client, ids[3]).await, None);
    assert_eq!(status_of(&client, ids[0]).await, Some(Pending));

    let forced = client.delete_jobs(asked, true).await.unwrap();
    assert_eq!(forced.changed, ids[..3].to_vec());
    assert_eq!(forced.skipped.len(), 4, "{forced:?}");
    assert!(
        forced
            .skipped
            .iter()
            .all(|(_, reason)| *reason == SkipReason::NotFound)
    );
    for id in ids {
        assert_eq!(status_of(&client, id).await, None);
    }
}

#[tokio::test]
async fn run_now_and_priority_change_only_pending_jobs() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (ids, missing) = one_of_each(&db, &client).await;
    let mut asked = ids.clone();
    asked.push(missing);
    use JobStatus::*;
    let report = client.run_jobs_now(asked.clone()).await.unwrap();
    assert_eq!(report, expected(&ids, missing, &[Pending], &[]));
    let job = client.job(ids[0]).await.unwrap().unwrap();
    assert!(job.run_at <= chrono::Utc::now(), "due now");

    let report = client.set_jobs_priority(asked, 900).await.unwrap();
    assert_eq!(report, expected(&ids, missing, &[Pending], &[]));
    assert_eq!(client.job(ids[0]).await.unwrap().unwrap().priority, 900);
    assert_eq!(client.job(ids[1]).await.unwrap().unwrap().priority, 100);
    assert!(matches!(
        client.set_jobs_priority(ids[0], 1001).await,
        Err(Error::InvalidFilter(_))
    ));
}

#[tokio::test]
async fn a_retry_that_would_duplicate_an_active_unique_key_is_skipped() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client.enqueue(Actionable { n: 7 }).await.unwrap().id();
    support::put_in(db.pool(), first, JobStatus::Failed, "boom").await;
    let second = client.enqueue(Actionable { n: 7 }).await.unwrap().id();
    support::put_in(db.pool(), second, JobStatus::Failed, "boom").await;
    let other = client.enqueue(Actionable { n: 8 }).await.unwrap().id();
    support::put_in(db.pool(), other, JobStatus::Failed, "boom").await;

    let report = client.retry_jobs([first, second, other], 0).await.unwrap();
    assert_eq!(report.changed, vec![first, other]);
    assert_eq!(report.skipped, vec![(second, SkipReason::UniqueKeyHeld)]);
    assert_eq!(status_of(&client, second).await, Some(JobStatus::Failed));
}

#[tokio::test]
async fn an_action_by_filter_changes_every_match_in_batches_and_nothing_else() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let count = limits::ACTION_BATCH as u32 * 2 + 17;
    client
        .enqueue_many((0..count).map(|n| Actionable { n }))
        .await
        .unwrap();
    sqlx::raw_sql(
        "UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 2, worker_id = 'w',
                claimed_at = now(), lease_expires_at = now() + interval '1 hour';
         UPDATE pgq.jobs SET status = 'failed', phase = 2, completed_at = now(),
                lease_expires_at = NULL, last_error = 'smtp: timeout'
         WHERE (payload->>'n')::int % 2 = 0;
         UPDATE pgq.jobs SET status = 'completed', phase = 2, completed_at = now(),
                lease_expires_at = NULL
         WHERE status = 'running';",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let failed = u64::from(count.div_ceil(2));

    let filter = JobFilter::new().task("Actionable").error_contains("SMTP");
    let report = client.retry_jobs(filter.clone(), 1).await.unwrap();
    assert_eq!(report.changed.len() as u64, failed);
    assert!(
        report.skipped.is_empty(),
        "completed jobs are not considered"
    );
    let pending = JobFilter::new().status(JobStatus::Pending);
    assert_eq!(client.count_jobs(&pending).await.unwrap().count, failed);
    let completed = JobFilter::new().status(JobStatus::Completed);
    assert_eq!(
        client.count_jobs(&completed).await.unwrap().count,
        u64::from(count) - failed
    );

    // Statuses the action cannot change are not considered at all: nothing to report.
    let report = client
        .retry_jobs(JobFilter::new().status(JobStatus::Completed), 1)
        .await
        .unwrap();
    assert_eq!(report, ActionReport::default());
    let report = client.delete_jobs(completed.clone(), false).await.unwrap();
    assert_eq!(report.changed.len() as u64, u64::from(count) - failed);
    assert_eq!(client.count_jobs(&completed).await.unwrap().count, 0);
    assert!(matches!(
        client
            .cancel_jobs(JobFilter::new().queue("bad queue"))
            .await,
        Err(Error::InvalidFilter(_))
    ));
}

#[tokio::test]
async fn a_running_job_cancelled_by_filter_stops_through_its_handler() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let worker = Worker::builder(client.clone())
        .queue("actions-live", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let id = client
        .enqueue_with(Stoppable, EnqueueOptions::default().tag("batch", "42"))
        .await
        .unwrap()
        .id();
    support::event(&mut events, |event| {
        matches!(event, pgq_core::WorkerEvent::JobStarted { id: started, .. } if *started == id)
    })
    .await;
    let report = client
        .cancel_jobs(JobFilter::new().tag("batch", "42"))
        .await
        .unwrap();
    assert_eq!(report.requested, vec![id]);
    assert!(report.changed.is_empty());
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Cancelled
    );
    assert_eq!(status_of(&client, id).await, Some(JobStatus::Cancelled));
    handle.shutdown().await.unwrap();
}

/// A worker id no worker can have is refused as `WorkerBuilder::worker_id` refuses it, before
/// the database (which cannot hold a NUL character and would fail the statement).
#[tokio::test]
async fn releasing_a_worker_id_no_worker_can_have_is_refused() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for id in [
        "",
        "web\u{0}1",
        &"w".repeat(limits::MAX_WORKER_ID_BYTES + 1),
    ] {
        let refused = client.release_worker(id).await;
        assert!(
            matches!(refused, Err(Error::InvalidWorker(_))),
            "{refused:?}"
        );
    }
    assert_eq!(client.release_worker("web-3:4121").await.unwrap(), vec![]);
}

/// An action by filter checks the filter's statuses when it acts, under the job's lock, not only
/// when it searched: a pending job a worker claims in between is left alone, even by an action
/// that could change it (a forced delete, a cancel).
#[tokio::test]
async fn a_job_that_leaves_the_filters_status_after_the_search_is_left_alone() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for (action, n) in [("delete", 1), ("cancel", 2)] {
        let id = client.enqueue(Actionable { n }).await.unwrap().id();
        let mut claim = db.pool().begin().await.unwrap();
        sqlx::query("SELECT FROM pgq.jobs WHERE id = $1 FOR UPDATE")
            .bind(id.get())
            .execute(&mut *claim)
            .await
            .unwrap();
        let pending = JobFilter::new()
            .queue("actions")
            .statuses([JobStatus::Pending]);
        let acting = {
            let client = client.clone();
            tokio::spawn(async move {
                match action {
                    "delete" => client.delete_jobs(pending, true).await,
                    _ => client.cancel_jobs(pending).await,
                }
            })
        };
        // The action found the job pending and waits for its lock...
        support::eventually(|| async {
            sqlx::query_scalar::<_, bool>(
                "SELECT EXISTS (SELECT FROM pg_stat_activity
                                WHERE datname = current_database() AND wait_event_type = 'Lock')",
            )
            .fetch_one(db.pool())
            .await
            .unwrap()
            .then_some(())
        })
        .await;
        // ... which a worker holds while it claims the job.
        sqlx::query(
            "UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'w',
                    claimed_at = now(), started_at = now(),
                    lease_expires_at = now() + interval '1 minute'
             WHERE id = $1",
        )
        .bind(id.get())
        .execute(&mut *claim)
        .await
        .unwrap();
        claim.commit().await.unwrap();
        let report = acting.await.unwrap().unwrap();
        assert_eq!(
            report.skipped,
            vec![(id, SkipReason::State(JobStatus::Running))],
            "{action}: {report:?}"
        );
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(
            (job.status, job.cancel_requested_at),
            (JobStatus::Running, None),
            "{action}"
        );
    }
}

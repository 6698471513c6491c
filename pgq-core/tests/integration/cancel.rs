//! Cancellation and manual retry.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Cancellation, Client, Error, Handler, JobContext, JobOutcome, JobStatus, Task, TaskError,
    Worker, WorkerEvent, WorkerHandle, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, broadcast};

use crate::support;

/// Fails with a retry once the test lets it: it never looks at `ctx.cancelled()`.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel-unheard")]
struct FailsWhenLetGo;

#[async_trait]
impl Handler for FailsWhenLetGo {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Err(TaskError::retry("the partner said no"))
    }
}

/// Asks for `id`'s cancel without telling any worker, as a notification lost or a worker behind
/// a pooler (which hears at its next lease renewal) would leave it.
async fn ask_cancel_unheard(db: &TestDatabase, id: pgq_core::JobId) {
    sqlx::query("UPDATE pgq.jobs SET cancel_requested_at = now() WHERE id = $1")
        .bind(id.get())
        .execute(db.pool())
        .await
        .unwrap();
}

/// Runs until cancelled.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel")]
struct UntilCancelled;

#[async_trait]
impl Handler for UntilCancelled {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.cancelled().await;
        Err(TaskError::fail("stopped on request"))
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel-retry", max_attempts = 1)]
struct FailsOnce {
    n: u32,
}

#[async_trait]
impl Handler for FailsOnce {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if ctx.attempt() == 1 {
            return Err(TaskError::retry("first attempt fails"));
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel-retry")]
struct Quick;

#[async_trait]
impl Handler for Quick {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_pending_job_is_cancelled_at_once() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(UntilCancelled).await.unwrap().id();
    assert_eq!(client.cancel(id).await.unwrap(), Cancellation::Cancelled);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Cancelled);
    assert!(job.completed_at.is_some());
}

async fn cancel_running(lease: Duration, notify: bool) {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(UntilCancelled).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("cancel", 1)
        .lease(lease)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
    if notify {
        assert_eq!(client.cancel(id).await.unwrap(), Cancellation::Requested);
    } else {
        // As if the notification were lost: only the lease renewal can tell the worker.
        sqlx::query("UPDATE pgq.jobs SET cancel_requested_at = now() WHERE id = $1")
            .bind(id.get())
            .execute(db.pool())
            .await
            .unwrap();
    }
    assert_eq!(
        support::finished(&mut events, id).await,
        (JobOutcome::Cancelled, Some("stopped on request".into()))
    );
    handle.shutdown().await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Cancelled);
    assert!(job.cancel_requested_at.is_some() && job.completed_at.is_some());
}

#[tokio::test]
async fn a_running_job_is_cancelled_through_its_context_by_notification() {
    // A lease of an hour renews every 20 minutes: only the notification can arrive in time.
    cancel_running(Duration::from_secs(3600), true).await;
}

#[tokio::test]
async fn a_running_job_learns_of_a_missed_cancellation_at_lease_renewal() {
    cancel_running(Duration::from_secs(1), false).await;
}

#[tokio::test]
async fn cancelling_a_finished_or_missing_job_is_a_typed_error() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(UntilCancelled).await.unwrap().id();
    client.cancel(id).await.unwrap();
    let err = client.cancel(id).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::JobState {
                status: JobStatus::Cancelled,
                action: "cancel",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("cannot cancel job {id}: it is cancelled")
    );
    let err = client.cancel(999_999.into()).await.unwrap_err();
    assert!(matches!(err, Error::JobNotFound(_)), "{err}");
}

#[tokio::test]
async fn retry_requeues_failed_and_cancelled_jobs_only() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let failed = client.enqueue(FailsOnce { n: 1 }).await.unwrap().id();
    let cancelled = client.enqueue(Quick).await.unwrap().id();
    client.cancel(cancelled).await.unwrap();

    let worker = Worker::builder(client.clone())
        .queue("cancel-retry", 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    assert_eq!(
        support::finished(&mut events, failed).await.0,
        JobOutcome::Failed
    );
    let err = client.retry(999_999.into()).await.unwrap_err();
    assert!(matches!(err, Error::JobNotFound(_)), "{err}");

    client.retry(failed).await.unwrap();
    client.retry(cancelled).await.unwrap();
    let outcomes = support::all_finished(&mut events, &[failed, cancelled]).await;
    assert_eq!(outcomes[&failed], JobOutcome::Completed);
    assert_eq!(outcomes[&cancelled], JobOutcome::Completed);
    handle.shutdown().await.unwrap();

    let job = client.job(failed).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.attempts, job.max_attempts),
        (JobStatus::Completed, 2, 2)
    );
    let err = client.retry(failed).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::JobState {
                status: JobStatus::Completed,
                action: "retry",
                ..
            }
        ),
        "{err}"
    );
}

/// A worker of `queue` whose handlers wait at the gate it returns, started and running one job.
/// Its leases renew every 20 minutes: during a test, only a notification tells it of a cancel.
async fn run_gated(
    client: &Client,
    queue: &str,
) -> (
    WorkerHandle,
    broadcast::Receiver<WorkerEvent>,
    Arc<Semaphore>,
) {
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue(queue, 1)
        .lease(Duration::from_secs(3600))
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
    (handle, events, gate)
}

/// A cancel the worker has not heard of when the handler fails: the job ends `cancelled`, not
/// back to `pending` to run again.
#[tokio::test]
async fn a_failure_written_after_an_unheard_cancel_ends_the_job_cancelled() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(FailsWhenLetGo).await.unwrap().id();
    let (handle, mut events, gate) = run_gated(&client, "cancel-unheard").await;
    ask_cancel_unheard(&db, id).await;
    gate.add_permits(1);
    assert_eq!(
        support::finished(&mut events, id).await,
        (JobOutcome::Cancelled, Some("the partner said no".into()))
    );
    handle.shutdown().await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Cancelled, 1));
    assert_eq!(job.last_error.as_deref(), Some("the partner said no"));
}

/// Snoozes once the test lets it, or once a cancel was heard.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel-snooze")]
struct SnoozesWhenLetGo {
    heard: bool,
}

#[async_trait]
impl Handler for SnoozesWhenLetGo {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if self.heard {
            ctx.cancelled().await;
        } else {
            support::pass_gate(ctx).await;
        }
        Err(TaskError::snooze(Duration::from_secs(600)))
    }
}

/// A snooze is no error, also when a cancel, heard or not, ends its job instead.
#[tokio::test]
async fn a_snooze_after_a_cancel_ends_the_job_cancelled_with_no_error() {
    for heard in [true, false] {
        let db = TestDatabase::new().await;
        let client = db.client();
        let id = client
            .enqueue(SnoozesWhenLetGo { heard })
            .await
            .unwrap()
            .id();
        let (handle, mut events, gate) = run_gated(&client, "cancel-snooze").await;
        if heard {
            assert_eq!(client.cancel(id).await.unwrap(), Cancellation::Requested);
        } else {
            ask_cancel_unheard(&db, id).await;
            gate.add_permits(1);
        }
        assert_eq!(
            support::finished(&mut events, id).await,
            (JobOutcome::Cancelled, None),
            "heard: {heard}"
        );
        handle.shutdown().await.unwrap();
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(job.status, JobStatus::Cancelled, "heard: {heard}");
        assert_eq!(job.last_error, None, "heard: {heard}");
        assert!(job.errors.is_empty(), "heard: {heard}: {:?}", job.errors);
    }
}

/// Taken back from a worker that stopped renewing, or released at shutdown, a job whose cancel
/// was asked for ends `cancelled` rather than running again.
#[tokio::test]
async fn a_job_taken_back_or_released_after_an_unheard_cancel_ends_cancelled() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // Rescued: held by a worker whose lease ran out.
    let rescued = client.enqueue(FailsWhenLetGo).await.unwrap().id();
    support::put_in(db.pool(), rescued, JobStatus::Running, "").await;
    ask_cancel_unheard(&db, rescued).await;
    sqlx::query("UPDATE pgq.jobs SET lease_expires_at = now() - interval '1 minute' WHERE id = $1")
        .bind(rescued.get())
        .execute(db.pool())
        .await
        .unwrap();
    assert_eq!(client.rescue_expired().await.unwrap(), vec![rescued]);
    let job = client.job(rescued).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Cancelled);

    // Released at shutdown: its handler never returns within the grace period.
    let released = client.enqueue(FailsWhenLetGo).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("cancel-unheard", 1)
        .lease(Duration::from_secs(3600))
        .shutdown_grace(Duration::from_millis(100))
        .state(Arc::new(Semaphore::new(0)))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
    ask_cancel_unheard(&db, released).await;
    handle.shutdown().await.unwrap();
    assert_eq!(
        support::finished(&mut events, released).await.0,
        JobOutcome::Cancelled
    );
    let job = client.job(released).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Cancelled, 1));

    // Released by an operator with the worker's id.
    let held = client.enqueue(FailsWhenLetGo).await.unwrap().id();
    support::put_in(db.pool(), held, JobStatus::Running, "").await;
    ask_cancel_unheard(&db, held).await;
    let worker_id: String = sqlx::query_scalar("SELECT worker_id FROM pgq.jobs WHERE id = $1")
        .bind(held.get())
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(client.release_worker(&worker_id).await.unwrap(), vec![held]);
    assert_eq!(
        client.job(held).await.unwrap().unwrap().status,
        JobStatus::Cancelled
    );
}

/// Instant jobs of high priority, so that the worker claims ahead of its free slot.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel-waiting", priority = 150, lease = "1s")]
struct WaitingSprint;

#[async_trait]
impl Handler for WaitingSprint {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Holds the worker's one slot until the test opens the gate or cancels it.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel-waiting", lease = "1s")]
struct WaitingBlocker;

#[async_trait]
impl Handler for WaitingBlocker {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        tokio::select! {
            _ = support::pass_gate(ctx) => {}
            _ = ctx.cancelled() => {}
        }
        Ok(())
    }
}

/// Claimed behind the blocker; succeeds unless a cancel was heard before its start.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cancel-waiting", priority = 50, lease = "1s")]
struct WaitingVictim;

#[async_trait]
impl Handler for WaitingVictim {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if ctx.is_cancelled() {
            return Err(TaskError::fail("stopped on request"));
        }
        Ok(())
    }
}

/// Claims a victim while a blocker holds the worker's one slot, cancels the victim while it
/// waits (by notification, or only in the table for a lease renewal to find), then frees the
/// slot: the victim ends cancelled.
async fn cancel_while_waiting(notify: bool) {
    let db = TestDatabase::new().await;
    let client = db.client();
    for _ in 0..20 {
        client.enqueue(WaitingSprint).await.unwrap();
    }
    let blocker = client.enqueue(WaitingBlocker).await.unwrap().id();
    let victim = client.enqueue(WaitingVictim).await.unwrap().id();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("cancel-waiting", 1)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    // The quick jobs teach the worker to claim ahead, so the victim is claimed while the
    // blocker holds the only slot.
    support::eventually(|| async {
        let job = client.job(victim).await.unwrap().unwrap();
        (job.status == JobStatus::Claimed).then_some(())
    })
    .await;
    if notify {
        assert_eq!(
            client.cancel(victim).await.unwrap(),
            Cancellation::Requested
        );
        // The worker hears its notifications in order: the blocker's cancel, which frees the
        // slot, after the victim's.
        assert_eq!(
            client.cancel(blocker).await.unwrap(),
            Cancellation::Requested
        );
    } else {
        ask_cancel_unheard(&db, victim).await;
        // A renewal 0.7 s after the request (its lease ends 1 s after it): the one before it,
        // about a third of the lease earlier, came after the request too, and what it learnt
        // was applied long since.
        support::eventually(|| async {
            sqlx::query_scalar::<_, bool>(
                "SELECT lease_expires_at > cancel_requested_at + interval '1.7 seconds'
                 FROM pgq.jobs WHERE id = $1",
            )
            .bind(victim.get())
            .fetch_one(db.pool())
            .await
            .unwrap()
            .then_some(())
        })
        .await;
        gate.add_permits(1);
    }
    assert_eq!(
        support::finished(&mut events, victim).await,
        (JobOutcome::Cancelled, Some("stopped on request".into()))
    );
    handle.shutdown().await.unwrap();
    let job = client.job(victim).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Cancelled);
}

#[tokio::test]
async fn a_job_claimed_ahead_hears_a_cancel_notified_while_it_waits_for_a_slot() {
    cancel_while_waiting(true).await;
}

#[tokio::test]
async fn a_job_claimed_ahead_learns_of_a_cancel_at_a_renewal_while_it_waits() {
    cancel_while_waiting(false).await;
}

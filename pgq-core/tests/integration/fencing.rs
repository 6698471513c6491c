//! Fencing: once an attempt's lease is lost, nothing it does lands on the job.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgq_core::{
    Client, Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, WorkerEvent,
    async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tokio::sync::Semaphore;

use crate::support;

/// Attempt 1 waits until it learns its lease is lost, then for the test's permit, then
/// returns Ok; later attempts return at once.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fencing", lease = "1s")]
struct Fenced;

#[derive(Default)]
struct Observed {
    lease_lost: Mutex<Option<bool>>,
}

#[async_trait]
impl Handler for Fenced {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if ctx.attempt() == 1 {
            ctx.cancelled().await;
            ctx.state::<Arc<Semaphore>>()
                .unwrap()
                .acquire()
                .await
                .unwrap()
                .forget();
            *ctx.state::<Arc<Observed>>()
                .unwrap()
                .lease_lost
                .lock()
                .unwrap() = Some(ctx.lease_lost());
        }
        Ok(())
    }
}

/// Writes a business row and completes in the same transaction; after losing its lease, it
/// first waits for the test to hand the job to the rescuer.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "complete-in", lease = "1s")]
struct Ship {
    order: i64,
    then: Then,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Then {
    Commit,
    /// Commits, then fails on something after the commit.
    CommitThenFail,
    RollBack,
    AfterLosingLease,
    /// Calls `complete_in` twice before committing.
    CompleteTwice,
    /// Reports progress, then in a serializable transaction reports more and an event (writes
    /// the throttle leaves for later) and completes in it.
    ReportThenComplete,
    /// As `ReportThenComplete`, at read committed, but the transaction rolls back, and the
    /// handler returns `Ok`: the worker completes the job.
    ReportThenRollBack,
    /// As `ReportThenRollBack`, then reports a stage, and completes in a second transaction that
    /// commits, as a handler retrying its transaction does.
    ReportThenRollBackThenRetry,
}

#[async_trait]
impl Handler for Ship {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if matches!(self.then, Then::AfterLosingLease) {
            support::pass_gate(ctx).await;
        }
        let pool = ctx.state::<PgPool>().unwrap();
        let reports = matches!(
            self.then,
            Then::ReportThenComplete | Then::ReportThenRollBack | Then::ReportThenRollBackThenRetry
        );
        if reports {
            // Written at once: the first report of an attempt is never held back.
            ctx.progress(40, "packing").await;
        }
        let mut tx = if matches!(self.then, Then::ReportThenComplete) {
            pool.begin_with("BEGIN ISOLATION LEVEL SERIALIZABLE")
                .await?
        } else {
            pool.begin().await?
        };
        sqlx::query("INSERT INTO shipments (order_id) VALUES ($1)")
            .bind(self.order)
            .execute(&mut *tx)
            .await?;
        if reports {
            // Within the throttle's second: left for the next write.
            ctx.progress(80, "labelling").await;
            ctx.event("label printed").await;
        }
        ctx.complete_in(&mut tx).await?;
        if matches!(self.then, Then::CompleteTwice) {
            ctx.complete_in(&mut tx).await?;
        }
        match self.then {
            Then::RollBack => {
                tx.rollback().await?;
                Err(TaskError::fail("changed my mind"))
            }
            Then::CommitThenFail => {
                tx.commit().await?;
                Err(TaskError::retry("the receipt mail bounced"))
            }
            Then::ReportThenRollBack => {
                tx.rollback().await?;
                Ok(())
            }
            Then::ReportThenRollBackThenRetry => {
                tx.rollback().await?;
                ctx.event("retrying").await;
                let mut tx = pool.begin().await?;
                sqlx::query("INSERT INTO shipments (order_id) VALUES ($1)")
                    .bind(self.order)
                    .execute(&mut *tx)
                    .await?;
                ctx.complete_in(&mut tx).await?;
                tx.commit().await?;
                Ok(())
            }
            _ => {
                tx.commit().await?;
                Ok(())
            }
        }
    }
}

/// Moves time past the job's lease and rescues it; `due_now` skips the retry backoff.
async fn expire_and_rescue(db: &TestDatabase, id: pgq_core::JobId, due_now: bool) {
    db.advance(Duration::from_secs(2)).await;
    // Rescue it here, unless the worker's own rescuer gets there first; a pass also skips a row
    // that a lease renewal holds for the moment. Either way, it ends up pending.
    let rescued = async {
        loop {
            db.client().rescue_expired().await.unwrap();
            let job = db.client().job(id).await.unwrap().unwrap();
            if job.status == JobStatus::Pending {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let job = tokio::time::timeout(support::LIMIT, rescued)
        .await
        .expect("the job was rescued");
    assert_eq!(job.attempts, 1);
    assert!(job.last_error.unwrap().starts_with("lease expired"));
    if due_now {
        db.make_due(id).await;
    }
}

async fn own_pool(db: &TestDatabase) -> PgPool {
    PgPool::connect_with(db.connect_options()).await.unwrap()
}

#[tokio::test]
async fn a_late_result_after_a_lost_lease_changes_nothing() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Fenced).await.unwrap().id();

    let gate = Arc::new(Semaphore::new(0));
    let observed = Arc::new(Observed::default());
    let a = Worker::builder(Client::new(own_pool(&db).await))
        .queue("fencing", 1)
        .worker_id("worker-a")
        .state(gate.clone())
        .state(observed.clone())
        .build()
        .unwrap();
    let mut a_events = a.events();
    let a = a.start();
    support::event(&mut a_events, |e| {
        matches!(e, WorkerEvent::JobStarted { .. })
    })
    .await;

    // A's lease runs out (as if renewal stalled); the job is rescued and B runs attempt 2.
    expire_and_rescue(&db, id, true).await;
    let b = Worker::builder(Client::new(own_pool(&db).await))
        .queue("fencing", 1)
        .worker_id("worker-b")
        .build()
        .unwrap();
    let mut b_events = b.events();
    let b = b.start();
    assert_eq!(
        support::finished(&mut b_events, id).await,
        (JobOutcome::Completed, None)
    );

    // Now A returns Ok: its completion is fenced off.
    gate.add_permits(1);
    assert_eq!(
        support::finished(&mut a_events, id).await.0,
        JobOutcome::LeaseLost
    );
    assert_eq!(*observed.lease_lost.lock().unwrap(), Some(true));
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Completed);
    assert_eq!(job.attempts, 2);
    assert_eq!(job.worker_id.as_deref(), Some("worker-b"));
}

async fn ship(db: &TestDatabase, then: Then) -> (pgq_core::JobId, JobOutcome, i64) {
    ship_keeping(db, then, pgq_core::Retention::default()).await
}

async fn ship_keeping(
    db: &TestDatabase,
    then: Then,
    retention: pgq_core::Retention,
) -> (pgq_core::JobId, JobOutcome, i64) {
    sqlx::raw_sql("CREATE TABLE IF NOT EXISTS shipments (order_id bigint PRIMARY KEY)")
        .execute(db.pool())
        .await
        .unwrap();
    let client = db.client();
    let id = client.enqueue(Ship { order: 7, then }).await.unwrap().id();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client)
        .queue("complete-in", 1)
        .retention(retention)
        .state(db.pool().clone())
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    if matches!(then, Then::AfterLosingLease) {
        support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;
        // Backing off after the rescue, so no second attempt starts during the test.
        expire_and_rescue(db, id, false).await;
        gate.add_permits(1);
    }
    let (outcome, _) = support::finished(&mut events, id).await;
    handle.shutdown().await.unwrap();
    let shipped: i64 = sqlx::query_scalar("SELECT count(*) FROM shipments")
        .fetch_one(db.pool())
        .await
        .unwrap();
    (id, outcome, shipped)
}

#[tokio::test]
async fn complete_in_commits_with_the_handlers_writes() {
    let db = TestDatabase::new().await;
    let (id, outcome, shipped) = ship(&db, Then::Commit).await;
    assert_eq!((outcome, shipped), (JobOutcome::Completed, 1));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.progress), (JobStatus::Completed, 100));
}

/// A worker that keeps no completed jobs deletes one completed in the handler's transaction too,
/// before it reports it.
#[tokio::test]
async fn complete_in_with_a_retention_of_zero_leaves_no_completed_row() {
    let db = TestDatabase::new().await;
    let keep_none = pgq_core::Retention {
        completed: Duration::ZERO,
        ..pgq_core::Retention::default()
    };
    for then in [Then::Commit, Then::CommitThenFail] {
        sqlx::raw_sql("DROP TABLE IF EXISTS shipments")
            .execute(db.pool())
            .await
            .unwrap();
        let (id, outcome, shipped) = ship_keeping(&db, then, keep_none).await;
        assert_eq!((outcome, shipped), (JobOutcome::Completed, 1), "{then:?}");
        assert!(db.client().job(id).await.unwrap().is_none(), "{then:?}");
    }
}

/// A second `complete_in` in the same transaction finds the job completed by this attempt: no
/// lease lost.
#[tokio::test]
async fn complete_in_twice_in_one_transaction_completes_once() {
    let db = TestDatabase::new().await;
    let (id, outcome, shipped) = ship(&db, Then::CompleteTwice).await;
    assert_eq!((outcome, shipped), (JobOutcome::Completed, 1));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
}

/// At serializable, the handler's transaction takes its snapshot at its first statement: the
/// progress and events reported after it and not written yet go with the completion, in the
/// handler's own statement, where a write of pgq's on another connection would fail it to
/// serialize.
#[tokio::test]
async fn complete_in_at_serializable_takes_the_progress_reported_within_its_transaction() {
    let db = TestDatabase::new().await;
    let (id, outcome, shipped) = ship(&db, Then::ReportThenComplete).await;
    assert_eq!((outcome, shipped), (JobOutcome::Completed, 1));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.attempts, job.current_stage.as_deref()),
        (JobStatus::Completed, 1, Some("labelling"))
    );
    assert_eq!(job.events_count, 1);
}

/// What the handler does after its commit cannot undo the completion, and the worker reports
/// the job completed, not its lease lost.
#[tokio::test]
async fn complete_in_committed_stays_completed_whatever_the_handler_returns_after() {
    let db = TestDatabase::new().await;
    let (id, outcome, shipped) = ship(&db, Then::CommitThenFail).await;
    assert_eq!((outcome, shipped), (JobOutcome::Completed, 1));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.attempts), (JobStatus::Completed, 1));
}

/// A rolled-back `complete_in` leaves the job to the worker, with the stage and the event that
/// went with it: written by the worker's completion, or by the next `complete_in`. (They were
/// taken for the rolled-back statement and lost.)
#[tokio::test]
async fn complete_in_rolled_back_keeps_the_progress_it_carried() {
    let db = TestDatabase::new().await;
    let (id, outcome, shipped) = ship(&db, Then::ReportThenRollBack).await;
    assert_eq!((outcome, shipped), (JobOutcome::Completed, 0));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.current_stage.as_deref(), job.events_count),
        (JobStatus::Completed, Some("labelling"), 1)
    );

    sqlx::raw_sql("DROP TABLE shipments")
        .execute(db.pool())
        .await
        .unwrap();
    let (id, outcome, shipped) = ship(&db, Then::ReportThenRollBackThenRetry).await;
    assert_eq!((outcome, shipped), (JobOutcome::Completed, 1));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.current_stage.as_deref(), job.events_count),
        (JobStatus::Completed, Some("labelling"), 2)
    );
}

#[tokio::test]
async fn complete_in_rolls_back_with_the_handlers_writes() {
    let db = TestDatabase::new().await;
    let (id, outcome, shipped) = ship(&db, Then::RollBack).await;
    assert_eq!((outcome, shipped), (JobOutcome::Failed, 0));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Failed);
    assert_eq!(job.last_error.as_deref(), Some("changed my mind"));
}

#[tokio::test]
async fn complete_in_fails_after_a_lost_lease_and_writes_nothing() {
    let db = TestDatabase::new().await;
    let (id, outcome, shipped) = ship(&db, Then::AfterLosingLease).await;
    assert_eq!((outcome, shipped), (JobOutcome::LeaseLost, 0));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_ne!(job.status, JobStatus::Completed);
}

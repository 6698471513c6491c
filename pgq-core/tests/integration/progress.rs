//! Progress and events: throttled writes, the final state always written, and a live watcher.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, WorkerEvent, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgListener;
use tokio::sync::Semaphore;

use crate::support;

/// Reports progress in a tight loop, then fails half way.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "progress", max_attempts = 1)]
struct Busy;

#[async_trait]
impl Handler for Busy {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        for step in 0..=1000u32 {
            ctx.progress((step / 20) as u8, "crunching").await;
            if step % 20 == 0 {
                ctx.event("another chunk").await;
            }
        }
        Err(TaskError::fail("stopped at 50 %"))
    }
}

/// Reports 10 %, waits, reports 60 % in a new stage, waits, completes.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "progress-watch")]
struct Stepwise;

#[async_trait]
impl Handler for Stepwise {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(10, "download").await;
        support::pass_gate(ctx).await;
        ctx.progress(60, "resize").await;
        support::pass_gate(ctx).await;
        Ok(())
    }
}

/// Reports a stage longer than the column allows.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "progress-huge")]
struct HugeStage;

#[async_trait]
impl Handler for HugeStage {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(30, &"s".repeat(5000)).await;
        Ok(())
    }
}

/// Moves to a new stage, then reports progress alone (an empty stage) within the throttle.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "progress-stage-kept")]
struct StageThenPercent;

#[async_trait]
impl Handler for StageThenPercent {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(10, "download").await;
        ctx.progress(50, "upload").await;
        ctx.progress(60, "").await;
        Ok(())
    }
}

/// Reports 70 % and fails, to run again in an hour; or snoozes; or, when `last`, fails for good.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "progress-again", max_attempts = 2)]
struct HalfDone {
    snooze: bool,
}

#[async_trait]
impl Handler for HalfDone {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(70, "uploading").await;
        if self.snooze {
            return Err(TaskError::snooze(Duration::from_secs(3600)));
        }
        Err(TaskError::retry_after(
            Duration::from_secs(3600),
            "remote busy",
        ))
    }
}

/// A job back to `pending` belongs to no worker and starts its next attempt without the last
/// one's progress; one that failed for good keeps both, as a record of where it stopped.
#[tokio::test]
async fn a_job_back_to_pending_keeps_no_worker_and_no_progress() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for snooze in [false, true] {
        let id = client.enqueue(HalfDone { snooze }).await.unwrap().id();
        pgq_testkit::drain(&client, "progress-again").await;
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(job.status, JobStatus::Pending, "snooze: {snooze}");
        assert_eq!(
            (job.worker_id, job.progress, job.current_stage),
            (None, 0, None),
            "snooze: {snooze}"
        );
    }
    // Its last attempt, then an admin retry, which starts it afresh too.
    let id = client
        .enqueue(HalfDone { snooze: false })
        .await
        .unwrap()
        .id();
    sqlx::query("UPDATE pgq.jobs SET attempts = 1 WHERE id = $1")
        .bind(id.get())
        .execute(db.pool())
        .await
        .unwrap();
    pgq_testkit::drain(&client, "progress-again").await;
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Failed);
    assert!(job.worker_id.is_some());
    assert_eq!(
        (job.progress, job.current_stage.as_deref()),
        (70, Some("uploading"))
    );
    client.retry(id).await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.status, job.worker_id, job.progress, job.current_stage),
        (JobStatus::Pending, None, 0, None)
    );
}

/// Completes in its own transaction, then reports progress and an event and extends its lease
/// before committing.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "progress-complete-in")]
struct ReportsAfterCompleting;

#[async_trait]
impl Handler for ReportsAfterCompleting {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let pool = ctx.state::<sqlx::PgPool>().expect("a pool in the state");
        let mut tx = pool.begin().await?;
        ctx.complete_in(&mut tx).await?;
        ctx.progress(90, "after the completion").await;
        ctx.event("after the completion").await;
        ctx.extend_lease(Duration::from_secs(60)).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The handler's transaction holds the job's row from `complete_in` on: progress reported, or a
/// lease extended, after it writes nothing, rather than waiting for that transaction (here,
/// without a statement timeout, for ever).
#[tokio::test]
async fn progress_after_complete_in_does_not_wait_for_the_handlers_transaction() {
    let db = TestDatabase::new().await;
    let client = db.client().with_statement_timeout(Duration::ZERO);
    let id = client.enqueue(ReportsAfterCompleting).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("progress-complete-in", 1)
        .state(db.pool().clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let (outcome, _) = support::finished(&mut events, id).await;
    handle.shutdown().await.unwrap();
    assert_eq!(outcome, JobOutcome::Completed);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!((job.status, job.progress), (JobStatus::Completed, 100));
}

#[tokio::test]
async fn an_overlong_stage_is_cut_and_the_job_completes() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(HugeStage).await.unwrap().id();
    let drained = pgq_testkit::drain(&client, "progress-huge").await;
    assert_eq!(drained[0].outcome, JobOutcome::Completed);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(
        job.current_stage.map(|stage| stage.len()),
        Some(pgq_core::limits::MAX_STAGE_BYTES)
    );
}

#[tokio::test]
async fn an_empty_stage_keeps_the_last_one_reported_even_unsent() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(StageThenPercent).await.unwrap().id();
    let drained = pgq_testkit::drain(&client, "progress-stage-kept").await;
    assert_eq!(drained[0].outcome, JobOutcome::Completed);
    let job = client.job(id).await.unwrap().unwrap();
    // "upload" waited behind the throttle when the empty stage came.
    assert_eq!(job.current_stage.as_deref(), Some("upload"));
}

#[tokio::test]
async fn a_tight_loop_is_throttled_and_the_final_state_is_written() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
    listener.listen("pgq_progress").await.unwrap();
    let id = client.enqueue(Busy).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("progress", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Failed
    );
    handle.shutdown().await.unwrap();

    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.progress, 50);
    assert_eq!(job.current_stage.as_deref(), Some("crunching"));
    assert_eq!(job.events_count, 51);

    // 1 000 calls made a handful of writes: count their notifications.
    let writes = support::notifications_so_far(db.pool(), &mut listener, "pgq_progress").await;
    assert!((1..=5).contains(&writes), "{writes} progress writes");
}

#[tokio::test]
async fn a_watcher_follows_a_job_to_its_end() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Stepwise).await.unwrap().id();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(client.clone())
        .queue("progress-watch", 1)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let mut watch = client.watch(id).await.unwrap();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::JobStarted { .. })).await;

    let mut seen = Vec::new();
    let follow = async {
        while let Some(job) = watch.next().await.unwrap() {
            let stage = job.current_stage.clone().unwrap_or_default();
            if seen.last() != Some(&(job.status, job.progress, stage.clone())) {
                seen.push((job.status, job.progress, stage));
            }
            // Let the handler move on once the watcher has seen each step.
            if matches!((job.status, job.progress), (JobStatus::Running, 10 | 60)) {
                gate.add_permits(1);
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), follow)
        .await
        .expect("the watcher saw the job finish");
    handle.shutdown().await.unwrap();
    let steps: Vec<_> = seen
        .iter()
        .map(|(s, p, st)| (*s, *p, st.as_str()))
        .filter(|(s, _, _)| *s != JobStatus::Pending && *s != JobStatus::Claimed)
        .filter(|(s, p, _)| !(*s == JobStatus::Running && *p == 0))
        .collect();
    assert_eq!(
        steps,
        vec![
            (JobStatus::Running, 10, "download"),
            (JobStatus::Running, 60, "resize"),
            (JobStatus::Completed, 100, "resize"),
        ]
    );
}

/// How many connections named `pgq-watch` the server has.
async fn watch_connections(db: &TestDatabase) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'pgq-watch'",
    )
    .fetch_one(db.pool())
    .await
    .unwrap()
}

/// Watches share one listener, on a connection of its own: twenty of them beside a pool of one
/// connection leave that connection to enqueues, each still reads its job's changes, and the
/// listener's connection closes with the last watch.
#[tokio::test]
async fn twenty_watches_share_one_connection_of_their_own() {
    let db = TestDatabase::new().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = pgq_core::Client::new(pool.clone());
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(client.enqueue(Stepwise).await.unwrap().id());
    }
    // Before, each watch held a connection of the pool: the second waited for one, and so did
    // every enqueue.
    let mut watches = Vec::new();
    for &id in &ids {
        let mut watch = tokio::time::timeout(Duration::from_secs(5), client.watch(id))
            .await
            .expect("a watch does not wait for a connection")
            .unwrap();
        assert_eq!(watch.next().await.unwrap().map(|job| job.id), Some(id));
        watches.push(watch);
    }
    assert_eq!(watch_connections(&db).await, 1);
    tokio::time::timeout(Duration::from_secs(5), client.enqueue(Stepwise))
        .await
        .expect("the watches leave the pool to enqueues")
        .unwrap();
    sqlx::query("UPDATE pgq.jobs SET priority = 7, updated_at = now() WHERE id = $1")
        .bind(ids[19].get())
        .execute(&pool)
        .await
        .unwrap();
    let changed = watches[19].next().await.unwrap().expect("the job changed");
    assert_eq!(changed.priority, 7);

    drop(watches);
    support::eventually(|| async { (watch_connections(&db).await == 0).then_some(()) }).await;
}

/// Watches that start together share the listener one of them connects: each connection of
/// pgq's is made with the client pool's hooks, which count them here.
#[tokio::test]
async fn watches_started_together_open_one_connection() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let db = TestDatabase::new().await;
    let connects = Arc::new(AtomicUsize::new(0));
    let counted = connects.clone();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .after_connect(move |_, _| {
            let counted = counted.clone();
            Box::pin(async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        })
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = pgq_core::Client::new(pool);
    let id = client.enqueue(Stepwise).await.unwrap().id();
    let before = connects.load(Ordering::SeqCst);
    let watches = futures_util::future::join_all((0..20).map(|_| client.watch(id))).await;
    assert!(watches.iter().all(Result::is_ok));
    assert_eq!(
        connects.load(Ordering::SeqCst) - before,
        1,
        "one listener for all"
    );
    assert_eq!(watch_connections(&db).await, 1);
}

/// Reports an event and a stage, then returns at once.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "progress-refused")]
struct ReportsOnce;

#[async_trait]
impl Handler for ReportsOnce {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.event("one").await;
        ctx.progress(40, "first").await;
        Ok(())
    }
}

/// A progress write the server refuses (here an application's trigger, once) leaves the state
/// and events unsent: the attempt's end writes them, as the latest state always is.
#[tokio::test]
async fn a_refused_progress_write_is_made_again_when_the_attempt_ends() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql(
        "CREATE SEQUENCE public.progress_writes;
         CREATE FUNCTION public.refuse_first_progress() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF nextval('public.progress_writes') = 1 THEN
                 RAISE EXCEPTION 'the first progress write is refused';
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_first_progress BEFORE UPDATE OF current_stage ON pgq.jobs
             FOR EACH ROW EXECUTE FUNCTION public.refuse_first_progress();",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let client = db.client();
    let id = client.enqueue(ReportsOnce).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("progress-refused", 1)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
    let refused: i64 = sqlx::query_scalar("SELECT last_value FROM public.progress_writes")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert!(
        refused >= 2,
        "the first write was refused, a later one made"
    );
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.current_stage.as_deref(), Some("first"));
    assert_eq!(job.events_count, 1);
}

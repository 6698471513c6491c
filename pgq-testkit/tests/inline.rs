//! The inline testing mode runs jobs at the enqueue, through their real handlers; the manual
//! mode leaves them for a drain. `#[pgq_testkit::test]` hands each test a database of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgq_core::{
    Client, EnqueueOptions, Handler, JobContext, JobStatus, Task, TaskError, async_trait,
};
use pgq_testkit::{Expect, Inline, TestDatabase, assert_enqueued_with};
use serde::{Deserialize, Serialize};

/// Counts the welcomes sent: the handlers' state.
#[derive(Debug, Default)]
struct Outbox(AtomicUsize);

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "signup")]
struct Signup {
    user_id: i64,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "email")]
struct Welcome {
    user_id: i64,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "broken", max_attempts = 3)]
struct Broken;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "panics")]
struct Panics;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "forever")]
struct Forever {
    n: u32,
}

#[async_trait]
impl Handler for Signup {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.enqueue(Welcome {
            user_id: self.user_id,
        })
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Handler for Welcome {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.state::<Arc<Outbox>>()
            .expect("an outbox")
            .0
            .fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait]
impl Handler for Broken {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Err(TaskError::retry_after(Duration::from_secs(60), "smtp down"))
    }
}

#[async_trait]
impl Handler for Panics {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        panic!("the handler broke");
    }
}

#[async_trait]
impl Handler for Forever {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.enqueue(Forever { n: self.n + 1 }).await?;
        Ok(())
    }
}

fn inline(db: &TestDatabase, outbox: &Arc<Outbox>) -> Client {
    let outbox = outbox.clone();
    Inline::new()
        .worker(move |builder| builder.state(outbox.clone()))
        .client(&db.client())
}

/// The message of the panic that `enqueue` must end in.
async fn panic_of<T: std::fmt::Debug + Send + 'static>(
    enqueue: impl std::future::Future<Output = T> + Send + 'static,
) -> String {
    let panicked = tokio::spawn(enqueue)
        .await
        .expect_err("the enqueue panics")
        .into_panic();
    panicked
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
}

async fn status(client: &Client, id: pgq_core::JobId) -> JobStatus {
    client.job(id).await.unwrap().unwrap().status
}

#[pgq_testkit::test]
async fn an_inline_enqueue_has_run_its_job_and_the_jobs_it_enqueued(db: TestDatabase) {
    let outbox = Arc::new(Outbox::default());
    let client = inline(&db, &outbox);
    assert!(client.is_inline());
    let id = client.enqueue(Signup { user_id: 7 }).await.unwrap().id();
    assert_eq!(status(&client, id).await, JobStatus::Completed);
    assert_eq!(outbox.0.load(Ordering::SeqCst), 1, "the follow-up ran too");
    assert_enqueued_with::<Welcome>(
        db.pool(),
        Expect::default().status(JobStatus::Completed).count(1),
        |welcome| welcome.user_id == 7,
    )
    .await;
}

#[pgq_testkit::test]
async fn a_batch_runs_inline_and_the_manual_mode_waits_for_a_drain(db: TestDatabase) {
    let outbox = Arc::new(Outbox::default());
    let inline = inline(&db, &outbox);
    let ids: Vec<_> = inline
        .enqueue_many((1..=3).map(|user_id| Welcome { user_id }))
        .await
        .unwrap();
    for enqueued in &ids {
        assert_eq!(status(&inline, enqueued.id()).await, JobStatus::Completed);
    }
    assert_eq!(outbox.0.load(Ordering::SeqCst), 3);

    // The same database through a manual client: the job waits.
    let manual = pgq_testkit::manual(&inline);
    assert!(!manual.is_inline());
    let id = manual.enqueue(Welcome { user_id: 4 }).await.unwrap().id();
    assert_eq!(status(&manual, id).await, JobStatus::Pending);
    assert_enqueued_with::<Welcome>(db.pool(), Expect::default().count(1), |w| w.user_id == 4)
        .await;
    let outbox_for_drain = outbox.clone();
    pgq_testkit::Drain::new(&manual)
        .queue("email")
        .worker(move |builder| builder.state(outbox_for_drain.clone()))
        .run()
        .await;
    assert_eq!(status(&manual, id).await, JobStatus::Completed);
    assert_eq!(outbox.0.load(Ordering::SeqCst), 4);
}

#[pgq_testkit::test]
async fn inline_leaves_transactional_and_scheduled_jobs_for_a_drain(client: Client) {
    let outbox = Arc::new(Outbox::default());
    let state = outbox.clone();
    let inline = Inline::new()
        .worker(move |builder| builder.state(state.clone()))
        .client(&client);
    let mut tx = inline.pool().begin().await.unwrap();
    let in_tx = inline
        .enqueue_in(&mut tx, Welcome { user_id: 1 })
        .await
        .unwrap()
        .id();
    tx.commit().await.unwrap();
    assert_eq!(status(&inline, in_tx).await, JobStatus::Pending);
    let later = inline
        .enqueue_with(
            Welcome { user_id: 2 },
            EnqueueOptions::default().delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap()
        .id();
    assert_eq!(status(&inline, later).await, JobStatus::Pending);
    // The next inline enqueue on the queue runs what is due there, the committed job with it.
    assert_eq!(status(&inline, in_tx).await, JobStatus::Completed);
    assert_eq!(outbox.0.load(Ordering::SeqCst), 1);
}

#[pgq_testkit::test]
async fn a_failing_inline_job_is_recorded_as_in_production(client: Client) {
    let inline = Inline::new().client(&client);
    let id = inline.enqueue(Broken).await.unwrap().id();
    let job = inline.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Pending, "a retry waits its backoff");
    assert_eq!(job.attempts, 1);
    assert_eq!(
        job.errors.last().map(|e| e.error.as_str()),
        Some("smtp down")
    );
}

#[pgq_testkit::test]
async fn an_inline_panic_fails_the_test_unless_safety_is_on(client: Client) {
    let unsafe_inline = Inline::new().client(&client);
    let message = panic_of(async move { unsafe_inline.enqueue(Panics).await }).await;
    assert!(message.contains("the handler broke"), "{message}");

    let safe_inline = Inline::new().with_safety(true).client(&client);
    let id = safe_inline.enqueue(Panics).await.unwrap().id();
    let job = safe_inline.job(id).await.unwrap().unwrap();
    assert!(job.errors[0].error.contains("the handler broke"));
}

#[pgq_testkit::test]
async fn a_job_that_enqueues_itself_forever_fails_the_test(client: Client) {
    let inline = Inline::new().client(&client);
    let message = panic_of(async move { inline.enqueue(Forever { n: 0 }).await }).await;
    assert!(message.contains("deep"), "{message}");
}

#[pgq_testkit::test]
async fn a_test_may_return_a_result(client: Client) -> pgq_core::Result<()> {
    let id = client.enqueue(Welcome { user_id: 1 }).await?.id();
    assert_eq!(status(&client, id).await, JobStatus::Pending);
    Ok(())
}

/// Enqueues made at once (a server under test answering requests together) are siblings, not
/// nesting: more of them than the nesting bound run every job, and none fails the test.
#[pgq_testkit::test]
async fn many_inline_enqueues_at_once_are_not_nesting(db: TestDatabase) {
    let outbox = Arc::new(Outbox::default());
    let client = inline(&db, &outbox);
    let enqueues = (0..2 * pgq_testkit::MAX_INLINE_DEPTH as i64).map(|user_id| {
        let client = client.clone();
        tokio::spawn(async move { client.enqueue(Signup { user_id }).await.unwrap().id() })
    });
    let ids = futures_util::future::join_all(enqueues).await;
    for id in ids {
        assert_eq!(status(&client, id.unwrap()).await, JobStatus::Completed);
    }
    assert_eq!(
        outbox.0.load(Ordering::SeqCst),
        2 * pgq_testkit::MAX_INLINE_DEPTH
    );
}

/// Snoozes until it has run `runs` times in all (the handlers' state counts them).
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "stubborn")]
struct Stubborn {
    runs: usize,
}

#[async_trait]
impl Handler for Stubborn {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let ran = ctx.state::<Arc<Outbox>>().expect("a counter");
        if ran.0.fetch_add(1, Ordering::SeqCst) + 1 < self.runs {
            return Err(TaskError::snooze(Duration::ZERO));
        }
        Ok(())
    }
}

/// One enqueue whose jobs run exactly `limits::DRAIN_LIMIT` attempts completes: the test
/// fails only past it. (One attempt more fails it: not run here, it would take as long again.)
#[pgq_testkit::test]
async fn an_inline_enqueue_runs_up_to_the_drain_limit_of_attempts(db: TestDatabase) {
    let limit = pgq_core::limits::DRAIN_LIMIT;
    let outbox = Arc::new(Outbox::default());
    let client = inline(&db, &outbox);
    let id = client.enqueue(Stubborn { runs: limit }).await.unwrap().id();
    assert_eq!(status(&client, id).await, JobStatus::Completed);
    assert_eq!(outbox.0.load(Ordering::SeqCst), limit);
}

/// No handler is linked for it.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "unhandled")]
struct Unhandled;

/// Enqueues an [`Unhandled`].
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "hands-off")]
struct HandsOff;

#[async_trait]
impl Handler for HandsOff {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.enqueue(Unhandled).await?;
        Ok(())
    }
}

/// What fails the test in a job's own inline enqueue fails it with safety on too: it is not
/// taken for that job's panic, recorded as its failed attempt.
#[pgq_testkit::test]
async fn a_nested_inline_failure_fails_the_test_with_safety_on(client: Client) {
    let inline = Inline::new().with_safety(true).client(&client);
    let message = panic_of(async move { inline.enqueue(HandsOff).await }).await;
    assert!(message.contains("no handler linked"), "{message}");
}

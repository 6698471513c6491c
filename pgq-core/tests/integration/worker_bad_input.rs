//! Bad input never stops a worker: each becomes a failed attempt with a readable error, and the
//! same worker then completes a normal job.

use std::time::Duration;

use pgq_core::{
    Handler, JobContext, JobOutcome, Task, TaskError, Worker, WorkerEvent, WorkerHandle,
    async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "bad-input")]
struct Typed {
    count: u32,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "bad-input")]
struct Panics;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "bad-input", timeout = "200ms")]
struct Slow;

#[async_trait]
impl Handler for Typed {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for Panics {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        panic!("boom at step 3");
    }
}

#[async_trait]
impl Handler for Slow {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        std::future::pending::<()>().await;
        Ok(())
    }
}

async fn start(db: &TestDatabase) -> (WorkerHandle, broadcast::Receiver<pgq_core::WorkerEvent>) {
    let worker = Worker::builder(db.client())
        .queue("bad-input", 2)
        .poll_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    // Jobs below are found through NOTIFY alone: the poll interval is an hour.
    support::event(&mut events, |e| matches!(e, WorkerEvent::ListenerConnected)).await;
    (handle, events)
}

/// After the bad job, a normal one still runs to completion on the same worker.
async fn still_works(db: &TestDatabase, events: &mut broadcast::Receiver<pgq_core::WorkerEvent>) {
    let id = db.client().enqueue(Typed { count: 1 }).await.unwrap().id();
    assert_eq!(support::finished(events, id).await.0, JobOutcome::Completed);
}

#[tokio::test]
async fn a_payload_of_the_wrong_shape_is_a_failed_attempt() {
    let db = TestDatabase::new().await;
    let (handle, mut events) = start(&db).await;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('Typed', 'bad-input', '{\"count\": \"many\"}')
         RETURNING id",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    sqlx::query("SELECT pg_notify('pgq_insert', 'bad-input')")
        .execute(db.pool())
        .await
        .unwrap();
    let (outcome, error) = support::finished(&mut events, id.into()).await;
    assert_eq!(outcome, JobOutcome::Retrying);
    let error = error.unwrap();
    // The field and the expected type, never the value (it may be a secret).
    assert_eq!(
        error,
        r#"payload does not match task "Typed": count: invalid type: string, expected u32"#
    );
    still_works(&db, &mut events).await;
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_handler_panic_is_a_failed_attempt() {
    let db = TestDatabase::new().await;
    let (handle, mut events) = start(&db).await;
    let id = db.client().enqueue(Panics).await.unwrap().id();
    let (outcome, error) = support::finished(&mut events, id).await;
    assert_eq!(outcome, JobOutcome::Retrying);
    assert_eq!(error.as_deref(), Some("handler panicked: boom at step 3"));
    let job = db.client().job(id).await.unwrap().unwrap();
    assert_eq!(
        job.last_error.as_deref(),
        Some("handler panicked: boom at step 3")
    );
    still_works(&db, &mut events).await;
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_handler_past_its_timeout_is_a_failed_attempt() {
    let db = TestDatabase::new().await;
    let (handle, mut events) = start(&db).await;
    let id = db.client().enqueue(Slow).await.unwrap().id();
    let (outcome, error) = support::finished(&mut events, id).await;
    assert_eq!(outcome, JobOutcome::Retrying);
    assert_eq!(error.as_deref(), Some("timed out after 200ms"));
    still_works(&db, &mut events).await;
    handle.shutdown().await.unwrap();
}

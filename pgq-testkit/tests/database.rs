//! The database helpers: isolation, typed assertions on enqueued jobs, drain, moving time.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    EnqueueOptions, Handler, JobContext, JobId, JobOutcome, Task, TaskError, async_trait,
};
use pgq_testkit::{TestDatabase, assert_enqueued, drain, refute_enqueued};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "mail")]
struct Mail {
    to: String,
}

/// Fails its first two attempts, retrying at once.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "mail", max_attempts = 5)]
struct Flaky;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "mail", max_attempts = 1)]
struct Broken;

#[async_trait]
impl Handler for Mail {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[async_trait]
impl Handler for Flaky {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if ctx.attempt() <= 2 {
            return Err(TaskError::retry_after(Duration::ZERO, "not yet"));
        }
        Ok(())
    }
}

#[async_trait]
impl Handler for Broken {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Err(TaskError::retry("always broken"))
    }
}

fn mail(to: &str) -> Mail {
    Mail { to: to.into() }
}

#[tokio::test]
async fn each_test_database_is_isolated_and_dropped() {
    let a = TestDatabase::new().await;
    let b = TestDatabase::new().await;
    assert_ne!(a.name(), b.name());
    a.client().enqueue(mail("a@x")).await.unwrap();
    refute_enqueued::<Mail>(b.pool(), |_| true).await;
    let name = a.name().to_owned();
    drop(a);
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(b.pool())
            .await
            .unwrap();
    assert!(!exists, "{name} was dropped");
}

#[tokio::test]
async fn assert_enqueued_finds_a_matching_job_and_reports_the_others() {
    let db = TestDatabase::new().await;
    let id = db.client().enqueue(mail("ada@x")).await.unwrap().id();
    db.client().enqueue(mail("bob@x")).await.unwrap();
    assert_eq!(
        assert_enqueued::<Mail>(db.pool(), |m| m.to == "ada@x").await,
        id.get()
    );
    refute_enqueued::<Mail>(db.pool(), |m| m.to == "eve@x").await;

    let pool = db.pool().clone();
    let failed = tokio::spawn(async move {
        assert_enqueued::<Mail>(&pool, |m| m.to == "eve@x").await;
    })
    .await
    .unwrap_err();
    let message = failed.into_panic();
    let message = message.downcast_ref::<String>().unwrap();
    assert!(
        message
            .starts_with("expected a pending Mail job matching the predicate; pending Mail jobs:"),
        "{message}"
    );
    assert!(message.contains(r#"{"to":"ada@x"}"#) && message.contains(r#"{"to":"bob@x"}"#));

    let pool = db.pool().clone();
    let failed = tokio::spawn(async move {
        refute_enqueued::<Mail>(&pool, |m| m.to == "bob@x").await;
    })
    .await
    .unwrap_err();
    let message = failed.into_panic();
    let message = message.downcast_ref::<String>().unwrap();
    assert!(message.contains(r#"{"to":"bob@x"}"#), "{message}");
    assert!(!message.contains("ada@x"), "{message}");
}

#[tokio::test]
async fn drain_runs_due_jobs_through_their_handlers_with_typed_outcomes() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mail = client.enqueue(mail("ada@x")).await.unwrap().id();
    let flaky = client.enqueue(Flaky).await.unwrap().id();
    let broken = client.enqueue(Broken).await.unwrap().id();
    let drained = drain(&client, "mail").await;
    let outcomes: Vec<_> = drained
        .iter()
        .map(|d| (d.id, d.attempt, d.outcome, d.error.as_deref()))
        .collect();
    // In claim order: a retry is due at its new run_at, after jobs that were already due.
    assert_eq!(
        outcomes,
        vec![
            (mail, 1, JobOutcome::Completed, None),
            (flaky, 1, JobOutcome::Retrying, Some("not yet")),
            (broken, 1, JobOutcome::Failed, Some("always broken")),
            (flaky, 2, JobOutcome::Retrying, Some("not yet")),
            (flaky, 3, JobOutcome::Completed, None),
        ]
    );
    assert!(drain(&client, "mail").await.is_empty(), "nothing left due");
}

#[tokio::test]
async fn advancing_time_makes_delayed_and_backed_off_jobs_due() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let later = client
        .enqueue_with(
            mail("later@x"),
            EnqueueOptions::default().delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap()
        .id();
    assert!(drain(&client, "mail").await.is_empty());
    db.advance(Duration::from_secs(3599)).await;
    assert!(drain(&client, "mail").await.is_empty());
    db.advance(Duration::from_secs(1)).await;
    let drained = drain(&client, "mail").await;
    assert_eq!(drained.len(), 1);
    assert_eq!(drained[0].id, later);

    let delayed = client
        .enqueue_with(
            mail("tomorrow@x"),
            EnqueueOptions::default().delay(Duration::from_secs(86_400)),
        )
        .await
        .unwrap()
        .id();
    db.make_due(delayed).await;
    assert_eq!(drain(&client, "mail").await[0].id, delayed);
}

#[tokio::test]
async fn making_a_missing_or_finished_job_due_fails_the_test_there() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let done = client.enqueue(mail("done@x")).await.unwrap().id();
    drain(&client, "mail").await;
    let db = Arc::new(db);
    for (id, expected) in [
        (done, "it is completed"),
        (JobId::from(i64::MAX), "not found"),
    ] {
        let db = db.clone();
        let panicked = tokio::spawn(async move { db.make_due(id).await })
            .await
            .unwrap_err();
        let message = panicked.into_panic().downcast::<String>().unwrap();
        assert!(message.contains(expected), "{message}");
    }
}

#[tokio::test]
async fn advancing_time_by_any_length_makes_every_job_due() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let now = client.enqueue(mail("now@x")).await.unwrap().id();
    let farthest = client
        .enqueue_with(
            mail("farthest@x"),
            EnqueueOptions::default().delay(pgq_core::limits::MAX_DELAY),
        )
        .await
        .unwrap()
        .id();
    // Far past 1970 for the job due now, and past any time for the other.
    db.advance(Duration::MAX).await;
    let mut drained: Vec<_> = drain(&client, "mail").await.iter().map(|j| j.id).collect();
    drained.sort();
    assert_eq!(drained, vec![now, farthest]);
}

/// Time moves by the duration given, to the microsecond the database keeps.
#[tokio::test]
async fn advancing_time_moves_it_to_the_microsecond() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client
        .enqueue_with(
            mail("soon@x"),
            EnqueueOptions::default().delay(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .id();
    let run_at = || async { client.job(id).await.unwrap().unwrap().run_at };
    let before = run_at().await;
    db.advance(Duration::from_micros(1500)).await;
    assert_eq!(
        before - run_at().await,
        chrono::TimeDelta::microseconds(1500)
    );
    db.advance(Duration::from_nanos(999)).await;
    assert_eq!(
        before - run_at().await,
        chrono::TimeDelta::microseconds(1500)
    );
}

/// A database's debug form names it and its server, never the password.
#[tokio::test]
async fn a_databases_debug_form_shows_no_password() {
    let db = TestDatabase::new().await;
    let shown = format!("{db:?}");
    assert!(shown.contains("pgq_test"), "{shown}");
    assert!(!shown.contains("password"), "{shown}");
}

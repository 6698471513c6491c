use std::time::Duration;

use pgq_core::{EnqueueOptions, Enqueued, JobStatus, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Clone, Serialize, Deserialize, Task)]
#[task(queue = "email", unique_key = "welcome:{user_id}")]
struct SendWelcome {
    user_id: i64,
    email: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Task)]
#[task(unique_key = "welcome:{user_id}")]
struct OtherWithSameKey {
    user_id: i64,
}

fn welcome(user_id: i64, email: &str) -> SendWelcome {
    SendWelcome {
        user_id,
        email: email.into(),
    }
}

async fn count_jobs(db: &TestDatabase) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

async fn set_status(db: &TestDatabase, id: pgq_core::JobId, path: &[&str]) {
    for status in path {
        sqlx::query(
            "UPDATE pgq.jobs SET status = $2, phase = pgq.phase_of($2), worker_id = 'w',
                 claimed_at = now(),
                 lease_expires_at = now() + interval '1 minute' WHERE id = $1",
        )
        .bind(id.get())
        .bind(status)
        .execute(db.pool())
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn a_second_enqueue_of_one_key_returns_the_first_job() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client.enqueue(welcome(1, "a@x")).await.unwrap();
    let second = client.enqueue(welcome(1, "b@x")).await.unwrap();
    assert!(matches!(first, Enqueued::Inserted(_)));
    assert_eq!(second, Enqueued::Duplicate(first.id()));
    assert!(second.is_duplicate());
    let job = client.job(first.id()).await.unwrap().unwrap();
    assert_eq!(job.unique_key.as_deref(), Some("welcome:1"));
    assert_eq!(job.payload["email"], "a@x");
    assert_eq!(count_jobs(&db).await, 1);
}

#[tokio::test]
async fn twenty_concurrent_enqueues_of_one_key_make_one_job() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut calls = Vec::new();
    for n in 0..20 {
        let client = client.clone();
        calls.push(tokio::spawn(async move {
            client.enqueue(welcome(5, &format!("{n}@x"))).await
        }));
    }
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.unwrap().unwrap());
    }
    let inserted: Vec<_> = outcomes.iter().filter(|o| !o.is_duplicate()).collect();
    assert_eq!(inserted.len(), 1, "{outcomes:?}");
    let id = inserted[0].id();
    assert!(outcomes.iter().all(|o| o.id() == id), "{outcomes:?}");
    assert_eq!(count_jobs(&db).await, 1);
}

#[tokio::test]
async fn replace_updates_a_pending_duplicate() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client.enqueue(welcome(1, "old@x")).await.unwrap();
    let options = EnqueueOptions::default()
        .replace()
        .priority(150)
        .delay(Duration::from_secs(60));
    let replaced = client
        .enqueue_with(welcome(1, "new@x"), options)
        .await
        .unwrap();
    assert_eq!(replaced, Enqueued::Replaced(first.id()));
    let job = client.job(first.id()).await.unwrap().unwrap();
    assert_eq!(job.payload["email"], "new@x");
    assert_eq!(job.priority, 150);
    assert!(job.run_at > job.created_at);
    assert_eq!(count_jobs(&db).await, 1);
}

#[tokio::test]
async fn replace_leaves_a_running_duplicate_alone() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client.enqueue(welcome(1, "old@x")).await.unwrap();
    set_status(&db, first.id(), &["claimed", "running"]).await;
    let again = client
        .enqueue_with(welcome(1, "new@x"), EnqueueOptions::default().replace())
        .await
        .unwrap();
    assert_eq!(again, Enqueued::Duplicate(first.id()));
    let job = client.job(first.id()).await.unwrap().unwrap();
    assert_eq!(job.payload["email"], "old@x");
}

/// A replace inside an application's open transaction leaves a held holder's row unlocked: the
/// worker that holds the job can still write to it before that transaction ends.
#[tokio::test]
async fn replace_in_an_open_transaction_does_not_lock_a_held_duplicate() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client.enqueue(welcome(1, "old@x")).await.unwrap();
    set_status(&db, first.id(), &["claimed", "running"]).await;
    let mut tx = db.pool().begin().await.unwrap();
    let again = client
        .enqueue_in_with(
            &mut tx,
            welcome(1, "new@x"),
            EnqueueOptions::default().replace(),
        )
        .await
        .unwrap();
    assert_eq!(again, Enqueued::Duplicate(first.id()));
    sqlx::query("SELECT 1 FROM pgq.jobs WHERE id = $1 FOR UPDATE NOWAIT")
        .bind(first.id().get())
        .execute(db.pool())
        .await
        .expect("the running job's row is not locked by the open transaction");
    // A pending holder is the one the replace changes: that row is locked until the commit.
    let second = client.enqueue(welcome(2, "old@x")).await.unwrap();
    let replaced = client
        .enqueue_in_with(
            &mut tx,
            welcome(2, "new@x"),
            EnqueueOptions::default().replace(),
        )
        .await
        .unwrap();
    assert_eq!(replaced, Enqueued::Replaced(second.id()));
    tx.commit().await.unwrap();
    let job = client.job(second.id()).await.unwrap().unwrap();
    assert_eq!(job.payload["email"], "new@x");
    let job = client.job(first.id()).await.unwrap().unwrap();
    assert_eq!(job.payload["email"], "old@x");
}

/// A replace that meets the first insert of its key, still uncommitted, waits for it and then
/// replaces the job it made: its payload is not lost.
#[tokio::test]
async fn a_replace_racing_the_first_insert_of_its_key_replaces_that_job() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut first = db.pool().begin().await.unwrap();
    let holder = client
        .enqueue_in(&mut first, welcome(1, "first@x"))
        .await
        .unwrap()
        .id();
    let replacing = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .enqueue_with(welcome(1, "second@x"), EnqueueOptions::default().replace())
                .await
        }
    });
    // Its insert waits for the uncommitted key.
    support::eventually(|| async {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(db.pool())
        .await
        .unwrap();
        (waiting > 0).then_some(())
    })
    .await;
    first.commit().await.unwrap();
    let replaced = replacing.await.unwrap().unwrap();
    assert_eq!(replaced, Enqueued::Replaced(holder));
    let job = client.job(holder).await.unwrap().unwrap();
    assert_eq!(job.payload["email"], "second@x");
    assert_eq!(count_jobs(&db).await, 1);
}

#[tokio::test]
async fn a_finished_job_frees_its_key() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client.enqueue(welcome(1, "a@x")).await.unwrap();
    set_status(&db, first.id(), &["claimed", "running", "completed"]).await;
    let second = client.enqueue(welcome(1, "a@x")).await.unwrap();
    assert!(matches!(second, Enqueued::Inserted(id) if id != first.id()));
    assert_eq!(
        client.job(first.id()).await.unwrap().unwrap().status,
        JobStatus::Completed
    );
}

#[tokio::test]
async fn keys_are_unique_per_task() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let a = client.enqueue(welcome(1, "a@x")).await.unwrap();
    let b = client
        .enqueue(OtherWithSameKey { user_id: 1 })
        .await
        .unwrap();
    assert!(!a.is_duplicate() && !b.is_duplicate());
    assert_ne!(a.id(), b.id());
}

#[tokio::test]
async fn enqueue_in_honours_unique_keys() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let first = client.enqueue(welcome(1, "a@x")).await.unwrap();
    let mut tx = db.pool().begin().await.unwrap();
    let again = client.enqueue_in(&mut tx, welcome(1, "b@x")).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(again, Enqueued::Duplicate(first.id()));
}

#[tokio::test]
async fn bulk_after_single_and_transactional_enqueues_of_the_same_task() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(welcome(1, "1@x")).await.unwrap();
    let mut tx = db.pool().begin().await.unwrap();
    client.enqueue_in(&mut tx, welcome(2, "2@x")).await.unwrap();
    tx.commit().await.unwrap();
    let outcomes = client
        .enqueue_many((1..10_003).map(|n| welcome(n, &format!("{n}@x"))))
        .await
        .unwrap();
    assert_eq!(outcomes.iter().filter(|o| o.is_duplicate()).count(), 2);
    assert_eq!(outcomes.len(), 10_002);
}

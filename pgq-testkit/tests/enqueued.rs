//! The typed assertions with options, as a user writes them: against a real database, inside
//! and outside a transaction, and the messages a failing one gives.

use std::time::Duration;

use chrono::{Timelike, Utc};
use pgq_core::{EnqueueOptions, JobStatus, Task};
use pgq_testkit::{
    Expect, TestDatabase, all_enqueued, all_enqueued_in, assert_enqueued_with,
    assert_enqueued_with_in, refute_enqueued_with, refute_enqueued_with_in,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Task)]
#[task(queue = "email", priority = 100)]
struct SendReminder {
    user_id: i64,
}

/// The panic message of an assertion that fails.
async fn failure(assertion: impl Future<Output = ()> + Send + 'static) -> String {
    let panic = tokio::spawn(assertion)
        .await
        .expect_err("the assertion fails")
        .into_panic();
    match panic.downcast::<String>() {
        Ok(message) => *message,
        Err(panic) => panic
            .downcast::<&str>()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    }
}

#[tokio::test]
async fn all_enqueued_returns_the_typed_tasks_with_their_rows() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(SendReminder { user_id: 1 }).await.unwrap();
    client
        .enqueue_with(
            SendReminder { user_id: 2 },
            EnqueueOptions::default().queue("bulk").priority(30),
        )
        .await
        .unwrap();
    let waiting = all_enqueued::<SendReminder>(db.pool()).await;
    let seen: Vec<(i64, &str, i16)> = waiting
        .iter()
        .map(|e| (e.task.user_id, e.job.queue.as_str(), e.job.priority))
        .collect();
    assert_eq!(seen, [(1, "email", 100), (2, "bulk", 30)]);
}

#[tokio::test]
async fn options_narrow_what_matches() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let at = Utc::now() + chrono::Duration::hours(3);
    client
        .enqueue_with(
            SendReminder { user_id: 7 },
            EnqueueOptions::default().run_at(at).tag("tenant", "acme"),
        )
        .await
        .unwrap();
    client
        .enqueue_with(
            SendReminder { user_id: 7 },
            EnqueueOptions::default()
                .delay(Duration::from_secs(24 * 3600))
                .priority(150),
        )
        .await
        .unwrap();
    let pool = db.pool();
    let is_7 = |t: &SendReminder| t.user_id == 7;

    assert_eq!(
        assert_enqueued_with::<SendReminder>(pool, Expect::default().count(2), is_7)
            .await
            .len(),
        2
    );
    assert_enqueued_with::<SendReminder>(pool, Expect::default().scheduled_at(at).count(1), is_7)
        .await;
    assert_enqueued_with::<SendReminder>(
        pool,
        Expect::default()
            .scheduled_between(
                at - chrono::Duration::minutes(1),
                at + chrono::Duration::minutes(1),
            )
            .tag("tenant", "acme")
            .count(1),
        is_7,
    )
    .await;
    assert_enqueued_with::<SendReminder>(
        pool,
        Expect::default()
            .scheduled_within(Duration::from_secs(24 * 3600), Duration::from_secs(60))
            .priority(150)
            .queue("email")
            .count(1),
        is_7,
    )
    .await;
    // Between bounds given to the nanosecond, the first of them the time enqueued: the stored
    // time is cut to its microsecond, and still in.
    let at_ns = at
        .with_nanosecond(at.nanosecond() / 1_000 * 1_000 + 999)
        .unwrap();
    client
        .enqueue_with(
            SendReminder { user_id: 7 },
            EnqueueOptions::default().run_at(at_ns).priority(7),
        )
        .await
        .unwrap();
    assert_enqueued_with::<SendReminder>(
        pool,
        Expect::default()
            .scheduled_between(at_ns, at_ns + chrono::Duration::minutes(1))
            .priority(7)
            .count(1),
        is_7,
    )
    .await;
    refute_enqueued_with::<SendReminder>(pool, Expect::default().queue("bulk"), is_7).await;
    refute_enqueued_with::<SendReminder>(pool, Expect::default().tag("tenant", "globex"), is_7)
        .await;
    refute_enqueued_with::<SendReminder>(pool, Expect::default().status(JobStatus::Failed), is_7)
        .await;
    refute_enqueued_with::<SendReminder>(pool, Expect::default(), |t| t.user_id == 8).await;
}

#[tokio::test]
async fn the_in_forms_see_inside_an_open_transaction() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut tx = db.pool().begin().await.unwrap();
    client
        .enqueue_in(&mut tx, SendReminder { user_id: 3 })
        .await
        .unwrap();
    assert_eq!(all_enqueued_in::<SendReminder>(&mut tx).await.len(), 1);
    assert_enqueued_with_in::<SendReminder>(&mut tx, Expect::default().count(1), |t| {
        t.user_id == 3
    })
    .await;
    // Outside the transaction nothing is there yet.
    assert!(all_enqueued::<SendReminder>(db.pool()).await.is_empty());
    refute_enqueued_with::<SendReminder>(db.pool(), Expect::default(), |_| true).await;
    tx.rollback().await.unwrap();
    let mut conn = db.pool().acquire().await.unwrap();
    refute_enqueued_with_in::<SendReminder>(&mut conn, Expect::default(), |_| true).await;
}

#[tokio::test]
async fn a_failing_assertion_says_what_was_expected_and_lists_what_was_there() {
    let db = TestDatabase::new().await;
    db.client()
        .enqueue_with(
            SendReminder { user_id: 5 },
            EnqueueOptions::default().priority(30),
        )
        .await
        .unwrap();
    let pool = db.pool().clone();
    let message = failure(async move {
        assert_enqueued_with::<SendReminder>(&pool, Expect::default().priority(150), |_| true)
            .await;
    })
    .await;
    assert!(message.contains("priority 150"), "{message}");
    assert!(message.contains("found 0"), "{message}");
    assert!(
        message.contains("priority 30") && message.contains("\"user_id\":5"),
        "{message}"
    );

    let pool = db.pool().clone();
    let message = failure(async move {
        refute_enqueued_with::<SendReminder>(&pool, Expect::default(), |t| t.user_id == 5).await;
    })
    .await;
    assert!(
        message.contains("expected no SendReminder job"),
        "{message}"
    );
    assert!(message.contains("\"user_id\":5"), "{message}");
}

#[tokio::test]
async fn a_refute_fails_on_a_payload_that_does_not_decode() {
    let db = TestDatabase::new().await;
    // An older shape of the task: the predicate cannot tell whether it matches.
    sqlx::query(
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('SendReminder', 'email', '{\"user\": 7}')",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let pool = db.pool().clone();
    let message = failure(async move {
        refute_enqueued_with::<SendReminder>(&pool, Expect::default(), |r| r.user_id == 7).await
    })
    .await;
    assert!(message.contains("does not decode"), "{message}");
    let pool = db.pool().clone();
    let message = failure(async move {
        pgq_testkit::refute_enqueued::<SendReminder>(&pool, |r| r.user_id == 7).await
    })
    .await;
    assert!(message.contains("does not decode"), "{message}");
}

#[test]
fn expectations_no_job_can_meet_fail_where_they_are_made() {
    let panics = |f: fn()| std::panic::catch_unwind(f).is_err();
    assert!(panics(|| {
        let _ = Expect::default().priority(1001);
    }));
    assert!(panics(|| {
        let now = Utc::now();
        let _ = Expect::default().scheduled_between(now, now - chrono::Duration::seconds(1));
    }));
    let unmeetable: [fn() -> Expect; 5] = [
        || Expect::default().queue(""),
        || Expect::default().queue("no spaces"),
        || Expect::default().tag("", "acme"),
        || Expect::default().tag("t".repeat(65), "acme"),
        || Expect::default().tag("tenant", "v".repeat(257)),
    ];
    for expect in unmeetable {
        assert!(std::panic::catch_unwind(expect).is_err());
    }
    let _ = Expect::default().priority(0).priority(1000);
    let _ = Expect::default()
        .queue("email")
        .tag("tenant", "")
        .tag("t".repeat(64), "v".repeat(256));
}

#[tokio::test]
async fn a_count_in_a_refute_fails() {
    let db = TestDatabase::new().await;
    let pool = db.pool().clone();
    let message = failure(async move {
        refute_enqueued_with::<SendReminder>(&pool, Expect::default().count(1), |_| true).await
    })
    .await;
    assert!(message.contains("count"), "{message}");
}

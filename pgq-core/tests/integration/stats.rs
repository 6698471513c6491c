//! Per-queue statistics.

use std::time::Duration;

use pgq_core::{EnqueueOptions, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "stats-a")]
struct CountMe {
    n: u32,
}

#[tokio::test]
async fn stats_count_waiting_jobs_with_lag_and_rates_over_the_window() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let old = chrono::Utc::now() - chrono::Duration::seconds(300);
    client
        .enqueue_with(CountMe { n: 1 }, EnqueueOptions::default().run_at(old))
        .await
        .unwrap();
    client.enqueue(CountMe { n: 2 }).await.unwrap();
    client
        .enqueue_with(
            CountMe { n: 3 },
            EnqueueOptions::default().delay(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let failed = client.enqueue(CountMe { n: 4 }).await.unwrap().id();
    let cancelled = client
        .enqueue_with(CountMe { n: 5 }, EnqueueOptions::default().queue("stats-b"))
        .await
        .unwrap()
        .id();
    client.cancel(cancelled).await.unwrap();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'claimed', phase = 1, attempts = 1, worker_id = 'w',
             claimed_at = now(),
             lease_expires_at = now() WHERE id = $1",
    )
    .bind(failed.get())
    .execute(db.pool())
    .await
    .unwrap();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'failed', phase = 2, completed_at = now(), last_error = 'boom',
             errors = pgq.append_error(errors, 1, 'boom', 10)
         WHERE id = $1",
    )
    .bind(failed.get())
    .execute(db.pool())
    .await
    .unwrap();

    // A completed job finished long ago: outside the window, it counts for no rate.
    let old_done = client.enqueue(CountMe { n: 6 }).await.unwrap().id();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'w',
             claimed_at = now() - interval '1 hour', started_at = now() - interval '1 hour',
             lease_expires_at = now() WHERE id = $1;",
    )
    .bind(old_done.get())
    .execute(db.pool())
    .await
    .unwrap();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'completed', phase = 2,
             completed_at = now() - interval '1 hour' WHERE id = $1",
    )
    .bind(old_done.get())
    .execute(db.pool())
    .await
    .unwrap();

    let stats = client.stats().await.unwrap();
    assert_eq!(stats.len(), 2);
    let a = &stats[0];
    assert_eq!(a.queue, "stats-a");
    assert_eq!((a.due, a.scheduled, a.claimed, a.running), (2, 1, 0, 0));
    let lag = a.oldest_due_age.unwrap();
    assert!(
        lag >= Duration::from_secs(299) && lag < Duration::from_secs(400),
        "{lag:?}"
    );
    // One failure within the 5-minute window: 0.2 a minute; the old completion counts not.
    assert_eq!((a.completed, a.failed, a.cancelled), (0, 1, 0));
    assert_eq!(
        (
            a.completed_per_minute,
            a.failed_per_minute,
            a.cancelled_per_minute
        ),
        (0.0, 0.2, 0.0)
    );
    let b = &stats[1];
    assert_eq!((b.queue.as_str(), b.due), ("stats-b", 0));
    assert_eq!((b.cancelled, b.cancelled_per_minute), (1, 0.2));
    assert_eq!(b.oldest_due_age, None);
}

#[tokio::test]
async fn stats_of_held_jobs_and_of_a_queue_with_only_finished_jobs() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let claimed = client.enqueue(CountMe { n: 1 }).await.unwrap().id();
    let running = client.enqueue(CountMe { n: 2 }).await.unwrap().id();
    let done = client
        .enqueue_with(
            CountMe { n: 3 },
            EnqueueOptions::default().queue("stats-done"),
        )
        .await
        .unwrap()
        .id();
    sqlx::query(
        "UPDATE pgq.jobs SET status = CASE WHEN id = $1 THEN 'claimed' ELSE 'running' END,
             phase = 1, attempts = 1, worker_id = 'w', claimed_at = now(), started_at = now(),
             lease_expires_at = now() + interval '1 minute'
         WHERE id = ANY($2)",
    )
    .bind(claimed.get())
    .bind(vec![claimed.get(), running.get(), done.get()])
    .execute(db.pool())
    .await
    .unwrap();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'completed', phase = 2, completed_at = now() WHERE id = $1",
    )
    .bind(done.get())
    .execute(db.pool())
    .await
    .unwrap();
    let stats = client.stats().await.unwrap();
    let names: Vec<&str> = stats.iter().map(|s| s.queue.as_str()).collect();
    assert_eq!(names, ["stats-a", "stats-done"]);
    assert_eq!(
        (stats[0].claimed, stats[0].running, stats[0].due),
        (1, 1, 0)
    );
    assert_eq!((stats[1].due, stats[1].completed_per_minute), (0, 0.2));
}

/// Moves job `id` to `status` (completed or failed), finished a second into the minute
/// `minutes_ago` minutes before `base`.
async fn finish(
    pool: &sqlx::PgPool,
    base: chrono::DateTime<chrono::Utc>,
    id: pgq_core::JobId,
    status: &str,
    minutes_ago: i32,
) {
    let at = base - chrono::Duration::minutes(minutes_ago.into()) + chrono::Duration::seconds(1);
    finish_at(pool, id, status, at).await;
}

/// Moves job `id` to `status` (completed or failed), finished `at`.
async fn finish_at(
    pool: &sqlx::PgPool,
    id: pgq_core::JobId,
    status: &str,
    at: chrono::DateTime<chrono::Utc>,
) {
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'w',
             claimed_at = now(), started_at = now(), lease_expires_at = now() WHERE id = $1",
    )
    .bind(id.get())
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE pgq.jobs SET status = $2, phase = 2, completed_at = $3 WHERE id = $1")
        .bind(id.get())
        .bind(status)
        .bind(at)
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn finished_history_counts_each_queue_s_jobs_per_minute_over_the_last_hour() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut plan = Vec::new();
    // (queue, status, minutes ago): two in one minute, a failure, another queue, and one
    // finished too long ago to count.
    for (queue, status, ago) in [
        ("stats-a", "completed", 2),
        ("stats-a", "completed", 2),
        ("stats-a", "failed", 2),
        ("stats-a", "completed", 30),
        ("stats-b", "completed", 0),
        ("stats-a", "completed", 90),
    ] {
        let id = client
            .enqueue_with(CountMe { n: 0 }, EnqueueOptions::default().queue(queue))
            .await
            .unwrap()
            .id();
        plan.push((id, status, ago));
    }
    // Minutes are counted from this one, so that a minute turning during the test moves none.
    let base: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT date_trunc('minute', now())")
            .fetch_one(db.pool())
            .await
            .unwrap();
    for (id, status, ago) in plan {
        finish(db.pool(), base, id, status, ago).await;
    }

    let history = client.finished_history().await.unwrap();
    let seen: Vec<(String, i64, u64, u64)> = history
        .minutes
        .iter()
        .map(|m| {
            (
                m.queue.clone(),
                (base - m.minute).num_minutes(),
                m.completed,
                m.failed,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("stats-a".to_owned(), 30, 1, 0),
            ("stats-a".to_owned(), 2, 2, 1),
            ("stats-b".to_owned(), 0, 1, 0),
        ]
    );
}

/// The history is the sixty whole minutes up to the current one: a job finished just under an
/// hour ago, in the minute before those, is in none of them (a chart of sixty bars would drop
/// it, and its totals with it).
#[tokio::test]
async fn finished_history_holds_exactly_the_last_sixty_minutes() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(CountMe { n: 0 }).await.unwrap().id();
    let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(db.pool())
        .await
        .unwrap();
    let at = now - chrono::Duration::milliseconds(3_599_500);
    finish_at(db.pool(), id, "completed", at).await;
    let history = client.finished_history().await.unwrap();
    for minute in &history.minutes {
        let back = (history.now - minute.minute).num_minutes();
        assert!(
            (0..i64::from(pgq_core::FINISHED_HISTORY_MINUTES)).contains(&back),
            "a minute {back} minutes back: {history:?}"
        );
    }
}

/// Queue names sort by their bytes, as `Client::queues` sorts them, whatever the database's
/// collation: here one that puts `a` before `B`.
#[tokio::test]
async fn stats_order_queues_by_name_whatever_the_collation() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql(
        "ALTER TABLE pgq.jobs ALTER COLUMN queue SET DATA TYPE pgq.queue_name COLLATE \"en-x-icu\"",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let client = db.client();
    for queue in ["b", "a", "B", "A"] {
        client
            .enqueue_with(CountMe { n: 1 }, EnqueueOptions::default().queue(queue))
            .await
            .unwrap();
    }
    let stats: Vec<String> = client
        .stats()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.queue)
        .collect();
    assert_eq!(stats, ["A", "B", "a", "b"]);
    let queues: Vec<String> = client
        .queues()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(queues, stats);
}

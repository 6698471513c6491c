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
async fn stats_count_by_status_with_lag_and_recent_failures() {
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

    let stats = client.stats().await.unwrap();
    assert_eq!(stats.len(), 2);
    let a = &stats[0];
    assert_eq!(a.queue, "stats-a");
    assert_eq!(
        (
            a.due,
            a.scheduled,
            a.claimed,
            a.running,
            a.completed,
            a.failed,
            a.cancelled
        ),
        (2, 1, 0, 0, 0, 1, 0)
    );
    let lag = a.oldest_due_age.unwrap();
    assert!(
        lag >= Duration::from_secs(299) && lag < Duration::from_secs(400),
        "{lag:?}"
    );
    assert_eq!((a.failed_last_hour, a.errors_last_hour), (1, 1));
    let b = &stats[1];
    assert_eq!((b.queue.as_str(), b.cancelled, b.due), ("stats-b", 1, 0));
    assert_eq!(b.oldest_due_age, None);
}

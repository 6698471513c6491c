//! Retention: old finished jobs are deleted in batches, by one process at a time.

use std::time::Duration;

use pgq_core::{Client, Retention};
use pgq_testkit::TestDatabase;
use sqlx::PgPool;

/// Inserts `n` jobs with `status`, finished `age` ago unless pending.
async fn jobs(db: &TestDatabase, n: i64, status: &str, age: &str) {
    let ids: Vec<i64> = sqlx::query_scalar(
        "INSERT INTO pgq.jobs (task, queue, payload)
         SELECT 'Old', 'retention', '{}' FROM generate_series(1, $1) RETURNING id",
    )
    .bind(n)
    .fetch_all(db.pool())
    .await
    .unwrap();
    if status == "pending" {
        return;
    }
    // Along allowed transitions: claimed, running, then the final status.
    for (step, status) in [
        ("claimed", "claimed"),
        ("running", "running"),
        ("end", status),
    ] {
        sqlx::query(
            "UPDATE pgq.jobs SET status = $2, phase = pgq.phase_of($2), attempts = 1,
                 worker_id = 'w', claimed_at = now(),
                 lease_expires_at = now(),
                 completed_at = CASE WHEN $3 THEN now() - $4::interval END
             WHERE id = ANY($1)",
        )
        .bind(&ids)
        .bind(status)
        .bind(step == "end")
        .bind(if age.is_empty() { "0" } else { age })
        .execute(db.pool())
        .await
        .unwrap();
    }
}

async fn count(db: &TestDatabase) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

/// Waits until a worker's cleaner has left `rows` jobs, for half of its one-minute interval at
/// most: what is deleted by then was not left for the interval.
async fn cleaned_down_to(db: &TestDatabase, rows: i64, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = count(db).await;
        if left <= rows {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: still there, {left} rows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn finished_jobs_past_retention_are_deleted_and_the_rest_kept() {
    let db = TestDatabase::new().await;
    jobs(&db, 2500, "completed", "2 days").await; // deleted, in three batches
    jobs(&db, 3, "completed", "1 hour").await;
    jobs(&db, 4, "failed", "2 days").await;
    jobs(&db, 5, "failed", "8 days").await; // deleted
    jobs(&db, 6, "cancelled", "8 days").await; // deleted
    jobs(&db, 7, "pending", "").await;
    let deleted = db
        .client()
        .delete_finished(Retention::default())
        .await
        .unwrap();
    assert_eq!(deleted, Some(2511));
    assert_eq!(count(&db).await, 3 + 4 + 7);

    let tighter = Retention {
        completed: Duration::from_secs(60),
        failed: Duration::from_secs(3600),
    };
    assert_eq!(db.client().delete_finished(tighter).await.unwrap(), Some(7));
}

/// A retention as long as `Duration::MAX` keeps those jobs for good and cleans the rest: it
/// once failed the whole statement ("interval out of range"), so nothing was ever cleaned.
#[tokio::test]
async fn a_retention_kept_for_good_still_cleans_the_other_status() {
    let db = TestDatabase::new().await;
    jobs(&db, 2, "completed", "2 days").await;
    jobs(&db, 3, "failed", "200 years").await;
    let forever = Retention {
        completed: Duration::MAX,
        failed: Duration::MAX,
    };
    assert_eq!(db.client().delete_finished(forever).await.unwrap(), Some(0));
    assert_eq!(count(&db).await, 5);
    let failures_forever = Retention {
        completed: Duration::from_secs(3600),
        failed: Duration::MAX,
    };
    assert_eq!(
        db.client().delete_finished(failures_forever).await.unwrap(),
        Some(2)
    );
    assert_eq!(count(&db).await, 3);
}

#[tokio::test]
async fn one_process_cleans_at_a_time() {
    let db = TestDatabase::new().await;
    jobs(&db, 3000, "completed", "2 days").await;

    // Another process holds the cleaning lock: this one skips.
    let mut other = db.pool().acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock(x'7067715f636c6561'::bigint)")
        .execute(&mut *other)
        .await
        .unwrap();
    let client = Client::new(PgPool::connect_with(db.connect_options()).await.unwrap());
    assert_eq!(
        client.delete_finished(Retention::default()).await.unwrap(),
        None
    );
    sqlx::query("SELECT pg_advisory_unlock(x'7067715f636c6561'::bigint)")
        .execute(&mut *other)
        .await
        .unwrap();

    // Two processes at once: together they delete each row once.
    let cleaners: Vec<_> = (0..2)
        .map(|_| {
            let options = db.connect_options();
            tokio::spawn(async move {
                let pool = PgPool::connect_with(options).await.unwrap();
                Client::new(pool)
                    .delete_finished(Retention::default())
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut total = 0;
    for cleaner in cleaners {
        total += cleaner.await.unwrap().unwrap_or(0);
    }
    assert_eq!(total, 3000);
    assert_eq!(count(&db).await, 0);
}

#[tokio::test]
async fn a_workers_cleaner_works_through_a_backlog_without_waiting_its_interval() {
    let db = TestDatabase::new().await;
    jobs(&db, 3500, "completed", "2 days").await; // four batches
    jobs(&db, 2, "completed", "1 hour").await;
    let handle = pgq_core::Worker::builder(db.client())
        .queue("retention", 1)
        .build()
        .unwrap()
        .start();
    // The cleaner's interval is a minute: only paced batches, one after another, finish this
    // well within it.
    cleaned_down_to(&db, 2, "the backlog").await;
    handle.shutdown().await.unwrap();
    assert_eq!(count(&db).await, 2, "jobs within retention are kept");
}

#[tokio::test]
async fn a_workers_cleaner_comes_back_when_the_oldest_finished_job_falls_due() {
    let db = TestDatabase::new().await;
    jobs(&db, 3, "completed", "").await;
    let handle = pgq_core::Worker::builder(db.client())
        .queue("retention", 1)
        .retention(Retention {
            completed: Duration::from_secs(2),
            ..Retention::default()
        })
        .build()
        .unwrap()
        .start();
    // The first pass, at start, finds nothing due; the jobs fall due two seconds later, and the
    // cleaner's interval is a minute: only a pass at their due time deletes them in time.
    cleaned_down_to(&db, 0, "the jobs past retention").await;
    handle.shutdown().await.unwrap();
}

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgq_core::{EnqueueOptions, Enqueued, Error, JobStatus, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgListener;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "email", priority = 150, max_attempts = 5)]
struct SendReceipt {
    order_id: i64,
    email: String,
}

#[derive(Debug, Serialize, Deserialize, Task)]
struct Blob {
    data: String,
}

#[derive(Debug, Serialize, Deserialize, Task)]
struct Unserializable {
    by_pair: HashMap<(i32, i32), i32>,
}

fn receipt(order_id: i64) -> SendReceipt {
    SendReceipt {
        order_id,
        email: format!("{order_id}@example.com"),
    }
}

async fn count_jobs(db: &TestDatabase) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

async fn next_notification(listener: &mut PgListener) -> String {
    tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("no notification within 5 s")
        .unwrap()
        .payload()
        .to_owned()
}

#[tokio::test]
async fn a_task_is_stored_with_its_settings() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let enqueued = client.enqueue(receipt(7)).await.unwrap();
    assert!(matches!(enqueued, Enqueued::Inserted(_)));
    let job = client.job(enqueued.id()).await.unwrap().unwrap();
    assert_eq!(job.id, enqueued.id());
    assert_eq!(job.task, "SendReceipt");
    assert_eq!(job.queue, "email");
    assert_eq!(job.priority, 150);
    assert_eq!(job.max_attempts, 5);
    assert_eq!(job.status, JobStatus::Pending);
    assert_eq!(job.attempts, 0);
    assert_eq!(job.progress, 0);
    assert_eq!(job.unique_key, None);
    assert_eq!(job.last_error, None);
    assert!(job.errors.is_empty());
    // Due at once: run_at is the inserting statement's clock, created_at its transaction's.
    let after_created = job.run_at - job.created_at;
    assert!(
        after_created >= chrono::Duration::zero() && after_created < chrono::Duration::seconds(1),
        "{after_created:?}"
    );
    assert_eq!(
        job.payload,
        serde_json::json!({"order_id": 7, "email": "7@example.com"})
    );
}

#[tokio::test]
async fn defaults_apply_without_attributes() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client
        .enqueue(Blob { data: "x".into() })
        .await
        .unwrap()
        .id();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(
        (job.queue.as_str(), job.priority, job.max_attempts),
        ("default", 100, 20)
    );
}

#[tokio::test]
async fn options_override_the_task_settings() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let options = EnqueueOptions::default()
        .delay(Duration::from_secs(90))
        .priority(30)
        .max_attempts(2)
        .queue("backfill");
    let id = client.enqueue_with(receipt(1), options).await.unwrap().id();
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.priority, 30);
    assert_eq!(job.max_attempts, 2);
    assert_eq!(job.queue, "backfill");
    // run_at is computed by the database clock in the inserting statement.
    let delay = job.run_at - job.created_at;
    assert!(
        delay >= chrono::Duration::seconds(90) && delay < chrono::Duration::seconds(91),
        "{delay:?}"
    );
}

#[tokio::test]
async fn an_absolute_run_at_is_stored_as_given() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let at: DateTime<Utc> = "2030-01-02T03:04:05Z".parse().unwrap();
    let options = EnqueueOptions::default().run_at(at);
    let id = client.enqueue_with(receipt(1), options).await.unwrap().id();
    assert_eq!(client.job(id).await.unwrap().unwrap().run_at, at);
}

#[tokio::test]
async fn out_of_range_options_are_typed_errors() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let cases = [
        (EnqueueOptions::default().priority(1001), "priority"),
        (EnqueueOptions::default().priority(-1), "priority"),
        (EnqueueOptions::default().max_attempts(0), "max_attempts"),
        (
            EnqueueOptions::default().delay(pgq_core::limits::MAX_DELAY + Duration::from_secs(1)),
            "delay",
        ),
        (
            EnqueueOptions::default()
                .delay(Duration::from_secs(1))
                .run_at(Utc::now()),
            "run_at",
        ),
    ];
    for (options, expected) in cases {
        let err = client.enqueue_with(receipt(1), options).await.unwrap_err();
        match err {
            Error::InvalidOption { task, option, .. } => {
                assert_eq!((task, option), ("SendReceipt", expected))
            }
            other => panic!("expected InvalidOption for {expected}, got {other}"),
        }
    }
    assert_eq!(count_jobs(&db).await, 0);
}

#[tokio::test]
async fn hostile_queue_names_are_refused_with_a_typed_error() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let long = "q".repeat(200);
    let names = [
        "email'; DROP TABLE pgq.jobs; --",
        "a\"b",
        "semi;colon",
        long.as_str(),
        "emoji\u{1F4E7}",
        "",
        "new\nline",
    ];
    for name in names {
        let err = client
            .enqueue_with(receipt(1), EnqueueOptions::default().queue(name))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidQueue { .. }),
            "{name:?}: {err:?}"
        );
        assert!(err.to_string().starts_with("invalid queue name"), "{err}");
    }
    assert_eq!(count_jobs(&db).await, 0);
}

#[tokio::test]
async fn a_payload_over_the_limit_is_refused_naming_task_and_size() {
    let db = TestDatabase::new().await;
    let big = Blob {
        data: "x".repeat(300 * 1024),
    };
    let err = db.client().enqueue(big).await.unwrap_err();
    match &err {
        Error::PayloadTooLarge { task, size, limit } => {
            assert_eq!(*task, "Blob");
            assert_eq!(*size, 300 * 1024 + r#"{"data":""}"#.len());
            assert_eq!(*limit, 256 * 1024);
        }
        other => panic!("expected PayloadTooLarge, got {other}"),
    }
    assert!(
        err.to_string().contains("\"Blob\" is 307211 bytes"),
        "{err}"
    );

    let client = db.client().with_max_payload_bytes(16);
    let err = client
        .enqueue(Blob {
            data: "0123456789".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { limit: 16, .. }));
    assert_eq!(count_jobs(&db).await, 0);
}

#[tokio::test]
async fn a_task_that_cannot_be_serialized_is_a_typed_error() {
    let db = TestDatabase::new().await;
    let task = Unserializable {
        by_pair: HashMap::from([((1, 2), 3)]),
    };
    let err = db.client().enqueue(task).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Serialize {
                task: "Unserializable",
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn enqueue_in_commits_with_the_callers_transaction() {
    let db = TestDatabase::new().await;
    let client = db.client();
    sqlx::raw_sql("CREATE TABLE orders (id bigint PRIMARY KEY)")
        .execute(db.pool())
        .await
        .unwrap();
    let mut tx = db.pool().begin().await.unwrap();
    sqlx::query("INSERT INTO orders VALUES (1)")
        .execute(&mut *tx)
        .await
        .unwrap();
    let id = client.enqueue_in(&mut tx, receipt(1)).await.unwrap().id();
    assert!(
        client.job(id).await.unwrap().is_none(),
        "visible before commit"
    );
    tx.commit().await.unwrap();
    assert_eq!(
        client.job(id).await.unwrap().unwrap().status,
        JobStatus::Pending
    );
}

#[tokio::test]
async fn enqueue_in_rolls_back_with_the_callers_transaction() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut tx = db.pool().begin().await.unwrap();
    let id = client.enqueue_in(&mut tx, receipt(1)).await.unwrap().id();
    tx.rollback().await.unwrap();
    assert!(client.job(id).await.unwrap().is_none());
    assert_eq!(count_jobs(&db).await, 0);
}

#[tokio::test]
async fn enqueue_notifies_with_the_queue_name() {
    let db = TestDatabase::new().await;
    let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
    listener.listen("pgq_insert").await.unwrap();
    db.client().enqueue(receipt(1)).await.unwrap();
    assert_eq!(next_notification(&mut listener).await, "email");
}

#[tokio::test]
async fn enqueue_in_notifies_at_commit_and_delayed_jobs_do_not_notify() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
    listener.listen("pgq_insert").await.unwrap();

    let mut tx = db.pool().begin().await.unwrap();
    client.enqueue_in(&mut tx, receipt(1)).await.unwrap();
    client
        .enqueue_with(
            receipt(2),
            EnqueueOptions::default().delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    // Notifications arrive in commit order: the marker proves nothing came before it.
    sqlx::query("SELECT pg_notify('pgq_insert', 'marker')")
        .execute(db.pool())
        .await
        .unwrap();
    assert_eq!(next_notification(&mut listener).await, "marker");
    tx.commit().await.unwrap();
    assert_eq!(next_notification(&mut listener).await, "email");
}

#[tokio::test]
async fn a_missing_job_is_none() {
    let db = TestDatabase::new().await;
    assert!(db.client().job(42.into()).await.unwrap().is_none());
}

/// Enqueues keep a pool connection between calls only while the pool has others to give.
#[tokio::test]
async fn an_enqueue_never_keeps_the_last_connection_of_a_pool() {
    let db = TestDatabase::new().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = pgq_core::Client::new(pool.clone());
    for order_id in 0..3 {
        client.enqueue(receipt(order_id)).await.unwrap();
        // Back at once, checked by the pool; a kept one would come back after 100 ms idle.
        let conn = tokio::time::timeout(Duration::from_millis(50), pool.acquire()).await;
        assert!(conn.is_ok(), "the pool's one connection was kept");
    }
}

#[tokio::test]
async fn a_kept_connection_goes_back_when_idle_and_when_the_pool_closes() {
    let db = TestDatabase::new().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = pgq_core::Client::new(pool.clone());
    client.enqueue(receipt(1)).await.unwrap();
    // Kept: of two connections, only one is left to take.
    let first = pool.acquire().await.unwrap();
    let idle = tokio::time::timeout(Duration::from_secs(5), pool.acquire()).await;
    assert!(
        idle.is_ok(),
        "the kept connection did not go back when idle"
    );
    drop((first, idle));

    client.enqueue(receipt(2)).await.unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), pool.close()).await;
    assert!(closed.is_ok(), "the pool could not close");
    assert_eq!(count_jobs(&db).await, 2);
}

#[tokio::test]
async fn a_failed_enqueue_leaves_a_working_connection_for_the_next() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client.enqueue(receipt(1)).await.unwrap();
    // The kept connection's session dies under it: that enqueue fails, the next one works.
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let mut failures = 0;
    let mut id = None;
    for order_id in 2..6 {
        match client.enqueue(receipt(order_id)).await {
            Ok(enqueued) => {
                id = Some(enqueued.id());
                break;
            }
            Err(_) => failures += 1,
        }
    }
    assert!(id.is_some(), "no enqueue worked after {failures} failures");
    assert!(client.job(id.unwrap()).await.unwrap().is_some());
}

/// A delay counts from the enqueue statement, not from the start of the transaction it runs in.
#[tokio::test]
async fn a_delay_inside_a_long_transaction_counts_from_the_statement() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut tx = client.pool().begin().await.unwrap();
    let began: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    // The transaction stays open a while, as one doing other work would.
    sqlx::query("SELECT pg_sleep(1.5)")
        .execute(&mut *tx)
        .await
        .unwrap();
    let delayed = EnqueueOptions::default().delay(Duration::from_secs(2));
    let id = client
        .enqueue_in_with(&mut tx, receipt(1), delayed)
        .await
        .unwrap()
        .id();
    tx.commit().await.unwrap();
    let job = client.job(id).await.unwrap().unwrap();
    let after_begin = job.run_at - began;
    assert!(
        after_begin >= chrono::Duration::milliseconds(3500),
        "due {after_begin:?} after the transaction began: the delay counted from its start"
    );
}

/// Waits are stored in whole milliseconds: a part of one rounds up, never down to "now".
#[tokio::test]
async fn a_delay_shorter_than_a_millisecond_is_never_shortened() {
    let db = TestDatabase::new().await;
    let client = db.client();
    for (delay, stored) in [(900, 1), (1_900, 2), (2_000, 2)] {
        let options = EnqueueOptions::default().delay(Duration::from_micros(delay));
        let id = client
            .enqueue_with(receipt(delay as i64), options)
            .await
            .unwrap()
            .id();
        let job = client.job(id).await.unwrap().unwrap();
        // `run_at` counts from the statement's clock, a little after `created_at`.
        let due_after = job.run_at - job.created_at;
        assert!(
            due_after >= chrono::Duration::milliseconds(stored),
            "a delay of {delay} µs is due {due_after:?} after the enqueue"
        );
    }
}

#[tokio::test]
async fn a_zero_statement_timeout_means_none_and_a_wakeup_window_of_any_length_enqueues() {
    let db = TestDatabase::new().await;
    // Before, a zero limit failed calls at random with `Unresponsive(0ns)`.
    let unbounded = db.client().with_statement_timeout(Duration::ZERO);
    for order_id in 0..3 {
        unbounded.enqueue(receipt(order_id)).await.unwrap();
    }
    assert_eq!(unbounded.stats().await.unwrap()[0].due, 3);
    // Before, the enqueue that deferred its notification to the window's end panicked: the end
    // of a window of `Duration::MAX` is no time a clock holds.
    let quiet = db.client().with_wakeup_window(Duration::MAX);
    for order_id in 3..6 {
        quiet.enqueue(receipt(order_id)).await.unwrap();
    }
    assert_eq!(quiet.stats().await.unwrap()[0].due, 6);
}

#[tokio::test]
async fn a_call_that_finds_no_free_connection_in_time_is_unresponsive_and_says_so() {
    let db = TestDatabase::new().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client =
        pgq_core::Client::new(pool.clone()).with_statement_timeout(Duration::from_millis(300));
    let held = pool.acquire().await.unwrap();
    let err = client.stats().await.unwrap_err();
    assert!(matches!(err, Error::Unresponsive(_)), "{err:?}");
    assert!(err.to_string().contains("no connection free"), "{err}");
    drop(held);
    client.stats().await.unwrap();
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "serializable", unique_key = "account:{account}")]
struct Recount {
    account: u32,
    n: u32,
}

#[tokio::test]
async fn conflicting_enqueues_at_the_serializable_level_are_run_again() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE \"{}\" SET default_transaction_isolation = 'serializable'",
        db.name()
    )))
    .execute(db.pool())
    .await
    .unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = pgq_core::Client::new(pool);
    // Each failure means another of them committed: four meeting on a key need four tries at
    // most, and pgq makes five.
    for round in 0..10 {
        let replaces = (0..4).map(|n| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .enqueue_with(
                        Recount { account: round, n },
                        EnqueueOptions::default().replace(),
                    )
                    .await
            })
        });
        for replaced in futures_util::future::join_all(replaces).await {
            replaced.unwrap().unwrap();
        }
    }
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(jobs, 10, "one job a key");
}

/// A client whose enqueue kept a connection, dropped outside any runtime once its runtime has
/// ended (a client kept past `main`'s runtime), closes that connection instead of panicking.
#[test]
fn a_client_dropped_after_its_runtime_ended_does_not_panic() {
    let setup = tokio::runtime::Runtime::new().unwrap();
    let db = setup.block_on(TestDatabase::new());
    let application = tokio::runtime::Runtime::new().unwrap();
    let client = application.block_on(async {
        // A pool that keeps a connection open: sqlx spawns a task even to let one go.
        let pool = sqlx::postgres::PgPoolOptions::new()
            .min_connections(1)
            .connect_with(db.connect_options())
            .await
            .unwrap();
        let client = pgq_core::Client::new(pool);
        client
            .enqueue(SendReceipt {
                order_id: 1,
                email: "a@example.com".into(),
            })
            .await
            .unwrap();
        client
    });
    drop(application);
    drop(client);
    drop(db);
}

/// Written by hand, so that no derive checks its name.
#[derive(Debug, Serialize, Deserialize)]
struct Unnamed;

impl Task for Unnamed {
    const NAME: &'static str = "";
}

#[derive(Debug, Serialize, Deserialize)]
struct LongNamed;

impl Task for LongNamed {
    const NAME: &'static str = "a-task-name-longer-than-the-column-takes-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
}

#[tokio::test]
async fn a_hand_written_task_name_the_column_cannot_take_is_a_typed_error() {
    let db = TestDatabase::new().await;
    let client = db.client();
    assert!(LongNamed::NAME.len() > pgq_core::limits::MAX_TASK_NAME_LEN);
    for result in [
        client.enqueue(Unnamed).await,
        client.enqueue(LongNamed).await,
    ] {
        assert!(
            matches!(result, Err(Error::InvalidOption { option: "name", .. })),
            "{result:?}"
        );
    }
    assert!(matches!(
        client.enqueue_many([Unnamed]).await,
        Err(Error::InvalidOption { option: "name", .. })
    ));
}

/// An application's trigger that skips inserts into the jobs table: an enqueue reports an
/// error that says so, and never panics.
#[tokio::test]
async fn a_trigger_that_skips_the_insert_is_an_error_not_a_panic() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql(
        "CREATE FUNCTION public.skip_odd() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF (NEW.payload->>'order_id')::int % 2 = 1 THEN RETURN NULL; END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER skip_odd BEFORE INSERT ON pgq.jobs
             FOR EACH ROW EXECUTE FUNCTION public.skip_odd();",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let client = db.client();
    let skipped = client.enqueue(receipt(1)).await;
    assert!(
        matches!(&skipped, Err(Error::Database(err)) if err.to_string().contains("skipped 1 of 1")),
        "{skipped:?}"
    );
    let batch = client.enqueue_many((1..=4).map(receipt)).await;
    assert!(
        matches!(&batch, Err(Error::Database(err)) if err.to_string().contains("skipped 2 of 4")),
        "{batch:?}"
    );
    assert!(matches!(
        client.enqueue(receipt(2)).await.unwrap(),
        Enqueued::Inserted(_)
    ));
}

use std::time::Duration;

use chrono::{DateTime, Utc};
use pgq_core::{
    EnqueueOptions, Enqueued, Error, Handler, JobContext, JobOutcome, Task, TaskError, Worker,
    WorkerEvent, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgListener;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "bulk")]
struct Index {
    document: i64,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(unique_key = "sync:{account}")]
struct Sync {
    account: String,
}

/// A task with a handler, for the worker that a committed batch wakes.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "shipping")]
struct PackParcel {
    item: i64,
}

#[async_trait]
impl Handler for PackParcel {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

fn sync(account: &str) -> Sync {
    Sync {
        account: account.into(),
    }
}

#[tokio::test]
async fn ten_thousand_tasks_go_in_one_statement() {
    let db = TestDatabase::new().await;
    let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
    listener.listen("pgq_insert").await.unwrap();

    let outcomes = db
        .client()
        .enqueue_many((0..10_000).map(|document| Index { document }))
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 10_000);
    assert!(outcomes.iter().all(|o| matches!(o, Enqueued::Inserted(_))));
    let ids: Vec<i64> = outcomes.iter().map(|o| o.id().get()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids follow input order"
    );

    // One transaction wrote every row, and each row holds its own input.
    let (transactions, rows, mismatched): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(DISTINCT xmin::text), count(*),
                count(*) FILTER (WHERE (payload->>'document')::bigint <> id - $1)
         FROM pgq.jobs",
    )
    .bind(ids[0])
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!((transactions, rows, mismatched), (1, 10_000, 0));

    let notification = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(notification.payload(), "bulk");
}

#[tokio::test]
async fn duplicates_inside_a_batch_and_against_active_jobs_are_found() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let existing = client.enqueue(sync("c")).await.unwrap().id();
    let outcomes = client
        .enqueue_many([sync("a"), sync("b"), sync("a"), sync("c"), sync("d")])
        .await
        .unwrap();
    let Enqueued::Inserted(a) = outcomes[0] else {
        panic!("{outcomes:?}")
    };
    assert!(matches!(outcomes[1], Enqueued::Inserted(_)));
    assert_eq!(outcomes[2], Enqueued::Duplicate(a));
    assert_eq!(outcomes[3], Enqueued::Duplicate(existing));
    assert!(matches!(outcomes[4], Enqueued::Inserted(_)));
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(rows, 4);
}

#[tokio::test]
async fn an_empty_batch_does_nothing() {
    let db = TestDatabase::new().await;
    let outcomes = db.client().enqueue_many(Vec::<Index>::new()).await.unwrap();
    assert!(outcomes.is_empty());
}

#[tokio::test]
async fn one_oversized_task_refuses_the_whole_batch() {
    let db = TestDatabase::new().await;
    let client = db.client().with_max_payload_bytes(20);
    let err = client
        .enqueue_many([sync("a"), sync(&"x".repeat(50))])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PayloadTooLarge { task: "Sync", .. }));
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn a_keyed_batch_without_any_duplicate_inserts_every_task() {
    let db = TestDatabase::new().await;
    // Keys out of their byte order: the ids (which decide the claim order among a batch's
    // jobs, all due at once) follow the input, as an unkeyed batch's do.
    let outcomes = db
        .client()
        .enqueue_many([sync("c"), sync("a"), sync("b"), sync("10"), sync("2")])
        .await
        .unwrap();
    assert!(
        outcomes.iter().all(|o| matches!(o, Enqueued::Inserted(_))),
        "{outcomes:?}"
    );
    let ids: Vec<i64> = outcomes.iter().map(|o| o.id().get()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids follow input order: {ids:?}"
    );
}

#[tokio::test]
async fn ten_thousand_tasks_with_unique_keys_go_in_together() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let existing = client.enqueue(sync("account-7")).await.unwrap().id();
    let outcomes = client
        .enqueue_many((0..10_000).map(|n| sync(&format!("account-{n}"))))
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 10_000);
    assert_eq!(outcomes[7], Enqueued::Duplicate(existing));
    let inserted = outcomes.iter().filter(|o| !o.is_duplicate()).count();
    assert_eq!(inserted, 9_999);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(rows, 10_000);
}

/// `(queue, priority, max_attempts, run_at in the future, run_at)` of every job, by id.
async fn settings(db: &TestDatabase) -> Vec<(String, i16, i32, bool, DateTime<Utc>)> {
    sqlx::query_as(
        "SELECT queue::text, priority::int2, max_attempts::int4, run_at > now(), run_at
         FROM pgq.jobs ORDER BY id",
    )
    .fetch_all(db.pool())
    .await
    .unwrap()
}

async fn count(db: &TestDatabase) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn options_apply_to_every_task_of_the_batch() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
    listener.listen("pgq_insert").await.unwrap();

    let options = EnqueueOptions::default()
        .queue("urgent")
        .priority(150)
        .max_attempts(3);
    let outcomes = client
        .enqueue_many_with((0..3).map(|document| Index { document }), options)
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 3);
    let rows = settings(&db).await;
    assert_eq!(rows.len(), 3);
    for (queue, priority, max_attempts, later, _) in &rows {
        assert_eq!(
            (queue.as_str(), *priority, *max_attempts, *later),
            ("urgent", 150, 3, false)
        );
    }
    // Due now, so the batch woke the queue it went to, not the task's own.
    let notification = tokio::time::timeout(support::LIMIT, listener.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(notification.payload(), "urgent");

    let delayed = EnqueueOptions::default().delay(Duration::from_secs(3600));
    client
        .enqueue_many_with([Index { document: 10 }, Index { document: 11 }], delayed)
        .await
        .unwrap();
    let at: DateTime<Utc> = "2099-01-02T03:04:05Z".parse().unwrap();
    client
        .enqueue_many_with([sync("a"), sync("b")], EnqueueOptions::default().run_at(at))
        .await
        .unwrap();
    let rows = settings(&db).await;
    for (queue, priority, max_attempts, later, _) in &rows[3..5] {
        assert_eq!(
            (queue.as_str(), *priority, *max_attempts, *later),
            ("bulk", 100, 20, true)
        );
    }
    assert!(rows[3].4 > Utc::now() + chrono::Duration::minutes(59));
    assert_eq!(rows[5].4, at);
    assert_eq!(rows[6].4, at);
    // Neither later batch was due, so neither notified.
    assert_eq!(
        support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await,
        0
    );
}

#[tokio::test]
async fn a_batch_refuses_replace_and_bad_options_before_writing() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let err = client
        .enqueue_many_with([sync("a")], EnqueueOptions::default().replace())
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            Error::InvalidOption {
                task: "Sync",
                option: "replace",
                ..
            }
        ),
        "{err}"
    );
    let err = client
        .enqueue_many_with([sync("b")], EnqueueOptions::default().priority(5000))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "priority",
                ..
            }
        ),
        "{err}"
    );
    let mut tx = client.pool().begin().await.unwrap();
    let err = client
        .enqueue_many_in_with(&mut tx, [sync("c")], EnqueueOptions::default().replace())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidOption {
                option: "replace",
                ..
            }
        ),
        "{err}"
    );
    tx.commit().await.unwrap();
    assert_eq!(count(&db).await, 0);
}

#[tokio::test]
async fn a_rolled_back_batch_leaves_no_job_and_wakes_no_one() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
    listener.listen("pgq_insert").await.unwrap();

    let mut tx = client.pool().begin().await.unwrap();
    let outcomes = client
        .enqueue_many_in(&mut tx, [sync("a"), sync("b"), sync("a")])
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 3);
    let inside: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(inside, 2, "the transaction sees its own jobs");
    tx.rollback().await.unwrap();

    assert_eq!(count(&db).await, 0);
    assert_eq!(
        support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await,
        0
    );
}

#[tokio::test]
async fn a_committed_batch_inserts_and_wakes_an_idle_worker_at_the_commit() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
    listener.listen("pgq_insert").await.unwrap();
    // Polling once an hour: only the notification can start these jobs.
    let worker = Worker::builder(client.clone())
        .queue("shipping", 4)
        .poll_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::ListenerConnected)).await;

    let mut tx = client.pool().begin().await.unwrap();
    let options = EnqueueOptions::default().priority(120);
    let outcomes = client
        .enqueue_many_in_with(&mut tx, (1..=3).map(|item| PackParcel { item }), options)
        .await
        .unwrap();
    let ids: Vec<_> = outcomes.iter().map(|o| o.id()).collect();
    assert_eq!(count(&db).await, 0, "invisible before the commit");
    assert_eq!(
        support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await,
        0,
        "no notification before the commit"
    );
    tx.commit().await.unwrap();

    let notification = tokio::time::timeout(support::LIMIT, listener.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(notification.payload(), "shipping");
    let outcomes = support::all_finished(&mut events, &ids).await;
    assert!(
        outcomes.values().all(|o| *o == JobOutcome::Completed),
        "{outcomes:?}"
    );
    let priorities: Vec<i16> = sqlx::query_scalar("SELECT priority::int2 FROM pgq.jobs")
        .fetch_all(db.pool())
        .await
        .unwrap();
    assert_eq!(priorities, vec![120; 3]);
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn unique_keys_in_a_transaction_see_its_own_enqueues() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let outside = client.enqueue(sync("held")).await.unwrap().id();

    let mut tx = client.pool().begin().await.unwrap();
    let earlier = client.enqueue_in(&mut tx, sync("a")).await.unwrap().id();
    let outcomes = client
        .enqueue_many_in(&mut tx, [sync("a"), sync("b"), sync("held"), sync("b")])
        .await
        .unwrap();
    assert_eq!(outcomes[0], Enqueued::Duplicate(earlier));
    let Enqueued::Inserted(b) = outcomes[1] else {
        panic!("{outcomes:?}")
    };
    assert_eq!(outcomes[2], Enqueued::Duplicate(outside));
    assert_eq!(outcomes[3], Enqueued::Duplicate(b));
    tx.commit().await.unwrap();

    let keys: Vec<String> = sqlx::query_scalar("SELECT unique_key FROM pgq.jobs ORDER BY id")
        .fetch_all(db.pool())
        .await
        .unwrap();
    assert_eq!(keys, ["sync:held", "sync:a", "sync:b"]);
}

/// Batches whose unique keys overlap, inserted at once in different orders, wait for each other
/// in the unique index instead of deadlocking there.
#[tokio::test]
async fn concurrent_batches_with_overlapping_keys_never_deadlock() {
    let db = TestDatabase::new().await;
    let deadlocks = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_one(db.pool())
        .await
        .unwrap()
    };
    let before = deadlocks().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(8)
        .test_before_acquire(false)
        .connect_with(db.connect_options().application_name("overlapping-batches"))
        .await
        .unwrap();
    let mut batches = Vec::new();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(4));
    for client in 0..4u64 {
        let client_handle = pgq_core::Client::new(pool.clone());
        let barrier = barrier.clone();
        batches.push(tokio::spawn(async move {
            for round in 0..30u64 {
                // The same 300 new keys for every client, each in an order of its own, sent at
                // once.
                let mut keys: Vec<u64> = (0..300).collect();
                keys.sort_by_key(|k| (k * (client + 3) * 7919 + round * 104_729) % 1009);
                let tasks = keys.into_iter().map(|k| Sync {
                    account: format!("r{round}k{k}"),
                });
                barrier.wait().await;
                client_handle.enqueue_many(tasks).await?;
            }
            Ok::<_, pgq_core::Error>(())
        }));
    }
    for batch in batches {
        tokio::time::timeout(support::LIMIT, batch)
            .await
            .expect("the batches finish")
            .unwrap()
            .expect("no batch fails");
    }
    // Backends report their statistics when they end: close them, and wait until they have.
    pool.close().await;
    support::eventually(|| async {
        let others: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'overlapping-batches'",
        )
        .fetch_one(db.pool())
        .await
        .unwrap();
        (others == 0).then_some(())
    })
    .await;
    assert_eq!(deadlocks().await, before, "the database detected deadlocks");
}

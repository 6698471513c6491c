use std::time::Duration;

use pgq_core::{Enqueued, Error, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgListener;

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
    let outcomes = db
        .client()
        .enqueue_many([sync("a"), sync("b"), sync("c")])
        .await
        .unwrap();
    assert!(
        outcomes.iter().all(|o| matches!(o, Enqueued::Inserted(_))),
        "{outcomes:?}"
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

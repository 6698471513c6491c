//! Tags on jobs: kept in the job's `meta` under `"tags"`, found by containment through an
//! index; bad tags are refused with a typed error before anything is written.

use pgq_core::{EnqueueOptions, Error, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "tagged")]
struct Export {
    account_id: i64,
}

#[tokio::test]
async fn tags_are_kept_in_meta_and_found_by_containment() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let acme = client
        .enqueue_with(
            Export { account_id: 1 },
            EnqueueOptions::default()
                .tag("tenant", "acme")
                .tag("by", "ops"),
        )
        .await
        .unwrap()
        .id();
    let batch = client
        .enqueue_many_with(
            [Export { account_id: 2 }, Export { account_id: 3 }],
            EnqueueOptions::default().tag("tenant", "globex"),
        )
        .await
        .unwrap();
    let plain = client.enqueue(Export { account_id: 4 }).await.unwrap().id();

    let job = client.job(acme).await.unwrap().unwrap();
    let meta = job.meta.unwrap();
    assert_eq!(meta["tags"]["tenant"], "acme");
    assert_eq!(meta["tags"]["by"], "ops");
    assert_eq!(
        client.job(plain).await.unwrap().unwrap().meta,
        None,
        "no tags, no meta"
    );

    let globex: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM pgq.jobs WHERE meta @> '{\"tags\": {\"tenant\": \"globex\"}}' ORDER BY id",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    let expected: Vec<i64> = batch.iter().map(|e| e.id().get()).collect();
    assert_eq!(globex, expected);
}

#[tokio::test]
async fn bad_tags_are_refused_before_anything_is_written() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let too_many = (0..17).fold(EnqueueOptions::default(), |options, n| {
        options.tag(format!("t{n}"), "x")
    });
    let cases = [
        EnqueueOptions::default().tag("", "empty name"),
        EnqueueOptions::default().tag("n".repeat(65), "long name"),
        EnqueueOptions::default().tag("long", "v".repeat(257)),
        EnqueueOptions::default().tag("bell", "\u{7}"),
        too_many,
    ];
    for options in cases {
        let refused = client
            .enqueue_with(Export { account_id: 1 }, options.clone())
            .await;
        assert!(
            matches!(refused, Err(Error::InvalidOption { option: "tags", .. })),
            "{options:?}: {refused:?}"
        );
        let batch = client
            .enqueue_many_with([Export { account_id: 1 }], options)
            .await;
        assert!(matches!(
            batch,
            Err(Error::InvalidOption { option: "tags", .. })
        ));
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(count, 0);
}

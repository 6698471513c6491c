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

/// The bound on a job's tags is the database's: jsonb's text, which puts a space after every
/// `:` and `,`. Tags that fit it to the byte are stored; one byte more is refused before the
/// database, as every other bad tag is.
#[tokio::test]
async fn tags_at_the_size_bound_are_stored_and_one_byte_more_is_refused() {
    let db = TestDatabase::new().await;
    let client = db.client();
    // `{"tags": {` and `}}`, 13 entries of a 64-byte name, and the `: ` and `, ` between them
    // take 946 bytes; the values take the rest of the 4 096.
    let tags = |last: usize| {
        (0..13).fold(EnqueueOptions::default(), |options, n| {
            let len = if n == 12 { last } else { 242 };
            options.tag(format!("{n:0>64}"), "v".repeat(len))
        })
    };
    let stored = client
        .enqueue_with(Export { account_id: 1 }, tags(246))
        .await
        .expect("tags of exactly the bound are stored");
    let text_len: i32 =
        sqlx::query_scalar("SELECT octet_length(meta::text) FROM pgq.jobs WHERE id = $1")
            .bind(stored.id().get())
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(text_len, 4096);
    for refused in [
        client
            .enqueue_with(Export { account_id: 1 }, tags(247))
            .await,
        client
            .enqueue_many_with([Export { account_id: 1 }], tags(247))
            .await
            .map(|mut outcomes| outcomes.remove(0)),
    ] {
        assert!(
            matches!(refused, Err(Error::InvalidOption { option: "tags", .. })),
            "{refused:?}"
        );
    }
}

//! `build()` refuses bad configuration with typed errors.

use std::time::Duration;

use pgq_core::{Error, Worker};
use pgq_testkit::TestDatabase;

fn reason(result: Result<Worker, Error>) -> String {
    match result {
        Err(Error::InvalidWorker(reason)) => reason,
        Err(other) => panic!("expected InvalidWorker, got {other}"),
        Ok(_) => panic!("expected an error"),
    }
}

#[tokio::test]
async fn bad_configurations_are_refused() {
    let db = TestDatabase::new().await;
    let client = db.client();
    assert_eq!(
        reason(Worker::builder(client.clone()).build()),
        "no queues configured"
    );
    assert_eq!(
        reason(Worker::builder(client.clone()).queue("email", 0).build()),
        r#"queue "email" has concurrency 0"#
    );
    assert_eq!(
        reason(
            Worker::builder(client.clone())
                .queue("email", 1)
                .queue("email", 2)
                .build()
        ),
        r#"queue "email" is configured twice"#
    );
    assert_eq!(
        reason(
            Worker::builder(client.clone())
                .queue("email", 1)
                .batch_size(0)
                .build()
        ),
        "batch size 0"
    );
    assert_eq!(
        reason(
            Worker::builder(client.clone())
                .queue("email", 1)
                .poll_interval(Duration::ZERO)
                .build()
        ),
        "poll interval 0"
    );
    for lease in [Duration::from_millis(500), Duration::from_secs(25 * 3600)] {
        let reason = reason(
            Worker::builder(client.clone())
                .queue("email", 1)
                .lease(lease)
                .build(),
        );
        assert!(reason.ends_with("is outside 1 s..=24 h"), "{reason}");
    }
    let err = Worker::builder(client.clone())
        .queue("bad'queue", 1)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidQueue { .. }), "{err}");
    assert!(Worker::builder(client).queue("email", 1).build().is_ok());
}

//! [`drain`]: run every due job of a queue inline, through the real handlers.

use pgq_core::{Client, DrainedJob, WorkerBuilder};

/// Runs every due job of `queue` through its handler, one at a time, until none is due, and
/// returns what each attempt did. Jobs that retry at once run again within the same drain;
/// make delayed ones due first with [`TestDatabase::advance`](crate::TestDatabase::advance).
///
/// ```no_run
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// let drained = pgq_testkit::drain(&db.client(), "email").await;
/// assert!(drained.iter().all(|job| job.outcome == pgq_core::JobOutcome::Completed));
/// # }
/// ```
pub async fn drain(client: &Client, queue: &str) -> Vec<DrainedJob> {
    drain_with(pgq_core::Worker::builder(client.clone()).queue(queue, 1)).await
}

/// [`drain`] with a worker builder of your own: several queues, or handler state.
///
/// ```no_run
/// # struct Billing { review_above_cents: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// let builder = pgq_core::Worker::builder(db.client())
///     .queue("billing", 1)
///     .queue("email", 1)
///     .state(Billing { review_above_cents: 100_000 });
/// let drained = pgq_testkit::drain_with(builder).await;
/// # }
/// ```
pub async fn drain_with(builder: WorkerBuilder) -> Vec<DrainedJob> {
    builder
        .build()
        .unwrap_or_else(|err| panic!("cannot build the draining worker: {err}"))
        .drain()
        .await
        .unwrap_or_else(|err| panic!("drain failed: {err}"))
}

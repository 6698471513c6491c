//! Test helpers for pgq users, and for pgq itself.
//!
//! - [`TestContext`]: run a handler with no database and read the progress, events and tasks it
//!   recorded.
//! - [`TestDatabase`]: an isolated, migrated database per test, dropped afterwards, with
//!   [`advance`](TestDatabase::advance) to move time forward for jobs.
//! - [`assert_enqueued`] / [`refute_enqueued`]: typed checks on pending jobs;
//!   [`assert_enqueued_with`] / [`refute_enqueued_with`] with an [`Expect`] (queue, priority,
//!   status, schedule, tags, count), and [`all_enqueued`] for the typed tasks with their rows —
//!   each also `_in` a transaction.
//! - [`drain`]: run due jobs inline through the real handlers; [`Drain`] with options
//!   (scheduled jobs too, panics that fail the test, a bound).
//! - [`TestContext::perform`]: run a handler from a payload in its stored form.
//! - [`test`]: `#[pgq_testkit::test]`, an async test handed a migrated database of its own.
//! - [`ScheduleClock`]: periodic tasks on the test's clock, a tick at a time.
//! - [`Inline`]: a client whose enqueues run their jobs at once (the inline testing mode);
//!   [`manual`], the default, leaves them for a drain.
//!
//! See `docs/testing.md` in the repository for a guide.

mod assert;
mod context;
mod database;
mod drain;
mod enqueued;
mod expect;
mod inline;
mod schedule_clock;
mod sweep;
mod test_runner;

pub use assert::{assert_enqueued, refute_enqueued};
pub use context::{CancelSwitch, TestContext};
pub use database::{DEFAULT_DATABASE_URL, TestDatabase};
pub use drain::{Drain, drain, drain_with};
pub use enqueued::{
    EnqueuedJob, all_enqueued, all_enqueued_in, assert_enqueued_with, assert_enqueued_with_in,
    refute_enqueued_with, refute_enqueued_with_in,
};
pub use expect::Expect;
pub use inline::{Inline, MAX_INLINE_DEPTH, manual};
pub use schedule_clock::{ScheduleClock, Tick};

/// An async test that receives a migrated database of its own, dropped when the test ends:
/// its one argument is a [`TestDatabase`] or a [`Client`](pgq_core::Client) on one. It runs on
/// a multi-threaded runtime, so a worker can run beside the test; no `#[tokio::test]` is needed.
///
/// ```no_run
/// use pgq_testkit::TestDatabase;
///
/// #[pgq_testkit::test]
/// async fn counts_jobs(db: TestDatabase) {
///     let stats = db.client().stats().await.unwrap();
///     assert!(stats.is_empty());
/// }
///
/// #[pgq_testkit::test]
/// async fn with_a_client(client: pgq_core::Client) -> pgq_core::Result<()> {
///     assert!(client.queues().await?.is_empty());
///     Ok(())
/// }
/// # fn main() {}
/// ```
pub use pgq_macros::test;

/// What `#[pgq_testkit::test]` expands to; not for use in your code.
#[doc(hidden)]
pub mod __private {
    pub use crate::test_runner::{TestArgument, run_test};
}

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
//!
//! See `docs/testing.md` in the repository for a guide.

mod assert;
mod context;
mod database;
mod drain;
mod enqueued;
mod expect;

pub use assert::{assert_enqueued, refute_enqueued};
pub use context::{CancelSwitch, TestContext};
pub use database::{DEFAULT_DATABASE_URL, TestDatabase};
pub use drain::{Drain, drain, drain_with};
pub use enqueued::{
    EnqueuedJob, all_enqueued, all_enqueued_in, assert_enqueued_with, assert_enqueued_with_in,
    refute_enqueued_with, refute_enqueued_with_in,
};
pub use expect::Expect;

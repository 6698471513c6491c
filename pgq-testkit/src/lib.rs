//! Test helpers for pgq users, and for pgq itself.
//!
//! - [`TestContext`]: run a handler with no database and read the progress, events and tasks it
//!   recorded.
//! - [`TestDatabase`]: an isolated, migrated database per test, dropped afterwards, with
//!   [`advance`](TestDatabase::advance) to move time forward for jobs.
//! - [`assert_enqueued`] / [`refute_enqueued`]: typed checks on pending jobs.
//! - [`drain`]: run due jobs inline through the real handlers.
//!
//! See `docs/testing.md` in the repository for a guide.

mod assert;
mod context;
mod database;
mod drain;

pub use assert::{assert_enqueued, refute_enqueued};
pub use context::{CancelSwitch, TestContext};
pub use database::{DEFAULT_DATABASE_URL, TestDatabase};
pub use drain::{drain, drain_with};

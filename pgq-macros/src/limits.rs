//! The limits `#[derive(Task)]` checks at compile time: copies of `pgq_core::limits`, which a
//! proc-macro crate cannot import. pgq-core's `tests/limits.rs` pins each one to the original.

pub(crate) const MIN_PRIORITY: i16 = 0;
pub(crate) const MAX_PRIORITY: i16 = 1000;
pub(crate) const MAX_MAX_ATTEMPTS: i32 = 1000;
pub(crate) const MAX_CONCURRENCY: u32 = 1000;
pub(crate) const MAX_QUEUE_LEN: usize = 64;
pub(crate) const MAX_TASK_NAME_LEN: usize = 128;
pub(crate) const MIN_LEASE_MILLIS: u64 = 1_000;
pub(crate) const MAX_LEASE_MILLIS: u64 = 86_400_000;
pub(crate) const MAX_TIMEOUT_MILLIS: u64 = 86_400_000;

//! The store: every SQL statement pgq runs lives below this module, with values always bound.

pub(crate) mod attempt;
pub(crate) mod control;
pub(crate) mod enqueue;
pub(crate) mod job;
pub(crate) mod lease;
pub(crate) mod maintenance;
pub(crate) mod progress;
pub(crate) mod schema;
pub(crate) mod testing;
pub(crate) mod tick;

/// The channel enqueues notify, with the queue name as payload, so idle workers wake up.
pub(crate) const INSERT_CHANNEL: &str = "pgq_insert";

//! The admin API: what operators and their tools (the `pgq` CLI) do to a running system. Find
//! jobs by filters, a page at a time; act on them in fenced, bounded batches; pause and resume
//! queues and limit their concurrency; see each queue, the live workers and the periodic schedules.

pub(crate) mod action;
mod actions;
pub(crate) mod cursor;
pub(crate) mod filter;
pub(crate) mod fleet;
pub(crate) mod migration_state;
pub(crate) mod page;
mod pause;
mod queue_limit;
pub(crate) mod schedules;
mod search;
pub(crate) mod selection;

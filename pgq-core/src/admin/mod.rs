//! The admin API: what operators and their tools (the `pgq` CLI) do to a running system. Find
//! jobs by filters, a page at a time; act on them in fenced, bounded batches; pause and resume
//! queues; see each queue and the live workers.

pub(crate) mod action;
mod actions;
pub(crate) mod cursor;
pub(crate) mod filter;
pub(crate) mod fleet;
pub(crate) mod migration_state;
pub(crate) mod page;
mod pause;
mod search;
pub(crate) mod selection;

//! The admin API: what operators and their tools do to a running system. Pause and resume
//! queues; see each queue and the live workers.

pub(crate) mod fleet;
mod pause;

//! One module per page, and the actions the pages post to.

pub(crate) mod action;
pub(crate) mod job;
pub(crate) mod jobs;
pub(crate) mod live;
pub(crate) mod queues;
pub(crate) mod schedules;
pub(crate) mod workers;

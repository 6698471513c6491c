//! One module per page, the actions the pages post to, and the pages for addresses and methods
//! the dashboard does not have.

pub(crate) mod action;
pub(crate) mod fallback;
pub(crate) mod job;
pub(crate) mod jobs;
pub(crate) mod live;
pub(crate) mod queues;
pub(crate) mod schedules;
pub(crate) mod workers;

//! Background upkeep every worker process runs: rescuing jobs whose lease ran out, and
//! deleting old finished jobs.

pub(crate) mod cleaner;
pub(crate) mod rescuer;

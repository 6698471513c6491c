//! [`JobSelection`]: the jobs an action is for, by id or by filter.

use crate::admin::filter::JobFilter;
use crate::job_id::JobId;

/// The jobs an action (retry, cancel, delete, run now, priority) is for: listed ids, or every
/// job a filter matches. Made with `into()` from ids or a [`JobFilter`].
///
/// ```no_run
/// # use pgq_core::{JobFilter, JobId, JobStatus};
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// client.retry_jobs([JobId::from(17), JobId::from(18)], 0).await?;
/// client.retry_jobs(JobFilter::new().task("SendWelcome").error_contains("smtp"), 3).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum JobSelection {
    /// These jobs.
    Ids(Vec<JobId>),
    /// Every job the filter matches; its order, cursor and limit are ignored.
    Filter(Box<JobFilter>),
}

impl From<JobFilter> for JobSelection {
    fn from(filter: JobFilter) -> Self {
        JobSelection::Filter(Box::new(filter))
    }
}

impl From<Vec<JobId>> for JobSelection {
    fn from(ids: Vec<JobId>) -> Self {
        JobSelection::Ids(ids)
    }
}

impl From<&[JobId]> for JobSelection {
    fn from(ids: &[JobId]) -> Self {
        JobSelection::Ids(ids.to_vec())
    }
}

impl<const N: usize> From<[JobId; N]> for JobSelection {
    fn from(ids: [JobId; N]) -> Self {
        JobSelection::Ids(ids.to_vec())
    }
}

impl From<JobId> for JobSelection {
    fn from(id: JobId) -> Self {
        JobSelection::Ids(vec![id])
    }
}

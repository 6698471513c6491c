//! [`ActionReport`]: what an action changed, and what it left alone and why.

use std::fmt;

use crate::job::JobStatus;
use crate::job_id::JobId;

/// Why an action left a job alone.
///
/// ```
/// use pgq_core::{JobStatus, SkipReason};
/// assert_eq!(SkipReason::State(JobStatus::Completed).to_string(), "it is completed");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The job's status does not allow the action; this is the status it was in.
    State(JobStatus),
    /// No job has this id.
    NotFound,
    /// Retrying it would give its unique key a second active job.
    UniqueKeyHeld,
    /// Listed by a filter, the job no longer matched it when the action came to it (a worker
    /// claimed it, a replace changed its tags); this is the status it was in. Reported by tools
    /// that list jobs before acting on them, as `pgq jobs` does.
    LeftFilter(JobStatus),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::State(status) => write!(f, "it is {status}"),
            SkipReason::NotFound => f.write_str("no such job"),
            SkipReason::UniqueKeyHeld => f.write_str("another active job holds its unique key"),
            SkipReason::LeftFilter(status) => {
                write!(f, "it no longer matches the filter (it is {status})")
            }
        }
    }
}

/// What an action did, job by job, each list by id: every job it was given is in exactly one.
///
/// ```no_run
/// # use pgq_core::{JobFilter, JobStatus};
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let report = client.cancel_jobs(JobFilter::new().queue("email").status(JobStatus::Pending)).await?;
/// println!("cancelled {}, asked {} running to stop", report.changed.len(), report.requested.len());
/// for (id, reason) in &report.skipped {
///     println!("job {id} left alone: {reason}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActionReport {
    /// The jobs the action changed.
    pub changed: Vec<JobId>,
    /// Cancelling only: the claimed or running jobs whose handlers were asked to stop; each
    /// ends `cancelled` when its handler returns.
    pub requested: Vec<JobId>,
    /// The jobs left alone, each with why.
    pub skipped: Vec<(JobId, SkipReason)>,
}

impl ActionReport {
    /// Adds another batch's report.
    pub(crate) fn extend(&mut self, other: ActionReport) {
        self.changed.extend(other.changed);
        self.requested.extend(other.requested);
        self.skipped.extend(other.skipped);
    }

    pub(crate) fn sort(&mut self) {
        self.changed.sort();
        self.requested.sort();
        self.skipped.sort_by_key(|(id, _)| *id);
    }
}

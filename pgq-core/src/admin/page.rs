//! [`JobPage`] and [`JobCount`]: what a search returns.

use crate::admin::cursor::JobCursor;
use crate::job::Job;

/// One page of a search, as [`Client::jobs`](crate::Client::jobs) returns it.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let mut filter = pgq_core::JobFilter::new().queue("email");
/// loop {
///     let page = client.jobs(&filter).await?;
///     for job in &page.jobs {
///         println!("{} {} {}", job.id, job.task, job.status);
///     }
///     match page.next {
///         Some(next) => filter = filter.after(next),
///         None => break,
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobPage {
    /// The jobs found, in the filter's order.
    pub jobs: Vec<Job>,
    /// Where the next page starts, or `None` when the search has seen every job it could
    /// match. A page with fewer jobs than the limit may still have a next one: a search through
    /// the finished history looks at a window of ids a page.
    pub next: Option<JobCursor>,
}

/// How many jobs a filter matches, as [`Client::count_jobs`](crate::Client::count_jobs)
/// returns it: counted up to a cap, over the ids a count may look at.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let count = client.count_jobs(&pgq_core::JobFilter::new().task("SendWelcome")).await?;
/// println!("{}{} jobs", count.count, if count.exact { "" } else { " or more" });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobCount {
    /// The jobs counted.
    pub count: u64,
    /// Whether that is all of them: false when more jobs than the cap match, or when older
    /// jobs lay beyond the ids it looked at.
    pub exact: bool,
}

//! Finding jobs: [`Client::jobs`] a page at a time, and [`Client::count_jobs`].

use crate::admin::filter::JobFilter;
use crate::admin::page::{JobCount, JobPage};
use crate::client::Client;
use crate::error::Result;
use crate::store::{run, search};

impl Client {
    /// One page of the jobs `filter` matches, in its order, and the cursor of the next page.
    ///
    /// Pages are keyed on ids (keyset pagination), so jobs enqueued or changed while you page
    /// never make a job appear twice; in [`JobOrder::RunAt`](crate::JobOrder::RunAt) order the
    /// key is `(run_at, id)`, and a job whose `run_at` moves while you page (a retry's backoff,
    /// a replace, a run-now) may show up again further on, or be passed over. Every search reads an index or a bounded range: one
    /// limited to active statuses (pending, claimed, running) reads only the indexes of active
    /// jobs; one that may match finished jobs walks the history a window of
    /// [`SEARCH_WINDOW`](crate::limits::SEARCH_WINDOW) ids at a time, so a page may hold fewer
    /// jobs than the limit, even none, and still have a next one. Follow `next` until it is
    /// `None` to see every match. An invalid filter is an
    /// [`Error::InvalidFilter`](crate::Error::InvalidFilter), before anything reaches the
    /// database.
    ///
    /// ```no_run
    /// # use pgq_core::{JobFilter, JobStatus};
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let page = client.jobs(&JobFilter::new().status(JobStatus::Failed).limit(20)).await?;
    /// for job in &page.jobs {
    ///     println!("{} {}: {:?}", job.id, job.task, job.last_error);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn jobs(&self, filter: &JobFilter) -> Result<JobPage> {
        filter.validate()?;
        let store = self.store();
        run!(store, |conn| search::page(store, conn, filter))
    }

    /// How many jobs `filter` matches, counted up to [`MAX_COUNT`](crate::limits::MAX_COUNT)
    /// over the ids its first page would look at (from its cursor, if it has one); the result
    /// says whether that is all of them.
    ///
    /// ```no_run
    /// # use pgq_core::{JobFilter, JobStatus};
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let pending = client.count_jobs(&JobFilter::new().queue("email").status(JobStatus::Pending)).await?;
    /// println!("{} pending{}", pending.count, if pending.exact { "" } else { " at least" });
    /// # Ok(()) }
    /// ```
    pub async fn count_jobs(&self, filter: &JobFilter) -> Result<JobCount> {
        filter.validate()?;
        let store = self.store();
        run!(store, |conn| search::count(store, conn, filter))
    }
}

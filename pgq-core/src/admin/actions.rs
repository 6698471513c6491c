//! Acting on many jobs at once: retry, cancel, delete, run now, change priority. Each runs in
//! batches of [`ACTION_BATCH`](crate::limits::ACTION_BATCH) jobs a statement, fenced on the
//! status each job is in, and reports what it changed and what it skipped and why.

use crate::admin::action::ActionReport;
use crate::admin::filter::{JobFilter, JobOrder};
use crate::admin::selection::JobSelection;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::limits;
use crate::store::bulk::{self, Action};
use crate::store::{run, search};

impl Client {
    /// Runs failed or cancelled jobs again: back to `pending`, due now, with at least
    /// `attempts_left` attempts left (at least one; `max_attempts` grows if needed, up to
    /// 1000). Jobs in another status, and jobs whose unique key another active job holds now,
    /// are skipped. By filter, only its failed and cancelled jobs are considered.
    ///
    /// ```no_run
    /// # use pgq_core::{JobFilter, JobStatus};
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // The mail provider is back: everything that failed on it, with three more tries each.
    /// let filter = JobFilter::new().queue("email").status(JobStatus::Failed).error_contains("smtp");
    /// let report = client.retry_jobs(filter, 3).await?;
    /// println!("{} retried, {} skipped", report.changed.len(), report.skipped.len());
    /// # Ok(()) }
    /// ```
    pub async fn retry_jobs(
        &self,
        jobs: impl Into<JobSelection>,
        attempts_left: u32,
    ) -> Result<ActionReport> {
        let attempts_left = i32::try_from(attempts_left)
            .unwrap_or(i32::MAX)
            .min(limits::MAX_MAX_ATTEMPTS);
        self.act(jobs.into(), Action::Retry { attempts_left }).await
    }

    /// Cancels jobs: pending ones at once (`changed`); claimed and running ones by firing their
    /// handlers' `ctx.cancelled()` (`requested`; each ends `cancelled` when its handler
    /// returns). Finished jobs are skipped. By filter, only its active jobs are considered.
    ///
    /// ```no_run
    /// # use pgq_core::JobFilter;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let report = client.cancel_jobs(JobFilter::new().tag("tenant", "acme")).await?;
    /// println!("{} cancelled, {} asked to stop", report.changed.len(), report.requested.len());
    /// # Ok(()) }
    /// ```
    pub async fn cancel_jobs(&self, jobs: impl Into<JobSelection>) -> Result<ActionReport> {
        self.act(jobs.into(), Action::Cancel).await
    }

    /// Deletes finished jobs (completed, failed, cancelled); others are skipped unless `force`,
    /// which deletes any job — a running job's handler is then told to stop, and what it
    /// writes later changes nothing. By filter, only the jobs `force` allows are considered.
    ///
    /// ```no_run
    /// # use pgq_core::{JobFilter, JobStatus};
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let report = client.delete_jobs(JobFilter::new().task("OldTask").status(JobStatus::Failed), false).await?;
    /// println!("deleted {}", report.changed.len());
    /// # Ok(()) }
    /// ```
    pub async fn delete_jobs(
        &self,
        jobs: impl Into<JobSelection>,
        force: bool,
    ) -> Result<ActionReport> {
        self.act(jobs.into(), Action::Delete { force }).await
    }

    /// Makes pending jobs due now (a job already due keeps its place); workers are woken.
    /// Jobs in other statuses are skipped.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
    /// let report = client.run_jobs_now(id).await?;
    /// if let Some((_, reason)) = report.skipped.first() {
    ///     println!("job {id} cannot run now: {reason}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn run_jobs_now(&self, jobs: impl Into<JobSelection>) -> Result<ActionReport> {
        self.act(jobs.into(), Action::RunNow).await
    }

    /// Gives pending jobs another priority (0 to 1000; higher runs first); jobs in other
    /// statuses are skipped. A priority out of range is an
    /// [`Error::InvalidFilter`](crate::Error::InvalidFilter).
    ///
    /// ```no_run
    /// # use pgq_core::{JobFilter, JobStatus};
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // This customer is waiting: their jobs first.
    /// client.set_jobs_priority(JobFilter::new().status(JobStatus::Pending).tag("tenant", "acme"), 900).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_jobs_priority(
        &self,
        jobs: impl Into<JobSelection>,
        priority: i16,
    ) -> Result<ActionReport> {
        if !(limits::MIN_PRIORITY..=limits::MAX_PRIORITY).contains(&priority) {
            return Err(Error::InvalidFilter(format!(
                "priority {priority} is outside {} to {}",
                limits::MIN_PRIORITY,
                limits::MAX_PRIORITY
            )));
        }
        self.act(jobs.into(), Action::Priority(priority)).await
    }

    /// Applies `action` batch by batch: listed ids in order, or a filter's matches (only those
    /// in statuses the action can change) page by page, newest first.
    async fn act(&self, jobs: JobSelection, action: Action) -> Result<ActionReport> {
        let store = self.store();
        let mut report = ActionReport::default();
        match jobs {
            JobSelection::Ids(ids) => {
                let mut ids: Vec<i64> = ids.into_iter().map(i64::from).collect();
                ids.sort_unstable();
                ids.dedup();
                for batch in ids.chunks(limits::ACTION_BATCH) {
                    report.extend(bulk::apply(store, action, batch, None).await?);
                }
            }
            JobSelection::Filter(filter) => {
                let filter = JobFilter {
                    order: JobOrder::Newest,
                    after: None,
                    limit: limits::ACTION_BATCH,
                    ..*filter
                };
                filter.validate()?;
                let Some(mut filter) = filter.within(action.statuses()) else {
                    return Ok(report);
                };
                loop {
                    let (ids, next) = run!(store, |conn| search::ids(store, conn, &filter))?;
                    if !ids.is_empty() {
                        report.extend(
                            bulk::apply(store, action, &ids, Some(&filter.statuses)).await?,
                        );
                    }
                    match next {
                        Some(next) => filter.after = Some(next),
                        None => break,
                    }
                }
            }
        }
        report.sort();
        Ok(report)
    }
}

//! [`ScheduleInfo`]: each periodic schedule as operators see it — what it runs and when, when it
//! last enqueued, when it runs next, and which worker leads it now.

use chrono::{DateTime, Utc};

use crate::client::Client;
use crate::error::Result;
use crate::job_id::JobId;
use crate::schedule::{Cadence, Missed};
use crate::store;

/// One periodic schedule, as [`Client::schedules`] reports it.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// for schedule in client.schedules().await? {
///     println!(
///         "{} ({} in {}): last {:?}, next {:?}, led by {:?}",
///         schedule.name, schedule.cron, schedule.time_zone,
///         schedule.last_run, schedule.next_run, schedule.leader,
///     );
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScheduleInfo {
    /// The schedule's name: its task's name unless it was given one.
    pub name: String,
    /// The task it enqueues.
    pub task: String,
    /// Its cron expression.
    pub cron: String,
    /// The time zone the expression is read in (an IANA name).
    pub time_zone: String,
    /// What it does with instants missed while no worker ran; `None` for a value this
    /// version does not know.
    pub missed: Option<Missed>,
    /// The last instant it handled: a job was enqueued for it, or none because the task's unique
    /// key was still held by an earlier job.
    pub last_run: Option<DateTime<Utc>>,
    /// The last job it enqueued: for [`last_run`](Self::last_run), or for an earlier instant
    /// when that one found its unique key held.
    pub last_job: Option<JobId>,
    /// Its next instant after now and after every instant already handled; `None` when the
    /// expression has no more instants (or the row holds one this version cannot read).
    pub next_run: Option<DateTime<Utc>>,
    /// The worker that leads it now; `None` while no live worker runs it.
    pub leader: Option<String>,
}

impl Client {
    /// Every schedule the workers have run (`pgq.schedules`), by name, with its last and next
    /// instant and its live leader. A schedule no worker declares any more stays listed, with
    /// no leader, until its row is deleted.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let unled: Vec<_> = client.schedules().await?.into_iter().filter(|s| s.leader.is_none()).collect();
    /// # Ok(()) }
    /// ```
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        let rows = store::schedules::list(self.store()).await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let next_run = Cadence::parse(&row.cron, &row.time_zone)
                    .ok()
                    .and_then(|cadence| cadence.next_after(row.done_through.max(row.now)));
                ScheduleInfo {
                    missed: row.missed.parse().ok(),
                    last_job: row.last_job_id.map(JobId::from),
                    name: row.name,
                    task: row.task,
                    cron: row.cron,
                    time_zone: row.time_zone,
                    last_run: row.last_instant,
                    next_run,
                    leader: row.leader,
                }
            })
            .collect())
    }
}

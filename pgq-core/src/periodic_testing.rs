//! "Advance to the next instant" for tests: one scheduler step at a chosen instant, with the
//! same exactly-once bookkeeping as a leader's (`pgq.schedules`), without a worker or a lease.
//! Doc-hidden: use it through `pgq-testkit`.

use chrono::{DateTime, Utc};

use crate::client::Client;
use crate::error::Result;
use crate::job_id::JobId;
use crate::maintenance::scheduler;
use crate::periodic::{self, Unchecked};
use crate::schedule::{Cadence, Schedule};
use crate::task::Task;

/// Enqueues what `schedule` has due at `at` (the database clock's stand-in), as a leader
/// would; a schedule seen for the first time starts at `at` and enqueues nothing yet.
pub async fn enqueue_due<T: Task>(
    client: &Client,
    schedule: Schedule,
    make: impl Fn() -> T + Send + Sync + 'static,
    at: DateTime<Utc>,
) -> Result<Vec<JobId>> {
    let checked = periodic::check_all(vec![Unchecked::new(schedule, make)])?;
    scheduler::enqueue_due_at(client.store(), &checked, at, client.max_payload_bytes()).await
}

/// [`enqueue_due`] for every schedule declared with `#[task(cron = ..)]` in the binary.
pub async fn enqueue_due_declared(client: &Client, at: DateTime<Utc>) -> Result<Vec<JobId>> {
    let checked = periodic::check_all(periodic::declared())?;
    scheduler::enqueue_due_at(client.store(), &checked, at, client.max_payload_bytes()).await
}

/// The name a worker knows `schedule` of `T` by: its own, or the task's.
pub fn schedule_name<T: Task>(schedule: &Schedule) -> String {
    schedule.name.clone().unwrap_or_else(|| T::NAME.to_owned())
}

/// The names of the schedules declared with `#[task(cron = ..)]` in the binary.
pub fn declared_schedule_names() -> Result<Vec<String>> {
    let checked = periodic::check_all(periodic::declared())?;
    Ok(checked.into_iter().map(|periodic| periodic.name).collect())
}

/// The first instant of `schedule` strictly after `after`, or `None` when it has no more (or
/// does not parse: [`enqueue_due`] says why).
pub fn next_instant(schedule: &Schedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    Cadence::parse(&schedule.cron, &schedule.time_zone)
        .ok()?
        .next_after(after)
}

/// The first instant strictly after `after` of any schedule declared with `#[task(cron = ..)]`.
pub fn next_instant_declared(after: DateTime<Utc>) -> Result<Option<DateTime<Utc>>> {
    let checked = periodic::check_all(periodic::declared())?;
    Ok(checked
        .iter()
        .filter_map(|periodic| periodic.cadence.next_after(after))
        .min())
}

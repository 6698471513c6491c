//! The worker's periodic schedules: [`WorkerBuilder::periodic`] and the lease of their lead.

use std::time::Duration;

use crate::periodic::Unchecked;
use crate::schedule::Schedule;
use crate::task::Task;
use crate::worker::WorkerBuilder;

impl WorkerBuilder {
    /// Enqueues the task `make` returns at each instant of `schedule`, exactly once across every
    /// process that runs this schedule: one of them leads (a lease row in `pgq.leaders`) and
    /// enqueues, and another takes over within [`leader_lease`](Self::leader_lease) when it
    /// dies. The jobs go to the task's queue with its settings, due at their instant, tagged
    /// `schedule` with the schedule's name. Tasks that implement `Default` can declare theirs
    /// instead: `#[task(cron = "0 */5 * * * *")]`. `build()` refuses a schedule whose
    /// expression or time zone does not parse, or whose name another schedule has, with
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule).
    ///
    /// Every process meant to run a schedule declares it; processes with the same set of
    /// schedules elect one leader among them.
    ///
    /// ```no_run
    /// # use pgq_core::{Missed, Schedule, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct PurgeSessions { older_than_days: u32 }
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("default", 4)
    ///     .periodic(
    ///         Schedule::cron("0 15 3 * * *").time_zone("Europe/Berlin").missed(Missed::RunOnce),
    ///         || PurgeSessions { older_than_days: 30 },
    ///     )
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn periodic<T: Task>(
        mut self,
        schedule: Schedule,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) -> Self {
        self.schedules.push(Unchecked::new(schedule, make));
        self
    }

    /// How long the lead of the periodic schedules lasts without renewal (default
    /// [`LEADER_LEASE`](crate::defaults::LEADER_LEASE), 10 s; 1 s to 24 h). The leader renews
    /// it every third; the others try to take it every quarter, so a dead leader is replaced
    /// within about one lease.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{Schedule, Task};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task, Default)] struct Tick;
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let worker = pgq_core::Worker::builder(client)
    ///     .queue("default", 4)
    ///     .periodic(Schedule::cron("*/10 * * * * *"), Tick::default)
    ///     .leader_lease(Duration::from_secs(3))
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn leader_lease(mut self, lease: Duration) -> Self {
        self.leader_lease = lease;
        self
    }
}

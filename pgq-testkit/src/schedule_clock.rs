//! [`ScheduleClock`]: periodic tasks on a test's own clock — "advance to the next tick" without
//! waiting for it, with the bookkeeping a leader keeps, so that each instant is enqueued once.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use pgq_core::__testkit;
use pgq_core::{Client, JobId, Schedule, Task};

/// One schedule the clock steps: its next instant after a time, and its step at a time.
type Step = Arc<dyn Fn(Client, DateTime<Utc>) -> BoxFuture<'static, Vec<JobId>> + Send + Sync>;
type Next = Arc<dyn Fn(DateTime<Utc>) -> Option<DateTime<Utc>> + Send + Sync>;

/// What one tick enqueued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    /// The instant the clock moved to.
    pub at: DateTime<Utc>,
    /// The jobs enqueued for it, due at that instant.
    pub jobs: Vec<JobId>,
}

/// Periodic tasks on a test's clock. It starts with every schedule declared with
/// `#[task(cron = ..)]` in the test binary, and any given with [`with`](Self::with) (as to
/// [`WorkerBuilder::periodic`](pgq_core::WorkerBuilder::periodic)); each step enqueues what a
/// leader would enqueue at that time, recorded in the database as a leader records it, so that
/// no instant is enqueued twice. No worker and no lease are involved, and nothing waits.
///
/// A job is due at its instant, which is the clock's time, not the database's: run it with
/// [`Drain::with_scheduled(true)`](crate::Drain::with_scheduled).
///
/// ```no_run
/// # use pgq_core::Task;
/// # #[derive(Default, serde::Serialize, serde::Deserialize, Task)]
/// # #[task(cron = "0 0 * * * *")] struct HourlyReport;
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// use pgq_testkit::ScheduleClock;
///
/// let start = "2026-11-24T08:30:00Z".parse().unwrap();
/// let mut clock = ScheduleClock::start(&db.client(), start).await;
/// let tick = clock.next_tick().await.expect("an hourly schedule ticks");
/// assert_eq!(tick.at, "2026-11-24T09:00:00Z".parse::<chrono::DateTime<chrono::Utc>>().unwrap());
/// assert_eq!(tick.jobs.len(), 1);
/// # }
/// ```
pub struct ScheduleClock {
    client: Client,
    now: DateTime<Utc>,
    schedules: Vec<(Next, Step)>,
    /// Every schedule's name, the declared ones' too: two with one name would share their
    /// bookkeeping, and `build()` refuses them.
    names: Vec<String>,
}

impl fmt::Debug for ScheduleClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduleClock")
            .field("now", &self.now)
            .field("schedules", &self.schedules.len())
            .finish_non_exhaustive()
    }
}

impl ScheduleClock {
    /// The clock at `start`, with the declared schedules, which start there: none enqueues an
    /// instant at or before `start`. Panics if a declared schedule is invalid.
    pub async fn start(client: &Client, start: DateTime<Utc>) -> Self {
        let declared: Step = Arc::new(|client, at| {
            Box::pin(async move {
                __testkit::enqueue_due_declared(&client, at)
                    .await
                    .unwrap_or_else(|err| panic!("cannot enqueue the declared schedules: {err}"))
            })
        });
        let next: Next = Arc::new(|after| {
            __testkit::next_instant_declared(after)
                .unwrap_or_else(|err| panic!("a declared schedule is invalid: {err}"))
        });
        let names = __testkit::declared_schedule_names()
            .unwrap_or_else(|err| panic!("a declared schedule is invalid: {err}"));
        let clock = Self {
            client: client.clone(),
            now: start,
            schedules: vec![(next, declared.clone())],
            names,
        };
        declared(clock.client.clone(), start).await;
        clock
    }

    /// Adds `schedule`, enqueueing what `make` returns, starting at the clock's time. Panics if
    /// the schedule is invalid, as `build()` would refuse it, or has the name of another of the
    /// clock's schedules (the task's name unless [`Schedule::name`] gives one; a task declared
    /// with `#[task(cron = ..)]` has its schedule already): two such schedules would share one
    /// record in the database, as they do in production, where `build()` refuses them on one
    /// worker.
    pub async fn with<T: Task>(
        mut self,
        schedule: Schedule,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) -> Self {
        let name = __testkit::schedule_name::<T>(&schedule);
        assert!(
            !self.names.contains(&name),
            "two schedules have the name {name:?}; name one with Schedule::name"
        );
        self.names.push(name);
        let make = Arc::new(make);
        let for_step = schedule.clone();
        let step: Step = Arc::new(move |client, at| {
            let (schedule, make) = (for_step.clone(), make.clone());
            Box::pin(async move {
                __testkit::enqueue_due(&client, schedule, move || make(), at)
                    .await
                    .unwrap_or_else(|err| panic!("cannot enqueue the schedule: {err}"))
            })
        });
        let next: Next = Arc::new(move |after| __testkit::next_instant(&schedule, after));
        step(self.client.clone(), self.now).await;
        self.schedules.push((next, step));
        self
    }

    /// The clock's time.
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// Moves to the next instant of any schedule and enqueues what is due then; `None` when no
    /// schedule has another instant.
    pub async fn next_tick(&mut self) -> Option<Tick> {
        let at = self
            .schedules
            .iter()
            .filter_map(|(next, _)| next(self.now))
            .min()?;
        Some(Tick {
            at,
            jobs: self.move_to(at).await,
        })
    }

    /// Moves `duration` forward at once, as if no worker ran meanwhile, and enqueues what is
    /// due: instants missed by more than the grace (`defaults::SCHEDULE_GRACE`) follow each
    /// schedule's [`Missed`](pgq_core::Missed) policy, the others are enqueued.
    /// A duration past what a date can hold (beyond the year 262 143) moves the clock to the
    /// latest date there is.
    pub async fn advance(&mut self, duration: Duration) -> Vec<JobId> {
        let at = chrono::Duration::from_std(duration)
            .ok()
            .and_then(|by| self.now.checked_add_signed(by))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        self.move_to(at).await
    }

    async fn move_to(&mut self, at: DateTime<Utc>) -> Vec<JobId> {
        self.now = at;
        let mut jobs = Vec::new();
        for (_, step) in &self.schedules {
            jobs.extend(step(self.client.clone(), at).await);
        }
        jobs
    }
}

//! Periodic tasks as a worker runs them: each checked [`Schedule`] with the task it enqueues,
//! whether declared on the type (`#[task(cron = ..)]`, for tasks that implement `Default`) or
//! given to [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::enqueue::{self, PreparedTask};
use crate::error::{Error, Result};
use crate::limits;
use crate::schedule::{Cadence, Missed, Schedule};
use crate::task::Task;

/// Builds the job of one instant: the task serialized and checked against the payload limit.
pub(crate) type MakeJob = Arc<dyn Fn(usize) -> Result<PreparedTask> + Send + Sync>;

/// A schedule with its task, checked.
#[derive(Clone)]
pub(crate) struct Periodic {
    pub(crate) name: String,
    pub(crate) task: &'static str,
    pub(crate) queue: &'static str,
    pub(crate) priority: i16,
    pub(crate) max_attempts: i32,
    pub(crate) cron: String,
    pub(crate) time_zone: String,
    pub(crate) missed: Missed,
    pub(crate) cadence: Cadence,
    pub(crate) make: MakeJob,
    /// The job's `meta`: a `schedule` tag with the schedule's name, to find its jobs by.
    pub(crate) meta: Option<String>,
}

impl fmt::Debug for Periodic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Periodic")
            .field("name", &self.name)
            .field("task", &self.task)
            .field("cron", &self.cron)
            .field("time_zone", &self.time_zone)
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

/// A schedule as given, before `build()` checks it.
#[derive(Clone)]
pub(crate) struct Unchecked {
    schedule: Schedule,
    task: &'static str,
    queue: &'static str,
    priority: i16,
    max_attempts: i32,
    make: MakeJob,
}

impl fmt::Debug for Unchecked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unchecked")
            .field("schedule", &self.schedule)
            .field("task", &self.task)
            .finish_non_exhaustive()
    }
}

impl Unchecked {
    /// `schedule` enqueueing what `make` returns, with `T`'s settings.
    pub(crate) fn new<T: Task>(
        schedule: Schedule,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) -> Self {
        Self {
            schedule,
            task: T::NAME,
            queue: T::QUEUE,
            priority: T::PRIORITY,
            max_attempts: T::MAX_ATTEMPTS,
            make: Arc::new(move |max_payload| enqueue::prepare(&make(), max_payload)),
        }
    }

    /// The task's queue: declared schedules run on the workers that serve it.
    pub(crate) fn queue(&self) -> &'static str {
        self.queue
    }

    /// Checks the expression, the time zone, the name and the policy, and the task's name,
    /// queue, priority and attempts as an enqueue does: a hand-written `Task` may declare any.
    pub(crate) fn check(self) -> Result<Periodic> {
        enqueue::check_name(self.task)?;
        crate::queue::validate(self.queue)?;
        enqueue::check_bounds(self.task, self.priority, self.max_attempts)?;
        let name = self.schedule.name.unwrap_or_else(|| self.task.to_owned());
        let refuse = |reason: String| Error::InvalidSchedule {
            schedule: name.chars().take(80).collect(),
            reason,
        };
        if name.is_empty() || name.len() > limits::MAX_SCHEDULE_NAME_BYTES {
            return Err(refuse(format!(
                "a schedule name has 1 to {} bytes",
                limits::MAX_SCHEDULE_NAME_BYTES
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(refuse("a schedule name has no control characters".into()));
        }
        if let Missed::Backfill(n) = self.schedule.missed
            && !(1..=limits::MAX_BACKFILL).contains(&n)
        {
            return Err(refuse(format!(
                "backfill {n} is outside 1..={}",
                limits::MAX_BACKFILL
            )));
        }
        if self.schedule.cron.chars().count() > limits::MAX_CRON_CHARS {
            return Err(refuse(format!(
                "a cron expression has at most {} characters",
                limits::MAX_CRON_CHARS
            )));
        }
        let cadence =
            Cadence::parse(&self.schedule.cron, &self.schedule.time_zone).map_err(&refuse)?;
        let tags = BTreeMap::from([("schedule".to_owned(), name.clone())]);
        // Built once for every instant's job: no span of the moment it was built belongs to
        // them.
        let meta = crate::job_meta::untraced(&tags).map_err(refuse)?;
        Ok(Periodic {
            name,
            task: self.task,
            queue: self.queue,
            priority: self.priority,
            max_attempts: self.max_attempts,
            cron: self.schedule.cron,
            time_zone: self.schedule.time_zone,
            missed: self.schedule.missed,
            cadence,
            make: self.make,
            meta,
        })
    }
}

/// A schedule declared with `#[task(cron = ..)]`; the derive registers one per such type.
#[doc(hidden)]
pub struct DeclaredSchedule {
    task: &'static str,
    queue: &'static str,
    priority: i16,
    max_attempts: i32,
    cron: &'static str,
    time_zone: &'static str,
    make: fn(usize) -> Result<PreparedTask>,
}

inventory::collect!(DeclaredSchedule);

impl DeclaredSchedule {
    #[doc(hidden)]
    pub const fn new<T: Task + Default>(cron: &'static str, time_zone: &'static str) -> Self {
        Self {
            task: T::NAME,
            queue: T::QUEUE,
            priority: T::PRIORITY,
            max_attempts: T::MAX_ATTEMPTS,
            cron,
            time_zone,
            make: make_default::<T>,
        }
    }
}

fn make_default<T: Task + Default>(max_payload: usize) -> Result<PreparedTask> {
    enqueue::prepare(&T::default(), max_payload)
}

/// Every schedule declared on a type linked into the binary, unchecked.
pub(crate) fn declared() -> Vec<Unchecked> {
    inventory::iter::<DeclaredSchedule>
        .into_iter()
        .map(|declared| {
            let make = declared.make;
            Unchecked {
                schedule: Schedule::cron(declared.cron).time_zone(declared.time_zone),
                task: declared.task,
                queue: declared.queue,
                priority: declared.priority,
                max_attempts: declared.max_attempts,
                make: Arc::new(make),
            }
        })
        .collect()
}

/// Checks every schedule; two with one name are refused.
pub(crate) fn check_all(schedules: Vec<Unchecked>) -> Result<Vec<Periodic>> {
    let mut checked: Vec<Periodic> = Vec::with_capacity(schedules.len());
    for schedule in schedules {
        let periodic = schedule.check()?;
        if checked.iter().any(|seen| seen.name == periodic.name) {
            return Err(Error::InvalidSchedule {
                schedule: periodic.name.chars().take(80).collect(),
                reason: "two schedules have this name; name one with Schedule::name".into(),
            });
        }
        checked.push(periodic);
    }
    Ok(checked)
}

/// Declares a task type's schedule; emitted by `#[derive(Task)]` for `#[task(cron = ..)]`.
#[doc(hidden)]
#[macro_export]
macro_rules! __declare_schedule {
    ($ty:ty, $cron:expr, $time_zone:expr) => {
        $crate::__private::inventory::submit! {
            $crate::__private::DeclaredSchedule::new::<$ty>($cron, $time_zone)
        }
    };
}

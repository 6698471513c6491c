//! The scheduler: among the processes that run the same schedules, the one holding their lease
//! row (`pgq.leaders`) enqueues each instant as it comes due; the others try to take the lead
//! every quarter of the lease, and one takes it once the leader stops renewing. Exactly once
//! does not rest on the lease: every instant's job is inserted in the transaction that moves
//! its schedule's watermark by a compare-and-set (`store::schedules`), so two processes that
//! both believe they lead (a stalled leader, a deploy that changes the schedule set) still
//! enqueue each instant once.
//!
//! The role is named after the set of schedule names, so that processes with different sets
//! (a mixed fleet, a rolling deploy) each have a leader rather than one leader that lacks some.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use chrono::{DateTime, Utc};
use md5::{Digest as _, Md5};
use tokio::sync::watch;

use crate::defaults;
use crate::enqueue::PreparedTask;
use crate::enqueued::JobTemplate;
use crate::error::{Error, Result};
use crate::job_id::JobId;
use crate::maintenance::{self, Service};
use crate::panic_message::panic_message;
use crate::periodic::Periodic;
use crate::schedule;
use crate::store::schedules::{Definition, InstantJob};
use crate::store::{self, Store};

/// The shortest wait between two steps of a leader, so that a clock a little behind the
/// database's never spins.
const MIN_STEP: Duration = Duration::from_millis(5);

/// The scheduler's settings.
#[derive(Debug, Clone)]
pub(crate) struct SchedulerConfig {
    /// How long a lead lasts without renewal.
    pub(crate) lease: Duration,
    pub(crate) max_payload_bytes: usize,
}

/// The scheduler as a periodic service whose interval follows the next instant.
#[derive(Debug)]
pub(crate) struct Scheduler {
    store: Store,
    holder: String,
    role: String,
    schedules: Vec<Periodic>,
    config: SchedulerConfig,
    leading: bool,
    /// Each schedule's watermark while leading; read again after a lost compare-and-set.
    done: Option<HashMap<String, DateTime<Utc>>>,
    next: Duration,
}

impl Scheduler {
    pub(crate) fn new(
        store: Store,
        holder: String,
        schedules: Vec<Periodic>,
        config: SchedulerConfig,
    ) -> Self {
        Self {
            role: role(&schedules),
            store,
            holder,
            schedules,
            next: config.lease / 4,
            config,
            leading: false,
            done: None,
        }
    }

    /// Runs until `stop`, then gives the lead up so that another process takes it at once.
    pub(crate) async fn run(self, stop: watch::Receiver<bool>) {
        let store = self.store.clone();
        let (role, holder) = (self.role.clone(), self.holder.clone());
        maintenance::run(self, stop).await;
        if let Err(err) = store::leaders::resign(&store, &role, &holder).await {
            tracing::warn!(error = %err, "could not give up the schedules' lead; it runs out");
        }
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.config.lease.as_millis()).unwrap_or(i64::MAX)
    }
}

impl Service for Scheduler {
    const NAME: &'static str = "scheduler";

    fn interval(&self) -> Duration {
        self.next
    }

    async fn run_once(&mut self) -> Result<()> {
        // A step that fails comes again at a follower's pace, not at the few milliseconds the
        // last step may have left before an instant: an outage is not hammered.
        self.next = self.config.lease / 4;
        let claimed =
            store::leaders::claim(&self.store, &self.role, &self.holder, self.lease_ms()).await?;
        let Some(now) = claimed else {
            if self.leading {
                tracing::warn!(role = %self.role, "lost the schedules' lead to another process");
            }
            self.leading = false;
            self.done = None;
            self.next = self.config.lease / 4;
            return Ok(());
        };
        if !self.leading {
            tracing::info!(role = %self.role, schedules = self.schedules.len(), "leading the schedules");
            self.leading = true;
            store::leaders::forget_stale(&self.store).await?;
        }
        // Renewed: the next step comes before a third of the lease has passed.
        self.next = self.config.lease / 3;
        let done = match self.done.take() {
            Some(done) => done,
            None => register(&self.store, &self.schedules, &self.role, now).await?,
        };
        let mut done = done;
        let mut lost = false;
        for periodic in &self.schedules {
            let Some(&through) = done.get(&periodic.name) else {
                lost = true;
                continue;
            };
            let step = enqueue_due(
                &self.store,
                periodic,
                &self.role,
                through,
                now,
                grace(self.config.lease),
                self.config.max_payload_bytes,
            );
            match step.await {
                Ok(Step::Idle) => {}
                Ok(Step::Enqueued { done_through, ids }) => {
                    tracing::debug!(schedule = %periodic.name, jobs = ids.len(), "enqueued scheduled jobs");
                    done.insert(periodic.name.clone(), done_through);
                }
                Ok(Step::Lost) => lost = true,
                // One schedule's failure (a payload over the limit) does not hold up the others.
                Err(err) => {
                    tracing::warn!(schedule = %periodic.name, error = %err, "could not enqueue the schedule's due instants; trying again at the next step");
                }
            }
        }
        let next_instant = self
            .schedules
            .iter()
            .filter_map(|periodic| {
                let after = done.get(&periodic.name).copied().unwrap_or(now).max(now);
                periodic.cadence.next_after(after)
            })
            .min();
        if let Some(next) = next_instant {
            let wait = (next - now).to_std().unwrap_or_default() + Duration::from_millis(1);
            self.next = self.next.min(wait).max(MIN_STEP);
        }
        // Someone else moved a watermark: read them all again at the next step.
        self.done = if lost { None } else { Some(done) };
        Ok(())
    }
}

/// The leader role of a set of schedules: its names, hashed.
fn role(schedules: &[Periodic]) -> String {
    let mut names: Vec<&str> = schedules.iter().map(|p| p.name.as_str()).collect();
    names.sort_unstable();
    let digest = Md5::digest(names.join("\n").as_bytes());
    let mut role = String::from("schedules:");
    for byte in &digest[..8] {
        let _ = write!(role, "{byte:02x}");
    }
    role
}

/// Writes the schedules' definitions; their watermarks, by name.
pub(crate) async fn register(
    store: &Store,
    schedules: &[Periodic],
    role: &str,
    now: DateTime<Utc>,
) -> Result<HashMap<String, DateTime<Utc>>> {
    let definitions: Vec<Definition<'_>> = schedules
        .iter()
        .map(|p| Definition {
            name: &p.name,
            task: p.task,
            cron: &p.cron,
            time_zone: &p.time_zone,
            missed: p.missed.to_string(),
        })
        .collect();
    Ok(store::schedules::register(store, &definitions, role, now)
        .await?
        .into_iter()
        .collect())
}

/// What one step of one schedule did.
#[derive(Debug)]
pub(crate) enum Step {
    /// Nothing came due.
    Idle,
    /// These jobs were enqueued (none when the policy passed over every due instant) and the
    /// watermark moved.
    Enqueued {
        done_through: DateTime<Utc>,
        ids: Vec<JobId>,
    },
    /// Another process moved the watermark first; nothing was written.
    Lost,
}

/// How late an instant may be and still run: [`defaults::SCHEDULE_GRACE`], or twice the leader
/// lease when that is longer. A leader that dies right after renewing holds its lead for a whole
/// lease, and the next one takes it at its next try, up to a third of a lease later: its
/// instants must still be on time then.
pub(crate) fn grace(leader_lease: Duration) -> Duration {
    defaults::SCHEDULE_GRACE.max(leader_lease.saturating_mul(2))
}

/// Enqueues what `periodic` has due at `now` past the watermark `through`; instants older than
/// `grace` were missed. `role`: the leader role of the process that runs the step, which the
/// schedule's row then names as its leader's.
pub(crate) async fn enqueue_due(
    store: &Store,
    periodic: &Periodic,
    role: &str,
    through: DateTime<Utc>,
    now: DateTime<Utc>,
    grace: Duration,
    max_payload_bytes: usize,
) -> Result<Step> {
    let Some(due) = schedule::due(&periodic.cadence, periodic.missed, through, now, grace) else {
        return Ok(Step::Idle);
    };
    let mut jobs = Vec::with_capacity(due.instants.len());
    for &instant in &due.instants {
        // An instant whose task cannot be made is skipped, not tried again: the watermark
        // passes it with the others, and the schedule's next instant is made anew.
        let prepared = match make(periodic, max_payload_bytes) {
            Ok(prepared) => prepared,
            Err(err) => {
                tracing::warn!(schedule = %periodic.name, %instant, error = %err, "could not make the schedule's task; this instant is skipped");
                continue;
            }
        };
        jobs.push(InstantJob {
            template: JobTemplate {
                task: periodic.task,
                queue: periodic.queue,
                priority: periodic.priority,
                max_attempts: periodic.max_attempts,
                run_at: Some(instant),
                delay_ms: 0,
                meta: periodic.meta.clone(),
            },
            task: prepared,
        });
    }
    Ok(
        match store::schedules::advance(
            store,
            &periodic.name,
            role,
            through,
            due.done_through,
            &jobs,
        )
        .await?
        {
            Some(ids) => {
                // Counted as every enqueue path counts its jobs.
                if crate::metric::ENABLED {
                    crate::metric::enqueued(periodic.task, periodic.queue, ids.len() as u64);
                }
                Step::Enqueued {
                    done_through: due.done_through,
                    ids,
                }
            }
            None => Step::Lost,
        },
    )
}

/// The job of one instant, as the schedule's factory makes it. The factory is the
/// application's code (its closure, `Default`, `Serialize`): one that panics fails this step of
/// this schedule, as a payload over the limit does, not the scheduler of every schedule.
fn make(periodic: &Periodic, max_payload_bytes: usize) -> Result<PreparedTask> {
    std::panic::catch_unwind(AssertUnwindSafe(|| (periodic.make)(max_payload_bytes)))
        .unwrap_or_else(|panic| {
            Err(Error::InvalidSchedule {
                schedule: periodic.name.chars().take(80).collect(),
                reason: format!("making its task panicked: {}", panic_message(panic)),
            })
        })
}

/// One step for `schedules` at `now` outside any worker, with the same bookkeeping: what the
/// testkit's "advance to the next instant" runs. A schedule seen for the first time starts at
/// `now`.
pub(crate) async fn enqueue_due_at(
    store: &Store,
    schedules: &[Periodic],
    now: DateTime<Utc>,
    max_payload_bytes: usize,
) -> Result<Vec<JobId>> {
    let role = role(schedules);
    let done = register(store, schedules, &role, now).await?;
    let mut enqueued = Vec::new();
    for periodic in schedules {
        let Some(&through) = done.get(&periodic.name) else {
            continue;
        };
        if let Step::Enqueued { ids, .. } = enqueue_due(
            store,
            periodic,
            &role,
            through,
            now,
            defaults::SCHEDULE_GRACE,
            max_payload_bytes,
        )
        .await?
        {
            enqueued.extend(ids);
        }
    }
    Ok(enqueued)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::postgres::PgPoolOptions;

    use super::{MIN_STEP, Scheduler, SchedulerConfig};
    use crate::maintenance::Service;
    use crate::schema::Schema;
    use crate::store::Store;

    /// A leader's last step may have left a few milliseconds to the next instant; a step that
    /// then finds no database waits a follower's interval, not those milliseconds, again and
    /// again.
    #[tokio::test]
    async fn a_failed_step_waits_a_followers_interval() {
        let pool = PgPoolOptions::new()
            .acquire_timeout(Duration::from_millis(200))
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        let store = Store::new(pool, Duration::from_secs(1), Schema::default());
        let lease = Duration::from_secs(20);
        let mut scheduler = Scheduler::new(
            store,
            "worker-1".into(),
            Vec::new(),
            SchedulerConfig {
                lease,
                max_payload_bytes: 1024,
            },
        );
        scheduler.next = MIN_STEP;
        assert!(scheduler.run_once().await.is_err(), "no database there");
        assert_eq!(scheduler.interval(), lease / 4);
    }
}

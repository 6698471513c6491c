//! The cleaner: deletes finished jobs past their retention, in bounded batches, one process at a
//! time (an advisory lock), so the table does not grow forever.
//!
//! A worker's cleaner deletes one batch a step and, while batches come back full, waits three
//! times as long as the last one took before the next: a backlog is spread over the following
//! seconds or minutes at no more than a quarter of one connection's time, instead of a burst
//! that the claims beside it queue behind. Once a batch comes back short, the pass ends, and the
//! next comes when about a batch's worth of jobs will be due again at the rate the pass found
//! them, within its interval: a queue finishing 10 000 jobs a second is cleaned a batch every
//! tenth of a second, as steadily as it finishes them, instead of a minute's worth at once; a
//! quiet one once an interval. A pass that finds nothing due asks when the oldest finished job
//! falls due and comes back then (within the interval), so that the pace starts with the first
//! jobs past retention.
//!
//! Within a pass, each batch starts where the last one ended in the finished-jobs index (the
//! latest completion it deleted): the entries of the jobs already deleted stay in the index until
//! vacuum removes them, and a batch that started at the beginning would step over all of them, so
//! that working through a backlog would cost its square. Each pass starts at the beginning again,
//! for the jobs a batch passed over: kept longer (failed or cancelled), or held by another
//! statement at the time.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::defaults;
use crate::error::Result;
use crate::maintenance::Service;
use crate::store;
use crate::store::Store;

/// How many rows one delete statement removes at most.
pub(crate) const CLEAN_BATCH: i64 = 1000;

/// While batches come back full, the pause after each, in multiples of the time it took.
const PAUSE_PER_BATCH_TIME: u32 = 3;

/// How long finished jobs are kept before the cleaner deletes them.
///
/// ```
/// use std::time::Duration;
/// let retention = pgq_core::Retention {
///     completed: Duration::from_secs(3600),
///     ..Default::default()
/// };
/// assert_eq!(retention.failed, pgq_core::defaults::RETAIN_FAILED);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Age (since completion) after which completed jobs are deleted.
    pub completed: Duration,
    /// Age after which failed and cancelled jobs are deleted.
    pub failed: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            completed: defaults::RETAIN_COMPLETED,
            failed: defaults::RETAIN_FAILED,
        }
    }
}

/// The cleaner's settings.
#[derive(Debug, Clone)]
pub(crate) struct CleanerConfig {
    pub(crate) retention: Retention,
    pub(crate) interval: Duration,
}

/// Deletes what is past retention; `None` when another process is cleaning right now.
pub(crate) async fn clean(store: &Store, retention: Retention) -> Result<Option<u64>> {
    store::maintenance::delete_finished(store, retention.completed, retention.failed, CLEAN_BATCH)
        .await
}

/// The cleaner as a periodic service, a batch a step.
#[derive(Debug)]
pub(crate) struct Cleaner {
    store: Store,
    config: CleanerConfig,
    /// The wait before the next step.
    next: Duration,
    /// When the last pass ended, for the rate the next one finds jobs at.
    last_pass_end: Option<Instant>,
    /// Deleted since the pass began.
    deleted_in_pass: u64,
    /// Whether this pass comes when the oldest finished job was to fall due.
    waited_for_due: bool,
    /// Where the pass's next batch starts in the finished-jobs index: the latest completion it
    /// deleted so far (`None`: the beginning).
    resume_from: Option<DateTime<Utc>>,
    /// Deleted since the last log line, and when that was.
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl Cleaner {
    pub(crate) fn new(store: Store, config: CleanerConfig) -> Self {
        Self {
            store,
            next: config.interval,
            config,
            last_pass_end: None,
            deleted_in_pass: 0,
            waited_for_due: false,
            resume_from: None,
            unlogged: 0,
            logged_at: None,
        }
    }
}

impl Service for Cleaner {
    const NAME: &'static str = "cleaner";

    fn interval(&self) -> Duration {
        self.next
    }

    async fn run_once(&mut self) -> Result<()> {
        let (retention, interval) = (self.config.retention, self.config.interval);
        let began = Instant::now();
        // A failed step ends the pass: the next starts after the interval, at the beginning.
        self.next = interval;
        let from = self.resume_from.take();
        let deleted = store::maintenance::delete_finished_batch(
            &self.store,
            retention.completed,
            retention.failed,
            CLEAN_BATCH,
            from,
        )
        .await?;
        let took = began.elapsed();
        // `None`: another process is cleaning; this pass ends.
        let held = deleted.is_some();
        let (deleted, reached) =
            deleted.map_or((0, None), |deleted| (deleted.rows, deleted.reached));
        self.deleted_in_pass += deleted;
        self.unlogged += deleted;
        let pause = took * PAUSE_PER_BATCH_TIME;
        if deleted == CLEAN_BATCH as u64 {
            self.resume_from = reached.or(from);
            self.next = pause.min(interval);
        } else {
            let ended = Instant::now();
            let since = self.last_pass_end.replace(ended);
            let found = std::mem::take(&mut self.deleted_in_pass);
            let waited_for_due = std::mem::take(&mut self.waited_for_due);
            self.next = match since {
                Some(last) if found > 0 => wait_after_pass(found, ended - last, pause, interval),
                // Nothing was due: the next pass when the oldest finished job is, so that a queue
                // whose first jobs fall due is cleaned at its pace from then on, not an interval
                // later with an interval's jobs at once. Once only: if that pass finds nothing
                // either (another statement holds the job), the interval.
                _ if held && found == 0 && !waited_for_due => {
                    let due_in = store::maintenance::oldest_finished_due_in(
                        &self.store,
                        retention.completed,
                        retention.failed,
                    )
                    .await?;
                    let wait = wait_until_due(due_in, pause, interval);
                    self.waited_for_due = wait < interval;
                    wait
                }
                _ => interval,
            };
        }
        // One line an interval at most, however often the passes come.
        if self.unlogged > 0 && self.logged_at.is_none_or(|at| at.elapsed() >= interval) {
            tracing::info!(deleted = self.unlogged, "deleted old finished jobs");
            self.unlogged = 0;
            self.logged_at = Some(Instant::now());
        }
        Ok(())
    }
}

/// After a pass that deleted `deleted` jobs due over `span`: the wait until about a batch is due
/// again at that rate, at least `floor`, at most `interval`.
fn wait_after_pass(deleted: u64, span: Duration, floor: Duration, interval: Duration) -> Duration {
    if deleted == 0 {
        return interval;
    }
    span.mul_f64(CLEAN_BATCH as f64 / deleted as f64)
        .clamp(floor.min(interval), interval)
}

/// After a pass that found nothing due: the wait until the oldest finished job falls due (`due_in`,
/// zero when it fell due since the pass; `None` when no job is finished), at least `floor`, at
/// most `interval`.
fn wait_until_due(due_in: Option<Duration>, floor: Duration, interval: Duration) -> Duration {
    due_in.map_or(interval, |due_in| {
        due_in.clamp(floor.min(interval), interval)
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Cleaner, CleanerConfig, Retention, wait_after_pass, wait_until_due};
    use crate::maintenance::Service;
    use crate::store::walk::tests::jobs;

    const INTERVAL: Duration = Duration::from_secs(60);
    const FLOOR: Duration = Duration::from_millis(15);

    #[test]
    fn a_busy_queue_is_cleaned_a_batch_at_a_time() {
        // A minute's 600 000 jobs: the next pass when a thousand more are due.
        let wait = wait_after_pass(600_000, INTERVAL, FLOOR, INTERVAL);
        assert_eq!(wait, Duration::from_millis(100));
        // Steady at that rate: a pass a tenth of a second apart finds a batch and keeps it so.
        let span = Duration::from_millis(100);
        assert_eq!(wait_after_pass(1_000, span, FLOOR, INTERVAL), span);
    }

    #[test]
    fn the_wait_stays_between_the_floor_and_the_interval() {
        let busier = wait_after_pass(100_000_000, INTERVAL, FLOOR, INTERVAL);
        assert_eq!(busier, FLOOR);
        assert_eq!(wait_after_pass(10, INTERVAL, FLOOR, INTERVAL), INTERVAL);
        assert_eq!(wait_after_pass(0, INTERVAL, FLOOR, INTERVAL), INTERVAL);
        // A floor above the interval yields to it.
        let short = Duration::from_secs(1);
        assert_eq!(wait_after_pass(1_000_000, INTERVAL, INTERVAL, short), short);
    }

    #[test]
    fn a_pass_that_found_nothing_waits_for_the_oldest_finished_job() {
        let soon = Duration::from_secs(2);
        assert_eq!(wait_until_due(Some(soon), FLOOR, INTERVAL), soon);
        assert_eq!(
            wait_until_due(Some(Duration::from_millis(1)), FLOOR, INTERVAL),
            FLOOR
        );
        let in_a_day = Duration::from_secs(86_400);
        assert_eq!(wait_until_due(Some(in_a_day), FLOOR, INTERVAL), INTERVAL);
        assert_eq!(wait_until_due(None, FLOOR, INTERVAL), INTERVAL);
        // Fallen due between the pass and the question: the next pass at once.
        assert_eq!(wait_until_due(Some(Duration::ZERO), FLOOR, INTERVAL), FLOOR);
    }

    async fn exists(pool: &sqlx::PgPool, id: i64) -> bool {
        sqlx::query_scalar("SELECT EXISTS (SELECT FROM pgq.jobs WHERE id = $1)")
            .bind(id)
            .fetch_one(pool)
            .await
            .expect("a lookup")
    }

    /// A pass's batches start where the last one ended, and each pass at the beginning: a job a
    /// batch passed over (here held by another transaction) is left to the next pass.
    #[tokio::test]
    async fn a_pass_resumes_where_its_last_batch_ended_and_the_next_starts_over() {
        let db = pgq_testkit::TestDatabase::new().await;
        let pool = db.pool();
        let held = jobs(pool, 1, "completed", "3 days").await[0];
        jobs(pool, 1500, "completed", "2 days").await;
        let mut holder = pool.begin().await.expect("a transaction");
        sqlx::query("SELECT id FROM pgq.jobs WHERE id = $1 FOR UPDATE")
            .bind(held)
            .execute(&mut *holder)
            .await
            .expect("a row lock");
        let client = crate::Client::new(pool.clone());
        let mut cleaner = Cleaner::new(
            client.store().clone(),
            CleanerConfig {
                retention: Retention::default(),
                interval: Duration::from_secs(60),
            },
        );

        // A full batch from the beginning, passing over the held job.
        cleaner.run_once().await.expect("a batch");
        holder.rollback().await.expect("the lock released");
        // The pass's next batch starts after the jobs already passed, and comes back short.
        cleaner.run_once().await.expect("a batch");
        let left: Vec<i64> = sqlx::query_scalar("SELECT id FROM pgq.jobs")
            .fetch_all(pool)
            .await
            .expect("the jobs left");
        assert_eq!(left, [held], "the rest deleted, the job passed over left");
        // The next pass starts over.
        cleaner.run_once().await.expect("a batch");
        assert!(!exists(pool, held).await, "the next pass deleted it");
    }
}

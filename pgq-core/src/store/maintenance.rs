//! Table-wide upkeep: deleting old finished jobs, and per-queue statistics and depth.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{PgConnection, Postgres, Row};

use crate::error::Result;
use crate::limits;
use crate::stats::QueueStats;
use crate::store::Store;
use crate::store::moment::Moment;
use crate::store::run;
use crate::store::walk::walking_indexes;

/// The transaction-scoped advisory lock each deleting statement takes ("pgq_clea" in ASCII):
/// while one process cleans, the others find it taken and leave the work to it.
const CLEAN_LOCK: i64 = 0x7067_715f_636c_6561;

/// One batch in one statement (no session state, so it works behind a transaction pooler):
/// rows a concurrent statement holds are skipped, not waited for. The scan of the finished-jobs
/// index starts at `$5` (none: at its start): until vacuum removes them, the entries of the jobs
/// earlier batches deleted stay at the front of that index, and a batch that started there would
/// step over all of them, a backlog's worth by its end. The statement returns where the next
/// batch may start: the latest completion it deleted. Run walking the index, in its order
/// ([`walking_indexes`]).
const DELETE_FINISHED: &str = "
WITH lock AS (SELECT pg_try_advisory_xact_lock($4) AS held),
doomed AS (
    SELECT id FROM pgq.jobs
    WHERE phase = 2
      AND completed_at >= coalesce($5, '-infinity'::timestamptz)
      AND completed_at < (now() - (least($1, $2) * interval '1 millisecond'))
      AND completed_at < (now() - (CASE WHEN status = 'completed' THEN $1 ELSE $2 END
                                   * interval '1 millisecond'))
      AND (SELECT held FROM lock)
    ORDER BY completed_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM pgq.jobs WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING completed_at
)
SELECT (SELECT held FROM lock) AS held, count(*) AS deleted, max(completed_at) AS reached
FROM deleted";

/// Where a batch of [`delete_finished_batch`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deleted {
    /// Rows deleted.
    pub(crate) rows: u64,
    /// The latest completion among them: every finished job completed before it was deleted,
    /// is kept longer, was held by another statement or had not been committed yet. `None` when
    /// nothing was deleted.
    pub(crate) reached: Option<DateTime<Utc>>,
}

/// Deletes finished jobs older than their retention, `batch` rows per statement, each starting
/// where the last ended, unless another process is cleaning (then `None`).
pub(crate) async fn delete_finished(
    store: &Store,
    completed: Duration,
    failed: Duration,
    batch: i64,
) -> Result<Option<u64>> {
    let (mut total, mut from) = (0, None);
    loop {
        let Some(deleted) = delete_finished_batch(store, completed, failed, batch, from).await?
        else {
            return Ok((total > 0).then_some(total));
        };
        total += deleted.rows;
        from = deleted.reached.or(from);
        if deleted.rows < batch as u64 {
            return Ok(Some(total));
        }
    }
}

/// One statement of [`delete_finished`]: at most `batch` rows, those completed at `from` or
/// later (`None`: any), or `None` when another process is cleaning.
pub(crate) async fn delete_finished_batch(
    store: &Store,
    completed: Duration,
    failed: Duration,
    batch: i64,
    from: Option<DateTime<Utc>>,
) -> Result<Option<Deleted>> {
    let (held, rows, reached): (bool, i64, Option<Moment>) = run!(store, |conn| async {
        let mut tx = walking_indexes(store, conn).await?;
        let deleted = sqlx::query_as(store.sql(DELETE_FINISHED))
            .persistent(store.prepared())
            .bind(retention_ms(completed))
            .bind(retention_ms(failed))
            .bind(batch)
            .bind(store.lock_key(CLEAN_LOCK))
            .bind(from)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(deleted)
    })?;
    Ok(held.then(|| Deleted {
        rows: u64::try_from(rows).unwrap_or(0),
        reached: reached.map(Into::into),
    }))
}

/// A retention in milliseconds as the statements take it; `None` (NULL: no row is past it)
/// for one of [`MAX_DELAY`](limits::MAX_DELAY) or more, such as `Duration::MAX`, which keeps
/// those jobs for good and would put PostgreSQL's intervals out of range.
fn retention_ms(retention: Duration) -> Option<i64> {
    (retention < limits::MAX_DELAY)
        .then(|| i64::try_from(retention.as_millis()).unwrap_or(i64::MAX))
}

/// How long until the oldest finished job falls due, in milliseconds (zero or less: due now),
/// read from the first entry of the finished-jobs index; no row when nothing is finished. A
/// completion time written by hand may be infinite, which no subtraction takes: it counts as
/// the edge of the run times pgq stores.
const OLDEST_FINISHED_DUE_IN: &str = "
SELECT ceil((extract(epoch FROM least(greatest(completed_at, '1970-01-01 00:00:00+00'),
                                      '9999-12-31 00:00:00+00') - now()) * 1000)
            + CASE WHEN status = 'completed' THEN $1 ELSE $2 END)::int8
FROM pgq.jobs
WHERE phase = 2
ORDER BY completed_at
LIMIT 1";

/// How long until the oldest finished job is past its retention; `None` when no job is
/// finished. A job finished later may fall due sooner (when failed jobs are kept longer than
/// completed ones, or the other way round): the cleaner's interval bounds that wait.
pub(crate) async fn oldest_finished_due_in(
    store: &Store,
    completed: Duration,
    failed: Duration,
) -> Result<Option<Duration>> {
    // NULL for a job kept for good: nothing falls due before the cleaner's interval.
    let due_in: Option<Option<i64>> = run!(store, |conn| async {
        Ok(sqlx::query_scalar(store.sql(OLDEST_FINISHED_DUE_IN))
            .persistent(store.prepared())
            .bind(retention_ms(completed))
            .bind(retention_ms(failed))
            .fetch_optional(&mut *conn)
            .await?)
    })?;
    Ok(due_in
        .flatten()
        .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
}

/// The queues' pending and held jobs: pending jobs from the claim index (its columns are all it
/// needs), held jobs (few). Neither reads a finished job.
macro_rules! with_active_jobs {
    ($($rest:expr),+ $(,)?) => {
        concat!(
            "
WITH pending AS (
    SELECT queue,
           count(*) FILTER (WHERE run_at <= now()) AS due,
           count(*) FILTER (WHERE run_at > now()) AS scheduled,
           min(run_at) FILTER (WHERE run_at <= now()) AS oldest_due
    FROM pgq.jobs WHERE phase = 0
    GROUP BY queue
),
held AS (
    SELECT queue,
           count(*) FILTER (WHERE status = 'claimed') AS claimed,
           count(*) FILTER (WHERE status = 'running') AS running
    FROM pgq.jobs WHERE phase = 1
    GROUP BY queue
)",
            $($rest),+
        )
    };
}

/// The columns of [`QueueDepth`].
macro_rules! depth_columns {
    () => {
        "queue,
       coalesce(pending.due, 0) AS due, coalesce(pending.scheduled, 0) AS scheduled,
       coalesce(held.claimed, 0) AS claimed, coalesce(held.running, 0) AS running,
       extract(epoch FROM now() - pending.oldest_due)::float8 AS oldest_due_secs"
    };
}

/// Every queue's depth, and the jobs finished within the window from the finished-jobs index:
/// never the whole history.
const STATS: &str = with_active_jobs!(
    ",
finished AS (
    SELECT queue,
           count(*) FILTER (WHERE status = 'completed') AS completed,
           count(*) FILTER (WHERE status = 'failed') AS failed,
           count(*) FILTER (WHERE status = 'cancelled') AS cancelled
    FROM pgq.jobs WHERE phase = 2 AND completed_at > (now() - ($1 * interval '1 millisecond'))
    GROUP BY queue
)
SELECT ",
    depth_columns!(),
    ",
       coalesce(finished.completed, 0) AS completed, coalesce(finished.failed, 0) AS failed,
       coalesce(finished.cancelled, 0) AS cancelled
FROM pending FULL JOIN held USING (queue) FULL JOIN finished USING (queue)
ORDER BY queue COLLATE \"C\""
);

/// The depth of every queue with jobs pending or held, and nothing else: its cost is that of
/// the jobs waiting, where the window's finished jobs that [`STATS`] counts grow with the
/// throughput (a busy queue finishes millions in the window).
const DEPTH: &str = with_active_jobs!(
    "
SELECT ",
    depth_columns!(),
    "
FROM pending FULL JOIN held USING (queue)"
);

/// What waits in a queue and what its workers hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct QueueDepth {
    pub(crate) queue: String,
    pub(crate) due: u64,
    pub(crate) scheduled: u64,
    pub(crate) claimed: u64,
    pub(crate) running: u64,
    pub(crate) oldest_due_age: Option<Duration>,
}

fn count(row: &PgRow, name: &str) -> Result<u64> {
    Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
}

impl QueueDepth {
    fn from_row(row: &PgRow) -> Result<Self> {
        Ok(Self {
            queue: row.try_get("queue")?,
            due: count(row, "due")?,
            scheduled: count(row, "scheduled")?,
            claimed: count(row, "claimed")?,
            running: count(row, "running")?,
            oldest_due_age: row
                .try_get::<Option<f64>, _>("oldest_due_secs")?
                .map(|secs| Duration::from_secs_f64(secs.max(0.0))),
        })
    }
}

/// Every queue with jobs pending or held, with what it holds (queues with neither are left out).
pub(crate) async fn depth(store: &Store) -> Result<Vec<QueueDepth>> {
    run!(store, |conn| async {
        let depth = sqlx::query(store.sql(DEPTH)).persistent(store.prepared());
        let rows = count_walking_indexes(store, conn, depth).await?;
        rows.iter()
            .map(QueueDepth::from_row)
            .collect::<Result<Vec<_>>>()
    })
}

/// Fetches what a counting statement finds, walking the indexes. Rolled back: the statement only
/// reads, and the rollback ends the settings (a savepoint's too, behind a pooler).
async fn count_walking_indexes(
    store: &Store,
    conn: &mut PgConnection,
    query: Query<'_, Postgres, PgArguments>,
) -> Result<Vec<PgRow>> {
    let mut tx = walking_indexes(store, conn).await?;
    let rows = query.fetch_all(&mut *tx).await?;
    tx.rollback().await?;
    Ok(rows)
}

pub(crate) async fn stats(store: &Store, window: Duration) -> Result<Vec<QueueStats>> {
    let minutes = window.as_secs_f64() / 60.0;
    run!(store, |conn| async {
        // Left to the planner: the window's finished jobs are live rows, which a bitmap or
        // sequential scan reads faster than a walk of the index (128 against 180 ms for a
        // million in the window).
        let rows = sqlx::query(store.sql(STATS))
            .persistent(store.prepared())
            .bind(i64::try_from(window.as_millis()).unwrap_or(i64::MAX))
            .fetch_all(&mut *conn)
            .await?;
        let rate =
            |row: &PgRow, name: &str| -> Result<f64> { Ok(count(row, name)? as f64 / minutes) };
        rows.iter()
            .map(|row| {
                let depth = QueueDepth::from_row(row)?;
                Ok(QueueStats {
                    queue: depth.queue,
                    due: depth.due,
                    scheduled: depth.scheduled,
                    claimed: depth.claimed,
                    running: depth.running,
                    oldest_due_age: depth.oldest_due_age,
                    completed: count(row, "completed")?,
                    failed: count(row, "failed")?,
                    cancelled: count(row, "cancelled")?,
                    completed_per_minute: rate(row, "completed")?,
                    failed_per_minute: rate(row, "failed")?,
                    cancelled_per_minute: rate(row, "cancelled")?,
                })
            })
            .collect::<Result<Vec<_>>>()
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::store::walk::tests::{dead_entries, jobs, walk_until_marked};

    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::DELETE_FINISHED,
            super::OLDEST_FINISHED_DUE_IN,
            super::STATS,
            super::DEPTH,
        ]);
    }

    /// Counting the held jobs marks the lease index's entries of finished jobs dead, so the
    /// next count steps over them instead of reading their rows again.
    #[tokio::test]
    async fn a_count_marks_the_entries_of_finished_jobs_dead() {
        let db = pgq_testkit::TestDatabase::new().await;
        let pool = db.pool();
        jobs(pool, 3, "running", "0 s").await;
        jobs(pool, 1997, "completed", "2 days").await;
        assert_eq!(dead_entries(pool, "pgq.jobs_lease_idx").await, 0);

        let client = crate::Client::new(pool.clone());
        let count = || async {
            let depth = super::depth(client.store()).await.expect("the depth");
            assert_eq!(depth.len(), 1);
            assert_eq!((depth[0].claimed, depth[0].running), (0, 3));
        };
        // An entry for each job's claimed and running rows: all but the held jobs' running rows.
        assert_eq!(
            walk_until_marked(pool, "pgq.jobs_lease_idx", 2 * 2000 - 3, count).await,
            2 * 2000 - 3,
            "every entry of a row no longer held is marked dead"
        );
    }

    /// The cleaner's next pass marks the entries of the jobs the last one deleted dead, so that
    /// the pass after it steps over them without reading the table.
    #[tokio::test]
    async fn a_cleaning_pass_marks_the_entries_of_deleted_jobs_dead() {
        let db = pgq_testkit::TestDatabase::new().await;
        let pool = db.pool();
        jobs(pool, 1500, "completed", "2 days").await;
        // An application whose connections turn index scans off: the planner's other choice is
        // a bitmap scan, as it is on a busy table whose statistics are those of an empty one.
        let options = db.connect_options().options([("enable_indexscan", "off")]);
        let client = crate::Client::new(sqlx::PgPool::connect_lazy_with(options));
        let day = Duration::from_secs(86_400);
        let pass = || super::delete_finished(client.store(), day, day, 1000);
        assert_eq!(pass().await.expect("a pass"), Some(1500));
        // The pass's second batch started at the last entry the first deleted: at most that one
        // is marked.
        assert!(dead_entries(pool, "pgq.jobs_finished_idx").await <= 1);

        jobs(pool, 10, "completed", "2 days").await;
        assert_eq!(pass().await.expect("a pass"), Some(10));
        let next_passes = || async {
            pass().await.expect("a pass");
        };
        // Those of the first pass's jobs, and in later passes the second's too.
        assert!(
            walk_until_marked(pool, "pgq.jobs_finished_idx", 1500, next_passes).await >= 1500,
            "the deleted jobs' entries are marked dead"
        );
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Own,
            &[
                (
                    "DELETE_FINISHED",
                    super::DELETE_FINISHED,
                    "bigint, bigint, bigint, bigint, timestamptz",
                ),
                (
                    "OLDEST_FINISHED_DUE_IN",
                    super::OLDEST_FINISHED_DUE_IN,
                    "bigint, bigint",
                ),
                ("DEPTH", super::DEPTH, ""),
            ],
        )
        .await;
    }
}

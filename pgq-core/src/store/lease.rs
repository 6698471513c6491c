//! Leases: renewing those of running jobs, extending one, rescuing expired ones. A lease that
//! ran out is never renewed: the job belongs to the rescuer then.

use sqlx::Row;

use crate::error::Result;
use crate::job_id::JobId;
use crate::store::attempt::{ERROR_HISTORY, Fence};
use crate::store::walk::walking_indexes;
use crate::store::{Store, run};

/// One held attempt and the lease length it keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldLease {
    pub(crate) id: JobId,
    pub(crate) attempt: i32,
    pub(crate) lease_ms: i64,
}

/// What renewal learned about one held job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Renewed {
    pub(crate) id: JobId,
    pub(crate) cancel_requested: bool,
}

/// Renewal never waits for a row: one that another statement holds (this worker's own
/// completion, an operator's cancel) is skipped this round, and still reported held when the
/// statement's snapshot shows it held, so that only a job another attempt took counts as lost.
/// Every read of the table is by `id = ANY($1)`, so that no plan of it scans the whole table
/// (see `store::tick`).
const RENEW: &str = "
WITH asked AS (
    SELECT * FROM ROWS FROM (unnest($1::bigint[]), unnest($2::int[]), unnest($3::bigint[]))
        AS asked(id, attempt, lease_ms)
),
holding AS (
    SELECT job.id, asked.lease_ms, job.cancel_requested_at IS NOT NULL AS cancel_requested
    FROM pgq.jobs AS job JOIN asked ON job.id = asked.id
    WHERE job.id = ANY($1::bigint[]) AND job.attempts = asked.attempt AND job.worker_id = $4
      AND (job.status = 'claimed' OR job.status = 'running')
      AND job.lease_expires_at > now()
),
locked AS (
    SELECT job.id, holding.lease_ms
    FROM pgq.jobs AS job JOIN holding ON job.id = holding.id
    WHERE job.id = ANY($1::bigint[]) AND job.worker_id = $4
      AND (job.status = 'claimed' OR job.status = 'running') AND job.lease_expires_at > now()
    ORDER BY job.id
    FOR UPDATE OF job SKIP LOCKED
),
renewed AS (
    UPDATE pgq.jobs AS job
    SET lease_expires_at = greatest(job.lease_expires_at,
                                    now() + (locked.lease_ms * interval '1 millisecond'))
    FROM locked
    WHERE job.id = ANY($1::bigint[]) AND job.id = locked.id
    RETURNING job.id
)
SELECT id, cancel_requested FROM holding";

/// Renews the leases of a worker's held jobs in one statement. Jobs missing from the result
/// have lost their lease.
pub(crate) async fn renew(
    store: &Store,
    worker_id: &str,
    held: &[HeldLease],
) -> Result<Vec<Renewed>> {
    run!(store, |conn| async {
        let rows = sqlx::query(store.sql(RENEW))
            .persistent(store.prepared())
            .bind(held.iter().map(|h| h.id.get()).collect::<Vec<_>>())
            .bind(held.iter().map(|h| h.attempt).collect::<Vec<_>>())
            .bind(held.iter().map(|h| h.lease_ms).collect::<Vec<_>>())
            .bind(worker_id)
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Renewed {
                    id: JobId::from(row.try_get::<i64, _>("id")?),
                    cancel_requested: row.try_get("cancel_requested")?,
                })
            })
            .collect::<Result<Vec<_>>>()
    })
}

const EXTEND: &str = "
UPDATE pgq.jobs
SET lease_expires_at = greatest(lease_expires_at, now() + ($4 * interval '1 millisecond'))
WHERE id = $1 AND attempts = $2 AND worker_id = $3 AND (status = 'claimed' OR status = 'running')
  AND lease_expires_at > now()";

/// Extends one lease. `false` when the fence no longer holds or the lease ran out.
pub(crate) async fn extend(store: &Store, fence: Fence<'_>, millis: i64) -> Result<bool> {
    run!(store, |conn| async {
        let done = sqlx::query(store.sql(EXTEND))
            .persistent(store.prepared())
            .bind(fence.id.get())
            .bind(fence.attempt)
            .bind(fence.worker_id)
            .bind(millis)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    })
}

/// What taking a held job back from its worker writes: `pending` with backoff, or `failed` when
/// its attempts are spent, or `cancelled` when a cancel was asked for (run again, it would not
/// be one); the attempt counts, with `$reason` (an SQL text expression) as its error, the error
/// history bounded by the parameter `$history`. Shared by the rescue of expired leases and the
/// release of dead workers' jobs.
macro_rules! take_back {
    ($reason:literal, $history:literal) => {
        concat!(
            "
    status = CASE WHEN job.cancel_requested_at IS NOT NULL THEN 'cancelled'
                  WHEN job.attempts >= job.max_attempts THEN 'failed' ELSE 'pending' END,
    phase = CASE WHEN job.cancel_requested_at IS NOT NULL
                      OR job.attempts >= job.max_attempts THEN 2 ELSE 0 END,
    run_at = CASE WHEN job.cancel_requested_at IS NOT NULL
                       OR job.attempts >= job.max_attempts THEN job.run_at
                  ELSE now() + pgq.default_backoff(job.attempts) END,
    completed_at = CASE WHEN job.cancel_requested_at IS NOT NULL
                             OR job.attempts >= job.max_attempts THEN now() END,
    last_error = ",
            $reason,
            ",
    errors = pgq.append_error(job.errors, job.attempts, ",
            $reason,
            ", ",
            $history,
            "),
    worker_id = CASE WHEN job.cancel_requested_at IS NOT NULL
                          OR job.attempts >= job.max_attempts THEN job.worker_id END,
    progress = CASE WHEN job.cancel_requested_at IS NOT NULL
                         OR job.attempts >= job.max_attempts THEN job.progress ELSE 0 END,
    current_stage = CASE WHEN job.cancel_requested_at IS NOT NULL
                              OR job.attempts >= job.max_attempts THEN job.current_stage END,
    lease_expires_at = NULL, updated_at = now()"
        )
    };
}
pub(crate) use take_back;

/// Expired held jobs go back to `pending` with backoff, or to `failed` when their attempts are
/// spent; each rescue is that attempt's error. SKIP LOCKED keeps concurrent rescuers apart. Run
/// walking the lease index in its order ([`walking_indexes`]): the entries of expired leases are
/// mostly those of jobs finished since the last vacuum.
const RESCUE: &str = concat!(
    "
WITH expired AS (
    SELECT id FROM pgq.jobs
    WHERE phase = 1 AND lease_expires_at <= now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE pgq.jobs AS job SET",
    take_back!(
        "'lease expired: worker ' || job.worker_id || ' stopped renewing it'",
        "$2"
    ),
    "
WHERE job.id = ANY(ARRAY(SELECT id FROM expired))
RETURNING job.id, job.queue"
);

/// Rescues up to `limit` jobs whose lease expired; with their queues.
pub(crate) async fn rescue(store: &Store, limit: i64) -> Result<Vec<(JobId, String)>> {
    run!(store, |conn| async {
        let mut tx = walking_indexes(store, conn).await?;
        let rows: Vec<(i64, String)> = sqlx::query_as(store.sql(RESCUE))
            .persistent(store.prepared())
            .bind(limit)
            .bind(ERROR_HISTORY)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(rows
            .into_iter()
            .map(|(id, queue)| (JobId::from(id), queue))
            .collect())
    })
}

#[cfg(test)]
mod tests {
    use crate::store::walk::tests::{jobs, walk_until_marked};

    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::RENEW, super::EXTEND, super::RESCUE]);
    }

    /// A rescue walks the expired leases in order, marking the entries of finished jobs dead on
    /// its way to the jobs still held, so that the next one steps over them.
    #[tokio::test]
    async fn a_rescue_marks_the_entries_of_finished_jobs_dead() {
        let db = pgq_testkit::TestDatabase::new().await;
        let pool = db.pool();
        jobs(pool, 1000, "completed", "2 hours").await;
        let held = jobs(pool, 3, "running", "1 hour").await;
        // An application whose connections turn index scans off: the planner's other choice is
        // a bitmap scan, as it is on a busy table whose statistics are those of an empty one.
        let options = db.connect_options().options([("enable_indexscan", "off")]);
        let client = crate::Client::new(sqlx::PgPool::connect_lazy_with(options));
        let rescue = || async {
            let ids = super::rescue(client.store(), 1000).await.expect("a rescue");
            let mut ids: Vec<i64> = ids.into_iter().map(|(id, _)| i64::from(id)).collect();
            ids.sort_unstable();
            ids
        };
        assert_eq!(rescue().await, held, "the held jobs rescued");
        // An entry for each finished job's claimed and running rows.
        let marked = walk_until_marked(pool, "pgq.jobs_lease_idx", 2000, || async {
            assert_eq!(rescue().await, Vec::<i64>::new());
        })
        .await;
        assert!(
            marked >= 2000,
            "every finished job's entries marked: {marked}"
        );
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Own,
            &[
                ("RENEW", super::RENEW, ""),
                ("EXTEND", super::EXTEND, ""),
                ("RESCUE", super::RESCUE, ""),
            ],
        )
        .await;
    }
}

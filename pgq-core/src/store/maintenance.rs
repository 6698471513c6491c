//! Table-wide upkeep: deleting old finished jobs, and per-queue statistics.

use std::time::Duration;

use sqlx::{Connection, PgPool, Row};

use crate::error::Result;
use crate::stats::QueueStats;

/// The advisory lock held while deleting old jobs ("pgq_clea" in ASCII): one process at a time.
const CLEAN_LOCK: i64 = 0x7067_715f_636c_6561;

const DELETE_FINISHED: &str = "
DELETE FROM pgq.jobs WHERE id IN (
    SELECT id FROM pgq.jobs
    WHERE phase = 2
      AND completed_at < now() - least($1, $2) * interval '1 millisecond'
      AND completed_at < now() - CASE WHEN status = 'completed' THEN $1 ELSE $2 END
                                 * interval '1 millisecond'
    LIMIT $3
)";

/// Deletes finished jobs older than their retention, `batch` rows per statement, unless
/// another process holds the cleaning lock (then `None`).
pub(crate) async fn delete_finished(
    pool: &PgPool,
    completed: Duration,
    failed: Duration,
    batch: i64,
) -> Result<Option<u64>> {
    let mut conn = pool.acquire().await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(CLEAN_LOCK)
        .fetch_one(&mut *conn)
        .await?;
    if !locked {
        return Ok(None);
    }
    let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let mut deleted = 0;
    let outcome = loop {
        let done = sqlx::query(DELETE_FINISHED)
            .bind(millis(completed))
            .bind(millis(failed))
            .bind(batch)
            .execute(&mut *conn)
            .await;
        match done {
            Ok(done) => {
                deleted += done.rows_affected();
                if done.rows_affected() < batch as u64 {
                    break Ok(Some(deleted));
                }
            }
            Err(err) => break Err(err.into()),
        }
    };
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(CLEAN_LOCK)
        .execute(&mut *conn)
        .await;
    if unlocked.is_err() {
        // The lock is tied to the session: closing it releases the lock.
        conn.detach().close().await.ok();
    }
    outcome
}

const STATS: &str = "
SELECT queue,
       count(*) FILTER (WHERE status = 'pending' AND run_at <= now()) AS due,
       count(*) FILTER (WHERE status = 'pending' AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE status = 'claimed') AS claimed,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE status = 'pending' AND run_at <= now()))::float8
           AS oldest_due_secs,
       count(*) FILTER (WHERE status = 'failed' AND completed_at > now() - interval '1 hour')
           AS failed_last_hour,
       coalesce(sum((SELECT count(*) FROM jsonb_array_elements(errors) AS e
                     WHERE (e->>'at')::timestamptz > now() - interval '1 hour'))
                FILTER (WHERE updated_at > now() - interval '1 hour'), 0)::bigint
           AS errors_last_hour
FROM pgq.jobs
GROUP BY queue
ORDER BY queue";

pub(crate) async fn stats(pool: &PgPool) -> Result<Vec<QueueStats>> {
    let rows = sqlx::query(STATS).fetch_all(pool).await?;
    let count = |row: &sqlx::postgres::PgRow, name: &str| -> Result<u64> {
        Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
    };
    rows.iter()
        .map(|row| {
            Ok(QueueStats {
                queue: row.try_get("queue")?,
                due: count(row, "due")?,
                scheduled: count(row, "scheduled")?,
                claimed: count(row, "claimed")?,
                running: count(row, "running")?,
                completed: count(row, "completed")?,
                failed: count(row, "failed")?,
                cancelled: count(row, "cancelled")?,
                oldest_due_age: row
                    .try_get::<Option<f64>, _>("oldest_due_secs")?
                    .map(|secs| Duration::from_secs_f64(secs.max(0.0))),
                failed_last_hour: count(row, "failed_last_hour")?,
                errors_last_hour: count(row, "errors_last_hour")?,
            })
        })
        .collect()
}

//! Finished jobs minute by minute: what a chart of the last hour draws.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::error::Result;
use crate::history::FinishedMinute;
use crate::store::{Store, run};

/// Jobs finished within the window from the finished-jobs index, counted per queue and
/// minute: never the whole history, nor a completion time written by hand past the current
/// minute (`infinity` included).
const FINISHED_BY_MINUTE: &str = "
SELECT queue, date_trunc('minute', completed_at) AS minute,
       count(*) FILTER (WHERE status = 'completed') AS completed,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'cancelled') AS cancelled
FROM pgq.jobs
WHERE phase = 2 AND completed_at >= ($1 - (($2 - 1) * interval '1 minute'))
  AND completed_at < ($1 + interval '1 minute')
GROUP BY queue, minute
ORDER BY queue, minute";

/// The database's clock now, to the minute: the chart's right edge.
const THIS_MINUTE: &str = "SELECT date_trunc('minute', now()) AS minute";

/// Each queue's finished jobs per minute over the last `minutes` minutes, and the current
/// minute by the database clock.
pub(crate) async fn finished_by_minute(
    store: &Store,
    minutes: u32,
) -> Result<(DateTime<Utc>, Vec<FinishedMinute>)> {
    run!(store, |conn| async {
        let now: DateTime<Utc> = sqlx::query_scalar(store.sql(THIS_MINUTE))
            .persistent(store.prepared())
            .fetch_one(&mut *conn)
            .await?;
        let rows = sqlx::query(store.sql(FINISHED_BY_MINUTE))
            .persistent(store.prepared())
            .bind(now)
            .bind(i64::from(minutes))
            .fetch_all(&mut *conn)
            .await?;
        let count = |row: &sqlx::postgres::PgRow, name: &str| -> Result<u64> {
            Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0))
        };
        let minutes = rows
            .iter()
            .map(|row| {
                Ok(FinishedMinute {
                    queue: row.try_get("queue")?,
                    minute: row.try_get("minute")?,
                    completed: count(row, "completed")?,
                    failed: count(row, "failed")?,
                    cancelled: count(row, "cancelled")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((now, minutes))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::FINISHED_BY_MINUTE, super::THIS_MINUTE]);
    }
}

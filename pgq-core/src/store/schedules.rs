//! The schedules' rows in `pgq.schedules`: what each schedule is, for operators, and its
//! watermark (`done_through`), which makes every instant enqueue exactly once. The watermark
//! moves only by a compare-and-set in the transaction that inserts the instants' jobs: a
//! second leader that computed the same instants finds it moved, and its transaction, jobs
//! included, rolls back.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::enqueue::PreparedTask;
use crate::enqueued::{Enqueued, JobTemplate};
use crate::error::Result;
use crate::job_id::JobId;
use crate::store::moment::{Moment, maybe_moment, moment};
use crate::store::{Store, enqueue, run};

/// Writes each schedule's definition; a new one starts its watermark at `$7` (now: it enqueues
/// from its next instant on), one already known keeps its watermark. Returns the watermarks.
const REGISTER: &str = "
INSERT INTO pgq.schedules AS s (name, task, cron, time_zone, missed, role, done_through)
SELECT d.name, d.task, d.cron, d.time_zone, d.missed, $6, $7::timestamptz
FROM ROWS FROM (unnest($1::text[]), unnest($2::text[]), unnest($3::text[]),
                unnest($4::text[]), unnest($5::text[])) AS d(name, task, cron, time_zone, missed)
ORDER BY d.name
ON CONFLICT (name) DO UPDATE SET
    task = EXCLUDED.task, cron = EXCLUDED.cron, time_zone = EXCLUDED.time_zone,
    missed = EXCLUDED.missed, role = EXCLUDED.role, updated_at = now()
RETURNING s.name, s.done_through";

/// Moves a watermark from `$2` to `$3`, only if no one moved it since it was read. The role that
/// moved it (`$6`) is the one whose leader the schedule lists: during a deploy, processes with
/// another set of schedules lead it under another role, and the one that stops last must not
/// leave it listed under a role no one holds.
const ADVANCE: &str = "
UPDATE pgq.schedules
SET done_through = $3, last_instant = coalesce($4, last_instant),
    last_job_id = coalesce($5, last_job_id), role = $6, updated_at = now()
WHERE name = $1 AND done_through = $2";

/// Every schedule, with the live leader of its role and the database's clock.
const LIST: &str = "
SELECT s.name, s.task, s.cron, s.time_zone, s.missed, s.done_through, s.last_instant,
       s.last_job_id, l.holder AS leader, now() AS now
FROM pgq.schedules AS s
LEFT JOIN pgq.leaders AS l ON l.role = s.role AND l.expires_at >= now()
ORDER BY s.name";

/// One schedule's definition, as `REGISTER` writes it.
#[derive(Debug)]
pub(crate) struct Definition<'a> {
    pub(crate) name: &'a str,
    pub(crate) task: &'a str,
    pub(crate) cron: &'a str,
    pub(crate) time_zone: &'a str,
    pub(crate) missed: String,
}

/// Writes the definitions; each schedule's watermark, by name.
pub(crate) async fn register(
    store: &Store,
    definitions: &[Definition<'_>],
    role: &str,
    now: DateTime<Utc>,
) -> Result<Vec<(String, DateTime<Utc>)>> {
    let names: Vec<&str> = definitions.iter().map(|d| d.name).collect();
    let tasks: Vec<&str> = definitions.iter().map(|d| d.task).collect();
    let crons: Vec<&str> = definitions.iter().map(|d| d.cron).collect();
    let zones: Vec<&str> = definitions.iter().map(|d| d.time_zone).collect();
    let missed: Vec<&str> = definitions.iter().map(|d| d.missed.as_str()).collect();
    let watermarks: Vec<(String, Moment)> = run!(store, |conn| async {
        Ok(sqlx::query_as(store.sql(REGISTER))
            .persistent(store.prepared())
            .bind(&names)
            .bind(&tasks)
            .bind(&crons)
            .bind(&zones)
            .bind(&missed)
            .bind(role)
            .bind(now)
            .fetch_all(&mut *conn)
            .await?)
    })?;
    Ok(watermarks
        .into_iter()
        .map(|(name, done)| (name, done.into()))
        .collect())
}

/// One instant's job, ready to insert.
#[derive(Debug)]
pub(crate) struct InstantJob<'a> {
    pub(crate) template: JobTemplate<'a>,
    pub(crate) task: PreparedTask,
}

/// Inserts the jobs and moves the watermark from `from` to `to` in one transaction; the ids of
/// the jobs inserted (an instant whose unique key an active job holds inserts none). `None`
/// when someone else moved it first: nothing was written.
pub(crate) async fn advance(
    store: &Store,
    name: &str,
    role: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    jobs: &[InstantJob<'_>],
) -> Result<Option<Vec<JobId>>> {
    run!(store, |conn| async {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let mut ids = Vec::with_capacity(jobs.len());
        for job in jobs {
            let enqueued =
                enqueue::insert_one(store, &mut tx, &job.template, &job.task, false, true)
                    .await?
                    .enqueued;
            if let Enqueued::Inserted(id) = enqueued {
                ids.push(id);
            }
        }
        let last_instant = jobs.last().and_then(|job| job.template.run_at);
        let moved = sqlx::query(store.sql(ADVANCE))
            .persistent(store.prepared())
            .bind(name)
            .bind(from)
            .bind(to)
            .bind(last_instant)
            .bind(ids.last().map(|id| id.get()))
            .bind(role)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if moved == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(ids))
    })
}

/// A schedule's row, as operators see it.
#[derive(Debug)]
pub(crate) struct ScheduleRow {
    pub(crate) name: String,
    pub(crate) task: String,
    pub(crate) cron: String,
    pub(crate) time_zone: String,
    pub(crate) missed: String,
    pub(crate) done_through: DateTime<Utc>,
    pub(crate) last_instant: Option<DateTime<Utc>>,
    pub(crate) last_job_id: Option<i64>,
    pub(crate) leader: Option<String>,
    pub(crate) now: DateTime<Utc>,
}

pub(crate) async fn list(store: &Store) -> Result<Vec<ScheduleRow>> {
    run!(store, |conn| async {
        let rows = sqlx::query(store.sql(LIST))
            .persistent(store.prepared())
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(ScheduleRow {
                    name: row.try_get("name")?,
                    task: row.try_get("task")?,
                    cron: row.try_get("cron")?,
                    time_zone: row.try_get("time_zone")?,
                    missed: row.try_get("missed")?,
                    done_through: moment(row, "done_through")?,
                    last_instant: maybe_moment(row, "last_instant")?,
                    last_job_id: row.try_get("last_job_id")?,
                    leader: row.try_get("leader")?,
                    now: row.try_get("now")?,
                })
            })
            .collect::<Result<Vec<_>>>()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::REGISTER, super::ADVANCE, super::LIST]);
    }
}

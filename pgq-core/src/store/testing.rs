//! The statements behind `pgq-testkit`: test databases, moving time, and reading what waits.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

use crate::error::{Error, Result};
use crate::job_id::JobId;
use crate::store::{Store, control};

/// A database name made of ASCII letters, digits and `_`, quoted: DDL cannot bind it.
fn database_name(name: &str) -> Result<String> {
    let plain = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        Ok(format!("\"{name}\""))
    } else {
        Err(Error::InvalidWorker(format!(
            "test database name {name:?}: use 1 to 63 ASCII letters, digits and '_'"
        )))
    }
}

/// Runs one statement about databases on a connection of its own to the server.
async fn on_server(server: &PgConnectOptions, statement: String) -> Result<()> {
    let mut admin = server.connect().await?;
    sqlx::raw_sql(AssertSqlSafe(statement))
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    Ok(())
}

pub(crate) async fn create_database(server: &PgConnectOptions, name: &str) -> Result<()> {
    let name = database_name(name)?;
    on_server(server, format!("CREATE DATABASE {name}")).await
}

pub(crate) async fn drop_database(server: &PgConnectOptions, name: &str) -> Result<()> {
    let name = database_name(name)?;
    on_server(
        server,
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    )
    .await
}

/// The databases named `prefix…` that no session is connected to. Written qualified, as
/// `store::sql` renders pgq's statements: it runs on the server's admin connection, not a
/// store's.
const IDLE_DATABASES: &str = "
SELECT d.datname::pg_catalog.text FROM pg_catalog.pg_database AS d
WHERE pg_catalog.starts_with(d.datname::pg_catalog.text, $1)
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity AS a
                  WHERE a.datid OPERATOR(pg_catalog.=) d.oid)";

pub(crate) async fn idle_databases(server: &PgConnectOptions, prefix: &str) -> Result<Vec<String>> {
    let mut admin = server.connect().await?;
    let names = sqlx::query_scalar(IDLE_DATABASES)
        .bind(prefix)
        .fetch_all(&mut admin)
        .await?;
    admin.close().await?;
    Ok(names)
}

/// Drops the database `name` unless a session is connected to it (PostgreSQL refuses then).
pub(crate) async fn drop_idle_database(server: &PgConnectOptions, name: &str) -> Result<()> {
    let name = database_name(name)?;
    on_server(server, format!("DROP DATABASE IF EXISTS {name}")).await
}

/// Times move back at most to 1970, the earliest a job's `run_at` may be: a jump past it leaves
/// every job due, as it would be. (Moved further, a time would leave timestamptz's range.)
const ADVANCE: &str = "
UPDATE pgq.jobs
SET run_at = run_at - least($1 * interval '1 microsecond',
                            run_at - '1970-01-01 00:00:00+00'::timestamptz),
    lease_expires_at = lease_expires_at
        - least($1 * interval '1 microsecond',
                lease_expires_at - '1970-01-01 00:00:00+00'::timestamptz)
WHERE phase < 2";

/// Longer than from 1970 to the latest `run_at` (10000): any longer jump does the same.
const LONGEST_ADVANCE: Duration = Duration::from_secs(9_000 * 366 * 24 * 3600);

pub(crate) async fn advance(store: &Store, by: Duration) -> Result<()> {
    let pool = store.pool();
    let by = by.min(LONGEST_ADVANCE);
    sqlx::query(store.sql(ADVANCE))
        .persistent(store.prepared())
        .bind(i64::try_from(by.as_micros()).unwrap_or(i64::MAX))
        .execute(pool)
        .await?;
    Ok(())
}

/// Idle workers of the job's queue are woken, as by an enqueue.
const MAKE_DUE: &str = "UPDATE pgq.jobs SET run_at = now(), updated_at = now()
    WHERE id = $1 AND status = 'pending'
    RETURNING pg_notify('pgq_insert', queue)";

/// A job that is missing, or not pending, is refused as [`control::refusal`] tells.
pub(crate) async fn make_due(store: &Store, id: JobId) -> Result<()> {
    let mut conn = store.pool().acquire().await?;
    let made_due = sqlx::query(store.sql(MAKE_DUE))
        .persistent(store.prepared())
        .bind(id.get())
        .fetch_optional(&mut *conn)
        .await?;
    match made_due {
        Some(_) => Ok(()),
        None => Err(control::refusal(store, &mut conn, id, "make due").await?),
    }
}

/// For each queue: whether any job is in it, and its first due pending jobs whose task is not
/// one of `$2` (no handler linked), as `job ID (TASK)`.
const LEFTOVERS: &str = "
SELECT q.queue,
       EXISTS (SELECT 1 FROM pgq.jobs WHERE queue = q.queue) AS used,
       ARRAY(SELECT 'job ' || id || ' (' || task || ')' FROM pgq.jobs
             WHERE queue = q.queue AND phase = 0 AND run_at <= now() AND task <> ALL ($2)
             ORDER BY id LIMIT 5) AS stranded
FROM unnest($1::text[]) AS q(queue)";

/// Per queue of `queues`: whether any job is in it, and due jobs no task of `runnable` runs.
pub(crate) async fn leftovers(
    store: &Store,
    queues: &[String],
    runnable: &[&str],
) -> Result<Vec<(String, bool, Vec<String>)>> {
    let rows = sqlx::query_as(store.sql(LEFTOVERS))
        .persistent(store.prepared())
        .bind(queues)
        .bind(runnable)
        .fetch_all(store.pool())
        .await?;
    Ok(rows)
}

const PENDING: &str =
    "SELECT id, payload FROM pgq.jobs WHERE task = $1 AND status = 'pending' ORDER BY id";

pub(crate) async fn pending(store: &Store, task: &str) -> Result<Vec<(JobId, serde_json::Value)>> {
    let pool = store.pool();
    let rows: Vec<(i64, serde_json::Value)> = sqlx::query_as(store.sql(PENDING))
        .persistent(store.prepared())
        .bind(task)
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(id, payload)| (JobId::from(id), payload))
        .collect())
}

/// Every pending job of the queues moves back by as much as the latest one is ahead, so that all
/// are due and keep their order (the earliest bound kept: a job a century ahead leaves the
/// others at pgq's earliest time).
const MAKE_QUEUES_DUE: &str = "
WITH ahead AS (
    SELECT max(run_at) - now() AS by FROM pgq.jobs
    WHERE phase = 0 AND run_at > now() AND queue = ANY($1)
),
moved AS (
    UPDATE pgq.jobs AS job
    SET run_at = greatest(job.run_at - ahead.by, '1970-01-01 00:00:00+00'::timestamptz)
    FROM ahead
    WHERE ahead.by IS NOT NULL AND job.phase = 0 AND job.queue = ANY($1)
    RETURNING job.run_at
)
SELECT count(*) FROM moved WHERE run_at > (now() - (SELECT by FROM ahead))";

/// Makes every pending job of `queues` due now, in the order their run times gave them;
/// returns how many were scheduled later.
pub(crate) async fn make_queues_due(store: &Store, queues: &[String]) -> Result<u64> {
    let pool = store.pool();
    let later: i64 = sqlx::query_scalar(store.sql(MAKE_QUEUES_DUE))
        .persistent(store.prepared())
        .bind(queues)
        .fetch_one(pool)
        .await?;
    Ok(u64::try_from(later).unwrap_or(0))
}

const OF_TASK: &str = "SELECT * FROM pgq.jobs WHERE task = $1 ORDER BY id";

/// Every job of `task`, whatever its status, oldest id first, as `conn` sees them (inside its
/// transaction, if it has one open); pgq's tables in `schema`.
pub(crate) async fn of_task(
    conn: &mut sqlx::PgConnection,
    schema: &str,
    task: &str,
) -> Result<Vec<crate::job::Job>> {
    let sql = crate::store::sql::render(OF_TASK, schema);
    let rows = sqlx::query(AssertSqlSafe(sql))
        .bind(task)
        .fetch_all(conn)
        .await?;
    rows.iter().map(crate::store::job::decode).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::ADVANCE,
            super::MAKE_DUE,
            super::LEFTOVERS,
            super::MAKE_QUEUES_DUE,
            super::OF_TASK,
        ]);
    }
}

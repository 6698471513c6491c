//! Inserting jobs: one, or many in one statement, honouring unique keys.

use chrono::{DateTime, Utc};
use sqlx::{Acquire, PgConnection, Postgres, Row};

use crate::enqueue::Enqueued;
use crate::error::{Error, Result};
use crate::job_id::JobId;

/// Everything a new row needs but its payload and unique key.
#[derive(Debug)]
pub(crate) struct JobTemplate<'a> {
    pub(crate) task: &'static str,
    pub(crate) queue: &'a str,
    pub(crate) priority: i16,
    pub(crate) max_attempts: i32,
    /// An absolute start time; when `None`, `now() + delay_ms` by the database clock.
    pub(crate) run_at: Option<DateTime<Utc>>,
    pub(crate) delay_ms: i64,
}

/// How often an enqueue retries when the job holding its unique key finishes in between the
/// insert and the lookup. Each round needs a job to finish exactly then; ten never happen.
const CONFLICT_ROUNDS: usize = 10;

macro_rules! insert_one {
    ($on_conflict:literal) => {
        concat!(
            "WITH inserted AS (
                INSERT INTO pgq.jobs (task, queue, priority, max_attempts, payload, unique_key, run_at)
                VALUES ($1, $2, $3, $4, $5::jsonb, $6,
                        COALESCE($7, now() + $8 * interval '1 millisecond'))
                ON CONFLICT (task, unique_key)
                    WHERE unique_key IS NOT NULL AND status IN ('pending', 'claimed', 'running')
                ",
            $on_conflict,
            "
                RETURNING id, queue, run_at, xmax = 0 AS inserted
            )
            SELECT id, inserted,
                   CASE WHEN run_at <= now() THEN pg_notify('pgq_insert', queue) END AS notified
            FROM inserted"
        )
    };
}

const INSERT_ONE: &str = insert_one!("DO NOTHING");

const REPLACE_ONE: &str = insert_one!(
    "DO UPDATE SET payload = EXCLUDED.payload, priority = EXCLUDED.priority,
                   run_at = EXCLUDED.run_at, updated_at = now()
     WHERE pgq.jobs.status = 'pending'"
);

const FIND_ACTIVE: &str = "SELECT id FROM pgq.jobs
    WHERE task = $1 AND unique_key = $2 AND status IN ('pending', 'claimed', 'running')";

/// Inserts one job, or finds the active job holding its unique key.
pub(crate) async fn insert_one<'c, A>(
    conn: A,
    job: &JobTemplate<'_>,
    payload: &str,
    unique_key: Option<&str>,
    replace: bool,
) -> Result<Enqueued>
where
    A: Acquire<'c, Database = Postgres>,
{
    let mut conn = conn.acquire().await?;
    let sql = if replace { REPLACE_ONE } else { INSERT_ONE };
    for _ in 0..CONFLICT_ROUNDS {
        let row = sqlx::query(sql)
            .bind(job.task)
            .bind(job.queue)
            .bind(job.priority)
            .bind(job.max_attempts)
            .bind(payload)
            .bind(unique_key)
            .bind(job.run_at)
            .bind(job.delay_ms)
            .fetch_optional(&mut *conn)
            .await?;
        if let Some(row) = row {
            let id = JobId::from(row.try_get::<i64, _>("id")?);
            return Ok(if row.try_get("inserted")? {
                Enqueued::Inserted(id)
            } else {
                Enqueued::Replaced(id)
            });
        }
        let Some(key) = unique_key else {
            // DO NOTHING only skips on a unique-key conflict.
            unreachable!("insert without a unique key returned no row");
        };
        if let Some(id) = find_active(&mut conn, job.task, key).await? {
            return Ok(Enqueued::Duplicate(id));
        }
    }
    Err(unique_contention(job.task, unique_key.unwrap_or_default()))
}

async fn find_active(conn: &mut PgConnection, task: &str, key: &str) -> Result<Option<JobId>> {
    let id: Option<i64> = sqlx::query_scalar(FIND_ACTIVE)
        .bind(task)
        .bind(key)
        .fetch_optional(conn)
        .await?;
    Ok(id.map(JobId::from))
}

fn unique_contention(task: &'static str, key: &str) -> Error {
    Error::InvalidOption {
        task,
        option: "unique_key",
        reason: format!("the active job holding key {key:?} kept changing; try again"),
    }
}

/// One statement for the whole batch. Ids are drawn up front so each input row can be matched
/// to its inserted row; a row that lost its unique key to an earlier row of the same batch or
/// to an existing job gets that job's id.
const INSERT_MANY: &str = "
WITH input AS (
    SELECT nextval('pgq.jobs_id_seq') AS id, t.payload, t.unique_key, t.ord
    FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(payload, unique_key, ord)
),
inserted AS (
    INSERT INTO pgq.jobs (id, task, queue, priority, max_attempts, payload, unique_key, run_at)
    SELECT id, $3, $4, $5, $6, payload::jsonb, unique_key,
           COALESCE($7, now() + $8 * interval '1 millisecond')
    FROM input
    ORDER BY ord
    ON CONFLICT (task, unique_key)
        WHERE unique_key IS NOT NULL AND status IN ('pending', 'claimed', 'running')
        DO NOTHING
    RETURNING id, unique_key, run_at
),
notified AS (
    SELECT pg_notify('pgq_insert', $4)
    WHERE EXISTS (SELECT 1 FROM inserted WHERE run_at <= now())
)
SELECT input.ord,
       COALESCE(own.id, same_key.id, existing.id) AS id,
       own.id IS NOT NULL AS inserted
FROM input
LEFT JOIN inserted own ON own.id = input.id
LEFT JOIN inserted same_key
       ON own.id IS NULL AND same_key.unique_key = input.unique_key
LEFT JOIN pgq.jobs existing
       ON own.id IS NULL AND same_key.id IS NULL
      AND existing.task = $3 AND existing.unique_key = input.unique_key
      AND existing.status IN ('pending', 'claimed', 'running')
CROSS JOIN (SELECT count(*) FROM notified) AS notify
ORDER BY input.ord";

/// Inserts many jobs of one task in one statement (a few more only when racing unique keys).
pub(crate) async fn insert_many<'c, A>(
    conn: A,
    job: &JobTemplate<'_>,
    payloads: Vec<String>,
    unique_keys: Vec<Option<String>>,
) -> Result<Vec<Enqueued>>
where
    A: Acquire<'c, Database = Postgres>,
{
    let mut conn = conn.acquire().await?;
    let mut results: Vec<Option<Enqueued>> = vec![None; payloads.len()];
    let mut pending: Vec<usize> = (0..payloads.len()).collect();
    for _ in 0..CONFLICT_ROUNDS {
        if pending.is_empty() {
            break;
        }
        let batch_payloads: Vec<&str> = pending.iter().map(|&i| payloads[i].as_str()).collect();
        let batch_keys: Vec<Option<&str>> =
            pending.iter().map(|&i| unique_keys[i].as_deref()).collect();
        let rows = sqlx::query(INSERT_MANY)
            .bind(batch_payloads)
            .bind(batch_keys)
            .bind(job.task)
            .bind(job.queue)
            .bind(job.priority)
            .bind(job.max_attempts)
            .bind(job.run_at)
            .bind(job.delay_ms)
            .fetch_all(&mut *conn)
            .await?;
        let mut unresolved = Vec::new();
        for row in rows {
            let index = pending[usize::try_from(row.try_get::<i64, _>("ord")? - 1).unwrap_or(0)];
            match row.try_get::<Option<i64>, _>("id")? {
                Some(id) if row.try_get("inserted")? => {
                    results[index] = Some(Enqueued::Inserted(id.into()))
                }
                Some(id) => results[index] = Some(Enqueued::Duplicate(id.into())),
                // The job holding the key finished between the insert and the lookup.
                None => unresolved.push(index),
            }
        }
        pending = unresolved;
    }
    if let Some(&index) = pending.first() {
        return Err(unique_contention(
            job.task,
            unique_keys[index].as_deref().unwrap_or_default(),
        ));
    }
    Ok(results.into_iter().flatten().collect())
}

//! Inserting jobs: one, or many in one statement, honouring unique keys.

use std::collections::{HashMap, HashSet};

use sqlx::postgres::PgArguments;
use sqlx::query::QueryScalar;
use sqlx::{PgConnection, Postgres, Row};

use crate::enqueue::{PreparedBatch, PreparedTask};
use crate::enqueued::{Enqueued, JobTemplate};
use crate::error::{Error, Result};
use crate::job_id::JobId;
use crate::store::{Store, run};

/// How often an enqueue retries when the job holding its unique key finishes in between the
/// insert and the lookup. Each round needs a job to finish exactly then; ten never happen.
const CONFLICT_ROUNDS: usize = 10;

/// One row, and in the same statement (no CTE: a one-row insert pays for its plan nodes) the
/// notification when `$9` asks for one and the job is due. A delay counts from the statement
/// (`clock_timestamp()`), not from the start of the transaction it runs in. `$columns` and
/// `$values` add what only some jobs have: a column left out takes its default, a constant the
/// plan holds (migration 0011), where a value given, even NULL, is checked against the column's
/// domain at every insert.
macro_rules! insert_one {
    ($columns:literal, $values:literal, $on_conflict:expr) => {
        concat!(
            "INSERT INTO pgq.jobs (task, queue, priority, max_attempts, payload, run_at",
            $columns,
            ")
            VALUES ($1, $2, $3, $4, $5::jsonb,
                    COALESCE($7, clock_timestamp() + ($8 * interval '1 millisecond'))",
            $values,
            ")
            ",
            $on_conflict,
            "
            RETURNING id, xmax = 0 AS inserted,
                      CASE WHEN $9 AND run_at <= clock_timestamp()
                           THEN pg_notify('pgq_insert', queue) IS NOT NULL END AS notified"
        )
    };
}

/// A unique key ($6) taken by an active job: no row.
macro_rules! skip_taken_key {
    () => {
        "ON CONFLICT (task, unique_key) WHERE unique_key IS NOT NULL AND phase < 2 DO NOTHING"
    };
}

/// A unique key ($6) taken by a pending job: that job takes the new one's payload, priority and
/// run time, and `$also` (with `$columns` and `$values`, the new job's extra columns as in
/// [`insert_one`]). Not `ON CONFLICT DO UPDATE ... WHERE`: that locks the holder whatever its
/// status, until the enqueue's transaction ends, and a held job's row locked by an application's
/// open transaction stalls its worker's writes. The update locks only a pending holder; without
/// one, the insert skips a taken key, and a pending holder that appeared since (inserted, or
/// put back to pending) is updated in the next round.
macro_rules! replace_one {
    ($columns:literal, $values:literal, $also:expr) => {
        concat!(
            "WITH replaced AS (
    UPDATE pgq.jobs AS job
    SET payload = $5::jsonb, priority = $3,
        run_at = COALESCE($7, clock_timestamp() + ($8 * interval '1 millisecond')), ",
            $also,
            "updated_at = now()
    WHERE job.task = $1 AND job.unique_key = $6 AND job.phase < 2 AND job.status = 'pending'
    RETURNING job.id, false AS inserted,
              CASE WHEN $9 AND job.run_at <= clock_timestamp()
                   THEN pg_notify('pgq_insert', job.queue) IS NOT NULL AND job.queue = $2
              END AS notified
),
inserted AS (
    INSERT INTO pgq.jobs (task, queue, priority, max_attempts, payload, run_at, unique_key",
            $columns,
            ")
    SELECT $1, $2, $3, $4, $5::jsonb,
           COALESCE($7, clock_timestamp() + ($8 * interval '1 millisecond')), $6",
            $values,
            "
    WHERE NOT EXISTS (SELECT 1 FROM replaced)
    ON CONFLICT (task, unique_key) WHERE unique_key IS NOT NULL AND phase < 2 DO NOTHING
    RETURNING id, true AS inserted,
              CASE WHEN $9 AND run_at <= clock_timestamp()
                   THEN pg_notify('pgq_insert', queue) IS NOT NULL END AS notified
)
SELECT id, inserted, notified FROM replaced
UNION ALL
SELECT id, inserted, notified FROM inserted"
        )
    };
}

/// Without a unique key there is nothing to conflict on, and a plain insert skips the
/// speculative insertion `ON CONFLICT` costs every row.
const INSERT_ONE: &str = insert_one!("", "", "");

const INSERT_ONE_UNIQUE: &str = insert_one!(", unique_key", ", $6", skip_taken_key!());

const REPLACE_ONE: &str = replace_one!("", "", "");

/// A replace's metadata: the holder's, with the new job's over it key by key — its tags when it
/// names any (the holder's stay otherwise), its trace context. When the two together would pass
/// the column's bound: the new job's alone if it names tags, else the holder's (its tags kept,
/// the trace context, a courtesy, dropped).
macro_rules! replaced_meta {
    () => {
        "meta = CASE WHEN $10::jsonb IS NULL THEN job.meta
                WHEN octet_length((coalesce(job.meta, '{}'::jsonb) || $10::jsonb)::text) <= 4096
                THEN coalesce(job.meta, '{}'::jsonb) || $10::jsonb
                WHEN $10::jsonb ? 'tags' THEN $10::jsonb
                ELSE job.meta END, "
    };
}

/// Jobs with metadata (tags, trace context), $10: plain jobs never pay for the column's domain
/// check.
const INSERT_ONE_META: &str = insert_one!(", meta", ", $10::jsonb", "");

const INSERT_ONE_UNIQUE_META: &str =
    insert_one!(", unique_key, meta", ", $6, $10::jsonb", skip_taken_key!());

const REPLACE_ONE_META: &str = replace_one!(", meta", ", $10::jsonb", replaced_meta!());

/// Jobs with a concurrency key: its key and limit ($11, $12) and its metadata, maybe NULL, so
/// that plain jobs keep their statements.
const INSERT_ONE_CONCURRENCY: &str = insert_one!(
    ", meta, concurrency_key, concurrency_limit",
    ", $10::jsonb, $11, $12",
    ""
);

const INSERT_ONE_UNIQUE_CONCURRENCY: &str = insert_one!(
    ", unique_key, meta, concurrency_key, concurrency_limit",
    ", $6, $10::jsonb, $11, $12",
    skip_taken_key!()
);

/// A replace merges the new job's metadata into the pending job's, as [`REPLACE_ONE_META`]
/// does, and takes the new job's concurrency key and limit: the key is made from the payload
/// it replaces.
const REPLACE_ONE_CONCURRENCY: &str = replace_one!(
    ", meta, concurrency_key, concurrency_limit",
    ", $10::jsonb, $11, $12",
    concat!(
        replaced_meta!(),
        "concurrency_key = $11, concurrency_limit = $12, "
    )
);

const FIND_ACTIVE: &str = "SELECT id, status = 'pending' AS pending FROM pgq.jobs
    WHERE task = $1 AND unique_key = $2 AND phase < 2";

/// One enqueue's outcome, and whether its statement notified the idle workers of the queue it
/// enqueued to (a replaced job keeps its queue, which may be another).
#[derive(Debug, Clone, Copy)]
pub(crate) struct InsertedOne {
    pub(crate) enqueued: Enqueued,
    pub(crate) notified: bool,
}

/// Inserts one job, or finds the active job holding its unique key. `notify`: whether the
/// statement itself wakes idle workers (when due now).
pub(crate) async fn insert_one(
    store: &Store,
    conn: &mut PgConnection,
    job: &JobTemplate<'_>,
    task: &PreparedTask,
    replace: bool,
    notify: bool,
) -> Result<InsertedOne> {
    let payload = task.payload.as_str();
    let unique_key = task.unique_key.as_deref();
    let concurrency = task.concurrency.as_ref();
    let sql = match (
        unique_key,
        replace,
        job.meta.is_some(),
        concurrency.is_some(),
    ) {
        (None, _, _, true) => INSERT_ONE_CONCURRENCY,
        (Some(_), false, _, true) => INSERT_ONE_UNIQUE_CONCURRENCY,
        (Some(_), true, _, true) => REPLACE_ONE_CONCURRENCY,
        (None, _, false, false) => INSERT_ONE,
        (Some(_), false, false, false) => INSERT_ONE_UNIQUE,
        (Some(_), true, false, false) => REPLACE_ONE,
        (None, _, true, false) => INSERT_ONE_META,
        (Some(_), false, true, false) => INSERT_ONE_UNIQUE_META,
        (Some(_), true, true, false) => REPLACE_ONE_META,
    };
    for _ in 0..CONFLICT_ROUNDS {
        let query = sqlx::query(store.sql(sql))
            .persistent(store.prepared())
            .bind(job.task)
            .bind(job.queue)
            .bind(job.priority)
            .bind(job.max_attempts)
            .bind(payload)
            .bind(unique_key)
            .bind(job.run_at)
            .bind(job.delay_ms)
            .bind(notify);
        let query = match (&job.meta, concurrency) {
            (meta, Some(concurrency)) => query
                .bind(meta.as_deref())
                .bind(concurrency.key.as_str())
                .bind(concurrency.limit),
            (Some(meta), None) => query.bind(meta.as_str()),
            (None, None) => query,
        };
        let row = query.fetch_optional(&mut *conn).await?;
        if let Some(row) = row {
            let id = JobId::from(row.try_get::<i64, _>("id")?);
            let enqueued = if row.try_get("inserted")? {
                Enqueued::Inserted(id)
            } else {
                Enqueued::Replaced(id)
            };
            let notified = row.try_get::<Option<bool>, _>("notified")?.unwrap_or(false);
            return Ok(InsertedOne { enqueued, notified });
        }
        let Some(key) = unique_key else {
            // DO NOTHING only skips on a unique-key conflict: a trigger skipped the row.
            return Err(no_row_stored(1, 0));
        };
        match find_active(store, conn, job.task, key).await? {
            // A replace meets a holder inserted, or put back to pending, since its update
            // looked: the next round's update changes it.
            Some((_, true)) if replace => {}
            Some((id, _)) => {
                return Ok(InsertedOne {
                    enqueued: Enqueued::Duplicate(id),
                    notified: false,
                });
            }
            None => {}
        }
    }
    Err(unique_contention(job.task, unique_key.unwrap_or_default()))
}

/// An insert the database answered with fewer rows than it was given, with no unique key to
/// explain it: a `BEFORE INSERT` trigger of the application's on `pgq.jobs` returned NULL.
/// (The rows it kept stand or fall with the transaction the insert ran in.)
fn no_row_stored(given: usize, inserted: usize) -> Error {
    Error::Database(sqlx::Error::Protocol(format!(
        "a trigger on the jobs table skipped {} of {given} jobs (the insert returned {inserted})",
        given - inserted
    )))
}

async fn find_active(
    store: &Store,
    conn: &mut PgConnection,
    task: &str,
    key: &str,
) -> Result<Option<(JobId, bool)>> {
    let found: Option<(i64, bool)> = sqlx::query_as(store.sql(FIND_ACTIVE))
        .persistent(store.prepared())
        .bind(task)
        .bind(key)
        .fetch_optional(conn)
        .await?;
    Ok(found.map(|(id, pending)| (JobId::from(id), pending)))
}

fn unique_contention(task: &'static str, key: &str) -> Error {
    Error::InvalidOption {
        task,
        option: "unique_key",
        reason: format!(
            "the active job holding key {key:?} kept changing, or a trigger on the jobs table \
             skips the insert; try again"
        ),
    }
}

/// A batch statement's values shared by every row ($1 to $7), typed once. A value written to
/// a domain-typed column is checked against its domain for each row, the columns' defaults
/// too; values that already have the column's type are not. So the batch's settings and the
/// defaults of a new row are cast here, in a one-row CTE, and every row reads them from it.
/// The inserted ids come back as one array: one row to send and decode instead of one a job.
/// Every row of a batch has the batch's run time, so whether the batch is due is asked once,
/// after its inserts, rather than for each row.
macro_rules! with_batch_job {
    ($rest:literal) => {
        concat!(
            "WITH job AS MATERIALIZED (
                SELECT $1::pgq.task_name AS task, $2::pgq.queue_name AS queue,
                       $3::pgq.priority AS priority, $4::pgq.max_attempts AS max_attempts,
                       COALESCE($5, clock_timestamp() + ($6 * interval '1 millisecond'))
                           AS run_at,
                       'pending'::pgq.job_status AS status, 0::pgq.attempt_count AS attempts,
                       '[]'::pgq.error_history AS errors, 0::pgq.percent AS progress,
                       0::pgq.event_count AS events_count, $7::jsonb::pgq.job_meta AS meta
            ),",
            $rest,
            "
            SELECT ids,
                   CASE WHEN cardinality(ids) > 0 AND (SELECT run_at FROM job) <= clock_timestamp()
                        THEN pg_notify('pgq_insert', $2) END IS NULL AS quiet
            FROM (SELECT coalesce(array_agg(id), '{}') AS ids FROM inserted) AS batch"
        )
    };
}

/// A batch without unique keys: one plain insert. `nextval` runs in input order, so the ids,
/// sorted, line up with the input.
const INSERT_MANY: &str = with_batch_job!(
    "
    inserted AS (
        INSERT INTO pgq.jobs (id, task, queue, priority, max_attempts, run_at, status, attempts,
                              errors, progress, events_count, meta, payload)
        SELECT nextval('pgq.jobs_id_seq'), job.*, t.payload::jsonb
        FROM job, unnest($8::text[]) AS t(payload)
        RETURNING id
    )"
);

/// [`INSERT_MANY`] for a task with a concurrency key: each row's key ($9) with the task's limit
/// ($10).
const INSERT_MANY_CONCURRENCY: &str = with_batch_job!(
    "
    inserted AS (
        INSERT INTO pgq.jobs (id, task, queue, priority, max_attempts, run_at, status, attempts,
                              errors, progress, events_count, meta, payload, concurrency_key,
                              concurrency_limit)
        SELECT nextval('pgq.jobs_id_seq'), job.*, t.payload::jsonb, t.concurrency_key,
               CASE WHEN t.concurrency_key IS NOT NULL THEN $10::int END
        FROM job, ROWS FROM (unnest($8::text[]), unnest($9::text[])) AS t(payload, concurrency_key)
        RETURNING id
    )"
);

/// Ids for a batch with unique keys, drawn up front to tell which rows were inserted.
const DRAW_IDS: &str = "SELECT nextval('pgq.jobs_id_seq') FROM generate_series(1, $1)";

/// A batch with unique keys (each key once): rows whose key an active job holds are skipped.
const INSERT_MANY_KEYED: &str = with_batch_job!(
    "
    inserted AS (
        INSERT INTO pgq.jobs (id, task, queue, priority, max_attempts, run_at, status, attempts,
                              errors, progress, events_count, meta, payload, unique_key)
        SELECT t.id, job.*, t.payload::jsonb, t.unique_key
        FROM job,
             ROWS FROM (unnest($8::bigint[]), unnest($9::text[]), unnest($10::text[]))
                 AS t(id, payload, unique_key)
        ON CONFLICT (task, unique_key)
            WHERE unique_key IS NOT NULL AND phase < 2
            DO NOTHING
        RETURNING id
    )"
);

/// [`INSERT_MANY_KEYED`] for a task with a concurrency key: each row's key ($11) with the
/// task's limit ($12).
const INSERT_MANY_KEYED_CONCURRENCY: &str = with_batch_job!(
    "
    inserted AS (
        INSERT INTO pgq.jobs (id, task, queue, priority, max_attempts, run_at, status, attempts,
                              errors, progress, events_count, meta, payload, unique_key,
                              concurrency_key, concurrency_limit)
        SELECT t.id, job.*, t.payload::jsonb, t.unique_key, t.concurrency_key,
               CASE WHEN t.concurrency_key IS NOT NULL THEN $12::int END
        FROM job,
             ROWS FROM (unnest($8::bigint[]), unnest($9::text[]), unnest($10::text[]),
                        unnest($11::text[]))
                 AS t(id, payload, unique_key, concurrency_key)
        ON CONFLICT (task, unique_key)
            WHERE unique_key IS NOT NULL AND phase < 2
            DO NOTHING
        RETURNING id
    )"
);

const FIND_ACTIVE_MANY: &str = "
SELECT unique_key, id FROM pgq.jobs
WHERE task = $1 AND unique_key = ANY($2) AND phase < 2";

/// Binds a batch statement's shared values, $1 to $7 of [`with_batch_job`].
fn bind_batch_job<'q>(
    query: QueryScalar<'q, Postgres, Vec<i64>, PgArguments>,
    job: &JobTemplate<'q>,
) -> QueryScalar<'q, Postgres, Vec<i64>, PgArguments> {
    query
        .bind(job.task)
        .bind(job.queue)
        .bind(job.priority)
        .bind(job.max_attempts)
        .bind(job.run_at)
        .bind(job.delay_ms)
        .bind(job.meta.clone())
}

/// Inserts many jobs of one task, honouring unique keys (also between tasks of the batch).
pub(crate) async fn insert_many(
    store: &Store,
    conn: &mut PgConnection,
    job: &JobTemplate<'_>,
    batch: &PreparedBatch,
) -> Result<Vec<Enqueued>> {
    let PreparedBatch {
        payloads,
        unique_keys,
        concurrency,
    } = batch;
    // Every task of a batch has one type, so one limit; plain tasks keep their statements.
    let limit = concurrency.iter().flatten().map(|c| c.limit).next();
    let concurrency_keys = || {
        concurrency
            .iter()
            .map(|c| c.as_ref().map(|c| c.key.as_str()))
            .collect::<Vec<_>>()
    };
    if unique_keys.iter().all(Option::is_none) {
        let statement = if limit.is_some() {
            INSERT_MANY_CONCURRENCY
        } else {
            INSERT_MANY
        };
        let query = bind_batch_job(
            sqlx::query_scalar(store.sql(statement)).persistent(store.prepared()),
            job,
        )
        .bind(payloads);
        let query = match limit {
            Some(limit) => query.bind(concurrency_keys()).bind(limit),
            None => query,
        };
        let mut ids: Vec<i64> = query.fetch_one(&mut *conn).await?;
        if ids.len() != payloads.len() {
            return Err(no_row_stored(payloads.len(), ids.len()));
        }
        ids.sort_unstable();
        return Ok(ids
            .into_iter()
            .map(|id| Enqueued::Inserted(id.into()))
            .collect());
    }

    // Within the batch, the first task with a key stands for the later ones.
    let mut first_with_key: HashMap<&str, usize> = HashMap::new();
    let mut rows: Vec<usize> = Vec::new();
    let mut same_as: Vec<Option<usize>> = vec![None; payloads.len()];
    for (index, key) in unique_keys.iter().enumerate() {
        match key {
            Some(key) => match first_with_key.get(key.as_str()) {
                Some(&first) => same_as[index] = Some(first),
                None => {
                    first_with_key.insert(key, index);
                    rows.push(index);
                }
            },
            None => rows.push(index),
        }
    }
    let mut results: Vec<Option<Enqueued>> = vec![None; payloads.len()];
    for _ in 0..CONFLICT_ROUNDS {
        if rows.is_empty() {
            break;
        }
        // Every batch inserts its keys in one order, so that two batches with keys in common
        // wait for each other in the unique index instead of deadlocking there.
        rows.sort_by(|&a, &b| unique_keys[a].cmp(&unique_keys[b]));
        let mut drawn: Vec<i64> = sqlx::query_scalar(store.sql(DRAW_IDS))
            .persistent(store.prepared())
            .bind(rows.len() as i64)
            .fetch_all(&mut *conn)
            .await?;
        // The ids go by input order, as an unkeyed batch's: the rows of a batch share their run
        // time, and the id decides which is claimed first.
        drawn.sort_unstable();
        let mut by_input = rows.clone();
        by_input.sort_unstable();
        let id_of: HashMap<usize, i64> = by_input.into_iter().zip(drawn).collect();
        let ids: Vec<i64> = rows.iter().map(|index| id_of[index]).collect();
        let statement = if limit.is_some() {
            INSERT_MANY_KEYED_CONCURRENCY
        } else {
            INSERT_MANY_KEYED
        };
        let query = bind_batch_job(
            sqlx::query_scalar::<_, Vec<i64>>(store.sql(statement)).persistent(store.prepared()),
            job,
        )
        .bind(&ids)
        .bind(
            rows.iter()
                .map(|&i| payloads[i].as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            rows.iter()
                .map(|&i| unique_keys[i].as_deref())
                .collect::<Vec<_>>(),
        );
        let query = match limit {
            Some(limit) => query
                .bind(
                    rows.iter()
                        .map(|&i| concurrency[i].as_ref().map(|c| c.key.as_str()))
                        .collect::<Vec<_>>(),
                )
                .bind(limit),
            None => query,
        };
        let inserted: HashSet<i64> = query.fetch_one(&mut *conn).await?.into_iter().collect();
        let mut skipped = Vec::new();
        for (&index, &id) in rows.iter().zip(&ids) {
            if inserted.contains(&id) {
                results[index] = Some(Enqueued::Inserted(id.into()));
            } else {
                skipped.push(index);
            }
        }
        if skipped.is_empty() {
            rows.clear();
            break;
        }
        let keys: Vec<&str> = skipped
            .iter()
            .filter_map(|&i| unique_keys[i].as_deref())
            .collect();
        let holders: HashMap<String, i64> =
            sqlx::query_as::<_, (String, i64)>(store.sql(FIND_ACTIVE_MANY))
                .persistent(store.prepared())
                .bind(job.task)
                .bind(&keys)
                .fetch_all(&mut *conn)
                .await?
                .into_iter()
                .collect();
        // A key whose holder finished in between is free again: insert that row next round.
        rows = Vec::new();
        for index in skipped {
            let key = unique_keys[index].as_deref().unwrap_or_default();
            match holders.get(key) {
                Some(&id) => results[index] = Some(Enqueued::Duplicate(id.into())),
                None => rows.push(index),
            }
        }
    }
    if let Some(&index) = rows.first() {
        return Err(unique_contention(
            job.task,
            unique_keys[index].as_deref().unwrap_or_default(),
        ));
    }
    for (index, first) in same_as.iter().enumerate() {
        if let Some(first) = first {
            results[index] = results[*first].map(|first| Enqueued::Duplicate(first.id()));
        }
    }
    Ok(results.into_iter().flatten().collect())
}

const NOTIFY: &str = "SELECT pg_notify('pgq_insert', $1)";

/// Wakes idle workers of `queue` with a notification of its own.
pub(crate) async fn notify(store: &Store, queue: &str) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(NOTIFY))
            .persistent(store.prepared())
            .bind(queue)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::INSERT_ONE,
            super::INSERT_ONE_UNIQUE,
            super::REPLACE_ONE,
            super::INSERT_ONE_META,
            super::INSERT_ONE_UNIQUE_META,
            super::REPLACE_ONE_META,
            super::FIND_ACTIVE,
            super::INSERT_MANY,
            super::DRAW_IDS,
            super::INSERT_MANY_KEYED,
            super::INSERT_ONE_CONCURRENCY,
            super::INSERT_ONE_UNIQUE_CONCURRENCY,
            super::REPLACE_ONE_CONCURRENCY,
            super::INSERT_MANY_CONCURRENCY,
            super::INSERT_MANY_KEYED_CONCURRENCY,
            super::FIND_ACTIVE_MANY,
            super::NOTIFY,
        ]);
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Application,
            &[
                ("REPLACE_ONE", super::REPLACE_ONE, ""),
                ("FIND_ACTIVE", super::FIND_ACTIVE, ""),
                ("FIND_ACTIVE_MANY", super::FIND_ACTIVE_MANY, ""),
            ],
        )
        .await;
    }
}

//! The live workers' registrations: each worker heartbeats its row, and a row whose
//! `expires_at` has passed belongs to a dead worker, whose held jobs are taken back at once.

use std::time::Duration;

use sqlx::Row;
use sqlx::types::Json;

use crate::error::Result;
use crate::job_id::JobId;
use crate::live_worker::LiveWorker;
use crate::store::attempt::ERROR_HISTORY;
use crate::store::lease::take_back;
use crate::store::moment::moment;
use crate::store::{Store, run};

/// Registers the worker, or renews its registration: the same statement, so that a worker
/// whose row was removed (taken for dead during a long outage) registers again.
const HEARTBEAT: &str = "
INSERT INTO pgq.workers (id, host, pid, queues, held, expires_at)
VALUES ($1, $2, $3, $4, $5, now() + ($6 * interval '1 millisecond'))
ON CONFLICT (id) DO UPDATE SET
    host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues,
    heartbeat_at = now(), held = EXCLUDED.held, expires_at = EXCLUDED.expires_at";

/// Registers a starting worker as a new process, before it claims anything. A row of its id
/// left by a process before it (one that died under the same id, a container restarted with
/// the same name and pid, its row not yet expired) is replaced, and the jobs held under the id
/// are taken back as a dead worker's: ids are unique among live workers, and this one holds
/// nothing yet. The jobs are found by reading the index of held jobs, once a start.
const REGISTER: &str = concat!(
    "
WITH registered AS (
    INSERT INTO pgq.workers (id, host, pid, queues, held, expires_at)
    VALUES ($2, $3, $4, $5, 0, now() + ($6 * interval '1 millisecond'))
    ON CONFLICT (id) DO UPDATE SET
        host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues, held = 0,
        started_at = now(), heartbeat_at = now(), expires_at = EXCLUDED.expires_at
    RETURNING id
),
orphaned AS (
    SELECT job.id FROM pgq.jobs AS job
    WHERE job.phase = 1 AND job.worker_id = $2
    FOR UPDATE SKIP LOCKED
)
UPDATE pgq.jobs AS job SET",
    take_back!(
        "'worker ' || job.worker_id || ' restarted: the process before it died holding the job'",
        "$1"
    ),
    "
WHERE job.id = ANY(ARRAY(SELECT id FROM orphaned)) AND EXISTS (SELECT FROM registered)
RETURNING job.id, job.queue"
);

/// What a worker tells of itself with each heartbeat.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) id: String,
    pub(crate) host: String,
    pub(crate) pid: i32,
    /// Each queue with its concurrency, as a JSON object.
    pub(crate) queues: serde_json::Value,
    /// How long the worker counts as alive after a heartbeat.
    pub(crate) alive_for_ms: i64,
}

pub(crate) async fn heartbeat(store: &Store, worker: &Registration, held: usize) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(HEARTBEAT))
            .persistent(store.prepared())
            .bind(&worker.id)
            .bind(&worker.host)
            .bind(worker.pid)
            .bind(Json(&worker.queues))
            .bind(i32::try_from(held).unwrap_or(i32::MAX))
            .bind(worker.alive_for_ms)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

/// Registers a starting worker ([`REGISTER`]): the jobs taken back from a process before it
/// under the same id, with their queues.
pub(crate) async fn register(store: &Store, worker: &Registration) -> Result<Vec<(JobId, String)>> {
    run!(store, |conn| async {
        let rows: Vec<(i64, String)> = sqlx::query_as(store.sql(REGISTER))
            .persistent(store.prepared())
            .bind(ERROR_HISTORY)
            .bind(&worker.id)
            .bind(&worker.host)
            .bind(worker.pid)
            .bind(Json(&worker.queues))
            .bind(worker.alive_for_ms)
            .fetch_all(&mut *conn)
            .await?;
        Ok(taken_back(rows))
    })
}

/// The jobs a statement took back, with their queues.
fn taken_back(rows: Vec<(i64, String)>) -> Vec<(JobId, String)> {
    rows.into_iter()
        .map(|(id, queue)| (JobId::from(id), queue))
        .collect()
}

const REMOVE: &str = "DELETE FROM pgq.workers WHERE id = $1";

/// Removes a worker's registration at the end of a clean shutdown.
pub(crate) async fn remove(store: &Store, id: &str) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(REMOVE))
            .persistent(store.prepared())
            .bind(id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

/// Removes the registrations of dead workers and takes back what they held as the rescuer does
/// with expired leases: each such attempt counts, so that a job that kills its worker fails
/// once its attempts are spent instead of killing workers forever. Their jobs are found by
/// reading the index of held jobs whole, which on a busy queue also holds an entry for every job
/// finished since the last vacuum: only when a worker died (every rescue otherwise, 50–70 ms at
/// 10 000 jobs a second).
const RELEASE_DEAD: &str = concat!(
    "
WITH dead AS (
    DELETE FROM pgq.workers
    WHERE expires_at < now() AND id <> $2
      AND (expires_at - heartbeat_at) <= ($3 * interval '1 millisecond')
    RETURNING id
),
orphaned AS (
    SELECT job.id FROM pgq.jobs AS job
    WHERE EXISTS (SELECT FROM dead)
      AND job.phase = 1 AND job.worker_id = ANY(ARRAY(SELECT id FROM dead))
    FOR UPDATE SKIP LOCKED
)
UPDATE pgq.jobs AS job SET",
    take_back!(
        "'worker ' || job.worker_id || ' died: it stopped heartbeating'",
        "$1"
    ),
    "
WHERE job.id = ANY(ARRAY(SELECT id FROM orphaned))
RETURNING job.id, job.queue"
);

/// Jobs taken back from dead workers, with their queues. `me`, the caller, is alive whatever its
/// registration says; `lasted`, how long its own heartbeats have landed: a registration that
/// lives longer (a worker with a longer heartbeat interval) may have expired in an outage the
/// caller was cut off by too, and its worker not heartbeated since only for that.
pub(crate) async fn release_dead(
    store: &Store,
    me: &str,
    lasted: Duration,
) -> Result<Vec<(JobId, String)>> {
    let lasted_ms = i64::try_from(lasted.as_millis()).unwrap_or(i64::MAX);
    run!(store, |conn| async {
        let rows: Vec<(i64, String)> = sqlx::query_as(store.sql(RELEASE_DEAD))
            .persistent(store.prepared())
            .bind(ERROR_HISTORY)
            .bind(me)
            .bind(lasted_ms)
            .fetch_all(&mut *conn)
            .await?;
        Ok(taken_back(rows))
    })
}

const LIVE: &str = "
SELECT id, host, pid, queues, started_at, heartbeat_at, held
FROM pgq.workers
WHERE expires_at >= now()
ORDER BY started_at, id";

pub(crate) async fn live(store: &Store) -> Result<Vec<LiveWorker>> {
    run!(store, |conn| async {
        let rows = sqlx::query(store.sql(LIVE))
            .persistent(store.prepared())
            .fetch_all(&mut *conn)
            .await?;
        rows.iter()
            .map(|row| {
                let Json(queues): Json<serde_json::Value> = row.try_get("queues")?;
                Ok(LiveWorker {
                    id: row.try_get("id")?,
                    host: row.try_get("host")?,
                    pid: row.try_get::<i32, _>("pid")? as u32,
                    queues: served(&queues),
                    started_at: moment(row, "started_at")?,
                    heartbeat_at: moment(row, "heartbeat_at")?,
                    held: u32::try_from(row.try_get::<i32, _>("held")?).unwrap_or(0),
                })
            })
            .collect::<Result<Vec<_>>>()
    })
}

/// The queues a worker serves, with its concurrency in each, from its row's `queues` object.
/// What a worker did not write there (a row written by hand) is left out, not an error: one
/// row does not hide the others.
fn served(queues: &serde_json::Value) -> std::collections::BTreeMap<String, u32> {
    let Some(queues) = queues.as_object() else {
        return Default::default();
    };
    queues
        .iter()
        .filter_map(|(name, n)| Some((name.clone(), u32::try_from(n.as_u64()?).ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::HEARTBEAT,
            super::REGISTER,
            super::REMOVE,
            super::RELEASE_DEAD,
            super::LIVE,
        ]);
    }

    #[tokio::test]
    async fn no_plan_reads_the_whole_table() {
        crate::store::plans::assert_no_whole_table_reads(
            crate::store::plans::Connections::Own,
            &[
                ("RELEASE_DEAD", super::RELEASE_DEAD, ""),
                ("REGISTER", super::REGISTER, ""),
            ],
        )
        .await;
    }

    /// With no dead worker, the release reads no job at all, on a worker's own connection.
    #[tokio::test]
    async fn no_dead_worker_no_read_of_jobs() {
        let db = pgq_testkit::TestDatabase::new().await;
        let mut conn = db.pool().acquire().await.expect("a connection");
        crate::store::plans::set_as_a_worker_connection(&mut conn).await;
        // A job, so that the statement's own scans run.
        sqlx::raw_sql("INSERT INTO pgq.jobs (task, queue, payload) VALUES ('t', 'q', '{}')")
            .execute(&mut *conn)
            .await
            .expect("a job");
        let sql = crate::store::sql::render(super::RELEASE_DEAD, "pgq");
        let sqlx::types::Json(plan): sqlx::types::Json<serde_json::Value> =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "EXPLAIN (ANALYZE, COSTS OFF, FORMAT JSON) {}",
                sql.replace("$1", "1")
                    .replace("$2", "'me'")
                    .replace("$3", "1000")
            )))
            .fetch_one(&mut *conn)
            .await
            .expect("explain");
        let mut scans = Vec::new();
        scans_of_jobs(&plan, &mut scans);
        assert!(!scans.is_empty(), "no scan of jobs by worker in {plan:#}");
        assert!(
            scans.iter().all(|(_, loops)| *loops == 0),
            "jobs read with no dead worker ({scans:?}):\n{plan:#}"
        );
    }

    /// The scans of the jobs table below `node` that find jobs by worker, with how often each ran.
    fn scans_of_jobs(node: &serde_json::Value, found: &mut Vec<(String, u64)>) {
        match node {
            serde_json::Value::Array(items) => items.iter().for_each(|n| scans_of_jobs(n, found)),
            serde_json::Value::Object(fields) => {
                let filter = fields.get("Filter").and_then(serde_json::Value::as_str);
                if filter.is_some_and(|filter| filter.contains("worker_id")) {
                    let index = fields.get("Index Name").and_then(serde_json::Value::as_str);
                    let loops = fields
                        .get("Actual Loops")
                        .and_then(serde_json::Value::as_u64);
                    found.push((index.unwrap_or("jobs").to_owned(), loops.unwrap_or(0)));
                }
                fields
                    .values()
                    .for_each(|value| scans_of_jobs(value, found));
            }
            _ => {}
        }
    }
}

//! Statements that walk an index entry by entry, whatever the planner would choose.

use sqlx::{Connection, PgConnection, Postgres, Transaction};

use crate::error::Result;
use crate::store::Store;

/// Opens a transaction whose statements walk the indexes entry by entry: index scans on,
/// bitmap (and sequential) scans off, whatever the connection's settings.
///
/// A bitmap scan reads every entry in its range, dead or alive, visits each one's row, and marks
/// none. Until vacuum, a busy queue's lease index keeps an entry for every job claimed since and
/// its finished-jobs index one for every job deleted: at 12 300 jobs/s the queue-depth count
/// read 20 000 pages of such rows (40–370 ms), the cleaner's batches took 16–30 ms, and the
/// rescue read every expired lease's entry, its job long finished, to find the few still held.
/// An index scan stops at its limit and marks each entry whose row it finds dead to every
/// transaction, so that the next scan steps over it without reading the table. Plans made from
/// an empty table's statistics, as a fresh install has, choose bitmap scans.
pub(crate) async fn walking_indexes<'c>(
    store: &Store,
    conn: &'c mut PgConnection,
) -> Result<Transaction<'c, Postgres>> {
    let mut tx = conn.begin().await?;
    sqlx::query(
        "SELECT pg_catalog.set_config('enable_indexscan', 'on', true), \
                pg_catalog.set_config('enable_bitmapscan', 'off', true), \
                pg_catalog.set_config('enable_seqscan', 'off', true)",
    )
    .persistent(store.prepared())
    .execute(&mut *tx)
    .await?;
    Ok(tx)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    /// Inserts `n` jobs and moves them along the allowed transitions to `claimed`, `running`
    /// and then `status`, their leases expiring `age` ago, finished then when `status` finishes
    /// them; each with a lease and a completion time of its own (so that no index entry lists
    /// several rows).
    pub(crate) async fn jobs(pool: &sqlx::PgPool, n: i64, status: &str, age: &str) -> Vec<i64> {
        let ids: Vec<i64> = sqlx::query_scalar(
            "INSERT INTO pgq.jobs (task, queue, payload)
             SELECT 'Walked', 'walk', '{}' FROM generate_series(1, $1) RETURNING id",
        )
        .bind(n)
        .fetch_all(pool)
        .await
        .expect("jobs");
        let path = ["claimed", "running"]
            .into_iter()
            .chain((status != "running").then_some(status));
        for status in path {
            sqlx::query(
                "UPDATE pgq.jobs SET status = $2, phase = pgq.phase_of($2), attempts = 1,
                     worker_id = 'w', claimed_at = now(),
                     lease_expires_at = CASE WHEN pgq.phase_of($2) = 1
                         THEN now() - $3::interval + id * interval '1 millisecond' END,
                     completed_at = CASE WHEN pgq.phase_of($2) = 2
                         THEN now() - $3::interval + id * interval '1 millisecond' END
                 WHERE id = ANY($1)",
            )
            .bind(&ids)
            .bind(status)
            .bind(age)
            .execute(pool)
            .await
            .expect("a transition");
        }
        ids
    }

    /// The entries of `index` marked dead.
    pub(crate) async fn dead_entries(pool: &sqlx::PgPool, index: &str) -> i64 {
        sqlx::raw_sql("CREATE EXTENSION IF NOT EXISTS pageinspect")
            .execute(pool)
            .await
            .expect("pageinspect");
        sqlx::query_scalar(
            "SELECT count(*) FROM generate_series(1,
                 pg_relation_size($1::regclass) / current_setting('block_size')::int8 - 1) AS page,
             LATERAL bt_page_items($1, page) AS item
             WHERE item.dead",
        )
        .bind(index)
        .fetch_one(pool)
        .await
        .expect("the index's entries")
    }

    /// Runs `walk` until `index` has `expected` entries or more marked dead, for at most 10 s, and
    /// returns how many it has then. An entry is marked once its row is gone for every
    /// transaction, which a snapshot elsewhere on the server can hold back for a moment (a
    /// backend starting up, before it is in a database, counts for all of them).
    pub(crate) async fn walk_until_marked<W: Future<Output = ()>>(
        pool: &sqlx::PgPool,
        index: &str,
        expected: i64,
        mut walk: impl FnMut() -> W,
    ) -> i64 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            walk().await;
            let marked = dead_entries(pool, index).await;
            if marked >= expected || tokio::time::Instant::now() >= deadline {
                return marked;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

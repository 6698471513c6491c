//! The wake-up latency's floor: what PostgreSQL itself takes, with no framework in the way, from
//! an insert that notifies to a claim that returns the job. `floor.sh` measures no latency; this
//! tells a sitting's machine apart from pgq's own share of the wake-up. Its wake-ups take turns
//! with pgq's, each after the same idle gap, so that both meet the same moments of a noisy host.

use std::time::Instant;

use sqlx::postgres::PgListener;
use sqlx::{PgConnection, PgPool};

/// `floor.sh`'s table, holding only these jobs.
const SCHEMA: &str = "
CREATE TABLE raw_latency (
    id       bigserial   PRIMARY KEY,
    queue    text        NOT NULL DEFAULT 'default',
    priority int         NOT NULL DEFAULT 0,
    status   text        NOT NULL DEFAULT 'queued',
    run_at   timestamptz NOT NULL DEFAULT now(),
    attempts int         NOT NULL DEFAULT 0,
    payload  jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX raw_latency_claim_idx ON raw_latency (queue, priority, run_at, id)
    WHERE status = 'queued'";

/// One row, committed durably, its notification sent at the commit.
const INSERT: &str = "
WITH woken AS (SELECT pg_notify('raw_latency', 'default'))
INSERT INTO raw_latency (payload) SELECT '{\"seq\": 1}' FROM woken";

/// An idle worker's claim, as `floor.sh` claims, committed without waiting for the WAL flush
/// (the claim connection's session setting), as pgq's is.
const CLAIM: &str = "
UPDATE raw_latency AS job SET status = 'running', attempts = job.attempts + 1
FROM (SELECT id FROM raw_latency
      WHERE queue = 'default' AND status = 'queued' AND run_at <= now()
      ORDER BY priority, run_at, id
      LIMIT 16
      FOR UPDATE SKIP LOCKED) AS next
WHERE job.id = next.id
RETURNING job.id, job.payload";

/// One raw wake-up's times, in milliseconds.
pub(crate) struct RawWakeup {
    pub(crate) total_ms: f64,
    pub(crate) insert_ms: f64,
}

/// An inserting connection, a claiming one and a listening one, taken out of the pool (the
/// claim's session setting goes with its connection).
pub(crate) struct RawWakeups {
    inserter: PgConnection,
    claimer: PgConnection,
    listener: PgListener,
}

impl RawWakeups {
    pub(crate) async fn new(pool: &PgPool) -> Result<Self, sqlx::Error> {
        sqlx::raw_sql(SCHEMA).execute(pool).await?;
        let inserter = pool.acquire().await?.detach();
        let mut claimer = pool.acquire().await?.detach();
        sqlx::raw_sql("SET synchronous_commit = off")
            .execute(&mut claimer)
            .await?;
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen("raw_latency").await?;
        let mut raw = Self {
            inserter,
            claimer,
            listener,
        };
        // One untimed wake-up, as pgq's phase has: every statement is prepared.
        raw.wake_up().await?;
        Ok(raw)
    }

    /// One wake-up: the insert's start to the claim's return, and to the insert's return (the
    /// share an enqueue call has of pgq's), in milliseconds.
    pub(crate) async fn wake_up(&mut self) -> Result<RawWakeup, sqlx::Error> {
        let at = Instant::now();
        sqlx::query(INSERT).execute(&mut self.inserter).await?;
        let insert_ms = at.elapsed().as_secs_f64() * 1000.0;
        self.listener.recv().await?;
        let claimed = sqlx::query(CLAIM).fetch_all(&mut self.claimer).await?;
        let total_ms = at.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(claimed.len(), 1, "each wake-up claims the one row inserted");
        Ok(RawWakeup {
            total_ms,
            insert_ms,
        })
    }
}

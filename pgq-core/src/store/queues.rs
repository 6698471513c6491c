//! The settings operators keep per queue in `pgq.queues`: paused or not, its cluster-wide
//! concurrency limit and its rate limit. A change notifies the queue's name on the schema's `queue` channel, so
//! that listening workers re-read at once; the others find it at their next periodic read.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::error::Result;
use crate::store::{Store, run};

/// Pauses a queue; one already paused keeps the time it was paused at.
const PAUSE: &str = "
INSERT INTO pgq.queues AS q (name, paused_at, updated_at) VALUES ($1, now(), now())
ON CONFLICT (name) DO UPDATE SET paused_at = coalesce(q.paused_at, now()), updated_at = now()
RETURNING pg_notify('pgq_queue', q.name)";

/// Resumes a queue; a queue without a row was never paused.
const RESUME: &str = "
UPDATE pgq.queues SET paused_at = NULL, updated_at = now()
WHERE name = $1
RETURNING pg_notify('pgq_queue', name)";

/// Sets or clears (`$2` NULL) a queue's concurrency limit.
const SET_LIMIT: &str = "
INSERT INTO pgq.queues AS q (name, concurrency_limit, updated_at) VALUES ($1, $2, now())
ON CONFLICT (name) DO UPDATE SET concurrency_limit = $2, updated_at = now()
RETURNING pg_notify('pgq_queue', q.name)";

/// Sets or clears (`$2` NULL) a queue's rate limit: `$2` job starts per `$3` ms. The bucket
/// starts full.
const SET_RATE: &str = "
INSERT INTO pgq.queues AS q (name, rate_limit, rate_period_ms, tokens, tokens_at, updated_at)
VALUES ($1, $2, $3, $2, now(), now())
ON CONFLICT (name) DO UPDATE SET
    rate_limit = $2, rate_period_ms = $3, tokens = $2, tokens_at = now(), updated_at = now()
RETURNING pg_notify('pgq_queue', q.name)";

/// The settings of the given queues that have any: a primary-key lookup each.
const SETTINGS_AMONG: &str = "
SELECT name, paused_at IS NOT NULL AS paused, concurrency_limit, rate_limit IS NOT NULL AS rated
FROM pgq.queues
WHERE name = ANY($1)";

/// Every queue with a limit or a rate limit, with them.
const LIMITED: &str = "
SELECT name, concurrency_limit, rate_limit, rate_period_ms FROM pgq.queues
WHERE concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL
ORDER BY name";

/// Every paused queue, with when it was paused.
const PAUSED: &str = "
SELECT name, paused_at FROM pgq.queues WHERE paused_at IS NOT NULL ORDER BY name";

pub(crate) async fn pause(store: &Store, queue: &str) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(PAUSE))
            .persistent(store.prepared())
            .bind(queue)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

pub(crate) async fn resume(store: &Store, queue: &str) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(RESUME))
            .persistent(store.prepared())
            .bind(queue)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

pub(crate) async fn set_limit(store: &Store, queue: &str, limit: Option<i32>) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(SET_LIMIT))
            .persistent(store.prepared())
            .bind(queue)
            .bind(limit)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

pub(crate) async fn set_rate(store: &Store, queue: &str, rate: Option<(i32, i64)>) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(SET_RATE))
            .persistent(store.prepared())
            .bind(queue)
            .bind(rate.map(|(jobs, _)| jobs))
            .bind(rate.map(|(_, period_ms)| period_ms))
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

/// What a worker needs to know of one of its queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) paused: bool,
    pub(crate) limit: Option<u32>,
    /// Whether it has a rate limit.
    pub(crate) rated: bool,
}

/// The settings of those among `queues` that have a row; the others have none set.
pub(crate) async fn settings_among(
    store: &Store,
    queues: &[String],
) -> Result<Vec<(String, Settings)>> {
    run!(store, |conn| async {
        let rows: Vec<(String, bool, Option<i32>, bool)> =
            sqlx::query_as(store.sql(SETTINGS_AMONG))
                .persistent(store.prepared())
                .bind(queues)
                .fetch_all(&mut *conn)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(name, paused, limit, rated)| {
                let limit = limit.and_then(|limit| u32::try_from(limit).ok());
                (
                    name,
                    Settings {
                        paused,
                        limit,
                        rated,
                    },
                )
            })
            .collect())
    })
}

/// A queue's limits as operators set them.
#[derive(Debug)]
pub(crate) struct Limits {
    pub(crate) name: String,
    pub(crate) concurrency: Option<u32>,
    /// Job starts, per period in ms.
    pub(crate) rate: Option<(u32, i64)>,
}

/// A row of [`LIMITED`]: name, concurrency limit, rate limit and its period in ms.
type LimitsRow = (String, Option<i32>, Option<i32>, Option<i64>);

/// Every queue with a concurrency or rate limit, by name.
pub(crate) async fn limited(store: &Store) -> Result<Vec<Limits>> {
    run!(store, |conn| async {
        let rows: Vec<LimitsRow> = sqlx::query_as(store.sql(LIMITED))
            .persistent(store.prepared())
            .fetch_all(&mut *conn)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(name, concurrency, jobs, period_ms)| Limits {
                name,
                concurrency: concurrency.and_then(|limit| u32::try_from(limit).ok()),
                rate: jobs
                    .and_then(|jobs| u32::try_from(jobs).ok())
                    .zip(period_ms),
            })
            .collect())
    })
}

/// Every paused queue and when it was paused, by name.
pub(crate) async fn paused(store: &Store) -> Result<Vec<(String, DateTime<Utc>)>> {
    run!(store, |conn| async {
        let rows = sqlx::query(store.sql(PAUSED))
            .persistent(store.prepared())
            .fetch_all(&mut *conn)
            .await?;
        let mut paused = Vec::with_capacity(rows.len());
        for row in rows {
            paused.push((row.try_get("name")?, row.try_get("paused_at")?));
        }
        Ok(paused)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::PAUSE,
            super::RESUME,
            super::SET_LIMIT,
            super::SET_RATE,
            super::SETTINGS_AMONG,
            super::LIMITED,
            super::PAUSED,
        ]);
    }
}

//! The settings operators keep per queue in `pgq.queues`: paused or not, its cluster-wide
//! concurrency limit and its rate limit. A change notifies the queue's name on the schema's `queue` channel, so
//! that listening workers re-read at once; the others find it at their next periodic read.

use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::error::Result;
use crate::store::moment::moment;
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

/// The settings of the given queues (none set for a queue without a row: a primary-key lookup
/// each), and whether no live worker but `$2` serves each.
const SETTINGS_AMONG: &str = "
SELECT n.name, q.paused_at IS NOT NULL AS paused, q.concurrency_limit,
       q.rate_limit IS NOT NULL AS rated,
       NOT EXISTS (SELECT FROM pgq.workers AS w
                   WHERE w.queues ? n.name AND w.id <> $2 AND w.expires_at >= now()) AS alone
FROM unnest($1::text[]) AS n(name)
LEFT JOIN pgq.queues AS q ON q.name = n.name";

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
    /// Whether no other live worker serves it (`pgq.workers`).
    pub(crate) alone: bool,
}

/// The settings of `queues`, as `worker` reads them.
pub(crate) async fn settings_among(
    store: &Store,
    queues: &[String],
    worker: &str,
) -> Result<Vec<(String, Settings)>> {
    run!(store, |conn| async {
        let rows: Vec<(String, bool, Option<i32>, bool, bool)> =
            sqlx::query_as(store.sql(SETTINGS_AMONG))
                .persistent(store.prepared())
                .bind(queues)
                .bind(worker)
                .fetch_all(&mut *conn)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(name, paused, limit, rated, alone)| {
                let limit = limit.and_then(|limit| u32::try_from(limit).ok());
                (
                    name,
                    Settings {
                        paused,
                        limit,
                        rated,
                        alone,
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
            paused.push((row.try_get("name")?, moment(&row, "paused_at")?));
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

    /// A worker serves a queue alone while no other live worker lists it; a dead one's
    /// registration does not count.
    #[tokio::test]
    async fn a_worker_reads_whether_another_live_worker_serves_each_queue() {
        let db = pgq_testkit::TestDatabase::new().await;
        let store = crate::store::Store::new(
            db.pool().clone(),
            crate::defaults::STATEMENT_TIMEOUT,
            crate::schema::Schema::default(),
        );
        let register = |id: &'static str, queues: &'static str, alive: &'static str| {
            sqlx::query(
                "INSERT INTO pgq.workers (id, host, pid, queues, held, expires_at)
                 VALUES ($1, 'h', 1, $2::jsonb, 0, now() + $3::interval)",
            )
            .bind(id)
            .bind(queues)
            .bind(alive)
        };
        for (id, queues, alive) in [
            ("me", r#"{"mail": 4, "video": 2, "audit": 1}"#, "1 minute"),
            ("other", r#"{"mail": 8}"#, "1 minute"),
            ("dead", r#"{"video": 8}"#, "-1 minute"),
        ] {
            register(id, queues, alive)
                .execute(db.pool())
                .await
                .expect("a registration");
        }
        super::pause(&store, "audit").await.expect("a pause");
        let queues = ["mail", "video", "audit"].map(String::from);
        let mut read = super::settings_among(&store, &queues, "me")
            .await
            .expect("the settings");
        read.sort_by(|a, b| a.0.cmp(&b.0));
        let alone: Vec<(&str, bool, bool)> = read
            .iter()
            .map(|(name, s)| (name.as_str(), s.alone, s.paused))
            .collect();
        assert_eq!(
            alone,
            [
                ("audit", true, true),
                ("mail", false, false),
                ("video", true, false)
            ]
        );
    }
}

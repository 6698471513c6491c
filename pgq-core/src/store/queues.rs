//! The settings operators keep per queue in `pgq.queues`: paused or not. A change notifies the
//! queue's name on the schema's `queue` channel, so that listening workers re-read at once;
//! the others find it at their next periodic read.

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

/// Which of the given queues are paused: a primary-key lookup each.
const PAUSED_AMONG: &str = "
SELECT name FROM pgq.queues WHERE name = ANY($1) AND paused_at IS NOT NULL";

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

/// The names among `queues` that are paused now.
pub(crate) async fn paused_among(store: &Store, queues: &[String]) -> Result<Vec<String>> {
    run!(store, |conn| async {
        Ok(sqlx::query_scalar(store.sql(PAUSED_AMONG))
            .persistent(store.prepared())
            .bind(queues)
            .fetch_all(&mut *conn)
            .await?)
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
            super::PAUSED_AMONG,
            super::PAUSED,
        ]);
    }
}

//! Leadership by a lease row in `pgq.leaders`: one process leads a role while the row's
//! `expires_at` is ahead of the database clock. Unlike a session advisory lock, a lease needs
//! no session state, so it works behind a transaction pooler, and a leader that dies loses it
//! by the clock, without anyone noticing the death.

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::store::{Store, run};

/// Takes the lead of `$1` for `$3` ms if no one holds it, it ran out, or `$2` holds it already
/// (a renewal). Returns the database's clock when `$2` leads, no row otherwise.
const CLAIM: &str = "
INSERT INTO pgq.leaders AS l (role, holder, expires_at)
VALUES ($1, $2, now() + ($3 * interval '1 millisecond'))
ON CONFLICT (role) DO UPDATE SET
    holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
    elected_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.elected_at ELSE now() END
WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
RETURNING now() AS now";

/// Gives the lead up at a clean shutdown, so that another process takes it at its next try
/// instead of after the lease.
const RESIGN: &str = "DELETE FROM pgq.leaders WHERE role = $1 AND holder = $2";

/// Forgets roles no one has led for a day: schedule sets of earlier deploys.
const FORGET_STALE: &str = "
DELETE FROM pgq.leaders WHERE expires_at < (now() - interval '1 day')";

/// Takes or renews the lead; the database's clock when `holder` leads `role` now.
pub(crate) async fn claim(
    store: &Store,
    role: &str,
    holder: &str,
    lease_ms: i64,
) -> Result<Option<DateTime<Utc>>> {
    run!(store, |conn| async {
        Ok(sqlx::query_scalar(store.sql(CLAIM))
            .persistent(store.prepared())
            .bind(role)
            .bind(holder)
            .bind(lease_ms)
            .fetch_optional(&mut *conn)
            .await?)
    })
}

pub(crate) async fn resign(store: &Store, role: &str, holder: &str) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(RESIGN))
            .persistent(store.prepared())
            .bind(role)
            .bind(holder)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

pub(crate) async fn forget_stale(store: &Store) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(FORGET_STALE))
            .persistent(store.prepared())
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::CLAIM, super::RESIGN, super::FORGET_STALE]);
    }
}

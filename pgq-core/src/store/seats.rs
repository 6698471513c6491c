//! The seats of limited queues: each worker's lease on a share of a queue's cluster-wide
//! concurrency limit (`pgq.take_seats`, migration 0010).

use crate::error::Result;
use crate::store::{Store, run};

/// Leases seats of a queue: `$3` wanted, `$4` kept (what may still run), for `$5` ms.
const TAKE: &str = "SELECT seats, allowed FROM pgq.take_seats($1, $2, $3, $4, $5)";

/// Drops a worker's leases at the end of a clean shutdown.
const RELEASE: &str = "DELETE FROM pgq.queue_seats WHERE worker_id = $1";

/// What a lease gave: how many of the queue's handlers the worker may run from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// The queue has no concurrency limit: the lease is dropped.
    Unlimited,
    /// Run at most this many at once until the lease is renewed or runs out.
    Allowed(usize),
}

/// Leases seats of `queue` to `worker`.
pub(crate) async fn take(
    store: &Store,
    queue: &str,
    worker: &str,
    wanted: usize,
    keep: usize,
    lease_ms: i64,
) -> Result<Lease> {
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    run!(store, |conn| async {
        let (_seats, allowed): (Option<i32>, Option<i32>) = sqlx::query_as(store.sql(TAKE))
            .persistent(store.prepared())
            .bind(queue)
            .bind(worker)
            .bind(count(wanted))
            .bind(count(keep))
            .bind(lease_ms)
            .fetch_one(&mut *conn)
            .await?;
        Ok(match allowed {
            None => Lease::Unlimited,
            Some(allowed) => Lease::Allowed(usize::try_from(allowed).unwrap_or(0)),
        })
    })
}

pub(crate) async fn release(store: &Store, worker: &str) -> Result<()> {
    run!(store, |conn| async {
        sqlx::query(store.sql(RELEASE))
            .persistent(store.prepared())
            .bind(worker)
            .execute(&mut *conn)
            .await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[super::TAKE, super::RELEASE]);
    }
}

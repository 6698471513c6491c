//! The store: every SQL statement pgq runs lives below this module, with values always bound.
//! [`Store`] is how pgq reaches a database for statements of its own: each within a time limit,
//! so that a connection that stopped answering (a dead network, a failover) is noticed and
//! replaced instead of waiting on it forever.

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};

use crate::error::{Error, Result};

pub(crate) mod attempt;
pub(crate) mod control;
pub(crate) mod enqueue;
pub(crate) mod job;
pub(crate) mod lease;
pub(crate) mod maintenance;
pub(crate) mod progress;
pub(crate) mod schema;
pub(crate) mod testing;
pub(crate) mod tick;

/// The channel enqueues notify, with the queue name as payload, so idle workers wake up.
pub(crate) const INSERT_CHANNEL: &str = "pgq_insert";

/// Runs statements on a connection of a [`Store`]'s pool, within its time limit:
/// `run!(store, |conn| statement(conn, ..))` for any future that uses `conn: &mut PgConnection`.
/// A connection that did not answer in time is closed: returned to the pool, it would be checked
/// with a round trip that waits as long as the network stays silent.
macro_rules! run {
    ($store:expr, |$conn:ident| $work:expr) => {{
        let store: &$crate::store::Store = &$store;
        match store.acquire().await {
            Ok(mut pooled) => {
                let result = {
                    let $conn: &mut ::sqlx::PgConnection = &mut pooled;
                    store.bound($work).await
                };
                if matches!(result, Err($crate::error::Error::Unresponsive(_))) {
                    pooled.close_on_drop();
                }
                result
            }
            Err(err) => Err(err),
        }
    }};
}
pub(crate) use run;

/// A pool, and how long pgq waits for one of its own statements on it.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pool: PgPool,
    timeout: Duration,
}

impl Store {
    pub(crate) fn new(pool: PgPool, timeout: Duration) -> Self {
        Self { pool, timeout }
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The same limits on another pool.
    pub(crate) fn on(&self, pool: PgPool) -> Self {
        Self {
            pool,
            timeout: self.timeout,
        }
    }

    /// A connection of the pool, waited for within the time limit.
    pub(crate) async fn acquire(&self) -> Result<PoolConnection<Postgres>> {
        self.bound(async { Ok(self.pool.acquire().await?) }).await
    }

    /// Waits at most the time limit for `work`, on a connection the caller holds; after an
    /// [`Error::Unresponsive`] the caller closes that connection.
    pub(crate) async fn bound<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or(Err(Error::Unresponsive(self.timeout)))
    }
}

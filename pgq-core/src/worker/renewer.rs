//! Lease renewal: one statement renews every job this worker holds, running or waiting for a
//! slot, every third of the shortest lease its tasks use, on the upkeep pool. A job missing from
//! the result lost its lease; one asked to cancel learns it here too, should the notification
//! have been missed.
//!
//! A renewal waits a quarter of its interval at most, and one that found no database is made
//! again at once on a connection of its own. After a moment of silence on the network, the
//! upkeep pool's connections are dead, and those the other upkeep steps took hang until their
//! own limits: with the client's whole statement limit, or waiting for that pool, the next
//! renewal could come after the lease's end, and a live worker's job would run twice.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::maintenance::Service;
use crate::store;
use crate::store::Store;
use crate::worker::held::HeldJobs;

/// The shortest interval between renewals, whatever the leases.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The shortest time a renewal may wait for its statement.
const MIN_WAIT: Duration = Duration::from_millis(250);

/// How long one renewal may wait, of a renewer that runs every `interval`, with the client's
/// statement limit `limit`.
pub(crate) fn wait(interval: Duration, limit: Duration) -> Duration {
    (interval / 4).max(MIN_WAIT).min(limit)
}

#[derive(Debug)]
pub(crate) struct Renewer {
    pub(crate) store: Store,
    pub(crate) worker_id: Arc<str>,
    pub(crate) held: Arc<HeldJobs>,
    pub(crate) interval: Duration,
}

/// Every third of the shortest lease.
pub(crate) fn interval(shortest_lease: Duration) -> Duration {
    (shortest_lease / 3).max(MIN_INTERVAL)
}

impl Service for Renewer {
    const NAME: &'static str = "renewer";

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&mut self) -> Result<()> {
        let leases = self.held.leases();
        if leases.leases.is_empty() {
            return Ok(());
        }
        let renewed = match store::lease::renew(&self.store, &self.worker_id, &leases.leases).await
        {
            Err(err) if err.is_unreachable() => {
                // A connection made for this renewal alone, as the upkeep pool makes its own:
                // the same connect options and hooks (`after_connect`, ...).
                let upkeep = self.store.pool();
                let alone = upkeep
                    .options()
                    .clone()
                    .max_connections(1)
                    .min_connections(0)
                    .test_before_acquire(false)
                    .connect_lazy_with((*upkeep.connect_options()).clone());
                let renewed = store::lease::renew(
                    &self.store.on(alone.clone()),
                    &self.worker_id,
                    &leases.leases,
                )
                .await;
                tokio::spawn(async move { alone.close().await });
                renewed?
            }
            renewed => renewed?,
        };
        self.held.renewed(&leases, &renewed);
        Ok(())
    }
}

//! Lease renewal: one statement renews every job this worker holds, running or waiting for a
//! slot, every third of the shortest lease its tasks use, on the upkeep pool. A job missing from
//! the result lost its lease; one asked to cancel learns it here too, should the notification
//! have been missed.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::maintenance::Service;
use crate::store;
use crate::store::Store;
use crate::worker::held::HeldJobs;

/// The shortest interval between renewals, whatever the leases.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

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
        let renewed = store::lease::renew(&self.store, &self.worker_id, &leases.leases).await?;
        self.held.renewed(&leases, &renewed);
        Ok(())
    }
}

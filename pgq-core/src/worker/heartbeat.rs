//! The heartbeat: keeps the worker's registration alive, with how many jobs it holds, so that
//! operators see it (`Client::workers`) and other workers know when it died.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::maintenance::Service;
use crate::maintenance::heartbeat_streak::HeartbeatStreak;
use crate::metric;
use crate::store;
use crate::store::Store;
use crate::store::workers::Registration;
use crate::worker::held::HeldJobs;

/// How many heartbeats a worker may miss before it counts as dead.
pub(crate) const MISSED_HEARTBEATS: u32 = 4;

#[derive(Debug)]
pub(crate) struct Heartbeat {
    pub(crate) store: Store,
    pub(crate) worker: Registration,
    pub(crate) held: Arc<HeldJobs>,
    pub(crate) interval: Duration,
    /// Whether every heartbeat landed: the rescuer's judgement of other workers depends on it.
    pub(crate) streak: Arc<HeartbeatStreak>,
}

impl Service for Heartbeat {
    const NAME: &'static str = "heartbeat";

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&mut self) -> Result<()> {
        let held = self.held.count();
        metric::held(held);
        let beat = store::workers::heartbeat(&self.store, &self.worker, held).await;
        match beat {
            Ok(()) => self.streak.landed(),
            Err(_) => self.streak.missed(),
        }
        beat
    }
}

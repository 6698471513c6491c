//! Background upkeep on one template: each service has a config with named defaults, a
//! `run_once` step that tests and the client can drive, and [`run`], the loop that calls it.

pub(crate) mod cleaner;
pub(crate) mod heartbeat_streak;
pub(crate) mod rescuer;
pub(crate) mod scheduler;

use std::time::Duration;

use tokio::sync::watch;
use tracing::Instrument;

use crate::error::Result;

/// A periodic upkeep step.
pub(crate) trait Service: Send + 'static {
    /// Its name in logs.
    const NAME: &'static str;

    /// How long to wait after each step.
    fn interval(&self) -> Duration;

    /// One step; a failed one is logged and tried again after the interval.
    fn run_once(&mut self) -> impl Future<Output = Result<()>> + Send;
}

/// Runs `service` at once and then after each interval, until `stop` turns true.
pub(crate) async fn run<S: Service>(mut service: S, mut stop: watch::Receiver<bool>) {
    let mut failing = false;
    loop {
        let span = tracing::debug_span!("pgq.upkeep", service = S::NAME);
        match service.run_once().instrument(span).await {
            Err(err) => {
                failing = true;
                tracing::warn!(service = S::NAME, error = %err, "upkeep step failed; trying again after its interval");
            }
            Ok(()) if failing => {
                failing = false;
                tracing::info!(service = S::NAME, "upkeep step succeeded again");
            }
            Ok(()) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(service.interval()) => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
    }
}

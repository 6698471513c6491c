//! Background upkeep on one template: each service has a config with named defaults, a
//! `run_once` step that tests and the client can drive, and [`run`], the loop that calls it.

pub(crate) mod cleaner;
pub(crate) mod rescuer;

use std::time::Duration;

use tokio::sync::watch;

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
    loop {
        if let Err(err) = service.run_once().await {
            tracing::warn!(service = S::NAME, error = %err, "upkeep step failed; trying again after its interval");
        }
        tokio::select! {
            _ = tokio::time::sleep(service.interval()) => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
    }
}

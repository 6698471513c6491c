//! One worker process of a fleet: several such processes, on one host or many, share a queue
//! through the database. It serves queue `fleet` until SIGTERM or SIGINT.
//!
//! `cargo run -p pgq-examples --bin fleet_worker -- [--concurrency N] [--lease-ms N]
//! [--rescue-ms N] [--heartbeat-ms N]`, once per process. Its jobs (`FleetJob`) take `millis` to run, watching for
//! cancellation, and fail when asked to; enqueue them from anywhere.

use std::time::Duration;

use pgq_core::{Handler, JobContext, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};

/// A job for the fleet: at most one active per `key`.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet", unique_key = "fleet:{key}", max_attempts = 3)]
pub struct FleetJob {
    key: u32,
    millis: u64,
    fail: bool,
}

#[async_trait]
impl Handler for FleetJob {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(self.millis)) => {}
            _ = ctx.cancelled() => return Err(TaskError::fail("cancelled")),
        }
        if self.fail {
            return Err(TaskError::retry_after(Duration::ZERO, "failed on request"));
        }
        Ok(())
    }
}

fn flag(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = pgq_examples::client().await?;
    let worker = Worker::builder(client)
        .queue("fleet", flag("--concurrency", 8) as usize)
        .lease(Duration::from_millis(flag("--lease-ms", 60_000)))
        .rescue_interval(Duration::from_millis(flag("--rescue-ms", 15_000)))
        .heartbeat_interval(Duration::from_millis(flag("--heartbeat-ms", 5_000)))
        .build()?;
    println!("worker {} running", worker.worker_id());
    worker.run().await?;
    println!("stopped");
    Ok(())
}

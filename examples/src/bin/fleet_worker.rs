//! One worker process of a fleet: several such processes, on one host or many, share a queue
//! through the database. It serves queue `fleet` until SIGTERM or SIGINT, and prints
//! `queue fleet paused` (`resumed`) when it stops (starts again) claiming from it.
//!
//! `cargo run -p pgq-examples --bin fleet_worker -- [--concurrency N] [--lease-ms N]
//! [--rescue-ms N] [--heartbeat-ms N] [--every-second 1] [--leader-lease-ms N]`, once per
//! process. Its jobs (`FleetJob`) take `millis` to run, watching for cancellation, and fail when
//! asked to; enqueue them from anywhere. With `--every-second 1`, the processes also run a
//! periodic schedule that enqueues a `FleetTick` every second, led by one of them at a time.
//! `OverlapJob`s count, in a table `fleet_overlap (running, peak)` the enqueuer created, how many
//! of them run at once across the fleet: the measure of a queue's concurrency limit.
//! `KeyedOverlapJob`s, limited to one at a time per `tenant`, count themselves the same way per
//! tenant, in a table `fleet_key_overlap (tenant, running, peak)` with a row per tenant.

use std::time::Duration;

use pgq_core::{Handler, JobContext, Schedule, Task, TaskError, Worker, WorkerEvent, async_trait};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tokio::sync::broadcast::error::RecvError;

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

/// Enqueued every second by the fleet's schedule leader; its instant is its `run_at`.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet")]
pub struct FleetTick {
    /// The process that built it: whichever leads the schedule.
    pid: u32,
}

#[async_trait]
impl Handler for FleetTick {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Counts itself running in `fleet_overlap` for `millis`, keeping the highest count seen.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet")]
pub struct OverlapJob {
    millis: u64,
}

#[async_trait]
impl Handler for OverlapJob {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let pool = ctx
            .state::<PgPool>()
            .expect("the worker's pool in its state");
        // One row, updated under its row lock: the count is exact whatever the processes.
        sqlx::query(
            "UPDATE fleet_overlap SET running = running + 1, peak = greatest(peak, running + 1)",
        )
        .execute(pool)
        .await?;
        tokio::time::sleep(Duration::from_millis(self.millis)).await;
        sqlx::query("UPDATE fleet_overlap SET running = running - 1")
            .execute(pool)
            .await?;
        Ok(())
    }
}

/// Counts itself running in its tenant's row of `fleet_key_overlap` for `millis`: at most one
/// job per tenant runs at once across the fleet.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "fleet", concurrency_key = "{tenant}", concurrency = 1)]
pub struct KeyedOverlapJob {
    tenant: String,
    millis: u64,
}

#[async_trait]
impl Handler for KeyedOverlapJob {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let pool = ctx
            .state::<PgPool>()
            .expect("the worker's pool in its state");
        sqlx::query(
            "UPDATE fleet_key_overlap SET running = running + 1, peak = greatest(peak, running + 1)
             WHERE tenant = $1",
        )
        .bind(&self.tenant)
        .execute(pool)
        .await?;
        tokio::time::sleep(Duration::from_millis(self.millis)).await;
        sqlx::query("UPDATE fleet_key_overlap SET running = running - 1 WHERE tenant = $1")
            .bind(&self.tenant)
            .execute(pool)
            .await?;
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
    let pool = client.pool().clone();
    let mut builder = Worker::builder(client)
        .state(pool)
        .queue("fleet", flag("--concurrency", 8) as usize)
        .lease(Duration::from_millis(flag("--lease-ms", 60_000)))
        .rescue_interval(Duration::from_millis(flag("--rescue-ms", 15_000)))
        .heartbeat_interval(Duration::from_millis(flag("--heartbeat-ms", 5_000)))
        .leader_lease(Duration::from_millis(flag("--leader-lease-ms", 10_000)));
    if flag("--every-second", 0) == 1 {
        let pid = std::process::id();
        builder = builder.periodic(Schedule::cron("* * * * * *"), move || FleetTick { pid });
    }
    let worker = builder.build()?;
    // An operator's pause, as this process takes it: from "paused" on it claims nothing.
    let mut events = worker.events();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(WorkerEvent::QueuePaused { queue }) => println!("queue {queue} paused"),
                Ok(WorkerEvent::QueueResumed { queue }) => println!("queue {queue} resumed"),
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    });
    println!("worker {} running", worker.worker_id());
    worker.run().await?;
    println!("stopped");
    Ok(())
}

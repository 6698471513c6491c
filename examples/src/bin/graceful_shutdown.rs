//! Graceful shutdown: a worker runs until SIGTERM or SIGINT, lets the job in flight finish within
//! the grace period, and releases it to `pending` (no attempt spent) if it cannot.
//!
//! `cargo run -p pgq-examples --bin graceful_shutdown -- [--work-ms N] [--grace-ms N] [--lease-ms N] [--heartbeat-ms N]`,
//! then press Ctrl-C once "started job" is printed. Killed with SIGKILL instead, it cannot
//! release anything: its job is rescued by another worker once the lease runs out.

use std::time::Duration;

use pgq_core::{Handler, JobContext, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "shutdown-demo")]
struct Work {
    millis: u64,
}

#[async_trait]
impl Handler for Work {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        println!("started job {}", ctx.id());
        // Stands in for real work that takes a while.
        tokio::time::sleep(Duration::from_millis(self.millis)).await;
        println!("finished job {}", ctx.id());
        Ok(())
    }
}

fn flag(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number of milliseconds"))
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let work = flag("--work-ms", 2_000);
    let grace = flag("--grace-ms", 10_000);
    let lease = flag("--lease-ms", 60_000);
    let heartbeat = flag("--heartbeat-ms", 5_000);
    let client = pgq_examples::client().await?;
    let id = client.enqueue(Work { millis: work }).await?.id();

    let worker = Worker::builder(client.clone())
        .queue("shutdown-demo", 1)
        .shutdown_grace(Duration::from_millis(grace))
        .lease(Duration::from_millis(lease))
        .heartbeat_interval(Duration::from_millis(heartbeat))
        .build()?;
    println!(
        "worker {} running; send SIGTERM or press Ctrl-C to stop",
        worker.worker_id()
    );
    worker.run().await?;

    let job = client.job(id).await?.expect("the job exists");
    println!(
        "shut down cleanly; job {id} is {} ({} attempts spent)",
        job.status, job.attempts
    );
    Ok(())
}

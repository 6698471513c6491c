//! Retries: a handler that keeps failing is retried with backoff until its attempts are spent,
//! then the job is `failed` and kept with its errors.
//!
//! `cargo run -p pgq-examples --bin retries`

use std::time::Duration;

use pgq_core::{Handler, JobContext, JobStatus, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "flaky", max_attempts = 3)]
struct CallPartner {
    endpoint: String,
}

#[async_trait]
impl Handler for CallPartner {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        println!("attempt {}: calling {}", ctx.attempt(), self.endpoint);
        Err(TaskError::retry(format_args!(
            "{} answered 503 on attempt {}",
            self.endpoint,
            ctx.attempt()
        )))
    }

    /// Retry quickly here; the default is 10 s · 2^(attempt−1), capped at 1 h, with jitter.
    fn backoff(attempt: i32) -> Option<Duration> {
        Some(Duration::from_millis(50 * attempt as u64))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = pgq_examples::client().await?;
    let id = client
        .enqueue(CallPartner {
            endpoint: "https://partner.example/api".into(),
        })
        .await?
        .id();

    let worker = Worker::builder(client.clone())
        .queue("flaky", 1)
        .poll_interval(Duration::from_millis(50))
        .build()?;
    let handle = worker.start();
    handle.stats().wait_for(|s| s.failed >= 1).await?;
    handle.shutdown().await?;

    let job = client.job(id).await?.expect("the job is kept");
    assert_eq!(job.status, JobStatus::Failed);
    println!(
        "job {id} is {} after {} attempts; its errors:",
        job.status, job.attempts
    );
    for error in &job.errors {
        println!(
            "  attempt {} at {}: {}",
            error.attempt, error.at, error.error
        );
    }
    println!("retry it by hand with client.retry({id})");
    Ok(())
}

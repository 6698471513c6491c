//! Watching a long job: the handler reports progress and stages; a watcher follows it live.
//!
//! `cargo run -p pgq-examples --bin progress`

use std::time::Duration;

use pgq_core::{Handler, JobContext, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "video", timeout = "10m")]
struct Transcode {
    video: String,
}

#[async_trait]
impl Handler for Transcode {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        for (percent, stage) in [
            (10, "download"),
            (40, "decode"),
            (80, "encode"),
            (95, "upload"),
        ] {
            if ctx.is_cancelled() {
                return Err(TaskError::fail("cancelled"));
            }
            ctx.progress(percent, stage).await;
            ctx.event(&format!("{} reached {stage}", self.video)).await;
            // Stands in for real work.
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = pgq_examples::client().await?;
    let id = client
        .enqueue(Transcode {
            video: "holiday.mov".into(),
        })
        .await?
        .id();

    let mut watch = client.watch(id).await?;
    let handle = Worker::builder(client.clone())
        .queue("video", 1)
        .build()?
        .start();
    while let Some(job) = watch.next().await? {
        println!(
            "{:>9} {:>3}% {} ({} events)",
            job.status.to_string(),
            job.progress,
            job.current_stage.as_deref().unwrap_or("-"),
            job.events_count
        );
    }
    handle.shutdown().await?;
    Ok(())
}

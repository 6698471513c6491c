//! Metrics for Prometheus: pgq's counters, histograms and gauges (the `metrics` feature)
//! recorded by `metrics-exporter-prometheus` and served at `/metrics` for scraping. It runs a
//! worker on the `reports` queue, enqueues `--jobs N` reports (every seventh fails for good),
//! prints each outcome and serves until stopped (Ctrl-C), or until the jobs are done with
//! `--exit-when-done`.
//!
//! `cargo run -p pgq-examples --bin prometheus -- --listen 127.0.0.1:9187`, then
//! `curl http://127.0.0.1:9187/metrics`

use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use pgq_core::{Handler, JobContext, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "reports", max_attempts = 1)]
struct RenderReport {
    number: u64,
}

#[async_trait]
impl Handler for RenderReport {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        if self.number.is_multiple_of(7) {
            return Err(TaskError::fail(format_args!(
                "report {} has no data",
                self.number
            )));
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:9187".to_owned();
    let mut jobs = 20;
    let mut exit_when_done = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "--jobs" => jobs = args.next().ok_or("--jobs needs a number")?.parse()?,
            "--exit-when-done" => exit_when_done = true,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    // Installed before anything is recorded: pgq records into whichever recorder is global.
    // With buckets, the durations are Prometheus histograms, which add up across workers
    // (without, the exporter renders summaries, which do not).
    let metrics = PrometheusBuilder::new()
        .set_buckets(&[
            0.001, 0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 10.0, 30.0, 120.0, 600.0,
        ])?
        .install_recorder()?;
    let listener = TcpListener::bind(&listen).await?;
    println!("metrics at http://{}/metrics", listener.local_addr()?);
    tokio::spawn(serve(listener, metrics));

    let client = pgq_examples::client().await?;
    let worker = Worker::builder(client.clone())
        .queue("reports", 4)
        .poll_interval(Duration::from_millis(100))
        .build()?;
    let handle = worker.start();
    client
        .enqueue_many((1..=jobs).map(|number| RenderReport { number }))
        .await?;
    handle.stats().wait_for(|s| s.finished() >= jobs).await?;
    let stats = *handle.stats().borrow();
    println!(
        "all {jobs} reports ran: {} completed, {} failed",
        stats.completed, stats.failed
    );
    if !exit_when_done {
        tokio::signal::ctrl_c().await?;
    }
    handle.shutdown().await?;
    Ok(())
}

/// A plain HTTP/1.1 server of one page: every request gets the metrics in Prometheus's text
/// format.
async fn serve(listener: TcpListener, metrics: PrometheusHandle) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await;
            let body = metrics.render();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}

//! A steady load: jobs enqueued at a fixed rate (small batches every 10 ms) and drained by one
//! worker that keeps completed jobs a minute, with the server's default autovacuum, for the
//! given time. Each minute it prints what was completed a second, the p99 time from enqueue to
//! handler start, and the table's and its indexes' sizes:
//! `soak_minute_<n>_per_s`, `_p99_ms`, `_table_mib`, `_indexes_mib`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pgq_core::{Client, Handler, JobContext, Retention, Task, TaskError, Worker, async_trait};
use serde::{Deserialize, Serialize};

use crate::Outcome;
use crate::drain::{Completions, drain};
use crate::measure::{per_second, quantile, sizes_mib};
use crate::settings::Settings;
use crate::tasks::enqueue_bulk;

/// How often a batch is enqueued.
const BATCH_EVERY: Duration = Duration::from_millis(10);

/// How long completed jobs are kept: the cleaner deletes them within a minute more.
const KEEP_COMPLETED: Duration = Duration::from_secs(60);

/// What the soak runs: it knows when it was enqueued, in microseconds since the soak began.
#[derive(Serialize, Deserialize, Task)]
#[task(queue = "soak")]
struct Soaked {
    sent_us: u64,
}

/// The soak's clock and each start's latency since the last report, in milliseconds.
struct Latencies {
    began: Instant,
    samples: Mutex<Vec<f64>>,
}

#[async_trait]
impl Handler for Soaked {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if let Some(latencies) = ctx.state::<Arc<Latencies>>() {
            let now = latencies.began.elapsed().as_micros() as u64;
            let ms = now.saturating_sub(self.sent_us) as f64 / 1000.0;
            latencies.samples.lock().unwrap().push(ms);
        }
        Ok(())
    }
}

pub(crate) async fn run(s: &Settings, client: &Client, seconds: u64) -> Outcome {
    let rate = match s.rate {
        Some(rate) => rate,
        None => {
            // Half of what this machine drains now.
            let jobs = 50_000;
            enqueue_bulk(client, jobs, s.bulk_batch).await?;
            let elapsed = drain(client, s.concurrency, jobs, Completions::Default).await?;
            (per_second(jobs, elapsed) / 2.0).max(1.0) as u64
        }
    };
    println!("soak_rate_per_s {rate}");
    let latencies = Arc::new(Latencies {
        began: Instant::now(),
        samples: Mutex::default(),
    });
    let worker = Worker::builder(client.clone())
        .queue("soak", s.concurrency)
        .retention(Retention {
            completed: KEEP_COMPLETED,
            ..Retention::default()
        })
        .state(latencies.clone())
        .build()?;
    let handle = worker.start();
    let enqueuer = tokio::spawn(enqueue_steadily(client.clone(), rate, latencies.clone()));
    let mut minute = tokio::time::interval(Duration::from_secs(60));
    minute.tick().await;
    let mut completed_before = 0;
    let (mut second_minute, mut last_minute) = (0.0, 0.0);
    for n in 1..=seconds / 60 {
        minute.tick().await;
        let completed = handle.stats().borrow().completed;
        let mut samples = std::mem::take(&mut *latencies.samples.lock().unwrap());
        let p99 = if samples.is_empty() {
            f64::NAN
        } else {
            quantile(&mut samples, 0.99)
        };
        let (table, indexes) = sizes_mib(client.pool()).await?;
        println!(
            "soak_minute_{n}_per_s {:.0}",
            per_second(completed - completed_before, Duration::from_secs(60))
        );
        println!("soak_minute_{n}_p99_ms {p99:.2}");
        println!("soak_minute_{n}_table_mib {table:.1}");
        println!("soak_minute_{n}_indexes_mib {indexes:.1}");
        completed_before = completed;
        if n == 2 {
            second_minute = table + indexes;
        }
        last_minute = table + indexes;
    }
    enqueuer.abort();
    handle.shutdown().await?;
    if second_minute > 0.0 {
        // Bounded: the last minute's size against the second's (the first is still filling).
        println!("soak_size_growth {:.2}", last_minute / second_minute);
    }
    Ok(())
}

/// Enqueues `rate` jobs a second, a batch every [`BATCH_EVERY`], until aborted.
async fn enqueue_steadily(client: Client, rate: u64, latencies: Arc<Latencies>) -> Outcome {
    let mut every = tokio::time::interval(BATCH_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let per_batch = rate as f64 * BATCH_EVERY.as_secs_f64();
    let mut owed = 0.0;
    loop {
        every.tick().await;
        owed += per_batch;
        let count = owed.floor() as u64;
        owed -= count as f64;
        if count == 0 {
            continue;
        }
        let sent_us = latencies.began.elapsed().as_micros() as u64;
        client
            .enqueue_many((0..count).map(|_| Soaked { sent_us }))
            .await?;
    }
}

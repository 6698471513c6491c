//! A steady load: jobs enqueued at a fixed rate (a batch every millisecond, `--soak-every-ms`)
//! and drained by one worker that keeps completed jobs a minute, with the server's default
//! autovacuum, for the given time. The rate is `--rate`, or half of the most a worker sustains
//! with retention running, measured first (`soak_sustained_per_s`) by a worker of its own; the
//! soak then starts from an empty, vacuumed table after a checkpoint, so that what it measures
//! is its own steady state rather than the cleanup of the measurement's backlog. Each minute it
//! prints what was completed a second, the p99 time from enqueue to handler start, and the
//! table's and its indexes' sizes: `soak_minute_<n>_per_s`, `_p99_ms`, `_table_mib`,
//! `_indexes_mib`; at the end, the p99 of the whole soak (`soak_p99_ms`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pgq_core::{
    Client, Handler, JobContext, Retention, Task, TaskError, Worker, WorkerHandle, async_trait,
};
use serde::{Deserialize, Serialize};

use crate::Outcome;
use crate::measure::{checkpoint, per_second, quantile, sizes_mib};
use crate::settings::Settings;

/// How long the sustained maximum runs before it is measured: past the first retention, and
/// the cleaner's first rounds.
const SETTLE_FOR: Duration = Duration::from_secs(150);

/// How long the sustained maximum is measured before the soak.
const SUSTAINED_FOR: Duration = Duration::from_secs(60);

/// Jobs kept waiting while the sustained maximum is measured: enough that no slot idles.
const BACKLOG: u64 = 2_000;

/// How long completed jobs are kept: the cleaner deletes them within a minute more.
const KEEP_COMPLETED: Duration = Duration::from_secs(60);

/// What the soak runs: it knows when it was enqueued, in microseconds since the soak began.
#[derive(Serialize, Deserialize, Task)]
#[task(queue = "soak")]
struct Soaked {
    sent_us: u64,
}

/// The soak's clock and each start's latency since the last report, in milliseconds. Starts are
/// recorded only during the soak itself: the measurement before it starts twice as many jobs,
/// whose latencies nobody reads, and keeping them would make the soak's `peak_rss_mib` the size
/// of that list rather than what a worker holds over ten minutes.
struct Latencies {
    began: Instant,
    recording: AtomicBool,
    samples: Mutex<Vec<f64>>,
}

#[async_trait]
impl Handler for Soaked {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if let Some(latencies) = ctx.state::<Arc<Latencies>>()
            && latencies.recording.load(Ordering::Relaxed)
        {
            let now = latencies.began.elapsed().as_micros() as u64;
            let ms = now.saturating_sub(self.sent_us) as f64 / 1000.0;
            latencies.samples.lock().unwrap().push(ms);
        }
        Ok(())
    }
}

pub(crate) async fn run(s: &Settings, client: &Client, seconds: u64) -> Outcome {
    let latencies = Arc::new(Latencies {
        began: Instant::now(),
        recording: AtomicBool::new(false),
        samples: Mutex::default(),
    });
    let start_worker = || -> Result<WorkerHandle, pgq_core::Error> {
        let worker = Worker::builder(client.clone())
            .queue("soak", s.concurrency)
            .retention(Retention {
                completed: KEEP_COMPLETED,
                ..Retention::default()
            })
            .state(latencies.clone())
            .build()?;
        Ok(worker.start())
    };
    let vacuum = tokio::spawn(stand_in_for_autovacuum(client.clone()));
    let rate = match s.rate {
        Some(rate) => rate,
        None => {
            let measuring = start_worker()?;
            let (completed, elapsed) = sustained(client, &measuring, &latencies).await?;
            println!("soak_sustained_per_s {:.0}", per_second(completed, elapsed));
            measuring.shutdown().await?;
            // An empty table, as a fresh install has: no statistics, so the fresh worker's plans
            // are built on nothing, the hardest case for them. (A DELETE and a VACUUM could
            // leave the whole table behind, as when a vacuum of the measurement's rows ran on.)
            sqlx::raw_sql("TRUNCATE pgq.jobs")
                .execute(client.pool())
                .await?;
            // The cleanup's WAL flushed now, rather than by a checkpoint in the soak's first
            // minute.
            checkpoint(client.pool()).await;
            (per_second(completed, elapsed) / 2.0).max(1.0) as u64
        }
    };
    let handle = start_worker()?;
    println!("soak_rate_per_s {rate}");
    latencies.recording.store(true, Ordering::Relaxed);
    let enqueuer = tokio::spawn(enqueue_steadily(
        client.clone(),
        rate,
        s.soak_every,
        latencies.clone(),
    ));
    let mut minute = tokio::time::interval(Duration::from_secs(60));
    minute.tick().await;
    let mut completed_before = handle.stats().borrow().completed;
    let (mut second_minute, mut last_minute) = (0.0, 0.0);
    let mut whole = Histogram::default();
    for n in 1..=seconds / 60 {
        minute.tick().await;
        let completed = handle.stats().borrow().completed;
        let mut samples = std::mem::take(&mut *latencies.samples.lock().unwrap());
        whole.record(&samples);
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
    vacuum.abort();
    handle.shutdown().await?;
    println!("soak_p99_ms {:.2}", whole.quantile(0.99));
    if second_minute > 0.0 {
        // Bounded: the last minute's size against the second's (the first is still filling).
        println!("soak_size_growth {:.2}", last_minute / second_minute);
    }
    Ok(())
}

/// Every latency of the soak, in buckets of a tenth of a millisecond (the last one holds
/// everything from 10 s on): ten minutes of samples in a few hundred KiB.
struct Histogram {
    buckets: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: vec![0; 100_001],
        }
    }
}

impl Histogram {
    fn record(&mut self, samples: &[f64]) {
        let last = self.buckets.len() - 1;
        for ms in samples {
            let bucket = ((ms * 10.0).ceil().max(0.0) as usize).min(last);
            self.buckets[bucket] += 1;
        }
    }

    /// The upper bound of the bucket that holds the `q` quantile, in milliseconds.
    fn quantile(&self, q: f64) -> f64 {
        let total: u64 = self.buckets.iter().sum();
        let rank = (total as f64 * q).ceil() as u64;
        let mut seen = 0;
        for (bucket, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank.max(1) {
                return bucket as f64 / 10.0;
            }
        }
        f64::NAN
    }
}

/// The most the worker sustains with enqueues running beside it and retention deleting behind
/// it: the enqueuer keeps [`BACKLOG`] jobs waiting, topping it up as jobs complete, for
/// [`SETTLE_FOR`] (until completed jobs are deleted as fast as they come) and then for
/// [`SUSTAINED_FOR`], which is measured. A drain of jobs enqueued beforehand is faster than this
/// steady state.
async fn sustained(
    client: &Client,
    handle: &WorkerHandle,
    latencies: &Latencies,
) -> Result<(u64, Duration), Box<dyn std::error::Error + Send + Sync>> {
    let mut stats = handle.stats();
    let began = Instant::now();
    let mut measured_from = None;
    let mut enqueued = stats.borrow().completed;
    loop {
        let completed = stats.borrow_and_update().completed;
        match measured_from {
            None if began.elapsed() >= SETTLE_FOR => {
                measured_from = Some((Instant::now(), completed));
            }
            Some((from, before)) if from.elapsed() >= SUSTAINED_FOR => {
                return Ok((completed - before, from.elapsed()));
            }
            _ => {}
        }
        let missing = (completed + BACKLOG).saturating_sub(enqueued);
        if missing >= BACKLOG / 4 {
            let sent_us = latencies.began.elapsed().as_micros() as u64;
            client
                .enqueue_many((0..missing).map(|_| Soaked { sent_us }))
                .await?;
            enqueued += missing;
        } else {
            stats.changed().await?;
        }
    }
}

/// Vacuums the table when PostgreSQL's autovacuum, with its default settings, would have: a
/// server with autovacuum switched off (as a benchmark machine may be) would otherwise let
/// dead rows pile up without bound, which no production server does. Checks once a minute
/// (`autovacuum_naptime`); vacuums when dead rows exceed 50 + 20 % of the table's rows, or rows
/// inserted since the last vacuum exceed 1000 + 20 %; throttled as autovacuum is by default
/// (`autovacuum_vacuum_cost_delay` 2 ms, `vacuum_cost_limit` 200).
async fn stand_in_for_autovacuum(client: Client) -> Outcome {
    let pool = client.pool();
    let on: String = sqlx::query_scalar("SHOW autovacuum")
        .fetch_one(pool)
        .await?;
    if on == "on" {
        return Ok(());
    }
    println!("soak_autovacuum_stand_in 1");
    // A connection of its own, which keeps autovacuum's throttle for every vacuum it runs.
    let mut vacuuming = pool.acquire().await?.detach();
    sqlx::raw_sql("SET vacuum_cost_delay = '2ms'; SET vacuum_cost_limit = 200")
        .execute(&mut vacuuming)
        .await?;
    let mut naptime = tokio::time::interval(Duration::from_secs(60));
    loop {
        naptime.tick().await;
        let due: bool = sqlx::query_scalar(
            "SELECT s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
                 OR s.n_ins_since_vacuum > 1000 + 0.2 * greatest(c.reltuples, 0)
             FROM pg_stat_user_tables AS s JOIN pg_class AS c ON c.oid = s.relid
             WHERE s.schemaname = 'pgq' AND s.relname = 'jobs'",
        )
        .fetch_one(pool)
        .await?;
        if due {
            sqlx::raw_sql("VACUUM (ANALYZE) pgq.jobs")
                .execute(&mut vacuuming)
                .await?;
        }
    }
}

/// Enqueues `rate` jobs a second, a batch `every` so often, until aborted. The finer the batches,
/// the steadier the load: a batch's jobs arrive at once, and its last waits for the rest. Each
/// batch holds what the clock says is owed, so that an enqueue slower than `every` makes the next
/// batch larger rather than the rate lower.
async fn enqueue_steadily(
    client: Client,
    rate: u64,
    every: Duration,
    latencies: Arc<Latencies>,
) -> Outcome {
    let began = Instant::now();
    let mut every = tokio::time::interval(every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0;
    loop {
        every.tick().await;
        let owed = (rate as f64 * began.elapsed().as_secs_f64()) as u64;
        let count = owed - sent;
        if count == 0 {
            continue;
        }
        let sent_us = latencies.began.elapsed().as_micros() as u64;
        client
            .enqueue_many((0..count).map(|_| Soaked { sent_us }))
            .await?;
        sent = owed;
    }
}

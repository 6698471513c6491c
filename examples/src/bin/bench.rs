//! The benchmark: pgq's public API against a fresh database it creates and drops, with no-op
//! handlers. Prints one `name value` pair a line (see DESIGN §6 and docs/performance.md).
//!
//! `cargo run --release -p pgq-examples --bin bench -- [--single N] [--bulk N] [--latency N]`

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pgq_core::{
    Client, Handler, JobContext, Retention, Task, TaskError, Worker, WorkerEvent, async_trait,
};
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "bench")]
struct Noop {
    n: u64,
}

#[async_trait]
impl Handler for Noop {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "latency")]
struct Ping {
    seq: u64,
}

/// When each `Ping` handler started, by sequence number.
type Starts = Arc<Mutex<HashMap<u64, Instant>>>;

#[async_trait]
impl Handler for Ping {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let now = Instant::now();
        if let Some(starts) = ctx.state::<Starts>() {
            starts.lock().unwrap().insert(self.seq, now);
        }
        Ok(())
    }
}

struct Settings {
    single: u64,
    bulk: u64,
    bulk_batch: u64,
    concurrency: usize,
    latency: u64,
    latency_gap: Duration,
    completed: u64,
    /// Whether to drain with each choice of completions, besides the default.
    modes: bool,
}

fn settings() -> Settings {
    let mut s = Settings {
        single: 10_000,
        bulk: 100_000,
        bulk_batch: 10_000,
        concurrency: 16,
        latency: 200,
        latency_gap: Duration::from_millis(20),
        completed: 1_000_000,
        modes: true,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = || -> u64 {
            pair.get(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{} needs a number", pair[0]))
        };
        match pair[0].as_str() {
            "--single" => s.single = value(),
            "--bulk" => s.bulk = value(),
            "--bulk-batch" => s.bulk_batch = value().max(1),
            "--concurrency" => s.concurrency = value() as usize,
            "--latency" => s.latency = value(),
            "--latency-gap-ms" => s.latency_gap = Duration::from_millis(value()),
            "--completed" => s.completed = value(),
            "--modes" => s.modes = value() != 0,
            other => panic!("unknown flag {other}"),
        }
    }
    s
}

/// Writes out dirty pages before a timed phase, as `floor.sh` does before each of its own, so
/// that neither pays for the other's leftovers. Needs a superuser (or `pg_checkpoint`); without
/// one the phases run as they are, as the output format has no place for a warning.
async fn checkpoint(pool: &sqlx::PgPool) {
    sqlx::raw_sql("CHECKPOINT").execute(pool).await.ok();
}

fn per_second(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// Peak resident memory of this process, from the kernel.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

async fn enqueue_bulk(client: &Client, count: u64, batch: u64) -> Result<(), pgq_core::Error> {
    let mut next = 0;
    while next < count {
        let end = (next + batch).min(count);
        client.enqueue_many((next..end).map(|n| Noop { n })).await?;
        next = end;
    }
    Ok(())
}

/// How a drain's worker writes its completions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Completions {
    /// The default configuration.
    Default,
    /// `durable_completions(false)`: commits that do not wait for the WAL flush.
    Async,
    /// `Retention { completed: ZERO }`: completed jobs deleted by the statement that completes
    /// them.
    Deleted,
}

/// Runs one worker until `total` jobs are completed; checks the table and returns the time.
async fn drain(
    client: &Client,
    concurrency: usize,
    total: u64,
    completions: Completions,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let before: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'completed'")
            .fetch_one(client.pool())
            .await?;
    let mut builder = Worker::builder(client.clone()).queue("bench", concurrency);
    match completions {
        Completions::Default => {}
        Completions::Async => builder = builder.durable_completions(false),
        Completions::Deleted => {
            builder = builder.retention(Retention {
                completed: Duration::ZERO,
                ..Retention::default()
            })
        }
    }
    let worker = builder.build()?;
    let started = Instant::now();
    let handle = worker.start();
    handle.stats().wait_for(|st| st.completed >= total).await?;
    let elapsed = started.elapsed();
    handle.shutdown().await?;
    let (after, left): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'completed'),
                count(*) FILTER (WHERE status <> 'completed')
         FROM pgq.jobs",
    )
    .fetch_one(client.pool())
    .await?;
    assert_eq!(left, 0, "every job completed");
    if completions == Completions::Deleted {
        // The cleaner deletes what the ticks do not: completed jobs are kept for no time.
        assert_eq!(after, 0, "no completed job kept");
    } else {
        assert_eq!(
            (after - before) as u64,
            total,
            "every job completed in the table"
        );
    }
    Ok(elapsed)
}

/// Fills the table with `count` completed jobs, as a busy queue's history looks, then vacuums
/// it as autovacuum would have. Inserted directly (the insert guard is lifted meanwhile): the
/// point is the table's size, not how the rows got there.
async fn add_completed_rows(pool: &sqlx::PgPool, count: u64) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::raw_sql("ALTER TABLE pgq.jobs DISABLE TRIGGER jobs_guard_insert")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO pgq.jobs (task, queue, payload, status, phase, attempts, worker_id,
                               claimed_at, started_at, completed_at, progress)
         SELECT 'Noop', 'bench', jsonb_build_object('n', g), 'completed', 2, 1, 'history',
                now(), now(), now(), 100
         FROM generate_series(1, $1) AS g",
    )
    .bind(count as i64)
    .execute(&mut *tx)
    .await?;
    sqlx::raw_sql("ALTER TABLE pgq.jobs ENABLE TRIGGER jobs_guard_insert")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    sqlx::raw_sql("VACUUM ANALYZE pgq.jobs")
        .execute(pool)
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let s = settings();
    let url =
        std::env::var("DATABASE_URL").unwrap_or_else(|_| pgq_examples::DEFAULT_SERVER_URL.into());
    let server: PgConnectOptions = url.parse::<PgConnectOptions>()?.disable_statement_logging();
    let name = format!("pgq_bench_{}", std::process::id());
    let mut admin = server.connect().await?;
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    // On a worker thread, as an application's request handlers run: a future polled by
    // `block_on` on the main thread is woken from a worker thread after every round trip.
    let options = server.clone().database(&name);
    let result = tokio::spawn(async move { run(&s, options).await.map_err(|e| e.to_string()) })
        .await?
        .map_err(Into::into);
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    result
}

async fn run(s: &Settings, options: PgConnectOptions) -> Result<(), Box<dyn std::error::Error>> {
    // A pool as `Client::connect` makes one: no ping before each use.
    let pool = PgPoolOptions::new()
        .max_connections(20)
        .test_before_acquire(false)
        .connect_with(options)
        .await?;
    let client = Client::new(pool.clone());
    client.migrate().await?;

    checkpoint(&pool).await;
    let started = Instant::now();
    for n in 0..s.single {
        client.enqueue(Noop { n }).await?;
    }
    println!(
        "enqueue_single_per_s {:.0}",
        per_second(s.single, started.elapsed())
    );

    checkpoint(&pool).await;
    let started = Instant::now();
    enqueue_bulk(&client, s.bulk, s.bulk_batch).await?;
    println!(
        "enqueue_bulk_per_s {:.0}",
        per_second(s.bulk, started.elapsed())
    );

    let total = s.single + s.bulk;
    checkpoint(&pool).await;
    let elapsed = drain(&client, s.concurrency, total, Completions::Default).await?;
    println!("drain_per_s {:.0}", per_second(total, elapsed));

    // The same drain with the other choices a worker offers for its completions, each on a
    // table as the first found it: the completed jobs deleted and vacuumed away, the same jobs
    // enqueued again.
    for (name, completions) in [
        ("drain_async_commit_per_s", Completions::Async),
        ("drain_deleting_completed_per_s", Completions::Deleted),
    ] {
        if !s.modes {
            break;
        }
        sqlx::raw_sql("DELETE FROM pgq.jobs").execute(&pool).await?;
        sqlx::raw_sql("VACUUM ANALYZE pgq.jobs")
            .execute(&pool)
            .await?;
        enqueue_bulk(&client, total, s.bulk_batch).await?;
        checkpoint(&pool).await;
        let elapsed = drain(&client, s.concurrency, total, completions).await?;
        println!("{name} {:.0}", per_second(total, elapsed));
    }

    if s.completed > 0 {
        add_completed_rows(&pool, s.completed).await?;
        enqueue_bulk(&client, total, s.bulk_batch).await?;
        checkpoint(&pool).await;
        let elapsed = drain(&client, s.concurrency, total, Completions::Default).await?;
        println!(
            "drain_with_{}_completed_per_s {:.0}",
            s.completed,
            per_second(total, elapsed)
        );
    }

    // An idle worker on an idle database: the drains' dead rows are vacuumed first, as
    // autovacuum would have done, instead of during the measurement.
    sqlx::raw_sql("VACUUM ANALYZE pgq.jobs")
        .execute(&pool)
        .await?;
    checkpoint(&pool).await;
    let starts: Starts = Arc::default();
    let worker = Worker::builder(client.clone())
        .queue("latency", s.concurrency)
        .poll_interval(Duration::from_secs(3600))
        .state(starts.clone())
        .build()?;
    let mut events = worker.events();
    let handle = worker.start();
    while !matches!(events.recv().await?, WorkerEvent::ListenerConnected) {}
    // One untimed job first, so that the measured ones find the worker's and the client's
    // statements prepared, as a worker that has been running for a while does.
    client.enqueue(Ping { seq: s.latency }).await?;
    handle.stats().wait_for(|st| st.completed >= 1).await?;
    let mut enqueued = HashMap::new();
    for seq in 0..s.latency {
        let at = Instant::now();
        client.enqueue(Ping { seq }).await?;
        enqueued.insert(seq, at);
        tokio::time::sleep(s.latency_gap).await;
    }
    handle
        .stats()
        .wait_for(|st| st.completed > s.latency)
        .await?;
    handle.shutdown().await?;
    let mut latencies: Vec<f64> = {
        let starts = starts.lock().unwrap();
        enqueued
            .iter()
            .map(|(seq, at)| (starts[seq] - *at).as_secs_f64() * 1000.0)
            .collect()
    };
    latencies.sort_by(f64::total_cmp);
    // `--latency 0` measures none.
    if !latencies.is_empty() {
        let quantile = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
        println!("latency_p50_ms {:.2}", quantile(0.50));
        println!("latency_p99_ms {:.2}", quantile(0.99));
    }
    if let Some(mib) = peak_rss_mib() {
        println!("peak_rss_mib {mib:.1}");
    }
    pool.close().await;
    Ok(())
}

//! The standard workload: what docs/performance.md compares with the raw-SQL floor.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pgq_core::{Client, JobFilter, JobStatus, Worker, WorkerEvent};

use crate::Outcome;
use crate::dashboard;
use crate::drain::{Completions, drain};
use crate::measure::{checkpoint, per_second, quantile};
use crate::raw_latency::RawWakeups;
use crate::settings::Settings;
use crate::tasks::{Noop, Ping, Starts, enqueue_bulk};

/// How many times `stats()` and an admin search are timed; the median is printed.
const STATS_CALLS: usize = 11;

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
                at, at, at, 100
         FROM generate_series(1, $1) AS g,
              -- Spread over the last 23 hours, as a steady queue leaves them within the
              -- default retention of a day (none old enough for the cleaner).
              LATERAL (SELECT now() - g * (82800.0 / $1) * interval '1 second' AS at) AS t",
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

/// Deletes every job but the history [`add_completed_rows`] made.
async fn delete_all_but_history(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    sqlx::raw_sql("DELETE FROM pgq.jobs WHERE worker_id IS DISTINCT FROM 'history'")
        .execute(pool)
        .await?;
    Ok(())
}

/// Single and bulk enqueues, the drain (in each completion mode), the drain over a long
/// history, and an idle worker's wake-up latency.
pub(crate) async fn run(s: &Settings, client: &Client) -> Outcome {
    let pool = client.pool();
    let client = client.clone();

    checkpoint(pool).await;
    let started = Instant::now();
    for n in 0..s.single {
        client.enqueue(Noop { n }).await?;
    }
    println!(
        "enqueue_single_per_s {:.0}",
        per_second(s.single, started.elapsed())
    );

    checkpoint(pool).await;
    let started = Instant::now();
    enqueue_bulk(&client, s.bulk, s.bulk_batch).await?;
    println!(
        "enqueue_bulk_per_s {:.0}",
        per_second(s.bulk, started.elapsed())
    );

    let total = s.single + s.bulk;
    checkpoint(pool).await;
    let drained = drain(&client, s.concurrency, total, Completions::Default).await?;
    println!("drain_per_s {:.0}", per_second(total, drained.elapsed));
    // The worker's own share of the two cores: what the database does not get.
    if let Some(cpu) = drained.cpu {
        println!(
            "drain_worker_cpu_us_per_job {:.1}",
            cpu.as_secs_f64() * 1e6 / total as f64
        );
    }

    // The same drain with the other choices a worker offers for its completions, each on a
    // table as the first found it: the completed jobs deleted and vacuumed away, the same jobs
    // enqueued again.
    for (name, completions) in [
        (
            "drain_with_queue_limit_per_s",
            Completions::QueueLimit(s.queue_limit_factor),
        ),
        ("drain_async_commit_per_s", Completions::Async),
        ("drain_deleting_completed_per_s", Completions::Deleted),
    ] {
        if !s.modes {
            break;
        }
        sqlx::raw_sql("DELETE FROM pgq.jobs").execute(pool).await?;
        sqlx::raw_sql("VACUUM ANALYZE pgq.jobs")
            .execute(pool)
            .await?;
        enqueue_bulk(&client, total, s.bulk_batch).await?;
        checkpoint(pool).await;
        let drained = drain(&client, s.concurrency, total, completions).await?;
        println!("{name} {:.0}", per_second(total, drained.elapsed));
    }

    if s.completed > 0 {
        // Exactly that history: the drains' own completed jobs go first.
        sqlx::raw_sql("DELETE FROM pgq.jobs").execute(pool).await?;
        add_completed_rows(pool, s.completed).await?;
        enqueue_bulk(&client, total, s.bulk_batch).await?;
        checkpoint(pool).await;
        // The drain comes before the reads below: an index scan puts each page of history it
        // reads into shared buffers (128 MB by default) in place of the queue's, and a drain
        // right after them measured what that cache costs (0.84-0.94 of the empty table's
        // rate), not what the history does.
        let drained = drain(&client, s.concurrency, total, Completions::Default).await?;
        println!(
            "drain_with_{}_completed_per_s {:.0}",
            s.completed,
            per_second(total, drained.elapsed)
        );
        // The reads with that history and the same jobs waiting: the drain's completions go,
        // the jobs come again.
        delete_all_but_history(pool).await?;
        sqlx::raw_sql("VACUUM ANALYZE pgq.jobs")
            .execute(pool)
            .await?;
        enqueue_bulk(&client, total, s.bulk_batch).await?;
        checkpoint(pool).await;
        // What `stats()` costs with that history and those jobs waiting.
        let mut calls = Vec::new();
        for _ in 0..STATS_CALLS {
            let at = Instant::now();
            client.stats().await?;
            calls.push(at.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "stats_with_{}_finished_{}_pending_ms {:.2}",
            s.completed,
            total,
            quantile(&mut calls, 0.50)
        );
        // An operator's search of that history, the worst case: a filter that matches nothing
        // (failed jobs of a task with a given error), so that a page reads its whole window.
        let search = JobFilter::new()
            .status(JobStatus::Failed)
            .task("Noop")
            .error_contains("connection reset")
            .limit(50);
        let mut calls = Vec::new();
        for _ in 0..STATS_CALLS {
            let at = Instant::now();
            client.jobs(&search).await?;
            calls.push(at.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "admin_search_with_{}_finished_ms {:.2}",
            s.completed,
            quantile(&mut calls, 0.50)
        );
        // The dashboard's pages over that history and those jobs waiting: the slowest one.
        let (page, ms) = dashboard::slowest_page(&client, STATS_CALLS).await?;
        println!(
            "dashboard_slowest_page_with_{}_finished_{}_pending_ms {ms:.2}",
            s.completed, total
        );
        eprintln_page(&page);
        delete_all_but_history(pool).await?;
    }

    // An idle worker on an idle database: the drains' dead rows are vacuumed first, as
    // autovacuum would have done, instead of during the measurement.
    sqlx::raw_sql("VACUUM ANALYZE pgq.jobs")
        .execute(pool)
        .await?;
    let mut raw = RawWakeups::new(pool).await?;
    checkpoint(pool).await;
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
    let mut enqueue_calls = Vec::new();
    let mut raw_latencies = Vec::new();
    let mut raw_inserts = Vec::new();
    for seq in 0..s.latency {
        let at = Instant::now();
        client.enqueue(Ping { seq }).await?;
        enqueue_calls.push(at.elapsed().as_secs_f64() * 1000.0);
        enqueued.insert(seq, at);
        tokio::time::sleep(s.latency_gap).await;
        // The same wake-up in raw SQL, its turn after the same gap.
        let wakeup = raw.wake_up().await?;
        raw_latencies.push(wakeup.total_ms);
        raw_inserts.push(wakeup.insert_ms);
        tokio::time::sleep(s.latency_gap).await;
    }
    handle
        .stats()
        .wait_for(|st| st.completed > s.latency)
        .await?;
    handle.shutdown().await?;
    let by_seq: Vec<(u64, f64)> = {
        let starts = starts.lock().unwrap();
        enqueued
            .iter()
            .map(|(seq, at)| (*seq, (starts[seq] - *at).as_secs_f64() * 1000.0))
            .collect()
    };
    eprintln_slowest(&by_seq, &enqueue_calls, &raw_latencies);
    let mut latencies: Vec<f64> = by_seq.iter().map(|(_, ms)| *ms).collect();
    // `--latency 0` measures none.
    if !latencies.is_empty() {
        println!("latency_p50_ms {:.2}", quantile(&mut latencies, 0.50));
        println!("latency_p99_ms {:.2}", quantile(&mut latencies, 0.99));
        // The enqueue call alone, its durable commit included: the part of the latency that is
        // the database's before any worker can see the job.
        println!(
            "latency_enqueue_p50_ms {:.2}",
            quantile(&mut enqueue_calls, 0.50)
        );
        // Raw SQL's insert alone: what the enqueue call's share is compared with.
        println!(
            "latency_raw_sql_insert_p50_ms {:.2}",
            quantile(&mut raw_inserts, 0.50)
        );
        // What PostgreSQL alone takes for the same wake-ups on this machine.
        println!(
            "latency_raw_sql_p50_ms {:.2}",
            quantile(&mut raw_latencies, 0.50)
        );
        println!(
            "latency_raw_sql_p99_ms {:.2}",
            quantile(&mut raw_latencies, 0.99)
        );
    }
    Ok(())
}

/// The slowest wake-ups, on stderr, each with its enqueue call's share and beside raw SQL's of
/// the same turn: whether a slow one was the host's moment (both slow) or pgq's own.
fn eprintln_slowest(by_seq: &[(u64, f64)], enqueues: &[f64], raw: &[f64]) {
    use std::io::Write as _;
    let mut slowest = by_seq.to_vec();
    slowest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let turns: Vec<String> = slowest
        .iter()
        .take(4)
        .map(|(seq, ms)| {
            let at = |of: &[f64]| of.get(*seq as usize).copied().unwrap_or(f64::NAN);
            format!(
                "#{seq} {ms:.2} ms (its enqueue {:.2} ms; raw SQL {:.2} ms)",
                at(enqueues),
                at(raw)
            )
        })
        .collect();
    let _ = writeln!(
        std::io::stderr().lock(),
        "latency: slowest wake-ups {}",
        turns.join(", ")
    );
}

/// Which page was the slowest, on stderr: the output's lines stay `name value` pairs.
fn eprintln_page(page: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "dashboard: slowest page {page}");
}

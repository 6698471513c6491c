//! One worker draining the no-op jobs, timed until every one is completed, and checked.

use std::time::{Duration, Instant};

use pgq_core::{Client, Retention, Worker};

use crate::measure::process_cpu;

/// How a drain's worker writes its completions, or claims.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Completions {
    /// The default configuration on a queue with a cluster-wide concurrency limit of this many
    /// times the worker's concurrency: every claim takes the limited path, and the limit never
    /// binds the handlers running at once.
    QueueLimit(u64),
    /// The default configuration.
    Default,
    /// `durable_completions(false)`: commits that do not wait for the WAL flush.
    Async,
    /// `Retention { completed: ZERO }`: completed jobs deleted by the statement that completes
    /// them.
    Deleted,
}

/// How long a drain took, and how much CPU the worker's process used meanwhile.
pub(crate) struct Drained {
    pub(crate) elapsed: Duration,
    pub(crate) cpu: Option<Duration>,
}

/// Runs one worker until `total` jobs are completed; checks the table and returns the time.
pub(crate) async fn drain(
    client: &Client,
    concurrency: usize,
    total: u64,
    completions: Completions,
) -> Result<Drained, Box<dyn std::error::Error + Send + Sync>> {
    let before: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'completed'")
            .fetch_one(client.pool())
            .await?;
    let mut builder = Worker::builder(client.clone()).queue("bench", concurrency);
    let limited = matches!(completions, Completions::QueueLimit(_));
    if let Completions::QueueLimit(factor) = completions {
        let limit = u32::try_from(factor.saturating_mul(concurrency as u64)).unwrap_or(u32::MAX);
        client.set_queue_limit("bench", Some(limit)).await?;
    }
    match completions {
        Completions::Default | Completions::QueueLimit(_) => {}
        Completions::Async => builder = builder.durable_completions(false),
        Completions::Deleted => {
            builder = builder.retention(Retention {
                completed: Duration::ZERO,
                ..Retention::default()
            })
        }
    }
    let worker = builder.build()?;
    let cpu_before = process_cpu();
    let started = Instant::now();
    let handle = worker.start();
    handle.stats().wait_for(|st| st.completed >= total).await?;
    let elapsed = started.elapsed();
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    handle.shutdown().await?;
    if limited {
        client.set_queue_limit("bench", None).await?;
    }
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
    Ok(Drained { elapsed, cpu })
}

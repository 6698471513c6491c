//! [`QueueInfo`]: each queue as operators see it — its numbers, whether it is paused, and how
//! many live workers serve it; and each queue's finished jobs minute by minute
//! ([`FinishedHistory`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::client::Client;
use crate::error::Result;
use crate::history::{FINISHED_HISTORY_MINUTES, FinishedHistory};
use crate::rate_limit::RateLimit;
use crate::stats::QueueStats;
use crate::store;

/// One queue, as [`Client::queues`] reports it.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// for queue in client.queues().await? {
///     let state = if queue.paused_at.is_some() { "paused" } else { "running" };
///     println!("{} ({state}): {} due, {} workers", queue.name, queue.stats.due, queue.workers);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// When an operator paused it, while it is paused.
    pub paused_at: Option<DateTime<Utc>>,
    /// Its jobs and rates, as [`Client::stats`] reports them.
    pub stats: QueueStats,
    /// How many live workers serve it.
    pub workers: u32,
    /// Its cluster-wide concurrency limit ([`Client::set_queue_limit`]), if it has one.
    pub limit: Option<u32>,
    /// Its cluster-wide rate limit ([`Client::set_queue_rate`]), if it has one.
    pub rate: Option<RateLimit>,
}

impl Client {
    /// Every queue that has active jobs, jobs finished within the stats window, a live worker,
    /// a pause, a concurrency limit or a rate limit; by name. It reads what [`stats`](Self::stats),
    /// [`workers`](Self::workers) and the paused queues read: never the whole history.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let paused: Vec<_> = client.queues().await?.into_iter().filter(|q| q.paused_at.is_some()).collect();
    /// println!("{} paused queues", paused.len());
    /// # Ok(()) }
    /// ```
    pub async fn queues(&self) -> Result<Vec<QueueInfo>> {
        let mut queues: BTreeMap<String, QueueInfo> = BTreeMap::new();
        for stats in self.stats().await? {
            let name = stats.queue.clone();
            info(&mut queues, &name).stats = stats;
        }
        for (name, paused_at) in store::queues::paused(self.store()).await? {
            info(&mut queues, &name).paused_at = Some(paused_at);
        }
        for limits in store::queues::limited(self.store()).await? {
            let queue = info(&mut queues, &limits.name);
            queue.limit = limits.concurrency;
            queue.rate = limits
                .rate
                .and_then(|(jobs, period_ms)| RateLimit::stored(jobs, period_ms));
        }
        for worker in self.workers().await? {
            for name in worker.queues.keys() {
                info(&mut queues, name).workers += 1;
            }
        }
        Ok(queues.into_values().collect())
    }

    /// How many jobs each queue completed, failed and cancelled, minute by minute, over the
    /// last [`FINISHED_HISTORY_MINUTES`]: the current minute (by the database clock,
    /// [`FinishedHistory::now`]) and the 59 whole minutes before it. It reads the finished-jobs
    /// index over that hour, never the whole history.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let history = client.finished_history().await?;
    /// let failed: u64 = history.minutes.iter().map(|m| m.failed).sum();
    /// println!("{failed} jobs failed in the last hour");
    /// # Ok(()) }
    /// ```
    pub async fn finished_history(&self) -> Result<FinishedHistory> {
        let (now, minutes) =
            store::history::finished_by_minute(self.store(), FINISHED_HISTORY_MINUTES).await?;
        Ok(FinishedHistory { now, minutes })
    }
}

/// The entry for queue `name`, idle until something says otherwise.
fn info<'a>(queues: &'a mut BTreeMap<String, QueueInfo>, name: &str) -> &'a mut QueueInfo {
    queues.entry(name.to_owned()).or_insert_with(|| QueueInfo {
        name: name.to_owned(),
        paused_at: None,
        stats: QueueStats::idle(name.to_owned()),
        workers: 0,
        limit: None,
        rate: None,
    })
}

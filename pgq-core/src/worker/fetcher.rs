//! One fetcher per queue: waits for a free slot and a reason to look (a notification, the poll
//! interval, or a full previous batch), claims up to the free slots, and starts each job.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use crate::store;
use crate::worker::{QueueSlots, Shared, executor};

pub(crate) async fn fetch(shared: Arc<Shared>, queue: Arc<QueueSlots>) {
    let mut stopping = shared.stopping.clone();
    // Look at once on start: jobs may be waiting already.
    let mut maybe_more = true;
    loop {
        if !maybe_more {
            tokio::select! {
                _ = queue.wake.notified() => {}
                _ = tokio::time::sleep(shared.config.poll_interval) => {}
                _ = stopping.wait_for(|stop| *stop) => return,
            }
        }
        let first = tokio::select! {
            permit = queue.slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = stopping.wait_for(|stop| *stop) => return,
        };
        let mut permits = vec![first];
        while permits.len() < shared.config.batch_size {
            match queue.slots.clone().try_acquire_owned() {
                Ok(permit) => permits.push(permit),
                Err(_) => break,
            }
        }
        maybe_more = claim_and_start(&shared, &queue, permits).await;
    }
}

/// Claims up to one job per permit and starts them. Returns whether the claim came back full,
/// meaning more jobs may be due right now.
async fn claim_and_start(
    shared: &Arc<Shared>,
    queue: &QueueSlots,
    mut permits: Vec<OwnedSemaphorePermit>,
) -> bool {
    let wanted = permits.len();
    let lease_ms = i64::try_from(shared.config.lease.as_millis()).unwrap_or(i64::MAX);
    let claimed = store::attempt::claim(
        &shared.pool,
        &queue.name,
        &shared.task_names,
        wanted,
        shared.worker_id(),
        lease_ms,
    )
    .await;
    let jobs = match claimed {
        Ok(jobs) => jobs,
        Err(err) => {
            tracing::warn!(queue = %queue.name, error = %err, "claim failed; retrying after the poll interval");
            return false;
        }
    };
    if jobs.is_empty() {
        return false;
    }
    let full = jobs.len() == wanted;
    shared
        .stats
        .send_modify(|stats| stats.claimed += jobs.len() as u64);
    let leases: Vec<i64> = jobs
        .iter()
        .map(|job| shared.handlers[job.task.as_str()].lease_ms)
        .collect();
    if let Err(err) = store::attempt::start(&shared.pool, &jobs, &leases, shared.worker_id()).await
    {
        // They stay claimed by us; their lease runs out and they are rescued.
        tracing::warn!(queue = %queue.name, error = %err, "could not mark claimed jobs running");
        return false;
    }
    for job in jobs {
        let permit = permits.pop().expect("one permit per claimed job");
        let entry = shared.handlers[job.task.as_str()];
        tokio::spawn(executor::execute(shared.clone(), job, entry, Some(permit)));
    }
    full
}

//! One dispatcher per queue. Each round trip is one statement (a tick) that completes the
//! attempts that finished since the last one, starts the jobs the last one claimed, and claims
//! into the free slots — so under load a batch of jobs costs one statement per step, not one per
//! job. Idle, it waits for a notification, a finished attempt, or the poll interval.
//!
//! A claimed job holds its slot until its handler returns; its completion is written by a later
//! tick, and its executor waits for that before reporting the outcome.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, oneshot};

use crate::store;
use crate::store::attempt::{ClaimedJob, Fence};
use crate::store::tick::{Held, TickRequest};
use crate::worker::{QueueSlots, Shared, executor};

/// A running attempt's place in its queue: the slot it holds, and where its completion goes.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) queue: Arc<QueueSlots>,
    pub(crate) permit: OwnedSemaphorePermit,
}

/// A finished attempt waiting for a tick to write its completion; told whether the fence held.
#[derive(Debug)]
pub(crate) struct PendingCompletion {
    pub(crate) held: Held,
    pub(crate) done: oneshot::Sender<bool>,
}

pub(crate) async fn dispatch(shared: Arc<Shared>, queue: Arc<QueueSlots>) {
    let mut stopping = shared.stopping.clone();
    let mut to_start: Vec<(ClaimedJob, OwnedSemaphorePermit)> = Vec::new();
    // Look at once on start: jobs may be waiting already.
    let mut maybe_more = true;
    loop {
        let stop = *stopping.borrow();
        if stop && !to_start.is_empty() {
            release_unstarted(&shared, std::mem::take(&mut to_start)).await;
        }
        if !stop {
            coalesce(&queue, to_start.len()).await;
        }
        let completions = queue.take_completions();
        let mut permits = Vec::new();
        if !stop && maybe_more {
            while permits.len() < shared.config.batch_size {
                match queue.slots.clone().try_acquire_owned() {
                    Ok(permit) => permits.push(permit),
                    Err(_) => break,
                }
            }
        }
        if completions.is_empty() && to_start.is_empty() && permits.is_empty() {
            if stop {
                // Every handler has returned and every completion is written: done.
                let all = u32::try_from(queue.concurrency).unwrap_or(u32::MAX);
                tokio::select! {
                    all_free = queue.slots.acquire_many(all) => {
                        if all_free.is_ok() && queue.completions_empty() {
                            return;
                        }
                    }
                    _ = queue.completed.notified() => {}
                }
                continue;
            }
            tokio::select! {
                _ = queue.wake.notified() => maybe_more = true,
                _ = queue.completed.notified() => {}
                _ = tokio::time::sleep(shared.config.poll_interval) => maybe_more = true,
                permit = queue.slots.clone().acquire_owned(), if maybe_more => {
                    // A slot freed up while more jobs may be due: claim at once.
                    drop(permit);
                }
                _ = stopping.wait_for(|stop| *stop) => {}
            }
            continue;
        }
        let asked = permits.len();
        let full = tick(&shared, &queue, completions, &mut to_start, permits).await;
        if asked > 0 {
            maybe_more = full;
        }
    }
}

/// How long a tick waits for handlers in flight to finish, so that their completions share it.
const COALESCE_WINDOW: Duration = Duration::from_millis(1);

/// Waits, at most [`COALESCE_WINDOW`], until no handler of the queue is still running.
async fn coalesce(queue: &QueueSlots, unstarted: usize) {
    let running = || {
        let held = queue.concurrency - queue.slots.available_permits().min(queue.concurrency);
        held.saturating_sub(unstarted)
    };
    if running() == 0 {
        return;
    }
    let deadline = tokio::time::Instant::now() + COALESCE_WINDOW;
    while running() > 0 {
        tokio::select! {
            _ = queue.completed.notified() => {}
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// Runs one tick. Returns whether the claim came back full (more may be due now).
async fn tick(
    shared: &Arc<Shared>,
    queue: &Arc<QueueSlots>,
    completions: Vec<PendingCompletion>,
    to_start: &mut Vec<(ClaimedJob, OwnedSemaphorePermit)>,
    mut permits: Vec<OwnedSemaphorePermit>,
) -> bool {
    let complete: Vec<Held> = completions.iter().map(|c| c.held).collect();
    let start: Vec<Held> = to_start
        .iter()
        .map(|(job, _)| Held {
            id: job.id,
            attempt: job.attempt,
            lease_ms: shared.handlers[job.task.as_str()].lease_ms,
        })
        .collect();
    let request = TickRequest {
        worker_id: shared.worker_id(),
        complete: &complete,
        start: &start,
        queue: &queue.name,
        tasks: &shared.task_names,
        claim: permits.len(),
        claim_lease_ms: i64::try_from(shared.config.lease.as_millis()).unwrap_or(i64::MAX),
    };
    let result = match store::tick::tick(&shared.pool, &request).await {
        Ok(result) => result,
        Err(err) => {
            tracing::warn!(queue = %queue.name, error = %err, "dispatch failed; retrying after the poll interval");
            // Nothing was written: keep everything for the next tick.
            queue.return_completions(completions);
            tokio::time::sleep(shared.config.poll_interval).await;
            return false;
        }
    };
    for completion in completions {
        let held = result.completed.contains(&completion.held.id);
        let _ = completion.done.send(held);
    }
    for (job, permit) in std::mem::take(to_start) {
        if result.started.contains(&job.id) {
            let entry = shared.handlers[job.task.as_str()];
            let slot = Slot {
                queue: queue.clone(),
                permit,
            };
            tokio::spawn(executor::execute(shared.clone(), job, entry, Some(slot)));
        } else {
            // Released or rescued between claim and start (an operator, or a long stall).
            tracing::warn!(job = %job.id, "claimed job was taken back before it started");
        }
    }
    let asked = permits.len();
    let claimed = result.claimed.len();
    if claimed > 0 {
        shared
            .stats
            .send_modify(|stats| stats.claimed += claimed as u64);
    }
    for job in result.claimed {
        let permit = permits.pop().expect("never more claimed than asked");
        to_start.push((job, permit));
    }
    asked > 0 && claimed == asked
}

/// Jobs claimed but not started when the worker stops go straight back to pending.
async fn release_unstarted(shared: &Shared, jobs: Vec<(ClaimedJob, OwnedSemaphorePermit)>) {
    for (job, _permit) in jobs {
        let fence = Fence {
            id: job.id,
            attempt: job.attempt,
            worker_id: shared.worker_id(),
        };
        if let Err(err) = store::attempt::release(&shared.pool, fence).await {
            tracing::warn!(job = %job.id, error = %err, "could not release an unstarted job");
        }
    }
}

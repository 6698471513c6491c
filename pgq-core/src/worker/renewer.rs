//! Lease renewal: every third of the shortest lease its tasks use, one statement renews every attempt this worker
//! runs or has claimed and not started yet, on the upkeep pool. An attempt missing from the result lost its lease; one whose job
//! was asked to cancel learns it here too, should the notification have been missed.

use std::sync::Arc;
use std::time::Duration;

use crate::store;
use crate::store::lease::HeldJob;
use crate::worker::Shared;

pub(crate) async fn renew(shared: Arc<Shared>) {
    let shortest_ms = shared
        .handlers
        .values()
        .map(|entry| entry.lease_ms)
        .min()
        .unwrap_or(i64::MAX);
    let shortest = Duration::from_millis(u64::try_from(shortest_ms).unwrap_or(u64::MAX));
    let interval = (shortest.min(shared.config.lease) / 3).max(Duration::from_millis(100));
    loop {
        tokio::time::sleep(interval).await;
        let mut held: Vec<HeldJob> = match shared.running.lock() {
            Ok(running) => running
                .iter()
                .map(|(&id, r)| HeldJob {
                    id,
                    attempt: r.attempt,
                    lease_ms: r.lease_ms,
                })
                .collect(),
            Err(_) => return,
        };
        if let Ok(waiting) = shared.waiting.lock() {
            held.extend(waiting.values().copied());
        }
        if held.is_empty() {
            continue;
        }
        match store::lease::renew(&shared.upkeep_pool, shared.worker_id(), &held).await {
            Ok(renewed) => {
                for job in &held {
                    let found = renewed.iter().find(|r| r.id == job.id);
                    let Some(state) = shared.running_state(job.id) else {
                        if found.is_none() {
                            // Still waiting for a slot, it must not start.
                            lose_waiting(&shared, job);
                        }
                        continue; // or finished meanwhile
                    };
                    match found {
                        Some(r) if r.cancel_requested => state.request_cancel(),
                        Some(_) => {}
                        None if state.attempt == job.attempt => state.lose_lease(),
                        None => {}
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "lease renewal failed; retrying"),
        }
    }
}

fn lose_waiting(shared: &Shared, job: &HeldJob) {
    if let Ok(mut waiting) = shared.waiting.lock()
        && waiting
            .get(&job.id)
            .is_some_and(|w| w.attempt == job.attempt)
    {
        waiting.remove(&job.id);
    }
}

//! Waking idle workers after an enqueue, at most once per queue per short window.
//!
//! A NOTIFY costs a good part of a single insert's time in PostgreSQL. The first enqueue of a
//! window notifies in its own statement (leading edge); later ones in the same window skip it,
//! and one notification goes out when the window has closed and their inserts have returned
//! (trailing edge). So an idle worker still hears of every job, within the window, and a burst of
//! enqueues costs one notification per window instead of one each. Enqueues inside a caller's
//! transaction keep their own, transactional, notification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::defaults;
use crate::store;
use crate::store::Store;

#[derive(Debug)]
pub(crate) struct Wakeups {
    window: Duration,
    queues: Mutex<HashMap<String, QueueWakeup>>,
    /// Signalled whenever a deferred enqueue returns.
    settled: Notify,
}

impl Default for Wakeups {
    fn default() -> Self {
        Self::new(defaults::WAKEUP_WINDOW)
    }
}

#[derive(Debug)]
struct QueueWakeup {
    /// When the last notification for the queue was sent; `None` before the first.
    last: Option<Instant>,
    trailing: bool,
    /// Enqueues that skipped their notification and have not returned yet.
    deferred: usize,
}

/// How an enqueue wakes workers.
#[derive(Debug)]
pub(crate) enum Wakeup {
    /// Its own statement notifies.
    Leading,
    /// The trailing notification covers it once this guard is dropped (its insert returned).
    Deferred { _until_returned: DeferredGuard },
}

impl Wakeup {
    pub(crate) fn notifies(&self) -> bool {
        matches!(self, Wakeup::Leading)
    }
}

#[derive(Debug)]
pub(crate) struct DeferredGuard {
    wakeups: Arc<Wakeups>,
    queue: String,
}

impl Drop for DeferredGuard {
    fn drop(&mut self) {
        if let Ok(mut queues) = self.wakeups.queues.lock()
            && let Some(state) = queues.get_mut(&self.queue)
        {
            state.deferred -= 1;
        }
        self.wakeups.settled.notify_waiters();
    }
}

/// The longest window: a day is as good as forever to a worker that polls, and the time its
/// trailing notification is due stays one a timer can hold.
const LONGEST_WINDOW: Duration = Duration::from_secs(24 * 3600);

impl Wakeups {
    pub(crate) fn new(window: Duration) -> Self {
        Self {
            window: window.min(LONGEST_WINDOW),
            queues: Mutex::new(HashMap::new()),
            settled: Notify::new(),
        }
    }

    /// Decides how this enqueue wakes workers; hold the result until the insert has returned.
    pub(crate) fn enqueue(self: &Arc<Self>, store: &Store, queue: &str) -> Wakeup {
        let now = Instant::now();
        let Ok(mut queues) = self.queues.lock() else {
            return Wakeup::Leading;
        };
        let state = queues.entry(queue.to_owned()).or_insert(QueueWakeup {
            last: None,
            trailing: false,
            deferred: 0,
        });
        let window_open = state
            .last
            .is_some_and(|last| now.duration_since(last) < self.window);
        if !window_open && !state.trailing {
            state.last = Some(now);
            return Wakeup::Leading;
        }
        state.deferred += 1;
        if !state.trailing {
            state.trailing = true;
            let fire_at = state.last.map_or(now, |last| last + self.window);
            let (wakeups, store, queue) = (self.clone(), store.clone(), queue.to_owned());
            tokio::spawn(async move { wakeups.trailing(fire_at, &store, &queue).await });
        }
        Wakeup::Deferred {
            _until_returned: DeferredGuard {
                wakeups: self.clone(),
                queue: queue.to_owned(),
            },
        }
    }

    /// After the window, once every deferred insert has returned, notifies once.
    async fn trailing(&self, fire_at: Instant, store: &Store, queue: &str) {
        tokio::time::sleep_until(fire_at).await;
        loop {
            let settled = self.settled.notified();
            let pending = self
                .queues
                .lock()
                .map(|queues| queues.get(queue).map_or(0, |q| q.deferred))
                .unwrap_or(0);
            if pending == 0 {
                break;
            }
            settled.await;
        }
        if let Ok(mut queues) = self.queues.lock()
            && let Some(state) = queues.get_mut(queue)
        {
            state.trailing = false;
            state.last = Some(Instant::now());
        }
        if let Err(err) = store::enqueue::notify(store, queue).await {
            // Workers still poll: this costs latency, never a job.
            tracing::warn!(queue, error = %err, "could not notify workers");
        }
    }
}

//! Waking idle workers after an enqueue, at most once per queue per short window.
//!
//! A NOTIFY costs a good part of a single insert's time in PostgreSQL. The first enqueue of a
//! window notifies in its own statement (leading edge); later ones in the same window skip it,
//! and one notification goes out when the window has closed and their inserts have returned
//! (trailing edge). So an idle worker still hears of every job, within the window, and a burst of
//! enqueues costs one notification per window instead of one each. Enqueues inside a caller's
//! transaction keep their own, transactional, notification.
//!
//! The trailing notification waits only for the enqueues deferred before its window closed:
//! those that come later join the next window's. Waiting for every deferred enqueue would, under
//! a steady load of overlapping enqueues, never notify at all, and idle workers would find the
//! jobs only when they poll.

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

#[derive(Debug, Default)]
struct QueueWakeup {
    /// When the last notification for the queue was sent; `None` before the first.
    last: Option<Instant>,
    trailing: bool,
    /// The window deferred enqueues join now; the one before it closed when its trailing
    /// notification was due.
    window: u64,
    /// Enqueues of the open window that skipped their notification and have not returned yet.
    open: usize,
    /// The same, of the closed window, whose notification waits for them.
    closed: usize,
}

impl QueueWakeup {
    fn idle(&self, now: Instant, window: Duration) -> bool {
        !self.trailing
            && self.open == 0
            && self.closed == 0
            && self
                .last
                .is_none_or(|last| now.duration_since(last) >= window)
    }
}

/// How many queues' wake-up states a client keeps before it forgets the idle ones (a client that
/// enqueues to a queue per tenant would otherwise keep one for every queue it ever used).
const KEPT_QUEUES: usize = 256;

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
    window: u64,
}

impl Drop for DeferredGuard {
    fn drop(&mut self) {
        if let Ok(mut queues) = self.wakeups.queues.lock()
            && let Some(state) = queues.get_mut(&self.queue)
        {
            if state.window == self.window {
                state.open -= 1;
            } else {
                state.closed -= 1;
            }
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

    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    /// Decides how this enqueue wakes workers; hold the result until the insert has returned.
    pub(crate) fn enqueue(self: &Arc<Self>, store: &Store, queue: &str) -> Wakeup {
        let now = Instant::now();
        let Ok(mut queues) = self.queues.lock() else {
            return Wakeup::Leading;
        };
        if queues.len() >= KEPT_QUEUES && !queues.contains_key(queue) {
            queues.retain(|_, state| !state.idle(now, self.window));
        }
        let state = queues.entry(queue.to_owned()).or_default();
        let window_open = state
            .last
            .is_some_and(|last| now.duration_since(last) < self.window);
        if !window_open && !state.trailing {
            state.last = Some(now);
            return Wakeup::Leading;
        }
        state.open += 1;
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
                window: state.window,
            },
        }
    }

    /// At the end of each window with deferred enqueues, once those have returned, notifies
    /// once; enqueues deferred meanwhile wait for the next window's notification.
    async fn trailing(&self, mut fire_at: Instant, store: &Store, queue: &str) {
        loop {
            tokio::time::sleep_until(fire_at).await;
            self.close_window(queue);
            loop {
                let settled = self.settled.notified();
                let pending = self
                    .queues
                    .lock()
                    .map(|queues| queues.get(queue).map_or(0, |q| q.closed))
                    .unwrap_or(0);
                if pending == 0 {
                    break;
                }
                settled.await;
            }
            if let Err(err) = store::enqueue::notify(store, queue).await {
                // Workers still poll: this costs latency, never a job.
                tracing::warn!(queue, error = %err, "could not notify workers");
            }
            let Ok(mut queues) = self.queues.lock() else {
                return;
            };
            let Some(state) = queues.get_mut(queue) else {
                return;
            };
            let now = Instant::now();
            state.last = Some(now);
            if state.open == 0 {
                state.trailing = false;
                return;
            }
            fire_at = now + self.window;
        }
    }

    /// The queue's deferred enqueues so far are the closed window's; later ones open another.
    fn close_window(&self, queue: &str) {
        if let Ok(mut queues) = self.queues.lock()
            && let Some(state) = queues.get_mut(queue)
        {
            state.window += 1;
            state.closed += state.open;
            state.open = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::{KEPT_QUEUES, Wakeups};
    use crate::schema::Schema;
    use crate::store::Store;

    /// A client enqueueing to a queue per tenant keeps the wake-up state of the busy ones only.
    #[tokio::test]
    async fn idle_queues_are_forgotten() {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .unwrap();
        let store = Store::new(pool, Duration::from_secs(1), Schema::default());
        let wakeups = Arc::new(Wakeups::new(Duration::ZERO));
        for tenant in 0..10 * KEPT_QUEUES {
            assert!(
                wakeups
                    .enqueue(&store, &format!("tenant-{tenant}"))
                    .notifies()
            );
        }
        let kept = wakeups.queues.lock().unwrap().len();
        assert!(kept <= KEPT_QUEUES + 1, "{kept} queues kept");
    }
}

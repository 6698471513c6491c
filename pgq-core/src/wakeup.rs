//! Waking idle workers after an enqueue, about once per queue per short window.
//!
//! A NOTIFY costs a good part of a single insert's time in PostgreSQL. The first enqueue of a
//! window notifies in its own statement (leading edge); later ones in the same window skip it,
//! and one notification goes out when the window has closed and their inserts have returned
//! (trailing edge). So an idle worker still hears of every job, soon after its window, and a
//! burst of enqueues costs one notification per window instead of one each. Enqueues inside a caller's
//! transaction keep their own, transactional, notification.
//!
//! The trailing notification waits only for the enqueues deferred before its window closed:
//! those that come later join the next window's. Waiting for every deferred enqueue would, under
//! a steady load of overlapping enqueues, never notify at all, and idle workers would find the
//! jobs only when they poll.
//!
//! A statement of its own for the trailing notification costs a steady loop of enqueues a round
//! trip every window. So the trailing notification waits half a window more, and the first
//! enqueue after the window closed, if every deferred enqueue has returned by then, notifies in
//! its own statement and carries it: that enqueue opens the next window, and the trailing
//! notification is sent only if its statement did not notify (an error, a duplicate of a unique
//! key, a job not yet due), or if it takes longer than a window (a unique key's row lock, a dead
//! connection).
//!
//! The trailing notification waits a window at most for its deferred enqueues to return; one
//! that takes longer gets a notification of its own once it returns. A replace always notifies
//! in its own statement, outside the windows: it notifies the queue of the job it replaces,
//! which may be another, and it may wait on that job's row lock. A job due later wakes nobody.

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
    /// The same, of the closed windows, whose notification waits for them (a window at most).
    closed: usize,
    /// The last closed window whose trailing notification is on its way: its enqueues that
    /// return from then on owe another.
    notified_window: Option<u64>,
    /// Whether an enqueue deferred its notification since the last one that covers it.
    owed: bool,
    /// Whether an enqueue carrying the trailing notification has not returned yet.
    carrying: bool,
    /// When the last enqueue that carried the trailing notification began, once it notified.
    carried_at: Option<Instant>,
    /// Whether the trailing notification went out for the carrier in flight, which took too
    /// long: it owes nothing if it fails.
    carrier_relieved: bool,
}

impl QueueWakeup {
    fn idle(&self, now: Instant, window: Duration) -> bool {
        !self.trailing
            && !self.carrying
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
    /// Its own statement notifies, outside the windows: a replace, which notifies the queue of
    /// the job it replaces, maybe another, and may wait on that job's row lock; a job not due
    /// yet, which wakes nobody.
    Alone,
    /// Its own statement notifies.
    Leading,
    /// Its own statement notifies, and covers the enqueues deferred before it began, which the
    /// trailing notification then leaves out: report whether it notified.
    Carrying(Carrier),
    /// The trailing notification covers it once this guard is dropped (its insert returned).
    Deferred { _until_returned: DeferredGuard },
}

impl Wakeup {
    pub(crate) fn notifies(&self) -> bool {
        !matches!(self, Wakeup::Deferred { .. })
    }

    /// Once the insert returned: whether its statement notified.
    pub(crate) fn returned(self, notified: bool) {
        if let Wakeup::Carrying(mut carrier) = self {
            carrier.notified = notified;
        }
    }
}

/// An enqueue carrying the trailing notification. Dropped without having notified (its insert
/// failed or was cancelled, or it notified nobody), it hands the notification back.
#[derive(Debug)]
pub(crate) struct Carrier {
    wakeups: Arc<Wakeups>,
    queue: String,
    began: Instant,
    /// Whether a notification was owed when it began.
    took_owed: bool,
    notified: bool,
}

impl Drop for Carrier {
    fn drop(&mut self) {
        if let Ok(mut queues) = self.wakeups.queues.lock()
            && let Some(state) = queues.get_mut(&self.queue)
        {
            state.carrying = false;
            if self.notified {
                state.carried_at = Some(self.began);
            } else if self.took_owed && !state.carrier_relieved {
                state.owed = true;
            }
        }
        self.wakeups.settled.notify_waiters();
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
            if state
                .notified_window
                .is_some_and(|notified| self.window <= notified)
            {
                // Its window's notification went out before it returned.
                state.owed = true;
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
        if !window_open && !state.carrying && state.open == 0 && state.closed == 0 {
            // Every deferred enqueue has returned: this one's notification comes after them.
            state.last = Some(now);
            state.carrying = true;
            state.carrier_relieved = false;
            let took_owed = std::mem::take(&mut state.owed);
            return Wakeup::Carrying(Carrier {
                wakeups: self.clone(),
                queue: queue.to_owned(),
                began: now,
                took_owed,
                notified: false,
            });
        }
        state.open += 1;
        state.owed = true;
        if !state.trailing {
            state.trailing = true;
            let fire_at = state.last.map_or(now, |last| self.trailing_due(last));
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
    /// once, unless an enqueue that began after they returned carried the notification; enqueues
    /// deferred meanwhile wait for the next window's notification.
    async fn trailing(&self, mut fire_at: Instant, store: &Store, queue: &str) {
        let mut closing;
        loop {
            tokio::time::sleep_until(fire_at).await;
            // A carrier in flight may cover the window: wait for its word, a window at most.
            let carrier_slow =
                tokio::time::timeout(self.window, self.until(queue, |state| !state.carrying))
                    .await
                    .is_err();
            {
                let Ok(mut queues) = self.queues.lock() else {
                    return;
                };
                let Some(state) = queues.get_mut(queue) else {
                    return;
                };
                let now = Instant::now();
                if state.carrying && !carrier_slow {
                    // Another carrier began since the wait ended.
                    fire_at = now;
                    continue;
                }
                if let Some(carried_at) = state.carried_at.take()
                    && self.trailing_due(carried_at) > now
                {
                    // The window it opened has not closed yet.
                    fire_at = self.trailing_due(carried_at);
                    continue;
                }
                // A slow carrier: the enqueues it would cover have returned, so this
                // notification covers them instead, once.
                let relieve = state.carrying && !state.carrier_relieved;
                if !state.owed && !relieve {
                    if state.closed > 0 {
                        // Enqueues that outlived their window's notification: each owes
                        // another when it returns.
                        fire_at = now + self.window;
                        continue;
                    }
                    state.trailing = false;
                    self.settled.notify_waiters();
                    return;
                }
                state.carrier_relieved |= relieve;
                // The queue's deferred enqueues so far are the closed window's; later ones open
                // another.
                closing = state.window;
                state.window += 1;
                state.closed += state.open;
                state.open = 0;
                state.owed = false;
            }
            // Those still running a window later (waiting on a unique key's row lock, say) get
            // a notification of their own when they return.
            let _ = tokio::time::timeout(self.window, self.until(queue, |state| state.closed == 0))
                .await;
            if let Ok(mut queues) = self.queues.lock()
                && let Some(state) = queues.get_mut(queue)
            {
                // From here on, one returning may commit after the notification does.
                state.notified_window = Some(closing);
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
            if !state.owed && state.closed == 0 && (!state.carrying || state.carrier_relieved) {
                state.trailing = false;
                self.settled.notify_waiters();
                return;
            }
            fire_at = self.trailing_due(now);
        }
    }

    /// When the trailing notification of a window opened at `opened` is sent: half a window
    /// after it closed, time for the first enqueue after it to carry the notification instead.
    fn trailing_due(&self, opened: Instant) -> Instant {
        opened + self.window + self.window / 2
    }

    /// Waits until the queue's wake-up state meets `condition` (or is gone).
    async fn until(&self, queue: &str, condition: impl Fn(&QueueWakeup) -> bool) {
        loop {
            let settled = self.settled.notified();
            let met = self
                .queues
                .lock()
                .map(|queues| queues.get(queue).is_none_or(&condition))
                .unwrap_or(true);
            if met {
                return;
            }
            settled.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use sqlx::postgres::PgListener;
    use tokio::time::Instant;

    use super::{KEPT_QUEUES, Wakeup, Wakeups};
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

    /// A migrated database, a store on it, a listener on its wake-up channel, and wake-up state
    /// with `window`.
    async fn listening(
        window: Duration,
    ) -> (pgq_testkit::TestDatabase, Store, PgListener, Arc<Wakeups>) {
        let db = pgq_testkit::TestDatabase::new().await;
        let store = Store::new(db.pool().clone(), Duration::from_secs(5), Schema::default());
        let mut listener = PgListener::connect_with(db.pool()).await.unwrap();
        listener.listen("pgq_insert").await.unwrap();
        (db, store, listener, Arc::new(Wakeups::new(window)))
    }

    /// The first enqueue after a window closed, once the window's deferred enqueues returned,
    /// carries the trailing notification: none goes out in a statement of its own. When that
    /// enqueue notifies nobody (a duplicate, a failed insert), the trailing notification does.
    #[tokio::test]
    async fn the_first_enqueue_after_a_window_carries_its_trailing_notification() {
        for carrier_notified in [true, false] {
            let window = Duration::from_millis(400);
            let (db, store, mut listener, wakeups) = listening(window).await;

            // No insert runs here, so every notification heard is a trailing one.
            let opened = Instant::now();
            let leading = wakeups.enqueue(&store, "q");
            assert!(matches!(leading, Wakeup::Leading));
            leading.returned(true);
            let deferred = wakeups.enqueue(&store, "q");
            assert!(!deferred.notifies());
            deferred.returned(false);
            // The window has closed; its trailing notification is due half a window later.
            tokio::time::sleep_until(opened + window + window / 8).await;
            let carrier = wakeups.enqueue(&store, "q");
            assert!(matches!(carrier, Wakeup::Carrying(_)));
            carrier.returned(carrier_notified);
            wakeups.until("q", |state| !state.trailing).await;

            sqlx::query("SELECT pg_notify('pgq_insert', 'marker')")
                .execute(db.pool())
                .await
                .unwrap();
            let mut trailing = 0;
            while listener.recv().await.unwrap().payload() != "marker" {
                trailing += 1;
            }
            let expected = if carrier_notified { 0 } else { 1 };
            assert_eq!(
                trailing, expected,
                "trailing notifications after a carrier that notified: {carrier_notified}"
            );
        }
    }

    /// A carrier slower than a window (waiting on a unique key's row lock, say) does not hold up
    /// the notification owed to the enqueues before it: it goes out while the carrier runs, once.
    #[tokio::test]
    async fn a_slow_carrier_does_not_hold_up_the_trailing_notification() {
        let window = Duration::from_millis(200);
        let (db, store, mut listener, wakeups) = listening(window).await;

        let opened = Instant::now();
        wakeups.enqueue(&store, "q").returned(true);
        wakeups.enqueue(&store, "q").returned(false);
        tokio::time::sleep_until(opened + window + window / 8).await;
        let carrier = wakeups.enqueue(&store, "q");
        assert!(matches!(carrier, Wakeup::Carrying(_)));
        let heard = tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .expect("the owed notification, while the carrier still runs")
            .unwrap();
        assert_eq!(heard.payload(), "q");
        // Once: three windows more of the carrier waiting, then its failure, send no more.
        tokio::time::sleep(3 * window).await;
        carrier.returned(false);
        wakeups.until("q", |state| !state.trailing).await;
        sqlx::query("SELECT pg_notify('pgq_insert', 'marker')")
            .execute(db.pool())
            .await
            .unwrap();
        assert_eq!(listener.recv().await.unwrap().payload(), "marker");
    }

    /// A deferred enqueue slower than a window (waiting on a unique key's row lock, say) holds up
    /// no other enqueue's notification, and is owed one of its own once it returns.
    #[tokio::test]
    async fn a_slow_deferred_enqueue_holds_up_no_notification_and_gets_its_own() {
        let (_db, store, mut listener, wakeups) = listening(Duration::from_millis(200)).await;
        let mut heard = async || {
            tokio::time::timeout(Duration::from_secs(10), listener.recv())
                .await
                .expect("a notification")
                .unwrap()
                .payload()
                .to_owned()
        };

        wakeups.enqueue(&store, "q").returned(true);
        let quick = wakeups.enqueue(&store, "q");
        assert!(!quick.notifies());
        quick.returned(false);
        let slow = wakeups.enqueue(&store, "q");
        assert!(!slow.notifies());
        assert_eq!(
            heard().await,
            "q",
            "the quick one's, while the slow one runs"
        );
        slow.returned(false);
        assert_eq!(heard().await, "q", "the slow one's, once it returned");
        wakeups.until("q", |state| !state.trailing).await;
    }
}

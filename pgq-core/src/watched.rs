//! A one-byte state that tasks can wait on. Every attempt has two (its start and its stop): a
//! `watch` channel would cost each an allocation and, on every change, eight wake-up lists to
//! lock, per job, on the worker's busiest path.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct Watched {
    value: AtomicU8,
    changed: Notify,
}

impl Watched {
    pub(crate) const fn new(value: u8) -> Self {
        Self {
            value: AtomicU8::new(value),
            changed: Notify::const_new(),
        }
    }

    pub(crate) fn get(&self) -> u8 {
        self.value.load(Ordering::SeqCst)
    }

    /// Sets the value and wakes every waiter.
    pub(crate) fn set(&self, value: u8) {
        self.value.store(value, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Moves `from` to `to` if the value is `from`, without waking anyone: for a change that
    /// no waiter waits for.
    pub(crate) fn advance_quietly(&self, from: u8, to: u8) {
        let _ = self
            .value
            .compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Waits until `done` holds for the value, and returns it.
    pub(crate) async fn wait_for(&self, done: impl Fn(u8) -> bool) -> u8 {
        loop {
            // Registered before the value is read: a change after the read wakes it.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let value = self.get();
            if done(value) {
                return value;
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Watched;

    #[tokio::test]
    async fn a_waiter_wakes_on_the_change_it_waits_for() {
        let watched = Arc::new(Watched::new(0));
        let waiter = tokio::spawn({
            let watched = watched.clone();
            async move { watched.wait_for(|v| v >= 2).await }
        });
        tokio::task::yield_now().await;
        watched.set(1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "1 is not what it waits for");
        watched.set(2);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert_eq!(got.unwrap().unwrap(), 2);
    }

    #[tokio::test]
    async fn a_value_set_before_the_wait_is_seen() {
        let watched = Watched::new(0);
        watched.advance_quietly(0, 3);
        watched.advance_quietly(0, 4);
        assert_eq!(watched.wait_for(|v| v == 3).await, 3);
    }
}

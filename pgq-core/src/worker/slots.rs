//! One queue's side of a worker: its free slots, what wakes its dispatcher, and how many of its
//! attempts are still to be reported.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicUsize, Ordering};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

#[derive(Debug)]
pub(crate) struct QueueSlots {
    pub(crate) name: Arc<str>,
    pub(crate) concurrency: usize,
    /// One permit per handler running.
    slots: Arc<Semaphore>,
    /// A notification or a poll: jobs may be due.
    pub(crate) wake: Notify,
    /// A handler returned, a success waits for a tick, or the last active attempt ended.
    pub(crate) changed: Notify,
    /// Attempts started whose outcome is not reported yet.
    active: AtomicUsize,
    /// Handlers that returned since the dispatcher last looked.
    returned: AtomicUsize,
    /// Whether an operator paused the queue: [`UNKNOWN`] until the worker first reads it, and
    /// claims wait until then, so that a worker started on a paused queue claims nothing.
    pause: AtomicU8,
    /// The queue's cluster-wide concurrency limit as last read; [`NO_LIMIT`] for none. A limited
    /// queue claims through the limited path (`store::tick::tick_limited`).
    limit: AtomicU32,
    /// Whether the queue has a rate limit, as last read: it claims through the limited path too.
    rated: AtomicBool,
}

/// The limit of a queue without one.
const NO_LIMIT: u32 = 0;

/// The pause state of a queue the worker has not read yet.
const UNKNOWN: u8 = 0;
const RUNNING: u8 = 1;
const PAUSED: u8 = 2;

/// A running attempt's place in its queue: the slot its handler holds, and its count as active.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) permit: OwnedSemaphorePermit,
    pub(crate) active: Active,
}

/// Counts an attempt as active until its outcome is reported (the guard drops).
#[derive(Debug)]
pub(crate) struct Active {
    queue: Arc<QueueSlots>,
}

impl QueueSlots {
    pub(crate) fn new(name: &str, concurrency: usize) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            concurrency,
            slots: Arc::new(Semaphore::new(concurrency)),
            wake: Notify::new(),
            changed: Notify::new(),
            active: AtomicUsize::new(0),
            returned: AtomicUsize::new(0),
            pause: AtomicU8::new(UNKNOWN),
            limit: AtomicU32::new(NO_LIMIT),
            rated: AtomicBool::new(false),
        })
    }

    /// Whether the dispatcher must not claim: the queue is paused, or not known not to be.
    pub(crate) fn paused(&self) -> bool {
        self.pause.load(Ordering::SeqCst) != RUNNING
    }

    /// Whether the queue is paused, once the worker has read it.
    pub(crate) fn pause_state(&self) -> Option<bool> {
        match self.pause.load(Ordering::SeqCst) {
            UNKNOWN => None,
            state => Some(state == PAUSED),
        }
    }

    /// Records whether the queue is paused; returns what the worker knew before (`None`: it
    /// did not know yet). A change wakes the dispatcher: to claim again, or to report the pause.
    pub(crate) fn set_paused(&self, paused: bool) -> Option<bool> {
        let state = if paused { PAUSED } else { RUNNING };
        let before = self.pause.swap(state, Ordering::SeqCst);
        if before != state {
            self.wake.notify_one();
        }
        match before {
            UNKNOWN => None,
            state => Some(state == PAUSED),
        }
    }

    /// Whether the queue has a cluster-wide concurrency or rate limit, as last read.
    pub(crate) fn limited(&self) -> bool {
        self.limit.load(Ordering::SeqCst) != NO_LIMIT || self.rated.load(Ordering::SeqCst)
    }

    /// Records whether the queue has a rate limit; returns what was known before.
    pub(crate) fn set_rated(&self, rated: bool) -> bool {
        self.rated.swap(rated, Ordering::SeqCst)
    }

    /// Records the queue's limit; returns the one before.
    pub(crate) fn set_limit(&self, limit: Option<u32>) -> Option<u32> {
        let before = self.limit.swap(limit.unwrap_or(NO_LIMIT), Ordering::SeqCst);
        (before != NO_LIMIT).then_some(before)
    }

    /// A free slot, counted as active, if there is one.
    pub(crate) fn try_slot(self: &Arc<Self>) -> Option<Slot> {
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        self.active.fetch_add(1, Ordering::SeqCst);
        Some(Slot {
            permit,
            active: Active {
                queue: self.clone(),
            },
        })
    }

    /// Slots free now.
    pub(crate) fn free(&self) -> usize {
        self.slots.available_permits()
    }

    /// Handlers running now.
    pub(crate) fn running(&self) -> usize {
        self.concurrency - self.free().min(self.concurrency)
    }

    /// Attempts whose outcome is not reported yet.
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// How many handlers returned since the last call.
    pub(crate) fn take_returned(&self) -> usize {
        self.returned.swap(0, Ordering::SeqCst)
    }
}

impl Slot {
    /// The handler returned: its slot is free for the next job; the attempt stays active.
    pub(crate) fn handler_returned(self) -> Active {
        drop(self.permit);
        let queue = &self.active.queue;
        queue.returned.fetch_add(1, Ordering::SeqCst);
        queue.changed.notify_one();
        self.active
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        // The last one lets a stopping dispatcher finish.
        if self.queue.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.queue.changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::QueueSlots;

    #[test]
    fn a_queue_claims_only_once_it_is_known_not_to_be_paused() {
        let queue = QueueSlots::new("email", 1);
        assert!(queue.paused(), "not read yet");
        assert_eq!(queue.pause_state(), None);
        assert_eq!(queue.set_paused(false), None);
        assert_eq!(queue.pause_state(), Some(false));
        assert!(!queue.paused());
        assert_eq!(queue.set_paused(true), Some(false));
        assert!(queue.paused());
        assert_eq!(queue.set_paused(true), Some(true));
    }
}

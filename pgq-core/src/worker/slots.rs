//! One queue's side of a worker: its free slots, what wakes its dispatcher, and how many of its
//! attempts are still to be reported.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

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
    /// Changes of the queue's settings the listener heard of (or may have missed: each LISTEN
    /// counts as one), and how many of them a read of the settings has caught up with: claims
    /// wait while one is unread, so that a job enqueued after a pause returned is never claimed
    /// by a listening worker that has not read the pause yet.
    changes_heard: AtomicU64,
    changes_read: AtomicU64,
    /// Whether the worker's listener has yet to make its first attempt to LISTEN: until then a
    /// read may predate a pause that nobody heard of, so the queue claims nothing. False behind
    /// a pooler, where no listener runs.
    awaits_listener: AtomicBool,
    /// The queue's cluster-wide concurrency limit as last read; [`NO_LIMIT`] for none.
    limit: AtomicU32,
    /// How many handlers the worker's seats of a limited queue let it run at once
    /// (`store::seats`); [`UNSEATED`] on a queue without a limit, whose handlers only its
    /// concurrency bounds.
    seats: AtomicUsize,
    /// When the seats' lease runs out unless renewed: from then on no handler starts.
    seats_until: Mutex<Instant>,
    /// Whether the queue has a rate limit, as last read: it claims through the rate-limited
    /// path (`store::tick`).
    rated: AtomicBool,
    /// Whether no other live worker served the queue at the last read: its quick jobs are then
    /// claimed a round trip further ahead (`Pacing::want`). False until read.
    alone: AtomicBool,
}

/// The seats of a queue without a concurrency limit.
const UNSEATED: usize = usize::MAX;

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
    /// A queue of `concurrency` slots; `listening` when the worker's listener will LISTEN for
    /// it, whose first attempt its claims then wait for.
    pub(crate) fn new(name: &str, concurrency: usize, listening: bool) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            concurrency,
            slots: Arc::new(Semaphore::new(concurrency)),
            wake: Notify::new(),
            changed: Notify::new(),
            active: AtomicUsize::new(0),
            returned: AtomicUsize::new(0),
            pause: AtomicU8::new(UNKNOWN),
            changes_heard: AtomicU64::new(0),
            changes_read: AtomicU64::new(0),
            awaits_listener: AtomicBool::new(listening),
            limit: AtomicU32::new(NO_LIMIT),
            seats: AtomicUsize::new(UNSEATED),
            seats_until: Mutex::new(Instant::now()),
            rated: AtomicBool::new(false),
            alone: AtomicBool::new(false),
        })
    }

    /// Whether the dispatcher must not claim: the queue is paused, or not known not to be (not
    /// read yet, changed since the last read, or read before the worker listened).
    pub(crate) fn paused(&self) -> bool {
        self.pause.load(Ordering::SeqCst) != RUNNING
            || self.changes_read.load(Ordering::SeqCst) < self.changes_heard.load(Ordering::SeqCst)
            || self.awaits_listener.load(Ordering::SeqCst)
    }

    /// The listener heard that the queue's settings changed.
    pub(crate) fn settings_changed(&self) {
        self.changes_heard.fetch_add(1, Ordering::SeqCst);
    }

    /// The listener LISTENs (or could not, and the worker polls): what it missed before counts
    /// as a change heard, which a read that starts from now on catches up with.
    pub(crate) fn listener_attempted(&self) {
        self.settings_changed();
        self.awaits_listener.store(false, Ordering::SeqCst);
    }

    /// The changes heard so far: a read that starts now catches up with them.
    pub(crate) fn changes_heard(&self) -> u64 {
        self.changes_heard.load(Ordering::SeqCst)
    }

    /// A read that started when `heard` changes had been heard was applied; a dispatcher that
    /// waited for it is woken.
    pub(crate) fn settings_read(&self, heard: u64) {
        let before = self.changes_read.fetch_max(heard, Ordering::SeqCst);
        if before < heard {
            self.wake.notify_one();
        }
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

    /// Whether the queue has a cluster-wide rate limit, as last read.
    pub(crate) fn rated(&self) -> bool {
        self.rated.load(Ordering::SeqCst)
    }

    /// Whether the worker holds (or held) seats of the queue's concurrency limit.
    pub(crate) fn seated(&self) -> bool {
        self.seats.load(Ordering::SeqCst) != UNSEATED
    }

    /// What to keep of the queue's seats while a new lease is asked for: every handler that may
    /// run meanwhile. Before its first lease a queue runs nothing until its settings are read,
    /// and up to its concurrency after (its limit is new).
    pub(crate) fn seats_to_keep(&self) -> usize {
        let seats = match self.seats.load(Ordering::SeqCst) {
            UNSEATED if self.pause_state().is_none() => 0,
            seats => seats.min(self.concurrency),
        };
        seats.max(self.running())
    }

    /// Records a lease of the queue's seats (`None`: the queue has no limit any more). More
    /// seats wake the dispatcher, to claim for them.
    pub(crate) fn set_seats(&self, seats: Option<(usize, Instant)>) {
        let (seats, until) = match seats {
            Some((seats, until)) => (seats, until),
            None => (UNSEATED, Instant::now()),
        };
        *self.seats_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
        let before = self.seats.swap(seats, Ordering::SeqCst);
        if seats > before || seats == UNSEATED && before != UNSEATED {
            self.wake.notify_one();
        }
    }

    /// How many handlers may run at once now: the concurrency, or fewer on a limited queue.
    pub(crate) fn allowed(&self) -> usize {
        let seats = self.seats.load(Ordering::SeqCst);
        if seats == UNSEATED {
            return self.concurrency;
        }
        let until = *self.seats_until.lock().unwrap_or_else(|e| e.into_inner());
        if Instant::now() >= until {
            // A lease not renewed in time may be someone else's now.
            return 0;
        }
        seats.min(self.concurrency)
    }

    /// Records whether the queue has a rate limit; returns what was known before.
    pub(crate) fn set_rated(&self, rated: bool) -> bool {
        self.rated.swap(rated, Ordering::SeqCst)
    }

    pub(crate) fn alone(&self) -> bool {
        self.alone.load(Ordering::Relaxed)
    }

    pub(crate) fn set_alone(&self, alone: bool) {
        self.alone.store(alone, Ordering::Relaxed);
    }

    /// Records the queue's limit; returns the one before.
    pub(crate) fn set_limit(&self, limit: Option<u32>) -> Option<u32> {
        let before = self.limit.swap(limit.unwrap_or(NO_LIMIT), Ordering::SeqCst);
        (before != NO_LIMIT).then_some(before)
    }

    /// A free slot, counted as active, if there is one. Only the dispatcher takes slots, so
    /// that none is taken between the count and the take.
    pub(crate) fn try_slot(self: &Arc<Self>) -> Option<Slot> {
        if self.free() == 0 {
            return None;
        }
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        self.active.fetch_add(1, Ordering::SeqCst);
        Some(Slot {
            permit,
            active: Active {
                queue: self.clone(),
            },
        })
    }

    /// Slots free now: of the concurrency, and of the seats on a limited queue.
    pub(crate) fn free(&self) -> usize {
        let available = self.slots.available_permits();
        if !self.seated() {
            return available;
        }
        available.min(self.allowed().saturating_sub(self.running()))
    }

    /// Handlers running now.
    pub(crate) fn running(&self) -> usize {
        self.concurrency - self.slots.available_permits().min(self.concurrency)
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
    use std::time::Duration;

    use tokio::time::Instant;

    use super::QueueSlots;

    #[test]
    fn a_queue_claims_only_once_it_is_known_not_to_be_paused() {
        let queue = QueueSlots::new("email", 1, false);
        assert!(queue.paused(), "not read yet");
        assert_eq!(queue.pause_state(), None);
        assert_eq!(queue.set_paused(false), None);
        assert_eq!(queue.pause_state(), Some(false));
        assert!(!queue.paused());
        assert_eq!(queue.set_paused(true), Some(false));
        assert!(queue.paused());
        assert_eq!(queue.set_paused(true), Some(true));
    }

    #[test]
    fn a_queue_claims_only_once_it_has_read_every_change_it_heard_of() {
        let queue = QueueSlots::new("email", 1, false);
        queue.set_paused(false);
        queue.settings_changed();
        let first = queue.changes_heard();
        queue.settings_changed();
        let second = queue.changes_heard();
        assert!(queue.paused(), "a change heard, not read");
        queue.settings_read(first);
        assert!(
            queue.paused(),
            "a read that started before the second change"
        );
        queue.settings_read(second);
        assert!(!queue.paused());
        queue.settings_read(first);
        assert!(!queue.paused(), "an older read never undoes a newer one");
    }

    #[test]
    fn a_listening_worker_claims_only_on_a_read_that_started_after_its_listen() {
        let queue = QueueSlots::new("email", 1, true);
        let before = queue.changes_heard();
        queue.set_paused(false);
        queue.settings_read(before);
        assert!(queue.paused(), "read, but not listening yet");
        queue.listener_attempted();
        queue.settings_read(before);
        assert!(queue.paused(), "a read that started before the LISTEN");
        queue.settings_read(queue.changes_heard());
        assert!(!queue.paused());
        queue.listener_attempted();
        assert!(queue.paused(), "listening again after a lost connection");
    }

    #[test]
    fn seats_bound_the_handlers_of_a_limited_queue_until_their_lease_runs_out() {
        let queue = QueueSlots::new("email", 4, false);
        assert_eq!((queue.free(), queue.allowed()), (4, 4), "no limit");
        let later = Instant::now() + Duration::from_secs(60);
        queue.set_seats(Some((2, later)));
        let first = queue.try_slot().expect("a seat");
        assert_eq!(queue.free(), 1);
        let second = queue.try_slot().expect("a seat");
        assert!(queue.try_slot().is_none(), "two seats, two handlers");
        assert_eq!(queue.seats_to_keep(), 2);
        queue.set_seats(Some((1, later)));
        drop(first.handler_returned());
        assert_eq!(queue.free(), 0, "one seat left, and its handler runs");
        assert_eq!(queue.seats_to_keep(), 1);
        drop(second.handler_returned());
        assert_eq!(queue.free(), 1);
        queue.set_seats(Some((3, Instant::now())));
        assert_eq!(queue.free(), 0, "a lease run out starts nothing");
        queue.set_seats(None);
        assert_eq!(queue.free(), 4, "the limit lifted");
        assert!(!queue.seated());
    }
}

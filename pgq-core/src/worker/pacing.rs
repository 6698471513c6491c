//! How many jobs a dispatcher claims, and when a queue has run dry: plain bookkeeping, no
//! database and no clock, so that its rules are unit-tested.
//!
//! A worker holds (claimed, or asked for by claims in flight) its free slots plus what one round
//! trip uses up: the handlers that returned while the last claim was in flight. Slow handlers
//! free few slots, so a busy worker does not hoard jobs that other workers could run; quick ones
//! free many, so claims grow up to the batch size. Only when jobs return faster than slots free
//! does a second claim go out ahead, and a third when no other worker serves the queue: claims
//! in flight at the head of a shared queue hold its rows' locks until they commit, which costs
//! the database more than a lone worker's idle they would fill. A claim that comes back short
//! means the queue ran dry, unless a wake-up arrived while it was in flight (it may be for a job
//! committed too late for it).
//!
//! A claim that is the only one in flight takes the jobs for the slots free when it is sent as
//! `running`: those slots are reserved for them until it comes back.

/// Round trips' worth of jobs a dispatcher holds ahead when jobs return faster than slots free,
/// on a queue other workers serve too.
const CLAIMS_AHEAD: usize = 2;
/// The same on a queue no other worker serves.
const CLAIMS_AHEAD_ALONE: usize = 3;

#[derive(Debug)]
pub(crate) struct Pacing {
    concurrency: usize,
    batch_size: usize,
    /// Handlers that returned since the last claim was sent.
    turnover: usize,
    /// `turnover` when the last claim was sent: what one claim's round trip used up.
    pace: usize,
    /// Jobs asked for by claims in flight.
    asking: usize,
    /// Slots kept for the jobs claims in flight claim as `running`.
    reserved: usize,
    /// False after a claim came back short, until a wake-up.
    maybe_more: bool,
    /// Wake-ups (notifications, polls) so far.
    wakeups: u64,
}

/// A claim as it was sent, to be handed back with its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClaimSent {
    pub(crate) asked: usize,
    /// How many of them, the first in claim order, are claimed as `running`.
    pub(crate) run_now: usize,
    wakeups: u64,
}

impl Pacing {
    /// A dispatcher that starts by looking: jobs may be waiting already.
    pub(crate) fn new(concurrency: usize, batch_size: usize) -> Self {
        Self {
            concurrency,
            batch_size,
            turnover: 0,
            pace: 0,
            asking: 0,
            reserved: 0,
            maybe_more: true,
            wakeups: 0,
        }
    }

    /// Whether a claim is in flight.
    pub(crate) fn claiming(&self) -> bool {
        self.asking > 0
    }

    /// A notification or a poll: jobs may be due.
    pub(crate) fn woken(&mut self) {
        self.maybe_more = true;
        self.wakeups += 1;
    }

    /// `count` handlers returned. While the queue is dry no claim is out for them to pace: the
    /// first claim after a wake-up asks for the free slots alone, all of them to run at once.
    pub(crate) fn returned(&mut self, count: usize) {
        if self.maybe_more {
            self.turnover += count;
        }
    }

    /// Jobs the next claim asks for, given the free slots, the claimed jobs waiting for one, and
    /// whether the worker serves the queue alone.
    pub(crate) fn want(&self, free: usize, waiting: usize, alone: bool) -> usize {
        if !self.maybe_more {
            return 0;
        }
        let batch = self.batch_size;
        let per_round_trip = self.turnover.max(self.pace).min(batch);
        let ahead = if per_round_trip <= self.concurrency {
            1
        } else if alone {
            CLAIMS_AHEAD_ALONE
        } else {
            CLAIMS_AHEAD
        };
        (free + ahead * per_round_trip)
            .min(ahead * batch)
            .saturating_sub(waiting + self.asking)
            .min(batch)
    }

    /// Slots free now that no claim in flight has reserved.
    pub(crate) fn unreserved(&self, free: usize) -> usize {
        free.saturating_sub(self.reserved)
    }

    /// A claim for `asked` jobs goes out now, with `free` slots free and no claimed job waiting
    /// for one. When it is the only claim in flight, as many jobs as there are free slots are
    /// claimed as `running`, and their slots reserved; a claim that goes out while another is in
    /// flight (jobs return faster than slots free) claims all its jobs ahead, so that reserved
    /// slots never sit idle while claimed jobs wait.
    pub(crate) fn send(&mut self, asked: usize, free: usize) -> ClaimSent {
        let run_now = if self.asking == 0 {
            asked.min(self.unreserved(free))
        } else {
            0
        };
        if asked > 0 {
            self.pace = self.turnover;
            self.turnover = 0;
            self.asking += asked;
            self.reserved += run_now;
        }
        ClaimSent {
            asked,
            run_now,
            wakeups: self.wakeups,
        }
    }

    /// The claim came back with `claimed` jobs; the slots it reserved are free for its jobs
    /// claimed as `running`, which start first.
    pub(crate) fn received(&mut self, sent: ClaimSent, claimed: usize) {
        self.asking -= sent.asked;
        self.reserved -= sent.run_now;
        if sent.asked > 0 && claimed < sent.asked && sent.wakeups == self.wakeups {
            // The queue ran dry: wait for a wake-up, and start small again.
            self.maybe_more = false;
            self.turnover = 0;
            self.pace = 0;
        }
    }

    /// The claim failed: nothing was claimed, and nothing is learnt about the queue.
    pub(crate) fn failed(&mut self, sent: ClaimSent) {
        self.asking -= sent.asked;
        self.reserved -= sent.run_now;
    }
}

#[cfg(test)]
mod tests {
    use super::Pacing;

    #[test]
    fn a_new_dispatcher_asks_for_its_free_slots() {
        let pacing = Pacing::new(16, 256);
        assert_eq!(pacing.want(16, 0, false), 16);
        assert_eq!(pacing.want(3, 0, false), 3);
    }

    #[test]
    fn claimed_jobs_and_claims_in_flight_count_as_held() {
        let mut pacing = Pacing::new(16, 256);
        assert_eq!(pacing.want(16, 4, false), 12);
        pacing.send(10, 0);
        assert_eq!(pacing.want(16, 4, false), 2);
    }

    #[test]
    fn slow_handlers_never_claim_ahead() {
        let mut pacing = Pacing::new(16, 256);
        let sent = pacing.send(16, 0);
        pacing.received(sent, 16);
        // Two handlers returned during the round trip: two free slots, two more asked for.
        pacing.returned(2);
        assert_eq!(pacing.want(2, 0, false), 4);
        let sent = pacing.send(4, 0);
        pacing.received(sent, 4);
        // Nothing returned meanwhile: the last round trip's pace still counts.
        assert_eq!(pacing.want(0, 0, false), 2);
    }

    #[test]
    fn quick_handlers_claim_two_round_trips_ahead_up_to_the_batch_size() {
        let mut pacing = Pacing::new(16, 256);
        pacing.returned(100);
        assert_eq!(pacing.want(16, 0, false), 216);
        pacing.returned(1000);
        assert_eq!(
            pacing.want(16, 0, false),
            256,
            "one claim never asks for more than a batch"
        );
        let sent = pacing.send(256, 0);
        pacing.received(sent, 256);
        assert_eq!(
            pacing.want(0, 256, false),
            256,
            "a second claim goes out ahead"
        );
        assert_eq!(pacing.want(0, 512, false), 0, "but no third");
    }

    #[test]
    fn quick_handlers_claim_three_round_trips_ahead_on_a_queue_served_alone() {
        let mut pacing = Pacing::new(16, 256);
        pacing.returned(60);
        assert_eq!(pacing.want(16, 0, false), 136);
        assert_eq!(pacing.want(16, 0, true), 196);
        pacing.returned(1000);
        let sent = pacing.send(256, 0);
        pacing.received(sent, 256);
        assert_eq!(
            pacing.want(0, 256, true),
            256,
            "a second claim goes out ahead"
        );
        assert_eq!(pacing.want(0, 512, true), 256, "and a third");
        assert_eq!(pacing.want(0, 768, true), 0, "but no fourth");
        // Slow handlers claim one round trip at a time, alone or not.
        let mut slow = Pacing::new(16, 256);
        slow.returned(2);
        assert_eq!(slow.want(2, 0, true), slow.want(2, 0, false));
    }

    #[test]
    fn a_short_claim_means_the_queue_ran_dry_until_a_wake_up() {
        let mut pacing = Pacing::new(16, 256);
        pacing.returned(40);
        let sent = pacing.send(16, 0);
        pacing.received(sent, 3);
        assert_eq!(pacing.want(16, 0, false), 0);
        pacing.woken();
        assert_eq!(pacing.want(16, 0, false), 16, "and it starts small again");
    }

    #[test]
    fn handlers_that_return_while_the_queue_is_dry_do_not_pace_the_next_claim() {
        let mut pacing = Pacing::new(16, 256);
        let sent = pacing.send(16, 16);
        pacing.received(sent, 1);
        pacing.returned(1);
        pacing.woken();
        let sent = pacing.send(pacing.want(16, 0, false), 16);
        assert_eq!((sent.asked, sent.run_now), (16, 16));
    }

    #[test]
    fn a_wake_up_during_a_claim_keeps_looking() {
        let mut pacing = Pacing::new(16, 256);
        let sent = pacing.send(16, 0);
        pacing.woken();
        pacing.received(sent, 0);
        assert_eq!(pacing.want(16, 0, false), 16);
    }

    #[test]
    fn a_full_claim_or_one_that_asked_nothing_does_not_end_the_search() {
        let mut pacing = Pacing::new(4, 256);
        let sent = pacing.send(4, 0);
        pacing.received(sent, 4);
        let sent = pacing.send(0, 0);
        pacing.received(sent, 0);
        assert_eq!(pacing.want(4, 0, false), 4);
    }

    #[test]
    fn jobs_for_free_slots_are_claimed_running_and_their_slots_reserved() {
        let mut pacing = Pacing::new(16, 256);
        pacing.returned(100);
        let first = pacing.send(216, 16);
        assert_eq!(first.run_now, 16, "the free slots start at once");
        assert_eq!(pacing.unreserved(16), 0, "kept for that claim's jobs");
        let second = pacing.send(256, 16);
        assert_eq!(
            second.run_now, 0,
            "a second claim in flight gets no reserved slot"
        );
        pacing.received(first, 216);
        assert_eq!(pacing.unreserved(16), 16);
        pacing.failed(second);
        assert_eq!(pacing.unreserved(4), 4);
    }

    #[test]
    fn a_short_claim_reserves_no_more_than_it_asks_for() {
        let mut pacing = Pacing::new(16, 256);
        let sent = pacing.send(3, 16);
        assert_eq!(sent.run_now, 3);
        assert_eq!(pacing.unreserved(16), 13);
        let nothing = pacing.send(0, 16);
        assert_eq!(
            nothing.run_now, 0,
            "a tick without a claim reserves nothing"
        );
        pacing.received(nothing, 0);
        pacing.received(sent, 1);
        assert_eq!(
            pacing.unreserved(16),
            16,
            "a short claim frees its whole reservation"
        );
    }

    #[test]
    fn a_failed_claim_gives_back_what_it_asked_for() {
        let mut pacing = Pacing::new(8, 256);
        let sent = pacing.send(8, 0);
        assert_eq!(pacing.want(8, 0, false), 0);
        pacing.failed(sent);
        assert_eq!(pacing.want(8, 0, false), 8);
    }
}

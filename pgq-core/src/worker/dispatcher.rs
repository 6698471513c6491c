//! One dispatcher per queue. Each round trip is one statement (a tick) that completes the
//! attempts that finished, writes `running` for the jobs whose handlers started since the last
//! tick, and claims more — so under load a batch of jobs costs one statement per step, not one
//! per job. Up to three ticks are in flight at once, each on its own connection, so that the
//! database works on several batches while the worker runs the next (more measured no faster on
//! two cores).
//!
//! A claimed job starts as soon as a slot is free, ahead of its `running` write: the handler
//! runs at once, and everything the attempt writes (progress, its outcome) waits until that write
//! has landed. If it does not hold — the job was rescued or released meanwhile — the handler is
//! told to stop and its result is dropped, as for a lost lease.
//!
//! Claims prefetch no more than one round trip uses up: as many jobs as there are free slots
//! plus the slots that freed since the last claim. Slow handlers free few slots, so a busy
//! worker does not hoard jobs other workers could run; tiny jobs free many, so batches grow up to
//! the worker's batch size. Claimed jobs waiting for a slot are in [`Shared::waiting`], where the
//! lease renewer keeps their leases with those of the running ones.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::attempt::{AttemptState, Start};
use crate::error::Result;
use crate::job_id::JobId;
use crate::store;
use crate::store::attempt::{ClaimedJob, Fence};
use crate::store::lease::HeldJob;
use crate::store::tick::{Held, TickRequest, TickResult};
use crate::worker::{Active, JobOutcome, QueueSlots, Shared, WorkerEvent, executor};

/// Ticks one dispatcher may have in flight.
pub(crate) const TICKS_IN_FLIGHT: usize = 3;

/// Round trips' worth of jobs claims fetch ahead when jobs return faster than slots free, so
/// that one claim is in flight while the jobs of the last are written: the database then works
/// on two statements at once.
const CLAIMS_AHEAD: usize = 2;

/// How long a tick waits for handlers in flight to return, so that their writes share it.
const COALESCE_WINDOW: Duration = Duration::from_millis(1);

/// A running attempt's place in its queue: the slot its handler holds, and its count as active.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) permit: OwnedSemaphorePermit,
    pub(crate) active: Active,
}

/// A successful attempt waiting for a tick to write its completion, which goes once its
/// `running` write has landed. It counts as active until the tick reports its outcome.
#[derive(Debug)]
pub(crate) struct PendingCompletion {
    pub(crate) held: Held,
    pub(crate) task: String,
    pub(crate) state: Arc<AttemptState>,
    pub(crate) active: Active,
}

/// A job whose handler started; its `running` write goes with the next tick.
#[derive(Debug)]
struct Starting {
    held: Held,
    task: String,
    state: Arc<AttemptState>,
}

/// What a tick sent, and what came back.
struct Sent {
    completions: Vec<PendingCompletion>,
    starting: Vec<Starting>,
    asked: usize,
    /// [`Dispatcher::wakeups`] when the tick was sent.
    wakeups: u64,
    result: Result<TickResult>,
    /// The tick's connection, for the next one, unless its statement failed.
    connection: Option<PoolConnection<Postgres>>,
}

struct Dispatcher {
    shared: Arc<Shared>,
    queue: Arc<QueueSlots>,
    /// Claimed, waiting for a free slot.
    claimed: VecDeque<ClaimedJob>,
    /// Started since the last tick was sent.
    starting: Vec<Starting>,
    /// Successes whose `running` write has landed: the next tick completes them.
    completing: Vec<PendingCompletion>,
    /// Successes whose `running` write is still in flight.
    awaiting_start: Vec<PendingCompletion>,
    /// Jobs asked for by ticks in flight.
    asking: usize,
    /// Handlers that returned since the last claim was sent.
    turnover: usize,
    /// [`turnover`](Self::turnover) when the last claim was sent: what one claim's round trip
    /// used up.
    pace: usize,
    /// Whether more jobs may be due: false after a claim came back short, until a wake-up.
    maybe_more: bool,
    /// Wake-ups (notifications, polls) so far: one that arrives while a claim is in flight may
    /// be for a job committed too late for it, so a short claim only settles what came before.
    wakeups: u64,
    next_poll: Instant,
    /// Connections of the dispatch pool between ticks. Kept here rather than given back: sqlx
    /// checks every connection it takes back with a round trip, one per tick.
    connections: Vec<PoolConnection<Postgres>>,
}

pub(crate) async fn dispatch(shared: Arc<Shared>, queue: Arc<QueueSlots>) {
    let mut stopping = shared.stopping.clone();
    let mut d = Dispatcher {
        next_poll: Instant::now() + shared.config.poll_interval,
        shared,
        queue,
        claimed: VecDeque::new(),
        starting: Vec::new(),
        completing: Vec::new(),
        awaiting_start: Vec::new(),
        asking: 0,
        turnover: 0,
        pace: 0,
        // Look at once on start: jobs may be waiting already.
        maybe_more: true,
        wakeups: 0,
        connections: Vec::new(),
    };
    let mut in_flight: FuturesUnordered<JoinHandle<Sent>> = FuturesUnordered::new();
    // One timer for the whole loop: each new timer that is the runtime's earliest wakes its
    // driver thread, which at thousands of iterations a second costs more than the jobs.
    let poll = tokio::time::sleep_until(d.next_poll);
    tokio::pin!(poll);
    loop {
        let stop = *stopping.borrow();
        d.turnover += d.queue.take_returned();
        d.gather_completions();
        if stop {
            d.release_claimed().await;
        } else {
            d.start_claimed();
        }
        if in_flight.len() < TICKS_IN_FLIGHT && d.tick_due(stop) {
            if !stop {
                d.coalesce().await;
            }
            in_flight.push(d.send_tick(stop));
            continue;
        }
        if stop && in_flight.is_empty() && d.queue.active() == 0 {
            // Every handler has returned and every outcome is written: done.
            return;
        }
        if poll.deadline() != d.next_poll {
            poll.as_mut().reset(d.next_poll);
        }
        let queue = d.queue.clone();
        tokio::select! {
            Some(sent) = in_flight.next(), if !in_flight.is_empty() => {
                if let Ok(sent) = sent {
                    d.apply(sent);
                }
            }
            _ = queue.wake.notified() => d.woken(),
            // A handler returned, the first completion of a batch is waiting, or the last
            // active attempt ended.
            _ = queue.completed.notified() => {}
            _ = &mut poll => {
                d.woken();
                d.next_poll = Instant::now() + d.shared.config.poll_interval;
            }
            _ = stopping.wait_for(|stop| *stop), if !stop => {}
        }
    }
}

impl Dispatcher {
    fn woken(&mut self) {
        self.maybe_more = true;
        self.wakeups += 1;
    }

    /// Starts claimed jobs while slots are free.
    fn start_claimed(&mut self) {
        while !self.claimed.is_empty() {
            let Ok(permit) = self.queue.slots.clone().try_acquire_owned() else {
                return;
            };
            let Some(job) = self.claimed.pop_front() else {
                return;
            };
            if !self.shared.take_waiting(job.id) {
                // Renewal found its lease gone (a long stall): it belongs to the rescuer now.
                tracing::warn!(job = %job.id, "claimed job lost its lease while it waited for a slot");
                continue;
            }
            let entry = self.shared.handlers[job.task.as_str()];
            let state = executor::attempt_state(&self.shared, &job, false);
            self.starting.push(Starting {
                held: Held {
                    id: job.id,
                    attempt: job.attempt,
                },
                task: job.task.clone(),
                state: state.clone(),
            });
            let slot = Slot {
                permit,
                active: self.queue.enter(),
            };
            tokio::spawn(executor::execute(
                self.shared.clone(),
                job,
                entry,
                state,
                Some(slot),
            ));
        }
    }

    /// Waits, at most [`COALESCE_WINDOW`], until no handler of the queue is running, starting
    /// claimed jobs as slots free.
    async fn coalesce(&mut self) {
        if self.queue.running() == 0 {
            return;
        }
        let deadline = Instant::now() + COALESCE_WINDOW;
        while self.queue.running() > 0 {
            tokio::select! {
                _ = self.queue.completed.notified() => self.start_claimed(),
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Jobs the next claim asks for. The worker holds (buffered or asked for) the free slots
    /// plus what [`CLAIMS_AHEAD`] round trips use up, as the handlers that returned during the
    /// last one tell; each claim asks for at most the batch size.
    fn want(&self, stop: bool) -> usize {
        if stop || !self.maybe_more {
            return 0;
        }
        let batch = self.shared.config.batch_size;
        let free = self.queue.slots.available_permits();
        let per_round_trip = self.turnover.max(self.pace).min(batch);
        // Only jobs that return faster than slots free claim ahead: slower ones keep claims in
        // priority order, one at a time.
        let ahead = if per_round_trip > self.queue.concurrency {
            CLAIMS_AHEAD
        } else {
            1
        };
        (free + ahead * per_round_trip)
            .min(ahead * batch)
            .saturating_sub(self.claimed.len() + self.asking)
            .min(batch)
    }

    /// Whether a tick has anything to write or to claim.
    fn tick_due(&self, stop: bool) -> bool {
        !self.starting.is_empty() || !self.completing.is_empty() || self.want(stop) > 0
    }

    /// Takes the successes handed over since the last look: those whose `running` write has
    /// landed go with the next tick; those refused it were never this attempt's to complete.
    fn gather_completions(&mut self) {
        let mut handed = self.queue.take_completions();
        if handed.is_empty() && self.awaiting_start.is_empty() {
            return;
        }
        handed.append(&mut self.awaiting_start);
        let mut refused = Vec::new();
        for completion in handed {
            match completion.state.start_status() {
                Start::Confirmed => self.completing.push(completion),
                Start::Unconfirmed => self.awaiting_start.push(completion),
                Start::Refused => refused.push(completion),
            }
        }
        self.report_completions(refused, Vec::new());
    }

    /// Sends a tick with everything there is to write, and a claim if slots want one.
    fn send_tick(&mut self, stop: bool) -> JoinHandle<Sent> {
        self.turnover += self.queue.take_returned();
        let want = self.want(stop);
        let completions = std::mem::take(&mut self.completing);
        if want > 0 {
            self.pace = self.turnover;
            self.turnover = 0;
            self.asking += want;
            self.next_poll = Instant::now() + self.shared.config.poll_interval;
        }
        let starting = std::mem::take(&mut self.starting);
        let wakeups = self.wakeups;
        let shared = self.shared.clone();
        let queue = self.queue.clone();
        let connection = self.connections.pop();
        tokio::spawn(async move {
            let complete: Vec<Held> = completions.iter().map(|c| c.held).collect();
            let start: Vec<Held> = starting.iter().map(|s| s.held).collect();
            let request = TickRequest {
                worker_id: shared.worker_id(),
                complete: &complete,
                start: &start,
                queue: &queue.name,
                tasks: &shared.task_names,
                leases_ms: &shared.task_leases,
                claim: want,
            };
            let ticked = async {
                let mut connection = match connection {
                    Some(connection) => connection,
                    None => shared.dispatch_pool.acquire().await?,
                };
                let result = store::tick::tick(&mut connection, &request).await?;
                Ok((result, connection))
            };
            // A connection whose statement failed goes back to the pool, which checks it.
            let (result, connection) = match ticked.await {
                Ok((result, connection)) => (Ok(result), Some(connection)),
                Err(err) => (Err(err), None),
            };
            if let Err(err) = &result {
                tracing::warn!(queue = %queue.name, error = %err, "dispatch failed; retrying after the poll interval");
                tokio::time::sleep(shared.config.poll_interval).await;
            }
            Sent {
                completions,
                starting,
                asked: want,
                wakeups,
                result,
                connection,
            }
        })
    }

    /// Tells waiting attempts what the tick wrote, and queues what it claimed.
    fn apply(&mut self, sent: Sent) {
        self.asking -= sent.asked;
        self.connections.extend(sent.connection);
        let result = match sent.result {
            Ok(result) => result,
            Err(_) => {
                // Nothing was written: everything goes with a later tick.
                self.completing.extend(sent.completions);
                let mut starting = sent.starting;
                starting.append(&mut self.starting);
                self.starting = starting;
                return;
            }
        };
        self.report_completions(sent.completions, result.completed);
        let started: HashSet<JobId> = result.started.into_iter().collect();
        for starting in sent.starting {
            let held = started.contains(&starting.held.id);
            if held {
                self.shared.emit(WorkerEvent::JobStarted {
                    id: starting.held.id,
                    task: starting.task,
                    attempt: starting.held.attempt,
                });
            } else {
                // Released or rescued between claim and start (an operator, or a long stall).
                tracing::warn!(job = %starting.held.id, "claimed job was taken back before it started");
            }
            starting.state.confirm_start(held);
        }
        let claimed = result.claimed.len();
        if claimed > 0 {
            self.shared
                .stats
                .send_modify(|stats| stats.claimed += claimed as u64);
        }
        if let Ok(mut waiting) = self.shared.waiting.lock() {
            for job in &result.claimed {
                let lease_ms = self.shared.handlers[job.task.as_str()].lease_ms;
                let held = HeldJob {
                    id: job.id,
                    attempt: job.attempt,
                    lease_ms,
                };
                waiting.insert(job.id, held);
            }
        }
        self.claimed.extend(result.claimed);
        if sent.asked > 0 && claimed < sent.asked && sent.wakeups == self.wakeups {
            // The queue ran dry: wait for a wake-up, and start small again.
            self.maybe_more = false;
            self.turnover = 0;
            self.pace = 0;
        }
    }

    /// Reports the outcome of the completions a tick wrote (`written`) or found fenced off.
    fn report_completions(&self, completions: Vec<PendingCompletion>, written: Vec<JobId>) {
        if completions.is_empty() {
            return;
        }
        let written: HashSet<JobId> = written.into_iter().collect();
        let outcome = |c: &PendingCompletion| {
            if written.contains(&c.held.id) {
                JobOutcome::Completed
            } else {
                JobOutcome::LeaseLost
            }
        };
        // One stats update per tick, not per job: every update wakes whoever watches them.
        self.shared.stats.send_modify(|stats| {
            for completion in &completions {
                stats.count(outcome(completion));
            }
        });
        for completion in completions {
            let outcome = outcome(&completion);
            let Held { id, attempt } = completion.held;
            if outcome == JobOutcome::LeaseLost {
                tracing::warn!(job = %id, attempt, "lease lost: another attempt owns the job; result dropped");
            }
            self.shared.emit(WorkerEvent::JobFinished {
                id,
                task: completion.task,
                attempt,
                outcome,
                error: None,
            });
            // Reported: a stopping worker no longer waits for it.
            drop(completion.active);
        }
    }

    /// Jobs claimed but not started when the worker stops go straight back to pending.
    async fn release_claimed(&mut self) {
        for job in std::mem::take(&mut self.claimed) {
            self.shared.take_waiting(job.id);
            let fence = Fence {
                id: job.id,
                attempt: job.attempt,
                worker_id: self.shared.worker_id(),
            };
            if let Err(err) = store::attempt::release(&self.shared.pool, fence).await {
                tracing::warn!(job = %job.id, error = %err, "could not release an unstarted job");
            }
        }
    }
}

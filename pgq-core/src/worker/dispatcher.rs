//! One dispatcher per queue. Each round trip is one statement (a tick) that completes the
//! attempts that succeeded, writes `running` for the jobs claimed ahead whose handlers started
//! since the last tick, and claims more. Several ticks are in flight at once (one per dispatch
//! connection), each on a connection of its own, so that the database works on one batch while
//! the worker runs the next. An idle worker's claim, with nothing else in flight or active, runs
//! in the dispatcher's task itself: the wake-up saves two task hand-offs.
//!
//! A claim takes the jobs for the slots free when it is sent as `running`, and those slots wait
//! for them. A job claimed ahead of a free slot starts as soon as one frees, ahead of its
//! `running` write: everything the attempt writes (progress, a failure) waits until that write
//! has landed, and if it does not hold — the job was rescued or released meanwhile — the handler
//! is told to stop and its result is dropped, as for a lost lease. A plain success whose start
//! was not sent yet is completed with it, in one write. How many jobs each claim asks for, and
//! how many of them run at once, is [`Pacing`]'s call.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use sqlx::Postgres;
use sqlx::pool::PoolConnection;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::attempt::AttemptState;
use crate::error::Result;
use crate::job_id::JobId;
use crate::store;
use crate::store::tick::{ClaimedJob, Held, TickRequest, TickResult};
use crate::store::{Store, on};
use crate::worker::completer::Success;
use crate::worker::event::WorkerEvent;
use crate::worker::executor::Executor;
use crate::worker::pacing::{ClaimSent, Pacing};
use crate::worker::report::Reporter;
use crate::worker::slots::{QueueSlots, Slot};

/// How long a tick waits for handlers in flight to return, so that their writes share it.
const COALESCE_WINDOW: Duration = Duration::from_millis(1);

/// The longest a failed tick waits before it gives its place back: the poll interval, but no
/// more than this. The tick holds its claim, its completions and its starts meanwhile, so a
/// long poll interval (fleets that lean on notifications) must not stall the queue as long.
const AFTER_A_FAILED_TICK: Duration = Duration::from_secs(1);

/// How long a job claimed ahead may wait for a slot before it goes back to pending: the
/// handlers holding the slots are slow or hung, and another worker may have one free.
const HOARDING: Duration = Duration::from_secs(2);

/// What a dispatcher works with, besides its queue.
#[derive(Debug, Clone)]
pub(crate) struct Dispatch {
    pub(crate) executor: Arc<Executor>,
    pub(crate) reporter: Reporter,
    pub(crate) poll_interval: Duration,
    /// Ticks in flight at once, each on a connection of the queue's dispatch pool.
    pub(crate) ticks_in_flight: usize,
    pub(crate) batch_size: usize,
    /// Whether ticks commit completions durably (see `WorkerBuilder::durable_completions`).
    pub(crate) durable: bool,
    /// Whether ticks delete the jobs they complete (a retention of zero).
    pub(crate) delete_completed: bool,
    pub(crate) stopping: watch::Receiver<bool>,
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
    completions: Vec<Success>,
    starting: Vec<Starting>,
    claim: ClaimSent,
    result: Result<TickResult>,
    /// The tick's connection, for the next one, unless its statement failed.
    connection: Option<PoolConnection<Postgres>>,
    /// How many ticks had written completions when this one was sent.
    completing_ticks: u64,
}

struct Dispatcher {
    dispatch: Dispatch,
    queue: Arc<QueueSlots>,
    store: Store,
    pacing: Pacing,
    /// Claimed, in the order they start: those claimed as `running` first, with the slots kept
    /// for them, then those waiting for a free slot.
    claimed: VecDeque<ClaimedJob>,
    /// Claimed ahead, started since the last tick was sent.
    starting: Vec<Starting>,
    next_poll: Instant,
    /// Connections of the dispatch pool between ticks. Kept here rather than given back: sqlx
    /// checks every connection it takes back with a round trip.
    connections: Vec<PoolConnection<Postgres>>,
    /// The last tick failed: the next that succeeds says so.
    failing: bool,
    /// Whether the queue was last reported paused (`WorkerEvent::QueuePaused`).
    reported_paused: bool,
    /// The last claim got fewer jobs than it asked for because of a concurrency key's limit (or
    /// the queue's rate limit): this worker's next completions free room, so they wake the
    /// claims (room that other workers free is found at the next poll or notification), rather
    /// than claims that find none.
    limit_reached: bool,
    /// Ticks applied that wrote completions: room freed for a limited key.
    completing_ticks: u64,
}

/// Runs one queue's dispatcher; its ticks run on `store`, the queue's own connections, each
/// within the statement timeout.
pub(crate) async fn dispatch(dispatch: Dispatch, queue: Arc<QueueSlots>, store: Store) {
    let mut stopping = dispatch.stopping.clone();
    let mut d = Dispatcher {
        next_poll: Instant::now() + dispatch.poll_interval,
        pacing: Pacing::new(queue.concurrency, dispatch.batch_size),
        dispatch,
        queue,
        store,
        claimed: VecDeque::new(),
        starting: Vec::new(),
        connections: Vec::new(),
        failing: false,
        reported_paused: false,
        limit_reached: false,
        completing_ticks: 0,
    };
    let mut in_flight: FuturesUnordered<JoinHandle<Sent>> = FuturesUnordered::new();
    // One timer for the whole loop: a new timer that is the runtime's earliest wakes its driver
    // thread, which at thousands of iterations a second costs more than the jobs.
    let poll = tokio::time::sleep_until(d.next_poll);
    tokio::pin!(poll);
    let mut ready = Vec::new();
    loop {
        let stop = *stopping.borrow();
        d.report_pause();
        d.pacing.returned(d.queue.take_returned());
        ready.extend(d.dispatch.executor.completer.take_ready(&d.queue.name));
        if d.limit_reached && !ready.is_empty() {
            // The next tick completes these, and claims the room they free.
            d.limit_reached = false;
            d.pacing.woken();
        }
        if stop || d.queue.seated() && d.queue.allowed() == 0 {
            // Stopping, or left without seats of a limited queue (other workers hold them all,
            // or the lease ran out): what waits here runs sooner elsewhere.
            d.release_claimed().await;
        } else {
            d.start_claimed();
            d.release_hoarded().await;
        }
        let want = if stop { 0 } else { d.want() };
        if in_flight.len() < d.dispatch.ticks_in_flight
            && (!d.starting.is_empty() || !ready.is_empty() || want > 0)
        {
            if !stop {
                d.coalesce().await;
                // What returned meanwhile goes with this tick.
                ready.extend(d.dispatch.executor.completer.take_ready(&d.queue.name));
            }
            let idle = in_flight.is_empty() && d.queue.active() == 0 && ready.is_empty();
            let tick = d.tick(std::mem::take(&mut ready), stop);
            if idle && !stop {
                // An idle worker's claim (woken by a notification, or polling): nothing else
                // can be in flight or come back meanwhile, so it runs here rather than in a task
                // of its own, two task hand-offs less on the wake-up.
                let sent = tick.await;
                d.apply(sent);
            } else {
                in_flight.push(tokio::spawn(tick));
            }
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
            _ = queue.wake.notified() => d.pacing.woken(),
            // A handler returned, the first success of a batch is waiting, or the last active
            // attempt ended.
            _ = queue.changed.notified() => {}
            _ = &mut poll => {
                d.pacing.woken();
                d.next_poll = Instant::now() + d.dispatch.poll_interval;
            }
            _ = stopping.wait_for(|stop| *stop), if !stop => {}
        }
    }
}

impl Dispatcher {
    /// Reports the queue paused once no claim from it is in flight — from then on this worker
    /// claims nothing from it — and resumed once it may claim again.
    fn report_pause(&mut self) {
        let queue = || self.queue.name.to_string();
        match self.queue.pause_state() {
            Some(true) if !self.reported_paused && !self.pacing.claiming() => {
                self.reported_paused = true;
                self.dispatch
                    .reporter
                    .emit(|| WorkerEvent::QueuePaused { queue: queue() });
            }
            Some(false) if self.reported_paused => {
                self.reported_paused = false;
                self.dispatch
                    .reporter
                    .emit(|| WorkerEvent::QueueResumed { queue: queue() });
            }
            _ => {}
        }
    }

    /// Jobs the next claim asks for: none while the queue is paused (or not known not to be).
    fn want(&self) -> usize {
        if self.queue.paused() || self.queue.allowed() == 0 {
            return 0;
        }
        self.pacing
            .want(self.queue.free(), self.claimed.len(), self.queue.alone())
    }

    /// Starts claimed jobs while slots are free, but for those kept for claims in flight.
    fn start_claimed(&mut self) {
        while !self.claimed.is_empty() && self.pacing.unreserved(self.queue.free()) > 0 {
            let Some(slot) = self.queue.try_slot() else {
                return;
            };
            let Some(job) = self.claimed.pop_front() else {
                return;
            };
            self.start(job, slot);
        }
    }

    /// Runs a claimed job's handler in `slot`.
    fn start(&mut self, job: ClaimedJob, slot: Slot) {
        let executor = &self.dispatch.executor;
        let state = executor.attempt_state(&job, job.running);
        let timeout = executor
            .tasks
            .get(&job.task)
            .and_then(|entry| entry.timeout);
        if !executor.held.start(&state, timeout) {
            // Renewal found its lease gone (a long stall): it belongs to the rescuer now.
            tracing::warn!(job = %job.id, "claimed job lost its lease while it waited for a slot");
            return;
        }
        let held = Held {
            id: job.id,
            attempt: job.attempt,
        };
        if job.running {
            self.dispatch.reporter.emit(|| WorkerEvent::JobStarted {
                id: job.id,
                task: job.task.clone(),
                attempt: job.attempt,
            });
        } else {
            self.starting.push(Starting {
                held,
                task: job.task.clone(),
                state: state.clone(),
            });
        }
        tokio::spawn(executor.clone().execute(job, state, Some(slot)));
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
                _ = self.queue.changed.notified() => self.start_claimed(),
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// A tick with everything there is to write, and a claim if slots want one.
    fn tick(
        &mut self,
        completions: Vec<Success>,
        stop: bool,
    ) -> impl Future<Output = Sent> + Send + 'static {
        self.pacing.returned(self.queue.take_returned());
        let want = if stop { 0 } else { self.want() };
        // Slots are free for the claim's jobs only when no claimed job waits for one.
        let free = if self.claimed.is_empty() {
            self.queue.free()
        } else {
            0
        };
        let claim = self.pacing.send(want, free);
        if want > 0 {
            self.next_poll = Instant::now() + self.dispatch.poll_interval;
        }
        // A success whose start was not sent is completed with it: one write, not two.
        let unstarted: HashSet<JobId> = completions
            .iter()
            .filter(|success| success.is_unstarted())
            .map(|success| success.id)
            .collect();
        if !unstarted.is_empty() {
            self.starting
                .retain(|starting| !unstarted.contains(&starting.held.id));
        }
        let starting = std::mem::take(&mut self.starting);
        for started in &starting {
            started.state.start_sent();
        }
        let dispatch = self.dispatch.clone();
        let queue = self.queue.clone();
        let store = self.store.clone();
        let connection = self.connections.pop();
        let completing_ticks = self.completing_ticks;
        async move {
            let complete: Vec<Held> = completions
                .iter()
                .map(|c| Held {
                    id: c.id,
                    attempt: c.attempt,
                })
                .collect();
            let start: Vec<Held> = starting.iter().map(|s| s.held).collect();
            let tasks = &dispatch.executor.tasks;
            let mut request = TickRequest {
                worker_id: &dispatch.executor.worker_id,
                complete: &complete,
                start: &start,
                queue: &queue.name,
                tasks: tasks.names(),
                leases_ms: tasks.leases_ms(),
                claim: want,
                run_now: claim.run_now,
                durable: dispatch.durable,
                delete_completed: dispatch.delete_completed,
                // Only a queue with a rate limit takes the rate-limited claim.
                rated: queue.rated(),
                // Only the queue of a task with a concurrency key bounds its claims by key.
                keyed: tasks.keyed_on(&queue.name),
            };
            let db = &store;
            let connection = match connection {
                Some(connection) => Ok(connection),
                None => db.bound(async { Ok(db.pool().acquire().await?) }).await,
            };
            let (result, connection) = match connection {
                Ok(mut connection) => {
                    // A pause heard while a connection was being made (a new one takes
                    // milliseconds): the claim takes nothing after all.
                    if request.claim > 0 && queue.paused() {
                        request.claim = 0;
                        request.run_now = 0;
                    }
                    let span = tracing::debug_span!(
                        "pgq.tick",
                        queue = %queue.name,
                        complete = request.complete.len(),
                        start = request.start.len(),
                        claim = request.claim,
                    );
                    let tick =
                        async { on!(db, &mut connection, |c| store::tick::tick(db, c, &request)) };
                    let result = tick.instrument(span).await;
                    match &result {
                        Ok(_) => (result, Some(connection)),
                        // A connection that did not answer in time, or whose prepared tick a
                        // migration made stale, is closed; one whose statement failed otherwise
                        // goes back to the pool, which checks it.
                        Err(err) if err.spoils_connection() => {
                            connection.close_on_drop();
                            (result, None)
                        }
                        Err(_) => (result, None),
                    }
                }
                Err(err) => (Err(err), None),
            };
            if let Err(err) = &result {
                tracing::warn!(queue = %queue.name, error = %err, "dispatch failed; retrying within a second");
                tokio::time::sleep(dispatch.poll_interval.min(AFTER_A_FAILED_TICK)).await;
            }
            Sent {
                completions,
                starting,
                claim,
                result,
                connection,
                completing_ticks,
            }
        }
    }

    /// Tells waiting attempts what the tick wrote, and queues what it claimed.
    fn apply(&mut self, sent: Sent) {
        self.connections.extend(sent.connection);
        let executor = &self.dispatch.executor;
        let result = match sent.result {
            Ok(result) => result,
            Err(_) => {
                // Nothing was written: everything goes with a later tick.
                self.failing = true;
                self.pacing.failed(sent.claim);
                executor
                    .completer
                    .put_back(&self.queue.name, sent.completions);
                let mut starting = sent.starting;
                starting.append(&mut self.starting);
                self.starting = starting;
                return;
            }
        };
        if self.failing {
            self.failing = false;
            tracing::info!(queue = %self.queue.name, "dispatch works again");
        }
        self.note_limit(&result, sent.completing_ticks);
        let executor = &self.dispatch.executor;
        executor
            .completer
            .batch_written(sent.completions, &result.completed);
        let started: HashSet<JobId> = result.started.into_iter().collect();
        for starting in sent.starting {
            let held = started.contains(&starting.held.id);
            if held {
                self.dispatch.reporter.emit(|| WorkerEvent::JobStarted {
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
        self.dispatch.reporter.claimed(result.claimed.len());
        for job in &result.claimed {
            let lease_ms = executor.tasks.lease_ms(&job.task);
            executor
                .held
                .claimed(job.id, &job.task, job.attempt, lease_ms);
        }
        // Their slots are free now: the jobs claimed as `running` start before any other.
        self.pacing.received(sent.claim, result.claimed.len());
        let (running, ahead): (Vec<_>, Vec<_>) =
            result.claimed.into_iter().partition(|job| job.running);
        for job in running.into_iter().rev() {
            self.claimed.push_front(job);
        }
        self.claimed.extend(ahead);
    }

    /// Keeps a queue with limited keys claiming without polling for room: a claim cut short by a
    /// key's limit waits for this worker's next completions, unless some were written after its
    /// count.
    fn note_limit(&mut self, result: &TickResult, completing_ticks_when_sent: u64) {
        if let Some(wait) = result.next_token {
            // Out of tokens: sleep until the next is due, then claim (a poll, brought forward).
            self.next_poll = self.next_poll.min(Instant::now() + wait);
        }
        if !result.completed.is_empty() {
            self.completing_ticks += 1;
        }
        let freed_since = if result.limit_reached {
            // Counted before completions that other ticks wrote meanwhile.
            self.completing_ticks
                > completing_ticks_when_sent + u64::from(!result.completed.is_empty())
        } else {
            self.limit_reached && !result.completed.is_empty()
        };
        if freed_since {
            self.limit_reached = false;
            self.pacing.woken();
        } else if result.limit_reached {
            self.limit_reached = true;
        }
    }

    /// Gives back the jobs claimed ahead that have waited [`HOARDING`] for a slot, their
    /// attempts unspent, and wakes the loop when the next one will have. No claim asks for more
    /// ahead while no handler returns, so a worker whose slots are all held up does not claim
    /// them again.
    async fn release_hoarded(&mut self) {
        while let Some(job) = self.claimed.front() {
            let until = job.received + HOARDING;
            if Instant::now() < until {
                self.next_poll = self.next_poll.min(until);
                return;
            }
            if let Some(job) = self.claimed.pop_front() {
                tracing::debug!(job = %job.id, "a job claimed ahead waited too long for a slot; released");
                self.dispatch
                    .executor
                    .completer
                    .release_unstarted(job.id, job.attempt)
                    .await;
            }
        }
    }

    /// Jobs claimed but not started when the worker stops go straight back to pending (those
    /// claimed as `running` too: their handlers never ran).
    async fn release_claimed(&mut self) {
        for job in std::mem::take(&mut self.claimed) {
            self.dispatch
                .executor
                .completer
                .release_unstarted(job.id, job.attempt)
                .await;
        }
    }
}

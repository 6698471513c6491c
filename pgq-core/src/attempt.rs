//! The live state of one attempt, shared by the handler's [`JobContext`](crate::JobContext)
//! and the worker running it: cancellation, lease loss, progress, and completion in the
//! handler's own transaction. Without a database (handler unit tests) it records instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sqlx::PgConnection;

use crate::attempt_trace::AttemptTrace;
use crate::client::Client;
use crate::error::Result;
use crate::job_id::JobId;
use crate::limits;
use crate::store;
use crate::store::attempt::Fence;
use crate::text;
use crate::watched::Watched;

/// Where an attempt's reports go.
#[derive(Debug)]
pub(crate) enum Backend {
    /// A worker runs the attempt: writes go to the job row, fenced.
    Database { client: Client, worker_id: Arc<str> },
    /// A handler unit test: everything is kept in memory for the test to read.
    Recording(Mutex<Recording>),
}

/// What a handler did under a test context.
#[doc(hidden)]
#[derive(Debug, Default, Clone)]
pub struct Recording {
    /// Every `progress` call: percent and stage.
    pub progress: Vec<(u8, String)>,
    /// Every `event` message.
    pub events: Vec<String>,
    /// Every task enqueued through the context: task name and JSON payload.
    pub enqueued: Vec<(&'static str, serde_json::Value)>,
}

#[derive(Debug, Default)]
struct Progress {
    percent: u8,
    stage: String,
    unsent_events: i32,
    dirty: bool,
    last_write: Option<Instant>,
    flush_scheduled: bool,
}

#[derive(Debug)]
pub(crate) struct AttemptState {
    pub(crate) id: JobId,
    pub(crate) attempt: i32,
    pub(crate) backend: Backend,
    /// The span the handler runs in, and what the attempt's log line and metrics need.
    pub(crate) trace: AttemptTrace,
    /// [`STOPPED`] once the job is cancelled or the lease is lost: stop, the result will not
    /// count.
    stop: Watched,
    /// Whether the job's start has been written. A worker starts the handler of a job claimed
    /// ahead as soon as a slot is free, and writes `running` with its next statement; writes
    /// that need the job running (progress, the outcome) wait for this first. A plain success
    /// whose start was not sent yet is written with its start instead. A [`Start`].
    start: Watched,
    cancel_requested: AtomicBool,
    lease_lost: AtomicBool,
    /// Completed in the handler's transaction (`ctx.complete_in`), which holds the job's row until
    /// it ends: writes of the worker's would wait for it.
    completed_in_tx: AtomicBool,
    /// The id of that transaction, to tell later whether it rolled back, and whether it was
    /// seen committed (then nothing is left to ask).
    completing_xact: Mutex<Option<(String, bool)>>,
    /// Released by a shutdown that could not wait for the handler: whatever the handler
    /// returns later is neither written nor reported.
    abandoned: AtomicBool,
    progress: Mutex<Progress>,
    /// Held by a progress write while it runs: the last one, when the attempt ends, waits for
    /// a throttled one in flight instead of finding nothing to write and letting the outcome
    /// land first (the late write would then find the job no longer running).
    writing: tokio::sync::Mutex<()>,
}

/// The value of an attempt's `stop` once it must stop; 0 before.
const STOPPED: u8 = 1;

/// Where an attempt's start (its `running` write) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Start {
    /// Not sent yet; the handler may already be running, or have returned.
    Unsent,
    /// Sent with a statement in flight.
    Sent,
    /// The job is `running` under this attempt.
    Confirmed,
    /// The fence did not hold (the job was rescued or released meanwhile): the attempt is void.
    Refused,
}

impl Start {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => Start::Unsent,
            1 => Start::Sent,
            2 => Start::Confirmed,
            _ => Start::Refused,
        }
    }

    fn decided(value: u8) -> bool {
        matches!(Start::from_u8(value), Start::Confirmed | Start::Refused)
    }
}

impl AttemptState {
    /// An attempt whose job is already `running`.
    pub(crate) fn new(id: JobId, attempt: i32, backend: Backend, trace: AttemptTrace) -> Arc<Self> {
        Self::with_start(id, attempt, backend, trace, Start::Confirmed)
    }

    /// An attempt started ahead of its `running` write; see [`confirm_start`](Self::confirm_start).
    pub(crate) fn unconfirmed(
        id: JobId,
        attempt: i32,
        backend: Backend,
        trace: AttemptTrace,
    ) -> Arc<Self> {
        Self::with_start(id, attempt, backend, trace, Start::Unsent)
    }

    fn with_start(
        id: JobId,
        attempt: i32,
        backend: Backend,
        trace: AttemptTrace,
        start: Start,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            attempt,
            backend,
            trace,
            stop: Watched::new(0),
            start: Watched::new(start as u8),
            cancel_requested: AtomicBool::new(false),
            lease_lost: AtomicBool::new(false),
            completed_in_tx: AtomicBool::new(false),
            completing_xact: Mutex::new(None),
            abandoned: AtomicBool::new(false),
            progress: Mutex::new(Progress::default()),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn fence(&self) -> Option<Fence<'_>> {
        match &self.backend {
            Backend::Database { worker_id, .. } => Some(Fence {
                id: self.id,
                attempt: self.attempt,
                worker_id,
            }),
            Backend::Recording(_) => None,
        }
    }

    /// The start goes out with a statement now. Nobody waits for this step, only for the
    /// decision.
    pub(crate) fn start_sent(&self) {
        self.start
            .advance_quietly(Start::Unsent as u8, Start::Sent as u8);
    }

    /// Records whether the start (alone, or with the completion) held; a refused start stops
    /// the handler.
    pub(crate) fn confirm_start(&self, held: bool) {
        if held {
            self.start.set(Start::Confirmed as u8);
        } else {
            self.start.set(Start::Refused as u8);
            self.lose_lease();
        }
    }

    /// Where the `running` write stands now.
    pub(crate) fn start_status(&self) -> Start {
        Start::from_u8(self.start.get())
    }

    /// Whether progress was reported that is not written yet, or a write of it is in flight.
    pub(crate) fn has_unwritten_progress(&self) -> bool {
        self.progress.lock().map(|p| p.dirty).unwrap_or(false) || self.writing.try_lock().is_err()
    }

    /// Waits for the `running` write; true when the job runs under this attempt.
    pub(crate) async fn started(&self) -> bool {
        let decided = self.start.wait_for(Start::decided).await;
        Start::from_u8(decided) == Start::Confirmed
    }

    pub(crate) fn request_cancel(&self) {
        self.cancel_requested.store(true, Ordering::SeqCst);
        self.stop.set(STOPPED);
    }

    pub(crate) fn lose_lease(&self) {
        if !self.lease_lost.swap(true, Ordering::SeqCst) {
            tracing::warn!(job = %self.id, attempt = self.attempt, "lease lost: another worker may run this job now");
        }
        self.stop.set(STOPPED);
    }

    /// [`lose_lease`](Self::lose_lease) for an attempt whose handler returned: its outcome is
    /// written on its own, fenced, but no handler is left to warn about, and most often the
    /// renewal missed it only because that outcome had just committed.
    pub(crate) fn lose_lease_quietly(&self) {
        self.lease_lost.store(true, Ordering::SeqCst);
        self.stop.set(STOPPED);
    }

    pub(crate) fn is_cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::SeqCst)
    }

    pub(crate) fn is_lease_lost(&self) -> bool {
        self.lease_lost.load(Ordering::SeqCst)
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stop.get() == STOPPED
    }

    pub(crate) async fn stopped(&self) {
        self.stop.wait_for(|stop| stop == STOPPED).await;
    }

    /// Marks the attempt released without its handler; `false` if it already was.
    pub(crate) fn abandon(&self) -> bool {
        self.stop.set(STOPPED);
        !self.abandoned.swap(true, Ordering::SeqCst)
    }

    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// Marks the job completed in the handler's transaction `xact` (`None`: unknown, or the one
    /// already marked).
    pub(crate) fn mark_completed_in_tx(&self, xact: Option<String>) {
        if let Some(xact) = xact
            && let Ok(mut completing) = self.completing_xact.lock()
        {
            *completing = Some((xact, false));
        }
        self.completed_in_tx.store(true, Ordering::SeqCst);
    }

    pub(crate) fn completed_in_tx(&self) -> bool {
        self.completed_in_tx.load(Ordering::SeqCst)
    }

    /// The attempt is no longer completed in the handler's transaction, which rolled back.
    pub(crate) fn unmark_completed_in_tx(&self) {
        self.completed_in_tx.store(false, Ordering::SeqCst);
        if let Ok(mut completing) = self.completing_xact.lock() {
            *completing = None;
        }
    }

    /// Whether the worker may write the job: not completed in the handler's transaction, or
    /// that transaction rolled back (then the mark goes). While it is open, or once it
    /// committed, a write would wait for it or find the job finished.
    pub(crate) async fn writable(&self, store: &store::Store) -> bool {
        use store::attempt::XactStatus;
        if !self.completed_in_tx() {
            return true;
        }
        let xact = match self.completing_xact.lock().ok().and_then(|x| x.clone()) {
            Some((xact, false)) => xact,
            _ => return false,
        };
        let status = store::attempt::xact_status(store, &xact).await;
        let Ok(mut completing) = self.completing_xact.lock() else {
            return false;
        };
        // Only if it is still that transaction's mark: the handler may have completed again, in
        // another transaction, meanwhile.
        let Some((_, committed)) = completing.as_mut().filter(|(x, _)| *x == xact) else {
            return false;
        };
        match status {
            Ok(XactStatus::Aborted) => {
                *completing = None;
                self.completed_in_tx.store(false, Ordering::SeqCst);
                true
            }
            Ok(XactStatus::Committed) => {
                *committed = true;
                false
            }
            Ok(XactStatus::Open) => false,
            Err(err) => {
                tracing::warn!(job = %self.id, error = %err, "could not tell whether the handler's transaction rolled back");
                false
            }
        }
    }

    pub(crate) fn record(&self, f: impl FnOnce(&mut Recording)) -> bool {
        match &self.backend {
            Backend::Recording(recording) => {
                if let Ok(mut recording) = recording.lock() {
                    f(&mut recording);
                }
                true
            }
            Backend::Database { .. } => false,
        }
    }

    /// Updates progress in memory and writes it now, or schedules the write when throttled.
    pub(crate) async fn report(
        self: &Arc<Self>,
        percent: Option<u8>,
        stage: Option<&str>,
        event: bool,
    ) {
        let write_now = {
            let Ok(mut progress) = self.progress.lock() else {
                return;
            };
            if let Some(percent) = percent {
                progress.percent = percent.min(100);
            }
            // An empty stage keeps the last one reported, sent or still throttled.
            if let Some(stage) = stage.filter(|stage| !stage.is_empty()) {
                progress.stage = text::storable(stage, limits::MAX_STAGE_BYTES).into_owned();
            }
            if event {
                progress.unsent_events += 1;
            }
            progress.dirty = true;
            let due = progress
                .last_write
                .is_none_or(|at| at.elapsed() >= limits::PROGRESS_THROTTLE);
            if !due && !progress.flush_scheduled {
                progress.flush_scheduled = true;
                let wait = limits::PROGRESS_THROTTLE.saturating_sub(
                    progress
                        .last_write
                        .map(|at| at.elapsed())
                        .unwrap_or_default(),
                );
                let state = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    state.flush().await;
                });
            }
            due
        };
        if write_now {
            self.flush().await;
        }
    }

    /// Writes unsent progress, if any. The worker calls it when the attempt ends.
    pub(crate) async fn flush(&self) {
        let Backend::Database { client, worker_id } = &self.backend else {
            return;
        };
        let _writing = self.writing.lock().await;
        if !self.writable(client.store()).await {
            // The handler's transaction holds the job's row until it ends, and completes it
            // with its progress: a write of ours would wait for that transaction. The throttle
            // holds the next look to one a second.
            if let Ok(mut progress) = self.progress.lock() {
                progress.flush_scheduled = false;
                progress.last_write = Some(Instant::now());
            }
            return;
        }
        let (percent, stage, events) = {
            let Ok(mut progress) = self.progress.lock() else {
                return;
            };
            progress.flush_scheduled = false;
            if !progress.dirty {
                return;
            }
            progress.dirty = false;
            progress.last_write = Some(Instant::now());
            let events = std::mem::take(&mut progress.unsent_events);
            (progress.percent, progress.stage.clone(), events)
        };
        if !self.started().await {
            return;
        }
        let fence = Fence {
            id: self.id,
            attempt: self.attempt,
            worker_id,
        };
        let stage_written = (!stage.is_empty()).then_some(stage.as_str());
        match store::progress::write(client.store(), fence, percent, stage_written, events).await {
            Ok(true) => {}
            Ok(false) => self.lose_lease(),
            Err(err) => {
                tracing::warn!(job = %self.id, error = %err, "could not write progress");
                // Still unsent: the next write (at the latest the attempt's end) carries the
                // state, and the events if the server refused the write. One that went
                // unanswered may have landed, and events written twice would count twice.
                if let Ok(mut progress) = self.progress.lock() {
                    progress.dirty = true;
                    if !err.is_unreachable() {
                        progress.unsent_events += events;
                    }
                }
            }
        }
    }

    /// Completes the attempt inside the handler's own transaction (`ctx.complete_in`), its
    /// stage and events not written yet going with it, in the handler's own statement (written on
    /// another connection first, they would conflict with the handler's transaction at
    /// repeatable read); when the handler returns, the worker's completer checks that the
    /// transaction committed, and reports it. `false` when the fence no longer holds. The stage
    /// and events stay unsent until then: should the transaction roll back, a later write
    /// (progress, another `complete_in`, the worker's completion) carries them.
    pub(crate) async fn complete_in(
        &self,
        store: &store::Store,
        conn: &mut PgConnection,
        fence: Fence<'_>,
    ) -> Result<bool> {
        if !self.started().await {
            return Ok(false);
        }
        let (stage, events) = self.unsent();
        let completed =
            store::attempt::complete_in(store, conn, fence, stage.as_deref(), events).await?;
        if completed.held {
            self.mark_completed_in_tx(completed.xact);
        }
        Ok(completed.held)
    }

    /// The stage and the count of events reported since the last write.
    fn unsent(&self) -> (Option<String>, i32) {
        let Ok(progress) = self.progress.lock() else {
            return (None, 0);
        };
        if !progress.dirty {
            return (None, 0);
        }
        let stage = (!progress.stage.is_empty()).then(|| progress.stage.clone());
        (stage, progress.unsent_events)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::{AttemptState, Backend};
    use crate::attempt_trace::AttemptTrace;

    fn unconfirmed() -> std::sync::Arc<AttemptState> {
        let backend = Backend::Recording(Mutex::default());
        AttemptState::unconfirmed(7.into(), 1, backend, AttemptTrace::none())
    }

    #[tokio::test]
    async fn writes_wait_for_the_running_write() {
        let state = unconfirmed();
        let waiting = tokio::spawn({
            let state = state.clone();
            async move { state.started().await }
        });
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "nothing is decided before the write lands"
        );
        state.start_sent();
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "nor while it is in flight");
        state.confirm_start(true);
        let started = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        assert!(started.unwrap().unwrap());
        assert!(!state.is_stopped());
    }

    #[tokio::test]
    async fn a_refused_start_stops_the_handler_and_voids_the_attempt() {
        let state = unconfirmed();
        state.confirm_start(false);
        assert!(!state.started().await);
        assert!(state.is_stopped() && state.is_lease_lost());
    }
}

//! Every job a worker holds: claimed and waiting for a slot, or running. The lease renewer
//! renews them all, but for an attempt past its deadline — its task's `timeout` and
//! [`OVERRUN_MARGIN`] — whose handler did not stop: a handler that blocks its thread cannot be
//! stopped, so its lease is left to run out and another worker rescues the job. Cancellation and
//! shutdown find running attempts here; a cancel asked of a job waiting for a slot is kept for
//! its start.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::AbortHandle;
use tokio::time::{Duration, Instant};

use crate::attempt::AttemptState;
use crate::job_id::JobId;
use crate::store::lease::{HeldLease, Renewed};

#[derive(Debug, Default)]
pub(crate) struct HeldJobs {
    jobs: Mutex<HashMap<JobId, Held>>,
    /// Numbers each claim, so that what renewal learnt of one is never applied to a later claim
    /// of the same job with the same attempt number (a snooze or a release gives the attempt
    /// back, and this worker may claim the job again before the renewal returns).
    claims: AtomicU64,
}

/// The leases to renew, each with the claim it was taken for.
#[derive(Debug)]
pub(crate) struct HeldLeases {
    pub(crate) leases: Vec<HeldLease>,
    claims: Vec<u64>,
}

#[derive(Debug)]
struct Held {
    task: String,
    attempt: i32,
    /// Which claim of the job this is ([`HeldJobs::claims`]).
    claim: u64,
    lease_ms: i64,
    /// `None` while the job waits for a slot.
    running: Option<Running>,
    /// A cancel asked while the job waited for a slot: its attempt starts cancelled.
    cancel_requested: bool,
}

#[derive(Debug)]
struct Running {
    state: Arc<AttemptState>,
    /// The handler's task, aborted at shutdown past the grace period.
    abort: Option<AbortHandle>,
    /// After this, the lease is no longer renewed.
    deadline: Option<Instant>,
    overran: bool,
    /// The handler returned: its outcome is on its way, and its write's fence decides.
    returned: bool,
}

/// A held job as shutdown sees it.
#[derive(Debug)]
pub(crate) struct HeldAttempt {
    pub(crate) id: JobId,
    pub(crate) task: String,
    pub(crate) attempt: i32,
    /// The attempt's state, once its handler started.
    pub(crate) running: Option<Arc<AttemptState>>,
}

/// How long past its task's `timeout` an attempt keeps its lease renewed.
pub(crate) const OVERRUN_MARGIN: Duration = Duration::from_secs(1);

impl HeldJobs {
    fn jobs(&self) -> MutexGuard<'_, HashMap<JobId, Held>> {
        // No code panics while holding the lock; recover the map if one ever did.
        self.jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many jobs the worker holds, waiting for a slot or running.
    pub(crate) fn count(&self) -> usize {
        self.jobs().len()
    }

    /// A job was claimed: held, waiting for a slot.
    pub(crate) fn claimed(&self, id: JobId, task: &str, attempt: i32, lease_ms: i64) {
        let held = Held {
            task: task.to_owned(),
            attempt,
            claim: self.claims.fetch_add(1, Ordering::Relaxed),
            lease_ms,
            running: None,
            cancel_requested: false,
        };
        self.jobs().insert(id, held);
    }

    /// A waiting job starts, with its task's `timeout`; `false` when it lost its lease while it
    /// waited (it is the rescuer's now, and must not start).
    pub(crate) fn start(&self, state: &Arc<AttemptState>, timeout: Option<Duration>) -> bool {
        let cancel_requested = match self.jobs().get_mut(&state.id) {
            Some(held) if held.attempt == state.attempt && held.running.is_none() => {
                held.running = Some(Running {
                    state: state.clone(),
                    abort: None,
                    deadline: timeout.map(|t| Instant::now() + t + OVERRUN_MARGIN),
                    overran: false,
                    returned: false,
                });
                held.cancel_requested
            }
            _ => return false,
        };
        if cancel_requested {
            state.request_cancel();
        }
        true
    }

    /// The handler of a running attempt, for shutdown to abort.
    pub(crate) fn set_abort(&self, id: JobId, abort: AbortHandle) {
        if let Some(running) = self.jobs().get_mut(&id).and_then(|h| h.running.as_mut()) {
            running.abort = Some(abort);
        }
    }

    /// The handler of the running attempt `state` returned (or was stopped): it no longer
    /// overruns, and its job's lease is renewed until its outcome is written, however long that
    /// takes past the task's deadline (a database that does not answer meanwhile).
    pub(crate) fn handler_returned(&self, state: &Arc<AttemptState>) {
        let mut jobs = self.jobs();
        let running = jobs
            .get_mut(&state.id)
            .and_then(|held| held.running.as_mut())
            .filter(|running| Arc::ptr_eq(&running.state, state));
        if let Some(running) = running {
            running.deadline = None;
            running.returned = true;
        }
    }

    /// The running attempt `state` ended: its job is no longer held by this worker, unless the
    /// worker claimed it again meanwhile (a snooze due at once gives the attempt back), which is
    /// a claim of its own even with the same attempt number.
    pub(crate) fn forget_attempt(&self, state: &Arc<AttemptState>) {
        let mut jobs = self.jobs();
        let same = jobs.get(&state.id).is_some_and(|held| {
            held.running
                .as_ref()
                .is_some_and(|running| Arc::ptr_eq(&running.state, state))
        });
        if same {
            jobs.remove(&state.id);
        }
    }

    /// The job, claimed and never started, is no longer held by this worker: it was released.
    pub(crate) fn forget(&self, id: JobId, attempt: i32) {
        let mut jobs = self.jobs();
        if jobs.get(&id).is_some_and(|held| held.attempt == attempt) {
            jobs.remove(&id);
        }
    }

    /// Job `id` was asked to cancel: a running attempt is told at once, a job waiting for a
    /// slot when it starts.
    pub(crate) fn request_cancel(&self, id: JobId) {
        let running = {
            let mut jobs = self.jobs();
            let Some(held) = jobs.get_mut(&id) else {
                return;
            };
            held.cancel_requested = true;
            held.running.as_ref().map(|r| r.state.clone())
        };
        if let Some(state) = running {
            state.request_cancel();
        }
    }

    /// Every lease to renew: all held jobs but attempts past their deadline.
    pub(crate) fn leases(&self) -> HeldLeases {
        let now = Instant::now();
        let mut leases = Vec::new();
        let mut claims = Vec::new();
        for (&id, held) in self.jobs().iter_mut() {
            if let Some(running) = held.running.as_mut()
                && running.deadline.is_some_and(|deadline| deadline <= now)
            {
                if !running.overran {
                    running.overran = true;
                    tracing::warn!(job = %id, attempt = held.attempt, "attempt overran its timeout and does not stop: its lease is left to run out");
                }
                continue;
            }
            leases.push(HeldLease {
                id,
                attempt: held.attempt,
                lease_ms: held.lease_ms,
            });
            claims.push(held.claim);
        }
        HeldLeases { leases, claims }
    }

    /// Applies what renewal learnt: a job asked to cancel is told so; a job whose lease could
    /// not be renewed is lost — a running attempt is told to stop, a waiting job never starts.
    pub(crate) fn renewed(&self, asked: &HeldLeases, renewed: &[Renewed]) {
        let found: HashMap<JobId, bool> =
            renewed.iter().map(|r| (r.id, r.cancel_requested)).collect();
        let mut lost_states = Vec::new();
        let mut returned_states = Vec::new();
        let mut cancelled = Vec::new();
        {
            let mut jobs = self.jobs();
            for (lease, &claim) in asked.leases.iter().zip(&asked.claims) {
                let Some(held) = jobs.get(&lease.id) else {
                    continue; // finished meanwhile
                };
                if held.attempt != lease.attempt || held.claim != claim {
                    continue; // claimed again since
                }
                match (found.get(&lease.id), &held.running) {
                    (Some(true), Some(running)) => cancelled.push(running.state.clone()),
                    (Some(true), None) => {
                        if let Some(held) = jobs.get_mut(&lease.id) {
                            held.cancel_requested = true;
                        }
                    }
                    (Some(false), _) => {}
                    // Most often its outcome committed just before the renewal looked, and
                    // the worker has not forgotten it yet: no handler is left to warn about.
                    (None, Some(running)) if running.returned => {
                        returned_states.push(running.state.clone())
                    }
                    (None, Some(running)) => lost_states.push(running.state.clone()),
                    (None, None) => {
                        jobs.remove(&lease.id);
                    }
                }
            }
        }
        for state in cancelled {
            state.request_cancel();
        }
        for state in lost_states {
            state.lose_lease();
        }
        for state in returned_states {
            state.lose_lease_quietly();
        }
    }

    /// The attempts still held, running or not: what shutdown releases itself when their
    /// handlers do not stop.
    pub(crate) fn all(&self) -> Vec<HeldAttempt> {
        self.jobs()
            .iter()
            .map(|(&id, held)| HeldAttempt {
                id,
                task: held.task.clone(),
                attempt: held.attempt,
                running: held.running.as_ref().map(|r| r.state.clone()),
            })
            .collect()
    }

    /// Aborts every running handler; their executors release the jobs.
    pub(crate) fn abort_running(&self) {
        let aborts: Vec<AbortHandle> = self
            .jobs()
            .values()
            .filter_map(|held| held.running.as_ref()?.abort.clone())
            .collect();
        for abort in aborts {
            abort.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::HeldJobs;
    use crate::attempt::{AttemptState, Backend};
    use crate::attempt_trace::AttemptTrace;
    use crate::job_id::JobId;

    #[test]
    fn an_attempt_that_ends_forgets_its_own_claim_not_a_later_one() {
        let held = HeldJobs::default();
        let job = JobId::from(7);
        let attempt = || {
            let backend = Backend::Recording(Mutex::default());
            AttemptState::new(job, 1, backend, AttemptTrace::none())
        };
        held.claimed(job, "Report", 1, 60_000);
        let first = attempt();
        assert!(held.start(&first, None));
        // It snoozes, due at once, and this worker claims the job again (the same attempt
        // number) before the first attempt's end is reported.
        held.claimed(job, "Report", 1, 60_000);
        held.forget_attempt(&first);
        assert_eq!(held.count(), 1, "the new claim is kept");
        let second = attempt();
        assert!(held.start(&second, None));
        held.forget_attempt(&second);
        assert_eq!(held.count(), 0);
    }

    /// Past its task's timeout an attempt's lease is left to run out, but only while its handler
    /// runs: one whose handler returned keeps it renewed until its outcome is written.
    #[tokio::test(start_paused = true)]
    async fn a_returned_handlers_lease_is_renewed_past_its_deadline() {
        let held = HeldJobs::default();
        let job = JobId::from(7);
        held.claimed(job, "Report", 1, 60_000);
        let backend = Backend::Recording(Mutex::default());
        let state = AttemptState::new(job, 1, backend, AttemptTrace::none());
        assert!(held.start(&state, Some(std::time::Duration::from_secs(1))));
        tokio::time::advance(std::time::Duration::from_secs(3)).await;
        assert!(held.leases().leases.is_empty(), "overran: not renewed");
        held.handler_returned(&state);
        assert_eq!(held.leases().leases.len(), 1, "returned: renewed again");
    }

    /// What a renewal that no longer finds a job logs: "lease lost" for a running handler, and
    /// nothing for one that returned (its outcome committed a moment before, most often), whose
    /// attempt still counts as lost until its outcome's fenced write tells.
    #[test]
    fn a_returned_handlers_job_gone_from_a_renewal_is_no_lost_lease_warning() {
        let held = HeldJobs::default();
        let attempt = |id: i64| {
            let job = JobId::from(id);
            held.claimed(job, "Report", 1, 60_000);
            let backend = Backend::Recording(Mutex::default());
            let state = AttemptState::new(job, 1, backend, AttemptTrace::none());
            assert!(held.start(&state, None));
            state
        };
        let logged = |f: &dyn Fn()| {
            let written = Written::default();
            let subscriber = tracing_subscriber::fmt()
                .with_writer(written.clone())
                .with_ansi(false)
                .finish();
            tracing::subscriber::with_default(subscriber, f);
            let text = written.0.lock().unwrap().clone();
            String::from_utf8(text).unwrap()
        };
        let returned = attempt(7);
        held.handler_returned(&returned);
        let log = logged(&|| held.renewed(&held.leases(), &[]));
        assert!(!log.contains("lease lost"), "{log}");
        assert!(returned.is_lease_lost());
        let running = attempt(8);
        let log = logged(&|| held.renewed(&held.leases(), &[]));
        assert!(log.contains("lease lost"), "{log}");
        assert!(running.is_lease_lost());
    }

    /// A log written to memory.
    #[derive(Clone, Default)]
    struct Written(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Written {
        type Writer = Written;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[test]
    fn what_renewal_learnt_of_a_claim_is_not_applied_to_a_later_one() {
        let held = HeldJobs::default();
        let job = JobId::from(7);
        held.claimed(job, "Report", 1, 60_000);
        let asked = held.leases();
        // The job is snoozed (its attempt given back) and claimed again, with the same attempt
        // number, before the renewal returns without it.
        held.forget(job, 1);
        held.claimed(job, "Report", 1, 60_000);
        held.renewed(&asked, &[]);
        assert_eq!(held.count(), 1, "the new claim is kept");
        // What renewal learns of the new claim applies.
        held.renewed(&held.leases(), &[]);
        assert_eq!(
            held.count(),
            0,
            "a waiting job whose lease is gone is dropped"
        );
    }
}

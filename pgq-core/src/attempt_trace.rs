//! What one attempt tells an operator: a span the handler runs in, so that every line it logs
//! carries the job, and, once the attempt ends, one log line and its metrics. Field names follow
//! OpenTelemetry's messaging conventions where they fit; docs/observability.md lists them all.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tracing::Span;
use tracing::field::Empty;

use crate::job_id::JobId;
use crate::job_outcome::JobOutcome;
use crate::metric;

/// An attempt's span and timings.
#[derive(Debug)]
pub(crate) struct AttemptTrace {
    span: Span,
    queue: Option<String>,
    /// When the handler started.
    began: Instant,
    /// From the job's `run_at` to the handler's start.
    waited: Option<Duration>,
    /// When the handler returned.
    returned: OnceLock<Instant>,
    /// When a failed attempt's job runs again.
    retry_at: OnceLock<DateTime<Utc>>,
}

/// The job an attempt runs, as the trace names it.
pub(crate) struct Traced<'a> {
    pub(crate) id: JobId,
    pub(crate) task: &'a str,
    pub(crate) queue: &'a str,
    pub(crate) attempt: i32,
    pub(crate) worker_id: &'a str,
    pub(crate) run_at: Option<DateTime<Utc>>,
}

impl AttemptTrace {
    /// An attempt a worker runs: its span is `pgq.job`, at INFO.
    pub(crate) fn start(job: Traced<'_>) -> Self {
        let span = tracing::info_span!(
            "pgq.job",
            // The job's own fields first: a log line shows fields in this order.
            job.id = %job.id,
            job.task = job.task,
            job.attempt = job.attempt,
            worker.id = job.worker_id,
            messaging.system = "pgq",
            messaging.operation.type = "process",
            messaging.destination.name = job.queue,
            otel.name = %format_args!("process {}", job.queue),
            otel.kind = "consumer",
            job.outcome = Empty,
        );
        // `run_at` is the database's clock, now this host's: a job picked up within the
        // hosts' skew of its `run_at` (an idle worker takes it in a millisecond or two) may look
        // started before it was due, and counts as having waited nothing rather than not at all.
        let waited = job
            .run_at
            .map(|run_at| (Utc::now() - run_at).to_std().unwrap_or_default());
        Self {
            span,
            queue: Some(job.queue.to_owned()),
            began: Instant::now(),
            waited,
            returned: OnceLock::new(),
            retry_at: OnceLock::new(),
        }
    }

    /// An attempt outside a worker (a handler unit test): no span, nothing reported.
    pub(crate) fn none() -> Self {
        Self {
            span: Span::none(),
            queue: None,
            began: Instant::now(),
            waited: None,
            returned: OnceLock::new(),
            retry_at: OnceLock::new(),
        }
    }

    /// The span the handler runs in.
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    pub(crate) fn handler_returned(&self) {
        let _ = self.returned.set(Instant::now());
    }

    pub(crate) fn retries_at(&self, at: DateTime<Utc>) {
        let _ = self.retry_at.set(at);
    }

    fn ran_for(&self) -> Duration {
        let end = self.returned.get().copied().unwrap_or_else(Instant::now);
        end.saturating_duration_since(self.began)
    }

    /// Records the outcome on the span, writes the attempt's one log line inside it, and counts
    /// it. Only failures, retries and lost attempts log above DEBUG.
    pub(crate) fn ended(&self, task: &str, outcome: JobOutcome, error: Option<&str>) {
        let Some(queue) = &self.queue else {
            return;
        };
        let name = outcome_name(outcome);
        self.span.record("job.outcome", name);
        let ran_for = self.ran_for();
        let _entered = self.span.enter();
        let ran_ms = ran_for.as_secs_f64() * 1000.0;
        let waited_ms = self.waited.map(|waited| waited.as_secs_f64() * 1000.0);
        match outcome {
            JobOutcome::Completed => {
                tracing::debug!(waited_ms, ran_ms, "job completed");
            }
            JobOutcome::Retrying => {
                let retry_at = self.retry_at.get().map(|at| at.to_rfc3339());
                tracing::warn!(
                    error,
                    retry_at,
                    ran_ms,
                    "attempt failed; the job will retry"
                );
            }
            JobOutcome::Failed => {
                tracing::error!(error, ran_ms, "job failed for good");
            }
            JobOutcome::Snoozed => {
                let retry_at = self.retry_at.get().map(|at| at.to_rfc3339());
                tracing::debug!(retry_at, "job snoozed");
            }
            JobOutcome::Cancelled => {
                tracing::info!(error, "job cancelled while it ran");
            }
            JobOutcome::Released => {
                tracing::warn!("job released at shutdown; it runs again");
            }
            JobOutcome::LeaseLost => {
                tracing::warn!("lease lost: another attempt owns the job; its result was dropped");
            }
            JobOutcome::Unrecorded => {
                tracing::error!(
                    "could not record the attempt's outcome; the job runs again when its lease runs out"
                );
            }
        }
        metric::attempt_ended(task, queue, name, self.waited, ran_for);
    }
}

/// The outcome as logs and metrics spell it.
pub(crate) fn outcome_name(outcome: JobOutcome) -> &'static str {
    match outcome {
        JobOutcome::Completed => "completed",
        JobOutcome::Retrying => "retried",
        JobOutcome::Failed => "failed",
        JobOutcome::Snoozed => "snoozed",
        JobOutcome::Cancelled => "cancelled",
        JobOutcome::Released => "released",
        JobOutcome::LeaseLost => "lease_lost",
        JobOutcome::Unrecorded => "unrecorded",
    }
}

//! pgq's metrics, through the `metrics` facade when the `metrics` feature is on (the
//! application installs the recorder and exporter it likes); nothing at all without it. Every
//! name starts `pgq_`; docs/observability.md lists them.

use std::time::Duration;

/// Jobs enqueued: `pgq_jobs_enqueued_total{task, queue}`.
pub(crate) fn enqueued(task: &str, queue: &str, count: u64) {
    #[cfg(feature = "metrics")]
    if count > 0 {
        attempts::handles(task, queue).enqueued.increment(count);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (task, queue, count);
}

/// An attempt ended: `pgq_attempts_total{task, queue, outcome}`, and how long its job waited
/// past its `run_at` (`pgq_job_wait_seconds`) and its handler ran (`pgq_job_run_seconds`).
pub(crate) fn attempt_ended(
    task: &str,
    queue: &str,
    outcome: &'static str,
    waited: Option<Duration>,
    ran_for: Duration,
) {
    #[cfg(feature = "metrics")]
    attempts::ended(task, queue, outcome, waited, ran_for);
    #[cfg(not(feature = "metrics"))]
    let _ = (task, queue, outcome, waited, ran_for);
}

/// The handles of each task and queue's metrics, registered once: a handle costs
/// nothing to look up again, where naming a metric builds its key and finds it in the
/// recorder's registry on every call.
#[cfg(feature = "metrics")]
mod attempts {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    use std::time::Duration;

    use metrics::{Counter, Histogram};

    pub(super) struct Handles {
        pub(super) enqueued: Counter,
        labels: [(&'static str, String); 2],
        outcomes: Mutex<HashMap<&'static str, Counter>>,
        wait: Histogram,
        run: Histogram,
    }

    type ByQueue = HashMap<String, Arc<Handles>>;

    pub(super) fn handles(task: &str, queue: &str) -> Arc<Handles> {
        static BY_TASK: OnceLock<Mutex<HashMap<String, ByQueue>>> = OnceLock::new();
        let mut by_task = BY_TASK
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(handles) = by_task.get(task).and_then(|by_queue| by_queue.get(queue)) {
            return handles.clone();
        }
        let labels = [("task", task.to_owned()), ("queue", queue.to_owned())];
        let handles = Arc::new(Handles {
            enqueued: metrics::counter!("pgq_jobs_enqueued_total", &labels),
            wait: metrics::histogram!("pgq_job_wait_seconds", &labels),
            run: metrics::histogram!("pgq_job_run_seconds", &labels),
            labels,
            outcomes: Mutex::default(),
        });
        by_task
            .entry(task.to_owned())
            .or_default()
            .insert(queue.to_owned(), handles.clone());
        handles
    }

    pub(super) fn ended(
        task: &str,
        queue: &str,
        outcome: &'static str,
        waited: Option<Duration>,
        ran_for: Duration,
    ) {
        let handles = handles(task, queue);
        {
            let mut outcomes = handles
                .outcomes
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            outcomes
                .entry(outcome)
                .or_insert_with(|| {
                    let [(task_key, task), (queue_key, queue)] = handles.labels.clone();
                    metrics::counter!(
                        "pgq_attempts_total",
                        task_key => task,
                        queue_key => queue,
                        "outcome" => outcome
                    )
                })
                .increment(1);
        }
        if let Some(waited) = waited {
            handles.wait.record(waited.as_secs_f64());
        }
        handles.run.record(ran_for.as_secs_f64());
    }
}

/// Jobs whose lease ran out, returned by the rescuer: `pgq_jobs_rescued_total{queue}`; and
/// jobs of dead workers released: `pgq_jobs_released_total{queue}`.
pub(crate) fn rescued(queue: &str, count: u64, of_dead_worker: bool) {
    #[cfg(feature = "metrics")]
    if count > 0 {
        let name = if of_dead_worker {
            "pgq_jobs_released_total"
        } else {
            "pgq_jobs_rescued_total"
        };
        metrics::counter!(name, "queue" => queue.to_owned()).increment(count);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, count, of_dead_worker);
}

/// Jobs this worker process holds: `pgq_worker_held_jobs`.
pub(crate) fn held(held: usize) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("pgq_worker_held_jobs").set(held as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = held;
}

/// What the table holds, from the database, at each rescue: `pgq_queue_jobs{queue, status}`
/// (`due`, `scheduled`, `claimed`, `running`) and `pgq_queue_oldest_due_seconds{queue}`.
pub(crate) fn queue_depth(queue: &str, counts: &[(&'static str, u64)], oldest_due: Duration) {
    #[cfg(feature = "metrics")]
    {
        for (status, count) in counts {
            metrics::gauge!("pgq_queue_jobs", "queue" => queue.to_owned(), "status" => *status)
                .set(*count as f64);
        }
        metrics::gauge!("pgq_queue_oldest_due_seconds", "queue" => queue.to_owned())
            .set(oldest_due.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, counts, oldest_due);
}

/// Whether metrics are emitted at all: without the feature, nothing needs gathering for them.
pub(crate) const ENABLED: bool = cfg!(feature = "metrics");

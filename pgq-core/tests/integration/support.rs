//! Waiting on worker events and job rows, always with a time limit.

use std::collections::HashMap;
use std::time::Duration;

use std::sync::Arc;

use pgq_core::{JobContext, JobId, JobOutcome, WorkerEvent, WorkerHandle};
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{Semaphore, broadcast};

pub(crate) const LIMIT: Duration = Duration::from_secs(20);

/// The next `JobFinished` for `id`, with its outcome and error.
pub(crate) async fn finished(
    events: &mut broadcast::Receiver<WorkerEvent>,
    id: JobId,
) -> (JobOutcome, Option<String>) {
    let wait = async {
        loop {
            if let WorkerEvent::JobFinished {
                id: finished,
                outcome,
                error,
                ..
            } = events.recv().await.expect("worker events ended")
                && finished == id
            {
                return (outcome, error);
            }
        }
    };
    tokio::time::timeout(LIMIT, wait)
        .await
        .unwrap_or_else(|_| panic!("job {id} did not finish within {LIMIT:?}"))
}

/// The first `count` attempts of `id` to finish, as (attempt, outcome, error), in the order
/// they were reported.
pub(crate) async fn attempts_finished(
    events: &mut broadcast::Receiver<WorkerEvent>,
    id: JobId,
    count: usize,
) -> Vec<(i32, JobOutcome, Option<String>)> {
    let wait = async {
        let mut reports = Vec::with_capacity(count);
        while reports.len() < count {
            if let WorkerEvent::JobFinished {
                id: finished,
                attempt,
                outcome,
                error,
                ..
            } = events.recv().await.expect("worker events ended")
                && finished == id
            {
                reports.push((attempt, outcome, error));
            }
        }
        reports
    };
    tokio::time::timeout(LIMIT, wait)
        .await
        .unwrap_or_else(|_| panic!("{count} attempts of job {id} did not finish within {LIMIT:?}"))
}

/// The outcomes of all of `ids`, in whatever order they finish.
pub(crate) async fn all_finished(
    events: &mut broadcast::Receiver<WorkerEvent>,
    ids: &[JobId],
) -> HashMap<JobId, JobOutcome> {
    let wait = async {
        let mut outcomes = HashMap::new();
        while outcomes.len() < ids.len() {
            if let WorkerEvent::JobFinished { id, outcome, .. } =
                events.recv().await.expect("worker events ended")
                && ids.contains(&id)
            {
                outcomes.insert(id, outcome);
            }
        }
        outcomes
    };
    tokio::time::timeout(LIMIT, wait)
        .await
        .unwrap_or_else(|_| panic!("jobs {ids:?} did not all finish within {LIMIT:?}"))
}

/// The next event matching `wanted`.
pub(crate) async fn event(
    events: &mut broadcast::Receiver<WorkerEvent>,
    wanted: impl Fn(&WorkerEvent) -> bool,
) -> WorkerEvent {
    let wait = async {
        loop {
            let event = events.recv().await.expect("worker events ended");
            if wanted(&event) {
                return event;
            }
        }
    };
    tokio::time::timeout(LIMIT, wait)
        .await
        .expect("event did not arrive in time")
}

/// Terminates the worker's listening connection and waits until it has listened again.
pub(crate) async fn cut_listener(pool: &PgPool, events: &mut broadcast::Receiver<WorkerEvent>) {
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'pgq-listen'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(killed, vec![true]);
    event(events, |e| matches!(e, WorkerEvent::ListenerLost)).await;
    event(events, |e| matches!(e, WorkerEvent::ListenerConnected)).await;
}

/// Waits until the worker's completed count reaches `n`.
pub(crate) async fn completed(handle: &WorkerHandle, n: u64) {
    let mut stats = handle.stats();
    tokio::time::timeout(LIMIT, stats.wait_for(|s| s.completed >= n))
        .await
        .unwrap_or_else(|_| panic!("{n} jobs did not complete within {LIMIT:?}"))
        .unwrap();
}

/// Waits for the test's permit on the worker's `Arc<Semaphore>` state: a handler that holds its
/// slot until the test lets it go.
pub(crate) async fn pass_gate(ctx: &JobContext) {
    let gate = ctx
        .state::<Arc<Semaphore>>()
        .expect("an Arc<Semaphore> gate in the worker's state");
    gate.acquire().await.expect("gate open").forget();
}

/// How many notifications arrived on `channel` so far: sends a marker and counts until it.
pub(crate) async fn notifications_so_far(
    pool: &PgPool,
    listener: &mut PgListener,
    channel: &str,
) -> usize {
    sqlx::query("SELECT pg_notify($1, 'marker')")
        .bind(channel)
        .execute(pool)
        .await
        .unwrap();
    let mut count = 0;
    loop {
        let notification = tokio::time::timeout(LIMIT, listener.recv())
            .await
            .expect("the marker arrives")
            .unwrap();
        if notification.payload() == "marker" {
            return count;
        }
        count += 1;
    }
}

/// Polls `check` until it yields a value, for state only the database can tell.
pub(crate) async fn eventually<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let poll = async {
        loop {
            if let Some(value) = check().await {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(LIMIT, poll)
        .await
        .unwrap_or_else(|_| panic!("not within {LIMIT:?}"))
}

/// A runtime of its own for a worker whose handlers block their threads: they stall its
/// timers and network, as they would an application's, while the test's runtime carries on.
pub(crate) fn application_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Starts `worker` on `runtime`: its dispatchers and handlers run there.
pub(crate) async fn start_on(
    runtime: &tokio::runtime::Runtime,
    worker: pgq_core::Worker,
) -> WorkerHandle {
    runtime
        .spawn(async move { worker.start() })
        .await
        .expect("the worker starts")
}

/// Waits until job `id` is held (claimed or running) by a worker.
pub(crate) async fn held(pool: &PgPool, id: JobId) {
    eventually(|| async {
        let held: bool = sqlx::query_scalar("SELECT phase = 1 FROM pgq.jobs WHERE id = $1")
            .bind(id.get())
            .fetch_one(pool)
            .await
            .unwrap();
        held.then_some(())
    })
    .await
}

/// Moves pending job `id` to `status` by hand, through moves the database allows: held by a
/// worker `"elsewhere"` with an hour of lease, or finished (failed with `error`).
pub(crate) async fn put_in(pool: &PgPool, id: JobId, status: pgq_core::JobStatus, error: &str) {
    use pgq_core::JobStatus::*;
    let hold = "UPDATE pgq.jobs SET status = $2, phase = 1, attempts = 1, worker_id = 'elsewhere',
                       claimed_at = now(), started_at = now(),
                       lease_expires_at = now() + interval '1 hour'
                WHERE id = $1";
    let finish = "UPDATE pgq.jobs SET status = $2, phase = 2, completed_at = now(),
                         lease_expires_at = NULL,
                         last_error = CASE WHEN $2 = 'failed' THEN $3 END
                  WHERE id = $1";
    let steps: &[(&'static str, &str)] = match status {
        Pending => &[],
        Claimed => &[(hold, "claimed")],
        Running => &[(hold, "running")],
        Completed => &[(hold, "running"), (finish, "completed")],
        Failed => &[(hold, "running"), (finish, "failed")],
        Cancelled => &[(finish, "cancelled")],
    };
    for (statement, to) in steps {
        sqlx::query(*statement)
            .bind(id.get())
            .bind(*to)
            .bind(error)
            .execute(pool)
            .await
            .unwrap();
    }
}

/// A client of `db` through a PgBouncer of its own in transaction mode, as a deployment behind
/// a pooler has it; the pooler runs as long as the returned handle lives.
pub(crate) async fn behind_pgbouncer(
    db: &pgq_testkit::TestDatabase,
) -> (pgq_test_support::PgBouncer, pgq_core::Client) {
    let server = db.connect_options();
    let upstream = format!("{}:{}", server.get_host(), server.get_port())
        .parse()
        .expect("a socket address");
    let bouncer = pgq_test_support::PgBouncer::new(upstream).await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(5)
        .test_before_acquire(false)
        .connect_with(bouncer.connect_options(&server))
        .await
        .unwrap();
    (bouncer, pgq_core::Client::new(pool).behind_pooler())
}

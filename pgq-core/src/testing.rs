//! What `pgq-testkit` builds on: a database-free attempt whose context records progress, events
//! and enqueued tasks instead of writing them, run the way a worker runs one; and the test
//! databases' own statements. Doc-hidden: use them through `pgq-testkit`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;
use sqlx::postgres::PgConnectOptions;

use crate::attempt::{AttemptState, Backend, Recording};
use crate::attempt_trace::AttemptTrace;
use crate::client::Client;
use crate::context::JobContext;
use crate::error::Result;
use crate::handler::{self, Handler};
use crate::job_id::JobId;
use crate::state::StateMap;
use crate::store;
use crate::task_error::TaskError;

/// One recorded attempt; use it through `pgq_testkit::TestContext`.
#[doc(hidden)]
#[derive(Debug)]
pub struct TestAttempt {
    attempt: Arc<AttemptState>,
    state: StateMap,
}

impl TestAttempt {
    /// An attempt of job `id`, numbered `attempt`.
    pub fn new(id: i64, attempt: i32) -> Self {
        Self {
            attempt: AttemptState::new(
                JobId::from(id),
                attempt,
                Backend::Recording(Mutex::new(Recording::default())),
                AttemptTrace::none(),
            ),
            state: StateMap::default(),
        }
    }

    /// Starts over as attempt `attempt` of job `id`, keeping the state values and a cancel
    /// already asked for.
    pub fn renumber(&mut self, id: i64, attempt: i32) {
        let cancelled = self.attempt.is_cancel_requested();
        self.attempt = AttemptState::new(
            JobId::from(id),
            attempt,
            Backend::Recording(Mutex::new(Recording::default())),
            AttemptTrace::none(),
        );
        if cancelled {
            self.attempt.request_cancel();
        }
    }

    /// A switch that fires `ctx.cancelled()` from anywhere, also while the handler runs.
    pub fn cancel_switch(&self) -> CancelSwitch {
        CancelSwitch(self.attempt.clone())
    }

    /// Makes `value` available through `ctx.state::<S>()`.
    pub fn insert_state<S: Send + Sync + 'static>(&mut self, value: S) {
        self.state.insert(value);
    }

    /// A context for the handler.
    pub fn context(&self, task: &str, queue: &str, unique_key: Option<String>) -> JobContext {
        JobContext::new(
            task.to_owned(),
            queue.to_owned(),
            unique_key,
            Arc::new(self.state.clone()),
            self.attempt.clone(),
        )
    }

    /// Runs `task`'s handler as a worker does: from its JSON form, within its `timeout`, with
    /// its backoff applied to a plain retry. A panic in the handler propagates.
    pub async fn run<T: Handler>(&self, task: T) -> std::result::Result<(), TaskError> {
        let json = serde_json::to_string(&task)
            .unwrap_or_else(|err| panic!("task {:?} cannot be serialized: {err}", T::NAME));
        self.run_json::<T>(&json).await
    }

    /// Runs the handler of `T` on a stored payload, as a worker would: a payload that does not
    /// decode is the same failed attempt it would be in production.
    pub async fn run_json<T: Handler>(&self, json: &str) -> std::result::Result<(), TaskError> {
        let unique_key = serde_json::from_str::<T>(json)
            .ok()
            .and_then(|task| task.unique_key());
        let ctx = self.context(T::NAME, T::QUEUE, unique_key);
        let payload = RawValue::from_string(json.to_owned())
            .map_err(|err| TaskError::retry(format_args!("payload is not JSON: {err}")))?;
        handler::run::<T>(payload, ctx).await
    }

    /// Fires `ctx.cancelled()`, as `Client::cancel` does for a running job.
    pub fn cancel(&self) {
        self.attempt.request_cancel();
    }

    /// What the handler recorded so far.
    pub fn recording(&self) -> Recording {
        let mut recorded = None;
        self.attempt.record(|r| recorded = Some(r.clone()));
        recorded.unwrap_or_default()
    }

    /// Whether the handler called `ctx.complete_in`.
    pub fn completed_in_tx(&self) -> bool {
        self.attempt.completed_in_tx()
    }
}

/// Fires a test attempt's `ctx.cancelled()`.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct CancelSwitch(Arc<AttemptState>);

impl CancelSwitch {
    /// Cancels the attempt.
    pub fn cancel(&self) {
        self.0.request_cancel();
    }
}

/// Creates the database `name` on the server of `server`: letters, digits and `_` only.
pub async fn create_database(server: &PgConnectOptions, name: &str) -> Result<()> {
    store::testing::create_database(server, name).await
}

/// Drops the database `name`, ending the connections still open to it.
pub async fn drop_database(server: &PgConnectOptions, name: &str) -> Result<()> {
    store::testing::drop_database(server, name).await
}

/// The databases whose name starts with `prefix` that no session is connected to.
pub async fn idle_databases(server: &PgConnectOptions, prefix: &str) -> Result<Vec<String>> {
    store::testing::idle_databases(server, prefix).await
}

/// Drops the database `name` unless a session is connected to it.
pub async fn drop_idle_database(server: &PgConnectOptions, name: &str) -> Result<()> {
    store::testing::drop_idle_database(server, name).await
}

/// Moves every unfinished job's run time and lease `by` earlier.
pub async fn advance(client: &Client, by: Duration) -> Result<()> {
    store::testing::advance(client.store(), by).await
}

/// Makes one pending job due now, waking idle workers of its queue. A job that is missing is
/// [`Error::JobNotFound`](crate::Error::JobNotFound); one that is not pending is
/// [`Error::JobState`](crate::Error::JobState).
pub async fn make_due(client: &Client, id: JobId) -> Result<()> {
    store::testing::make_due(client.store(), id).await
}

/// Makes every pending job of `queues` due now; returns how many were scheduled later.
pub async fn make_queues_due(client: &Client, queues: &[String]) -> Result<u64> {
    store::testing::make_queues_due(client.store(), queues).await
}

/// For each of `queues`: its name, whether any job is in it, and up to five of its due jobs
/// whose task is not in `runnable` (no handler linked to run them), as `job ID (TASK)`.
pub async fn leftovers(
    client: &Client,
    queues: &[String],
    runnable: &[&str],
) -> Result<Vec<(String, bool, Vec<String>)>> {
    store::testing::leftovers(client.store(), queues, runnable).await
}

/// The id and payload of every pending job of `task`, oldest id first.
pub async fn pending(client: &Client, task: &str) -> Result<Vec<(JobId, serde_json::Value)>> {
    store::testing::pending(client.store(), task).await
}

/// Every job of `task`, whatever its status, oldest id first, as `conn` sees them; pgq's
/// tables in the default schema.
pub async fn jobs_of_task(
    conn: &mut sqlx::PgConnection,
    task: &str,
) -> Result<Vec<crate::job::Job>> {
    store::testing::of_task(conn, crate::schema::Schema::default().name(), task).await
}

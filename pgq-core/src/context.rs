//! [`JobContext`]: what a handler knows about the job it runs.

use std::sync::Arc;

use crate::job_id::JobId;
use crate::state::StateMap;

/// The job a handler is running: its identity, attempt and the services around it.
#[derive(Debug)]
pub struct JobContext {
    id: JobId,
    attempt: i32,
    task: String,
    queue: String,
    unique_key: Option<String>,
    state: Arc<StateMap>,
}

impl JobContext {
    pub(crate) fn new(
        id: JobId,
        attempt: i32,
        task: String,
        queue: String,
        unique_key: Option<String>,
        state: Arc<StateMap>,
    ) -> Self {
        Self {
            id,
            attempt,
            task,
            queue,
            unique_key,
            state,
        }
    }

    /// The value of type `S` given to [`WorkerBuilder::state`](crate::WorkerBuilder::state):
    /// a pool, an HTTP client, configuration.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Charge { cents: i64 }
    /// struct Billing { api_key: String }
    ///
    /// #[async_trait]
    /// impl Handler for Charge {
    ///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
    ///         let billing = ctx.state::<Billing>().ok_or_else(|| TaskError::fail("no Billing state"))?;
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn state<S: Send + Sync + 'static>(&self) -> Option<&S> {
        self.state.get::<S>()
    }

    /// The job's id.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// The attempt being run, starting at 1.
    pub fn attempt(&self) -> i32 {
        self.attempt
    }

    /// The task name stored in the row.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// The queue the job was claimed from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// A key that is the same for every attempt of this job, for deduplicating side effects:
    /// the job's unique key when it has one, otherwise `pgq:job:<id>`.
    pub fn idempotency_key(&self) -> String {
        match &self.unique_key {
            Some(key) => format!("{}:{key}", self.task),
            None => format!("pgq:job:{}", self.id),
        }
    }
}

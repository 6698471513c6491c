//! [`JobContext`]: what a handler knows about the job it runs.

use crate::job_id::JobId;

/// The job a handler is running: its identity, attempt and the services around it.
#[derive(Debug)]
pub struct JobContext {
    id: JobId,
    attempt: i32,
    task: String,
    queue: String,
    unique_key: Option<String>,
}

impl JobContext {
    #[doc(hidden)]
    pub fn new(
        id: JobId,
        attempt: i32,
        task: String,
        queue: String,
        unique_key: Option<String>,
    ) -> Self {
        Self {
            id,
            attempt,
            task,
            queue,
            unique_key,
        }
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

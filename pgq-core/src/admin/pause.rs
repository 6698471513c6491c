//! Pausing and resuming a queue, for every worker at once and until resumed.

use crate::client::Client;
use crate::error::Result;
use crate::queue;
use crate::store;

impl Client {
    /// Pauses `queue` for every worker: within a second each one stops claiming from it (a
    /// notification tells listening workers at once; every worker also re-reads the flag at
    /// least once a second, which is how workers behind a pooler learn of it). Jobs already
    /// running finish; the queue still accepts enqueues; workers started later wait. The pause
    /// is kept in the database (`pgq.queues`) until [`resume_queue`](Self::resume_queue).
    /// Pausing a paused queue changes nothing. A name outside the queue rules is an
    /// [`Error::InvalidQueue`](crate::Error::InvalidQueue).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // The mail provider is down: stop sending, keep accepting.
    /// client.pause_queue("email").await?;
    /// // ... later
    /// client.resume_queue("email").await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause_queue(&self, queue: &str) -> Result<()> {
        queue::validate(queue)?;
        store::queues::pause(self.store(), queue).await
    }

    /// Resumes a paused queue: every worker serving it claims from it again within a second.
    /// Resuming a queue that is not paused changes nothing.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// client.resume_queue("email").await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume_queue(&self, queue: &str) -> Result<()> {
        queue::validate(queue)?;
        store::queues::resume(self.store(), queue).await
    }
}

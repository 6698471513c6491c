//! A queue's cluster-wide concurrency and rate limits, kept in the database so that they change
//! without a deploy.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::queue;
use crate::rate_limit::RateLimit;
use crate::store;

impl Client {
    /// Lets at most `limit` handlers of `queue` run at once across all workers (`None`: no
    /// limit), whatever each worker's concurrency. Enforced by the database: each worker leases
    /// seats of the limit and runs no more of the queue's handlers than its seats, and the live
    /// leases together never hold more seats than the limit (see docs/scheduling.md). Every
    /// worker serving the queue applies a new limit within a second, as it does a pause; a lower
    /// limit lets running jobs finish and starts none until the queue is under it. The claims
    /// of a limited queue cost what any claim costs; queues without a limit pay nothing for it.
    /// A limit of 0 is refused with [`Error::InvalidQueue`] (pause the queue instead), as is
    /// one above `i32::MAX`, the most the database stores.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// // The partner's API takes five calls at once, from the whole fleet.
    /// client.set_queue_limit("partner-api", Some(5)).await?;
    /// // ... and later, no limit again.
    /// client.set_queue_limit("partner-api", None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_queue_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        queue::validate(queue)?;
        let limit = match limit {
            Some(0) => {
                return Err(Error::invalid_queue(
                    queue,
                    "a concurrency limit is at least 1; pause the queue to run none",
                ));
            }
            Some(limit) => Some(i32::try_from(limit).map_err(|_| {
                Error::invalid_queue(queue, "a concurrency limit is at most 2147483647")
            })?),
            None => None,
        };
        store::queues::set_limit(self.store(), queue, limit).await
    }

    /// Starts `rate.jobs()` jobs of `queue` per `rate.period()` across all workers, in bursts of
    /// up to `rate.jobs()` (`None`: no rate limit; [`RateLimit::new`] is `None` for a rate it
    /// refuses, so check it before passing it on). A token bucket in the queue's row, refilled by the time elapsed,
    /// is taken from in the claim statement, under the queue's row lock; a worker that finds it
    /// empty sleeps until the next token is due, without polling meanwhile. Setting a rate fills
    /// the bucket. Workers apply it within a second, as they do a pause.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// use pgq_core::RateLimit;
    /// // The SMS provider takes 20 messages a second from the whole fleet.
    /// let rate = RateLimit::new(20, std::time::Duration::from_secs(1)).expect("a valid rate");
    /// client.set_queue_rate("sms", Some(rate)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_queue_rate(&self, queue: &str, rate: Option<RateLimit>) -> Result<()> {
        queue::validate(queue)?;
        let rate = rate.map(|rate| {
            (
                i32::try_from(rate.jobs()).unwrap_or(i32::MAX),
                rate.period_ms(),
            )
        });
        store::queues::set_rate(self.store(), queue, rate).await
    }
}

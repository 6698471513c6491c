//! The [`Task`] trait: a payload type that can be stored as a job.

use crate::defaults;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A payload type that pgq can store as a job and route back to its handler.
///
/// Implement it with `#[derive(Task)]`, which also registers the type so that workers and
/// registries find it without a registration call. The constants carry the defaults that
/// `#[task(...)]` sets; [`EnqueueOptions`](crate::EnqueueOptions) overrides them per job.
///
/// ```
/// use pgq_core::Task;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Task)]
/// #[task(queue = "email", priority = 150, max_attempts = 5, unique_key = "welcome:{user_id}")]
/// struct SendWelcome {
///     user_id: i64,
///     email: String,
/// }
///
/// assert_eq!(SendWelcome::NAME, "SendWelcome");
/// assert_eq!(SendWelcome::QUEUE, "email");
/// let task = SendWelcome { user_id: 7, email: "a@example.com".into() };
/// assert_eq!(task.unique_key().as_deref(), Some("welcome:7"));
/// ```
pub trait Task: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The stable name stored in each job row and used to find the handler (`name`).
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(name = "billing.charge")]
    /// struct Charge { invoice_id: i64 }
    ///
    /// assert_eq!(Charge::NAME, "billing.charge"); // renaming the type keeps its jobs
    /// ```
    const NAME: &'static str;
    /// The queue jobs of this task go to (`queue`).
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(queue = "email")]
    /// struct SendWelcome { user_id: i64 }
    ///
    /// assert_eq!(SendWelcome::QUEUE, "email");
    /// ```
    const QUEUE: &'static str = defaults::QUEUE;
    /// The priority of its jobs, from 0 to 1000; higher runs first (`priority`).
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(priority = 150)]
    /// struct ResetPassword { user_id: i64 }
    ///
    /// assert_eq!(ResetPassword::PRIORITY, 150); // a user is waiting
    /// ```
    const PRIORITY: i16 = defaults::PRIORITY;
    /// How many attempts a job gets before it is `failed` (`max_attempts`).
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(max_attempts = 5)]
    /// struct CallPartner { order_id: i64 }
    ///
    /// assert_eq!(CallPartner::MAX_ATTEMPTS, 5);
    /// ```
    const MAX_ATTEMPTS: i32 = defaults::MAX_ATTEMPTS;
    /// How long one attempt may run before it is stopped and counted as failed (`timeout`).
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(timeout = "30s")]
    /// struct FetchFeed { url: String }
    ///
    /// assert_eq!(FetchFeed::TIMEOUT, Some(std::time::Duration::from_secs(30)));
    /// ```
    const TIMEOUT: Option<Duration> = None;
    /// How long a claim holds a job of this task before another worker may rescue it, when the
    /// worker's lease does not suit (`lease`). The worker renews it while the handler runs.
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(lease = "5m")]
    /// struct RenderVideo { video_id: i64 }
    ///
    /// assert_eq!(RenderVideo::LEASE, Some(std::time::Duration::from_secs(300)));
    /// ```
    const LEASE: Option<Duration> = None;

    /// The key that makes this job unique among the task's active jobs (`unique_key`).
    ///
    /// ```
    /// use pgq_core::Task;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(unique_key = "sync:{account}")]
    /// struct SyncAccount { account: String, reason: String }
    ///
    /// let task = SyncAccount { account: "acme".into(), reason: "webhook".into() };
    /// assert_eq!(task.unique_key().as_deref(), Some("sync:acme"));
    /// ```
    fn unique_key(&self) -> Option<String> {
        None
    }

    /// How many jobs with one [`concurrency_key`](Task::concurrency_key) may be held (claimed
    /// or running) at once in their queue, across all workers (`concurrency`, 1 to 1000);
    /// `None` for a task without a key.
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(concurrency_key = "{customer_id}", concurrency = 2)]
    /// struct Export { customer_id: i64 }
    ///
    /// assert_eq!(Export::CONCURRENCY, Some(2));
    /// ```
    const CONCURRENCY: Option<u32> = None;

    /// The key whose held jobs [`CONCURRENCY`](Task::CONCURRENCY) bounds (`concurrency_key`):
    /// one tenant's jobs cannot take every worker.
    ///
    /// ```
    /// # use pgq_core::Task;
    /// #[derive(serde::Serialize, serde::Deserialize, Task)]
    /// #[task(concurrency_key = "tenant:{customer_id}", concurrency = 1)]
    /// struct Export { customer_id: i64, month: u32 }
    ///
    /// let task = Export { customer_id: 7, month: 3 };
    /// assert_eq!(task.concurrency_key().as_deref(), Some("tenant:7"));
    /// ```
    fn concurrency_key(&self) -> Option<String> {
        None
    }
}

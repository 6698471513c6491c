//! The [`Task`] trait: a payload type that can be stored as a job.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The queue a task goes to when `#[task(queue = ..)]` is not given.
///
/// ```
/// # use pgq_core::Task;
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// struct Ping;
///
/// assert_eq!(Ping::QUEUE, pgq_core::DEFAULT_QUEUE); // "default"
/// ```
pub const DEFAULT_QUEUE: &str = "default";
/// The priority of a task when `#[task(priority = ..)]` is not given. Higher runs first.
///
/// ```
/// # use pgq_core::Task;
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// #[task(priority = 30)]
/// struct Backfill { day: u32 }
///
/// assert!(Backfill::PRIORITY < pgq_core::DEFAULT_PRIORITY); // runs after normal work (100)
/// ```
pub const DEFAULT_PRIORITY: i16 = 100;
/// How many attempts a task gets when `#[task(max_attempts = ..)]` is not given.
///
/// ```
/// # use pgq_core::Task;
/// #[derive(serde::Serialize, serde::Deserialize, Task)]
/// struct Ping;
///
/// assert_eq!(Ping::MAX_ATTEMPTS, pgq_core::DEFAULT_MAX_ATTEMPTS); // 20
/// ```
pub const DEFAULT_MAX_ATTEMPTS: i32 = 20;
/// The lowest priority a job may have.
///
/// ```
/// use pgq_core::{EnqueueOptions, MIN_PRIORITY};
///
/// // Run this one only when nothing else is waiting.
/// let options = EnqueueOptions::default().priority(MIN_PRIORITY);
/// assert_eq!(options.priority, Some(0));
/// ```
pub const MIN_PRIORITY: i16 = 0;
/// The highest priority a job may have; larger values are refused with
/// [`Error::InvalidOption`](crate::Error::InvalidOption).
///
/// ```
/// use pgq_core::{EnqueueOptions, MAX_PRIORITY};
///
/// // Ahead of everything else in its queue.
/// let options = EnqueueOptions::default().priority(MAX_PRIORITY);
/// assert_eq!(options.priority, Some(1000));
/// ```
pub const MAX_PRIORITY: i16 = 1000;
/// The largest `max_attempts` a job may have; larger values are refused with
/// [`Error::InvalidOption`](crate::Error::InvalidOption).
///
/// ```
/// use pgq_core::{EnqueueOptions, MAX_MAX_ATTEMPTS};
///
/// let keep_trying = EnqueueOptions::default().max_attempts(MAX_MAX_ATTEMPTS);
/// assert_eq!(keep_trying.max_attempts, Some(1000));
/// ```
pub const MAX_MAX_ATTEMPTS: i32 = 1000;

/// The longest lease a task or worker may set; `#[task(lease = ..)]` checks the same limit.
///
/// ```
/// assert_eq!(pgq_core::MAX_LEASE, std::time::Duration::from_secs(24 * 3600));
/// ```
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

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
    const QUEUE: &'static str = DEFAULT_QUEUE;
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
    const PRIORITY: i16 = DEFAULT_PRIORITY;
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
    const MAX_ATTEMPTS: i32 = DEFAULT_MAX_ATTEMPTS;
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
}

//! The [`Task`] trait: a payload type that can be stored as a job.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The queue a task goes to when `#[task(queue = ..)]` is not given.
pub const DEFAULT_QUEUE: &str = "default";
/// The priority of a task when `#[task(priority = ..)]` is not given. Higher runs first.
pub const DEFAULT_PRIORITY: i16 = 100;
/// How many attempts a task gets when `#[task(max_attempts = ..)]` is not given.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 20;
/// The lowest priority a job may have.
pub const MIN_PRIORITY: i16 = 0;
/// The highest priority a job may have.
pub const MAX_PRIORITY: i16 = 1000;
/// The largest `max_attempts` a job may have.
pub const MAX_MAX_ATTEMPTS: i32 = 1000;

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
    const NAME: &'static str;
    /// The queue jobs of this task go to (`queue`).
    const QUEUE: &'static str = DEFAULT_QUEUE;
    /// The priority of its jobs, from 0 to 1000; higher runs first (`priority`).
    const PRIORITY: i16 = DEFAULT_PRIORITY;
    /// How many attempts a job gets before it is `failed` (`max_attempts`).
    const MAX_ATTEMPTS: i32 = DEFAULT_MAX_ATTEMPTS;
    /// How long one attempt may run before it is stopped and counted as failed (`timeout`).
    const TIMEOUT: Option<Duration> = None;
    /// How long a claim holds a job of this task before another worker may rescue it, when the
    /// worker's lease does not suit (`lease`). The worker renews it while the handler runs.
    const LEASE: Option<Duration> = None;

    /// The key that makes this job unique among the task's active jobs (`unique_key`).
    fn unique_key(&self) -> Option<String> {
        None
    }
}

//! The [`Handler`] trait and the type-erased entry point the registry keeps per task.

use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use serde_json::value::RawValue;

use crate::context::JobContext;
use crate::payload;
use crate::task::Task;
use crate::task_error::{TaskAction, TaskError};

/// Runs jobs of one task type.
///
/// Implement it with `#[async_trait]` next to the task's `#[derive(Task)]`; workers find it
/// through the registry with no registration call.
///
/// ```
/// use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Task)]
/// struct Resize { image_id: i64 }
///
/// #[async_trait]
/// impl Handler for Resize {
///     async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
///         if self.image_id < 0 {
///             return Err(TaskError::fail("no such image"));
///         }
///         Ok(())
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Handler: Task {
    /// Runs one attempt of the job. `Ok` completes it; an error says what happens next:
    /// `?` on any error retries with backoff, and [`TaskError`]'s constructors choose a delay,
    /// an immediate failure or a snooze.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct ParseFeed { body: String }
    /// #[async_trait]
    /// impl Handler for ParseFeed {
    ///     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
    ///         if self.body.is_empty() {
    ///             return Err(TaskError::fail("empty feed")); // no retry would help
    ///         }
    ///         let items: u32 = self.body.trim().parse()?; // a parse error retries with backoff
    ///         println!("{items} items");
    ///         Ok(())
    ///     }
    /// }
    /// ```
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError>;

    /// The delay before retrying after failed attempt `attempt` (starting at 1), for errors
    /// that do not choose their own. `None`, the default, uses pgq's backoff: 10 s · 2^(attempt−1),
    /// capped at 1 h, with jitter, computed by the database.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct PollPartner { order_id: i64 }
    /// #[async_trait]
    /// impl Handler for PollPartner {
    ///     # async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> { Ok(()) }
    ///     // The partner's API asks for one more minute per attempt.
    ///     fn backoff(attempt: i32) -> Option<Duration> {
    ///         Some(Duration::from_secs(60 * attempt as u64))
    ///     }
    /// }
    ///
    /// assert_eq!(PollPartner::backoff(3), Some(Duration::from_secs(180)));
    /// ```
    fn backoff(attempt: i32) -> Option<Duration> {
        let _ = attempt;
        None
    }
}

/// A boxed, sendable future of one attempt's outcome.
pub(crate) type AttemptFuture = Pin<Box<dyn Future<Output = Result<(), TaskError>> + Send>>;

/// Deserializes a payload and runs the typed handler: one per task type, kept in the registry.
#[doc(hidden)]
pub type RunFn = fn(Box<RawValue>, JobContext) -> AttemptFuture;

/// One attempt: deserialize, run within the task's timeout, and apply its backoff.
pub(crate) fn run<T: Handler>(payload: Box<RawValue>, ctx: JobContext) -> AttemptFuture {
    Box::pin(async move {
        let task: T = payload::decode(payload.get()).map_err(|err| {
            TaskError::retry(format_args!(
                "payload does not match task {:?}: {err}",
                T::NAME
            ))
        })?;
        let outcome = match T::TIMEOUT {
            Some(limit) => tokio::time::timeout(limit, task.handle(&ctx))
                .await
                .unwrap_or_else(|_| {
                    Err(TaskError::retry(format_args!("timed out after {limit:?}")))
                }),
            None => task.handle(&ctx).await,
        };
        outcome.map_err(|err| match (err.action(), T::backoff(ctx.attempt())) {
            (TaskAction::Retry, Some(delay)) => err.with_action(TaskAction::RetryAfter(delay)),
            _ => err,
        })
    })
}

/// Finds a type's handler, if it has one, without requiring one: method resolution picks
/// [`ViaHandler`] when `T: Handler` and falls back to [`ViaNoHandler`] through auto-deref.
#[doc(hidden)]
pub struct HandlerProbe<T>(PhantomData<T>);

impl<T> HandlerProbe<T> {
    #[doc(hidden)]
    pub const NEW: Self = Self(PhantomData);
}

#[doc(hidden)]
pub trait ViaHandler {
    fn run_fn(&self) -> Option<RunFn>;
}

impl<T: Handler> ViaHandler for &HandlerProbe<T> {
    fn run_fn(&self) -> Option<RunFn> {
        Some(run::<T>)
    }
}

#[doc(hidden)]
pub trait ViaNoHandler {
    fn run_fn(&self) -> Option<RunFn>;
}

impl<T> ViaNoHandler for HandlerProbe<T> {
    fn run_fn(&self) -> Option<RunFn> {
        None
    }
}

//! What a handler returns when a job did not succeed, and what should happen next.

use std::fmt;
use std::time::Duration;

use crate::limits;
use crate::text;

/// A handler's failure, carrying what pgq should do with the job next.
///
/// Any error converts into a [`TaskError::retry`] — a `std::error::Error + Send + Sync`, a
/// `Box<dyn Error + Send + Sync>`, an `anyhow::Error`, a `String` — so `?` works in handlers and
/// retries with the task's backoff, recording the error and its causes. The other constructors
/// choose a different path.
///
/// ```
/// use std::time::Duration;
/// use pgq_core::{TaskAction, TaskError};
///
/// let err = TaskError::retry_after(Duration::from_secs(30), "rate limited");
/// assert_eq!(err.action(), TaskAction::RetryAfter(Duration::from_secs(30)));
/// assert_eq!(err.message(), "rate limited");
///
/// let parse: Result<i32, _> = "x".parse::<i32>();
/// let err: TaskError = parse.unwrap_err().into();
/// assert_eq!(err.action(), TaskAction::Retry);
/// ```
pub struct TaskError {
    action: TaskAction,
    message: String,
}

/// What pgq does with a job whose handler returned a [`TaskError`].
///
/// ```
/// # use std::time::Duration;
/// use pgq_core::{TaskAction, TaskError};
///
/// let err = TaskError::snooze(Duration::from_secs(60));
/// match err.action() {
///     TaskAction::Snooze(delay) => println!("runs again in {delay:?}, attempt given back"),
///     TaskAction::Fail => println!("failed for good"),
///     other => println!("counts as a failed attempt: {other:?}"),
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskAction {
    /// Count the attempt as failed and run again after the task's backoff, if attempts remain.
    Retry,
    /// Count the attempt as failed and run again after this delay, if attempts remain.
    RetryAfter(Duration),
    /// Mark the job `failed` now, whatever attempts remain.
    Fail,
    /// Run again after this delay without spending an attempt.
    Snooze(Duration),
}

impl TaskError {
    /// Retry with the task's backoff (the default for errors).
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Ping { url: String }
    /// # #[async_trait] impl Handler for Ping {
    /// # async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
    /// # let status = 503;
    /// if status >= 500 {
    ///     return Err(TaskError::retry(format_args!("{} answered {status}", self.url)));
    /// }
    /// # Ok(()) } }
    /// ```
    pub fn retry(message: impl fmt::Display) -> Self {
        Self::new(TaskAction::Retry, message)
    }

    /// Retry after `delay` instead of the task's backoff. The attempt still counts.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Ping { url: String }
    /// # #[async_trait] impl Handler for Ping {
    /// # async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
    /// # let retry_after_secs = Some(30);
    /// // The API answered 429 with a Retry-After header.
    /// if let Some(secs) = retry_after_secs {
    ///     return Err(TaskError::retry_after(Duration::from_secs(secs), "rate limited"));
    /// }
    /// # Ok(()) } }
    /// ```
    pub fn retry_after(delay: Duration, message: impl fmt::Display) -> Self {
        Self::new(TaskAction::RetryAfter(delay), message)
    }

    /// Fail the job now, with no further attempts. It is kept `failed`, with this message, for
    /// inspection and [`Client::retry`](crate::Client::retry).
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Charge { cents: i64 }
    /// # #[async_trait] impl Handler for Charge {
    /// # async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
    /// if self.cents <= 0 {
    ///     // No retry can fix a bad amount.
    ///     return Err(TaskError::fail(format_args!("invalid amount {}", self.cents)));
    /// }
    /// # Ok(()) } }
    /// ```
    pub fn fail(message: impl fmt::Display) -> Self {
        Self::new(TaskAction::Fail, message)
    }

    /// Run the job again after `delay`, without counting this attempt. No error is recorded.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Publish { post_id: i64 }
    /// # #[async_trait] impl Handler for Publish {
    /// # async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
    /// # let in_maintenance_window = false;
    /// if in_maintenance_window {
    ///     // Not a failure: come back in ten minutes, attempt given back.
    ///     return Err(TaskError::snooze(Duration::from_secs(600)));
    /// }
    /// # Ok(()) } }
    /// ```
    pub fn snooze(delay: Duration) -> Self {
        Self::new(
            TaskAction::Snooze(delay),
            format_args!("snoozed for {delay:?}"),
        )
    }

    fn new(action: TaskAction, message: impl fmt::Display) -> Self {
        Self {
            action,
            message: message.to_string(),
        }
    }

    pub(crate) fn with_action(self, action: TaskAction) -> Self {
        Self { action, ..self }
    }

    /// What pgq will do with the job; handler unit tests check it.
    ///
    /// ```
    /// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct Charge { cents: i64 }
    /// # #[async_trait] impl Handler for Charge {
    /// #     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
    /// #         Err(TaskError::fail(format_args!("invalid amount {}", self.cents)))
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use pgq_core::TaskAction;
    ///
    /// let err = pgq_testkit::TestContext::new().run(Charge { cents: -1 }).await.unwrap_err();
    /// assert_eq!(err.action(), TaskAction::Fail);
    /// # }
    /// ```
    pub fn action(&self) -> TaskAction {
        self.action
    }

    /// The error message, as given. The job records it with NUL characters replaced and cut to
    /// [`limits::MAX_ERROR_BYTES`].
    ///
    /// ```
    /// use pgq_core::TaskError;
    ///
    /// let err: TaskError = "12x".parse::<u32>().unwrap_err().into();
    /// assert_eq!(err.message(), "invalid digit found in string");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A message as stored: NUL characters replaced, and cut to
/// [`MAX_ERROR_BYTES`](limits::MAX_ERROR_BYTES) at a character boundary, saying how long it
/// was. A replaced NUL takes three bytes, so the length that decides is the replaced text's.
pub(crate) fn truncate_error(message: &str) -> String {
    let replaced = text::storable(message, usize::MAX);
    if replaced.len() <= limits::MAX_ERROR_BYTES {
        return replaced.into_owned();
    }
    let suffix = format!("… ({} bytes, truncated)", message.len());
    let kept = text::storable(&replaced, limits::MAX_ERROR_BYTES - suffix.len());
    format!("{kept}{suffix}")
}

/// Every `std::error::Error + Send + Sync`, `Box<dyn Error + Send + Sync>`, `anyhow::Error`
/// (which converts into that box), `String` and `&str` become a [`TaskError::retry`] whose
/// message is the error followed by its causes: `"loading config: No such file or directory"`.
///
/// ```
/// use pgq_core::{TaskAction, TaskError};
///
/// let boxed: Box<dyn std::error::Error + Send + Sync> = "smtp server busy".into();
/// let err = TaskError::from(boxed);
/// assert_eq!(err.action(), TaskAction::Retry);
/// assert_eq!(err.message(), "smtp server busy");
///
/// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "config.toml");
/// assert_eq!(TaskError::from(io).message(), "config.toml");
/// ```
impl<E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>> From<E> for TaskError {
    fn from(err: E) -> Self {
        let err: Box<dyn std::error::Error + Send + Sync + 'static> = err.into();
        // Keep the causes: "connect failed: connection refused".
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::retry(message)
    }
}

impl fmt::Debug for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskError")
            .field("action", &self.action)
            .field("message", &self.message)
            .finish()
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::truncate_error;
    use crate::limits;

    #[test]
    fn short_messages_are_kept_whole() {
        assert_eq!(truncate_error("boom"), "boom");
    }

    #[test]
    fn nul_characters_are_replaced_in_short_and_long_messages() {
        assert_eq!(truncate_error("a\0b"), "a\u{FFFD}b");
        let long = format!("\0{}", "x".repeat(5000));
        let cut = truncate_error(&long);
        assert!(!cut.contains('\0') && cut.len() <= limits::MAX_ERROR_BYTES);
        // Short as given, long once replaced: cut, and says so.
        let cut = truncate_error(&"\0".repeat(1000));
        assert!(cut.len() <= limits::MAX_ERROR_BYTES, "{}", cut.len());
        assert!(cut.ends_with("… (1000 bytes, truncated)"), "{cut}");
    }

    #[test]
    fn long_messages_are_cut_at_a_char_boundary() {
        let message = "é".repeat(5_000_000);
        let cut = truncate_error(&message);
        assert!(cut.len() <= limits::MAX_ERROR_BYTES, "{}", cut.len());
        assert!(cut.ends_with("… (10000000 bytes, truncated)"), "{cut}");
        assert!(cut.starts_with("éé"));
    }
}

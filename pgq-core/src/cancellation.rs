//! [`Cancellation`]: what cancelling a job did.

/// What [`Client::cancel`](crate::Client::cancel) did.
///
/// ```no_run
/// # use pgq_core::Cancellation;
/// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
/// if client.cancel(id).await? == Cancellation::Requested {
///     // Its handler is running: follow the job until the handler has returned.
///     let mut watch = client.watch(id).await?;
///     while let Some(job) = watch.next().await? {
///         println!("job {id} is {}", job.status);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancellation {
    /// The job was pending and is `cancelled` now.
    Cancelled,
    /// The job is held by a worker: its handler's `ctx.cancelled()` fires, and the job ends
    /// `cancelled` when the handler returns.
    Requested,
}

//! [`JobWatch`]: following one job's progress live, fed by NOTIFY with polling as a backstop.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgListener;

use crate::error::{Error, Result};
use crate::job::Job;
use crate::job_id::JobId;
use crate::limits;
use crate::store;
use crate::store::Channel;
use crate::store::Store;
use crate::store::run;

/// A live view of one job, from [`Client::watch`](crate::Client::watch): each call to
/// [`next`](Self::next) returns the job as soon as it changed, until it has finished.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
/// let mut watch = client.watch(id).await?;
/// while let Some(job) = watch.next().await? {
///     println!("{}% {}", job.progress, job.current_stage.as_deref().unwrap_or(""));
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct JobWatch {
    store: Store,
    id: JobId,
    /// `None` behind a transaction pooler: the watch polls.
    listener: Option<PgListener>,
    last_seen: Option<DateTime<Utc>>,
    finished: bool,
}

impl JobWatch {
    pub(crate) async fn start(store: Store, id: JobId, listen: bool) -> Result<Self> {
        let listener = if listen {
            let mut listener = store
                .bound(async { Ok(PgListener::connect_with(store.pool()).await?) })
                .await?;
            listener.listen(&store.channel(Channel::Progress)).await?;
            Some(listener)
        } else {
            None
        };
        Ok(Self {
            store,
            id,
            listener,
            last_seen: None,
            finished: false,
        })
    }

    /// The job after its next change (the first call returns it as it is), or `None` once a
    /// finished job has been returned. A job deleted meanwhile is an
    /// [`Error::JobNotFound`].
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client, id: pgq_core::JobId) -> pgq_core::Result<()> {
    /// let mut watch = client.watch(id).await?;
    /// let mut last = None;
    /// while let Some(job) = watch.next().await? {
    ///     last = Some(job.status); // the final call returns the finished job, then `None`
    /// }
    /// println!("job {id} ended {last:?}");
    /// # Ok(()) }
    /// ```
    pub async fn next(&mut self) -> Result<Option<Job>> {
        if self.finished {
            return Ok(None);
        }
        loop {
            let job = run!(self.store, |conn| store::job::find(
                &self.store,
                conn,
                self.id
            ))?
            .ok_or(Error::JobNotFound(self.id))?;
            if self.last_seen != Some(job.updated_at) {
                self.last_seen = Some(job.updated_at);
                self.finished = job.status.is_finished();
                return Ok(Some(job));
            }
            let id = self.id.to_string();
            let listener = &mut self.listener;
            let notified = async {
                let Some(listener) = listener else {
                    return std::future::pending().await;
                };
                loop {
                    match listener.recv().await {
                        Ok(n) if n.payload() == id => return,
                        Ok(_) => {}
                        // The listener reconnects on the next call; poll meanwhile.
                        Err(_) => return,
                    }
                }
            };
            let _ = tokio::time::timeout(limits::WATCH_POLL_INTERVAL, notified).await;
        }
    }
}

//! [`JobWatch`]: following one job's progress live, fed by NOTIFY with polling as a backstop.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::job::Job;
use crate::job_id::JobId;
use crate::limits;
use crate::store;
use crate::store::Store;
use crate::store::run;
use crate::watchers::{Changes, Watchers};

/// A live view of one job, from [`Client::watch`](crate::Client::watch): each call to
/// [`next`](Self::next) returns the job once it changed, until it has finished. A progress
/// report, stage or event wakes the watch at once (a notification); a change of status (started,
/// retried, finished) is found by the read each watch makes every half second, so the drains'
/// statements need not notify. All the watches of a client (and its clones) share one listening
/// connection (`pgq-watch`, made like the client's pool but not taken from it), open while any
/// of them lives. Behind a transaction pooler
/// ([`Client::behind_pooler`](crate::Client::behind_pooler)) watches only poll.
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
    /// What the client's shared listener hears; `None` behind a transaction pooler: the watch
    /// polls.
    changes: Option<Changes>,
    last_seen: Option<DateTime<Utc>>,
    finished: bool,
}

impl JobWatch {
    pub(crate) async fn start(
        store: Store,
        id: JobId,
        watchers: Option<&Arc<Watchers>>,
    ) -> Result<Self> {
        let changes = match watchers {
            Some(watchers) => Some(watchers.subscribe(&store).await?),
            None => None,
        };
        Ok(Self {
            store,
            id,
            changes,
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
            let changes = &mut self.changes;
            let notified = async {
                match changes {
                    Some(changes) => changes.changed(&id).await,
                    None => std::future::pending().await,
                }
            };
            let _ = tokio::time::timeout(limits::WATCH_POLL_INTERVAL, notified).await;
        }
    }
}

//! [`Watchers`]: one LISTEN connection per client for all of its [`JobWatch`](crate::JobWatch)es.
//!
//! One listener per watch would let a few dozen watches (a dashboard's open job pages, a service
//! streaming progress to its users) open as many connections. The first watch starts the
//! listener, the others share what it hears, and the last one to go stops it.
//!
//! The listener's connection is its own, made like the client pool's (`pgq-watch`), not one of
//! the pool's: a listener dropped after its connection went silent sends `UNLISTEN` before
//! letting go, which on a connection cut without a word waits for TCP to give up (minutes), and
//! a pool connection would be held from enqueues meanwhile. For the same reason, a connection
//! that stops answering is replaced by a new one of a new pool, and the watches read their jobs
//! again at once rather than at their next poll.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::store::{Channel, Store};
use crate::worker::connections;

/// Notifications a slow watch may fall behind by before it reads its job again instead.
const BACKLOG: usize = 1024;

/// How long the listener waits after losing its connection before listening again; watches
/// poll meanwhile.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// How long the listener waits for a notification before it checks that its connection answers.
const PROBE_AFTER: Duration = Duration::from_secs(5);

/// What the listener sends after it listened again: every watch reads its job, as notifications
/// may have gone unheard. (Job ids are never empty.)
const READ_AGAIN: &str = "";

/// The client's shared listener, running while any watch needs it.
#[derive(Debug, Default)]
pub(crate) struct Watchers {
    state: Mutex<State>,
    /// Held while a listener connects: watches that arrive meanwhile wait for it and share it,
    /// rather than each open a connection of its own.
    starting: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct State {
    watches: usize,
    listening: Option<Listening>,
}

#[derive(Debug)]
struct Listening {
    /// The payloads of the progress channel: ids of jobs that changed.
    heard: broadcast::Sender<Arc<str>>,
    task: JoinHandle<()>,
}

/// One watch's share of the listener: the ids of the jobs that changed since it subscribed.
#[derive(Debug)]
pub(crate) struct Changes {
    watchers: Arc<Watchers>,
    heard: broadcast::Receiver<Arc<str>>,
}

impl Watchers {
    /// Joins the listener, starting it if none runs.
    pub(crate) async fn subscribe(self: &Arc<Self>, store: &Store) -> Result<Changes> {
        if let Some(changes) = self.join() {
            return Ok(changes);
        }
        // Waited for within the time limit, as the connection itself is.
        let _starting = tokio::time::timeout(store.timeout(), self.starting.lock())
            .await
            .map_err(|_| Error::Unresponsive(store.timeout()))?;
        if let Some(changes) = self.join() {
            return Ok(changes);
        }
        let listener = listen(store).await?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let listening = state.listening.get_or_insert_with(|| {
            let (heard, _) = broadcast::channel(BACKLOG);
            let task = tokio::spawn(forward(store.clone(), listener, heard.clone()));
            Listening { heard, task }
        });
        let heard = listening.heard.subscribe();
        state.watches += 1;
        Ok(Changes {
            watchers: self.clone(),
            heard,
        })
    }

    fn join(self: &Arc<Self>) -> Option<Changes> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let heard = state.listening.as_ref()?.heard.subscribe();
        state.watches += 1;
        Some(Changes {
            watchers: self.clone(),
            heard,
        })
    }
}

impl Changes {
    /// Returns once `id` may have changed: it was named, the watch fell behind, or the listener
    /// listened again after losing its connection. Never returns while nothing is heard; callers
    /// bound it with their poll.
    pub(crate) async fn changed(&mut self, id: &str) {
        loop {
            match self.heard.recv().await {
                Ok(changed) if &*changed == id || &*changed == READ_AGAIN => return,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        let mut state = self
            .watchers
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        state.watches -= 1;
        if state.watches == 0
            && let Some(listening) = state.listening.take()
        {
            // Dropping the listener closes its connection.
            listening.task.abort();
        }
    }
}

/// A listener on a connection of its own, listening to the progress channel: connecting and
/// its LISTEN within the statement time limit, as every statement is.
async fn listen(store: &Store) -> Result<PgListener> {
    store
        .bound(async {
            let pool = connections::listen_pool(store.pool(), "pgq-watch");
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.ignore_pool_close_event(true);
            listener.listen(&store.channel(Channel::Progress)).await?;
            Ok(listener)
        })
        .await
}

/// Hands on every notification of the progress channel, until the last watch goes. A connection
/// that fails, or is silent for [`PROBE_AFTER`] and then does not answer a query in time, is
/// replaced.
async fn forward(store: Store, mut listener: PgListener, heard: broadcast::Sender<Arc<str>>) {
    loop {
        let received = tokio::select! {
            received = listener.try_recv() => received.map_err(Error::from),
            _ = tokio::time::sleep(PROBE_AFTER) => {
                let probe = store.bound(async {
                    sqlx::query("SELECT 1").execute(&mut listener).await?;
                    Ok(())
                });
                match probe.await {
                    Ok(()) => continue,
                    Err(err) => Err(err),
                }
            }
        };
        match received {
            Ok(Some(notification)) => {
                let _ = heard.send(Arc::from(notification.payload()));
                continue;
            }
            Ok(None) => {}
            Err(err) => tracing::debug!(error = %err, "job watch listener lost its connection"),
        }
        // Watches poll meanwhile.
        drop(listener);
        listener = loop {
            tokio::time::sleep(RECONNECT_PAUSE).await;
            match listen(&store).await {
                Ok(listener) => break listener,
                Err(err) => tracing::debug!(error = %err, "job watch listener cannot listen"),
            }
        };
        let _ = heard.send(Arc::from(READ_AGAIN));
    }
}

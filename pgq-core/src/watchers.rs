//! [`Watchers`]: one LISTEN connection per client for all of its [`JobWatch`](crate::JobWatch)es.
//!
//! A listener holds a connection of the client's pool for as long as it listens. One per watch
//! let a few dozen watches (a dashboard's open job pages, a service streaming progress to its
//! users) take every connection of the pool, and enqueues waited for them. The first watch
//! starts the listener, the others share what it hears, and the last one to go stops it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::store::{Channel, Store};

/// Notifications a slow watch may fall behind by before it reads its job again instead.
const BACKLOG: usize = 1024;

/// How long the listener waits after losing its connection before listening again; watches
/// poll meanwhile.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The client's shared listener, running while any watch needs it.
#[derive(Debug, Default)]
pub(crate) struct Watchers {
    state: Mutex<State>,
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
    /// Joins the listener, starting it (on a connection of `store`'s pool) if none runs.
    pub(crate) async fn subscribe(self: &Arc<Self>, store: &Store) -> Result<Changes> {
        if let Some(changes) = self.join() {
            return Ok(changes);
        }
        // Connecting and its LISTEN, within the statement time limit as every statement is.
        let listener = store
            .bound(async {
                let mut listener = PgListener::connect_with(store.pool()).await?;
                listener.listen(&store.channel(Channel::Progress)).await?;
                Ok(listener)
            })
            .await?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // Another watch may have started one meanwhile: then this listener goes.
        let listening = state.listening.get_or_insert_with(|| {
            let (heard, _) = broadcast::channel(BACKLOG);
            let task = tokio::spawn(forward(listener, heard.clone()));
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
    /// stopped. Never returns while nothing is heard; callers bound it with their poll.
    pub(crate) async fn changed(&mut self, id: &str) {
        loop {
            match self.heard.recv().await {
                Ok(changed) if &*changed == id => return,
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
            // Dropping the listener gives its connection back to the pool.
            listening.task.abort();
        }
    }
}

/// Hands on every notification of the progress channel, until the last watch goes.
async fn forward(mut listener: PgListener, heard: broadcast::Sender<Arc<str>>) {
    loop {
        match listener.recv().await {
            Ok(notification) => {
                let _ = heard.send(Arc::from(notification.payload()));
            }
            Err(err) => {
                // The next `recv` connects and listens again.
                tracing::debug!(error = %crate::error::Error::from(err), "job watch listener lost its connection");
                tokio::time::sleep(RECONNECT_PAUSE).await;
            }
        }
    }
}

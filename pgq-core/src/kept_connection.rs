//! One pool connection that enqueues keep between calls.
//!
//! sqlx gives a connection back to its pool from a spawned task that first pings the server: a
//! round trip and two thread wake-ups after every statement (docs/performance.md has the
//! cost). An enqueue that finds the kept connection free runs on it and leaves it
//! there for the next one; concurrent enqueues take connections from the pool as before. The
//! kept connection goes back to the pool after a failed or cancelled enqueue, when the pool has
//! no other connection to give, after [`IDLE`] without use, and when the pool closes.

use std::sync::Arc;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::store::Store;

/// How long the connection stays kept without an enqueue.
const IDLE: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
pub(crate) struct KeptConnection {
    slot: Arc<Mutex<Slot>>,
}

#[derive(Debug, Default)]
pub(crate) struct Slot {
    connection: Option<PoolConnection<Postgres>>,
    last_used: Option<Instant>,
    /// Whether a task is waiting to give the connection back once idle.
    releasing: bool,
}

impl Drop for Slot {
    /// Outside a Tokio runtime (the last `Client` dropped after its runtime ended), a pool
    /// connection cannot go back to its pool, nor leave it, without a task sqlx spawns and would
    /// panic for: it is forgotten instead, its socket left to the process's end (which such a
    /// drop usually is), the pool's count to the pool's own end.
    fn drop(&mut self) {
        if tokio::runtime::Handle::try_current().is_err()
            && let Some(connection) = self.connection.take()
        {
            std::mem::forget(connection);
        }
    }
}

/// A connection for one enqueue: the kept one, or one from the pool while another enqueue
/// uses the kept one.
#[derive(Debug)]
pub(crate) enum EnqueueConnection {
    Kept(Checkout),
    Pooled(PoolConnection<Postgres>),
}

/// The kept connection, checked out to one enqueue. Unless kept again, it goes back to the
/// pool when dropped.
#[derive(Debug)]
pub(crate) struct Checkout {
    slot: OwnedMutexGuard<Slot>,
    keep: bool,
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if !self.keep {
            self.slot.connection = None;
        }
    }
}

impl KeptConnection {
    /// The kept connection if it is free (taken from the pool if none is kept yet), else a
    /// connection from the pool.
    pub(crate) async fn acquire(&self, store: &Store) -> Result<EnqueueConnection> {
        let pool = store.pool();
        let Ok(mut slot) = self.slot.clone().try_lock_owned() else {
            let connection = store.bound(async { Ok(pool.acquire().await?) }).await?;
            return Ok(EnqueueConnection::Pooled(connection));
        };
        if slot.connection.is_none() {
            slot.connection = Some(store.bound(async { Ok(pool.acquire().await?) }).await?);
        }
        Ok(EnqueueConnection::Kept(Checkout { slot, keep: false }))
    }
}

impl EnqueueConnection {
    /// Keeps the connection for the next enqueue, if the pool can spare it. Dropped without
    /// this call, the connection goes back to the pool, which checks it: a failed or cancelled
    /// statement may have left it mid-message.
    pub(crate) fn keep(self, pool: &PgPool) {
        let EnqueueConnection::Kept(mut checkout) = self else {
            return;
        };
        let spare = pool.num_idle() > 0 || pool.size() < pool.options().get_max_connections();
        if !spare || pool.is_closed() {
            return;
        }
        checkout.keep = true;
        let slot = &mut checkout.slot;
        slot.last_used = Some(Instant::now());
        if !slot.releasing {
            slot.releasing = true;
            let slot = Arc::clone(OwnedMutexGuard::mutex(slot));
            tokio::spawn(release_when_idle(slot, pool.clone()));
        }
    }
}

impl EnqueueConnection {
    /// After a statement the database did not answer in time, or one a migration made stale,
    /// closes the connection rather than returning it to the pool ([`Error::spoils_connection`]).
    pub(crate) fn discard_if_spoiled(&mut self, err: &Error) {
        if !err.spoils_connection() {
            return;
        }
        let connection = match self {
            EnqueueConnection::Kept(checkout) => checkout.slot.connection.as_mut(),
            EnqueueConnection::Pooled(connection) => Some(connection),
        };
        if let Some(connection) = connection {
            connection.close_on_drop();
        }
    }
}

impl std::ops::Deref for EnqueueConnection {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            EnqueueConnection::Kept(checkout) => {
                checkout.slot.connection.as_deref().expect("acquired")
            }
            EnqueueConnection::Pooled(connection) => connection,
        }
    }
}

impl std::ops::DerefMut for EnqueueConnection {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            EnqueueConnection::Kept(checkout) => {
                checkout.slot.connection.as_deref_mut().expect("acquired")
            }
            EnqueueConnection::Pooled(connection) => connection,
        }
    }
}

async fn release_when_idle(slot: Arc<Mutex<Slot>>, pool: PgPool) {
    let mut idle_from = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(idle_from + IDLE) => {}
            _ = pool.close_event() => {}
        }
        let mut slot = slot.lock().await;
        match slot.last_used {
            Some(last_used) if last_used + IDLE > Instant::now() && !pool.is_closed() => {
                idle_from = last_used;
            }
            _ => {
                slot.connection = None;
                slot.releasing = false;
                return;
            }
        }
    }
}

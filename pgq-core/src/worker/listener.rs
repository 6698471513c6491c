//! The worker's one LISTEN connection. An insert notification wakes the queue named in its
//! payload; a cancel notification fires the named job's `ctx.cancelled()` if it runs here; when the connection drops it reconnects, LISTENs again, and only then wakes every
//! fetcher to claim what arrived meanwhile. Polling covers the gap.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};

use crate::store::INSERT_CHANNEL;
use crate::store::control::CANCEL_CHANNEL;
use crate::worker::{Shared, WorkerEvent};

/// The `application_name` of listener connections, to find them in `pg_stat_activity`.
pub(crate) const LISTENER_APPLICATION_NAME: &str = "pgq-listener";

const RECONNECT_MIN: Duration = Duration::from_millis(50);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

pub(crate) async fn listen(shared: Arc<Shared>) {
    let mut delay = RECONNECT_MIN;
    loop {
        match connect(&shared).await {
            Ok(mut listener) => {
                delay = RECONNECT_MIN;
                shared.emit(WorkerEvent::ListenerConnected);
                shared.wake_all();
                loop {
                    match listener.try_recv().await {
                        Ok(Some(notification)) if notification.channel() == CANCEL_CHANNEL => {
                            let id = notification.payload().parse::<i64>().ok();
                            if let Some(state) = id.and_then(|id| shared.running_state(id.into())) {
                                state.request_cancel();
                            }
                        }
                        Ok(Some(notification)) => shared.wake(notification.payload()),
                        Ok(None) => break,
                        Err(err) => {
                            tracing::warn!(error = %err, "listener connection failed");
                            break;
                        }
                    }
                }
                shared.emit(WorkerEvent::ListenerLost);
            }
            Err(err) => {
                tracing::warn!(error = %err, retry_in = ?delay, "cannot LISTEN; polling meanwhile");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RECONNECT_MAX);
            }
        }
    }
}

async fn connect(shared: &Shared) -> sqlx::Result<PgListener> {
    let options = shared
        .pool
        .connect_options()
        .as_ref()
        .clone()
        .application_name(LISTENER_APPLICATION_NAME);
    // A pool of one, only to hand PgListener its connect options; the connection is its own.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options);
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.ignore_pool_close_event(true);
    listener
        .listen_all([INSERT_CHANNEL, CANCEL_CHANNEL])
        .await?;
    Ok(listener)
}

//! The worker's one LISTEN connection. An insert notification wakes the queue named in its
//! payload; a cancel notification fires the named job's `ctx.cancelled()` if it runs here; a
//! queue notification (paused, resumed, a limit set) has the settings reader read them again. When
//! the connection drops it reconnects, LISTENs again, and only then wakes every dispatcher to
//! claim what arrived meanwhile. Polling covers the gap. After each attempt to LISTEN, at
//! start too, the queues claim nothing until their settings are read again: a pause made while
//! nobody listened is never missed by a claim that a later notification wakes.
//!
//! A connection that goes silent without a reset (a dropped route, a failover) would leave the
//! listener waiting forever: after [`PROBE_AFTER`] without a message it sends a query, and a
//! connection that does not answer within the statement timeout is replaced.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::Notify;

use crate::error::Error;
use crate::store::{Channel, Store};
use crate::worker::connections;
use crate::worker::event::WorkerEvent;
use crate::worker::held::HeldJobs;
use crate::worker::report::Reporter;
use crate::worker::slots::QueueSlots;

const RECONNECT_MIN: Duration = Duration::from_millis(50);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// A connection lost sooner than this after it was made counts as a failed attempt: the next
/// one waits, and longer each time, rather than churning against a server or proxy that drops
/// it at once (each attempt stalls the queues' claims until their settings are read again).
const STEADY_AFTER: Duration = PROBE_AFTER;

/// How long the listener waits for a message before it checks that its connection answers.
const PROBE_AFTER: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub(crate) struct Listener {
    /// The client's pool, after which each connection attempt makes a pool of one connection
    /// of its own (`connections::listen_pool`): a listener dropped after its connection stopped
    /// answering sends `UNLISTEN` on it before giving it back, which on a connection cut without
    /// a word waits for TCP to give up (minutes), holding its pool's one connection meanwhile.
    pub(crate) client_pool: PgPool,
    /// For the channel names of the client's schema.
    pub(crate) store: Store,
    pub(crate) queues: Vec<Arc<QueueSlots>>,
    pub(crate) held: Arc<HeldJobs>,
    pub(crate) reporter: Reporter,
    /// How long a probe may take before the connection counts as dead.
    pub(crate) probe_timeout: Duration,
    /// Fired when a queue's settings changed, and after a reconnect: the settings reader reads.
    pub(crate) pause_changed: Arc<Notify>,
}

impl Listener {
    fn wake(&self, queue: &str) {
        if let Some(slots) = self.queues.iter().find(|q| &*q.name == queue) {
            slots.wake.notify_one();
        }
    }

    /// A queue's settings changed (paused, resumed, limited): its dispatcher claims nothing
    /// until they are read again, which this asks for.
    fn settings_changed(&self, queue: &str) {
        if let Some(slots) = self.queues.iter().find(|q| &*q.name == queue) {
            slots.settings_changed();
        }
        self.pause_changed.notify_one();
    }

    /// An attempt to LISTEN ended, connected or not: each queue claims again once its settings
    /// are read anew, which this asks for.
    fn attempted(&self) {
        for slots in &self.queues {
            slots.listener_attempted();
        }
        self.pause_changed.notify_one();
    }

    fn wake_all(&self) {
        for slots in &self.queues {
            slots.wake.notify_one();
        }
    }

    pub(crate) async fn listen(self) {
        let cancel_channel = self.store.channel(Channel::Cancel);
        let queue_channel = self.store.channel(Channel::Queue);
        let mut backoff = Backoff::default();
        let mut lost = false;
        loop {
            let connected = tokio::time::timeout(self.probe_timeout, self.connect()).await;
            match connected.unwrap_or_else(|_| Err(sqlx::Error::PoolTimedOut)) {
                Ok(mut listener) => {
                    if backoff.failing() || lost {
                        tracing::info!("listener reconnected; wake-ups are immediate again");
                    }
                    let connected_at = Instant::now();
                    // A pause committed before the LISTEN went unheard: no queue claims
                    // until a read of the settings that started after it.
                    self.attempted();
                    self.reporter.emit(|| WorkerEvent::ListenerConnected);
                    self.wake_all();
                    loop {
                        let received = tokio::select! {
                            received = listener.try_recv() => received,
                            _ = tokio::time::sleep(PROBE_AFTER) => {
                                if self.probe(&mut listener).await {
                                    continue;
                                }
                                tracing::warn!(timeout = ?self.probe_timeout, "listener connection does not answer; reconnecting");
                                break;
                            }
                        };
                        match received {
                            Ok(Some(notification)) if notification.channel() == cancel_channel => {
                                if let Ok(id) = notification.payload().parse::<i64>() {
                                    self.held.request_cancel(id.into());
                                }
                            }
                            Ok(Some(notification)) if notification.channel() == queue_channel => {
                                self.settings_changed(notification.payload());
                            }
                            Ok(Some(notification)) => self.wake(notification.payload()),
                            Ok(None) => break,
                            Err(err) => {
                                tracing::warn!(error = %Error::from(err), "listener connection failed");
                                break;
                            }
                        }
                    }
                    tracing::warn!("listener lost; polling until it reconnects");
                    lost = true;
                    self.reporter.emit(|| WorkerEvent::ListenerLost);
                    if let Some(wait) = backoff.lost(connected_at.elapsed()) {
                        tokio::time::sleep(wait).await;
                    }
                }
                Err(err) => {
                    let wait = backoff.failed();
                    tracing::warn!(error = %Error::from(err), retry_in = ?wait, "cannot LISTEN; polling meanwhile");
                    // Polling relies on the periodic reads alone, which may start now.
                    self.attempted();
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Whether the connection answers a query in time.
    async fn probe(&self, listener: &mut PgListener) -> bool {
        let probe = sqlx::query("SELECT 1").execute(&mut *listener);
        matches!(
            tokio::time::timeout(self.probe_timeout, probe).await,
            Ok(Ok(_))
        )
    }

    async fn connect(&self) -> sqlx::Result<PgListener> {
        let mut listener =
            PgListener::connect_with(&connections::listen_pool(&self.client_pool, "pgq-listen"))
                .await?;
        listener.ignore_pool_close_event(true);
        let channels =
            [Channel::Insert, Channel::Cancel, Channel::Queue].map(|c| self.store.channel(c));
        listener
            .listen_all(channels.iter().map(String::as_str))
            .await?;
        Ok(listener)
    }
}

/// The wait before the next attempt to connect: it doubles with each failed attempt, up to
/// [`RECONNECT_MAX`], and starts over once a connection has lasted [`STEADY_AFTER`].
#[derive(Debug)]
struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: RECONNECT_MIN,
        }
    }
}

impl Backoff {
    /// Whether the last attempts failed.
    fn failing(&self) -> bool {
        self.next > RECONNECT_MIN
    }

    /// An attempt failed: how long to wait before the next.
    fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(RECONNECT_MAX);
        wait
    }

    /// A connection was lost after `lasted`: reconnect at once after a steady one, else wait as
    /// after a failed attempt.
    fn lost(&mut self, lasted: Duration) -> Option<Duration> {
        if lasted >= STEADY_AFTER {
            self.next = RECONNECT_MIN;
            None
        } else {
            Some(self.failed())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Backoff, RECONNECT_MAX, RECONNECT_MIN, STEADY_AFTER};

    #[test]
    fn connections_dropped_at_once_back_off_and_a_steady_one_resets() {
        let mut backoff = Backoff::default();
        let short = Duration::from_millis(10);
        let waits: Vec<Duration> = (0..10).map(|_| backoff.lost(short).unwrap()).collect();
        assert_eq!(waits[0], RECONNECT_MIN);
        assert_eq!(waits[1], RECONNECT_MIN * 2);
        assert_eq!(waits[9], RECONNECT_MAX);
        assert!(backoff.failing());
        assert_eq!(
            backoff.lost(STEADY_AFTER),
            None,
            "a steady connection reconnects at once"
        );
        assert!(!backoff.failing());
        assert_eq!(backoff.failed(), RECONNECT_MIN);
        assert_eq!(backoff.failed(), RECONNECT_MIN * 2);
    }
}

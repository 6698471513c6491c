//! How long this worker's own heartbeats have all landed, which bounds whom it may judge dead.
//! A registration that expired says its worker's heartbeats stopped landing, but after an
//! outage of the database (a restart, a failover, a cut connection) every registration has
//! expired, the live workers' too, until their next heartbeats land; and a worker that just
//! started cannot tell either. A worker whose heartbeats have landed, without a miss, for at
//! least another worker's registration life (that worker's heartbeat interval times four) knows
//! that the other, if it has not renewed its registration meanwhile, is dead.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(crate) struct HeartbeatStreak {
    /// Since when every heartbeat landed; `None` before the first, or after a miss.
    since: Mutex<Option<Instant>>,
}

impl HeartbeatStreak {
    pub(crate) fn landed(&self) {
        if let Ok(mut since) = self.since.lock() {
            since.get_or_insert_with(Instant::now);
        }
    }

    pub(crate) fn missed(&self) {
        if let Ok(mut since) = self.since.lock() {
            *since = None;
        }
    }

    /// How long every heartbeat has landed; `None` when the last one did not.
    pub(crate) fn lasted(&self) -> Option<Duration> {
        self.since
            .lock()
            .ok()
            .and_then(|since| *since)
            .map(|since| since.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::HeartbeatStreak;

    #[test]
    fn a_streak_starts_with_a_landed_heartbeat_and_ends_with_a_miss() {
        let streak = HeartbeatStreak::default();
        assert_eq!(streak.lasted(), None, "no heartbeat yet");
        streak.landed();
        let first = streak.lasted().expect("a streak");
        streak.landed();
        assert!(streak.lasted().expect("the same streak") >= first);
        streak.missed();
        assert_eq!(streak.lasted(), None);
        streak.landed();
        assert!(streak.lasted().is_some());
    }
}
